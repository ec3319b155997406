"""YAML frontmatter: tolerant reading and careful, line-splicing writing.

Reading (:func:`wiki_memory.wiki.frontmatter_read.load_yaml`, used by
:func:`wiki_memory.wiki.page.parse_page` and here) turns a frontmatter block into
JSON-safe data: string keys as written, timestamps as ISO-8601 strings, duplicate keys
reported (the last one wins).

Writing (:func:`set_keys`) changes only the top-level keys it is asked to change and keeps
every other byte of the file: key order, comments, quoting, line endings, a BOM. When the
existing frontmatter cannot be read it refuses with :class:`FrontmatterError` instead of
writing over it. See ``docs/pages.md``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from wiki_memory.wiki.frontmatter_read import (
    TS_RE,
    PageLoader,
    find_closing_fence,
    is_opening_fence,
    json_safe,
    load_yaml,
    normalize_timestamp,
)

__all__ = [
    "HEAD_KEYS",
    "FrontmatterError",
    "dump_page",
    "page_head",
    "set_keys",
]

_BOM = "\ufeff"
_BOM_BYTES = b"\xef\xbb\xbf"


class FrontmatterError(ValueError):
    """The existing frontmatter cannot be read, so it must not be rewritten.

    ``line`` is the 1-based line in the file (None when unknown). HTTP callers answer 422.
    """

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"{message} (line {line})")
        self.line = line
        self.reason = message


# --------------------------------------------------------------------------- writing


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented like Obsidian writes them, timestamps left unquoted."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if TS_RE.match(value) and normalize_timestamp(value) == value:
        # Reads back as the same string (see normalize_timestamp), so no quotes needed.
        return dumper.represent_scalar("tag:yaml.org,2002:timestamp", value)
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_str(value)


def _represent_datetime(dumper: yaml.SafeDumper, value: _dt.date) -> yaml.Node:
    return _represent_str(dumper, json_safe(value))


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_dt.datetime, _represent_datetime)
_Dumper.add_representer(_dt.date, _represent_datetime)
_Dumper.add_representer(tuple, yaml.SafeDumper.represent_list)

_FLOW_MAX = 80


def _dump_key(key: str, value: Any) -> str:
    """``key: value`` as YAML text ending in ``\\n`` (short scalar lists in flow style)."""
    if not isinstance(key, str):
        raise TypeError(f"frontmatter keys must be strings, not {type(key).__name__}")
    if isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, (str, int, float, bool)) for v in value
    ):
        flow = yaml.dump(
            {key: list(value)},
            Dumper=_Dumper,
            default_flow_style=None,
            allow_unicode=True,
            sort_keys=False,
            width=1 << 30,
        )
        if len(flow) <= _FLOW_MAX and flow.count("\n") == 1:
            return flow
    return yaml.dump(
        {key: value},
        Dumper=_Dumper,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        width=1 << 30,
    )


HEAD_KEYS = ("type", "id", "title", "created", "updated", "project")
"""The keys that open the frontmatter of the records the server writes as pages (a note,
a session page, a handoff), in this order: its kind, its id, its title, when it was
created and last updated, and its project. (A topic, project or imported agent-file page
has a frontmatter of its own.)"""


def page_head(
    kind: str, page_id: str, title: str, created: str, updated: str, project: str | None
) -> dict[str, Any]:
    """The :data:`HEAD_KEYS` of a record the server writes as a page, as the start of its frontmatter
    dict: ``{type: kind, id: page_id, title, created, updated, project}`` (``created`` and
    ``updated``: ISO-8601 text; ``project`` None for a page of no project). The caller
    adds its own keys after these. Raises nothing."""
    return dict(zip(HEAD_KEYS, (kind, page_id, title, created, updated, project), strict=True))


def dump_page(metadata: Mapping[str, Any], body: str) -> str:
    """A new page's text: ``---\\n<keys in the given order>---\\n\\n`` + body (LF endings).

    A non-empty body gets a final newline if it lacks one.
    """
    head = "".join(_dump_key(k, v) for k, v in metadata.items())
    if body and not body.endswith("\n"):
        body += "\n"
    return f"---\n{head}---\n\n{body}"


def _line_ending(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    if line.endswith(b"\n"):
        return b"\n"
    if line.endswith(b"\r"):
        return b"\r"
    return b""


def _strip_boms(raw: bytes) -> tuple[bytes, bytes]:
    n = 0
    while raw.startswith(_BOM_BYTES, n):
        n += len(_BOM_BYTES)
    return raw[:n], raw[n:]


def _decode_line(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").replace(_BOM, "")


def _equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def set_keys(raw: bytes, updates: Mapping[str, Any], remove: Iterable[str] = ()) -> bytes:
    """Set and remove top-level frontmatter keys, keeping every other byte of ``raw``.

    - An existing key's lines (the key line and its indented continuation) are replaced by
      a fresh ``key: value`` dump; a key whose value is already equal is left as it is.
      With duplicate keys, the last one (the one readers use) is replaced; ``remove``
      deletes every occurrence.
    - New keys go, in ``updates`` order, just before the closing fence.
    - A file with no frontmatter (whose first line is not ``---``) gets a new block at the
      top. The file's line ending (CRLF or LF) and BOM are kept.

    Values: str, int, float, bool, None, date/datetime, lists and dicts of these.
    Returns the new bytes (``raw`` itself when nothing changes).
    Raises :class:`FrontmatterError` when the existing frontmatter is unclosed, invalid
    YAML, not a mapping, or cannot be spliced safely; the caller must not write then.
    """
    remove = [k for k in remove if k not in updates]
    bom, data = _strip_boms(raw)
    lines = data.splitlines(keepends=True)
    first = _decode_line(lines[0]) if lines else ""
    if not lines or not is_opening_fence(first):
        if not updates:
            return raw
        eol = _line_ending(lines[0]) if lines else b""
        eol = eol or b"\n"
        block = "---\n" + "".join(_dump_key(k, v) for k, v in updates.items()) + "---\n"
        return bom + block.replace("\n", eol.decode()).encode("utf-8") + data

    close = find_closing_fence([_decode_line(x) for x in lines])
    if close is None:
        raise FrontmatterError("frontmatter opens with --- but is never closed", 1)
    eol = _line_ending(lines[0]) or b"\n"
    try:
        yaml_text = b"".join(lines[1:close]).decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = b"".join(lines[1:close])[: e.start]
        line = 2 + prefix.count(b"\n") + prefix.count(b"\r") - prefix.count(b"\r\n")
        raise FrontmatterError("frontmatter is not valid UTF-8", line) from e
    if any(ch in yaml_text for ch in ("\x85", "\u2028", "\u2029", _BOM)):
        raise FrontmatterError("frontmatter contains unusual line breaks or U+FEFF", 2)
    yaml_text = yaml_text.replace("\r\n", "\n").replace("\r", "\n")
    res = load_yaml(yaml_text)
    if not res.ok:
        line = res.error_line + 2 if res.error_line is not None else 2
        raise FrontmatterError(f"frontmatter is not valid YAML: {res.error}", line)
    if res.data is None:
        old: dict[str, Any] = {}
    elif isinstance(res.data, dict):
        old = res.data
    else:
        raise FrontmatterError("frontmatter is not a mapping of keys to values", 2)

    node, keys = _compose(yaml_text)
    if isinstance(node, MappingNode) and node.flow_style:
        out = _set_keys_flow(lines, yaml_text, node, old, updates, remove, eol)
    else:
        out = _set_keys_block(lines, close, node, keys, old, updates, remove, eol)
    if out is None:
        return raw
    new = bom + out
    _verify(new, old, updates, remove)
    return new


def _yaml_line_text(value: str, eol: bytes, indent: int = 0) -> bytes:
    if indent:
        value = "".join(" " * indent + ln for ln in value.splitlines(keepends=True))
    return value.replace("\n", eol.decode()).encode("utf-8")


def _compose(yaml_text: str) -> tuple[Node | None, list[str | None]]:
    """The document's node tree as written (no merge flattening) and its top-level keys.
    Raises FrontmatterError for text the YAML library refuses (its reader checks some
    characters only here)."""
    try:
        loader = PageLoader(yaml_text)
    except (yaml.YAMLError, ValueError) as e:
        raise FrontmatterError(f"frontmatter is not valid YAML: {e}", 2) from None
    try:
        node = loader.get_single_node()
        keys: list[str | None] = []
        if isinstance(node, MappingNode):
            for k_node, _ in node.value:
                merge = k_node.tag == "tag:yaml.org,2002:merge"
                keys.append(None if merge else loader.key_string(k_node))
        return node, keys
    except yaml.YAMLError as e:
        raise FrontmatterError(f"frontmatter is not valid YAML: {e}", 2) from None
    finally:
        loader.dispose()


def _node_end(node: Node, seen: set[int]) -> tuple[int, int]:
    """(line, column) where a value's own text ends (0-based, in the YAML text).

    For a block collection that is the end of its last item, not the end mark libyaml
    reports (the start of the next token, past any comments in between).
    """
    end = (node.end_mark.line, node.end_mark.column)
    if id(node) in seen:
        return end
    seen.add(id(node))
    if isinstance(node, (SequenceNode, MappingNode)) and not node.flow_style and node.value:
        ends = [(node.start_mark.line, node.start_mark.column)]
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                ends.append(_node_end(child, seen))
        return max(ends)
    return end


def _set_keys_block(
    lines: list[bytes],
    close: int,
    node: Node | None,
    keys: list[str | None],
    old: dict[str, Any],
    updates: Mapping[str, Any],
    remove: list[str],
    eol: bytes,
) -> bytes | None:
    """Splice whole lines of a block mapping. None when nothing changes."""
    # Spans of top-level entries as [start, end) indexes into ``lines`` (file lines).
    spans: dict[str, list[tuple[int, int]]] = {}
    indent = 0
    if isinstance(node, MappingNode) and node.value:
        entries = node.value
        indent = entries[0][0].start_mark.column
        starts = [k.start_mark.line + 1 for k, _ in entries]
        for n, (_, v_node) in enumerate(entries):
            start = starts[n]
            if n > 0 and starts[n - 1] == start:
                raise FrontmatterError("two keys share one line; cannot splice", start + 1)
            end_line, end_col = _node_end(v_node, set())
            end = end_line + 1 + (1 if end_col > 0 else 0)
            end = max(end, start + 1)
            end = min(end, starts[n + 1] if n + 1 < len(entries) else close)
            while end - 1 > start and not lines[end - 1].strip():
                end -= 1  # trailing blank lines belong to the file, not to the value
            key = keys[n]
            if key is not None:
                spans.setdefault(key, []).append((start, end))

    replace: dict[int, tuple[int, bytes]] = {}  # start -> (end, new bytes)
    appended: list[bytes] = []
    for key in remove:
        for start, end in spans.get(key, []):
            replace[start] = (end, b"")
    for key, value in updates.items():
        if key in old and key in spans and _equal(old[key], json_safe(value)):
            continue
        text = _yaml_line_text(_dump_key(key, value), eol, indent)
        if key in spans:
            start, end = spans[key][-1]
            replace[start] = (end, text)
        else:
            appended.append(text)
    if not replace and not appended:
        return None
    out: list[bytes] = []
    i = 0
    while i < len(lines):
        if i == close:
            out.extend(appended)
        if i in replace:
            end, text = replace[i]
            out.append(text)
            i = end
            continue
        out.append(lines[i])
        i += 1
    return b"".join(out)


def _set_keys_flow(
    lines: list[bytes],
    yaml_text: str,
    node: MappingNode,
    old: dict[str, Any],
    updates: Mapping[str, Any],
    remove: list[str],
    eol: bytes,
) -> bytes | None:
    """JSON-style ``{...}`` frontmatter: new keys only, on their own line before ``}``."""
    refuse = "frontmatter is a flow mapping ({...}); the server only adds keys to it"
    if any(k in old for k in remove):
        raise FrontmatterError(refuse, 2)
    for k, v in updates.items():
        if k in old and not _equal(old[k], json_safe(v)):
            raise FrontmatterError(refuse, 2)
    new_keys = [k for k in updates if k not in old]
    if not new_keys:
        return None
    end = node.end_mark  # just after "}"
    ylines = yaml_text.split("\n")
    if ylines[end.line][: end.column - 1].strip():
        raise FrontmatterError(
            "frontmatter is a flow mapping whose closing } shares a line; cannot splice",
            end.line + 2,
        )
    items = ", ".join(
        json.dumps(k, ensure_ascii=False) + ": " + _flow_value(updates[k]) for k in new_keys
    )
    text = "  " + (", " if node.value else "") + items + "\n"
    at = end.line + 1  # index into ``lines`` of the line holding "}"
    return b"".join(lines[:at]) + _yaml_line_text(text, eol) + b"".join(lines[at:])


def _flow_value(value: Any) -> str:
    return json.dumps(json_safe(value), ensure_ascii=False)


def _verify(new: bytes, old: dict[str, Any], updates: Mapping[str, Any], remove: list[str]) -> None:
    """Re-read the result: other keys unchanged, updated keys present, removed keys gone."""
    _, data = _strip_boms(new)
    lines = data.splitlines(keepends=True)
    close = find_closing_fence([_decode_line(x) for x in lines])
    text = b"".join(lines[1:close] if close else []).decode("utf-8")
    res = load_yaml(text.replace("\r\n", "\n").replace("\r", "\n"))
    ok = res.ok and isinstance(res.data, (dict, type(None)))
    if ok:
        meta = res.data or {}
        for k, v in old.items():
            if k not in updates and k not in remove and (k not in meta or not _equal(meta[k], v)):
                ok = False
        if any(k not in meta for k in updates) or any(k in meta for k in remove):
            ok = False
    if not ok:
        raise FrontmatterError("cannot change these keys without changing others", 2)
