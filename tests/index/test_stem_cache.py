"""``stems_text`` stems each distinct word once and remembers it (and each distinct
whitespace-separated word's share of the column): the ``stems`` column
must be what stemming every word in turn gives (text order, repeats kept, a word's
stems in several languages sorted), for any text and languages, and stay so when the
remembered words are emptied half-way (docs/index.md, "Word forms")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wiki_memory.index import stem
from wiki_memory.index.stem import WORD, stem_words, stems_text

WORDS = st.sampled_from(
    "running Runs RUNNER ran connection connected getUserName naïve Straße İstanbul ǅemal "
    "½ly 3rd x2y abc ab ÉCOLES caffè indexing indices größten ﬁnding HTTPServer".split()
)
LANGS = st.sampled_from(
    [("english",), ("german",), ("turkish",), ("english", "german"), ("french", "english")]
)


def _every_word(text: str, langs: tuple[str, ...]) -> str:
    """Each word stemmed in turn (the rule, written plainly)."""
    ws = [w.lower() for w in WORD.findall(text) if w.islower() or w.istitle() or w.isupper()]
    return " ".join(st for s in stem_words(ws, langs) for st in sorted(s))


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.one_of(WORDS, st.text(min_size=1, max_size=12)), max_size=40),
    langs=LANGS,
)
def test_the_stems_column_is_each_word_stemmed_in_turn(
    words: list[str], langs: tuple[str, ...]
) -> None:
    text = " ".join(words)
    assert stems_text(text, langs) == _every_word(text, langs)


def test_repeats_and_order_are_kept() -> None:
    text = "Running runs connected running getUserName"
    assert stems_text(text, ("english",)) == "run run connect run"


def test_a_full_memory_of_words_is_emptied_and_answers_stay_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stem, "_STEMS_MAX", 3)
    monkeypatch.setattr(stem, "_STEMS", {})
    monkeypatch.setattr(stem, "_WORDS_MAX", 3)
    monkeypatch.setattr(stem, "_WORD_STEMS", {})
    english = ("english",)
    assert stems_text("running runs", english) == "run run"
    assert set(stem._STEMS[english]) == {"running", "runs"}
    assert stem._WORD_STEMS[english] == {"running": "run", "runs": "run"}
    # three new words do not fit beside two: emptied, then the new text's words kept
    assert stems_text("connected indexing indices", english) == _every_word(
        "connected indexing indices", english
    )
    assert set(stem._STEMS[english]) == {"connected", "indexing", "indices"}
    assert set(stem._WORD_STEMS[english]) == {"connected", "indexing", "indices"}
    assert stems_text("running caffè RUNNER", english) == _every_word(
        "running caffè RUNNER", english
    )


def test_threads_filling_the_memory_at_once_get_every_stem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rebuild's worker and a live upsert stem at once: one of them emptying the
    remembered words must not make the other lose a word it just stemmed (KeyError)."""
    import random
    import threading

    monkeypatch.setattr(stem, "_STEMS_MAX", 500)
    monkeypatch.setattr(stem, "_STEMS", {})
    monkeypatch.setattr(stem, "_WORDS_MAX", 500)
    monkeypatch.setattr(stem, "_WORD_STEMS", {})
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(60):
                text = " ".join(
                    "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
                    + rng.choice(["ing", "ed", "s", ""])
                    for _ in range(300)
                )
                assert stems_text(text, ("english",)) == _every_word(text, ("english",))
        except BaseException as exc:  # noqa: BLE001 - collected for the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@settings(max_examples=300, deadline=None)
@given(
    heading=st.lists(st.one_of(WORDS, st.text(min_size=1, max_size=12)), max_size=6),
    body=st.lists(st.one_of(WORDS, st.text(min_size=1, max_size=12)), max_size=40),
    langs=LANGS,
)
def test_the_indexer_stems_the_words_index_text_found(
    heading: list[str], body: list[str], langs: tuple[str, ...]
) -> None:
    """The rebuild stems the words ``index_text_words`` returns instead of scanning the
    column values again: the same stems column as the rule over the joined values."""
    from wiki_memory.index.stem import stems_of_words
    from wiki_memory.index.text import index_text, index_text_words

    hf, hw = index_text_words(" ".join(heading))
    bf, bw = index_text_words(" ".join(body))
    assert (hf, hw) == (index_text(" ".join(heading)), hf.split())
    assert (bf, bw) == (index_text(" ".join(body)), bf.split())
    assert stems_of_words(hw + bw, langs) == _every_word(hf + "\n" + bf, langs)
