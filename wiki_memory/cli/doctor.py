"""``wiki-memory doctor``'s checks: :func:`doctor_report` looks at a wiki, its index, git
and the server lock without changing anything and says what is wrong;
:func:`print_report` prints it for people; :func:`fix` is ``doctor --fix`` (git locks
proven stale are removed, :mod:`wiki_memory.wiki.locks`). The subcommand itself (its
arguments, exit status) is :mod:`wiki_memory.cli.wiki`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wiki_memory.config import Settings
from wiki_memory.wiki.names import unportable_parts
from wiki_memory.wiki.paths import odd_name, shown_name


def _git_report(wiki: Path) -> dict[str, Any]:
    """The state of git in ``wiki`` without changing anything (no locks taken)."""
    from dulwich import porcelain
    from dulwich.refs import HEADREF
    from dulwich.repo import Repo

    from wiki_memory.index.store import is_indexable
    from wiki_memory.wiki.git import _OPERATION_MARKERS
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
        for marker, what in _OPERATION_MARKERS:
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
            out["uncommitted_pages"] = sorted(
                p for p in dirty if not odd_name(p) and is_indexable(p)
            )
        except Exception as exc:  # noqa: BLE001
            out["warnings"].append(f"cannot compute git status: {exc}")
    finally:
        repo.close()
    return out


def _scan_files(wiki: Path) -> tuple[dict[str, os.stat_result], list[dict[str, str]]]:
    """Pages on disk (as the index sees them) and the files skipped, with the reason."""
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
            if odd_name(d):
                skipped.append({"path": shown_name(rel), "reason": _ODD_REASON + " (a folder)"})
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
                skipped.append({"path": shown_name(rel), "reason": _ODD_REASON})
                continue
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
    "the file name is not valid UTF-8: not a page, not indexed or committed, left as it "
    "is (rename it to make it a page)"
)


def _server_commits(address: str | None, ca_file: Path | None = None) -> dict[str, Any] | None:
    """The running server's commit status from ``GET /v1/health`` (None if unreachable;
    an https server is trusted through ``ca_file`` besides the system's CAs)."""
    if not address:
        return None
    import httpx

    from wiki_memory.config import tls_verify

    try:
        r = httpx.get(address.rstrip("/") + "/v1/health", timeout=3, verify=tls_verify(ca_file))
        commits = r.json().get("commits")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return commits if isinstance(commits, dict) else None


def _hooks_report(data_dir: Path, warnings: list[str]) -> dict[str, Any]:
    """The hook side of ``data_dir``: its outbox (queued and dropped events, whether the
    hooks found the server unreachable) and, for each harness whose configuration file
    (as install-hooks finds it, profile variables included) holds our hook, what that
    hook is pinned to. A hook pinned to another store, or not pinned at all, is a
    warning, and so are queued and dropped events."""
    import time

    from wiki_memory.harness.hooks_install import AGENTS, installed_commands, pinned_target
    from wiki_memory.harness.outbox import status

    out: dict[str, Any] = {"installed": []}
    try:
        st = status(data_dir)
    except FileNotFoundError as exc:
        warnings.append(f"hook outbox not checked: {exc}")
    else:
        out["outbox"] = {
            "path": str(st.outbox),
            "queued": st.queued,
            "oldest_seconds": st.oldest_seconds,
            "dropped": st.dropped,
            "unreachable": st.unreachable,
        }
        if st.queued:
            age = f", the oldest {st.oldest_seconds:.0f} s old" if st.oldest_seconds else ""
            warnings.append(
                f"{st.queued} hook event(s) queued in {st.outbox}{age}; a running server "
                "on this data directory sends them into itself (or `wiki-memory recover`)"
            )
        if st.dropped:
            counts = ", ".join(f"{n} {k}" for k, n in sorted(st.dropped.items()))
            warnings.append(f"hook events dropped so far: {counts} ({st.outbox}/dropped.jsonl)")
        if st.unreachable and time.time() < float(st.unreachable.get("until") or 0):
            since = time.strftime("%H:%M", time.localtime(float(st.unreachable["since"])))
            warnings.append(
                f"the hooks found the server {st.unreachable.get('url')} unreachable since "
                f"{since} ({st.unreachable.get('error')}); they skip the network for a while"
            )
    mine = str(Path(data_dir).expanduser().resolve())
    for spec in AGENTS.values():
        path = spec.default_path()
        for cmd in installed_commands(path):
            target = pinned_target(cmd)
            out["installed"].append({"agent": spec.name, "file": str(path), "target": target})
            if target is None:
                warnings.append(
                    f"{spec.label} hook in {path} is not pinned to a data directory: it "
                    "follows whatever WIKI_MEMORY_HOME the harness passes (run install-hooks "
                    "again)"
                )
            elif not target.startswith(("http://", "https://")) and target != mine:
                warnings.append(
                    f"{spec.label} hook in {path} points to another store: {target} "
                    f"(this is {mine})"
                )
    return out


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


def doctor_report(
    settings: Settings, wait_seconds: float = 3.0, follow_index: bool = False
) -> dict[str, Any]:
    """Check the wiki, its index, git and the server lock; never changes anything.

    ``follow_index``: when the index was built from another existing folder than
    ``settings.wiki_dir`` (the data directory last served a vault with ``serve --wiki``),
    check that folder, and say so in ``wiki_source`` (``"index"``, else ``"settings"``).

    Returns ``{"ok", "errors", "warnings", "lock", "git", "index", "pages", "links",
    "skipped"}``: ``errors`` make ``ok`` False (index behind the files, a git operation
    in progress, an old ``index.lock``, a missing wiki); ``warnings`` do not (page
    diagnostics, unresolved and ambiguous links, missing attachments, uncommitted hand
    edits). With a server running, index lag is measured again for up to
    ``wait_seconds`` before it counts (the watcher may be catching up).
    """
    import apsw

    from wiki_memory.datadir import ServerLock, server_address
    from wiki_memory.index.store import SCHEMA_VERSION, Index, read_wiki_root

    errors: list[str] = []
    warnings: list[str] = []
    source = "settings"
    if follow_index:
        root = read_wiki_root(settings.index_path)
        if root is not None and root != settings.wiki_dir and root.is_dir():
            settings = dataclasses.replace(settings, wiki_path=root)
            source = "index"
    rep: dict[str, Any] = {
        "data_dir": str(settings.data_dir),
        "wiki": str(settings.wiki_dir),
        "wiki_source": source,
    }

    lock = ServerLock(settings.data_dir)
    running = settings.data_dir.exists() and lock.is_held_elsewhere()
    rep["lock"] = {"server_running": running}
    if running:
        rep["lock"]["holder"] = lock.holder()
        rep["lock"]["address"] = addr = server_address(settings.data_dir)
        commits = _server_commits(addr, settings.ca_file)
        if commits is not None:
            rep["commits"] = commits
            if not commits.get("ok", True):
                errors.append(
                    f"the running server cannot commit since {commits.get('since')} "
                    f"({commits.get('cause')}); every change stays on disk. "
                    f"Remedy: {commits.get('remedy')}"
                )
    elif (settings.data_dir / "server.json").exists():
        warnings.append("server.json names a server that is not running (it stopped uncleanly)")

    refused = _refused_captures(settings.data_dir / "outbox")
    rep["refused"] = refused
    for project, entry in sorted(refused.items()):
        warnings.append(
            f"capture refused by the server for project {project}: {entry.get('count')} "
            f"event(s) dropped (last {entry.get('last')}): {entry.get('message')}"
        )
    rep["hooks"] = _hooks_report(settings.data_dir, warnings)
    # (the hook's outbox: on a machine that only runs hooks there is no wiki)
    wiki = settings.wiki_dir
    if not wiki.is_dir():
        errors.append(f"the wiki folder {wiki} does not exist")
        rep.update(ok=False, errors=errors, warnings=warnings)
        return rep

    git = _git_report(wiki)
    errors += git.pop("errors")
    warnings += git.pop("warnings")
    if git.get("uncommitted_pages"):
        n = len(git["uncommitted_pages"])
        warnings.append(
            f"{n} page(s) changed and not committed yet"
            + ("" if running else " (the server commits them when it starts)")
        )
    rep["git"] = git

    on_disk, skipped = _scan_files(wiki)
    rep["skipped"] = skipped
    rep["pages"] = {"on_disk": len(on_disk)}
    rep["names"] = names = _odd_names(on_disk)
    if names["decomposed"]:
        warnings.append(
            f"{len(names['decomposed'])} page name(s) in decomposed Unicode (served and "
            "written under that exact name): " + ", ".join(names["decomposed"][:5])
        )
    if names["case_twins"]:
        warnings.append(
            f"{len(names['case_twins'])} group(s) of page names differing only in case or "
            "Unicode form (separate pages here; one file on a case-insensitive disk): "
            + "; ".join(" = ".join(g) for g in names["case_twins"][:5])
        )

    if names["unportable"]:
        warnings.append(
            f"{len(names['unportable'])} page name(s) Windows cannot check out (they work "
            "here; a clone on Windows fails on them): " + ", ".join(names["unportable"][:5])
        )

    reach_roots = [settings.data_dir]
    if settings.wiki_path is not None:  # a vault's pages are its owner's business
        reach_roots.append(settings.wiki_dir / ".git")
    rep["reachable_by_others"] = reach = _others_reach(reach_roots)
    if reach:
        warnings.append(
            f"{len(reach)} file(s) or folder(s) other local accounts can read: "
            + ", ".join(reach[:5])
            + f" (fix: chmod 700 {settings.data_dir}"
            + (f" {settings.wiki_dir / '.git'}" if settings.wiki_path is not None else "")
            + ")"
        )

    db = settings.index_path
    index_ok = False
    if not db.exists():
        errors.append("no index.db: run `wiki-memory reindex` (or start the server)")
    else:
        try:
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            version = conn.pragma("user_version")
            conn.close()
        except apsw.Error as exc:
            errors.append(f"index.db cannot be read: {exc}")
            version = None
        if version is not None and version != SCHEMA_VERSION:
            errors.append(
                f"index.db has schema {version}, this version needs {SCHEMA_VERSION}: "
                "run `wiki-memory reindex`"
            )
        elif version is not None:
            index_ok = True
    if index_ok:
        idx = Index(db)
        try:
            deadline = time.monotonic() + (wait_seconds if running else 0)
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
                    from wiki_memory.index.files import read_file, sha256

                    hashes = idx.paths()
                    stale = [
                        p
                        for p in stale
                        if (raw := read_file(wiki / p)) is None or sha256(raw) != hashes.get(p)
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
                errors.append(
                    f"the index is behind the files: {len(missing)} page(s) not indexed, "
                    f"{len(stale)} changed, {len(extra)} gone"
                    + (
                        ""
                        if running
                        else " (the server catches up at start; or `wiki-memory reindex`)"
                    )
                )
            diags = idx.page_diagnostics()
            rep["pages"]["diagnostics"] = diags
            if diags:
                kinds: dict[str, int] = {}
                for d in diags:
                    kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
                warnings.append(
                    "page diagnostics: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
                )
            problems = idx.problem_links()
            rep["links"] = {"stats": idx.link_stats(), "problems": problems}
            counts: dict[str, int] = {}
            for pr in problems:
                counts[pr["status"]] = counts.get(pr["status"], 0) + 1
            for status, n in sorted(counts.items()):
                warnings.append(f"{n} {status.replace('_', ' ')} link(s)")
            copies = sorted(p for p in on_disk if p.endswith(".server-copy.md"))
            if copies:
                warnings.append(
                    f"{len(copies)} unmerged server copy(ies) beside hand-edited pages: "
                    + ", ".join(copies[:5])
                )
                rep["pages"]["server_copies"] = copies
        finally:
            idx.close()
    if skipped:
        warnings.append(f"{len(skipped)} file(s) skipped (see the list)")
    from wiki_memory.core.sync import sync_lines, sync_status

    rep["sync"] = sync_status(wiki)
    warnings.extend(sync_lines(wiki))
    rep.update(ok=not errors, errors=errors, warnings=warnings)
    return rep


def _refused_captures(outbox: Path) -> dict[str, dict[str, Any]]:
    """What the installed hook counted in ``outbox/refused.json``: project -> ``{count,
    status, message, last}`` for events the server refused for good (``capture_refused``,
    docs/team-server.md)."""
    try:
        data = json.loads((outbox / "refused.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def print_report(rep: dict[str, Any], limit: int) -> None:
    def more(items: list[Any]) -> str:
        return f"  … and {len(items) - limit} more" if len(items) > limit else ""

    print(f"wiki:  {rep['wiki']}")
    if rep.get("wiki_source") == "index":
        print("       (the folder this data directory's index was built from; --wiki for another)")
    lock = rep.get("lock", {})
    print(
        "lock:  "
        + (
            f"held by a running server ({lock.get('holder')})"
            if lock.get("server_running")
            else "free (no server running)"
        )
    )
    git = rep.get("git") or {}
    if git.get("repository"):
        print(
            f"git:   branch {git.get('branch') or '(detached)'}, HEAD {str(git.get('head') or '-')[:12]}, "
            f"{len(git.get('uncommitted_pages', []))} uncommitted page(s)"
        )
    sync = rep.get("sync") or {}
    for name, r in sorted((sync.get("remotes") or {}).items()):
        print(
            f"sync:  {name} ({r['url']}): last success {r['last_success'] or 'never'}"
            + (f", last error: {r['last_error']}" if r["last_error"] else "")
        )
    hooks = rep.get("hooks") or {}
    ob = hooks.get("outbox")
    if ob:
        dropped = sum(ob["dropped"].values())
        print(f"hooks: {ob['queued']} event(s) queued, {dropped} dropped ({ob['path']})")
    for h in hooks.get("installed", []):
        print(f"  {h['agent']}: {h['file']} -> {h['target'] or '(not pinned)'}")
    idx = rep.get("index")
    if idx:
        print(
            f"index: {idx['pages']} pages indexed, {rep['pages']['on_disk']} on disk, lag {idx['lag']}"
        )
    links = rep.get("links")
    if links:
        s = links["stats"]
        print(
            f"links: {s['links']} ({s['embeds']} embeds): {s['resolved']} resolved, "
            f"{s['unresolved']} unresolved, {s['ambiguous']} ambiguous; "
            f"{s['attachments']} to attachments ({s['missing_attachments']} missing)"
        )
        probs = links["problems"]
        for pr in probs[:limit]:
            extra = f" -> {', '.join(pr['candidates'][:3])}" if pr["candidates"] else ""
            print(f"  {pr['status']}: {pr['src_path']}:{pr['line']} [[{pr['target']}]]{extra}")
        if more(probs):
            print(more(probs))
    diags = (rep.get("pages") or {}).get("diagnostics") or []
    if diags:
        print("page diagnostics:")
        for d in diags[:limit]:
            print(f"  {d['path']}:{d.get('line') or '-'} {d['kind']}: {d['message']}")
        if more(diags):
            print(more(diags))
    skipped = rep.get("skipped") or []
    if skipped:
        print("skipped files:")
        for sk in skipped[:limit]:
            print(f"  {sk['path']}: {sk['reason']}")
        if more(skipped):
            print(more(skipped))
    for w in rep["warnings"]:
        print(f"warning: {w}")
    for e in rep["errors"]:
        print(f"ERROR: {e}")
    print("healthy" if rep["ok"] else "problems found")


def fix(settings: Settings) -> None:
    """``doctor --fix``: remove git locks proven stale (wiki/locks.py); say what was done."""
    from wiki_memory.index.store import read_wiki_root
    from wiki_memory.wiki.locks import remove_stale

    wiki = settings.wiki_dir
    root = read_wiki_root(settings.index_path)
    if settings.wiki_path is None and root is not None and root.is_dir():
        wiki = root
    git_dir = wiki / ".git"
    if not git_dir.is_dir():
        return
    removed, kept = remove_stale(git_dir)
    for r in removed:
        print(f"fixed: removed {r}")
    for k in kept:
        print(f"not removed: {k}")
