"""Session pages: compiling a session's observations into its page, and merging the
server's rendering into a page a person edited (invariant 8: people's edits win; a
conflict keeps both, the server's version beside the page as ``.server-copy.md``).
:class:`SessionPages` runs on the writer thread; :class:`~wiki_memory.core.memory.Memory`
builds it and hands it what it uses (:class:`Host`)."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from wiki_memory.capture.observation import Observation
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.config import Settings
from wiki_memory.core.lifecycle import (
    END_KINDS,
    Backoff,
    EndMemo,
    compile_extras,
    continues_page,
    end_time,
    find_repeats,
    has_content,
    unrendered_count,
)
from wiki_memory.core.pagehost import PageWriteHost
from wiki_memory.core.sessionchange import SessionChange, page_stem
from wiki_memory.core.sessionpartwrite import PartWriter
from wiki_memory.core.text import replace_section
from wiki_memory.core.topics import compile_guarded as compile_topics
from wiki_memory.core.writer import Author, Writer, WriteResult
from wiki_memory.plainfile import atomic_write, page_hash, read_plain
from wiki_memory.wiki import compiler
from wiki_memory.wiki.git import GitStore, author_email_for
from wiki_memory.wiki.personal import page_owner
from wiki_memory.wiki.timelinememo import MemoStore

log = logging.getLogger("wiki_memory.core")


__all__ = [
    "END_KINDS",
    "Host",
    "SessionPages",
    "SessionChange",
    "compiler_bytes",
    "end_time",
    "unrendered_count",
    "conflict_copy_path",
    "replace_section",
]


class Host(PageWriteHost, Protocol):
    """What :class:`SessionPages` uses of the Memory that owns it."""

    settings: Settings
    spool: Spool
    git: GitStore
    owner: str
    writer: Writer
    on_session_end: list[Callable[[Any, SessionInfo, list[Observation], str], None]]

    def _git_commit(self, paths: list[str], name: str, email: str, message: str) -> str | None: ...

    def server_wrote(self, path: str, data: bytes) -> bool: ...


class SessionPages:
    """Compiles session pages for ``host`` and remembers the server's last renderings
    (the bases of the three-way merge with a person's edits)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        #: session page path -> the server's last pure renderings (newest first)
        self._renders: OrderedDict[str, list[bytes]] = OrderedDict()
        #: session page path -> (session key, state) while its compile job runs
        self._render_ctx: dict[str, tuple[str, dict[str, Any]]] = {}
        #: page path -> the server's version that could not be merged (a conflict copy)
        self._conflicts: dict[str, bytes] = {}
        #: failed compiles, tried again after a doubling wait
        self.backoff = Backoff(spool=host.spool)
        self.memos = MemoStore()  # what each session's last compile kept
        self.ends = EndMemo()  # whether each session's events ended it, so far
        self.parts = PartWriter(host)  # a long session's later parts

    def compile_guarded(self, key: str, end: bool) -> WriteResult:
        """:meth:`compile_job`, and when it fails (a write refused, a bug), a retry after
        a back-off (:class:`~wiki_memory.core.lifecycle.Backoff`) instead of an error: the
        events stay in the spool and the next event of the session tries at once."""
        try:
            res = self.compile_job(key, end)
        except Exception:
            n, wait = self.backoff.failed(
                key, lambda: self.host.writer.submit(lambda: self.compile_guarded(key, end))
            )
            log.exception(
                "compiling session %s failed (%d in a row); next try in %.0f s", key, n, wait
            )
            return WriteResult()
        self.backoff.succeeded(key)
        return res

    def compile_job(self, key: str, end: bool, remerge: bool = False) -> WriteResult:
        """Write a session's page. ``remerge``: no new observations, but a person saved the
        page; render exactly what the server last rendered and merge it into their version
        again (their save may have been based on an older version of the page)."""
        info = self.host.spool.sessions.get(key)
        if info is None:
            return WriteResult()
        obs = self.host.spool.observations(key)
        state = dict(info.state)
        now = time.time()
        by_events = self.ends.ended(key, obs)  # walks the new events only
        ended_now = end or by_events
        already = state.get("compiled_count") == len(obs) and (
            state.get("status") == "ended" or not ended_now
        )
        renders = list(state.get("renders") or [])
        if remerge:
            if not renders or not state.get("path"):
                return WriteResult()
            last = renders[0]
            obs = obs[: int(last["count"])]
            status, ended_at, now = last["status"], last.get("ended"), float(last["now"])
        elif already and state.get("path"):
            return WriteResult(value=state.get("path"))
        else:
            status = "ended" if ended_now else "active"
            ended_at = None
            if by_events:
                ended_at = end_time(obs, now)
            elif ended_now:
                ended_at = state.get("ended_at") or end_time(obs, now)
            if not ended_now:
                # resumed (a SessionStart after its end, or events after an idle end):
                # active again, the same page continued
                ended_at = None
                state.pop("ended_at", None)
            if not state.get("path") and not has_content(obs):
                # only started (opened and quit, or a SessionStart of a brief alone): no
                # page and no commit; the spool keeps its events until it has some
                state.update(compiled_count=len(obs), status=status, empty=True)
                if ended_at:
                    state["ended_at"] = ended_at
                self.host.spool.write_state(key, state)
                return WriteResult()
            state.pop("empty", None)
            if "continues" not in state:
                state["continues"] = continues_page(self.host.spool, info, obs)
            find_repeats(self.host.spool, info, obs, state)
        prev_count = int(info.state.get("compiled_count") or 0)
        had_page = bool(info.state.get("path"))
        path = state.get("path")
        if path and not (self.host.wiki_dir / path).exists():
            path = self._find_session_page(info) or None
        comp = compiler.compile_session(
            info,
            obs,
            status=status,
            ended=ended_at,
            now=now,
            created=state.get("created"),
            path=path,
            excerpt_bytes=self.host.settings.tool_output_excerpt_bytes,
            previous=state.get("continues"),
            **compile_extras(state),
            memo=self.memos.get(key),
            part_events=self.host.settings.session_part_events,
        )
        self.memos.put(key, comp.memo)
        if self.parts.page_kept(comp, (status, ended_at), remerge):
            return self._parts_only(key, info, state, comp, obs[prev_count:])
        full = self.host.wiki_dir / comp.path
        self._render_ctx[comp.path] = (key, state)
        fresh = compiler_bytes(comp)
        render = {
            "count": len(obs),
            "status": status,
            "ended": ended_at,
            "now": now,
            "sha256": page_hash(fresh),
        }

        def merged(cur: bytes | None) -> bytes:
            self._commit_person_first(comp.path, cur)
            new = self._merge_page(comp, current=cur, fresh=fresh)
            if new != cur:
                # Before the page changes on disk, the spool state names the bytes (and
                # the rendering) about to be written: after a kill -9 between this write
                # and the state update, the next start knows the page is the server's
                # own, not a hand edit, and has its base for later merges.
                pending = dict(state, path=comp.path, pending_sha256=page_hash(new))
                pending["created"] = state.get("created") or now
                if not remerge:
                    pending["renders"] = [render, *renders[:2]]
                self.host.spool.write_state(key, pending)
            return new

        try:
            current, written = self.host._cas_write(comp.path, full, merged)
        finally:
            self._render_ctx.pop(comp.path, None)
        self._remember_render(comp.path, fresh)
        paths = [comp.path, *self.parts.write(comp.path, comp.parts)]
        self.parts.page_written(comp, (status, ended_at))
        if written is not None:
            self.host.server_hashes[comp.path] = page_hash(written)
            self.host.index.upsert_page(comp.path, written)
        copy = self._write_conflict_copy(comp.path)
        if copy:
            paths.append(copy)
        if remerge:
            if written is None:
                return WriteResult()
            return WriteResult(
                paths=paths,
                author=Author(info.user, author_email_for(info.user)),
                message=f"Merge session {page_stem(comp.path)} into a hand edit",
                value=comp.path,
            )
        self.host.index.delete_spool_session(key)
        state.update(
            path=comp.path,
            compiled_count=len(obs),
            status=status,
            created=state.get("created") or now,
        )
        if ended_at:
            state["ended_at"] = ended_at
        # events the compiler could not render: placeholders on the page, counted by
        # doctor and status, and their spool kept until they compile
        state["unrendered"] = [i for i in comp.unrendered if i not in state.get("discarded", [])]
        if comp.unrendered:
            log.warning(
                "%s: %d event(s) could not be rendered; placeholders name their spool records",
                comp.path,
                len(comp.unrendered),
            )
        state["renders"] = [render, *renders[:2]]
        if written is not None:
            state["page_sha256"] = page_hash(written)
        state.pop("pending_sha256", None)
        just_ended = status == "ended" and info.state.get("status") != "ended"
        self.host.spool.write_state(key, state)
        if just_ended:
            for hook in self.host.on_session_end:
                try:
                    hook(self.host, info, obs, comp.path)
                except Exception:
                    log.exception("a session-end hook failed for %s", key)
            paths += compile_topics(self.host, info.project, self._commit_person_first)
        author = Author(info.user, author_email_for(info.user))
        new = obs[prev_count:] if had_page else obs
        change = SessionChange(
            key=comp.path,
            title=comp.metadata["title"],
            harness=info.harness,
            added=not had_page,
            turns=sum(1 for o in new if o.kind in ("prompt", "turn")),
            events=len(new),
            ended=just_ended,
        )
        return WriteResult(
            paths=paths, author=author, message=change.message(), value=comp.path, change=change
        )

    def _parts_only(
        self, key: str, info: SessionInfo, state: dict[str, Any], comp: Any, new: list[Any]
    ) -> WriteResult:
        """A compile of a session with parts whose page would change in its summary's
        running lines alone: only its parts are written (docs/sessions.md, "Parts")."""
        paths = self.parts.write(comp.path, comp.parts)
        self.host.index.delete_spool_session(key)
        state["compiled_count"] = int(state.get("compiled_count") or 0) + len(new)
        state["unrendered"] = [i for i in comp.unrendered if i not in state.get("discarded", [])]
        self.host.spool.write_state(key, state)
        turns = sum(1 for o in new if o.kind in ("prompt", "turn"))
        change = SessionChange(comp.path, comp.metadata["title"], info.harness, False, turns,
                               len(new), False)  # fmt: skip
        author = Author(info.user, author_email_for(info.user))
        return WriteResult(
            paths=paths, author=author, message=change.message(), value=comp.path, change=change
        )

    def _find_session_page(self, info: SessionInfo) -> str | None:
        d = self.host.wiki_dir / compiler.sessions_folder(info.project, info.user)
        for p in d.glob(f"*-{info.key[:8]}.md"):
            return p.relative_to(self.host.wiki_dir).as_posix()
        return None

    def _merge_page(
        self, comp: compiler.Compiled, *, current: Any = ..., fresh: bytes | None = None
    ) -> bytes:
        """The bytes to write for a compiled page, keeping a person's edits (invariant 8).

        ``current`` is the page's bytes on disk (None: absent; left out: read now);
        ``fresh`` the compiled page's bytes when the caller has them (rendered once per
        compile: a long session's page is megabytes). When
        the page is absent, or is exactly what the server last rendered, the fresh
        rendering is written. Otherwise a person changed it: the server's change since its
        last rendering (the *base*) is merged into their version line by line
        (:func:`wiki_memory.wiki.merge.merge3`), so their new keys, paragraphs and edits
        stay byte for byte. Of the server's last three renderings, the base is the one
        closest to the person's version (their editor may have saved over a newer server
        write). Where both changed the same lines, the person's lines are kept and the
        server's whole rendering is written beside the page as ``<name>.server-copy.md``
        (see :meth:`_write_conflict_copy`). When no earlier rendering is known, only the
        owned frontmatter keys and sections (``## Summary``, ``## Timeline``) are replaced.
        """
        from wiki_memory.wiki.merge import changed_lines, merge3

        if fresh is None:
            fresh = compiler_bytes(comp)
        if current is ...:
            current = read_plain(self.host.wiki_dir / comp.path)
        if current is None or current == fresh:
            return fresh
        bases = self._previous_renders(comp.path)
        if bases and current == bases[0]:
            return fresh
        if not bases:
            return self._merge_owned_parts(comp, current)
        bom, text, eol = _split_text(current)
        fresh_t = _with_eol(fresh.decode("utf-8", "surrogateescape"), eol)
        cands = [_with_eol(b.decode("utf-8", "surrogateescape"), eol) for b in bases]
        base = min(cands, key=lambda c: changed_lines(c, text))  # first (newest) on ties
        res = merge3(base, fresh_t, text)
        merged = bom + res.text.encode("utf-8", "surrogateescape")
        if _frontmatter_broken(merged) and not _frontmatter_broken(current):
            return self._merge_owned_parts(comp, current)
        if res.conflicts:
            self._conflicts[comp.path] = fresh
            log.warning(
                "%s: a hand edit and the server changed the same lines; the person's "
                "lines were kept, the server's version is written beside the page",
                comp.path,
            )
        return merged

    def _merge_owned_parts(self, comp: compiler.Compiled, current: bytes) -> bytes:
        """Without a known base: splice the owned keys and sections into ``current``."""
        from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

        try:
            merged = set_keys(current, comp.metadata)
        except FrontmatterError:
            merged = current
        text = merged.decode("utf-8", errors="surrogateescape")
        for name, content in (("Summary", comp.summary), ("Timeline", comp.timeline)):
            text = replace_section(text, name, content)
        return text.encode("utf-8", errors="surrogateescape")

    def _remember_render(self, path: str, fresh: bytes) -> None:
        old = self._renders.pop(path, [])
        self._renders[path] = [fresh, *[r for r in old if r != fresh][:2]]
        while len(self._renders) > 256:
            self._renders.popitem(last=False)

    def _previous_renders(self, path: str) -> list[bytes]:
        """The server's last renderings of a session page, newest first: from memory, else
        rendered again from the parameters kept in the session's spool state (checked
        against the sha256 recorded then)."""
        if path in self._renders:
            return list(self._renders[path])
        ctx = self._render_ctx.get(path)
        if ctx is None:
            return []
        key, state = ctx
        info = self.host.spool.sessions.get(key)
        if info is None:
            return []
        out: list[bytes] = []
        obs: list[Observation] | None = None
        for r in state.get("renders") or []:
            try:
                if obs is None:
                    obs = self.host.spool.observations(key)
                comp = compiler.compile_session(
                    info,
                    obs[: int(r["count"])],
                    status=r["status"],
                    ended=r.get("ended"),
                    now=float(r["now"]),
                    created=state.get("created"),
                    path=path,
                    excerpt_bytes=self.host.settings.tool_output_excerpt_bytes,
                    previous=state.get("continues"),
                    **compile_extras(state),
                    part_events=self.host.settings.session_part_events,
                )
            except Exception:  # noqa: BLE001 - an old state the compiler cannot replay
                log.exception("cannot render an earlier version of %s", path)
                continue
            data = compiler_bytes(comp)
            if page_hash(data) == r.get("sha256"):
                out.append(data)
        return out

    def commit_by_hand(self, paths: list[str]) -> str | None:
        """Commit ``paths`` as the local owner's hand edits: one commit per personal
        owner (the writer's ``classify``), so a personal page saved beside a shared one is
        never in the shared one's commit. Returns the last commit's id (None: nothing)."""
        groups: dict[str | None, list[str]] = {}
        for p in paths:
            groups.setdefault(self.host.writer.owner(p), []).append(p)
        sha = None
        for group in groups.values():
            msg = "Edit by hand: " + ", ".join(group[:5]) + (" …" if len(group) > 5 else "")
            owner = self.host.owner
            sha = self.host._git_commit(group, owner, author_email_for(owner), msg) or sha
        return sha

    def _commit_person_first(self, path: str, current: bytes | None) -> None:
        """Before the server writes over a person's uncommitted save, commit that save as
        theirs (the local owner), so git holds both: their edit, then the server's."""
        if current is None or self.host.server_wrote(path, current):
            return None
        try:
            sha = self.host._git_commit(
                [path], self.host.owner, author_email_for(self.host.owner), f"Edit by hand: {path}"
            )
        except Exception:  # noqa: BLE001 - GitBusy etc.: the merge is committed later anyway
            log.warning("could not commit the hand edit of %s before merging", path)
            return None
        if sha is not None or self.host.git.tracked(path):
            self.host.server_hashes[path] = page_hash(current)
        return None

    def _write_conflict_copy(self, path: str) -> str | None:
        """Write the server's version of ``path`` that could not be merged beside it, as
        ``<stem>.server-copy.md`` (type ``conflict``, ``conflict_of`` naming the page).
        Returns the copy's path, or None when there was no conflict."""
        fresh = self._conflicts.pop(path, None)
        if fresh is None:
            return None
        from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys

        copy = conflict_copy_path(path)
        try:
            data = set_keys(fresh, {"type": "conflict", "conflict_of": path})
            parsed_id = _frontmatter_value(fresh, "id")
            if parsed_id:
                data = set_keys(data, {"id": f"{parsed_id}-server-copy"})
        except FrontmatterError:
            data = fresh
        atomic_write(self.host.wiki_dir / copy, data)
        self.host.server_hashes[copy] = page_hash(data)
        self.host.index.upsert_page(copy, data)
        return copy


def compiler_bytes(comp: compiler.Compiled) -> bytes:
    """A compiled session page as the server renders it on its own (no person's edits)."""
    from wiki_memory.wiki.frontmatter import dump_page

    return dump_page(comp.metadata, comp.body).encode("utf-8")


def conflict_copy_path(path: str) -> str:
    """Where the server writes its version of ``path`` when it cannot merge it with a
    person's edit: ``notes/x.md`` -> ``notes/x.server-copy.md``."""
    return path[:-3] + ".server-copy.md" if path.endswith(".md") else path + ".server-copy.md"


def seed_server_hashes(
    spool: Spool, wiki_dir: Path, hashes: dict[str, str], authors: dict[str, str]
) -> None:
    """After a restart, know which session pages on disk hold the server's own bytes:
    those whose sha256 the session's spool state recorded as written (``page_sha256``),
    about to be written (``pending_sha256``, a crash before the state caught up), or
    rendered. Such a page is never taken for a person's hand edit: its digest goes into
    ``hashes`` and its user into ``authors`` (both by page path; Memory's own maps)."""
    for info in list(spool.sessions.values()):
        st = info.state
        path = st.get("path")
        if not isinstance(path, str):
            continue
        full = wiki_dir / path
        data = read_plain(full) if plain_or_gone(full) else None
        if data is None:
            continue
        digest = page_hash(data)
        known = {st.get("page_sha256"), st.get("pending_sha256")}
        known.update(r.get("sha256") for r in st.get("renders") or [] if isinstance(r, dict))
        if digest in known:
            hashes[path] = digest
            authors[path] = info.user


def owners_on_disk(wiki_dir: Path, git: GitStore) -> Callable[[str], str | None]:
    """``owner(rel)``: the user the wiki path ``rel`` belongs to alone (None: shared) by
    the one personal rule (:func:`wiki_memory.wiki.personal.page_owner`) on its bytes, or
    on its last committed bytes when it is gone (a deleted personal page stays personal);
    a folder or an unreadable file by its path alone. The writer groups commits by it and
    the audit log hides personal paths with it."""

    def owner(rel: str) -> str | None:
        full = wiki_dir / rel
        try:
            data = read_plain(full) if plain_or_gone(full) else None
            if data is None and not full.exists():
                data = git.read_at(rel)
        except (OSError, KeyError, ValueError):
            data = None
        return page_owner(rel, data)

    return owner


def plain_or_gone(full: Path) -> bool:
    """True for a path that is gone, a folder, or a regular file with a single link: what
    the server may commit or serve (a symlink or a hard link may lead out of the wiki)."""
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return True
    if stat.S_ISDIR(st.st_mode):
        return True
    return stat.S_ISREG(st.st_mode) and st.st_nlink <= 1


def _split_text(data: bytes) -> tuple[bytes, str, str]:
    """``(bom, text, line ending)`` of a page's bytes; undecodable bytes survive a round
    trip (surrogateescape)."""
    bom = b""
    while data.startswith(b"\xef\xbb\xbf"):
        bom += b"\xef\xbb\xbf"
        data = data[3:]
    text = data.decode("utf-8", "surrogateescape")
    first = text.split("\n", 1)[0]
    return bom, text, "\r\n" if first.endswith("\r") else "\n"


def _with_eol(text: str, eol: str) -> str:
    return text.replace("\n", eol) if eol != "\n" else text


def _frontmatter_broken(data: bytes) -> bool:
    from wiki_memory.wiki.page import parse_page

    kinds = {d.kind for d in parse_page(data, "x.md").diagnostics}
    return bool(kinds & {"frontmatter_invalid", "frontmatter_unclosed", "frontmatter_not_mapping"})


def _frontmatter_value(data: bytes, key: str) -> Any:
    from wiki_memory.wiki.page import parse_page

    return parse_page(data, "x.md").metadata.get(key)
