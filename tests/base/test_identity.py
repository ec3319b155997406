"""The personal-page rule and its SQL twin agree (wiki_memory.identity): what
``may_read`` says of a page is what the index's filter keeps, grants included."""

from __future__ import annotations

from pathlib import Path

from wiki_memory.identity import ANONYMOUS, OWNER_KEY, Identity, fold, may_read, personal_owner
from wiki_memory.index.store import Index

PAGES = {
    "projects/a/notes/x.md": "# X\n",
    "projects/a_b/notes/y.md": "# Y\n",  # '_' must not act as a LIKE wildcard
    "projects/ab/notes/z.md": "# Z\n",
    "notes/shared.md": "# Shared\n",
    "people/Alice/diary.md": "# Diary\n",
    "notes/mine.md": "---\nvisibility: personal\nuser: ALICE\n---\n# Mine\n",
    "notes/owners.md": "---\nvisibility: Personal\n---\n# Owner's\n",
    "notes/vault-state.md": "---\nvisibility: team\n---\n# Team\n",
    "projects/Atlas/notes/a.md": "# Upper-case project\n",  # grants compare exactly
    "projects/atlas/notes/b.md": "# Lower-case project\n",
    "projects/readme.md": "# Not in a project\n",
    "projects/atlas/people/bob/x.md": "# Not a people folder\n",
}

WHO = [
    Identity("alice"),
    Identity("bob"),
    Identity("olivia", role="owner"),
    Identity("bob", grants={"a_b": "write"}),
    Identity("bob", grants={}),
    ANONYMOUS,
    Identity("ada", role="admin"),
    Identity("ada", role="admin", grants={}),  # an admin's grants never narrow it
    Identity("rex", role="reader", grants={"atlas": "read", "a": "write"}),
    Identity("rex", role="reader", grants=None),
    Identity("mel", role="member", grants={"atlas": "read"}),
    Identity("mel", role="member", grants={"Atlas": "write", "a%": "write"}),
]


def test_personal_owner_folds_names_and_defaults_to_the_owner():
    assert personal_owner("People/ＡＬＩＣＥ/x.md", None) == "alice"
    assert personal_owner("notes/x.md", {"visibility": "personal", "user": "Alice"}) == "alice"
    assert personal_owner("notes/x.md", {"visibility": "personal"}) == OWNER_KEY
    assert personal_owner("notes/x.md", {"visibility": "project"}) is None
    assert personal_owner("people/readme.md", None) is None  # no user folder
    assert fold("Straße") == fold("STRASSE")


def test_the_sql_filter_keeps_exactly_what_may_read_allows(tmp_path: Path):
    idx = Index(tmp_path / "index.db")
    metas: dict[str, dict[str, str]] = {}
    for path, text in PAGES.items():
        idx.upsert_page(path, text.encode())
        metas[path] = (idx.page_meta(path) or {}).get("meta", {})
    try:
        for who in WHO:
            listed = {r["path"] for r in idx.list_pages(limit=100, who=who)}
            allowed = {p for p in PAGES if may_read(who, p, metas[p])}
            assert listed == allowed, who
        # spot checks of the rule itself
        alice, bob, owner = WHO[0], WHO[1], WHO[2]
        assert may_read(alice, "people/Alice/diary.md", None)
        assert not may_read(owner, "people/Alice/diary.md", None)
        assert may_read(alice, "notes/mine.md", metas["notes/mine.md"])
        assert not may_read(bob, "notes/mine.md", metas["notes/mine.md"])
        assert may_read(owner, "notes/owners.md", metas["notes/owners.md"])
        assert not may_read(alice, "notes/owners.md", metas["notes/owners.md"])
        granted = {r["path"] for r in idx.list_pages(limit=100, who=WHO[3])}
        assert "projects/a_b/notes/y.md" in granted
        assert not granted & {"projects/a/notes/x.md", "projects/ab/notes/z.md"}
        assert "notes/shared.md" in granted
    finally:
        idx.close()


def test_roles_and_grants_decide_writes():
    from wiki_memory.identity import may_write, write_refusal

    admin = Identity("ada", role="admin", grants={})
    reader = Identity("rex", role="reader", grants={"atlas": "write"})
    ro = Identity("mel", grants={"atlas": "read"})
    rw = Identity("mel", grants={"atlas": "write"})
    none = Identity("mel", grants={})
    page = "projects/atlas/notes/n.md"
    assert may_write(admin, page, None) and may_write(rw, page, None)
    assert not may_read(admin, "people/mel/x.md", None)  # admins included
    assert write_refusal(ro, page) == "write on project atlas"
    assert write_refusal(reader, page) == "write (a reader writes nothing)"
    assert may_read(reader, page, None) and may_read(ro, page, None)
    assert not may_read(none, page, None) and not may_write(none, page, None)
    assert may_write(none, "people/mel/x.md", None)  # their own folder
    assert not may_write(none, "people/bob/x.md", None)
    assert write_refusal(none, "notes/shared.md") is None
    assert not may_write(reader, "people/rex/x.md", None)
