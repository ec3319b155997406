"""Topic pages: compiled from a project's shared sessions when one ends, below a marker
that keeps people's edits, the same bytes from the same pages, nothing left of a
forgotten session, no personal page or other project as a source; recall items of a
topic page name the entries it links (docs/sessions.md, "Topic pages")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import as_user, committed, make_memory

from wiki_memory.core.forget import forget_page
from wiki_memory.core.topics import compile_project
from wiki_memory.core.writer import Author, WriteResult
from wiki_memory.wiki.topics import MARKER

pytestmark = pytest.mark.fast

DAY = 86_400
T0 = 1_700_000_000


def end_session(mem: Any, sid: str, day: int, texts: list[str], project: str = "atlas") -> str:
    """Capture one session of ``texts`` (one prompt each) and its end; returns its page."""
    events: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        events.append(
            {
                "harness": "locomo",
                "event": "UserPromptSubmit",
                "session_id": sid,
                "project": project,
                "event_id": f"{sid}-{i}",
                "ts": T0 + day * DAY + 5 * i,
                "payload": {"prompt": text, "speaker": "Caroline"},
            }
        )
    events.append(
        {
            "harness": "locomo",
            "event": "SessionEnd",
            "session_id": sid,
            "project": project,
            "event_id": f"{sid}-end",
            "ts": T0 + day * DAY + 5 * len(texts),
            "payload": {"reason": "other"},
        }
    )
    key = mem.capture(events, as_user(mem, "alice"))[0]["session_key"]
    mem.writer.flush()
    path: str = mem.spool.sessions[key].state["path"]
    return path


def topics(wiki: Path, project: str = "atlas") -> dict[str, bytes]:
    base = wiki / "projects" / project / "topics"
    return {p.name: p.read_bytes() for p in sorted(base.glob("*.md"))} if base.is_dir() else {}


def start(data: Path, files: dict[str, str] | None = None) -> Any:
    return make_memory(data, files=files, topic_pages=True)


def compile_now(mem: Any, project: str = "atlas") -> list[str]:
    res = mem.writer.call(
        lambda: WriteResult(
            paths=compile_project(mem, project),
            author=Author("alice", "alice@localhost"),
            message="Compile topic pages",
        )
    )
    mem.writer.flush()
    return list(res.paths)


THREE = [
    ["I went to the Pride Parade with Melanie.", "The flaky test src/billing/invoice.py failed."],
    ["Melanie liked the Pride Parade photos.", "src/billing/invoice.py fails again, E0382."],
    ["The support group met at Zanzibar Quartz today.", "Still E0382 in the build."],
]


def test_topic_pages_link_the_exact_entries_and_compile_the_same_bytes_twice(
    tmp_path: Path,
) -> None:
    mem = start(tmp_path / "a")
    try:
        pages = [end_session(mem, f"s{i}", i, texts) for i, texts in enumerate(THREE)]
        wiki = mem.settings.wiki_dir
        first = topics(wiki)
        assert {"Melanie.md", "Pride Parade.md", "E0382.md"} <= set(first)
        melanie = first["Melanie.md"].decode()
        assert f"![[{pages[0]}#^t1]]" in melanie and f"![[{pages[1]}#^t1]]" in melanie
        assert f"**First seen:** 2023-11-14 in [[{pages[0]}]]" in melanie
        assert f"**Last seen:** 2023-11-15 in [[{pages[1]}]]" in melanie
        assert "[[projects/atlas/topics/Pride Parade.md|Pride Parade]]" in melanie
        assert "Zanzibar" not in " ".join(first)  # seen in one session only
        assert "Pride Parade photos" not in melanie  # links, never a session's sentence
        assert {f"projects/atlas/topics/{n}" for n in first} <= committed(wiki)
        assert compile_now(mem) == []
        assert topics(wiki) == first
        session_bytes = {p: (wiki / p).read_text() for p in pages}
    finally:
        mem.stop()
    # another replica holding the same session pages compiles the same bytes
    other = start(tmp_path / "b", files=session_bytes)
    try:
        compile_now(other)
        assert topics(other.settings.wiki_dir) == first
    finally:
        other.stop()


def test_a_persons_edit_above_the_marker_survives_the_next_compile(tmp_path: Path) -> None:
    mem = start(tmp_path)
    try:
        for i, texts in enumerate(THREE[:2]):
            end_session(mem, f"s{i}", i, texts)
        page = mem.settings.wiki_dir / "projects/atlas/topics/Melanie.md"
        text = page.read_text()
        edited = text.replace(MARKER, "Melanie is Caroline's friend from the parade.\n\n" + MARKER)
        page.write_text(edited)
        later = end_session(mem, "s9", 9, ["Melanie called about the Pride Parade."])
        now = page.read_text()
        head = edited.split(MARKER)[0]
        assert now.startswith(head)
        assert f"![[{later}#^t1]]" in now.split(MARKER)[1]
        assert "**Seen in:** 3 sessions" in now
    finally:
        mem.stop()


def test_forgetting_a_session_removes_its_links_at_the_next_compile(tmp_path: Path) -> None:
    mem = start(tmp_path)
    try:
        pages = [end_session(mem, f"s{i}", i, texts) for i, texts in enumerate(THREE)]
        wiki = mem.settings.wiki_dir
        assert "E0382.md" in topics(wiki)
        forget_page(mem, pages[1], None)
        mem.writer.flush()
        end_session(mem, "s7", 7, ["Nothing about that today."])
        after = topics(wiki)
        assert all(pages[1] not in t.decode() for t in after.values())
        # seen in two sessions no more: an untouched page goes
        assert "E0382.md" not in after and "Melanie.md" not in after
        assert "projects/atlas/topics/Melanie.md" not in committed(wiki)
    finally:
        mem.stop()


def personal(text: str, project: str = "atlas") -> str:
    return (
        f"---\ntype: session\nvisibility: personal\nuser: alice\nproject: {project}\n"
        f"started: 2023-11-20T10:00:00Z\n---\n# x\n\n## Timeline\n\n"
        f"**10:00:00** · prompt\n\n~~~\n{text}\n~~~\n\n^t1\n"
    )


def shared(text: str, project: str, day: int) -> str:
    return (
        f"---\ntype: session\nuser: alice\nproject: {project}\n"
        f"started: 2023-11-{day:02d}T10:00:00Z\n---\n# x\n\n## Timeline\n\n"
        f"**10:00:00** · prompt\n\n~~~\n{text}\n~~~\n\n^t1\n"
    )


def test_a_personal_page_a_copy_or_another_project_is_never_a_source(tmp_path: Path) -> None:
    said = "We met Zanzibar Quartz at the harbour."
    files = {
        "projects/atlas/sessions/2023-11-20-own.md": shared(said, "atlas", 20),
        "projects/atlas/sessions/2023-11-21-mine.md": personal(said),
        "projects/atlas/sessions/2023-11-20-own.server-copy.md": shared(said, "atlas", 20),
        "people/alice/sessions/2023-11-22-home.md": shared(said, "", 22),
        "projects/other/sessions/2023-11-23-x.md": shared(said, "other", 23),
        "projects/other/sessions/2023-11-24-y.md": shared(said, "other", 24),
    }
    mem = start(tmp_path, files=files)
    try:
        compile_now(mem, "atlas")
        compile_now(mem, "other")
        wiki = mem.settings.wiki_dir
        assert not any("Zanzibar" in n for n in topics(wiki, "atlas"))
        other = topics(wiki, "other")["Zanzibar Quartz.md"].decode()
        assert "projects/other/sessions/2023-11-23-x.md#^t1" in other
        assert "atlas" not in other and "people/" not in other
    finally:
        mem.stop()


def test_a_recall_item_of_a_topic_page_names_the_entries_it_links(tmp_path: Path) -> None:
    mem = start(tmp_path)
    try:
        pages = [end_session(mem, f"s{i}", i, texts) for i, texts in enumerate(THREE)]
        res = mem.recall("Pride Parade", project="atlas", user=as_user(mem, "alice"))
        item = next(i for i in res.items if i["kind"] == "topic")
        assert item["path"] == "projects/atlas/topics/Pride Parade.md"
        assert item["entries"] == [f"{pages[0]}#^t1", f"{pages[1]}#^t1"]
        assert all("entries" not in i for i in res.items if i["kind"] != "topic")
    finally:
        mem.stop()


def note(title: str, extra: str = "") -> str:
    return f"---\ntype: note\ntitle: {title}\n{extra}---\n{title}.\n"


def test_a_topic_page_names_the_current_and_the_superseded_values(tmp_path: Path) -> None:
    old = "projects/atlas/notes/Staging DB port.md"
    new = "projects/atlas/notes/Staging DB port moved.md"
    files = {
        "projects/atlas/sessions/2023-11-20-a.md": shared("The Staging DB is down.", "atlas", 20),
        "projects/atlas/sessions/2023-11-21-b.md": shared("The Staging DB is up.", "atlas", 21),
        old: note("Staging DB port", f"state: superseded\nsuperseded_by: {new}\n"),
        new: note("Staging DB port moved"),
        "projects/other/notes/Staging DB port.md": note("Staging DB port"),
    }
    mem = start(tmp_path, files=files)
    try:
        compile_now(mem)
        text = topics(mem.settings.wiki_dir)["Staging DB.md"].decode()
        assert f"- **Superseded:** [[{old}]] by [[{new}]]" in text
        assert f"- **Current:** [[{new}]]" in text
        assert "projects/other" not in text
    finally:
        mem.stop()


def test_without_the_setting_no_topic_page_is_written(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    try:
        for i, texts in enumerate(THREE):
            end_session(mem, f"s{i}", i, texts)
        assert topics(mem.settings.wiki_dir) == {}
    finally:
        mem.stop()


def test_first_and_last_seen_follow_the_start_time_within_one_day() -> None:
    """Two sessions of one day: the one started later is last seen, whatever their file
    names' order (a random suffix decides that)."""
    from wiki_memory.wiki.topics import Session, order_sessions

    late = Session("projects/a/sessions/2026-12-07-24ad4df9.md", "2026-12-07", [],
                   "2026-12-07T00:32:11Z")  # fmt: skip
    early = Session("projects/a/sessions/2026-12-07-c708e6c7.md", "2026-12-07", [],
                    "2026-12-07T00:30:55Z")  # fmt: skip
    assert order_sessions([late, early]) == [early, late]
