"""Guard rail of the CLI's layout (docs/architecture.md, floor 8): every ``wiki-memory``
subcommand is declared through ``wiki_memory/cli/declare.py`` (``add_command``: the
parser, its help and the function that runs it; ``add_flag``: an on/off option), so the
way a command is declared is written once. A command module that calls argparse's
``add_parser`` or adds a ``store_true`` option itself is named here."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "wiki_memory" / "cli"
#: the one module that talks to argparse's subparsers and on/off options directly
DECLARE = "declare.py"


def around_declare(path: Path) -> list[str]:
    """``file:line what`` for every ``add_parser(...)`` call and every
    ``add_argument(..., action="store_true")`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "add_parser":
            found.append(f"{path.name}:{node.lineno} add_parser")
        flag = any(
            k.arg == "action"
            and isinstance(k.value, ast.Constant)
            and k.value.value == "store_true"
            for k in node.keywords
        )
        if node.func.attr == "add_argument" and flag:
            found.append(f"{path.name}:{node.lineno} store_true option")
    return found


def test_every_subcommand_is_declared_through_declare_py() -> None:
    stray = [
        hit
        for path in sorted(CLI.glob("*.py"))
        if path.name != DECLARE
        for hit in around_declare(path)
    ]
    assert stray == [], "declare these with cli/declare.py's add_command / add_flag: " + ", ".join(
        stray
    )


def test_the_guard_sees_a_stray_declaration(tmp_path: Path) -> None:
    module = tmp_path / "cmd.py"
    module.write_text(
        "def register(sub):\n"
        "    p = sub.add_parser('x', help='y')\n"
        "    p.add_argument('--json', action='store_true', help='z')\n",
        encoding="utf-8",
    )
    assert around_declare(module) == ["cmd.py:2 add_parser", "cmd.py:3 store_true option"]
