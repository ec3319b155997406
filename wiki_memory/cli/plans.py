"""A harness configuration plan shown, and with ``--apply`` written: what ``install-hooks``,
``uninstall-hooks``, ``install-mcp`` and ``uninstall-mcp`` share (the plans are made in
:mod:`wiki_memory.harness.hooks_install` and :mod:`wiki_memory.harness.mcp_install`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from wiki_memory.cli.common import CliError

__all__ = ["show_or_apply"]


def show_or_apply(
    make: Callable[[], Any],
    describe: Callable[[Any], str],
    apply: Callable[[Any], Path | None],
    do_apply: bool,
) -> int:
    """Make the plan (``make()``), print ``describe(plan)``; with ``do_apply`` write it
    with ``apply(plan)`` (a backup first) and name the file written, else say how to when
    it would change anything. Returns exit code 0; an
    :class:`~wiki_memory.harness.hooks_install.InstallError` becomes :class:`CliError`
    (exit 1, its message)."""
    from wiki_memory.harness.hooks_install import InstallError

    try:
        plan = make()
        print(describe(plan))
        if not do_apply:
            if plan.changed:
                print("(dry run: run again with --apply to write it)")
            return 0
        backup = apply(plan)
    except InstallError as exc:
        raise CliError(str(exc)) from None
    if plan.changed:
        print(f"wrote {plan.path}" + (f" (backup: {backup})" if backup else ""))
    return 0
