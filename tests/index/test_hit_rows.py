"""A section read from the index is the same ``Hit`` its dataclass constructor gives."""

from __future__ import annotations

import dataclasses

import pytest

from wiki_memory.index.search import section_fields
from wiki_memory.index.signals import Hit, hit_from_row

ROWS = [
    (
        "notes/a.md",
        "intro",
        "Intro",
        "A page",
        "note",
        "proj",
        "2026-01-02T03:04:05Z",
        "some text",
        7,
        2,
        "2026-01-02",
        41,
        1.5,
        2.5,
        "some text",
        "",
    ),
    ("b.md", None, None, None, None, None, None, None, None, None, None, 3, None, None, None, None),
]


def built(row: tuple[object, ...], score: float) -> Hit:
    return Hit(
        **section_fields(row, score),
        ord=int(row[9] or 0),  # type: ignore[call-overload]
        day=row[10],  # type: ignore[arg-type]
        rid=int(row[11]),  # type: ignore[call-overload]
        span=(float(row[12]), float(row[13])) if row[12] is not None else None,  # type: ignore[arg-type]
        words=row[14],  # type: ignore[arg-type]
        nums=row[15],  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("row", ROWS)
def test_a_row_reads_as_the_constructed_hit(row: tuple[object, ...]) -> None:
    got = hit_from_row(row, -3.25)
    want = built(row, -3.25)
    assert got == want
    assert hash(got) == hash(want)
    assert repr(got) == repr(want)
    assert vars(got) == vars(want) and list(vars(got)) == list(vars(want))
    assert dataclasses.asdict(got) == dataclasses.asdict(want)


def test_a_read_hit_stays_frozen() -> None:
    h = hit_from_row(ROWS[0], 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.score = 2.0  # type: ignore[misc]
