"""CLI subcommands for harness hooks: ``install-hooks``, ``uninstall-hooks``, ``recover``.

- ``wiki-memory install-hooks --agent claude-code|codex|gemini-cli [--apply]``
  prints the plan (file, events, command, timeout); ``--apply`` writes it.
- ``wiki-memory uninstall-hooks --agent ... [--apply]`` removes only our handlers.
- ``wiki-memory recover`` sends every event waiting in the hook's outbox now.

Exit status: 0 on success (also when there is nothing to do), 1 when a file
cannot be changed safely or events remain undelivered, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError
from wiki_memory.cli.declare import add_command, add_flag
from wiki_memory.cli.plans import show_or_apply


def _data_dir(args: argparse.Namespace) -> Path | None:
    d = getattr(args, "data_dir", None)
    return Path(d).expanduser().resolve() if d else None


def pinned_data_dir(args: argparse.Namespace) -> Path:
    """The data directory an installed hook is pinned to: ``--data-dir``, else
    ``$WIKI_MEMORY_HOME``, else the platform default, made absolute."""
    from wiki_memory.config import default_data_dir

    return (_data_dir(args) or default_data_dir()).expanduser().resolve()


def cmd_install_hooks(args: argparse.Namespace) -> int:
    """Print (and with ``--apply`` write) the harness configuration with our hook."""
    from wiki_memory.harness import hooks_install as hi

    if args.url and not args.token_file:
        raise CliError("--url needs --token-file", 2)
    return show_or_apply(
        lambda: hi.plan_install(
            args.agent,
            Path(args.settings).expanduser() if args.settings else None,
            python=args.python,
            script=Path(args.hook_script).expanduser().resolve() if args.hook_script else None,
            data_dir=pinned_data_dir(args),
            url=args.url,
            token_file=Path(args.token_file).expanduser().resolve() if args.token_file else None,
            ca_file=getattr(args, "ca_file", None),
        ),
        hi.describe,
        hi.apply,
        args.apply,
    )


def cmd_uninstall_hooks(args: argparse.Namespace) -> int:
    """Print (and with ``--apply`` write) the configuration without our hook."""
    from wiki_memory.harness import hooks_install as hi

    settings = Path(args.settings).expanduser() if args.settings else None
    return show_or_apply(
        lambda: hi.plan_uninstall(args.agent, settings), hi.describe, hi.apply, args.apply
    )


def cmd_recover(args: argparse.Namespace) -> int:
    """Deliver the hook outbox now; print what happened."""
    from wiki_memory.harness.outbox import recover

    try:
        res = recover(
            _data_dir(args),
            args.url,
            args.token_file,
            wait_seconds=args.wait,
            request_seconds=args.timeout,
        )
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if res.busy:
        print(
            f"another drainer is still sending from {res.outbox}; "
            f"{res.left} event(s) waiting (try again shortly)"
        )
        return 1
    if not (res.sent or res.rejected or res.corrupt or res.left or res.failed):
        print(f"outbox empty ({res.outbox}); nothing to send")
    else:
        print(
            f"sent {res.sent} event(s) to {res.url or 'no server'}"
            + (f" ({res.duplicates} the server already had)" if res.duplicates else "")
            + (f", dropped {res.rejected} rejected by the server" if res.rejected else "")
            + (f", dropped {res.corrupt} unreadable" if res.corrupt else "")
            + f"; {res.left} left in {res.outbox}"
        )
    if res.dropped:
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(res.dropped.items()))
        print(f"dropped so far ({res.outbox / 'dropped.jsonl'}): {counts}")
    if res.failed and not res.url:
        print(
            f"wiki-memory: no server is running on {res.outbox.parent} (none is ever assumed "
            "at a default port); it sends the outbox itself when it starts",
            file=sys.stderr,
        )
    elif res.failed:
        print(
            f"wiki-memory: the server at {res.url} is not taking events; try again later",
            file=sys.stderr,
        )
    return 0 if res.ok else 1


def harness_options(p: argparse.ArgumentParser, agents: list[str], settings_help: str) -> None:
    """Add what ``install-hooks`` and ``uninstall-hooks`` both take to ``p``: ``--agent``
    (one of ``agents``, required), ``--apply`` and ``--settings`` (``settings_help``)."""
    p.add_argument("--agent", required=True, choices=agents)
    add_flag(p, "--apply", "write the file (a backup is kept)")
    p.add_argument("--settings", help=settings_help)


def register(sub: Any) -> None:
    """Add this module's subcommands to the ``wiki-memory`` parser's subparsers."""
    from wiki_memory.harness.hooks_install import AGENTS, ALIASES

    agents = list(AGENTS) + list(ALIASES)
    i = add_command(
        sub,
        "install-hooks",
        cmd_install_hooks,
        "add the capture hook to Claude Code, Codex or Gemini CLI (prints the plan; --apply writes)",
    )
    harness_options(
        i, agents, "the configuration file to change (default: the harness's user file)"
    )
    i.add_argument("--python", help="interpreter for the hook (default: this one, shims resolved)")
    i.add_argument("--hook-script", help="hook program (default: hooks/wiki_memory_hook.py)")
    i.add_argument(
        "--url", help="a team server's URL to pin the hook to (default: the data directory's)"
    )
    i.add_argument("--token-file", help="the token file for --url (never the token itself)")

    u = add_command(
        sub,
        "uninstall-hooks",
        cmd_uninstall_hooks,
        "remove the capture hook (prints the plan; --apply writes)",
    )
    harness_options(u, agents, "the configuration file to change")

    r = add_command(sub, "recover", cmd_recover, "send the events waiting in the hook outbox now")
    r.add_argument("--url", help="server URL (default: as the hook finds it)")
    r.add_argument("--token-file", help="token file (default: as the hook finds it)")
    r.add_argument(
        "--wait",
        type=float,
        default=30.0,
        help="seconds to wait for a background drainer to finish (default 30)",
    )
    r.add_argument("--timeout", type=float, default=10.0, help="seconds per request (default 10)")


__all__ = ["register", "cmd_install_hooks", "cmd_uninstall_hooks", "cmd_recover"]
