"""The border's one check of incoming entries (wiki/border.py): paths, modes, sizes and
the hub's scope part, each refused with its reason and never raised."""

from __future__ import annotations

import pytest

from wiki_memory.wiki import border
from wiki_memory.wiki.border import Entry, Limits, Source

pytestmark = pytest.mark.fast

BAD_PATHS = [
    "",
    "/etc/passwd",
    "../x.md",
    "a/../../x.md",
    "a/./b.md",
    "a//b.md",
    "a\\b.md",
    "a/b\x00.md",
    "a/b\n.md",
    ".git/config",
    "notes/.git/hooks/post-commit",
    ".GIT/config",
    ".git./config",
    ".git /config",
    "\uff0e\uff47\uff49\uff54/config",  # fullwidth .git
    ".g\u200cit/config",  # a code point HFS+ ignores
    "GIT~1/config",
    "\uff0e\uff0e/x.md",  # fullwidth ..
    "a/" + "x" * 256,
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_hostile_paths_are_refused(path: str) -> None:
    assert border.path_refusal(path) is not None
    v = border.check([Entry(path, 0o100644, 10, "b1")], Source.OWN)
    assert v.accepted == [] and [r.path for r in v.refused] == [path]


@pytest.mark.parametrize(
    "path", ["notes/a.md", "projects/p/sessions/2026-01-01-ab.md", "a/.gitignore", "a/..b.md"]
)
def test_ordinary_paths_pass(path: str) -> None:
    assert border.path_refusal(path) is None


@pytest.mark.parametrize(
    ("mode", "word"),
    [(0o120000, "symbolic link"), (0o160000, "gitlink"), (0o040000, "tree"), (0o104755, "set-id")],
)
def test_only_files_and_executables_pass(mode: int, word: str) -> None:
    reason = border.mode_refusal(mode)
    assert reason is not None and word in reason
    assert border.mode_refusal(0o100644) is None and border.mode_refusal(0o100755) is None


def test_sizes_per_entry_and_in_total() -> None:
    lim = Limits(max_entry_bytes=100, max_total_bytes=250)
    entries = [Entry(f"n/{i}.md", 0o100644, s, str(i)) for i, s in enumerate([101, 100, 100, 60])]
    v = border.check(entries, Source.OWN, limits=lim)
    assert [e.path for e in v.accepted] == ["n/1.md", "n/2.md"]
    assert [r.reason.split(":")[0] for r in v.refused] == ["size", "size"]


def test_a_hub_writes_no_personal_page() -> None:
    pages = {
        "people/alice/profile.md": b"hi",
        "People/alice/x.md": b"hi",
        "\uff50\uff45\uff4f\uff50\uff4c\uff45/alice/x.md": b"hi",
        "notes/mine.md": b"---\nvisibility: personal\nuser: alice\n---\nsecret\n",
        "notes/escaped.md": b'---\n"vis\\x69bility": personal\n---\nsecret\n',
        "notes/shared.md": b"---\ntitle: ok\n---\nfine\n",
    }
    entries = [Entry(p, 0o100644, len(b), p) for p, b in pages.items()]
    v = border.check(entries, Source.HUB, content=lambda e: pages[e.path])
    assert [e.path for e in v.accepted] == ["notes/shared.md"]
    assert all(r.reason.startswith("scope") for r in v.refused)
    own = border.check(entries, Source.OWN, content=lambda e: pages[e.path])
    assert len(own.accepted) == 6


def test_unreadable_content_is_a_refusal_not_an_error() -> None:
    def boom(_e: Entry) -> bytes:
        raise KeyError("missing object")

    v = border.check([Entry("notes/a.md", 0o100644, 3, "x")], Source.HUB, content=boom)
    assert v.refused[0].reason.startswith("unreadable")
