"""Start a real ``wiki-memory serve`` process for a benchmark (shared by bench scripts)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from serverproc import ServerProcess, free_port  # noqa: E402

__all__ = ["ServerProcess", "free_port"]
