"""Any byte: control characters in captured text, NUL included, never make a
page or a commit message binary: escaped visibly in pages, removed from commit messages."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo
from support import as_user, make_memory
from support import hook_event as event

pytestmark = pytest.mark.process

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def test_nul_and_control_characters_in_a_prompt(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "data")
    try:
        prompt = "deploy\x00now \x1b[31mred\x1b[0m bell\x07 del\x7f cr\rend"
        m.capture(event("UserPromptSubmit", prompt=prompt), as_user(m, "alice"))
        m.capture(event("Stop", last_assistant_message="done\x00ok"), as_user(m, "alice"))
        m.writer.flush()
        path = m.spool.sessions[next(iter(m.spool.sessions))].state["path"]
        m.writer.flush()
    finally:
        m.stop()
    wiki = m.wiki_dir
    data = (wiki / path).read_bytes()
    text = data.decode("utf-8")  # valid UTF-8
    assert "\x00" not in text and not CONTROL.search(text)
    assert "deploy\\x00now" in text and "\\x1b[31mred" in text and "done\\x00ok" in text
    repo = Repo(str(wiki))
    try:
        head = repo[repo.head()]
        assert isinstance(head, Commit)
        assert not CONTROL.search(head.message.decode("utf-8").replace("\n", ""))
        for sha in repo.object_store:
            obj = repo[sha]
            if isinstance(obj, Blob):
                raw = obj.as_raw_string()
                assert b"\x00" not in raw
                raw.decode("utf-8")
            elif isinstance(obj, Commit):
                assert b"\x00" not in obj.message
    finally:
        repo.close()
    if shutil.which("git"):
        r = subprocess.run(
            ["git", "fsck", "--full", "--strict"], cwd=wiki, capture_output=True, text=True
        )
        assert r.returncode == 0 and "warning" not in r.stderr.lower(), r.stderr
        numstat = subprocess.run(
            ["git", "log", "-p", "--numstat", "--format=", "--", path],
            cwd=wiki,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "Binary files" not in numstat and "-\t-\t" not in numstat
