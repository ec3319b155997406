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


def take_lock(lock: Path, age_seconds: float = 3600.0, timeout: float = 60.0) -> Path:
    """Take the git lock file ``lock`` as another git does (created exclusively, retried
    while the server holds it) and leave it behind, ``age_seconds`` old; returns it.

    Writing the file instead races a commit the test has just seen in HEAD: the server
    rewrites the index (``index.lock``) after it moves HEAD, and renaming its lock into
    place would take the test's away with it, so no commit would ever stall (a loaded
    machine widens that moment). Raises AssertionError when it stays taken ``timeout``
    seconds."""
    import os
    import time

    from support import wait_for

    lock.parent.mkdir(parents=True, exist_ok=True)

    def created() -> bool:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        return True

    wait_for(created, timeout, f"{lock.name} free to take", interval=0.02)
    t = time.time() - age_seconds
    os.utime(lock, (t, t))
    return lock
