"""The border's data-directory part (``check(..., data_dir=True)``): a backup's member
must name a place a backup writes, on top of every path, mode and size rule."""

from __future__ import annotations

import pytest

from wiki_memory.wiki.border import Entry, Source, check, data_dir_refusal

pytestmark = pytest.mark.fast

PLACES = [
    "wiki.bundle",
    "config.toml",
    "logs/audit.jsonl",
    "auth/owner.token",
    "auth/tokens.json",
    "spool/proj/s1.jsonl",
    "use/reads.jsonl",
]
NOT_PLACES = [
    "wiki/notes/a.md",
    "wiki/.gitignore",
    "index.db",
    "logs/server.log",
    "server.lock",
    "auth",
    "Auth/owner.token",
    "config.toml.bak",
    "other/x",
]


@pytest.mark.parametrize("path", PLACES)
def test_a_place_a_backup_writes_is_accepted(path: str) -> None:
    assert data_dir_refusal(path) is None
    verdict = check([Entry(path, 0o100600, 10)], Source.OWN, data_dir=True)
    assert [e.path for e in verdict.accepted] == [path]


@pytest.mark.parametrize("path", NOT_PLACES)
def test_any_other_place_is_refused(path: str) -> None:
    verdict = check([Entry(path, 0o100600, 10)], Source.OWN, data_dir=True)
    assert [(r.path, r.reason) for r in verdict.refused] == [
        (path, "place: not a part of a backup")
    ]
    # the same path relative to the wiki is another question: no place rule there
    assert check([Entry(path, 0o100600, 10)], Source.OWN).refused == []


def test_the_path_rules_come_first() -> None:
    verdict = check(
        [
            Entry("wiki/.git/config", 0o100644, 10),
            Entry("spool/../../x", 0o100644, 10),
            Entry("auth/link", 0o120777, 0),
        ],
        Source.OWN,
        data_dir=True,
    )
    assert [r.reason for r in verdict.refused] == [
        "path: .git",
        "path: '..'",
        "mode: symbolic link",
    ]
