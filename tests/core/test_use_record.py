"""The use record (docs/knowledge.md, "The use record"), in process: what recall, expand
and a repeated remember count, one row per page and user per day, never the query,
each user's rows readable by that user only, rewritten by purge, in backups."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest
from support import as_user, make_memory

from wiki_memory.core import userecord
from wiki_memory.core.backup import backup
from wiki_memory.core.purge import purge_page
from wiki_memory.core.remember import remember
from wiki_memory.core.userecord import UseRecord

FILES = {
    "notes/kiwi.md": "# Kiwi\n\nThe kiwi deploy runs at noon.\n",
    "notes/fig.md": "# Fig\n\nThe fig service restarts nightly, unlike the kiwi deploy.\n",
}


def all_use_text(data: Path) -> str:
    return "".join(f.read_text() for f in sorted((data / "use").rglob("*")) if f.is_file())


@pytest.mark.fast
def test_recall_expand_and_a_repeat_are_counted_once_a_day_per_page_and_user(tmp_path):
    m = make_memory(tmp_path / "data", files=FILES)
    try:
        for _ in range(2):
            res = m.recall("kiwi deploy", budget_tokens=4000, user=as_user(m, "alice"))
        assert {i["path"] for i in res.items} == {"notes/kiwi.md", "notes/fig.md"}
        m.expand([res.items[0]["id"]], 4000, as_user(m, "alice"))
        m.recall("fig service", budget_tokens=4000, user=as_user(m, "bob"))
        note = remember(m, "Deploys need a green build.", project="p", user=as_user(m, "alice"))
        remember(m, "Deploys need a green build.", project="p", user=as_user(m, "alice"))
        m.use.flush()
        rows = m.reader.use_rows(as_user(m.reader, "alice"), days=1)
        by = {r["path"]: r for r in rows}
        first = res.items[0]["path"]
        assert by[first]["recalled"] == 2 and by[first]["expanded"] == 1
        other = ({"notes/kiwi.md", "notes/fig.md"} - {first}).pop()
        assert by[other]["recalled"] == 2 and by[other]["expanded"] == 0
        assert by[note["path"]]["repeated"] == 1
        assert all(r["user"] == "alice" for r in rows) and len(rows) == len(by) == 3
        # bob's row is his alone; an anonymous caller reads none
        assert [r["path"] for r in m.reader.use_rows(as_user(m.reader, "bob"), days=1)] == [
            "notes/fig.md"
        ]
        assert m.reader.use_rows(None) == []
        # one file for the day, one row per page and user; never a query
        days = list((m.settings.data_dir / "use" / "days").glob("*.jsonl"))
        assert len(days) == 1 and len(days[0].read_text().splitlines()) == 4
        assert "fig service" not in all_use_text(m.settings.data_dir)
    finally:
        m.stop()


@pytest.mark.fast
def test_days_are_files_and_old_days_are_deleted(tmp_path):
    t = [1_800_000_000.0]
    rec = UseRecord(tmp_path, clock=lambda: t[0])
    rec.note("recalled", ["a.md", "a.md", "b.md"], "u")
    t[0] += 86400
    rec.note("recalled", ["a.md"], "u")
    assert [(r["day"], r["path"], r["recalled"]) for r in rec.rows("u", days=2)] == [
        ("2027-01-16", "a.md", 1),
        ("2027-01-15", "a.md", 1),
        ("2027-01-15", "b.md", 1),
    ]
    t[0] += (userecord.KEEP_DAYS + 1) * 86400
    rec.note("expanded", ["c.md"], "u")
    rec.flush()
    assert [f.stem for f in (tmp_path / "use" / "days").glob("*.jsonl")] == [rec._day]
    with pytest.raises(ValueError):
        rec.note("opened", ["a.md"], "u")  # not a count


@pytest.mark.fast
def test_a_purge_deletes_a_page_s_rows_and_a_text_purge_leaves_no_old_path(tmp_path):
    files = {**FILES, "notes/secret-x9q.md": "# S\n\nThe kiwi vault key x9q.\n"}
    m = make_memory(tmp_path / "data", files=files)
    try:
        m.recall("kiwi", budget_tokens=4000, user=as_user(m, "alice"))
        m.use.flush()
        text = all_use_text(m.settings.data_dir)
        assert "notes/fig.md" in text and "secret-x9q" in text
        purge_page(m, "notes/fig.md", as_user(m, "alice"))
        purge_page(m, "notes/secret-x9q.md", as_user(m, "alice"), text="x9q")
        text = all_use_text(m.settings.data_dir)
        assert "notes/fig.md" not in text and "x9q" not in text
        # the page the text purge renamed (its name held the text) keeps its rows
        assert re.search(r'"path": "notes/purged-[0-9a-f]{8}\.md"', text), text
        assert "notes/kiwi.md" in text
    finally:
        m.stop()


@pytest.mark.fast
def test_the_use_record_is_in_backups(tmp_path):
    m = make_memory(tmp_path / "data", files=FILES)
    try:
        m.recall("kiwi", budget_tokens=4000, user=as_user(m, "alice"))
        m.use.flush()
        manifest = backup(m.settings, tmp_path / "b.tar")
    finally:
        m.stop()
    assert manifest["format"] == 2
    assert any(n.startswith("use/days/") for n in manifest["files"]), manifest["files"]
    with tarfile.open(tmp_path / "b.tar") as tar:
        names = tar.getnames()
        assert any(n.startswith("use/days/") for n in names)
        kept = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert kept["format"] == 2


@pytest.mark.fast
def test_merge_takes_the_larger_count_and_a_second_merge_changes_nothing(tmp_path):
    rec = UseRecord(tmp_path / "a")
    rows = [
        {"day": "2026-12-01", "path": "n/a.md", "user": "u", "recalled": 2, "expanded": 1},
        {"day": "2026-12-01", "path": "n/b.md", "user": None, "recalled": 1},
        {"day": "../x", "path": "n/c.md", "user": "u", "recalled": 1},  # bad shape: skipped
        {"day": "2026-12-02", "path": "n/a.md", "user": "u", "recalled": -1},  # skipped
    ]
    assert rec.merge(rows) == 2
    assert rec.merge(rows) == 0
    got = [(r["path"], r["user"], r["recalled"], r["expanded"]) for r in rec.every_row()]
    assert got == [("n/a.md", "u", 2, 1), ("n/b.md", None, 1, 0)]


def test_export_carries_the_use_record_and_import_takes_it_once(tmp_path):
    from clikit import run_cli_here as run_cli

    data = tmp_path / "data"
    (data / "wiki" / "notes").mkdir(parents=True)
    (data / "wiki" / "notes" / "a.md").write_text("# A\n\nalpha\n")
    UseRecord(data).merge(
        [{"day": "2026-12-01", "path": "notes/a.md", "user": "alice", "recalled": 3}]
    )
    export = tmp_path / "export.jsonl"
    assert run_cli(data, "export", str(export)).returncode == 0
    recs = [json.loads(x) for x in export.read_text().splitlines()[1:]]
    assert [r["record"] for r in recs] == ["page", "use"]
    target = tmp_path / "new"
    first = run_cli(target, "import", "--json", str(export))
    assert first.returncode == 0, first.stderr
    assert "use record: 1 of 1 rows taken" in first.stdout
    again = run_cli(target, "import", "--json", str(export))
    assert "use record: 0 of 1 rows taken" in again.stdout
    rows = UseRecord(target).every_row()
    assert [(r["path"], r["user"], r["recalled"]) for r in rows] == [("notes/a.md", "alice", 3)]


@pytest.mark.fast
def test_a_backup_of_format_1_without_the_use_record_still_restores(tmp_path):
    import io

    from wiki_memory.config import load_settings
    from wiki_memory.core.backup import restore

    m = make_memory(tmp_path / "data", files=FILES)
    try:
        m.recall("kiwi", budget_tokens=4000, user=as_user(m, "alice"))
        m.use.flush()
        backup(m.settings, tmp_path / "b.tar")
    finally:
        m.stop()
    # the same backup as the format before the use record wrote it: no use/, format 1
    old = tmp_path / "old.tar"
    with tarfile.open(tmp_path / "b.tar") as src, tarfile.open(old, "w") as dst:
        for info in src.getmembers():
            data = src.extractfile(info).read()  # type: ignore[union-attr]
            if info.name.startswith("use/"):
                continue
            if info.name == "manifest.json":
                man = json.loads(data)
                man["format"] = 1
                man["files"] = {k: v for k, v in man["files"].items() if not k.startswith("use/")}
                data = json.dumps(man).encode()
                info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    got = restore(load_settings(tmp_path / "restored"), old)
    assert got.manifest["format"] == 1 and not got.refused
    assert (tmp_path / "restored" / "wiki" / "notes" / "kiwi.md").is_file()
    assert not (tmp_path / "restored" / "use").exists()
