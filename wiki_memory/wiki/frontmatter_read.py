"""YAML frontmatter, reading: the fences of a frontmatter block and :func:`load_yaml`,
which turns the block into JSON-safe data (used by :func:`wiki_memory.wiki.page.parse_page`
and by the writer, :mod:`wiki_memory.wiki.frontmatter`, so both agree on what is
readable): string keys as written, timestamps as ISO-8601 strings, duplicate keys
reported (the last one wins). See ``docs/pages.md``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from wiki_memory.wiki.frontmatter_fast import simple_mapping

__all__ = [
    "MAX_VALUES",
    "DuplicateKey",
    "YamlResult",
    "find_closing_fence",
    "is_closing_fence",
    "is_opening_fence",
    "json_safe",
    "load_yaml",
    "normalize_timestamp",
]

# libyaml when present (about 10x faster); the pure-Python loader otherwise. Both modules
# (reading and writing) use this same loader, so they agree on what is readable.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Most values a frontmatter may expand to (guards against alias bombs).
MAX_VALUES = 100_000


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


TS_RE = SafeConstructor.timestamp_regexp


def normalize_timestamp(text: str) -> str | None:
    """A YAML timestamp as an ISO-8601 string with the written precision and zone.

    ``2024-05-01`` -> ``2024-05-01``; ``2024-05-01 10:30:00+2`` -> ``2024-05-01T10:30:00+02:00``;
    a ``Z`` stays ``Z``; fractions keep their digits. None when ``text`` is not a valid
    timestamp (for example ``2024-02-30``).
    """
    m = TS_RE.match(text.strip())
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


class PageLoader(_BaseLoader):  # type: ignore[misc]
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


PageLoader.add_constructor("tag:yaml.org,2002:timestamp", PageLoader.construct_timestamp_text)
PageLoader.add_constructor("tag:yaml.org,2002:float", PageLoader.construct_float_text)
PageLoader.add_constructor("tag:yaml.org,2002:binary", PageLoader.construct_binary_text)
PageLoader.add_constructor("tag:yaml.org,2002:set", PageLoader.construct_set_list)
PageLoader.add_constructor(None, PageLoader.construct_any)


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
    """Parse one YAML document; never raises. ``data`` is JSON-safe when ``ok``. A flat
    mapping of simple keys and texts is read without the YAML library
    (:func:`wiki_memory.wiki.frontmatter_fast.simple_mapping`, the same result)."""
    simple = simple_mapping(text)
    if simple is not None:
        return YamlResult(data=simple)
    try:  # the loader's reader refuses some text as it is built (a lone surrogate)
        loader = PageLoader(text)
    except (yaml.YAMLError, ValueError) as e:
        return YamlResult(ok=False, error=str(e) or type(e).__name__)
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
