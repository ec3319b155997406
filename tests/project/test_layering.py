"""Guard rails of the package's layout (docs/architecture.md, "Rooms and the one
direction of imports"): every module of ``wiki_memory`` sits in a room, imports run
only from a room to a lower one (or inside the room), and no modules import each other
in a loop. Every import statement counts: at module level, inside functions, and under
``if TYPE_CHECKING:``."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "wiki_memory"

#: room -> floor. A module may import from its own room or from a lower floor.
ROOMS: dict[str, int] = {
    "base": 0,  # config, errors, identity, auth, audit, datadir, hosts, liveserver, states, diskfull, zones, the package
    "capture": 1,
    "wiki": 2,
    "index": 3,
    "recall": 4,
    "core": 5,
    "harness": 6,
    "web": 6,
    "mcp": 6,
    "server": 7,
    "cli": 8,
}
BASE = {
    "__init__",
    "config",
    "errors",
    "identity",
    "auth",
    "audit",
    "datadir",
    "hosts",
    "liveserver",
    "states",
    "diskfull",
    "zones",
    "py",
}
#: entry points users' configurations name by path, kept as small shims: outside the
#: rooms, they may start anything (nothing imports them)
SHIMS = {"wiki_memory.cli_mcp"}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    out: dict[str, Path] = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def room_of(module: str) -> str | None:
    if module in SHIMS:
        return "shim"
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    if len(parts) == 2 and parts[1] in BASE:
        return "base"
    return parts[1] if parts[1] in ROOMS else None


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    me = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = me.split(".")[: -node.level]
                base = ".".join([*pkg, base] if base else pkg)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name.startswith("wiki_memory"):
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports_of(f, known) - {m} for m, f in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def upward(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, deps in sorted(g.items()):
        rm = room_of(m)
        for d in sorted(deps):
            rd = room_of(d)
            if rd == "shim":
                bad.append(f"{m} imports the shim {d}")
                continue
            if rm is None or rd is None or rm == rd or rm == "shim":
                continue
            if ROOMS[rd] >= ROOMS[rm]:
                bad.append(f"{m} ({rm}) imports {d} ({rd})")
    return bad


def test_every_module_sits_in_a_room():
    assert [m for m in modules() if room_of(m) is None] == []


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_imports_run_only_downwards():
    assert upward(graph()) == []


def test_the_guard_sees_function_level_and_type_checking_imports(tmp_path):
    src = tmp_path / "wiki_memory" / "capture"
    src.mkdir(parents=True)
    (src / "x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from wiki_memory.core import Memory\n"
        "def f():\n    import wiki_memory.cli.main\n",
        encoding="utf-8",
    )
    known = {"wiki_memory.core": Path("c"), "wiki_memory.cli.main": Path("m")}
    found = _imports_in(src / "x.py", tmp_path, known)
    assert found == {"wiki_memory.core", "wiki_memory.cli.main"}
    g = {"wiki_memory.capture.x": found, "wiki_memory.core": {"wiki_memory.capture.x"}}
    assert cycles(g) == [["wiki_memory.capture.x", "wiki_memory.core"]]
    assert len(upward(g)) == 2


def _imports_in(path: Path, root: Path, known: dict[str, Path]) -> set[str]:
    """:func:`imports_of` for a file outside the package (``root`` holds its
    ``wiki_memory`` folder)."""
    global PKG
    saved = PKG
    PKG = root / "wiki_memory"
    try:
        return imports_of(path, known)
    finally:
        PKG = saved
