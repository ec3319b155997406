"""Dates at the calendar's edges never stop indexing or recall (the relative
date phrases, found by a new-user run: "4500 years ago" in a prompt made a page unindexable
and the server unable to start; "400000 weeks ago" in a query gave HTTP 500).

Python's ``date`` holds the years 1-9999. A phrase or a frontmatter time whose days fall
outside names no day: the page is indexed without it, the query has no window for it,
and a time field outside the calendar is a 400 naming the field."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import make_memory

from wiki_memory.index.dates import page_day, referred_words, section_date_words, section_days
from wiki_memory.recall.filters import FilterError, parse_time
from wiki_memory.recall.when import MAX_WINDOWS, windows

FAR = [
    "The pyramids were built 4500 years ago.",
    "The legend began 1000000 days ago and 5000 years ago.",
    "It was 99999999999999999999 days ago, 400000 weeks ago.",
    "see you this weekend, last week, last Friday, yesterday, last year, two days ago",
]
EDGES = [date.min, date.min + timedelta(days=3), date.max, date.max - timedelta(days=2)]


@pytest.mark.parametrize("text", FAR)
@pytest.mark.parametrize("day", [date(2023, 5, 2), *EDGES])
def test_an_entrys_far_phrases_name_no_day_and_raise_nothing(text, day):
    entry = f"**10:00:00** · prompt · {text}"
    words = section_date_words(entry, day)
    assert words.startswith(section_date_words("", day))
    # the phrases the calendar holds still add their days
    if day == date(2023, 5, 2) and "yesterday" in text:
        assert "2023-05-01" in referred_words(entry, day)


def test_frontmatter_times_past_the_calendar_give_no_day():
    assert page_day({"started": "9999-12-31T23:00:00-05:00"}) is None
    assert page_day({"started": "9999-12-31T23:00:00-05:00", "created": "2023-05-02"}) == page_day(
        {"created": "2023-05-02"}
    )
    # an entry past midnight on the calendar's last day stays on it
    start = page_day({"date": "9999-12-31T23:00:00Z"})
    assert section_days(start, ["**23:30:00** a", "**00:10:00** b"]) == [date.max, date.max]


_WORDS = st.sampled_from(
    "on in of last this next the day days week weeks weekend month months year years ago "
    "yesterday today tonight night before spring summer fall winter May June December "
    "Friday Monday 0 1 8 31 99 0000 1899 2023 9999 99999999999999999999 8th 2023-05-08 "
    "0001-01-01 9999-12-31 a few couple".split()
)


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(_WORDS, max_size=12),
    now=st.dates(min_value=date.min, max_value=date.max),
)
def test_no_query_and_no_reference_day_makes_windows_raise(words, now):
    text = " ".join(words)
    for w in windows(text, now):
        assert date.min <= w.first <= w.last <= date.max
    section_date_words(f"**10:00:00** · {text}", now)


def test_a_long_query_of_date_words_reads_only_its_start():
    q = "on 8 May 2023 yesterday last Friday 1999 " * 25_000  # about 1 MB
    wins = windows(q, date(2023, 6, 1))
    assert 0 < len(wins) <= MAX_WINDOWS
    assert wins[0].first == date(2023, 5, 8)


@pytest.mark.parametrize(
    ("value", "end"),
    [(1e20, False), (float("nan"), False), ("1e20", False), ("9999-12-31T23:00:00-05:00", False)],
)
def test_a_time_outside_the_calendar_is_a_bad_request_naming_its_field(value, end):
    with pytest.raises(FilterError) as err:
        parse_time(value, "now", end_of_day=end)
    assert err.value.field == "now"


def test_the_calendars_last_day_is_a_valid_until():
    assert parse_time("9999-12-31", "until", end_of_day=True) > parse_time("9999-12-31", "until")


def test_pages_and_queries_at_the_edges_index_recall_and_restart(tmp_path):
    files = {
        "notes/pyramids.md": "---\ndate: 2023-08-01\n---\n# Pyramids\n\n"
        "**10:00:00** · The zebracorn pyramids were built 4500 years ago.\n",
        "notes/weekend.md": "---\ndate: 9999-12-31\n---\n# Weekend\n\n"
        "**10:00:00** · zebracorn picnic this weekend\n",
        "notes/tz.md": "---\nstarted: 9999-12-31T23:00:00-05:00\n---\n# Late\n\nzebracorn late\n",
        "notes/plain.md": "# Plain\n\nThe zebracorn armadillo sits in the blue cabinet.\n",
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        found = {i["path"] for i in m.recall("zebracorn", budget_tokens=8000).items}
        assert found == set(files)
        # written through the core too, not only found on disk at start
        m.write_page(
            "notes/more.md",
            b"# More\n\n**10:00:00** \xc2\xb7 a zebracorn, 1000000 days ago\n",
            user="alice",
            message="far",
        )
        for q in ("what did I do 1000000 days ago", "400000 weeks ago", "winter 9999", "May 0000"):
            m.recall(q, budget_tokens=500)
        for q in ("yesterday", "last week", "two days ago", "last Friday", "last summer"):
            m.recall(q, now="0001-01-01", budget_tokens=500)
            m.recall(q, now="9999-12-31T23:00:00Z", budget_tokens=500)
        assert m.recall("zebracorn", until="9999-12-31", budget_tokens=8000).items
        with pytest.raises(FilterError):
            m.recall("yesterday", now=1e20, budget_tokens=500)
    finally:
        m.stop()
    # a restart over the same files indexes them all again
    m = make_memory(tmp_path / "data")
    try:
        assert m.reindex() == len(files) + 1
        found = {i["path"] for i in m.recall("zebracorn", budget_tokens=8000).items}
        assert found == {*files, "notes/more.md"}
    finally:
        m.stop()
