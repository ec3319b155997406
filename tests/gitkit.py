"""What a test asks of a git repository by git's own command: every object it lists,
and every file or object under a folder that still holds a value (the purge tests'
"nothing left anywhere")."""

from __future__ import annotations

import subprocess
from pathlib import Path


def all_objects(repo: Path) -> bytes:
    """Every object git lists in ``repo`` (reachable or not), with its content."""
    return subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout


def holding(root: Path, value: bytes) -> list[str]:
    """Every file under ``root`` (listed, not a fixed set of places) whose name or bytes
    hold ``value``; git's object files are read as the objects git lists (unpacked)."""
    found = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if value in rel.encode():
            found.append(rel)
        elif f.is_file() and not f.is_symlink() and "/objects/" not in f"/{rel}":
            if value in f.read_bytes():
                found.append(rel)
    for git_dir in [root, *sorted(p.parent for p in root.rglob("objects") if p.is_dir())]:
        if (git_dir / "objects").is_dir() and (git_dir / "HEAD").is_file():
            if value in all_objects(git_dir):
                found.append(f"{git_dir.relative_to(root).as_posix()}: objects")
    return found
