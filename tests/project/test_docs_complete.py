"""Every CLI command, ``/v1`` route, MCP tool and setting is documented (DESIGN "Modules":
"a second [test] checks that every CLI command, route, MCP tool and setting is documented").

Nothing here is a hand-written list: the commands come from the argparse parser, the routes
from the Starlette app's route table, the tools from ``tools/list``, the settings from the
fields of :class:`wiki_memory.config.Settings` (and the handoff tunables' config keys), and
the environment names from what the loaders really read (``tests/faces.py`` holds the
enumerations shared with ``test_scope_faces.py``).

The documentation is ``README.md`` plus ``docs/*.md``. What counts as documented:

- **CLI command** ``NAME``: the text ``wiki-memory NAME`` anywhere (prose, a code span or a
  code block), or a code span starting with ``NAME`` in the first cell of a table row (the
  README's command table). A sub-command ``NAME SUB`` (``handoff claim``, ``token list``):
  the same, with ``SUB`` as the next word, or as one of the next word's ``a|b|c``
  alternatives (``handoff create|list|show``).
- **Route** ``METHOD /v1/...``: the method right before the path (blanks, backticks or table
  pipes between them), the path written with ``{name}`` where the route has a parameter (any
  name: ``{id}`` for ``{hid}`` is fine), and not continued by more path (``GET /v1/pages``
  is not documented by ``GET /v1/pages/{path}``). A query string may follow.
- **MCP tool**: its name alone in a code span (``page_read``).
- **Setting**: its name in a code span, alone or followed by ``=``/a blank (``idle_seconds``,
  ``handoff_auto = false``); and every environment variable that sets it, by its full name
  (``WIKI_MEMORY_IDLE_SECONDS``), anywhere.
"""

from __future__ import annotations

import dataclasses
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import faces
import pytest
from support import REPO

ENV_PREFIX = "WIKI_MEMORY_"


# --------------------------------------------------------------------------------------
# The documentation and the matching rules (pure functions of the text, tested below)
# --------------------------------------------------------------------------------------


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@cache
def docs_text() -> str:
    return "\n\n".join(p.read_text(encoding="utf-8") for p in doc_files())


_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def code_spans(text: str) -> list[str]:
    """The contents of the inline code spans of ``text`` (single backticks)."""
    return _CODE_SPAN.findall(text)


def _first_cell(line: str) -> str | None:
    """The first cell of a markdown table row (``\\|`` inside it is not a separator)."""
    s = line.strip()
    if not s.startswith("|"):
        return None
    m = re.match(r"\|((?:\\\||[^|])*)", s)
    return m.group(1) if m else None


def command_phrases(text: str) -> list[list[str]]:
    """Word lists that name a command: what follows ``wiki-memory`` (up to the end of the
    line or code span), and each code span in the first cell of a table row."""
    out: list[list[str]] = []
    for m in re.finditer(r"\bwiki-memory[ \t]+([^`\n]*)", text):
        out.append(m.group(1).split())
    for line in text.splitlines():
        cell = _first_cell(line)
        if cell is not None:
            out.extend(span.split() for span in code_spans(cell))
    return out


def _alternatives(word: str) -> set[str]:
    return {w for w in word.replace("\\|", "|").split("|") if w}


def command_documented(words: tuple[str, ...], text: str) -> bool:
    """True when some phrase of ``text`` starts with ``words`` (each word may be one of an
    ``a|b|c`` alternation)."""
    for phrase in command_phrases(text):
        if len(phrase) >= len(words) and all(
            w in _alternatives(p) for w, p in zip(words, phrase, strict=False)
        ):
            return True
    return False


def route_pattern(method: str, path: str) -> re.Pattern[str]:
    """The regex that finds ``METHOD path`` in the docs (see the module doc)."""
    parts = []
    for seg in re.split(r"(\{[^}]*\})", path):
        if seg.startswith("{"):
            parts.append(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
        else:
            parts.append(re.escape(seg))
    return re.compile(rf"(?<![A-Za-z]){re.escape(method)}[\s`|]+{''.join(parts)}(?![\w/{{}}.\-])")


def route_documented(method: str, path: str, text: str) -> bool:
    return route_pattern(method, path).search(text) is not None


def name_in_code_span(name: str, text: str) -> bool:
    """``name`` alone in a code span, or followed by a blank or ``=`` (``key = value``)."""
    pat = re.compile(rf"{re.escape(name)}(?:\s*=.*|\s.*)?")
    return any(pat.fullmatch(span.strip()) for span in code_spans(text))


def env_documented(env: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(env)}(?![A-Za-z0-9_])", text) is not None


# --------------------------------------------------------------------------------------
# The enumerations
# --------------------------------------------------------------------------------------


def v1_routes(tmp: Path) -> list[tuple[str, str]]:
    """``(METHOD, path)`` of every ``/v1`` route, parameters as ``{name}`` (no converter)."""
    out = []
    for r in faces.app_routes(tmp):
        method, path = r.split(" ", 1)
        if path == "/v1" or path.startswith("/v1/"):
            out.append((method, re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)))
    return out


def _probe_value(default: Any, tmp: Path) -> tuple[str, Any]:
    """An environment string for a setting whose default is ``default``, and the value it
    must load as (different from the default)."""
    if isinstance(default, bool):
        return ("0", False) if default else ("1", True)
    if isinstance(default, int):
        return str(default + 7), default + 7
    if isinstance(default, float):
        return str(default + 0.5), default + 0.5
    if isinstance(default, str):
        return "probe.example", "probe.example"
    return str(tmp / "probe"), tmp / "probe"  # a path, or an optional path (None)


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(ENV_PREFIX):
            monkeypatch.delenv(k)


def settings_and_env(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Every setting name (``Settings`` fields, then the handoff and brief config keys) and
    every environment name that sets one: ``WIKI_MEMORY_<NAME>`` where setting it really
    changes what the loader returns, plus the ``WIKI_MEMORY_*`` names ``config.py`` reads
    itself (``WIKI_MEMORY_HOME``)."""
    from wiki_memory import config
    from wiki_memory.config import Settings, load_settings

    _clean_env(monkeypatch)
    names: list[str] = []
    envs: list[str] = []
    base = load_settings(tmp)
    for f in dataclasses.fields(Settings):
        names.append(f.name)
        env = ENV_PREFIX + f.name.upper()
        raw, want = _probe_value(getattr(base, f.name), tmp)
        with monkeypatch.context() as mp:
            mp.setenv(env, raw)
            if getattr(load_settings(tmp), f.name) == want:
                envs.append(env)
    source = Path(config.__file__).read_text(encoding="utf-8")
    envs += sorted(set(re.findall(r"\b" + ENV_PREFIX + r"[A-Z][A-Z0-9_]*\b", source)) - set(envs))

    from wiki_memory.core.handoffs import HandoffConfig

    hbase = HandoffConfig.load(None)
    for attr, key in HandoffConfig._KEYS.items():  # the config.toml key of each tunable
        names.append(key)
        env = ENV_PREFIX + key.upper()
        raw, want = _probe_value(getattr(hbase, attr), tmp)
        with monkeypatch.context() as mp:
            mp.setenv(env, raw)
            if getattr(HandoffConfig.load(None), attr) == want:
                envs.append(env)
    return names, envs


# --------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------


def test_every_cli_command_is_documented() -> None:
    cmds = faces.cli_commands()
    assert any(len(c) == 1 for c in cmds), "no CLI command found in the parser"
    text = docs_text()
    missing = [" ".join(c) for c in cmds if not command_documented(c, text)]
    assert not missing, (
        "CLI commands not in README.md or docs/*.md (write `wiki-memory NAME ...` or a "
        f"table row starting with `NAME`): {missing}"
    )


def test_every_v1_route_is_documented(tmp_path: Path) -> None:
    routes = v1_routes(tmp_path)
    assert routes, "no /v1 route found in the app"
    text = docs_text()
    missing = [f"{m} {p}" for m, p in routes if not route_documented(m, p, text)]
    assert not missing, (
        "routes not in README.md or docs/*.md (write `METHOD /v1/path/{param}`, "
        f"e.g. in docs/api.md): {missing}"
    )


def test_every_mcp_tool_is_documented(tmp_path: Path) -> None:
    tools = faces.mcp_tool_names(tmp_path)
    assert tools, "tools/list returned no tool"
    text = docs_text()
    missing = [t for t in tools if not name_in_code_span(t, text)]
    assert not missing, f"MCP tools not in docs (add a row to docs/mcp.md's table): {missing}"


def test_every_setting_is_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names, envs = settings_and_env(tmp_path, monkeypatch)
    assert names and envs, "no setting or environment name found"
    text = docs_text()
    missing = [n for n in names if not name_in_code_span(n, text)]
    missing += [e for e in envs if not env_documented(e, text)]
    assert not missing, (
        f"settings or their environment names not in docs (docs/settings.md): {missing}"
    )


def test_settings_env_probe_finds_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe in :func:`settings_and_env` works: every ``Settings`` field but the data
    directory itself is settable by ``WIKI_MEMORY_<FIELD>`` (so a broken probe cannot make
    the settings test pass by finding no environment names)."""
    from wiki_memory.config import Settings

    _, envs = settings_and_env(tmp_path, monkeypatch)
    fields = [f.name for f in dataclasses.fields(Settings)]
    unset = [f for f in fields if ENV_PREFIX + f.upper() not in envs]
    assert unset == ["data_dir"], unset
    assert ENV_PREFIX + "HOME" in envs


def test_the_matching_rules() -> None:
    """The rules above accept what the docs write and refuse near misses, so a missing
    mention fails the tests (and a mention of something else does not pass them)."""
    table = "| command | what |\n| --- | --- |\n| `handoff create\\|list\\|claim` | handoffs |\n"
    table += "| `install-hooks` / `recover` | hooks |\n| x | see `doctor` |\n"
    assert command_documented(("handoff",), table)
    assert command_documented(("handoff", "claim"), table)
    assert not command_documented(("handoff", "release"), table)
    assert command_documented(("recover",), table)
    assert not command_documented(("doctor",), table)  # not in the first cell
    assert not command_documented(("hooks",), table)
    assert command_documented(("token", "list"), "run `wiki-memory token list --json`")
    assert command_documented(("serve",), "```sh\nwiki-memory serve --open\n```")
    assert not command_documented(("serve",), "`wiki-memory server`")

    assert route_documented("GET", "/v1/pages/{path}", "`GET /v1/pages/{path}?cursor=0`")
    assert route_documented("POST", "/v1/handoffs/{hid}/{verb}", "`POST /v1/handoffs/{id}/{verb}`")
    assert route_documented("GET", "/v1/pages", "| GET | `/v1/pages` |")
    assert not route_documented("PUT", "/v1/pages/{path}", "`GET /v1/pages/{path}`")
    assert not route_documented("GET", "/v1/pages", "`GET /v1/pages/{path}`")
    assert not route_documented("GET", "/v1/pages/{path}", "`GET /v1/pages/notes/a.md`")
    assert not route_documented(
        "POST", "/v1/handoffs/{hid}/{verb}", "`POST /v1/handoffs/{id}/claim`"
    )

    assert name_in_code_span("page_read", "| `page_read` | `path` |")
    assert name_in_code_span("handoff_auto", "`handoff_auto = false`")
    assert not name_in_code_span("page_read", "`page_read_all`")
    assert not name_in_code_span("watch", "`watchfiles`")
    assert not name_in_code_span("watch", "watch it")
    assert env_documented("WIKI_MEMORY_HOME", "($WIKI_MEMORY_HOME, else ...)")
    assert env_documented("WIKI_MEMORY_HOME", "`WIKI_MEMORY_HOME`")
    assert not env_documented("WIKI_MEMORY_HOST", "`WIKI_MEMORY_HOSTS`")
