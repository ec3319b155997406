"""Each entry's local time (docs/sessions.md "Frontmatter", docs/web.md): a session page
keeps its section's offset in ``started`` and, for an entry whose event carried another
offset (a DST change, a flight to another zone), that entry's own local time beside its
UTC clock; the web view shows every entry's local time beside UTC."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from support import as_user

from wiki_memory.capture.observation import SessionMeta, parse_event
from wiki_memory.recall.pack import compact
from wiki_memory.wiki.compiler import compile_session

pytestmark = pytest.mark.fast

#: Berlin's clocks go from 02:00 +01:00 to 03:00 +02:00 at 01:00Z on 29 March 2026; then
#: the user lands in Tokyo (+09:00)
EVENTS = [
    ("2026-03-29T01:30:00+01:00", "BEFORE-DST prompt at half past one"),
    ("2026-03-29T03:30:00+02:00", "AFTER-DST prompt at half past three"),
    ("2026-03-29T17:45:00+09:00", "TOKYO prompt after the flight"),
]


def _event(ts: str, text: str) -> dict[str, Any]:
    return {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": "s-dst",
        "project": "trip",
        "ts": ts,
        "payload": {"prompt": text},
    }


def test_an_entry_keeps_its_own_offset_when_it_differs_from_its_sections() -> None:
    obs = [parse_event(_event(ts, text), "alice") for ts, text in EVENTS]
    meta = SessionMeta("k" * 16, "claude-code", "s-dst", "trip", "alice", None, obs[0].ts)
    page = compile_session(meta, obs, status="active", ended=None, now=obs[-1].ts)
    assert page.metadata["started"] == "2026-03-29T01:30:00+01:00"
    body = page.body
    # the section's offset: the UTC clock alone, the local start in the summary
    assert "**00:30:00** · prompt" in body
    assert "- **Started:** 2026-03-29 01:30 +01:00 (2026-03-29 00:30 UTC)" in body
    # after the DST change and in Tokyo: the entry's own local time after its UTC clock
    assert "**01:30:00** (03:30 +02:00) · prompt" in body
    assert "**08:45:00** (17:45 +09:00) · prompt" in body
    # a compact recall handle drops the whole head, local time included
    handle = compact(
        {"id": "x#^t2", "title": "t", "snippet": "**01:30:00** (03:30 +02:00) · prompt AFTER"},
        500,
    )
    assert handle is not None and handle["snippet"].startswith("prompt AFTER"), handle


def test_the_web_view_shows_each_entrys_local_time_beside_utc(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data") as srv:
        m = srv.memory
        assert m is not None
        assert srv.tokens is not None
        me = srv.tokens.owner_name()
        for ts, text in EVENTS:
            m.capture(_event(ts, text), as_user(m, me))
        m.capture(
            {**_event("2026-03-29T17:50:00+09:00", ""), "event": "SessionEnd"}, as_user(m, me)
        )
        path = ""
        for _ in range(300):
            pages = m.list_pages(kind="session")
            if pages:
                path = pages[0]["path"]
                if "TOKYO" in (m.settings.wiki_dir / path).read_text():
                    break
            m.writer.flush()
        assert path, "no session page compiled"
        c = srv.sign_in()
        html = c.get(srv.url + "/page/" + path).text  # type: ignore[attr-defined]
        whens = re.findall(
            r'<span class="when">(.*?)</span></span>|<span class="when">([^<]*)</span>', html
        )
        shown = [a or b for a, b in whens]
        local = [re.sub(r"<[^>]+>", "", w) for w in shown]
        assert local[:3] == [
            "01:30 +01:00 (00:30:00 UTC)",
            "03:30 +02:00 (01:30:00 UTC)",
            "17:45 +09:00 (08:45:00 UTC)",
        ], local
