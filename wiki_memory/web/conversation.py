"""A session page's timeline rendered as a conversation (docs/web.md): a markdown-it core
rule and its render rules, used by :mod:`wiki_memory.web.render` when it renders a session
page. Who spoke and when heads each turn; a tool call's input and output fold into one
``<details>``. Rendering only: the page file is not changed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from wiki_memory.web.links import escape

__all__ = ["conversation_plugin"]

#: the first line of a timeline entry (wiki_memory.wiki.compiler): ``**10:01:02** · head``,
#: with the entry's own local time when its offset is not its section's:
#: ``**01:30:00** (03:30 +02:00) · head``
_TURN_HEAD_RE = re.compile(
    r"\*\*(\d{1,2}:\d{2}(?::\d{2})?)\*\*(?: \((\d\d:\d\d [+-]\d\d:\d\d)\))?\s*·\s*(.+)"
)


def local_beside_utc(clock: str, own: str | None, offset: int | None) -> str:
    """The HTML of an entry's time: its local time beside UTC. ``clock``: the entry's
    UTC ``HH:MM[:SS]``; ``own``: its own ``HH:MM ±HH:MM`` (written when it differs from
    its section's); ``offset``: the section's offset in minutes (``started``). Only the
    UTC clock when neither says anything but UTC."""
    utc = f'<span class="when">{escape(clock)}</span>'
    if own:
        local = own
    elif offset:
        h, m = (int(x) for x in clock.split(":")[:2])
        mins = (h * 60 + m + offset) % 1440
        sign = "+" if offset >= 0 else "-"
        local = (
            f"{mins // 60:02d}:{mins % 60:02d} {sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
        )
    else:
        return utc
    return (
        f'<span class="when"><span class="local">{escape(local)}</span> '
        f'<span class="muted">({escape(clock)} UTC)</span></span>'
    )


_TOOL_HEAD_RE = re.compile(r"tool \*\*(.+?)\*\*\s*·\s*(\w+)")


def _turn_kind(head: str) -> tuple[str, dict[str, str]]:
    """``(kind, facts)`` of an entry's head: prompt, reply, tool (name, status) or event."""
    if head.startswith("prompt"):
        who = head.split("·")[1].strip() if "·" in head else ""
        return "prompt", {"speaker": who}
    if head.startswith(("reply", "subagent reply")):
        return "reply", {"label": head.replace("·", "").strip()}
    m = _TOOL_HEAD_RE.match(head)
    if m:
        return "tool", {"tool": m.group(1), "status": m.group(2)}
    return "event", {"label": head.replace("`", "")}


def _conversation(state: StateCore) -> None:
    """A session page's timeline as a conversation (only when ``env["conversation"]``):
    each entry (``<div class="block">`` from :func:`_structure`) becomes a turn with who
    spoke and when; a prompt's and a reply's fenced text is shown as text, not code; a
    tool call's input and output fold into one ``<details>`` under a line naming the
    tool and whether it failed. The page file is not changed: this is rendering only."""
    env = state.env
    if not env.get("conversation"):
        return
    tokens = state.tokens
    out: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        out.append(t)
        i += 1
        if t.type != "block_open" or i + 2 >= n:
            continue
        if tokens[i].type != "paragraph_open" or tokens[i + 1].type != "inline":
            continue
        m = _TURN_HEAD_RE.fullmatch(tokens[i + 1].content.strip())
        if m is None:
            continue
        kind, facts = _turn_kind(m.group(3))
        failed = facts.get("status") == "failed"
        t.attrs["class"] = f"block turn turn-{kind}" + (" turn-failed" if failed else "")
        head = Token("turn_head", "", 0)
        head.meta = {"time": m.group(1), "local": m.group(2), "kind": kind, **facts}
        out.append(head)
        i += 3
        # the entry's own blocks, up to its closing wrapper
        j = i
        while j < n and not (tokens[j].type == "block_close" and tokens[j].level == t.level):
            j += 1
        inner = tokens[i:j]
        if kind == "tool" and inner:
            opener = Token("turn_io_open", "", 0)
            opener.meta = {"failed": failed}
            out.append(opener)
            out.extend(inner)
            out.append(Token("turn_io_close", "", 0))
        else:
            for tok in inner:
                if tok.type == "fence" and kind in ("prompt", "reply"):
                    tok.type = "said"
                out.append(tok)
        i = j
    state.tokens = out


def _render_turn_head(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    m = tokens[idx].meta
    kind = m["kind"]
    when = local_beside_utc(m["time"], m.get("local"), env.get("offset"))
    if kind == "prompt":
        who = m.get("speaker") or env.get("speaker") or "user"
        return f'<p class="turn-head"><strong class="who">{escape(who)}</strong> {when}</p>\n'
    if kind == "reply":
        who = env.get("agent") or "agent"
        label = m.get("label", "reply")
        extra = f' <span class="muted">{escape(label)}</span>' if label != "reply" else ""
        return (
            f'<p class="turn-head"><strong class="who">{escape(who)}</strong>{extra} {when}</p>\n'
        )
    if kind == "tool":
        status = m.get("status", "")
        badge = (
            '<span class="badge failed">failed</span>'
            if status == "failed"
            else f'<span class="badge">{escape(status)}</span>'
        )
        return (
            f'<p class="turn-head"><span class="tool-name">{escape(m.get("tool", ""))}</span> '
            f"{badge} {when}</p>\n"
        )
    return f'<p class="turn-head event">{escape(m.get("label", ""))} {when}</p>\n'


def _render_turn_io_open(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    failed = tokens[idx].meta.get("failed")
    label = "input, output and error" if failed else "input and output"
    return f'<details class="tool-io"><summary>{label}</summary>\n'


def _render_turn_io_close(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    return "</details>\n"


def _render_said(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return f'<div class="said">{escape(tokens[idx].content.rstrip())}</div>\n'


def conversation_plugin(md: MarkdownIt) -> None:
    """Register the conversation rule (after the rules already pushed) and its renderers."""
    md.core.ruler.push("conversation", _conversation)
    md.add_render_rule("turn_head", _render_turn_head)
    md.add_render_rule("turn_io_open", _render_turn_io_open)
    md.add_render_rule("turn_io_close", _render_turn_io_close)
    md.add_render_rule("said", _render_said)
