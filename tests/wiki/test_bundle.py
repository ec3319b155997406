"""Git bundles of the wiki (wiki/bundle.py), which backup and restore carry: the bundle
of a repository with packed history, deltas, tags, several packs and loose objects is
read by stock git and by restore with the same ids and files; deltas stay deltas (the
bundle stays small); an object the refs do not reach is not carried even when a sent
object is stored as a delta against it; a damaged pack stops the bundle.

Real repositories in tmp_path, built by the project's GitStore or by stock ``git``
(those tests are skipped where it is not installed).
"""

from __future__ import annotations

import random
import re
import zlib
from pathlib import Path

import pytest
from dulwich.repo import Repo
from support import files_of, refs_of
from test_git import GIT, git, needs_git

from wiki_memory.wiki.bundle import read_bundle_into, write_bundle
from wiki_memory.wiki.git import GitStore

pytestmark = pytest.mark.process


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(3000)
    ]
    return " ".join(rng.choices(vocab, k=n))


def bundle(wiki: Path, path: Path) -> dict[str, str]:
    with open(path, "wb") as f:
        return write_bundle(wiki, f)


def test_project_store_history_round_trips_through_a_bundle(tmp_path: Path) -> None:
    """The wiki as the server keeps it (loose objects, packs made by GitStore.pack):
    restore gives the same refs, HEAD and files."""
    wiki = tmp_path / "wiki"
    store = GitStore(wiki)
    page = wiki / "notes" / "walrus.md"
    page.parent.mkdir(parents=True)
    for version in range(4):
        page.write_text(f"# Walrus\n\nversion {version}\n\n{words(2000, version)}\n", "utf-8")
        (wiki / "notes" / f"other-{version}.md").write_text(words(50, 10 + version), "utf-8")
        store.commit(["notes"], "Wes", "wes@example.org", f"version {version}")
        if version == 1:
            assert store.pack() > 0  # the first two versions packed, the rest loose
    store.close()

    refs = bundle(wiki, tmp_path / "w.bundle")
    assert refs["HEAD"] == "refs/heads/main" or refs["HEAD"].startswith("refs/heads/")
    read_bundle_into(tmp_path / "w.bundle", tmp_path / "copy", refs["HEAD"])

    assert refs_of(tmp_path / "copy") == refs_of(wiki)
    assert files_of(tmp_path / "copy") == files_of(wiki)
    copy = Repo(str(tmp_path / "copy"))
    try:
        assert copy.refs.read_ref(b"HEAD") == b"ref: " + refs["HEAD"].encode()
        restored = [e.commit.id for e in copy.get_walker()]
    finally:
        copy.close()
    source = Repo(str(wiki))
    try:
        assert restored == [e.commit.id for e in source.get_walker()]  # every commit came
    finally:
        source.close()
    if GIT is not None:
        git(tmp_path / "copy", "fsck", "--full", "--strict")
        assert git(tmp_path / "copy", "status", "--porcelain") == ""


@needs_git
def test_packed_history_with_deltas_tags_and_branches(tmp_path: Path) -> None:
    """A page in six versions packed by `git gc` (deltas), an annotated tag, a second
    branch, a later incremental pack and a loose commit: stock git clones and checks
    the bundle, restore gives the same ids and files, and the deltas stayed deltas."""
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    git(wiki, "init", "-q", "-b", "main")
    text = words(20000, 1)
    (wiki / "page.md").write_text(text, "utf-8")
    git(wiki, "add", "-A")
    git(wiki, "commit", "-qm", "first")
    for i in range(5):
        text += f"\nversion {i}\n"
        (wiki / "page.md").write_text(text, "utf-8")
        git(wiki, "commit", "-qam", f"version {i}")
    git(wiki, "tag", "-a", "v1", "-m", "a tag")
    git(wiki, "gc", "-q")
    git(wiki, "checkout", "-q", "-b", "draft")
    (wiki / "draft.md").write_text(words(300, 2), "utf-8")
    git(wiki, "add", "-A")
    git(wiki, "commit", "-qm", "draft")
    git(wiki, "checkout", "-q", "main")
    git(wiki, "repack", "-q")  # a second pack with the draft's objects
    (wiki / "page.md").write_text(text + "\nloose\n", "utf-8")
    git(wiki, "commit", "-qam", "loose")
    assert len(list((wiki / ".git" / "objects" / "pack").glob("*.pack"))) == 2

    refs = bundle(wiki, tmp_path / "w.bundle")
    assert set(refs) == {"refs/heads/main", "refs/heads/draft", "refs/tags/v1", "HEAD"}
    assert "complete history" in git(wiki, "bundle", "verify", str(tmp_path / "w.bundle"))
    git(tmp_path, "clone", "-q", "--mirror", str(tmp_path / "w.bundle"), "mirror.git")
    git(tmp_path / "mirror.git", "fsck", "--full", "--strict")
    for name, sha in refs.items():
        if name.startswith("refs/"):
            assert git(tmp_path / "mirror.git", "rev-parse", name).strip() == sha

    read_bundle_into(tmp_path / "w.bundle", tmp_path / "copy", refs["HEAD"])
    assert refs_of(tmp_path / "copy") == refs_of(wiki)
    assert files_of(tmp_path / "copy") == files_of(wiki)
    git(tmp_path / "copy", "fsck", "--full", "--strict")
    assert git(tmp_path / "copy", "status", "--porcelain") == ""

    # seven versions of a 140 KB page: whole, each costs about what one costs
    # compressed; the six packed as deltas cost little more than one, the loose one is
    # written whole: about two in all, not seven
    one = len(zlib.compress(text.encode()))
    assert (tmp_path / "w.bundle").stat().st_size < 3 * one


@needs_git
def test_an_object_the_refs_do_not_reach_is_not_carried(tmp_path: Path) -> None:
    """A sent page version stored in the pack as a delta against a version no ref
    reaches any more (a dropped branch): the bundle holds the sent version whole and
    not the dropped one."""
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    git(wiki, "init", "-q", "-b", "main")
    body = words(20000, 3)
    (wiki / "page.md").write_text(body, "utf-8")
    git(wiki, "add", "-A")
    git(wiki, "commit", "-qm", "kept")
    git(wiki, "checkout", "-q", "-b", "dropped")
    (wiki / "page.md").write_text(body + "\nsecret-ish longer draft\n" * 50, "utf-8")
    git(wiki, "commit", "-qam", "longer draft")
    git(wiki, "checkout", "-q", "main")
    git(wiki, "gc", "-q")
    kept = git(wiki, "rev-parse", "main:page.md").strip()
    dropped = git(wiki, "rev-parse", "dropped:page.md").strip()
    git(wiki, "branch", "-q", "-D", "dropped")
    git(wiki, "reflog", "expire", "--expire=now", "--all")
    # git stores the smaller (kept) version as a delta of the larger (dropped) one
    packed = git(wiki, "verify-pack", "-v", *map(str, (wiki / ".git/objects/pack").glob("*.idx")))
    assert re.search(rf"^{kept} blob .* {dropped}$", packed, re.M), packed

    refs = bundle(wiki, tmp_path / "w.bundle")
    git(tmp_path, "clone", "-q", "--mirror", str(tmp_path / "w.bundle"), "mirror.git")
    git(tmp_path / "mirror.git", "fsck", "--full", "--strict")
    assert git(tmp_path / "mirror.git", "cat-file", "-p", kept) == body
    assert git(tmp_path / "mirror.git", "cat-file", "-e", dropped, check=False) == ""
    listed = git(tmp_path / "mirror.git", "cat-file", "--batch-all-objects", "--batch-check")
    assert dropped not in listed and kept in listed

    read_bundle_into(tmp_path / "w.bundle", tmp_path / "copy", refs["HEAD"])
    assert (tmp_path / "copy" / "page.md").read_text("utf-8") == body
    git(tmp_path / "copy", "fsck", "--full", "--strict")


@needs_git
def test_a_damaged_pack_stops_the_bundle(tmp_path: Path) -> None:
    """One byte changed inside a packed page: writing the bundle fails with a message
    naming the object, instead of carrying the damage into a backup."""
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    git(wiki, "init", "-q", "-b", "main")
    (wiki / "page.md").write_text(words(20000, 4), "utf-8")
    git(wiki, "add", "-A")
    git(wiki, "commit", "-qm", "one")
    git(wiki, "gc", "-q")
    blob = git(wiki, "rev-parse", "HEAD:page.md").strip()
    idx = next((wiki / ".git/objects/pack").glob("*.idx"))
    listing = git(wiki, "verify-pack", "-v", str(idx))
    offset = int(re.search(rf"^{blob} blob +\d+ \d+ (\d+)", listing, re.M).group(1))  # type: ignore[union-attr]
    pack = idx.with_suffix(".pack")
    raw = bytearray(pack.read_bytes())
    raw[offset + 1000] ^= 0xFF
    pack.chmod(0o644)
    pack.write_bytes(bytes(raw))

    with pytest.raises(ValueError, match=blob):
        bundle(wiki, tmp_path / "w.bundle")


@needs_git
def test_a_bundle_that_needs_other_objects_is_refused(tmp_path: Path) -> None:
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    git(wiki, "init", "-q", "-b", "main")
    for i in range(2):
        (wiki / "page.md").write_text(f"version {i}\n", "utf-8")
        git(wiki, "add", "-A")
        git(wiki, "commit", "-qm", f"v{i}")
    git(wiki, "bundle", "create", "-q", str(tmp_path / "thin.bundle"), "main~1..main")
    with pytest.raises(ValueError, match="needs other objects"):
        read_bundle_into(tmp_path / "thin.bundle", tmp_path / "copy", "refs/heads/main")
