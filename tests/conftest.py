"""Shared fixtures: where the real input lives (../shared/data) and temp data directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """Return a path under ../shared, or skip the calling test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real input not available: {p} is missing (../shared is absent)")
    return p


@pytest.fixture
def shared() -> Path:
    """The ../shared folder (skips when absent)."""
    return shared_path()
