"""The use record's rows follow a page that moves (docs/knowledge.md, "The use record"):
renamed by the edit op, moved on disk by a person while the server runs (the watcher
commits the change) or while it is stopped (the start-up recovery commits it), a folder
moved, a page moved and edited on the way (the same frontmatter id). No row keeps the
old path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import support
from support import as_user, make_memory, quiet

from wiki_memory.core.edits import edit_page
from wiki_memory.core.memory import Memory

FILES = {
    "notes/kiwi.md": "# Kiwi\n\nThe kiwi deploy runs at noon.\n",
    "notes/fig.md": "---\nid: fig-1\n---\n# Fig\n\nThe fig service restarts nightly.\n",
    "team/a/plum.md": "# Plum\n\nThe plum queue drains hourly.\n",
}


def used(m: Memory) -> dict[str, int]:
    """Path -> recalled count over every row."""
    m.use.flush()
    out: dict[str, int] = {}
    for r in m.use.every_row():
        out[r["path"]] = out.get(r["path"], 0) + int(r["recalled"])
    return out


def serve(m: Memory) -> None:
    for q in ("kiwi deploy", "fig service", "plum queue"):
        assert m.recall(q, user=as_user(m, "alice")).items
    assert set(used(m)) >= {"notes/kiwi.md", "notes/fig.md", "team/a/plum.md"}


@pytest.mark.fast
def test_the_rename_op_moves_the_rows(tmp_path: Path) -> None:
    m = make_memory(tmp_path / "data", files=FILES)
    try:
        serve(m)
        before = used(m)["notes/kiwi.md"]
        res = edit_page(
            m, "rename", "notes/kiwi.md", who=as_user(m, "alice"), new_path="notes/kiwi2.md"
        )
        assert res["path"] == "notes/kiwi2.md"
        after = used(m)
        assert "notes/kiwi.md" not in after and after["notes/kiwi2.md"] == before
        repeats = m.settings.data_dir / "use" / "repeats.jsonl"
        assert not repeats.exists() or "notes/kiwi.md" not in repeats.read_text()
    finally:
        m.stop()


@pytest.mark.fast
def test_a_move_made_while_the_server_was_stopped_moves_the_rows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    m = make_memory(data, files=FILES)
    try:
        serve(m)
        m.writer.flush()
    finally:
        m.stop()
    wiki = data / "wiki"
    os.rename(wiki / "notes/kiwi.md", wiki / "notes/moved-kiwi.md")
    m = make_memory(data)
    try:
        m.writer.flush()
        after = used(m)
        assert "notes/kiwi.md" not in after and after["notes/moved-kiwi.md"] >= 1
    finally:
        m.stop()


@pytest.mark.slow
def test_pages_a_person_moves_keep_their_rows(tmp_path: Path) -> None:
    m = support.make_memory(
        tmp_path / "data",
        files=FILES,
        watch=True,
        commit_delay_seconds=0.05,
        hand_edit_settle_seconds=0.3,
        idle_check_seconds=60,
    )
    try:
        quiet(m)
        serve(m)
        before = used(m)
        wiki = m.wiki_dir
        # a file moved, a page moved and edited on the way (its id kept), a folder moved
        os.rename(wiki / "notes/kiwi.md", wiki / "notes/kiwi-moved.md")
        text = (wiki / "notes/fig.md").read_text() + "\nAlso on Sundays.\n"
        (wiki / "notes/fig.md").unlink()
        (wiki / "archive").mkdir()
        (wiki / "archive/fig.md").write_text(text)
        shutil.move(str(wiki / "team/a"), str(wiki / "team/b"))
        quiet(m)
        after = used(m)
        for old, new in (
            ("notes/kiwi.md", "notes/kiwi-moved.md"),
            ("notes/fig.md", "archive/fig.md"),
            ("team/a/plum.md", "team/b/plum.md"),
        ):
            assert old not in after, after
            assert after[new] == before[old], (new, after)
    finally:
        m.stop()
