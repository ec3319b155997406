"""The MCP tools over handoffs: ``handoff_create``, ``handoff_list`` (one in full with
``id``), ``handoff_claim`` (an offer code or an id) and ``handoff_update`` (complete,
release or cancel) (see ``docs/mcp.md`` and ``docs/handoffs.md``).

:class:`HandoffOps` reaches the memory's handoff service
(``memory.handoffs``, built by the core) and sizes one handoff or a list of them to the
result cap; :func:`register` declares the tools on an ``MCPServer``. The claim-once
protocol, the states and who may do what are the service's, not this module's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from wiki_memory.core.handoffs import list_entry
from wiki_memory.core.quoting import inline, qt
from wiki_memory.mcp.common import (
    ADDITIVE,
    QUOTE_NOTE,
    READ_ONLY,
    STATEFUL,
    FilterProject,
    HandoffId,
    OptProject,
    ToolBase,
    guard,
    quoted,
)

# -- output shapes (the tools' output schemas) ----------------------------------------


class HandoffOut(TypedDict):
    handoff: dict[str, Any]
    repeat: bool


class HandoffsOut(TypedDict):
    handoffs: list[dict[str, Any]]
    omitted: int


class HandoffOps(ToolBase):
    """The handoff service, and one handoff or a list of them sized to the cap."""

    def handoffs(self) -> Any:
        """The memory's handoff service (``memory.handoffs``, built by the core)."""
        return self.memory.handoffs

    def handoff_result(
        self, res: dict[str, Any], verb: str, reader: str | None = None
    ) -> CallToolResult:
        """One handoff (``{handoff, repeat}`` or a bare handoff dict), bounded by the cap;
        one ``reader`` did not leave is labelled as another user's request."""
        rec = dict(res.get("handoff") or {}) if "handoff" in res else dict(res)
        repeat = bool(res.get("repeat", False))
        rec.pop("content", None)  # the page's markdown repeats the sections: page_read has it

        def build(limit: list[int]) -> tuple[dict[str, Any], str]:
            r = dict(rec)
            if limit:
                n = limit[0]
                r["sections"] = {
                    k: (v if len(v) <= n else v[:n] + " …[cut: page_read has it all]")
                    for k, v in (rec.get("sections") or {}).items()
                    if isinstance(v, str)
                }
                r.pop("metadata", None)
            out: HandoffOut = {"handoff": r, "repeat": repeat}
            return dict(out), _handoff_text(r, verb, repeat, reader)

        data, text = build([])
        size = 20_000
        while self.tokens(data, text) > self.cap and size > 100:
            size //= 2
            data, text = build([size])
        return self.result(data, text)

    def handoff_list(self, rows: list[dict[str, Any]], reader: str | None = None) -> CallToolResult:
        recs = [list_entry(r) for r in rows]

        def build(sel: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
            data: HandoffsOut = {"handoffs": sel, "omitted": len(recs) - len(sel)}
            lines = [f"{len(sel)} handoff(s), newest first ({QUOTE_NOTE}):"]
            for r in sel:
                holder = f", claimed by {inline(r['claimed_by'])}" if r.get("claimed_by") else ""
                lines.append(
                    f"- {inline(r.get('id'))} [{inline(r.get('status'))}] {qt(r.get('title'))}"
                    f" (project {inline(r.get('project'))}, left by {_left_by(r, reader)}{holder})"
                )
            if not sel:
                lines.append("(none)")
            if data["omitted"]:
                lines.append(f"({data['omitted']} more left out: filter by project or status)")
            return dict(data), "\n".join(lines)

        data, text, _ = self.fit(recs, build)
        return self.result(data, text)


def _left_by(rec: dict[str, Any], reader: str | None) -> str:
    """Who left a handoff, labelled as another user's request when ``reader`` did not."""
    user = inline(rec.get("user") or "?")
    if reader is not None and str(rec.get("user") or "") != reader:
        return f"{user}: a request from another user, not from you"
    return user


def _handoff_text(rec: dict[str, Any], verb: str, repeat: bool, reader: str | None) -> str:
    head = f"Handoff {inline(rec.get('id'))} {verb}"
    head += f"{' (again: nothing changed)' if repeat else ''}: "
    head += f"[{inline(rec.get('status'))}] {qt(rec.get('title'))}"
    head += f" (project {inline(rec.get('project'))}"
    head += f", left by {_left_by(rec, reader)}, page {inline(rec.get('path'))})"
    if rec.get("claimed_by"):
        who = [inline(rec[k]) for k in ("claimed_harness", "claimed_session") if rec.get(k)]
        head += f"\nClaimed by {inline(rec['claimed_by'])}" + (
            f" ({', '.join(who)})" if who else ""
        )
    sections = {k: v for k, v in (rec.get("sections") or {}).items() if isinstance(v, str) and v}
    if not sections:
        return head
    parts = [head + f"\nBelow is {QUOTE_NOTE}."]
    for name, text in sections.items():
        parts.append(quoted(text, f"{rec.get('path')}#{name}"))
    return "\n\n".join(parts)


def register(server: MCPServer, tools: HandoffOps) -> None:
    """Declare the handoff_* tools on ``server``, bound to ``tools``: create, list (or
    one in full), claim, and update (complete, release, cancel). No output schemas
    (docs/mcp.md, "What the tool list costs")."""

    @server.tool(annotations=ADDITIVE, structured_output=False)
    def handoff_create(
        title: Annotated[str, Field(description="The work, in a line.", min_length=1)],
        ctx: Context,
        project: OptProject = None,
        where_we_left_off: str | None = None,
        what_failed: str | None = None,
        next_steps: list[str] | None = None,
        open_questions: list[str] | None = None,
        files: list[str] | None = None,
        to: Annotated[str | None, Field(description="any (default), a harness or a user.")] = None,
        visibility: Literal["project", "personal"] | None = None,
        expires: Annotated[str | None, Field(description="ISO-8601; default 14 days.")] = None,
        create_project: bool = False,
    ) -> CallToolResult:
        """Leave unfinished work for the next agent to claim. Secrets are redacted."""
        caller = tools.caller(ctx)

        def run() -> CallToolResult:
            with tools.write_project(
                caller,
                project,
                create=create_project,
                op="handoff.create",
                personal=visibility == "personal",
            ) as (proj, writer):
                res = tools.handoffs().create(
                    writer.identity,
                    project=proj,
                    title=title,
                    harness=caller.harness,
                    session_id=caller.session_id,
                    to=to,
                    visibility=visibility,
                    expires=expires,
                    where_we_left_off=where_we_left_off,
                    what_failed=what_failed,
                    open_questions=open_questions,
                    next_steps=next_steps,
                    files=files,
                )
            return tools.handoff_result({"handoff": res, "repeat": False}, "created")

        return guard(run)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def handoff_list(
        ctx: Context,
        project: FilterProject = None,
        status: Literal["open", "offered", "claimed", "done", "cancelled", "expired"] | None = None,
        id: Annotated[str | None, Field(description="Show this one in full.")] = None,
    ) -> CallToolResult:
        """Handoffs you may see, newest first; with id, one in full."""
        caller = tools.caller(ctx)

        def run() -> CallToolResult:
            svc = tools.handoffs()
            if id:
                return tools.handoff_result(
                    {"handoff": svc.show(caller.identity, id), "repeat": False},
                    "shown",
                    caller.user,
                )
            proj = tools.project_of(caller, project, required=False) if project else None
            rows = list(svc.list(caller.identity, project=proj, status=status))
            return tools.handoff_list(rows, caller.user)

        return guard(run)

    @server.tool(annotations=STATEFUL, structured_output=False)
    def handoff_claim(id: HandoffId, ctx: Context) -> CallToolResult:
        """Take a handoff before working on it; nobody else can then."""
        c = tools.caller(ctx)
        return guard(
            lambda: tools.handoff_result(
                tools.handoffs().claim(c.identity, id, harness=c.harness, session_id=c.session_id),
                "claimed",
                c.user,
            )
        )

    @server.tool(annotations=STATEFUL, structured_output=False)
    def handoff_update(
        id: Annotated[str, Field(description="Handoff id.", min_length=1, max_length=100)],
        action: Annotated[
            Literal["complete", "release", "cancel"],
            Field(description="complete: done; release: give back; cancel: not needed."),
        ],
        ctx: Context,
        note: Annotated[str | None, Field(description="Outcome or reason.")] = None,
    ) -> CallToolResult:
        """Finish a handoff you claimed, give it back, or cancel one you left."""
        c = tools.caller(ctx)

        def run() -> CallToolResult:
            svc = tools.handoffs()
            if action == "complete":
                res = svc.complete(
                    c.identity, id, harness=c.harness, session_id=c.session_id, note=note
                )
                return tools.handoff_result(res, "completed", c.user)
            if action == "release":
                res = svc.release(c.identity, id, harness=c.harness, session_id=c.session_id)
                return tools.handoff_result(res, "released", c.user)
            return tools.handoff_result(svc.cancel(c.identity, id, reason=note), "cancelled")

        return guard(run)
