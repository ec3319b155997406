"""A project is its repository (C59 of /work/shared/cases/README.md): events carry the
repository's id; two repositories both named ``api`` become two projects (``api`` and
``api-2``), never merged; a renamed, moved or cloned-again repository is the same
project; a repository's provisional id (before its first commit) is joined to its
root commit; an id-less project takes the first id captured into it. Grants are per
folder, so a member granted one ``api`` reads nothing of the other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory, wait_for

from wiki_memory.auth import TokenStore
from wiki_memory.capture.project import normal_origin
from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.core.repos import ids_of
from wiki_memory.datadir import ensure_layout

B, C, A = "root:" + "2" * 40, "root:" + "3" * 40, "root:" + "1" * 40


def ev(sid: str, name: str, repo: str | None, text: str, **extra: Any) -> dict[str, Any]:
    out = {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": sid,
        "project": name,
        "project_from": "git",
        "cwd": f"/home/dev/{name}",
        "payload": {"prompt": text},
        **extra,
    }
    if repo:
        out["repo_id"] = repo
    return out


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[Memory, TokenStore]]:
    data = tmp_path / "data"
    s = load_settings(data, watch=False, commit_delay_seconds=0.02)
    ensure_layout(s)
    tokens = TokenStore(s.auth_dir, owner_user="alice")
    tokens.ensure_owner()
    m = Memory(s, owner_user="alice", directory=tokens)
    m.start()
    yield m, tokens
    m.stop()


def _index_meta(m: Memory, project: str) -> dict[str, Any]:
    return m.repos.meta(project)


@pytest.mark.fast
def test_C59_same_name_other_repository_is_another_project(
    team: tuple[Memory, TokenStore],
) -> None:
    m, tokens = team
    m.capture(ev("s-job", "api", B, "API-B-ROUTE-SECRET is /internal/settle"), as_user(m, "alice"))
    m.capture(ev("s-hobby", "api", C, "API-C-HOBBY is a weather bot"), as_user(m, "alice"))
    for sid, repo in (("s-job", B), ("s-hobby", C)):
        m.capture(
            {**ev(sid, "api", repo, ""), "event": "SessionEnd", "payload": {}}, as_user(m, "alice")
        )
    m.writer.flush()
    assert m.repos.project_of_id(B) == "api" and m.repos.project_of_id(C) == "api-2"
    assert ids_of(_index_meta(m, "api")) == [B] and ids_of(_index_meta(m, "api-2")) == [C]
    assert _index_meta(m, "api-2")["display"] == "api"
    wait_for(lambda: len(m.list_pages(kind="session")) == 2, 30, "2 sessions compiled")
    for project, mine, other in (
        ("api", "API-B-ROUTE-SECRET", "API-C-HOBBY"),
        ("api-2", "API-C-HOBBY", "API-B-ROUTE-SECRET"),
    ):
        for q in (mine, other):
            got = m.recall(q, project=project, user=as_user(m, "alice"), budget_tokens=4000)
            text = " ".join(str(i) for i in got.items)
            assert other not in text
        assert mine in " ".join(
            str(i) for i in m.recall(mine, project=project, user=as_user(m, "alice")).items
        )
    # a member granted one api reads nothing of the other
    tokens.create("bob", "member", ["api"])
    for q in ("API-C-HOBBY", "weather bot"):
        got = m.recall(q, user=as_user(m, "bob"), budget_tokens=4000)
        assert "API-C-HOBBY" not in " ".join(str(i) for i in got.items)
    assert "API-B-ROUTE-SECRET" in str(m.recall("API-B-ROUTE-SECRET", user=as_user(m, "bob")).items)


@pytest.mark.fast
def test_C59_renamed_moved_cloned_again_is_the_same_project(
    team: tuple[Memory, TokenStore],
) -> None:
    m, _ = team
    m.capture(ev("s1", "atlas", A, "atlas work before the move"), as_user(m, "alice"))
    # renamed folder (atlas-core), a second clone (atlas-clone): the same root commit
    m.capture(ev("s2", "atlas-core", A, "after the move"), as_user(m, "alice"))
    m.capture(ev("s3", "atlas-clone", A, "in the clone"), as_user(m, "alice"))
    # a shallow clone sends the origin; a clone with the same root joins by its root
    o = "origin:" + str(normal_origin("git@git.example:acme/atlas.git"))
    m.capture(ev("s4", "atlas-shallow", o, "shallow", repo_origin=o[7:]), as_user(m, "alice"))
    m.writer.flush()
    assert {m.repos.project_of_id(A)} == {"atlas"}
    for sid in ("s1", "s2", "s3"):
        assert any(i.project == "atlas" for i in m.spool.sessions.values() if i.session_id == sid)
    assert "atlas-core" not in m.projects() and "atlas-clone" not in m.projects()
    # a repository with no commit yet: a provisional id, joined at its first commit
    m.capture(ev("s5", "fresh", "new:abc", "before the first commit"), as_user(m, "alice"))
    m.capture(
        ev("s6", "fresh-renamed", "root:" + "4" * 40, "after", repo_prev="new:abc"),
        as_user(m, "alice"),
    )
    m.writer.flush()
    assert m.repos.project_of_id("root:" + "4" * 40) == "fresh"
    assert ids_of(_index_meta(m, "fresh")) == ["new:abc", "root:" + "4" * 40]


@pytest.mark.fast
def test_an_id_less_project_takes_the_first_id_then_others_go_elsewhere(tmp_path: Path) -> None:
    old = "---\ntitle: api\n---\n\n# api\n\nwritten before repositories had ids\n"
    m = make_memory(tmp_path / "data", files={"projects/api/notes/old.md": old})
    try:
        m.capture(ev("s-old", "api", None, "no id: filed by name"), as_user(m, "alice"))
        m.capture(ev("s1", "api", B, "first repository with an id"), as_user(m, "alice"))
        m.capture(ev("s2", "api", C, "another repository"), as_user(m, "alice"))
        m.writer.flush()
        assert m.repos.project_of_id(B) == "api" and m.repos.project_of_id(C) == "api-2"
        assert (m.settings.wiki_dir / "projects/api/notes/old.md").read_text() == old
    finally:
        m.stop()


@pytest.mark.fast
def test_origins_are_normalised() -> None:
    same = {
        normal_origin(u)
        for u in (
            "git@github.example:Dev/API.git",
            "https://github.example/dev/api",
            "ssh://git@github.example:22/dev/api.git",
            "https://user@GitHub.example/dev/api.git/",
        )
    }
    assert same == {"github.example/dev/api"}
    assert normal_origin("/srv/repos/api.git") is None


@pytest.mark.fast
def test_same_name_takes_its_origins_owner_then_a_number(
    team: tuple[Memory, TokenStore],
) -> None:
    m, _ = team
    D, E = "root:" + "4" * 40, "root:" + "5" * 40
    m.capture(
        ev("s1", "api", A, "work", repo_origin="github.example/acme/api"), as_user(m, "alice")
    )
    m.capture(
        ev("s2", "api", B, "hobby", repo_origin="github.example/dev/api"), as_user(m, "alice")
    )
    # another host, owner acme again: api-acme is free
    m.capture(
        ev("s3", "api", C, "mirror", repo_origin="gitlab.example/acme/api"), as_user(m, "alice")
    )
    # no origin: the numbered fallback
    m.capture(ev("s4", "api", D, "local"), as_user(m, "alice"))
    # an owner whose folder name is taken by a bound project: the number
    m.capture(
        ev("s5", "api", E, "other", repo_origin="gitlab.example/dev/api"), as_user(m, "alice")
    )
    m.writer.flush()
    got = [m.repos.project_of_id(i) for i in (A, B, C, D, E)]
    assert got == ["api", "api-dev", "api-acme", "api-2", "api-3"]
    assert _index_meta(m, "api-dev")["display"] == "api"
    assert _index_meta(m, "api-dev")["repo_origin"] == "github.example/dev/api"


@pytest.mark.fast
def test_doctor_names_the_pair_the_bindings_a_split_and_a_fork(
    team: tuple[Memory, TokenStore],
) -> None:
    from wiki_memory.cli.checks_repos import check_repos
    from wiki_memory.cli.doctor import Context

    m, _ = team
    m.capture(ev("s1", "api", B, "job", repo_origin="git.example/acme/api"), as_user(m, "alice"))
    m.capture(
        ev("s2", "api", C, "hobby", repo_origin="github.example/dev/api"), as_user(m, "alice")
    )
    # a fork: the same root commit, another origin
    m.capture(
        ev("s3", "api", B, "fork", repo_origin="github.example/someone/api"), as_user(m, "alice")
    )
    m.writer.flush()
    # a split made by hand: repository C's id also bound to a third folder
    split = m.settings.wiki_dir / "projects/other/index.md"
    split.parent.mkdir(parents=True)
    split.write_text(f"---\nrepo_id: {C}\ndisplay: other\n---\n")
    ctx = Context(m.settings, 0)
    check_repos(ctx)
    text = "\n".join(f"{f.severity} {f.message} | {f.fix}" for f in ctx.findings)
    assert "projects api and api-dev share the display name 'api'" in text, text
    assert f"project api: repository {B} (origin git.example/acme/api)" in text
    binding = next(f for f in ctx.findings if f.message.startswith("project api: repository"))
    assert "to unbind it, remove repo_id from projects/api/index.md" in binding.message
    assert binding.severity == "info" and binding.fix is None  # nothing to fix on a healthy one
    assert f"one repository ({C}) is split across projects api-dev and other" in text
    assert "git mv" in text
    assert "a fork (github.example/someone/api)" in text
    assert m.repos.project_of_id(B) == "api"
