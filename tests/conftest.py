"""Shared fixtures. Test files sit in folders named like the package's rooms; what they
share (paths, polling, the CLI, a Memory) is in ``support.py`` beside this file."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import make_memory, shared_path

from wiki_memory.core.memory import Memory

# pytest keeps each test module with its asserts rewritten in ``__pycache__``, except where
# writing bytecode is off (PYTHONDONTWRITEBYTECODE, set on this project's machines): then
# every pytest process (the two workers, then the serial run) rewrote all of them again,
# about 8 s of CPU each. This process writes them; the processes the tests start keep the
# environment as it is.
sys.dont_write_bytecode = False


@pytest.fixture
def shared() -> Path:
    """The ../shared folder (skips when absent)."""
    return shared_path()


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """A started in-process Memory over ``tmp_path/data`` owned by ``alice``, no watcher."""
    m = make_memory(tmp_path / "data")
    yield m
    m.stop()


@pytest.fixture
def stop_after() -> Iterator[Callable[[Memory], None]]:
    """``stop_after(m)`` stops the Memory ``m`` when the test ends, whatever happens."""
    started: list[Memory] = []
    yield started.append
    for m in started:
        m.stop()


# -- tiers -------------------------------------------------------------------------------
#
# Every test is in one tier (pyproject.toml, README "Tests"): ``fast`` (no subprocess, no
# real socket, no sleep over 0.1 s), ``slow`` (in process, but waits on real time or works
# through a big input), ``process`` (needs a process of its own or a real socket) and
# ``serial`` (asserts a time bound, so it runs after the parallel part, with only other
# serial tests beside it: tests/run.py). A test marked
# none of them is ``fast``, and the check below holds it to that: a ``fast`` test that
# starts a process, opens an internet socket or sleeps longer than 0.1 s at once fails.

TIERS = ("fast", "slow", "process", "serial")
FAST_SLEEP_SECONDS = 0.1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # before ``-m`` selects: a test with no tier is fast
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS[1:]):
            item.add_marker(pytest.mark.fast)
    # ``late`` tests last, in every worker alike (xdist hands single tests out in the
    # order collected): they read the background run's results (tests/capture/background.py)
    items.sort(key=lambda item: item.get_closest_marker("late") is not None)


# -- workers -----------------------------------------------------------------------------
#
# ``tests/run.py`` runs the parallel part with ``--dist loadgroup``, scheduled here: the
# tests of a file that defines a fixture built once per module or class (a server, a built
# world, a browser) go to one worker together, so that fixture is built once, not once per
# worker; every other test is handed out on its own, as ``--dist load`` does. Files with
# the most tests go first. (xdist's own ``loadgroup`` reads ``xdist_group`` markers into
# node ids, which pytest 9 no longer lets it change; without ``-n`` this does nothing.)

SHARED_FIXTURE = re.compile(r"""scope\s*=\s*["'](module|class)["']""")


def shared_fixture_files(root: Path, nodeids: Iterable[str]) -> set[str]:
    """The files (node ids up to ``::``, relative to ``root``) among ``nodeids`` whose
    source defines a fixture with ``scope="module"`` or ``scope="class"``."""
    found: set[str] = set()
    for f in {n.split("::", 1)[0] for n in nodeids}:
        try:
            if SHARED_FIXTURE.search((root / f).read_text(encoding="utf-8")):
                found.add(f)
        except OSError:
            continue
    return found


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        grouped: set[str] | None = None
        #: the serial run (``-m serial``): 21 tests of 1-20 s each. xdist hands a worker
        #: its next test while it still has two to run, so a test could wait behind the
        #: slow-client file's 60 s while the other worker ran out of work (serial parts
        #: of 80-90 s against 65 s); here a worker gets its next test when it is down to
        #: the one it runs (it must know its next test, or the end, to begin its last)
        one_at_a_time = config.getoption("markexpr") == "serial"

        def _split_scope(self, nodeid: str) -> str:
            if self.grouped is None:
                self.grouped = shared_fixture_files(config.rootpath, self.collection)
            f = nodeid.split("::", 1)[0]
            return f if f in self.grouped else nodeid

        def _reschedule(self, node: Any) -> None:
            busy = self._pending_of(self.assigned_work[node]) > 1
            if self.one_at_a_time and busy and self.workqueue and not node.shutting_down:
                return
            super()._reschedule(node)

    return SharedFixtureScheduling(config, log)


class _FastGuard:
    """What a ``fast`` test did that a fast test may not; checked around every test."""

    def __init__(self) -> None:
        self.active = False
        self.main = threading.main_thread()
        self.seen: list[str] = []

    def note(self, what: str) -> None:
        if self.active:
            self.seen.append(what)

    def install(self) -> None:
        guard = self
        popen_exec = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def execute_child(self: Any, args: Any, *a: Any, **kw: Any) -> Any:
            guard.note(f"started a process: {args!r}"[:300])
            return popen_exec(self, args, *a, **kw)

        subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]

        import multiprocessing.util as mp_util

        spawnv = mp_util.spawnv_passfds

        def spawnv_passfds(path: Any, args: Any, passfds: Any) -> Any:
            guard.note(f"started a process (multiprocessing): {args!r}"[:300])
            return spawnv(path, args, passfds)

        mp_util.spawnv_passfds = spawnv_passfds
        real_fork = os.fork

        def fork() -> int:
            guard.note("forked")
            return real_fork()

        os.fork = fork

        def wrap_socket(name: str) -> None:
            real = getattr(socket.socket, name)

            def method(self: socket.socket, *a: Any, **kw: Any) -> Any:
                if self.family in (socket.AF_INET, socket.AF_INET6):
                    guard.note(f"opened a real socket: {name}{a!r}")
                return real(self, *a, **kw)

            setattr(socket.socket, name, method)

        for name in ("connect", "connect_ex", "bind"):
            wrap_socket(name)
        real_sleep = time.sleep

        def sleep(seconds: float) -> None:
            if seconds > FAST_SLEEP_SECONDS and threading.current_thread() is guard.main:
                guard.note(f"slept {seconds} s")
            real_sleep(seconds)

        time.sleep = sleep


_guard = _FastGuard()


def pytest_configure(config: pytest.Config) -> None:
    _guard.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _guard.active = item.get_closest_marker("fast") is not None
    _guard.main = threading.current_thread()
    _guard.seen = []
    try:
        yield
    finally:
        _guard.active = False


@pytest.fixture(autouse=True)
def _fast_means_fast(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a ``fast`` test that started a process, opened a real socket or slept long
    (in its fixtures too); mark it ``process`` or ``slow`` instead."""
    yield
    if request.node.get_closest_marker("fast") is not None and _guard.seen:
        seen = sorted(set(_guard.seen))
        pytest.fail(
            "a fast test (no tier marker means fast) "
            + "; ".join(seen[:3])
            + (f" (+{len(seen) - 3} more)" if len(seen) > 3 else "")
            + ": mark it process or slow (pyproject.toml, markers)",
            pytrace=False,
        )
