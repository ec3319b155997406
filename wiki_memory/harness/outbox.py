"""The hook's outbox seen from the CLI: ``wiki-memory recover`` and status.

The outbox itself (format, bounds, drain order, the drain lock) is implemented
once, in the standard-library hook program ``hooks/wiki_memory_hooklib.py``;
this module loads that file and drives it, so that the CLI and the hook can
never disagree about the format.

Layout of ``<data_dir>/outbox/`` (directory 0700, files 0600):

- ``<time ns>-<pid>-<rand>.json``: one waiting observation, exactly the JSON body
  that ``POST /v1/observations`` receives; names sort in write order.
- ``.tmp-*``: a write in progress (removed after 10 minutes if left behind).
- ``.drain.lock``: ``flock``-ed by the one process draining.
- ``dropped.jsonl``: one line per event given up on: ``overflow`` (the outbox was
  full; the oldest go first), ``rejected`` (the server answered a 4xx about the
  event itself) or ``corrupt`` (an unreadable file).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

#: The hook program's folder: ``wiki_memory/_hooks`` in an installed package (see
#: pyproject.toml), else ``hooks/`` of a source checkout or editable install.
_PACKAGED = Path(__file__).resolve().parents[1] / "_hooks"
HOOKS_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "hooks"
#: The program a harness runs (a small launcher).
HOOK_SCRIPT = HOOKS_DIR / "wiki_memory_hook.py"
#: The hook's implementation, shared with the CLI.
HOOK_LIB = HOOKS_DIR / "wiki_memory_hooklib.py"


def load_hooklib() -> ModuleType:
    """Import ``hooks/wiki_memory_hooklib.py`` (once). Raises FileNotFoundError when the
    hooks folder is not next to the package (an installed copy without the source tree)."""
    mod = sys.modules.get("wiki_memory_hooklib")
    if mod is not None:
        return mod
    if not HOOK_LIB.is_file():
        raise FileNotFoundError(f"the hook program is missing: {HOOK_LIB}")
    spec = importlib.util.spec_from_file_location("wiki_memory_hooklib", HOOK_LIB)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot load {HOOK_LIB}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["wiki_memory_hooklib"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop("wiki_memory_hooklib", None)
        raise
    return mod


@dataclass
class RecoverResult:
    """What one ``recover`` did.

    ``sent``: events the server accepted (``duplicates`` of them it had already);
    ``rejected``: dropped on a 4xx about the event; ``left``: still waiting;
    ``failed``: the server could not be reached or kept failing; ``busy``: another
    drainer held the lock for the whole wait; ``dropped``: every event ever given up
    on in this outbox, by reason.
    """

    outbox: Path
    url: str
    sent: int = 0
    duplicates: int = 0
    rejected: int = 0
    corrupt: int = 0
    left: int = 0
    failed: bool = False
    busy: bool = False
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.left == 0 and not self.failed and not self.busy


def _config(data_dir: Path | None, url: str | None, token_file: str | None) -> Any:
    lib = load_hooklib()
    return lib.load_config(str(data_dir) if data_dir else None, url, token_file)


def pending(data_dir: Path | None = None) -> list[Path]:
    """The waiting events' files, oldest first."""
    lib = load_hooklib()
    cfg = lib.load_config(str(data_dir) if data_dir else None)
    ob = lib.Outbox(cfg.outbox_dir)
    return [Path(cfg.outbox_dir) / n for n in ob.pending()]


def recover(
    data_dir: Path | None = None,
    url: str | None = None,
    token_file: str | None = None,
    *,
    wait_seconds: float = 30.0,
    request_seconds: float = 10.0,
    max_seconds: float = 600.0,
) -> RecoverResult:
    """Deliver every event waiting in the outbox now, oldest first, in the foreground.

    Waits up to ``wait_seconds`` for a background drainer to let go of the lock.
    Sends nothing when the outbox is empty. Never raises for a server that is away
    (see ``failed``); raises FileNotFoundError when the hook program is missing.
    """
    lib = load_hooklib()
    cfg = _config(data_dir, url, token_file)
    ob = lib.Outbox(cfg.outbox_dir, cfg.geti("outbox_max_events"), cfg.geti("outbox_max_bytes"))
    res = RecoverResult(outbox=Path(cfg.outbox_dir), url=cfg.url)
    if not ob.pending():
        res.dropped = ob.dropped_counts()
        return res
    fd = ob.lock(wait_seconds)
    if fd is None:
        res.busy = True
        res.left = len(ob.pending())
        return res
    try:
        stats = lib.drain(cfg, ob, max_seconds, request_seconds)
    finally:
        import os

        os.close(fd)
    res.sent = stats["sent"]
    res.duplicates = stats["duplicates"]
    res.rejected = stats["rejected"]
    res.corrupt = stats["corrupt"]
    res.left = stats["left"]
    res.failed = bool(stats["failed"])
    res.dropped = ob.dropped_counts()
    return res


__all__ = ["HOOK_LIB", "HOOK_SCRIPT", "RecoverResult", "load_hooklib", "pending", "recover"]
