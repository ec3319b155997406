"""wiki-memory harness hook: the command Claude Code, Codex and Gemini CLI run per event.

Installed as (``wiki-memory install-hooks`` writes it)::

    '<python>' -S '<repo>/hooks/wiki_memory_hook.py' --harness claude-code \\
        || { cat >/dev/null 2>&1; true; }

The event JSON arrives on stdin (Codex's legacy ``notify`` passes it as the last
argument instead). This file is only a launcher: the work is in
``wiki_memory_hooklib.py`` next to it, which Python caches as bytecode (a script
run as ``__main__`` is compiled on every start). Whatever happens, the process
exits 0: a missing or broken library still reads stdin to EOF and exits quietly.
Bytecode is written even under ``PYTHONDONTWRITEBYTECODE`` (into ``hooks/__pycache__``
and the sanitizer's ``__pycache__``), since compiling costs more than the whole run.
"""

import sys


def _fallback(exc: BaseException) -> None:
    try:
        sys.stderr.write(f"wiki-memory hook: not running ({type(exc).__name__}: {exc})\n")
        if not any(a.startswith("{") for a in sys.argv[1:]):
            sys.stdin.buffer.read()
    except BaseException:
        pass


if __name__ == "__main__":
    # Start-up time is the hook's budget: keep the bytecode of the library (and of the
    # sanitizer it imports) cached even where PYTHONDONTWRITEBYTECODE is set.
    sys.dont_write_bytecode = False
    try:
        from wiki_memory_hooklib import main
    except BaseException as _exc:
        _fallback(_exc)
    else:
        main(sys.argv[1:])
    try:
        sys.stderr.flush()
    finally:
        import os

        os._exit(0)
