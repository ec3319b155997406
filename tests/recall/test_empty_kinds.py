"""``kinds: []`` would match nothing and answer an empty page as if nothing matched:
recall refuses it naming the field."""

from __future__ import annotations

import pytest

from wiki_memory.core.memory import Memory
from wiki_memory.errors import BadRequest

pytestmark = pytest.mark.fast


def test_recall_with_an_empty_kinds_list_is_a_400_naming_kinds(mem: Memory) -> None:
    with pytest.raises(BadRequest) as err:
        mem.recall("anything", kinds=[])
    assert err.value.body()["field"] == "kinds"
    assert err.value.body()["error"] == "bad_request"
