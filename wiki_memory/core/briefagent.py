"""The brief's imported instruction files (docs/agent-files.md, "In the brief").

Pages imported from the harnesses' instruction and memory files (``type: agent-file``,
:mod:`wiki_memory.core.agentimport`) of the session's project, and the caller's own
per-user ones, are items of the brief, each quoted with its source page. The hook reports
the files present in the session's folder and above (``instruction_files``: ``[{"source",
"hash"}]``, :func:`wiki_memory.capture.agentfiles.report`): a page whose ``source`` and
``source_hash`` match one of them is what the harness has already, so it is left out
and named in one line instead. Recall still finds every such page.
"""

from __future__ import annotations

from typing import Any

from wiki_memory.core.quoting import inline
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.paths import PathRefused

__all__ = ["MAX_REPORTED", "Item", "agent_items", "check_loaded"]

#: most files a hook may report
MAX_REPORTED = 64
#: (kind, text lines to quote or a plain line, info)
Item = tuple[str, list[str], dict[str, Any]]


def check_loaded(value: Any) -> set[tuple[str, str]]:
    """The ``(source, hash)`` pairs of a request's ``instruction_files`` (None: none).
    Raises BadRequest naming ``instruction_files`` for anything but a list of at most
    :data:`MAX_REPORTED` objects with string ``source`` and ``hash``."""
    if value is None:
        return set()
    if not isinstance(value, list) or len(value) > MAX_REPORTED:
        raise BadRequest(
            f"instruction_files must be a list of at most {MAX_REPORTED} objects",
            field="instruction_files",
        )
    out = set()
    for v in value:
        if not (
            isinstance(v, dict)
            and isinstance(v.get("source"), str)
            and isinstance(v.get("hash"), str)
        ):
            raise BadRequest(
                'each instruction file is {"source": str, "hash": str}', field="instruction_files"
            )
        out.add((v["source"], v["hash"]))
    return out


def agent_items(
    memory: Any,
    project: str,
    user: Identity | None,
    loaded: set[tuple[str, str]],
    *,
    shared: bool,
    max_tokens: int,
) -> tuple[list[Item], str | None]:
    """The imported pages for a brief of ``project`` ("": none) read by ``user``: one
    item each (``("agentfile", lines, {"path", "title"})``, the body cut to one line of
    600 characters when over ``max_tokens``), and the one line naming the pages left out
    because the harness reported them (None: none). ``shared``: the project's pages
    only, never the caller's own."""
    who = memory.scope.identity(user)
    prefixes = [f"projects/{project}/agent-files/"] if project else []
    if not shared and who.user:
        prefixes.append(f"people/{who.user}/agent-files/")
    if not prefixes:
        return [], None
    rows = memory.list_pages(kind="agent-file", limit=500, user=who)
    items: list[Item] = []
    skipped: list[str] = []
    for row in sorted(rows, key=lambda r: str(r["path"])):
        path = str(row["path"])
        if not any(path.startswith(p) for p in prefixes):
            continue
        try:
            raw = memory.scope.read(who, path).data
        except (NotFound, PathRefused):
            continue
        page = parse_page(raw, path)
        meta = page.metadata
        if meta.get("conflict_of"):
            continue
        if path.startswith("people/") and meta.get("project") not in (None, "", project):
            continue  # the caller's memory of another project
        source = str(meta.get("source") or path)
        if (source, str(meta.get("source_hash") or "")) in loaded:
            skipped.append(source)
            continue
        body = page.body.strip()
        head = f"{inline(source)} · imported instruction file · source: {inline(path)}"
        n = count_tokens(body)
        if n > max_tokens:
            flat = " ".join(body.split())
            body = flat[:600] + f"… (page is {n} tokens; read it for the rest)"
        items.append(("agentfile", [head, *body.splitlines()], {"path": path, "title": source}))
    line = None
    if skipped:
        line = (
            "Instruction files the harness already loaded (their imported pages left out; "
            "recall finds them): " + ", ".join(inline(s) for s in skipped)
        )
    return items, line
