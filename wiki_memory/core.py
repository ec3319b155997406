"""The Memory service: the operations every face (HTTP, MCP, CLI, web) calls.

One instance per data directory. It owns the spool, the writer thread (all writes to
``wiki/`` and their commits), the index and the watcher; faces never touch storage
themselves.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wiki_memory.capture.observation import (
    Observation,
    ObservationError,
    iso,
    parse_event,
)
from wiki_memory.capture.sanitize import redact_obj
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.config import Settings
from wiki_memory.index.store import Index
from wiki_memory.recall.pack import pack
from wiki_memory.wiki import compiler
from wiki_memory.wiki.git import GitStore, author_email_for
from wiki_memory.wiki.paths import PathRefused, atomic_write, clean_rel, resolve
from wiki_memory.writer import Author, Writer, WriteResult

log = logging.getLogger("wiki_memory.core")

#: events after which the session page is (re)written
COMPILE_KINDS = {"stop", "session_end", "turn"}
END_KINDS = {"session_end"}


class NotFound(LookupError):
    """The named page, section or session does not exist."""


class Conflict(Exception):
    """A compare-and-set failed: the page (or handoff) changed since the caller read it.

    ``current_hash`` is the sha256 hex of the bytes now on disk (None when absent)."""

    def __init__(self, message: str, current_hash: str | None = None) -> None:
        super().__init__(message)
        self.current_hash = current_hash


@dataclass
class RecallResult:
    """``{items, used_tokens, budget_tokens, omitted}`` as returned by recall."""

    items: list[dict[str, Any]]
    used_tokens: int
    budget_tokens: int
    omitted: int

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "used_tokens": self.used_tokens,
            "budget_tokens": self.budget_tokens,
            "omitted": self.omitted,
        }


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Memory:
    """The core service over one data directory (already laid out and locked by the caller)."""

    def __init__(self, settings: Settings, owner_user: str = "owner") -> None:
        self.settings = settings
        self.owner = owner_user
        self.wiki_dir = settings.wiki_dir
        self.git = GitStore(self.wiki_dir)
        self.spool = Spool(settings.spool_dir)
        self.index = Index(settings.index_path)
        self.writer = Writer(self._commit, commit_delay=settings.commit_delay_seconds)
        #: path → sha256 of the bytes the server last wrote or committed there
        self._server_hashes: dict[str, str] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.watcher: Any = None
        self.started = False
        #: short recall handle → anchor (see :meth:`_handle`)
        self._handles: dict[str, str] = {}
        #: called on the writer thread when a session ends (SessionEnd or idle; never on
        #: a server restart): ``fn(memory, info, observations, page_path)``
        self.on_session_end: list[
            Callable[[Memory, SessionInfo, list[Observation], str], None]
        ] = []

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Recover, index, and start the writer, idle and watcher threads."""
        self.writer.start()
        self.writer.call(self._recover_job)
        if self.index.needs_rebuild or not self.index.paths():
            self.index.rebuild(self.wiki_dir)
        else:
            self.index.sync_paths(self.wiki_dir, ["."])
        self._reindex_spool()
        for key, info in self.spool.sessions.items():
            if info.state.get("compiled_count", 0) < info.count:
                self.request_compile(key, end=info.state.get("status") == "ended")
        t = threading.Thread(target=self._idle_loop, name="wiki-idle", daemon=True)
        t.start()
        self._threads.append(t)
        if self.settings.watch:
            from wiki_memory.index.watcher import Watcher

            self.watcher = Watcher(self)
            self.watcher.start()
        self.started = True

    def stop(self) -> None:
        """Write pending pages, commit them, and stop every thread (SIGINT/SIGTERM path)."""
        self._stop.set()
        if self.watcher is not None:
            self.watcher.stop()
        # queued compiles run first, then every pending group is committed
        self.writer.stop()
        self.spool.close()
        self.index.close()

    def _recover_job(self) -> WriteResult:
        """Commit files that changed on disk while no server ran (hand edits, or a page
        written before a crash and never committed)."""
        dirty = self.git.dirty_paths()
        if dirty:
            self.git.commit(
                dirty,
                self.owner,
                author_email_for(self.owner),
                f"Recover {len(dirty)} change(s) made while the server was stopped",
            )
        return WriteResult()

    # -- capture -------------------------------------------------------------------------
    def capture(self, body: Any, user: str) -> list[dict[str, Any]]:
        """Accept one hook event or a list of them for ``user``.

        Every event is validated first (ObservationError names the field; nothing is
        written then), sanitized (invariant 4), appended durably to the spool (fsynced
        before this returns, invariant 3) and deduplicated by ``event_id``. Returns
        ``[{"id": obs_id, "duplicate": bool, "session_key": ...}]``.
        """
        events = body if isinstance(body, list) else [body]
        if not events:
            raise ObservationError("body", "an empty list holds no event")
        if len(events) > 1000:
            raise ObservationError("body", "at most 1000 events per request")
        now = time.time()
        parsed: list[Observation] = []
        for i, ev in enumerate(events):
            try:
                obs = parse_event(ev, user, now)
            except ObservationError as exc:
                if len(events) > 1:
                    raise ObservationError(f"[{i}].{exc.field}", exc.message) from None
                raise
            clean, _ = redact_obj(obs.payload)
            obs.payload = clean
            for attr in ("cwd", "project", "session_id", "event_id"):
                v = getattr(obs, attr)
                if isinstance(v, str):
                    setattr(obs, attr, redact_obj(v)[0])
            parsed.append(obs)
        accepted = self.spool.append(parsed)
        spool_rows = []
        to_compile: dict[str, bool] = {}
        for obs, acc in zip(parsed, accepted, strict=True):
            if acc.duplicate:
                continue
            spool_rows.append(self._spool_row(self.spool.sessions[acc.session_key], obs))
            if obs.kind in COMPILE_KINDS:
                to_compile[acc.session_key] = to_compile.get(acc.session_key, False) or (
                    obs.kind in END_KINDS
                )
        if spool_rows:
            self.index.add_spool(spool_rows)
        for key, end in to_compile.items():
            self.request_compile(key, end=end)
        return [
            {"id": a.obs_id, "duplicate": a.duplicate, "session_key": a.session_key}
            for a in accepted
        ]

    def _spool_row(self, info: SessionInfo, obs: Observation) -> dict[str, Any]:
        text = observation_text(obs)
        return {
            "session_key": info.key,
            "obs_id": obs.obs_id,
            "project": info.project,
            "harness": info.harness,
            "session_id": info.session_id,
            "user": info.user,
            "ts": iso(obs.ts),
            "text": text,
        }

    def _reindex_spool(self) -> None:
        rows = []
        for info, obs in self.spool.iter_all():
            if int(obs.obs_id.rsplit("-", 1)[-1]) > int(info.state.get("compiled_count", 0)):
                rows.append(self._spool_row(info, obs))
        self.index.replace_spool(rows)

    # -- compile -------------------------------------------------------------------------
    def request_compile(self, key: str, end: bool = False) -> Any:
        """Queue a (re)compile of a session's page on the writer; returns a Future."""
        return self.writer.submit(lambda: self._compile_job(key, end))

    def _compile_job(self, key: str, end: bool) -> WriteResult:
        info = self.spool.sessions.get(key)
        if info is None:
            return WriteResult()
        obs = self.spool.observations(key)
        state = dict(info.state)
        now = time.time()
        ended_now = end or any(o.kind in END_KINDS for o in obs)
        already = state.get("compiled_count") == len(obs) and (
            state.get("status") == "ended" or not ended_now
        )
        if already and state.get("path"):
            return WriteResult(value=state.get("path"))
        status = "ended" if ended_now else "active"
        ended_at = state.get("ended_at") or (now if ended_now else None)
        meta = compiler.SessionMeta(
            key=info.key,
            harness=info.harness,
            session_id=info.session_id,
            project=info.project,
            user=info.user,
            cwd=info.cwd,
            started=info.started,
        )
        path = state.get("path")
        if path and not (self.wiki_dir / path).exists():
            path = self._find_session_page(info) or None
        comp = compiler.compile_session(
            meta,
            obs,
            status=status,
            ended=ended_at,
            now=now,
            created=state.get("created"),
            path=path,
            excerpt_bytes=self.settings.tool_output_excerpt_bytes,
        )
        data = self._merge_page(comp)
        full = self.wiki_dir / comp.path
        atomic_write(full, data)
        self._server_hashes[comp.path] = sha256(data)
        self.index.upsert_page(comp.path, data)
        self.index.delete_spool_session(key)
        state.update(
            path=comp.path,
            compiled_count=len(obs),
            status=status,
            created=state.get("created") or now,
        )
        if ended_at:
            state["ended_at"] = ended_at
        just_ended = status == "ended" and info.state.get("status") != "ended"
        self.spool.write_state(key, state)
        if just_ended:
            for hook in self.on_session_end:
                try:
                    hook(self, info, obs, comp.path)
                except Exception:
                    log.exception("a session-end hook failed for %s", key)
        author = Author(info.user, author_email_for(info.user))
        verb = "End" if status == "ended" else "Update"
        return WriteResult(
            paths=[comp.path],
            author=author,
            message=f"{verb} session {comp.metadata['title'][:60]} ({info.harness})",
            value=comp.path,
        )

    def _find_session_page(self, info: SessionInfo) -> str | None:
        d = self.wiki_dir / "projects" / info.project / "sessions"
        for p in d.glob(f"*-{info.key[:8]}.md"):
            return p.relative_to(self.wiki_dir).as_posix()
        return None

    def _merge_page(self, comp: compiler.Compiled) -> bytes:
        """The bytes to write for a compiled page, keeping a person's edits (invariant 8).

        When the file on disk is what the server last wrote (or does not exist), the fresh
        rendering is written. When a person changed it, only the owned frontmatter keys and
        the owned sections (``## Summary``, ``## Timeline``) are replaced; everything else
        stays byte for byte.
        """
        from wiki_memory.wiki.frontmatter import FrontmatterError, dump_page, set_keys

        fresh = dump_page(comp.metadata, comp.body).encode("utf-8")
        full = self.wiki_dir / comp.path
        try:
            current = full.read_bytes()
        except FileNotFoundError:
            return fresh
        if self._server_hashes.get(comp.path) == sha256(current) or current == fresh:
            return fresh
        try:
            merged = set_keys(current, comp.metadata)
        except FrontmatterError:
            merged = current
        text = merged.decode("utf-8", errors="replace")
        for name, content in (("Summary", comp.summary), ("Timeline", comp.timeline)):
            text = replace_section(text, name, content)
        return text.encode("utf-8")

    def update_page(
        self,
        path: str,
        fn: Callable[[bytes | None], bytes | None],
        *,
        user: str,
        message: str,
        commit_now: bool = False,
        timeout: float = 60,
    ) -> WriteResult:
        """Read-modify-write one page on the writer thread (the single writer).

        ``fn(current)`` gets the page's bytes on disk (None when absent) and returns the
        new bytes, or None to leave the page alone; it may raise (Conflict, ValueError…)
        to refuse, and the error reaches the caller. The write is atomic, indexed at once,
        and committed with ``user`` as author in the next group (``commit_now`` waits for
        that commit). Returns the WriteResult; ``value`` is the sha256 of the new bytes,
        or None when nothing was written. Raises PathRefused for a path outside ``wiki/``.
        """
        rel = clean_rel(path)
        full = resolve(self.wiki_dir, rel)

        def job() -> WriteResult:
            try:
                current: bytes | None = full.read_bytes()
            except FileNotFoundError:
                current = None
            new = fn(current)
            if new is None or new == current:
                return WriteResult(value=None, commit_now=commit_now)
            atomic_write(full, new)
            digest = sha256(new)
            self._server_hashes[rel] = digest
            self.index.upsert_page(rel, new)
            return WriteResult(
                paths=[rel],
                author=Author(user, author_email_for(user)),
                message=message,
                value=digest,
                commit_now=commit_now,
            )

        return self.writer.call(job, timeout=timeout)

    def write_page(
        self,
        path: str,
        data: bytes,
        *,
        user: str,
        message: str,
        expected_hash: str | None = None,
        create_only: bool = False,
    ) -> WriteResult:
        """Write a whole page with a compare-and-set on its content hash.

        ``expected_hash``: the sha256 hex the caller read; a page that changed since (or
        that exists when ``create_only``) raises Conflict with the current hash.
        """

        def fn(current: bytes | None) -> bytes:
            cur = sha256(current) if current is not None else None
            if create_only and current is not None:
                raise Conflict(f"{path} already exists", cur)
            if expected_hash is not None and expected_hash != cur:
                raise Conflict(f"{path} changed since it was read", cur)
            return data

        return self.update_page(path, fn, user=user, message=message)

    def _idle_loop(self) -> None:
        """End sessions idle longer than ``idle_seconds``; clean up old spool files."""
        last_cleanup = 0.0
        while not self._stop.wait(self.settings.idle_check_seconds):
            now = time.time()
            for key, info in list(self.spool.sessions.items()):
                st = info.state
                if st.get("status") == "ended":
                    continue
                if info.last_received and now - info.last_received > self.settings.idle_seconds:
                    self.request_compile(key, end=True)
            if now - last_cleanup > 3600:
                last_cleanup = now
                self.spool.cleanup(self.settings.spool_keep_seconds, now)

    # -- commits -------------------------------------------------------------------------
    def _commit(self, paths: list[str], author: Author, message: str) -> str | None:
        sha = self.git.commit(paths, author.name, author.email, message)
        for p in paths:
            try:
                self._server_hashes[p] = sha256((self.wiki_dir / p).read_bytes())
            except OSError:
                self._server_hashes.pop(p, None)
        if sha:
            self.git.maybe_pack(self.settings.pack_every_commits)
        return sha

    def server_wrote(self, path: str, data: bytes) -> bool:
        """True when ``data`` is what the server last wrote at ``path`` (watcher echo)."""
        return self._server_hashes.get(path) == sha256(data)

    def commit_hand_edits(self, paths: list[str]) -> Any:
        """Commit pages a person changed on disk, as the local owner, one commit per save."""

        def job() -> WriteResult:
            real = [p for p in paths if not self._echo(p)]
            if not real:
                return WriteResult()
            msg = "Edit by hand: " + ", ".join(real[:5]) + (" …" if len(real) > 5 else "")
            sha = self.git.commit(real, self.owner, author_email_for(self.owner), msg)
            for p in real:
                try:
                    self._server_hashes[p] = sha256((self.wiki_dir / p).read_bytes())
                except OSError:
                    self._server_hashes.pop(p, None)
            return WriteResult(value=sha)

        return self.writer.submit(job)

    def _echo(self, path: str) -> bool:
        try:
            data = (self.wiki_dir / path).read_bytes()
        except OSError:  # deleted, or a directory: let git decide whether anything changed
            return False
        return self.server_wrote(path, data)

    # -- recall --------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        project: str | None = None,
        budget_tokens: int | None = None,
        kinds: list[str] | None = None,
        limit: int = 50,
        user: str | None = None,
    ) -> RecallResult:
        """Budgeted recall: handles for the best sections and running-session observations.

        Each item is ``{id, path, anchor, title, kind, snippet, why, score, expand_tokens,
        updated}``; ``used_tokens`` counts the items as serialized (compact JSON, cl100k)
        and never exceeds ``budget_tokens``. ``user`` is the caller: other users'
        ``people/<user>/`` folders (profiles, personal handoffs) are filtered out before
        ranking (invariant 9); with no user, all of ``people/`` is. Raises ValueError for
        a negative budget.
        """
        budget = self.settings.default_budget_tokens if budget_tokens is None else budget_tokens
        if budget < 0:
            raise ValueError("budget_tokens must be >= 0")
        candidates = self._candidates(
            query, project=project, kinds=kinds, limit=limit, exclude_dirs=self.hidden_dirs(user)
        )
        packed = pack(candidates, budget)
        return RecallResult(packed.items, packed.used_tokens, budget, packed.omitted)

    def hidden_dirs(self, user: str | None) -> list[str]:
        """Wiki folders ``user`` may not see: every ``people/<other>`` (all of ``people``
        when ``user`` is None)."""
        if not user:
            return ["people"]
        try:
            names = [p.name for p in (self.wiki_dir / "people").iterdir() if p.is_dir()]
        except OSError:
            return []
        return [f"people/{n}" for n in sorted(names) if n != user]

    def _candidates(
        self,
        query: str,
        *,
        project: str | None,
        kinds: list[str] | None,
        limit: int,
        exclude_dirs: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        from wiki_memory.recall import rank

        return rank.candidates(
            self, query, project=project, kinds=kinds, limit=limit, exclude_dirs=exclude_dirs or []
        )

    def _handle(self, anchor: str) -> str:
        """A short, stable id for an anchor (``h`` + 10 hex of its SHA-1), remembered so
        that :meth:`expand` can resolve it; expand also takes anchors and paths."""
        hid = "h" + hashlib.sha1(anchor.encode("utf-8")).hexdigest()[:10]
        self._handles[hid] = anchor
        if len(self._handles) > 100_000:
            self._handles.pop(next(iter(self._handles)))
        return hid

    def expand(self, ids: list[str], budget_tokens: int) -> dict[str, Any]:
        """Whole sections or pages for handles from recall, packed under ``budget_tokens``.

        Returns ``{items: [{id, path, anchor, text, tokens}], used_tokens, budget_tokens,
        omitted: [ids that did not fit], missing: [ids not found]}``.
        """
        if budget_tokens < 0:
            raise ValueError("budget_tokens must be >= 0")
        cands: list[dict[str, Any]] = []
        missing: list[str] = []
        for raw_id in ids:
            target = self._handles.get(str(raw_id), str(raw_id))
            text = self._expand_one(target)
            if text is None:
                missing.append(str(raw_id))
                continue
            if target.startswith("spool:"):
                cands.append({"id": raw_id, "path": None, "anchor": None, "text": text})
                continue
            path, _, anchor = target.partition("#")
            cands.append({"id": raw_id, "path": path, "anchor": target, "text": text})
        packed = pack(cands, budget_tokens)
        return {
            "items": packed.items,
            "used_tokens": packed.used_tokens,
            "budget_tokens": budget_tokens,
            "omitted": packed.omitted_ids,
            "missing": missing,
        }

    def _expand_one(self, item_id: str) -> str | None:
        if item_id.startswith("spool:"):
            obs_id = item_id[6:]
            key_prefix = obs_id.rsplit("-", 1)[0]
            for key in self.spool.sessions:
                if key.startswith(key_prefix):
                    for o in self.spool.observations(key):
                        if o.obs_id == obs_id:
                            return observation_text(o)
            return None
        path, _, anchor = item_id.partition("#")
        try:
            rel = clean_rel(path)
        except PathRefused:
            return None
        if not anchor:
            try:
                return resolve(self.wiki_dir, rel).read_text(encoding="utf-8", errors="replace")
            except (OSError, PathRefused):
                return None
        for sec in self.index.sections_of(rel):
            if sec["anchor"] == anchor:
                return str(sec["text"])
        return None

    # -- pages ---------------------------------------------------------------------------
    def list_pages(
        self,
        project: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Pages from the index, newest first: ``[{path, id, title, kind, project, updated}]``."""
        return self.index.list_pages(
            project=project, kind=kind, since=since, limit=limit, offset=offset
        )

    def read_page(self, path: str, cursor: int = 0, max_bytes: int = 64 * 1024) -> dict[str, Any]:
        """One page, paged by a byte cursor that never splits a UTF-8 character.

        Returns ``{path, metadata, diagnostics, content, cursor, next_cursor, truncated,
        total_bytes, hash}``. Raises PathRefused (outside ``wiki/``) or NotFound.
        """
        full = resolve(self.wiki_dir, path)
        rel = clean_rel(path)
        if not full.is_file() or full.is_symlink():
            raise NotFound(rel)
        data = full.read_bytes()
        if cursor < 0 or cursor > len(data):
            raise ValueError("cursor out of range")
        end = min(len(data), cursor + max(1, max_bytes))
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        chunk = data[cursor:end]
        meta = self.index.page_meta(rel) or {}
        return {
            "path": rel,
            "metadata": meta.get("meta", {}),
            "title": meta.get("title"),
            "diagnostics": meta.get("diagnostics", []),
            "content": chunk.decode("utf-8", errors="replace"),
            "cursor": cursor,
            "next_cursor": end if end < len(data) else None,
            "truncated": end < len(data),
            "total_bytes": len(data),
            "hash": sha256(data),
        }

    # -- index maintenance -----------------------------------------------------------------
    def reindex(self, progress: bool = False) -> int:
        """Rebuild the index from the files beside the old one and swap it in."""
        return self.index.rebuild(self.wiki_dir, progress=progress)


def observation_text(obs: Observation) -> str:
    """The searchable text of one observation (prompt, reply, tool input/output, error)."""
    p = obs.payload
    parts: list[str] = []
    for k in (
        "speaker",
        "prompt",
        "last_assistant_message",
        "prompt_response",
        "last-assistant-message",
        "tool_name",
        "error",
        "message",
    ):
        v = p.get(k)
        if isinstance(v, str) and v:
            parts.append(v)
    msgs = p.get("input-messages")
    if isinstance(msgs, list):
        parts.extend(m for m in msgs if isinstance(m, str))
    for k in ("tool_input", "tool_response"):
        v = p.get(k)
        if v not in (None, "", {}):
            s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            parts.append(s[:4000])
    return "\n".join(parts)


def replace_section(text: str, heading: str, content: str) -> str:
    """Replace the body of the level-2 section ``## heading`` (up to the next level-1/2
    heading) with ``content``; append the section when it is missing."""
    lines = text.split("\n")
    start = None
    for i, ln in enumerate(lines):
        if ln.rstrip("\r") == f"## {heading}":
            start = i
            break
    if start is None:
        return text.rstrip("\n") + f"\n\n## {heading}\n\n{content}\n"
    end = len(lines)
    fence_char = ""
    fence_len = 0
    for j in range(start + 1, len(lines)):
        s = lines[j]
        stripped = s.lstrip()
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in "`~" else 0
        if run >= 3:
            if not fence_char:
                fence_char, fence_len = stripped[0], run
            elif stripped[0] == fence_char and run >= fence_len and not stripped[run:].strip():
                fence_char = ""
            continue
        if not fence_char and (s.startswith("# ") or s.startswith("## ")):
            end = j
            break
    new = lines[: start + 1] + ["", *content.split("\n"), ""] + lines[end:]
    return "\n".join(new)
