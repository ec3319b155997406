"""Shared fixtures. Test files sit in folders named like the package's rooms; what they
share (paths, polling, the CLI, a Memory) is in ``support.py`` beside this file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import make_memory, shared_path

from wiki_memory.core.memory import Memory


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
