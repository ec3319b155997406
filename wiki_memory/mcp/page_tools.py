"""The MCP tools over single pages: ``page_read``, ``page_list``, ``page_write`` and
``page_forget`` (see ``docs/mcp.md``).

:class:`PageOps` implements them over the core (``Memory.read_page``, ``list_pages``,
``write_page``; the path and text checks of :mod:`wiki_memory.core.pages`, the same as
``PUT /v1/pages/{path}``), paging reads by a byte cursor so that every chunk fits the
result cap; :func:`register` declares the tools on an ``MCPServer``.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from wiki_memory.core.edits import edit_page
from wiki_memory.core.forget import forget_page
from wiki_memory.core.pages import page_path_for_write, redact_page_text
from wiki_memory.errors import Conflict, PreconditionRequired, TooLarge
from wiki_memory.identity import Identity
from wiki_memory.mcp.common import (
    ADDITIVE,
    QUOTE_NOTE,
    READ_ONLY,
    STATEFUL,
    Caller,
    Cursor,
    FilterProject,
    PagesOut,
    ToolBase,
    guard,
    page_line,
    page_row,
    quoted,
)
from wiki_memory.plainfile import page_hash
from wiki_memory.recall.tokens import count_tokens

# -- output shapes (the tools' output schemas) ----------------------------------------


class PageOut(TypedDict):
    path: str
    title: str | None
    metadata: dict[str, Any] | None
    diagnostics: list[Any] | None
    content: str
    cursor: int
    next_cursor: int | None
    truncated: bool
    total_bytes: int
    hash: str


class WriteOut(TypedDict):
    path: str
    hash: str
    created: bool
    changed: bool
    redacted: int
    indexed: NotRequired[bool]  # False: written and committed, indexed again later


class PageOps(ToolBase):
    """page_read, page_list and page_write, each sized to the cap."""

    def page_read(self, path: str, cursor: int, user: Identity) -> CallToolResult:
        mem = self.memory
        limit = self.part - 150
        guess = limit * 3
        best: tuple[dict[str, Any], str] | None = None
        for _ in range(8):
            res = mem.read_page(path, cursor, max(1, guess), user)
            data, text = _page_result(res, first=cursor == 0)
            n = self.tokens(data, text)
            if n <= self.cap:
                best = (data, text)
                content_tokens = max(1, count_tokens(res["content"]))
                if not res["truncated"] or n > self.cap * 0.8:
                    break
                # room left: grow towards the cap
                grown = int(len(res["content"].encode("utf-8")) * limit / content_tokens * 0.95)
                if grown <= guess:
                    break
                guess = grown
            else:
                size = len(res["content"].encode("utf-8"))
                guess = max(1, int(size * (self.cap / n) * 0.9))
                if best is not None:
                    break
        if best is None:  # metadata alone is too large: leave it out
            res = mem.read_page(path, cursor, max(1, guess), user)
            best = _page_result(res, first=False)
        return self.result(*best)

    def page_list(
        self,
        project: str | None,
        kind: str | None,
        since: str | None,
        cursor: int,
        limit: int,
        caller: Caller,
    ) -> CallToolResult:
        proj = self.project_of(caller, project, required=False) if project else None
        rows = self.memory.list_pages(
            project=proj,
            kind=kind,
            since=since,
            limit=limit + 1,
            offset=cursor,
            user=caller.identity,
        )
        more = len(rows) > limit
        window = rows[:limit]
        # the cursor counts the pages this caller may see (the index filters the rest)
        pages = [page_row(r) for r in window]

        def build(sel: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
            used = len(sel)
            nxt = cursor + used if (more or used < len(window)) else None
            data: PagesOut = {"pages": sel, "cursor": cursor, "next_cursor": nxt}
            lines = [f"{len(sel)} page(s), newest first (from {cursor}):"]
            lines += [page_line(p) for p in sel]
            if nxt is not None:
                lines.append(f"More: page_list with cursor={nxt}.")
            return dict(data), "\n".join(lines)

        data, text, _ = self.fit(pages, build)
        return self.result(data, text)

    def page_write(
        self,
        path: str,
        text: str,
        expected_hash: str | None,
        caller: Caller,
        supersedes: list[str] | None = None,
    ) -> CallToolResult:
        limit = self.memory.settings.max_body_bytes
        if len(text.encode("utf-8")) > limit:
            raise TooLarge(f"text is over the limit of {limit} bytes", field="text")
        rel = page_path_for_write(path)
        # the right to write, before the text is scanned (a tool runs in a worker thread)
        self.memory.scope.write_check(caller.identity, rel)
        data, redacted = redact_page_text(text)
        created = {"v": False}
        try:
            res = self.memory.write_page(
                rel,
                data,
                user=caller.user,
                message=f"Write {rel} ({caller.harness})",
                expected_hash=expected_hash.strip().lower() if expected_hash else None,
                create_only=not expected_hash,
                who=caller.identity,
                on_current=lambda cur: created.update(v=cur is None),
                supersedes=supersedes,
            )
        except Conflict as exc:
            if not expected_hash:
                raise PreconditionRequired(
                    f"{rel} already exists (hash {exc.current_hash}): read it with page_read "
                    "and pass its hash as expected_hash to replace it",
                    field="expected_hash",
                    hash=exc.current_hash,
                ) from None
            raise Conflict(
                f"{rel} changed since it was read (its hash is now {exc.current_hash}); "
                "read it again, merge, and retry with the new hash",
                exc.current_hash,
            ) from None
        digest = res.value or page_hash(data)
        out: WriteOut = {
            "path": rel,
            "hash": digest,
            "created": created["v"],
            "changed": res.value is not None,
            "redacted": redacted,
        }
        msg = f"{'Created' if created['v'] else 'Wrote'} {rel} (hash {digest})."
        if res.value is None:
            msg = f"{rel} already holds this text (hash {digest}); nothing changed."
        if redacted:
            msg += f" {redacted} secret(s) were replaced by [REDACTED:<kind>]."
        if not res.indexed:
            out["indexed"] = False
            msg += " It is not searchable yet (the index update failed; it is retried)."
        return self.result(dict(out), msg)

    def page_edit(self, op: str, path: str, args: dict[str, Any], caller: Caller) -> CallToolResult:
        res = edit_page(self.memory, op, path, who=caller.identity, face=caller.harness, **args)
        if res.get("repeated"):
            msg = f"Already done (same edit_id): {res['path']} (hash {res['hash']})."
        elif op == "rename":
            msg = (
                f"Renamed {res['from']} to {res['path']}; links rewritten in "
                f"{len(res['rewritten'])} page(s), {res['kept']} page(s) you may not write "
                "still link through the alias."
            )
        else:
            msg = f"Edited {res['path']} (hash {res['hash']})."
            if "section_hash" in res:
                msg += f" The section's hash is now {res['section_hash']}."
        if res.get("redacted"):
            msg += f" {res['redacted']} secret(s) were replaced by [REDACTED:<kind>]."
        return self.result(res, msg)

    def page_forget(self, path: str, caller: Caller) -> CallToolResult:
        res = forget_page(self.memory, path, caller.identity)
        what = f"{res['path']}#^{res['entry']}" if res.get("entry") else res["path"]
        msg = f"{what} is forgotten: it leaves recall, briefs and listings; git keeps its history."
        if not res["changed"]:
            msg = f"{what} was already forgotten."
        return self.result(res, msg)


def _page_result(res: dict[str, Any], first: bool) -> tuple[dict[str, Any], str]:
    """One chunk of ``Memory.read_page`` as the tool's structured part and text block
    (the metadata and diagnostics with the ``first`` chunk only)."""
    data: PageOut = {
        "path": res["path"],
        "title": res.get("title"),
        "metadata": res.get("metadata") if first else None,
        "diagnostics": res.get("diagnostics") if first else None,
        "content": res["content"],
        "cursor": res["cursor"],
        "next_cursor": res["next_cursor"],
        "truncated": res["truncated"],
        "total_bytes": res["total_bytes"],
        "hash": res["hash"],
    }
    end = res["next_cursor"] if res["next_cursor"] is not None else res["total_bytes"]
    head = (
        f"Page {res['path']}, bytes {res['cursor']}-{end} of {res['total_bytes']} "
        f"(hash {res['hash']}); {QUOTE_NOTE}."
    )
    if res["truncated"]:
        head += f" More: page_read with cursor={res['next_cursor']}."
    return dict(data), head + "\n" + quoted(res["content"], res["path"])


def register(server: MCPServer, tools: PageOps) -> None:
    """Declare the page_* tools on ``server``, bound to ``tools`` (no output schemas:
    docs/mcp.md, "What the tool list costs")."""

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def page_read(
        path: Annotated[str, Field(description="Wiki path, as other tools list it.")],
        ctx: Context,
        cursor: Cursor = 0,
    ) -> CallToolResult:
        """Read a wiki page in chunks (while truncated, pass next_cursor). hash is what
        page_write needs."""
        user = tools.caller(ctx).identity
        return guard(lambda: tools.page_read(path, cursor, user))

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def page_list(
        ctx: Context,
        project: FilterProject = None,
        kind: Annotated[str | None, Field(description="session, note, handoff…")] = None,
        since: Annotated[str | None, Field(description="ISO-8601 time.")] = None,
        cursor: Cursor = 0,
        limit: Annotated[int, Field(ge=1, le=1000)] = 20,
    ) -> CallToolResult:
        """Wiki pages, most recently updated first."""
        caller = tools.caller(ctx)
        return guard(lambda: tools.page_list(project, kind, since, cursor, limit, caller))

    @server.tool(annotations=ADDITIVE, structured_output=False)
    def page_write(
        path: Annotated[str, Field(description="Wiki path ending in .md.", min_length=1)],
        text: Annotated[str, Field(description="The whole new page.")],
        ctx: Context,
        expected_hash: Annotated[
            str | None,
            Field(description="hash from page_read; omit only to create.", max_length=64),
        ] = None,
        supersedes: list[str] | None = None,
    ) -> CallToolResult:
        """Create a page, or replace one you read (refused if it changed since). Prefer
        memory_remember for a new fact."""
        caller = tools.caller(ctx)
        return guard(lambda: tools.page_write(path, text, expected_hash, caller, supersedes))

    @server.tool(annotations=STATEFUL, structured_output=False)
    def page_edit(
        op: Annotated[str, Field(description="append|item|replace_section|rename")],
        path: str,
        ctx: Context,
        text: str | None = None,
        section: Annotated[str | None, Field(description="Heading.")] = None,
        hash: str | None = None,
        new_path: str | None = None,
        edit_id: Annotated[str | None, Field(description="Retry-safe id.")] = None,
    ) -> CallToolResult:
        """Append lines or a checklist item to a page or section (no hash needed); replace
        a section (its hash); rename a page."""
        caller = tools.caller(ctx)
        args = {
            "text": text,
            "section": section,
            "expected_hash": hash,
            "new_path": new_path,
            "edit_id": edit_id,
        }
        return guard(lambda: tools.page_edit(op, path, args, caller))

    @server.tool(annotations=STATEFUL, structured_output=False)
    def page_forget(
        path: Annotated[str, Field(description="Wiki path; path#^tN: one entry.", min_length=1)],
        ctx: Context,
    ) -> CallToolResult:
        """Forget a wrong or obsolete page: out of recall, briefs and lists; history kept."""
        caller = tools.caller(ctx)
        return guard(lambda: tools.page_forget(path, caller))
