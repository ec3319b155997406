"""``doctor``'s checks of the harnesses' own gates, which switch a hook off without a
word: a hook the harness never ran since it was installed (Codex runs a new or changed
hook only after the user trusts it; Gemini CLI may have hooks off), a hook whose command
changed since ``install-hooks`` wrote it (Codex asks to trust it again), and a
project-scope hook file (Codex also reads ``<repo>/.codex/hooks.json``). The report
names the last event each harness's hook sent (``<outbox>/ran-<harness>.json``, written
by the hook at most every 30 s)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wiki_memory.cli.doctor import Context

__all__ = ["GATE_HINTS", "check_hook_runs", "last_runs", "project_hook_files"]

#: what to look at when a harness never ran our hook
GATE_HINTS = {
    "codex": "Codex runs a new or changed hook only after you trust it: start Codex and "
    "accept the wiki-memory hook",
    "gemini-cli": "run `/hooks` in Gemini CLI: ours should be listed and enabled",
    "claude-code": "start a new Claude Code session (`/hooks` lists the hooks it loaded)",
}


def last_runs(data_dir: Path) -> dict[str, dict[str, Any]]:
    """``{harness: {"event", "time"}}``: the last event each harness's hook recorded."""
    out: dict[str, dict[str, Any]] = {}
    outbox = data_dir / "outbox"
    try:
        names = os.listdir(outbox)
    except OSError:
        return out
    for name in names:
        if name.startswith("ran-") and name.endswith(".json"):
            try:
                rec = json.loads((outbox / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("time"), int | float):
                out[name[4:-5]] = {"event": rec.get("event"), "time": float(rec["time"])}
    return out


def project_hook_files(start: Path) -> list[Path]:
    """Project-scope hook files from ``start`` up to its repository's root (or the
    filesystem's): Codex's ``.codex/hooks.json``."""
    found: list[Path] = []
    d = start.resolve()
    while True:
        f = d / ".codex" / "hooks.json"
        if f.is_file():
            found.append(f)
        if (d / ".git").exists() or d.parent == d:
            return found
        d = d.parent


def check_hook_runs(ctx: Context) -> None:
    """Hooks installed for this data directory that never ran since their install, or
    whose command changed since; project-scope hook files; the last event per harness
    (``hook_runs`` in the report)."""
    from wiki_memory.harness.hooks_install import AGENTS, installed_commands, read_installs

    data_dir = ctx.settings.data_dir.expanduser().resolve()
    runs = last_runs(data_dir)
    ctx.rep["hook_runs"] = {
        h: {**r, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["time"]))}
        for h, r in runs.items()
    }
    for agent, rec in sorted(read_installs(data_dir).items()):
        spec = AGENTS.get(agent)
        if spec is None:
            continue
        path = Path(str(rec.get("path") or spec.default_path()))
        now = installed_commands(path)
        if not now:
            continue  # uninstalled since: nothing of ours to run
        fix = f"wiki-memory install-hooks --agent {agent} --apply"
        if rec.get("command") not in now:
            ctx.warn(
                f"the {spec.label} hook in {path} changed since install-hooks wrote it"
                + (": Codex runs it only once you trust it again" if agent == "codex" else ""),
                fix,
            )
        ran = runs.get(agent)
        since = float(rec.get("time") or 0)
        if ran is None or ran["time"] < since - 5:
            ctx.warn(
                f"the {spec.label} hook installed in {path} has not run since its install: "
                f"nothing from {spec.label} is captured. {GATE_HINTS.get(agent, '')}".rstrip(),
            )
    for f in project_hook_files(Path.cwd()):
        try:
            text = f.read_text(encoding="utf-8")
        except OSError:
            continue
        ours = "wiki_memory_hook" in text
        ctx.info(
            f"project-scope hook file {f}: Codex reads it beside ~/.codex/hooks.json"
            + (
                " and it runs our hook too (each event may be sent twice)"
                if ours
                else "; its hooks need your trust like ours"
            )
        )
