"""Guard rail of who is asking (docs/architecture.md, "Who is asking"): the door (the
HTTP authentication middleware, the MCP caller, the CLI, the web sign-in) builds the
caller's :class:`~wiki_memory.identity.Identity` once and passes it down as a typed
value; the core never takes a bare user name for a caller.

Read from the source with ``ast``: no parameter anywhere in the package is annotated
``Identity | str`` (either a caller or a name), no parameter named for the caller
(``who``, ``caller``, ``ident``, ``identity``) is annotated ``str``, and in the core a
parameter ``user`` annotated ``str`` is a name kept as data (a commit's author, a record's
key, a name compared with a page's keys), one of :data:`NAMES_AS_DATA`; a new one is
either an ``Identity`` or added there with its reason."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "wiki_memory"

#: parameter names that always mean the caller
CALLER_NAMES = {"who", "caller", "ident", "identity"}

#: ``module:function`` in wiki_memory/core whose ``user: str`` is a name as data
NAMES_AS_DATA = {
    # the commit's author of a write (the caller is the separate ``who``)
    "core/memory.py:update_page",
    "core/memory.py:write_page",
    "core/pagehost.py:update_page",
    "core/pagehost.py:write_page",
    "core/pagewrite.py:update_pages",
    "core/knowledge.py:write_superseding",
    "core/forget.py:forget_bytes",
    "core/handoffs/auto.py:_supersede_inline",
    "core/agentimport.py:_page",
    # a name stored in or looked up by a record: the use record, the edit log, the
    # repository bindings, the recall walk, the audit log's filter
    "core/userecord.py:note",
    "core/userecord.py:feedback",
    "core/userecord.py:rows",
    "core/userecord.py:_new_row",
    "core/editlog.py:get",
    "core/editlog.py:put",
    "core/capture.py:_settle",
    "core/recaller.py:_walk",
    "core/pins.py:read_audit",
    # a name compared with a handoff's recorded creator or claimant
    "core/handoffs/states.py:decide_release",
    "core/handoffs/states.py:decide_cancel",
    # the directory of roles and grants, keyed by name, and the one adapter a door
    # (or the server's own job for a session the spool recorded) builds a caller with
    "core/scope.py:identity_of",
    "core/scope.py:grant",
    "core/scope.py:named",
}


def _params(tree: ast.AST) -> Iterator[tuple[str, ast.arg]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                if arg.annotation is not None:
                    yield node.name, arg


def _parts(annotation: ast.expr) -> set[str]:
    """The members of an annotation written as a union (``A | B | None``)."""
    text = ast.unparse(annotation).replace("'", "").replace('"', "")
    return {p.strip() for p in text.split("|")}


@cache
def _scan() -> tuple[list[str], list[str], list[str]]:
    either: list[str] = []
    caller_str: list[str] = []
    user_str: list[str] = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG).as_posix()
        for func, arg in _params(ast.parse(f.read_text(encoding="utf-8"))):
            parts = _parts(arg.annotation)  # type: ignore[arg-type]
            where = f"{rel}:{func}"
            if "Identity" in parts and "str" in parts:
                either.append(f"{where}({arg.arg})")
            if arg.arg in CALLER_NAMES and "str" in parts:
                caller_str.append(f"{where}({arg.arg})")
            if rel.startswith("core/") and arg.arg == "user" and "str" in parts:
                user_str.append(where)
    return either, caller_str, user_str


def test_no_signature_takes_an_identity_or_a_name() -> None:
    either, _caller, _user = _scan()
    assert either == [], "take the Identity the door built, never `Identity | str`"


def test_no_caller_parameter_is_a_name() -> None:
    _either, caller_str, _user = _scan()
    assert caller_str == [], "a caller parameter is an Identity, built by the door"


def test_a_user_name_in_the_core_is_data_never_the_caller() -> None:
    _either, _caller, user_str = _scan()
    new = sorted(set(user_str) - NAMES_AS_DATA)
    assert new == [], (
        "these core signatures take the caller as a name: take the Identity the door "
        "built (or, for a name kept as data, add it to NAMES_AS_DATA with its reason)"
    )
    gone = sorted(NAMES_AS_DATA - set(user_str))
    assert gone == [], "no longer take a name: drop them from NAMES_AS_DATA"


def test_the_guard_sees_what_it_forbids() -> None:
    """The scan reads annotations as written, string annotations included."""
    tree = ast.parse(
        "def f(who: 'Identity | str | None', user: str, x: int) -> None: ...\n"
        "def g(caller: str | None) -> None: ...\n"
    )
    found = {(func, arg.arg): _parts(arg.annotation) for func, arg in _params(tree)}  # type: ignore[arg-type]
    assert found[("f", "who")] == {"Identity", "str", "None"}
    assert "str" in found[("g", "caller")]
