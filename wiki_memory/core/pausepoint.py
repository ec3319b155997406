"""Kill points for tests: a long operation (restore, backup, purge) stops at a named step
when an environment variable names it, so a test can kill the process exactly there
instead of racing a timer (docs/operations.md, "Testing aid")."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["RESUME_ENV", "pause"]


#: a file whose appearance ends a pause (a test that changes things meanwhile, then
#: lets the step go on); unset: a pause lasts an hour (the test kills the process)
RESUME_ENV = "WIKI_MEMORY_PAUSE_RESUME"


def pause(env: str, what: str, step: str) -> None:
    """When ``$env`` equals ``step``: write ``"<what> paused at <step>"`` on standard
    error (flushed) and wait, for an hour at most, until the file named by
    ``$WIKI_MEMORY_PAUSE_RESUME`` exists (unset: the whole hour). Otherwise return at
    once."""
    if os.environ.get(env) != step:
        return
    sys.stderr.write(f"{what} paused at {step}\n")
    sys.stderr.flush()
    resume = os.environ.get(RESUME_ENV)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        if resume and os.path.exists(resume):
            return
        time.sleep(0.05)
