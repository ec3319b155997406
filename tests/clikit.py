"""The ``wiki-memory`` command run in this process: ``main(argv)`` of
``wiki_memory.cli.main`` with its own environment, its standard output and error caught,
answering like ``subprocess.run(..., capture_output=True, text=True)``.

For a test that runs many client commands against a running server (each one a process
costs about a second of interpreter start-up and imports): the command's parsing, its
request and its exit status and messages are the same code a process runs. Keep
``support.run_cli`` (a real process) where the process is the point: its environment as
a user's shell hands it over, exit at a signal, ``python -m`` itself, a command that
serves, prompts or changes the process (``serve``, ``mcp``, ``setup``, ``restore``).

One command runs at a time (the environment and ``sys.stdout`` belong to the process),
and only in the main thread."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

_LOCK = threading.Lock()


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` replaced by ``env`` for the block, restored after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _text_stream() -> io.TextIOWrapper:
    """A text stream with a ``buffer``, as ``sys.stdout`` has, read back at the end."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)


def _read(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", "replace")


def run_in_process(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``wiki-memory ARGS...`` in this process with ``os.environ`` set to ``env`` (the
    whole environment, as ``subprocess.run(env=...)`` takes it). Returns the exit status
    (``SystemExit`` included: argparse's 2) and what was printed. Raises RuntimeError
    outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_in_process runs a command in the main thread only")
    from wiki_memory.cli.main import main

    out, err = _text_stream(), _text_stream()
    with _LOCK, _environment(env), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    return subprocess.CompletedProcess(
        ["wiki-memory", *args], int(code or 0), _read(out), _read(err)
    )


def run_cli_here(
    data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``support.run_cli`` in this process: ``wiki-memory --data-dir DATA_DIR ARGS...`` with
    ``WIKI_MEMORY_HOME`` pointing at the same folder and ``env`` on top of this process's
    environment, answered the same way (exit status, what was printed)."""
    full = {**os.environ, "WIKI_MEMORY_HOME": str(data_dir), **(env or {})}
    return run_in_process(["--data-dir", str(data_dir), *args], full)
