"""Case C43 step 4 and C53's MCP part: the stdio bridge, configured by ``install-mcp`` and
spawned in a project folder, lets the server know the project: no ``project`` argument
needed; a name is matched case-insensitively or through the folder's mapping; a typo is a
tool error naming the known projects, and no project folder appears."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from serverproc import ServerProcess

from wiki_memory.harness.mcp_install import plan_install

pytestmark = pytest.mark.process


def text_of(res: Any) -> str:
    return "\n".join(c.text for c in res.content if c.type == "text")


async def calls(
    home: Path, data: Path, cwd: Path, todo: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    from mcp import Client, StdioServerParameters

    entry = plan_install("claude-code", home=home, data_dir=data).entry
    params = StdioServerParameters(
        command=entry["command"],
        args=list(entry["args"]),
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        cwd=str(cwd),
    )
    async with Client(params) as c:
        return [await c.call_tool(name, args) for name, args in todo]


def test_c43_project_from_the_bridge_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dev = home / "dev"
    service = dev / "atlas-service"
    (service / ".git").mkdir(parents=True)
    (service / ".wiki-memory.toml").write_text('project = "atlas"\n')
    atlas = dev / "atlas"
    (atlas / ".git").mkdir(parents=True)
    (atlas / ".wiki-memory.toml").write_text('project = "atlas"\n')
    data = tmp_path / "data"
    with ServerProcess(data):
        projects = data / "wiki" / "projects"
        for name in ("atlas", "borealis"):
            (projects / name).mkdir(parents=True, exist_ok=True)
        out = asyncio.run(
            calls(
                home,
                data,
                service,
                [
                    ("memory_remember", {"text": "the staging port is 8444"}),
                    ("memory_remember", {"text": "a", "project": "Atlas"}),
                    ("memory_remember", {"text": "b", "project": "atlas-service"}),
                    ("memory_remember", {"text": "c", "project": "atlsa"}),
                    ("memory_brief", {}),
                ],
            )
        )
        for r in out[:3]:
            assert not r.is_error, text_of(r)
            assert r.structured_content["path"].startswith("projects/atlas/notes/")
        assert out[3].is_error
        assert text_of(out[3]) == (
            "unknown_project: project 'atlsa' does not exist (did you mean atlas?);"
            " pass create_project: true (CLI: --new-project) to create it;"
            " projects: atlas, borealis"
        )
        assert not out[4].is_error and out[4].structured_content["project"] == "atlas"
        # C53: a bridge spawned in /home/dev/atlas
        c53 = asyncio.run(
            calls(
                home,
                data,
                atlas,
                [
                    ("memory_remember", {"text": "d", "project": "borealis"}),
                    ("memory_remember", {"text": "e"}),
                    ("handoff_create", {"title": "finish the port switch"}),
                ],
            )
        )
        assert c53[0].structured_content["path"].startswith("projects/borealis/notes/")
        assert c53[1].structured_content["path"].startswith("projects/atlas/notes/")
        h = c53[2].structured_content["handoff"]
        assert h["project"] == "atlas" and h["harness"] == "claude-code"
        # the project list: exactly atlas and borealis, no folder from a typo or a path
        assert sorted(p.name for p in projects.iterdir()) == ["atlas", "borealis"]


def _git_repo(folder: Path, message: str) -> None:
    """A git repository at ``folder`` with one empty commit (its own root commit)."""
    import os
    import subprocess

    folder.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", message]):
        subprocess.run(["git", "-C", str(folder), *cmd], check=True, env=env)


def test_the_bridge_files_a_write_under_its_repositorys_project(tmp_path: Path) -> None:
    """Two repositories whose folders are both called ``api``: a note remembered through
    the bridge in each goes to that repository's own project (the bridge sends the
    repository id as the hook does); a name alone never reaches the other's."""
    home = tmp_path / "home"
    one, two = home / "one" / "api", home / "two" / "api"
    _git_repo(one, "first repository")
    _git_repo(two, "second repository")
    data = tmp_path / "data"
    with ServerProcess(data):
        note = ("memory_remember", {"text": "the api listens on 8080"})
        r1 = asyncio.run(calls(home, data, one, [note]))[0]
        r2 = asyncio.run(calls(home, data, two, [note]))[0]
        r3 = asyncio.run(calls(home, data, one, [("memory_remember", {"text": "again"})]))[0]
        b2 = asyncio.run(calls(home, data, two, [("memory_brief", {})]))[0]
    for r in (r1, r2, r3, b2):
        assert not r.is_error, text_of(r)
    assert b2.structured_content["project"] == "api-2"
    assert r1.structured_content["path"].startswith("projects/api/notes/")
    assert r2.structured_content["path"].startswith("projects/api-2/notes/")
    assert r3.structured_content["path"].startswith("projects/api/notes/")
