"""Kill points for tests: a long operation (restore, backup, purge) stops at a named step
when an environment variable names it, so a test can kill the process exactly there
instead of racing a timer (docs/operations.md, "Testing aid")."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["pause"]


def pause(env: str, what: str, step: str) -> None:
    """When ``$env`` equals ``step``: write ``"<what> paused at <step>"`` on standard
    error (flushed) and sleep for an hour (the test kills the process meanwhile).
    Otherwise return at once."""
    if os.environ.get(env) == step:
        sys.stderr.write(f"{what} paused at {step}\n")
        sys.stderr.flush()
        time.sleep(3600)
