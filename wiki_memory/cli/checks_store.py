"""Doctor's checks of what is stored: the wiki folder, its git repository (state,
``fsck``), page names, file modes and the index behind the files. Each is a function of
:class:`wiki_memory.cli.doctor.Context`, registered by name in
:mod:`wiki_memory.cli.doctor`, which imports this module only when doctor runs.
"""

from __future__ import annotations

import os
import stat
import time
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wiki_memory.cli.doctor import Context
from wiki_memory.config import Settings
from wiki_memory.wiki.names import unportable_parts
from wiki_memory.wiki.oddnames import escaped as escaped_name
from wiki_memory.wiki.oddnames import git_name, page_name, page_names
from wiki_memory.wiki.paths import odd_name, shown_name


def _git_report(wiki: Path) -> dict[str, Any]:
    """The state of git in ``wiki`` without changing anything (no locks taken)."""
    from dulwich import porcelain
    from dulwich.refs import HEADREF
    from dulwich.repo import Repo

    from wiki_memory.index.store import is_indexable
    from wiki_memory.wiki.git import OPERATION_MARKERS
    from wiki_memory.wiki.locks import STALE_AFTER_SECONDS, lock_files

    out: dict[str, Any] = {"repository": False, "errors": [], "warnings": []}
    if not (wiki / ".git").exists():
        out["warnings"].append("not a git repository yet (the server creates one at start)")
        return out
    out["repository"] = True
    try:
        repo = Repo(str(wiki))
    except Exception as exc:  # noqa: BLE001 - report, do not crash
        out["errors"].append(f"cannot open the git repository: {exc}")
        return out
    try:
        try:
            out["head"] = repo.head().decode("ascii")
        except KeyError:
            out["head"] = None
        ref = repo.refs.follow(HEADREF)[0]
        out["branch"] = (
            ref[-1].decode("utf-8", "replace").removeprefix("refs/heads/") if len(ref) > 1 else None
        )
        if out["head"] and out["branch"] is None:
            out["warnings"].append("HEAD is detached: server commits go on no branch")
        control = Path(repo.controldir())
        for marker, what in OPERATION_MARKERS:
            if (control / marker).exists():
                out["errors"].append(f"{what} is in progress: the server waits for it to end")
        locks = lock_files(control)
        out["locks"] = [
            {"name": lk.name, "age": round(lk.age), "holders": lk.holders} for lk in locks
        ]
        for lk in locks:
            if lk.holders:
                out["warnings"].append(f"{lk.describe()}: a git command is running")
            elif lk.holders is None and lk.age <= 600:
                out["warnings"].append(f"{lk.describe()}: a git command may be running")
            else:
                out["errors"].append(
                    f"{lk.describe()}: commits stall until it goes; "
                    + (
                        "`wiki-memory doctor --fix` removes it"
                        if lk.stale
                        else "`wiki-memory doctor --fix` removes it once it is "
                        f"{STALE_AFTER_SECONDS:.0f} s old"
                        if lk.holders == []
                        else "remove it by hand if no git program is running"
                    )
                )
        try:
            st = porcelain.status(repo, untracked_files="all", optional_locks=False)
            dirty: set[str] = set()
            for group in st.staged.values():
                dirty.update(p.decode("utf-8", "surrogateescape") for p in group)
            dirty.update(p.decode("utf-8", "surrogateescape") for p in st.unstaged)
            dirty.update(p.decode("utf-8", "surrogateescape") for p in st.untracked)
            out["uncommitted_pages"] = sorted(p for p in page_names(wiki, dirty) if is_indexable(p))
        except Exception as exc:  # noqa: BLE001
            out["warnings"].append(f"cannot compute git status: {exc}")
    finally:
        repo.close()
    return out


_Notes = list[dict[str, str]]  # one dict a file: path, reason (or file, rename_to)


def scan_files(wiki: Path, escaped: _Notes | None = None) -> tuple[dict[str, Any], _Notes]:
    """Pages on disk (as the index sees them: a name that is not valid UTF-8 by its
    escaped name) and the files skipped, with the reason. ``escaped`` is given each file
    and folder served under an escaped name: ``{path, file, rename_to}``."""
    from wiki_memory.index.store import is_indexable

    pages: dict[str, os.stat_result] = {}
    skipped: list[dict[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(wiki):
        rel_dir = os.path.relpath(dirpath, wiki).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for d in dirnames:
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if d.startswith("."):
                continue
            if odd_name(d) and not _escaped_ok(wiki, rel, escaped, skipped, " (a folder)"):
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                skipped.append({"path": rel, "reason": "symlink to a folder (not followed)"})
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = os.path.join(dirpath, name)
            if odd_name(name) and not name.startswith("."):
                if not _escaped_ok(wiki, rel, escaped, skipped, ""):
                    continue
            rel = page_name(wiki, rel) or shown_name(rel)  # in an odd folder: its name
            try:
                st = os.lstat(full)
            except OSError as exc:
                skipped.append({"path": rel, "reason": f"cannot stat: {exc.strerror}"})
                continue
            if stat.S_ISLNK(st.st_mode):
                if name.endswith(".md") or not name.startswith("."):
                    skipped.append({"path": rel, "reason": "symlink (not followed)"})
                continue
            if not name.endswith(".md"):
                continue
            if not is_indexable(rel):
                skipped.append({"path": rel, "reason": "editor or temporary file (ignored)"})
                continue
            if st.st_nlink > 1:
                skipped.append(
                    {"path": rel, "reason": "hard link (another name may be outside the wiki)"}
                )
                continue
            if not os.access(full, os.R_OK):
                skipped.append({"path": rel, "reason": "not readable"})
                continue
            pages[rel] = st
    return pages, skipped


_ODD_REASON = (
    "the file name is not valid UTF-8 and its escaped name {name} is another file's: not "
    "a page, not indexed or committed, left as it is (rename it to make it a page)"
)


def _escaped_ok(wiki: Path, rel: str, escaped: _Notes | None, skipped: _Notes, what: str) -> bool:
    """Whether the file or folder ``rel`` (not valid UTF-8, as ``os`` spells it) has an
    escaped name (noted in ``escaped``, with a UTF-8 name to rename it to: its bytes
    read as Latin-1) or is skipped (noted in ``skipped``)."""
    served = page_name(wiki, rel)
    if served is None:
        why = _ODD_REASON.format(name=escaped_name(rel)) + what
        skipped.append({"path": shown_name(rel), "reason": why})
        return False
    if escaped is not None:
        latin = git_name(rel).decode("latin-1")
        escaped.append({"path": served, "file": shown_name(rel), "rename_to": latin})
    return True


def _others_reach(roots: Iterable[Path], limit: int = 1000) -> list[str]:
    """Files and folders under ``roots`` that another local account can actually read:
    the entry grants read to group or others *and* every folder on the way to it from
    ``/`` lets group or others through (execute bit). A file with wide modes inside an
    0700 folder is not listed: nobody else reaches it. At most ``limit`` paths."""

    def passable(d: Path) -> bool:
        try:
            return all(os.stat(p).st_mode & 0o011 for p in [d, *d.parents])
        except OSError:
            return False

    found: list[str] = []
    for root in roots:
        if not root.exists() or not passable(root.parent):
            continue
        stack = [root]
        while stack and len(found) < limit:
            d = stack.pop()
            try:
                st = os.lstat(d)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & 0o044:
                found.append(str(d))
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o011:
                try:
                    stack.extend(d / n for n in os.listdir(d))
                except OSError:
                    continue
    return sorted(found)


def _odd_names(pages: Iterable[str]) -> dict[str, list[Any]]:
    """Page names that work here but may surprise elsewhere: ``decomposed`` (not NFC, as
    macOS tools write them: served under their exact name) and ``case_twins`` (groups of
    names in one folder differing only in case or Unicode form: one file each here, but
    one file for all of them on a case-insensitive disk) and ``unportable`` (names Windows
    cannot check out: a reserved device name, a trailing dot or space, a forbidden
    character; they keep working here, but new pages cannot be given such names)."""
    decomposed = sorted(p for p in pages if not unicodedata.is_normalized("NFC", p))
    groups: dict[str, list[str]] = {}
    for p in pages:
        groups.setdefault(unicodedata.normalize("NFC", p).casefold(), []).append(p)
    twins = sorted(sorted(g) for g in groups.values() if len(g) > 1)
    unportable = sorted(p for p in pages if unportable_parts(p))
    return {"decomposed": decomposed, "case_twins": twins, "unportable": unportable}


def check_wiki(ctx: Context) -> None:
    """The wiki folder exists (the checks after this one need it)."""
    if not ctx.settings.wiki_dir.is_dir():
        ctx.error(f"the wiki folder {ctx.settings.wiki_dir} does not exist", "wiki-memory setup")
        ctx.stop = True


def check_git(ctx: Context) -> None:
    """git: an operation in progress, lock files (stale ones are an error that ``--fix``
    removes), uncommitted pages."""
    git = _git_report(ctx.settings.wiki_dir)
    for e in git.pop("errors"):
        if "`wiki-memory doctor --fix` removes it" in e:
            # doctor --fix removes every lock proven stale first (see :func:`fix`)
            ctx.error(e, "wiki-memory doctor --fix", safe=True, apply=lambda: "")
        else:
            ctx.error(e)
    for w in git.pop("warnings"):
        ctx.warn(w)
    if git.get("uncommitted_pages"):
        n = len(git["uncommitted_pages"])
        ctx.warn(
            f"{n} page(s) changed and not committed yet"
            + ("" if ctx.running else " (the server commits them when it starts)")
        )
    ctx.rep["git"] = git


def check_fsck(ctx: Context) -> None:
    """``git fsck`` of the wiki's repository (dulwich: every object reads back and hashes
    to its name)."""
    from dulwich import porcelain
    from dulwich.repo import Repo

    wiki = ctx.settings.wiki_dir
    if not (wiki / ".git").is_dir():
        return
    problems: list[str] = []
    try:
        with Repo(str(wiki)) as repo:
            for sha, exc in porcelain.fsck(repo):
                problems.append(f"{sha.decode('ascii', 'replace')}: {exc}")
                if len(problems) >= 20:
                    break
    except Exception as exc:  # noqa: BLE001 - report, do not crash
        problems.append(str(exc))
    ctx.rep["fsck"] = {"problems": problems}
    if problems:
        ctx.error(
            f"git fsck: {len(problems)} damaged object(s) in {wiki / '.git'}: "
            + "; ".join(problems[:3])
            + " (restore from a backup: `wiki-memory restore`)"
        )


def check_names(ctx: Context) -> None:
    """Files the index skips and page names that work here but may surprise elsewhere."""
    escaped: list[dict[str, str]] = []
    on_disk, skipped = scan_files(ctx.settings.wiki_dir, escaped)
    ctx.on_disk = on_disk
    ctx.rep["skipped"] = skipped
    ctx.rep["pages"] = {"on_disk": len(on_disk)}
    ctx.rep["names"] = names = _odd_names(on_disk)
    names["not_utf8"] = escaped
    if escaped:
        ctx.warn(
            f"{len(escaped)} name(s) not valid UTF-8, served under an escaped name (%XX for "
            "each such byte), committed under their own bytes: "
            + "; ".join(f"{e['file']} as {e['path']}" for e in escaped[:5]),
            "rename each to a UTF-8 name, e.g. its bytes read as Latin-1: "
            + ", ".join(repr(e["rename_to"]) for e in escaped[:3]),
        )
    if names["decomposed"]:
        ctx.warn(
            f"{len(names['decomposed'])} page name(s) in decomposed Unicode (served and "
            "written under that exact name): " + ", ".join(names["decomposed"][:5])
        )
    if names["case_twins"]:
        ctx.warn(
            f"{len(names['case_twins'])} group(s) of page names differing only in case or "
            "Unicode form (separate pages here; one file on a case-insensitive disk): "
            + "; ".join(" = ".join(g) for g in names["case_twins"][:5])
        )
    if names["unportable"]:
        ctx.warn(
            f"{len(names['unportable'])} page name(s) Windows cannot check out (they work "
            "here; a clone on Windows fails on them): " + ", ".join(names["unportable"][:5])
        )


def check_modes(ctx: Context) -> None:
    """Files and folders of the data directory another local account can read."""
    settings = ctx.settings
    reach_roots = [settings.data_dir]
    if settings.wiki_path is not None:  # a vault's pages are its owner's business
        reach_roots.append(settings.wiki_dir / ".git")
    ctx.rep["reachable_by_others"] = reach = _others_reach(reach_roots)
    if reach:
        targets = [settings.data_dir]
        if settings.wiki_path is not None:
            targets.append(settings.wiki_dir / ".git")
        cmd = "chmod 700 " + " ".join(str(t) for t in targets)

        def tighten() -> str:
            for t in targets:
                if t.is_dir():
                    os.chmod(t, 0o700)
            return cmd

        ctx.error(
            f"{len(reach)} file(s) or folder(s) other local accounts can read: "
            + ", ".join(reach[:5])
            + f" (fix: {cmd})",
            cmd,
            safe=True,
            apply=tighten,
        )


def check_index(ctx: Context) -> None:
    """The index against the files (measured again for ``wait_seconds`` while a server
    runs), its schema, page diagnostics, links and unmerged server copies."""
    import apsw

    from wiki_memory.index.schema import upgrade_path
    from wiki_memory.index.store import SCHEMA_VERSION, Index

    settings = ctx.settings
    rep = ctx.rep
    wiki = settings.wiki_dir
    on_disk = ctx.on_disk
    running = ctx.running
    db = settings.index_path
    index_ok = False
    if not db.exists():
        ctx.error(
            "no index.db: run `wiki-memory reindex` (or start the server)", "wiki-memory reindex"
        )
    else:
        try:
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            version = conn.pragma("user_version")
            conn.close()
        except apsw.Error as exc:
            ctx.error(f"index.db cannot be read: {exc}", "wiki-memory reindex")
            version = None
        if version not in (None, SCHEMA_VERSION) and upgrade_path(version) is not None:
            version = SCHEMA_VERSION  # brought forward in place at open (schema.UPGRADES)
        if version is not None and version != SCHEMA_VERSION:
            ctx.error(
                f"index.db has schema {version}, this version needs {SCHEMA_VERSION}: "
                "run `wiki-memory reindex`",
                "wiki-memory reindex",
            )
        elif version is not None:
            from wiki_memory.index.db import quick_check

            damage = quick_check(db)
            rep["index_check"] = damage or "ok"
            if damage:
                ctx.error(
                    f"index.db is damaged (SQLite quick check: {'; '.join(damage)[:300]}): "
                    "the server rebuilds it from the files at start or at the first query "
                    "that meets the damage",
                    "wiki-memory reindex",
                )
            else:
                index_ok = True
    if not index_ok:
        return
    idx = Index(db, settings.stem_language_names, settings.vectors, settings.vectors_model)
    try:
        deadline = time.monotonic() + (ctx.wait_seconds if running else 0)
        while True:
            known = idx.page_stats()
            missing = sorted(p for p in on_disk if p not in known)
            extra = sorted(p for p in known if p not in on_disk)
            stale = sorted(
                p
                for p, st in on_disk.items()
                if p in known and known[p] != (st.st_size, st.st_mtime)
            )
            # size+mtime differ but the bytes may be the same (a touch): compare hashes
            if stale:
                from wiki_memory.index.files import read_file
                from wiki_memory.plainfile import page_hash

                hashes = idx.paths()
                stale = [
                    p
                    for p in stale
                    if (raw := read_file(wiki / p)) is None or page_hash(raw) != hashes.get(p)
                ]
            lag = len(missing) + len(extra) + len(stale)
            if not lag or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        rep["index"] = {
            "pages": len(known),
            "missing": missing[:100],
            "extra": extra[:100],
            "stale": stale[:100],
            "lag": lag,
        }
        if lag:
            ctx.error(
                f"the index is behind the files: {len(missing)} page(s) not indexed, "
                f"{len(stale)} changed, {len(extra)} gone"
                + (
                    "" if running else " (the server catches up at start; or `wiki-memory reindex`)"
                ),
                None if running else "wiki-memory reindex",
            )
        diags = idx.page_diagnostics()
        rep["pages"]["diagnostics"] = diags
        if diags:
            kinds: dict[str, int] = {}
            for d in diags:
                kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
            ctx.warn("page diagnostics: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
        problems = idx.problem_links()
        rep["links"] = {"stats": idx.link_stats(), "problems": problems}
        counts: dict[str, int] = {}
        for pr in problems:
            counts[pr["status"]] = counts.get(pr["status"], 0) + 1
        for status, n in sorted(counts.items()):
            ctx.warn(f"{n} {status.replace('_', ' ')} link(s)")
        copies = sorted(p for p in on_disk if p.endswith(".server-copy.md"))
        if copies:
            ctx.warn(
                f"{len(copies)} unmerged server copy(ies) beside hand-edited pages: "
                + ", ".join(copies[:5])
            )
            rep["pages"]["server_copies"] = copies
    finally:
        idx.close()


def check_skipped(ctx: Context) -> None:
    """A line for the files the index skips (listed by :func:`check_names`)."""
    if ctx.rep.get("skipped"):
        ctx.warn(f"{len(ctx.rep['skipped'])} file(s) skipped (see the list)")


def check_signals(ctx: Context) -> None:
    """Which recall signals are on (docs/ranking.md): every signal with a weight, and the
    ``dense`` one only with the ``vectors`` extra installed and the ``vectors`` setting
    true. Puts ``signals`` (``{"on": [...], "off": {name: reason}}``) and ``vectors`` (a
    line for people) into the report; an index built without the vectors that are now on
    is an info finding (the server rebuilds it at start)."""
    import apsw

    from wiki_memory.index import vectors
    from wiki_memory.liveserver import live_server
    from wiki_memory.recall.rank import WEIGHTS

    on = [name for name, w in WEIGHTS.items() if w > 0 and name != "dense"]
    off: dict[str, str] = {name: "weight 0" for name, w in WEIGHTS.items() if w <= 0}
    # the running server's setting when one runs (this shell's environment may differ)
    live = live_server(ctx.settings.data_dir) or {}
    setting = live["vectors"] if isinstance(live.get("vectors"), bool) else ctx.settings.vectors
    whose = "the running server's " if isinstance(live.get("vectors"), bool) else ""
    model = ctx.settings.vectors_model if ctx.settings.vectors_model in vectors.MODELS else None
    if not vectors.available(model):
        line = f"off (the vectors extra is not installed: {vectors.install_hint(model)})"
        off["dense"] = "the vectors extra is not installed"
    elif not setting:
        line = f"off ({whose}setting vectors = false)"
        off["dense"] = f"{whose}setting vectors = false"
    else:
        mid = vectors.model_id(model)
        line = f"on ({whose}setting; {mid})" if whose else f"on ({mid})"
        on.append("dense")
        built = None
        if ctx.settings.index_path.exists():
            try:
                conn = apsw.Connection(
                    str(ctx.settings.index_path), flags=apsw.SQLITE_OPEN_READONLY
                )
                try:
                    row = conn.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()
                    n = conn.execute("SELECT count(*) FROM vectors").fetchone()
                finally:
                    conn.close()
                built = str(row[0]) if row else None
                line += f", {int(n[0]) if n else 0} section vectors stored"
            except apsw.Error:
                built = None
        if built is not None and built != mid:
            ctx.info(
                "the index was built without vectors: the server rebuilds it at its next start",
                "wiki-memory reindex",
            )
    ctx.rep["signals"] = {"on": on, "off": off}
    ctx.rep["vectors"] = line


#: what each broken supersession means, for doctor's message (docs/knowledge.md)
_BROKEN = {
    "missing": "names no page",
    "forgotten": "names a forgotten page",
    "cycle": "is part of a cycle",
}


def check_supersession(ctx: Context) -> None:
    """Pages whose ``superseded_by`` is broken (missing, forgotten, a cycle): recall
    treats them as current, so nothing is hidden, but the correction a person meant is
    not in force (:mod:`wiki_memory.index.supersede`). An error: doctor is not healthy."""
    if not ctx.settings.index_path.exists() or not ctx.rep.get("index"):
        return  # the index check already said why
    broken = ctx.chains().broken
    found = [
        {"path": p, "reason": why, "superseded_by": target}
        for p, (why, target) in sorted(broken.items())
    ]
    ctx.rep["supersession"] = {"broken": found}
    for f in found:
        ctx.error(
            f"supersession broken: {f['path']}: superseded_by {f['superseded_by']!r} "
            f"{_BROKEN[f['reason']]} (superseded_by_{f['reason']}); recall treats the page "
            "as current",
            f"edit superseded_by in {f['path']}, or remove its state: superseded",
        )


def unrendered_events(settings: Settings) -> int:
    """How many accepted events are on no page as themselves: those the compiler could
    not render (each a placeholder entry naming its spool record) and those a session's
    failing compile holds back (``compile_failed``), read from the sessions' spool
    states: their spool is kept until they compile or a person discards them."""
    import json

    n = 0
    try:
        states = list(settings.spool_dir.glob("*.state"))
    except OSError:
        return 0
    for f in states:
        try:
            st = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(st, dict) and isinstance(st.get("unrendered"), list):
            n += len(st["unrendered"])
        failed = st.get("compile_failed") if isinstance(st, dict) else None
        if isinstance(failed, dict) and isinstance(failed.get("events"), int):
            n += failed["events"]
    return n


def check_unrendered(ctx: Context) -> None:
    """A warning for accepted events that are on no page as themselves (docs/sessions.md,
    "Placeholders"); ``unrendered_events`` in the report."""
    n = unrendered_events(ctx.settings)
    ctx.rep["unrendered_events"] = n
    if n:
        ctx.warn(
            f"{n} accepted event(s) are on no session page as themselves (a placeholder "
            "entry names each spool record and the cause, or the page's compile keeps "
            "failing); their spool is kept",
            fix="see the server log for the cause (the compile retries); `wiki-memory "
            "unrendered` lists them, `wiki-memory unrendered --discard <session>` drops them",
        )


def unrendered_line(settings: Settings) -> int | None:
    """``status``'s ``unrendered_events`` line (None when there are none)."""
    return unrendered_events(settings) or None
