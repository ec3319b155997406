"""Large replies are sent from a temporary file a piece at a time
(wiki_memory/web/replies.py): the same bytes and headers, pieces of at most 64 KiB, the
built body let go before the first piece, the file gone afterwards."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import pytest
from starlette.responses import JSONResponse, Response

from wiki_memory.web import replies

pytestmark = pytest.mark.fast


def send_all(resp: Response) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:  # pragma: no cover - never asked
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(resp({"type": "http", "method": "GET"}, receive, send))
    return sent


def test_a_small_reply_is_left_as_it_is() -> None:
    resp = JSONResponse({"a": 1})
    assert replies.spooled(resp) is resp


def test_a_large_reply_goes_out_in_pieces_from_a_file_that_is_then_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []
    real = tempfile.mkstemp

    def mkstemp(**kw: Any) -> tuple[int, str]:
        fd, name = real(**kw)
        made.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    text = "x" * (replies.SPOOL_OVER * 3 + 17)
    built = JSONResponse({"content": text})
    whole = built.body
    headers = list(built.raw_headers)
    resp = replies.spooled(built)
    assert resp is not built and built.body == b""
    sent = send_all(resp)
    assert sent[0]["type"] == "http.response.start" and sent[0]["headers"] == headers
    pieces = [m["body"] for m in sent[1:]]
    assert all(len(p) <= replies.CHUNK for p in pieces)
    assert b"".join(pieces) == whole
    assert [m["more_body"] for m in sent[1:]] == [True] * (len(pieces) - 1) + [False]
    assert made and not os.path.exists(made[0])
