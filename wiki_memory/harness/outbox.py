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
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger("wiki_memory.harness")

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


@dataclass
class OutboxStatus:
    """What waits in a data directory's hook outbox: ``queued`` events, the oldest's
    age in seconds (None when empty), ``dropped`` counts by reason, and ``unreachable``:
    the back-off state the hooks recorded (``since``, ``until``, ``url``, ``error``), or
    None when the server was last reachable."""

    outbox: Path
    queued: int
    oldest_seconds: float | None
    dropped: dict[str, int]
    unreachable: dict[str, Any] | None


def status(data_dir: Path) -> OutboxStatus:
    """The outbox of ``data_dir`` as :class:`OutboxStatus` (reads files only)."""
    import time

    lib = load_hooklib()
    ob = lib.Outbox(str(Path(data_dir) / "outbox"))
    names = ob.pending()
    oldest = None
    if names:
        try:
            oldest = max(time.time() - int(names[0].split("-", 1)[0]) / 1e9, 0.0)
        except ValueError:
            oldest = None
    return OutboxStatus(
        Path(ob.path), len(names), oldest, ob.dropped_counts(), lib.read_backoff(ob)
    )


class OutboxDrainer:
    """A running server's delivery of its own data directory's hook outbox, in-process.

    Hooks keep what they could not send in ``<data_dir>/outbox/`` and, after a refused or
    timed-out delivery, stop trying for a while (docs/hooks.md). The server owning that
    data directory therefore takes the events itself: at start and every ``interval``
    seconds it takes the drain lock (skipping a turn while a hook's drainer holds it),
    hands the waiting events, oldest first and in batches, to ``capture`` (the core's
    capture as the data directory's owner, which judges each event of a batch on its
    own), removes what was accepted, counts what was refused in ``dropped.jsonl``, and ends the hooks' back-off. The server's dedup by
    ``event_id`` keeps an event that a hook also sent from being stored twice.
    """

    def __init__(
        self,
        data_dir: Path,
        capture: Callable[[list[dict[str, Any]]], Any],
        interval: float = 5.0,
        batch: int = 200,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.capture = capture
        self.interval = interval
        self.batch = batch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def drain_once(self) -> dict[str, int]:
        """One pass: ``{"sent", "rejected", "left"}``. Never raises for a bad event; stops
        at the first failure that is not the event's (the next pass tries again)."""
        import os

        from wiki_memory.errors import CaptureRefused, WikiMemoryError, http_status

        lib = load_hooklib()
        ob = lib.Outbox(str(self.data_dir / "outbox"))
        stats = {"sent": 0, "rejected": 0, "left": 0}
        if not ob.pending():
            return stats
        fd = ob.try_lock()
        if fd is None:
            stats["left"] = len(ob.pending())
            return stats
        try:
            while not self._stop.is_set():
                names = ob.pending()[: self.batch]
                batch = [(n, ev) for n in names if (ev := ob.read(n)) is not None]
                if not batch:
                    break
                results = self.capture([ev for _, ev in batch])
                for (n, ev), res in zip(batch, results, strict=True):
                    err = res.get("refused") if isinstance(res, dict) else None
                    if isinstance(err, WikiMemoryError):
                        # refused on its own (the others of the batch are accepted)
                        why = "refused" if isinstance(err, CaptureRefused) else "rejected"
                        ob.drop(n, why, http_status(err), ev)
                        if why == "refused":
                            ob.refused(ev, http_status(err), err.message)
                        stats["rejected"] += 1
                        continue
                    ob.remove(n)
                    stats["sent"] += 1
            lib.note_reachable(ob)
        except Exception:  # noqa: BLE001 - a failing disk or writer: the next pass retries
            log.exception("delivering the hook outbox %s failed", ob.path)
        finally:
            os.close(fd)
        stats["left"] = len(ob.pending())
        if stats["sent"] or stats["rejected"]:
            log.info("hook outbox: %(sent)d event(s) delivered, %(rejected)d rejected", stats)
        return stats

    def _loop(self) -> None:
        while True:
            try:
                self.drain_once()
            except Exception:  # noqa: BLE001 - e.g. the hook program went missing
                log.exception("hook outbox pass failed")
            if self._stop.wait(self.interval):
                return

    def start(self) -> None:
        """Drain now and then every ``interval`` seconds, on a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="wiki-outbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


__all__ = [
    "HOOK_LIB",
    "HOOK_SCRIPT",
    "OutboxDrainer",
    "OutboxStatus",
    "RecoverResult",
    "load_hooklib",
    "pending",
    "recover",
    "status",
]
