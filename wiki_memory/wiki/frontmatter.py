"""YAML frontmatter: tolerant reading and careful, line-splicing writing.

Reading (:func:`load_yaml`, used by :func:`wiki_memory.wiki.page.parse_page`) turns a
frontmatter block into JSON-safe data: string keys as written, timestamps as ISO-8601
strings, duplicate keys reported (the last one wins).

Writing (:func:`set_keys`) changes only the top-level keys it is asked to change and keeps
every other byte of the file: key order, comments, quoting, line endings, a BOM. When the
existing frontmatter cannot be read it refuses with :class:`FrontmatterError` instead of
writing over it. See ``docs/pages.md``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "FrontmatterError",
    "YamlResult",
    "content_hash",
    "dump_page",
    "find_closing_fence",
    "is_closing_fence",
    "is_opening_fence",
    "json_safe",
    "load_yaml",
    "set_keys",
]

# libyaml when present (about 10x faster); the pure-Python loader otherwise. Both modules
# (reading and writing) use this same loader, so they agree on what is readable.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Most values a frontmatter may expand to (guards against alias bombs).
MAX_VALUES = 100_000

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


# --------------------------------------------------------------------------- fences


def is_opening_fence(line: str) -> bool:
    """True for the line that opens a frontmatter block: ``---`` (trailing blanks allowed)."""
    return line.rstrip(" \t\r\n") == "---"


def is_closing_fence(line: str) -> bool:
    """True for a line that closes a frontmatter block: ``---`` or ``...``."""
    s = line.rstrip(" \t\r\n")
    return s == "---" or s == "..."


def find_closing_fence(lines: list[str]) -> int | None:
    """Index of the closing fence in ``lines`` (``lines[0]`` is the opening one), or None."""
    for i in range(1, len(lines)):
        line = lines[i]
        if line[:3] in ("---", "...") and is_closing_fence(line):
            return i
    return None


# --------------------------------------------------------------------------- reading


_TS_RE = SafeConstructor.timestamp_regexp


def normalize_timestamp(text: str) -> str | None:
    """A YAML timestamp as an ISO-8601 string with the written precision and zone.

    ``2024-05-01`` -> ``2024-05-01``; ``2024-05-01 10:30:00+2`` -> ``2024-05-01T10:30:00+02:00``;
    a ``Z`` stays ``Z``; fractions keep their digits. None when ``text`` is not a valid
    timestamp (for example ``2024-02-30``).
    """
    m = _TS_RE.match(text.strip())
    if m is None:
        return None
    g = m.groupdict()
    try:
        year, month, day = int(g["year"]), int(g["month"]), int(g["day"])
        _dt.date(year, month, day)
        out = f"{year:04d}-{month:02d}-{day:02d}"
        if g["hour"] is None:
            return out
        hour, minute, second = int(g["hour"]), int(g["minute"]), int(g["second"])
        _dt.time(hour, minute, second)
        out += f"T{hour:02d}:{minute:02d}:{second:02d}"
        if g["fraction"]:
            out += "." + g["fraction"]
        if g["tz"]:
            if g["tz"] == "Z":
                out += "Z"
            else:
                tzh, tzm = int(g["tz_hour"]), int(g["tz_minute"] or 0)
                if tzh > 23 or tzm > 59:
                    return None
                out += f"{g['tz_sign']}{tzh:02d}:{tzm:02d}"
        return out
    except (TypeError, ValueError):
        return None


@dataclass
class DuplicateKey:
    """A key that appears more than once in one mapping; ``line`` is 0-based in the YAML."""

    key: str
    line: int


class _Loader(_BaseLoader):  # type: ignore[misc]
    """SafeLoader that reports duplicate keys, stringifies keys and keeps dates as text."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[DuplicateKey] = []

    def key_string(self, key_node: Node) -> str:
        key = self.construct_object(key_node, deep=True)
        if isinstance(key, str):
            return key
        if isinstance(key_node, ScalarNode):
            return str(key_node.value)  # as written: 2024 -> "2024", true -> "true"
        return json.dumps(json_safe(key), ensure_ascii=False, sort_keys=False)

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[str, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(
                None,
                None,
                f"expected a mapping node, but found {type(node).__name__}",
                node.start_mark,
            )
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            k = self.key_string(key_node)
            if k in seen:
                self.duplicates.append(DuplicateKey(k, key_node.start_mark.line))
            seen.add(k)
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            k = self.key_string(key_node)
            mapping[k] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_timestamp_text(self, node: Node) -> str:
        value = str(self.construct_scalar(node))
        return normalize_timestamp(value) or value

    def construct_float_text(self, node: Node) -> float | str:
        value = SafeConstructor.construct_yaml_float(self, node)  # type: ignore[arg-type]
        if isinstance(value, float) and not math.isfinite(value):
            return str(node.value)  # .inf / .nan are not JSON: keep as written
        return value

    def construct_binary_text(self, node: Node) -> str:
        raw = SafeConstructor.construct_yaml_binary(self, node)  # type: ignore[arg-type]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")

    def construct_set_list(self, node: Node) -> Any:
        data: list[Any] = []
        yield data
        if isinstance(node, MappingNode):
            data.extend(self.key_string(k) for k, _ in node.value)

    def construct_any(self, node: Node) -> Any:
        """Unknown tags (``!include x``, ``!!python/...``): the plain value, tag ignored."""
        if isinstance(node, ScalarNode):
            return self.construct_scalar(node)
        if isinstance(node, SequenceNode):
            return self.construct_sequence(node, deep=True)
        return self.construct_mapping(node, deep=True)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_timestamp_text)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_float_text)
_Loader.add_constructor("tag:yaml.org,2002:binary", _Loader.construct_binary_text)
_Loader.add_constructor("tag:yaml.org,2002:set", _Loader.construct_set_list)
_Loader.add_constructor(None, _Loader.construct_any)


class _TooLarge(ValueError):
    pass


def json_safe(value: Any, _budget: list[int] | None = None, _stack: set[int] | None = None) -> Any:
    """A copy of ``value`` that ``json.dumps`` accepts: str keys, lists, ISO dates, no NaN.

    Raises ValueError for recursive structures or more than :data:`MAX_VALUES` values.
    """
    budget = _budget if _budget is not None else [MAX_VALUES]
    stack = _stack if _stack is not None else set()
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge(f"frontmatter expands to more than {MAX_VALUES} values")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, _dt.datetime):
        return normalize_timestamp(value.isoformat(sep=" ")) or value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if id(value) in stack:
            raise ValueError("frontmatter refers to itself (recursive alias)")
        stack.add(id(value))
        try:
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    ks = k if isinstance(k, str) else _key_text(k)
                    out[ks] = json_safe(v, budget, stack)
                return out
            return [json_safe(v, budget, stack) for v in value]
        finally:
            stack.discard(id(value))
    return str(value)


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return str(key)
    return json.dumps(json_safe(key), ensure_ascii=False)


@dataclass
class YamlResult:
    """What :func:`load_yaml` found. Lines are 0-based within the YAML text."""

    data: Any = None
    ok: bool = True
    error: str | None = None
    error_line: int | None = None
    duplicates: list[DuplicateKey] = field(default_factory=list)


def load_yaml(text: str) -> YamlResult:
    """Parse one YAML document; never raises. ``data`` is JSON-safe when ``ok``."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        data = json_safe(data)
        return YamlResult(data=data, duplicates=loader.duplicates)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "invalid YAML"
        return YamlResult(ok=False, error=str(problem), error_line=mark.line if mark else None)
    except yaml.YAMLError as e:
        return YamlResult(ok=False, error=str(e) or "invalid YAML")
    except RecursionError:
        return YamlResult(ok=False, error="frontmatter is nested too deeply")
    except Exception as e:  # tolerant: never raise on content
        return YamlResult(ok=False, error=str(e) or type(e).__name__)
    finally:
        loader.dispose()


# --------------------------------------------------------------------------- writing


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented like Obsidian writes them, timestamps left unquoted."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if _TS_RE.match(value) and normalize_timestamp(value) == value:
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


def dump_page(metadata: Mapping[str, Any], body: str) -> str:
    """A new page's text: ``---\\n<keys in the given order>---\\n\\n`` + body (LF endings).

    A non-empty body gets a final newline if it lacks one.
    """
    head = "".join(_dump_key(k, v) for k, v in metadata.items())
    if body and not body.endswith("\n"):
        body += "\n"
    return f"---\n{head}---\n\n{body}"


def content_hash(raw: bytes) -> str:
    """SHA-256 of the file's bytes, hex (64 chars): the token for compare-and-set writes."""
    return hashlib.sha256(raw).hexdigest()


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
    """The document's node tree as written (no merge flattening) and its top-level keys."""
    loader = _Loader(yaml_text)
    try:
        node = loader.get_single_node()
        keys: list[str | None] = []
        if isinstance(node, MappingNode):
            for k_node, _ in node.value:
                merge = k_node.tag == "tag:yaml.org,2002:merge"
                keys.append(None if merge else loader.key_string(k_node))
        return node, keys
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
