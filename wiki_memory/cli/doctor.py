"""``wiki-memory doctor``'s checks: :func:`doctor_report` looks at a wiki, its index, git
and the server lock without changing anything and says what is wrong;
:func:`print_report` prints it for people; :func:`fix` is ``doctor --fix`` (git locks
proven stale are removed, :mod:`wiki_memory.wiki.locks`). This module is the registry
(:class:`Check`, :func:`register`, :class:`Context`, :class:`Finding`) and the runner;
the checks themselves are :mod:`wiki_memory.cli.checks_install` (server, service,
outbox, hooks, MCP, token) and :mod:`wiki_memory.cli.checks_store` (wiki, git, names,
modes, index). The subcommand itself (its arguments, exit status) is
:mod:`wiki_memory.cli.wiki`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wiki_memory.config import Settings

if TYPE_CHECKING:
    from wiki_memory.index.supersede import Chains

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
        """The finding as ``doctor --json`` shows it: check, severity, message, fix and
        safe, in that order (``apply`` is code, not part of the report)."""
        return {k: getattr(self, k) for k in ("check", "severity", "message", "fix", "safe")}


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
        self._chains: Chains | None = None

    def chains(self) -> Chains:
        """The index's supersession chains and conflict copies
        (:meth:`wiki_memory.index.store.Index.chains`, the owner's view), computed once
        per run for every check that reads them. Call only when the index check passed."""
        if self._chains is None:
            from wiki_memory.index.store import Index

            s = self.settings
            idx = Index(s.index_path, s.stem_language_names, s.vectors, s.vectors_model)
            try:
                self._chains = idx.chains()
            finally:
                idx.close()
        return self._chains

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


for _check in (
    Check("server", "wiki_memory.cli.checks_install:check_server"),
    Check("service", "wiki_memory.cli.checks_install:check_service"),
    Check("outbox", "wiki_memory.cli.checks_install:check_outbox"),
    Check("hooks", "wiki_memory.cli.checks_install:check_hooks"),
    Check("hook_runs", "wiki_memory.cli.checks_gates:check_hook_runs"),
    Check("mcp", "wiki_memory.cli.checks_install:check_mcp"),
    Check("token", "wiki_memory.cli.checks_install:check_token"),
    Check("user_twins", "wiki_memory.cli.checks_install:check_user_twins"),
    Check("wiki", "wiki_memory.cli.checks_store:check_wiki"),
    Check("git", "wiki_memory.cli.checks_store:check_git", needs_wiki=True),
    Check("fsck", "wiki_memory.cli.checks_store:check_fsck", needs_wiki=True),
    Check("names", "wiki_memory.cli.checks_store:check_names", needs_wiki=True),
    Check("modes", "wiki_memory.cli.checks_store:check_modes", needs_wiki=True),
    Check("index", "wiki_memory.cli.checks_store:check_index", needs_wiki=True),
    Check("skipped", "wiki_memory.cli.checks_store:check_skipped", needs_wiki=True),
    Check("supersession", "wiki_memory.cli.checks_store:check_supersession", needs_wiki=True),
    Check("unrendered", "wiki_memory.cli.checks_store:check_unrendered"),
    Check("signals", "wiki_memory.cli.checks_store:check_signals"),
    Check("repos", "wiki_memory.cli.checks_repos:check_repos", needs_wiki=True),
):
    register(_check)
register(Check("sync", "wiki_memory.cli.replicas:check_sync", needs_wiki=True))
register(Check("conflicts", "wiki_memory.cli.conflicts:check_conflicts", needs_wiki=True))
register(Check("hub_leaks", "wiki_memory.cli.checks_hub:check_hub_leaks", needs_wiki=True))


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


def print_report(rep: dict[str, Any], limit: int) -> None:
    def listed(title: str | None, items: list[Any], line: Callable[[Any], str]) -> None:
        """``title`` (when given and there are items), the first ``limit`` items, one
        line each, and how many more there are."""
        if title and items:
            print(title)
        for item in items[:limit]:
            print(f"  {line(item)}")
        if len(items) > limit:
            print(f"  … and {len(items) - limit} more")

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
            + (f", failing since {r.get('failing_since')}" if r.get("failing_since") else "")
            + (f", last error: {r['last_error']}" if r["last_error"] else "")
        )
    hooks = rep.get("hooks") or {}
    ob = hooks.get("outbox")
    if ob:
        dropped = sum(ob["dropped"].values())
        print(f"hooks: {ob['queued']} event(s) queued, {dropped} dropped ({ob['path']})")
    for h in hooks.get("installed", []):
        print(f"  {h['agent']}: {h['file']} -> {h['target'] or '(not pinned)'}")
    for name, run in sorted((rep.get("hook_runs") or {}).items()):
        print(f"  last event from {name}: {run.get('event')} at {run.get('time')}")
    idx = rep.get("index")
    if idx:
        print(
            f"index: {idx['pages']} pages indexed, {rep['pages']['on_disk']} on disk, lag {idx['lag']}"
        )
    sig = rep.get("signals")
    if sig:
        print(f"signals: {', '.join(sig['on'])}")
        print(f"vectors: {rep.get('vectors')}")
    links = rep.get("links")
    if links:
        s = links["stats"]
        print(
            f"links: {s['links']} ({s['embeds']} embeds): {s['resolved']} resolved, "
            f"{s['unresolved']} unresolved, {s['ambiguous']} ambiguous; "
            f"{s['attachments']} to attachments ({s['missing_attachments']} missing)"
        )
        listed(
            None,
            links["problems"],
            lambda pr: (
                f"{pr['status']}: {pr['src_path']}:{pr['line']} [[{pr['target']}]]"
                + (f" -> {', '.join(pr['candidates'][:3])}" if pr["candidates"] else "")
            ),
        )
    listed(
        "page diagnostics:",
        (rep.get("pages") or {}).get("diagnostics") or [],
        lambda d: f"{d['path']}:{d.get('line') or '-'} {d['kind']}: {d['message']}",
    )
    listed(
        "skipped files:",
        rep.get("skipped") or [],
        lambda sk: f"{sk['path']}: {sk['reason']}",
    )
    svc = rep.get("service")
    # a finding of the service check already says the same line, with its fix
    if svc and not any(f.get("check") == "service" for f in rep.get("findings", [])):
        from wiki_memory.harness.userservice import describe

        print(f"service: {describe(svc)}")
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
