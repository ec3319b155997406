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
from collections.abc import Callable, Iterable
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


def _server_health(address: str | None, ca_file: Path | None = None) -> dict[str, Any] | None:
    """The running server's ``GET /v1/health`` answer (None if unreachable; an https
    server is trusted through ``ca_file`` besides the system's CAs)."""
    if not address:
        return None
    import httpx

    from wiki_memory.config import tls_verify

    try:
        r = httpx.get(address.rstrip("/") + "/v1/health", timeout=3, verify=tls_verify(ca_file))
        body = r.json()
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _server_commits(address: str | None, ca_file: Path | None = None) -> dict[str, Any] | None:
    """The running server's commit status from ``GET /v1/health`` (None if unreachable)."""
    commits = (_server_health(address, ca_file) or {}).get("commits")
    return commits if isinstance(commits, dict) else None


def _hooks_report(ctx: Context) -> dict[str, Any]:
    """The hook side of the data directory: its outbox (queued and dropped events, whether
    the hooks found the server unreachable) and, for each harness whose configuration file
    (as install-hooks finds it, profile variables included) holds our hook, what that hook
    is pinned to. Errors: events queued (capture is not reaching the server), a hook pinned
    to another store, a hook whose interpreter or program is gone. Warnings: a hook not
    pinned at all, dropped events, the hooks' back-off."""
    import shlex

    from wiki_memory.harness.hooks_install import AGENTS, installed_commands, pinned_target
    from wiki_memory.harness.outbox import status

    data_dir = ctx.settings.data_dir
    out: dict[str, Any] = {"installed": []}
    try:
        st = status(data_dir)
    except FileNotFoundError as exc:
        ctx.warn(f"hook outbox not checked: {exc}")
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
            ctx.error(
                f"{st.queued} hook event(s) queued in {st.outbox}{age}: capture is not "
                "reaching the server; a running server on this data directory sends them "
                "into itself (or `wiki-memory recover`)",
                "wiki-memory recover",
            )
        if st.dropped:
            counts = ", ".join(f"{n} {k}" for k, n in sorted(st.dropped.items()))
            ctx.warn(f"hook events dropped so far: {counts} ({st.outbox}/dropped.jsonl)")
        if st.unreachable and time.time() < float(st.unreachable.get("until") or 0):
            since = time.strftime("%H:%M", time.localtime(float(st.unreachable["since"])))
            ctx.warn(
                f"the hooks found the server {st.unreachable.get('url')} unreachable since "
                f"{since} ({st.unreachable.get('error')}); they skip the network for a while"
            )
    mine = str(Path(data_dir).expanduser().resolve())
    for spec in AGENTS.values():
        path = spec.default_path()
        fix = f"wiki-memory install-hooks --agent {spec.name} --apply"
        for cmd in installed_commands(path):
            target = pinned_target(cmd)
            out["installed"].append({"agent": spec.name, "file": str(path), "target": target})
            try:
                words = shlex.split(cmd.split(" || ", 1)[0])
            except ValueError:
                words = []
            if words and not _runnable(words[0]):
                ctx.error(
                    f"{spec.label} hook in {path} runs {words[0]}, which does not exist: no "
                    "event is captured",
                    fix,
                )
            elif len(words) > 2 and words[1] == "-S" and not Path(words[2]).is_file():
                ctx.error(
                    f"{spec.label} hook in {path} runs {words[2]}, which does not exist: no "
                    "event is captured",
                    fix,
                )
            if target is None:
                ctx.warn(
                    f"{spec.label} hook in {path} is not pinned to a data directory: it "
                    "follows whatever WIKI_MEMORY_HOME the harness passes (run install-hooks "
                    "again)",
                    fix,
                )
            elif not target.startswith(("http://", "https://")) and target != mine:
                ctx.error(
                    f"{spec.label} hook in {path} points to another store: {target} "
                    f"(this is {mine})",
                    f"wiki-memory --data-dir {shlex.quote(mine)} install-hooks "
                    f"--agent {spec.name} --apply",
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


# --------------------------------------------------------------------------------------
# The registry: every check doctor runs, in order. A feature adds its own with one line,
# ``register(Check("name", "wiki_memory.room.module:function"))`` (docs/operations.md).
# --------------------------------------------------------------------------------------

#: severities, worst first: an ``error`` makes doctor exit 1; a ``warning`` does with
#: ``--strict``; ``info`` is only reported
SEVERITIES = ("error", "warning", "info")


@dataclasses.dataclass
class Finding:
    """One thing a check found: ``severity`` (one of :data:`SEVERITIES`), ``message``
    (for people), ``fix`` (the command that fixes it, or None) and ``safe`` (``doctor
    --fix`` runs that command itself: it changes nothing a person wrote)."""

    severity: str
    message: str
    fix: str | None = None
    safe: bool = False
    check: str = ""
    apply: Callable[[], str] | None = dataclasses.field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "safe": self.safe,
        }


class Context:
    """What every check reads and where it reports: ``settings``, ``rep`` (the report a
    check adds its own keys to), ``running`` and ``address`` (the server on this data
    directory), and :meth:`error` / :meth:`warn` / :meth:`info` to add a finding.
    ``stop`` set by a check skips the checks after it (the wiki is missing)."""

    def __init__(self, settings: Settings, wait_seconds: float) -> None:
        self.settings = settings
        self.wait_seconds = wait_seconds
        self.rep: dict[str, Any] = {}
        self.findings: list[Finding] = []
        self.running = False
        self.address: str | None = None
        self.stop = False
        self.current = ""
        self.on_disk: dict[str, os.stat_result] = {}

    def add(
        self,
        severity: str,
        message: str,
        fix: str | None = None,
        safe: bool = False,
        apply: Callable[[], str] | None = None,
    ) -> Finding:
        f = Finding(severity, message, fix, safe and apply is not None, self.current, apply)
        self.findings.append(f)
        return f

    def error(self, message: str, fix: str | None = None, **kw: Any) -> Finding:
        return self.add("error", message, fix, **kw)

    def warn(self, message: str, fix: str | None = None, **kw: Any) -> Finding:
        return self.add("warning", message, fix, **kw)

    def info(self, message: str, fix: str | None = None, **kw: Any) -> Finding:
        return self.add("info", message, fix, **kw)


@dataclasses.dataclass(frozen=True)
class Check:
    """A named check: ``run`` is a function of a :class:`Context` (or its
    ``"module:function"`` path, imported when doctor runs, so a check in a higher room
    costs nothing until then). ``needs_wiki``: skipped when the wiki folder is missing."""

    name: str
    run: Callable[[Context], None] | str
    needs_wiki: bool = False

    def function(self) -> Callable[[Context], None]:
        if callable(self.run):
            return self.run
        import importlib

        module, _, attr = self.run.partition(":")
        fn: Callable[[Context], None] = getattr(importlib.import_module(module), attr)
        return fn


#: every check, in the order doctor runs them (see :func:`register`)
CHECKS: list[Check] = []


def register(check: Check) -> Check:
    """Add ``check`` to :data:`CHECKS` (after the others; a check of the same name is
    replaced in place). Returns it."""
    for i, c in enumerate(CHECKS):
        if c.name == check.name:
            CHECKS[i] = check
            return check
    CHECKS.append(check)
    return check


def check_server(ctx: Context) -> None:
    """The server lock: is a server running on this data directory, can it commit."""
    from wiki_memory.datadir import ServerLock, server_address

    settings = ctx.settings
    lock = ServerLock(settings.data_dir)
    running = settings.data_dir.exists() and lock.is_held_elsewhere()
    ctx.running = running
    ctx.rep["lock"] = {"server_running": running}
    if running:
        ctx.rep["lock"]["holder"] = lock.holder()
        ctx.rep["lock"]["address"] = ctx.address = server_address(settings.data_dir)
        commits = _server_commits(ctx.address, settings.ca_file)
        if commits is not None:
            ctx.rep["commits"] = commits
            if not commits.get("ok", True):
                remedy = str(commits.get("remedy") or "")
                ctx.error(
                    f"the running server cannot commit since {commits.get('since')} "
                    f"({commits.get('cause')}); every change stays on disk. Remedy: {remedy}",
                    "wiki-memory doctor --fix" if "doctor --fix" in remedy else None,
                )
    elif (settings.data_dir / "server.json").exists():
        ctx.warn("server.json names a server that is not running (it stopped uncleanly)")


def check_service(ctx: Context) -> None:
    """The per-user service of ``wiki-memory setup``: installed for this data directory
    and running (a unit for this data directory with no server running is an error)."""
    from wiki_memory.harness import service

    kind = service.kind_for_platform()
    st = service.state(kind)
    rep: dict[str, Any] = st.as_dict()
    serves = _unit_data_dir(st.path) if st.installed else None
    mine = str(ctx.settings.data_dir.expanduser().resolve())
    rep["data_dir"] = serves
    rep["for_this_data_dir"] = serves == mine
    ctx.rep["service"] = rep
    start = (
        f"systemctl --user start {service.UNIT_NAME}"
        if kind == "user"
        else f"launchctl kickstart gui/{os.getuid()}/{service.LAUNCHD_LABEL}"
    )
    if not st.installed:
        ctx.info("no service keeps the server running", "wiki-memory setup")
    elif serves != mine:
        ctx.info(f"the installed service serves another data directory: {serves}")
    elif not ctx.running:
        ctx.error(
            f"the service {st.path} is installed but no server runs on {mine}: hooks "
            "spool to the outbox and the session-start brief is empty"
            + ("" if st.enabled else " (and it is not enabled at login)"),
            start,
        )
    elif not st.enabled:
        ctx.warn(f"the service {st.path} is not enabled: it will not start at the next login")


def _unit_data_dir(path: Path) -> str | None:
    """The ``--data-dir`` a service file runs the server for (None when unreadable)."""
    from wiki_memory.harness.service import exec_start_argv

    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if path.suffix == ".plist":
        import re
        from xml.sax.saxutils import unescape

        args = [unescape(a) for a in re.findall(r"<string>(.*?)</string>", text)]
    else:
        try:
            args = exec_start_argv(text)
        except ValueError:
            return None
    for i, a in enumerate(args[:-1]):
        if a == "--data-dir":
            return str(Path(args[i + 1]).expanduser().resolve())
    return None


def check_outbox(ctx: Context) -> None:
    """Events the server refused for good (``refused.json``) and the hooks' outbox."""
    refused = _refused_captures(ctx.settings.data_dir / "outbox")
    ctx.rep["refused"] = refused
    for project, entry in sorted(refused.items()):
        ctx.warn(
            f"capture refused by the server for project {project}: {entry.get('count')} "
            f"event(s) dropped (last {entry.get('last')}): {entry.get('message')}"
        )


def check_hooks(ctx: Context) -> None:
    """Each harness's hooks: present, pinned to this data directory, with an interpreter
    and a hook program that exist; the outbox's queued and dropped events."""
    ctx.rep["hooks"] = _hooks_report(ctx)


def check_mcp(ctx: Context) -> None:
    """Each MCP client's user-level entry of ours: its interpreter and bridge exist and it
    names this data directory (or a team server's URL)."""
    from wiki_memory.harness import mcp_install as mi

    mine = str(ctx.settings.data_dir.expanduser().resolve())
    out: list[dict[str, Any]] = []
    for client, label in mi.CLIENTS.items():
        try:
            path = mi.config_path(client, "user")
            entry = mi.read_entry(client, path)
        except (mi.InstallError, OSError):
            continue
        if entry is None:
            continue
        cmd = str(entry.get("command") or "")
        args = [str(a) for a in entry.get("args") or []]
        target = None
        for i, a in enumerate(args[:-1]):
            if a in ("--data-dir", "--url") and (target is None or a == "--url"):
                target = args[i + 1]
        out.append({"client": client, "file": str(path), "target": target})
        fix = f"wiki-memory install-mcp --client {client} --apply"
        if not _runnable(cmd):
            ctx.error(f"{label} MCP entry in {path} runs {cmd}, which does not exist", fix)
        elif args and args[0] == "-S" and len(args) > 1 and not Path(args[1]).is_file():
            ctx.error(f"{label} MCP entry in {path} runs {args[1]}, which does not exist", fix)
        elif target and not target.startswith(("http://", "https://")):
            if str(Path(target).expanduser().resolve()) != mine:
                ctx.warn(f"{label} MCP entry in {path} points to another store: {target}")
    ctx.rep["mcp"] = out


def _runnable(cmd: str) -> bool:
    """True when ``cmd`` (an absolute path, or a name on PATH) is an executable file."""
    import shutil

    if os.sep in cmd:
        return os.path.isfile(cmd) and os.access(cmd, os.X_OK)
    return shutil.which(cmd) is not None


def check_token(ctx: Context) -> None:
    """The owner's token file: present once the data directory is set up, owner-only."""
    path = ctx.settings.auth_dir / "owner.token"
    ctx.rep["token_file"] = {"path": str(path), "exists": path.is_file()}
    if not path.is_file():
        if ctx.settings.wiki_dir.is_dir():
            ctx.warn(
                f"no owner token in {path} (the server creates it at start)", "wiki-memory setup"
            )
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    ctx.rep["token_file"]["mode"] = f"{mode:o}"
    if mode & 0o077:

        def tighten() -> str:
            os.chmod(path, 0o600)
            return f"chmod 600 {path}"

        ctx.error(
            f"the owner token {path} is readable by others (mode {mode:o})",
            f"chmod 600 {path}",
            safe=True,
            apply=tighten,
        )


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
    on_disk, skipped = _scan_files(ctx.settings.wiki_dir)
    ctx.on_disk = on_disk
    ctx.rep["skipped"] = skipped
    ctx.rep["pages"] = {"on_disk": len(on_disk)}
    ctx.rep["names"] = names = _odd_names(on_disk)
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
        if version is not None and version != SCHEMA_VERSION:
            ctx.error(
                f"index.db has schema {version}, this version needs {SCHEMA_VERSION}: "
                "run `wiki-memory reindex`",
                "wiki-memory reindex",
            )
        elif version is not None:
            index_ok = True
    if not index_ok:
        return
    idx = Index(db)
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


for _check in (
    Check("server", check_server),
    Check("service", check_service),
    Check("outbox", check_outbox),
    Check("hooks", check_hooks),
    Check("mcp", check_mcp),
    Check("token", check_token),
    Check("wiki", check_wiki),
    Check("git", check_git, needs_wiki=True),
    Check("fsck", check_fsck, needs_wiki=True),
    Check("names", check_names, needs_wiki=True),
    Check("modes", check_modes, needs_wiki=True),
    Check("index", check_index, needs_wiki=True),
    Check("skipped", check_skipped, needs_wiki=True),
):
    register(_check)
register(Check("sync", "wiki_memory.cli.replicas:check_sync", needs_wiki=True))


def run_checks(
    settings: Settings, wait_seconds: float = 3.0, follow_index: bool = False
) -> tuple[dict[str, Any], list[Finding]]:
    """Run every check of :data:`CHECKS` on ``settings``; returns the report (see
    :func:`doctor_report`) and the findings. A check that raises is itself an error
    finding naming it; the others still run."""
    from wiki_memory.index.store import read_wiki_root

    source = "settings"
    if follow_index:
        root = read_wiki_root(settings.index_path)
        if root is not None and root != settings.wiki_dir and root.is_dir():
            settings = dataclasses.replace(settings, wiki_path=root)
            source = "index"
    ctx = Context(settings, wait_seconds)
    ctx.rep.update(data_dir=str(settings.data_dir), wiki=str(settings.wiki_dir), wiki_source=source)
    for check in list(CHECKS):
        if check.needs_wiki and ctx.stop:
            continue
        ctx.current = check.name
        try:
            check.function()(ctx)
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the rest
            ctx.error(f"the {check.name} check failed: {type(exc).__name__}: {exc}")
    errors = [f.message for f in ctx.findings if f.severity == "error"]
    warnings = [f.message for f in ctx.findings if f.severity == "warning"]
    rep = ctx.rep
    rep.update(
        ok=not errors,
        errors=errors,
        warnings=warnings,
        findings=[f.as_dict() for f in ctx.findings],
    )
    return rep, ctx.findings


def doctor_report(
    settings: Settings, wait_seconds: float = 3.0, follow_index: bool = False
) -> dict[str, Any]:
    """Run every registered check (:data:`CHECKS`); never changes anything.

    ``follow_index``: when the index was built from another existing folder than
    ``settings.wiki_dir`` (the data directory last served a vault with ``serve --wiki``),
    check that folder, and say so in ``wiki_source`` (``"index"``, else ``"settings"``).

    Returns ``{"ok", "errors", "warnings", "findings", "lock", "service", "hooks", "mcp",
    "git", "index", "pages", "links", "skipped", ...}``: ``findings`` is every finding as
    ``{"check", "severity", "message", "fix", "safe"}``; ``errors`` and ``warnings`` are
    the messages of the error and warning ones; any error makes ``ok`` False. With a
    server running, index lag is measured again for up to ``wait_seconds`` before it
    counts (the watcher may be catching up).
    """
    return run_checks(settings, wait_seconds, follow_index)[0]


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
    svc = rep.get("service")
    if svc:
        print(
            f"service: {svc['path']} "
            + (
                ("installed, " + ("enabled" if svc["enabled"] else "not enabled"))
                if svc["installed"]
                else "not installed"
            )
        )
    order = {"info": 0, "warning": 1, "error": 2}
    for f in sorted(rep.get("findings", []), key=lambda f: order.get(f["severity"], 0)):
        label = {"error": "ERROR", "warning": "warning"}.get(f["severity"], "note")
        print(f"{label}: {f['message']}")
        if f.get("fix"):
            print(f"  fix: {f['fix']}" + ("  (doctor --fix does this)" if f.get("safe") else ""))
    print("healthy" if rep["ok"] else "problems found")


def fix(settings: Settings, follow_index: bool = True) -> list[str]:
    """``doctor --fix``: run the checks, then apply each finding's safe fix (stale git
    locks removed, owner-only modes on the data directory and the token file); print and
    return what was done. Fixes that need a person (a hook pinned elsewhere, a stopped
    service, a backlog) are left to the command the report names."""
    from wiki_memory.index.store import read_wiki_root
    from wiki_memory.wiki.locks import remove_stale

    done: list[str] = []
    wiki = settings.wiki_dir
    root = read_wiki_root(settings.index_path)
    if settings.wiki_path is None and root is not None and root.is_dir():
        wiki = root
    if (wiki / ".git").is_dir():
        removed, kept = remove_stale(wiki / ".git")
        for r in removed:
            done.append(f"removed {r}")
            print(f"fixed: removed {r}")
        for k in kept:
            print(f"not removed: {k}")
    _, findings = run_checks(settings, wait_seconds=0, follow_index=follow_index)
    for f in findings:
        if f.safe and f.apply is not None:
            try:
                what = f.apply()
            except OSError as exc:
                what = f"could not fix ({f.check}): {exc}"
            if what:
                done.append(what)
                print(f"fixed: {what}")
    return done
