"""The marks a session page's timeline is read by, written once for every reader (the
condenser, the topic builder, forgetting one entry, the session parts).

The compiler (:mod:`wiki_memory.wiki.compiler`, :mod:`wiki_memory.wiki.timelinememo`)
writes the entries below :data:`TIMELINE_HEADING`, ends each entry with a line holding only its block id (``^t7``; ``^t7r`` for the reply
carried by prompt 7's event) and puts verbatim text in fences
(:func:`wiki_memory.wiki.verbatim.fence`); it names a tool entry by the harness's tool
name, and the shell tools among them by :data:`SHELL_TOOLS`.
"""

from __future__ import annotations

import re

__all__ = ["ENTRY_ID_RE", "ENTRY_LINE_RE", "FENCE_RUN_RE", "SHELL_TOOLS", "TIMELINE_HEADING"]

#: the heading line of the timeline section, below the summary
TIMELINE_HEADING = "## Timeline"

#: a timeline entry's block id without its ``^`` (use ``fullmatch``): ``t7``, or ``t7r``
#: for the reply carried by prompt 7; group 1 is the entry's number
ENTRY_ID_RE = re.compile(r"t(\d+)r?")
#: a line holding only an entry's block id, the entry's last line (``^t7``, trailing
#: blanks allowed): group 1 the id (``t7``), group 2 its number; ``re.M``, so it is
#: matched on one line and found in a whole page alike
ENTRY_LINE_RE = re.compile(r"^\^(t(\d+)r?)[ \t]*$", re.M)
#: the fence run opening or closing a code block, at the start of a line whose indent is
#: stripped: group 1 the run (a block closes with a run as long or longer of its char)
FENCE_RUN_RE = re.compile(r"^(~{3,}|`{3,})")
#: tool names (lowercased) that run a shell command, across the harnesses
SHELL_TOOLS = frozenset({"bash", "run_shell_command", "shell", "exec_command", "local_shell"})
