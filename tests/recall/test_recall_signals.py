"""Recall's time, word-form and precision signals, in process through
``Memory.recall``: dates named in a question, Snowball stems (English and a page's own
``lang``), a frequent name beside an unknown word, capitalised stop words, link
neighbours, universal tags, the per-page cap and compact handles for small budgets."""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import Stemmer
from support import as_user, make_memory, shared_path

from wiki_memory.core.memory import Memory
from wiki_memory.index.query import STOP_WORDS
from wiki_memory.recall.terms import analyze


def write(m: Memory, path: str, text: str) -> None:
    m.write_page(path, text.encode("utf-8"), user="alice", message=f"write {path}")


def note(title: str, body: str, **meta: object) -> str:
    lines = ["---", "type: note", f"title: {title}"]
    lines += [f"{k}: {v}" for k, v in meta.items()]
    lines += ["---", "", f"# {title}", "", body, ""]
    return "\n".join(lines)


def session(m: Memory, sid: str, when: str, turns: list[str]) -> None:
    """One captured chat session (``when``: its start, ISO UTC), compiled to its page."""
    t0 = datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()
    events = [
        {
            "harness": "chat",
            "event": "UserPromptSubmit",
            "session_id": sid,
            "project": "p",
            "ts": t0 + i,
            "payload": {"prompt": text},
        }
        for i, text in enumerate(turns)
    ]
    events.append(
        {"harness": "chat", "event": "SessionEnd", "session_id": sid, "project": "p", "ts": t0 + 99}
    )
    before = len(m.list_pages(project="p", kind="session"))
    m.capture(events, as_user(m, "alice"))
    deadline = time.monotonic() + 20
    while len(m.list_pages(project="p", kind="session")) <= before:
        assert time.monotonic() < deadline, "session page not compiled"
        time.sleep(0.05)


def top_paths(m: Memory, query: str, **kw: object) -> list[str]:
    return [i["path"] for i in m.recall(query, budget_tokens=8000, **kw).items]  # type: ignore[arg-type]


# --- dates -------------------------------------------------------------------------------


def test_a_month_in_the_question_finds_the_session_of_that_month(mem):
    # neither session names its month; the question names only the month
    session(mem, "may", "2023-05-14T10:00:00", ["We hiked up the ridge trail yesterday."])
    session(mem, "june", "2023-06-18T10:00:00", ["We hiked the canyon loop, long and hot."])
    session(mem, "july", "2023-07-02T10:00:00", ["Hiking again soon, maybe the coast."])
    june = next(p["path"] for p in mem.list_pages(project="p") if "/2023-06-18-" in p["path"])
    assert top_paths(mem, "Where did we hike in June 2023?")[0] == june
    # a month without a year is the latest one before the reference time
    got = mem.recall("Where did we hike in June?", now="2023-10-01", budget_tokens=4000)
    assert got.items[0]["path"] == june and "when" in got.items[0]["why"]
    # a relative phrase counts back from `now`
    got = mem.recall("what did we hike last month", now="2023-07-20", budget_tokens=4000)
    assert got.items[0]["path"] == june


def test_a_date_in_the_question_finds_the_entry_that_said_yesterday(mem):
    # the evidence was told the day after ("last night"); a later session matches the
    # question's words better but lies a week away from the date it names
    session(mem, "d2", "2022-05-02T11:00:00", ["I watched the whole trilogy last night!"])
    session(mem, "d9", "2022-05-09T11:00:00", ["I watched a film about whales, a great film."])
    got = mem.recall("What film did Jo watch on 1 May, 2022?", budget_tokens=4000).items
    assert "/2022-05-02-" in got[0]["path"], [i["path"] for i in got]
    assert "when" in got[0]["why"] and "when" not in got[1]["why"]
    # without the date, the better words win
    assert "/2022-05-09-" in top_paths(mem, "What film did Jo watch?")[0]


def test_an_entry_indexes_the_days_its_relative_phrases_name():
    from datetime import date

    from wiki_memory.index.dates import referred_words, section_date_words

    said = date(2022, 5, 2)  # a Monday
    assert (
        referred_words("we watched it last night", said)
        == "Sunday 1 1st May 2022 2022-05-01 spring"
    )
    # "two days ago" names a day either side too; a longer span ("last month", "three
    # weeks ago") adds no words, as they would match any question about that month
    assert referred_words("two days ago", said).split()[::7] == ["Friday", "Saturday", "Sunday"]
    assert referred_words("moved in last month, three weeks ago", said) == ""
    # phrases naming the day itself add nothing
    assert referred_words("today and this week", said) == ""
    # only timeline entries (their day is exact) carry the referred days
    entry = "**11:54:00** · prompt · Jo · D10:1\n\nI went there yesterday."
    assert section_date_words(entry, said).endswith("Sunday 1 1st May 2022 2022-05-01 spring")
    assert section_date_words("## Notes\n\nI went there yesterday.", said).count("May") == 1


# --- word forms --------------------------------------------------------------------------


def test_a_stemmed_form_finds_its_page(mem):
    write(mem, "notes/wedding.md", note("Family", "Caroline and Jon married in a small chapel."))
    write(mem, "notes/bikes.md", note("Weekend", "The kids went biking along the river."))
    write(mem, "notes/other.md", note("Other", "Groceries and the car wash."))
    assert top_paths(mem, "When did they marry?")[0] == "notes/wedding.md"
    assert top_paths(mem, "bike rides")[0] == "notes/bikes.md"
    # the exact form still ranks first when both forms exist
    write(mem, "notes/bike.md", note("Shop", "The bike rides smoothly after the repair."))
    assert top_paths(mem, "bike")[0] == "notes/bike.md"


def test_a_pages_lang_chooses_its_stemmer(mem):
    write(mem, "notes/de.md", note("Bau", "Wir haben neue Wohnungen gebaut.", lang="de"))
    write(mem, "notes/en.md", note("Build", "The Wohnungen project in Berlin is finished."))
    # German stems 'Wohnungen' to 'wohnung'; the English stemmer leaves it as it is
    assert top_paths(mem, "Wohnung") == ["notes/de.md"]


# --- the empty reply and capitalised stop words ----------------------------------------


def test_a_frequent_name_beside_an_unknown_word_returns_the_names_pages(mem):
    # an index of 2,400 sections where "Jolene" is in half of them: the common-word rule
    # drops her from the OR list, and "xylograph" matches nothing
    for i in range(800):
        who = "Jolene" if i % 2 == 0 else "Maria"
        text = (
            f"---\ntitle: Day {i}\n---\n# Day {i}\n\n## Morning\n\n{who} fed the cat {i}.\n\n"
            f"## Noon\n\n{who} read chapter {i}.\n\n## Evening\n\nQuiet evening {i}.\n"
        )
        mem.index.upsert_page(f"notes/day-{i:03}.md", text.encode())
    got = mem.recall("Jolene xylograph", budget_tokens=4000).items
    assert got and all("Jolene" in i["snippet"] for i in got)


def test_so_in_capitals_is_kept():
    assert '"so"' in analyze("Who is Caroline's SO?").terms
    assert '"so"' not in analyze("so what did she paint").terms
    # a query all in capitals is shouting: its stop words are stop words
    assert analyze("WHAT IS THE PLAN").terms == ['"plan"']


def test_so_in_capitals_finds_the_page(mem):
    write(mem, "notes/so.md", note("Partner", "Caroline's SO is a pastry chef."))
    write(mem, "notes/x.md", note("Team", "What does the team do? What the plan says, so far."))
    assert top_paths(mem, "what does the SO do")[0] == "notes/so.md"


# --- precision ---------------------------------------------------------------------------


def _unique_word(root: Path) -> tuple[str, str]:
    """A word (and its page) found in one page of the vault only, in every form."""
    stem = Stemmer.Stemmer("english")
    pages: dict[str, set[str]] = {}
    for f in sorted(root.rglob("*.md")):
        words = {w.lower() for w in re.findall(r"[A-Za-z]{9,}", f.read_text("utf-8"))}
        pages[str(f.relative_to(root))] = words
    seen = Counter(s for ws in pages.values() for s in {stem.stemWord(w) for w in ws})
    for path, ws in pages.items():
        if "[[" not in (root / path).read_text("utf-8"):
            continue  # a page with links, so neighbours could come along
        for w in sorted(ws):
            if w not in STOP_WORDS and seen[stem.stemWord(w)] == 1:
                return w, path
    raise AssertionError("no unique word")


def test_a_unique_word_in_a_vault_returns_its_page_and_no_unrelated_neighbour(tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(shared_path("data", "vaults", "obsidian-tasks-docs", "vault"), vault)
    word, page = _unique_word(vault)
    m = make_memory(tmp_path / "data", wiki_path=vault)
    try:
        got = top_paths(m, word)
    finally:
        m.stop()
    assert got[0] == page
    assert set(got) == {page}, f"{word!r}: unrelated pages {sorted(set(got) - {page})}"


def test_session_in_a_query_does_not_return_every_session_page(mem):
    topics = ["kayak", "tax forms", "garden", "piano", "router", "bread"]
    for i, topic in enumerate(topics):
        session(mem, f"s{i}", f"2024-03-0{i + 1}T09:00:00", [f"Today we looked at the {topic}."])
    session(mem, "s9", "2024-03-09T09:00:00", ["The login session timed out twice."])
    got = top_paths(mem, "session timeout")
    assert got and {p for p in got} == {got[0]} and "2024-03-09" in got[0]


def test_one_pages_entries_take_at_most_three_of_the_first_ten_slots(mem):
    turns = [f"Kayak note {i}: paddle {i} ordered, colour {c}." for i, c in enumerate("abcdefghij")]
    session(mem, "k", "2024-04-01T09:00:00", turns)
    for i in range(8):
        write(mem, f"notes/k{i}.md", note(f"Gear {i}", f"The kayak rack number {i} is loose."))
    items = mem.recall("kayak paddle", budget_tokens=8000).items
    got = [i["path"] for i in items]
    ses = Counter(got[:10]).most_common(1)[0][0]
    assert ses.startswith("projects/p/sessions/")
    assert max(Counter(got[:10]).values()) <= 3
    assert len(got) > 10  # the rest of the page's entries still come, after the first ten
    # its entries that ranked among the first ten matches ride in its third slot: quoted
    # with their anchors, not lost and not listed twice
    first = [i for i in items[:10] if i["path"] == ses]
    carried = [a for i in first for a in i.get("also", [])]
    assert carried and "also" in first[-1] and all("also" not in i for i in first[:-1])
    anchors = [a["anchor"] for a in carried]
    assert all(a.startswith(ses + "#^t") for a in anchors)
    assert all("paddle" in a["snippet"] for a in carried)
    listed = {i["anchor"] for i in items}
    assert not listed & set(anchors) and len(set(anchors)) == len(anchors)
    # each of the session's ten turns comes back once: in a slot, carried, or later
    entries = [i["anchor"] for i in items if i["anchor"].startswith(ses + "#^t")] + anchors
    assert len(entries) == len(set(entries)) >= 10


# --- small budgets -----------------------------------------------------------------------


def test_a_budget_of_60_returns_a_compact_handle(mem):
    write(
        mem,
        "projects/p/sessions/2024-05-01-a-very-long-session-title-abc.md",
        note(
            "How do we rotate the signing keys for the staging cluster without downtime today",
            "Rotate the staging signing keys with the two-phase script: publish the new key, "
            "wait one hour for caches, then retire the old key and confirm the health checks.",
        ),
    )
    res = mem.recall("rotate signing keys", budget_tokens=60)
    assert res.used_tokens <= 60 and res.items
    item = res.items[0]
    assert item["id"] and item["title"]
    assert len(re.findall(r"\w+", item["snippet"])) >= 10
    # the handle opens in full with expand
    full = mem.expand([item["id"]], 4000, user=as_user(mem, "alice"))["items"]
    assert "two-phase script" in full[0]["text"]
