"""The one project rule (``wiki_memory/core/projects.py``; case C53's folders): an explicit
name matched case-insensitively or through its folder's mapping, else the nearest
``.wiki-memory.toml``, else the git repository (a worktree maps to its main repository),
else the session's project or none; never a folder name without a repository or a
configuration behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiki_memory.core.projects import UnknownProject, folder_project, resolve_project
from wiki_memory.errors import BadRequest


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    """C53's folders under ``tmp_path/home/dev``."""
    home = tmp_path / "home" / "dev"
    atlas = home / "atlas"
    (atlas / ".git" / "worktrees" / "feature-x").mkdir(parents=True)
    (atlas / ".wiki-memory.toml").write_text('project = "atlas"\n')
    (atlas / "services" / "api").mkdir(parents=True)
    wt = home / "atlas-wt" / "feature-x"
    wt.mkdir(parents=True)
    (wt / ".git").write_text(f"gitdir: {atlas / '.git' / 'worktrees' / 'feature-x'}\n")
    (atlas / ".git" / "worktrees" / "feature-x" / "commondir").write_text("../..\n")
    (home / "borealis" / ".git").mkdir(parents=True)
    service = home / "atlas-service"
    (service / ".git").mkdir(parents=True)
    (service / ".wiki-memory.toml").write_text('project = "atlas"\n[capture]\nenabled = true\n')
    (tmp_path / "tmp" / "tmp.Q2x9").mkdir(parents=True)
    return home


KNOWN = ["atlas", "borealis"]


def test_folders_resolve_to_their_project(dev: Path) -> None:
    cases = {
        dev / "atlas": "atlas",
        dev / "atlas" / "services" / "api": "atlas",  # a subfolder: not "api"
        dev / "atlas-wt" / "feature-x": "atlas",  # a worktree: its main repository
        dev / "borealis": "borealis",  # a repository with no toml: its folder
        dev / "atlas-service": "atlas",  # the toml names it
    }
    for cwd, want in cases.items():
        assert resolve_project(None, cwd=cwd, known=KNOWN) == want, cwd
    # no repository, no configuration: the session's project, else none; never "dev"
    for cwd in (dev, dev.parent.parent / "tmp" / "tmp.Q2x9"):
        assert folder_project(cwd) is None
        assert resolve_project(None, cwd=cwd, known=KNOWN) is None
        assert resolve_project(None, cwd=cwd, known=KNOWN, current="atlas") == "atlas"


def test_explicit_names(dev: Path) -> None:
    here = dev / "atlas-service"
    assert resolve_project("Atlas", cwd=here, known=KNOWN) == "atlas"
    assert resolve_project("BOREALIS", cwd=here, known=KNOWN) == "borealis"
    assert resolve_project("atlas-service", cwd=here, known=KNOWN) == "atlas"  # its folder
    with pytest.raises(UnknownProject) as err:
        resolve_project("atlsa", cwd=here, known=KNOWN)
    assert str(err.value) == (
        "project 'atlsa' is not a project you may read (did you mean atlas?);"
        " your projects: atlas, borealis"
    )
    assert err.value.field == "project" and err.value.extra["projects"] == KNOWN
    # the folder mapping holds only in that folder
    with pytest.raises(UnknownProject):
        resolve_project("atlas-service", cwd=dev / "borealis", known=KNOWN)
    for bad in ("../atlas", ".git", "a/b"):
        with pytest.raises(BadRequest):
            resolve_project(bad, cwd=here, known=KNOWN)


def test_a_new_repository_is_a_project_before_the_wiki_knows_it(dev: Path) -> None:
    fresh = dev / "comet"
    (fresh / ".git").mkdir(parents=True)
    assert resolve_project(None, cwd=fresh / "src", known=KNOWN) == "comet"
    # named explicitly from inside it, its folder name maps to it too
    assert resolve_project("Comet", cwd=fresh, known=KNOWN) == "comet"
