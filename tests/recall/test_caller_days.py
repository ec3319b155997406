"""The caller's days (C59's sibling C60 of /work/shared/cases/README.md): "yesterday", a
weekday and a bare date in ``since``/``until`` are days of the caller's time zone, the
same on HTTP, MCP and the CLI whatever zone the server runs in; ``since: "2023"`` is the
year, ``since: "2023-05"`` the month, a JSON number still epoch seconds."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import as_user, make_memory, wait_for

from wiki_memory.auth import TokenStore
from wiki_memory.core.memory import Memory
from wiki_memory.recall.filters import FilterError, parse_time
from wiki_memory.recall.when import windows
from wiki_memory.zones import ZoneError, zone

# C60's sessions: (session, user, event time with the offset the hook sent, marker)
SESSIONS = [
    ("s1", "u-tok", "2026-03-14T23:30:00+09:00", "fixed the KIWI-14 invoice rounding"),
    ("s2", "u-tok", "2026-03-15T00:20:00+09:00", "started the KIWI-15 refactor"),
    ("s3", "u-sfo", "2026-03-07T23:50:00-08:00", "rotated the LYNX keys"),
    ("s4", "u-sfo", "2026-03-08T03:30:00-07:00", "LYNX follow-up after the rotation"),
]
TOK = ("Asia/Tokyo", "2026-03-15T08:00:00+09:00")
SFO = ("America/Los_Angeles", "2026-03-08T10:00:00-07:00")
# (zone and now of the caller, query, since, until, the marker first, the one never found)
QUERIES = [
    (TOK, "what did I do yesterday with KIWI", None, None, "KIWI-14", None),
    (TOK, "KIWI", "2026-03-14", "2026-03-14", "KIWI-14", "KIWI-15"),
    (SFO, "what happened with LYNX last night", None, None, "rotated the LYNX", None),
    (SFO, "LYNX on Saturday", None, None, "rotated the LYNX", None),
    (SFO, "LYNX", "2026-03-08", None, "LYNX follow-up", "rotated the LYNX"),
]


def _events() -> list[dict[str, Any]]:
    out = []
    for sid, _user, ts, text in SESSIONS:
        for event, payload in (("UserPromptSubmit", {"prompt": text}), ("SessionEnd", {})):
            out.append(
                {
                    "harness": "claude-code",
                    "event": event,
                    "session_id": sid,
                    "project": "c60",
                    "ts": ts,
                    "payload": payload,
                }
            )
    return out


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = make_memory(tmp_path_factory.mktemp("days") / "data")
    m.capture(_events(), as_user(m, "alice"))
    wait_for(lambda: len(m.list_pages(kind="session")) == 4, 30, "4 session pages compiled")
    m.writer.flush()
    yield m
    m.stop()


def _text(mem: Memory, item: dict[str, Any]) -> str:
    return (mem.settings.wiki_dir / item["path"]).read_text(encoding="utf-8")


def _http(mem: Memory, body: dict[str, Any]) -> list[dict[str, Any]]:
    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    token, _ = tokens.ensure_owner()
    from wiki_memory.server.app import create_app

    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        r = http.post("/v1/recall", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        return list(r.json()["items"])


def _mcp(mem: Memory, body: dict[str, Any]) -> list[dict[str, Any]]:
    from mcp import Client

    from wiki_memory.mcp.tools import build_server

    async def main() -> Any:
        async with Client(build_server(mem)) as c:
            return await c.call_tool("memory_recall", body)

    res = asyncio.run(main())
    assert not res.is_error, res
    return list(res.structured_content["items"])


def _cli(mem: Memory, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``wiki-memory recall`` as its code builds the request (``--tz``, ``--since``,
    ``--until``, ``--now``), answered by the server's app in process."""
    from wiki_memory.cli import main as cli

    sent: list[Any] = []

    def post(_args: Any, path: str, b: Any, timeout: float = 30) -> Any:
        sent.append(b)
        return {"items": _http(mem, b), "omitted": 0}

    monkeypatch.setattr(cli, "post_json", post)
    args = argparse.Namespace(
        query=body["query"],
        project=body.get("project"),
        budget=body["budget_tokens"],
        now=body.get("now"),
        since=body.get("since"),
        until=body.get("until"),
        tz=body.get("tz"),
        cursor=0,
        json=True,
    )
    cli.cmd_recall(args)
    assert sent[0]["tz"] == body["tz"]
    return _http(mem, sent[0])


@pytest.mark.process
@pytest.mark.parametrize("server_tz", ["UTC", "Europe/Berlin", "America/New_York"])
def test_C60_the_callers_days_on_every_face_in_any_server_zone(
    mem: Memory, server_tz: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the server's own zone changes nothing: no day is read from the local clock
    monkeypatch.setenv("TZ", server_tz)
    time.tzset()
    try:
        for (tz, now), query, since, until, first, never in QUERIES:
            body: dict[str, Any] = {"query": query, "project": "c60", "budget_tokens": 4000}
            body |= {"tz": tz, "now": now}
            body |= {k: v for k, v in (("since", since), ("until", until)) if v}
            faces = {
                "http": _http(mem, body),
                "mcp": _mcp(mem, body),
                "cli": _cli(mem, body, monkeypatch),
            }
            ids = {face: [i["id"] for i in items] for face, items in faces.items()}
            assert ids["http"] == ids["mcp"] == ids["cli"], (query, ids)
            items = faces["http"]
            assert items, (tz, query)
            assert first in _text(mem, items[0]), (tz, query, items[0])
            if since is None:
                assert "when" in items[0]["why"], (query, items[0])
            if never:
                assert all(never not in _text(mem, i) for i in items), (query, items)
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.fast
def test_yesterday_is_the_callers_day_as_instants() -> None:
    tok = datetime.fromisoformat(TOK[1]).astimezone(zone(TOK[0]))
    (w,) = windows("yesterday", tok)
    assert (w.first, w.last) == (date(2026, 3, 14), date(2026, 3, 14))
    s1 = datetime.fromisoformat(SESSIONS[0][2]).timestamp()
    s2 = datetime.fromisoformat(SESSIONS[1][2]).timestamp()
    assert w.covers(s1, s1) and not w.covers(s2, s2)
    # across the DST change: Saturday 7 March runs 08:00Z to 08:00Z, Sunday is 23 hours
    sfo = datetime.fromisoformat(SFO[1]).astimezone(zone(SFO[0]))
    (sat,) = windows("on Saturday", sfo)
    assert sat.first == date(2026, 3, 7)
    assert sat.start == datetime(2026, 3, 7, 8, tzinfo=UTC).timestamp()
    assert sat.end == datetime(2026, 3, 8, 8, tzinfo=UTC).timestamp()
    (today,) = windows("today", sfo)
    assert today.end - today.start == 23 * 3600
    # a plain date is a UTC day, as before
    (utc,) = windows("yesterday", date(2026, 3, 15))
    assert utc.start == datetime(2026, 3, 14, tzinfo=UTC).timestamp()


@pytest.mark.fast
def test_since_and_until_periods_in_the_callers_zone() -> None:
    y0 = datetime(2023, 1, 1, tzinfo=UTC).timestamp()
    assert parse_time("2023", "since") == y0
    assert parse_time("2023", "until", end_of_day=True) == pytest.approx(
        datetime(2024, 1, 1, tzinfo=UTC).timestamp() - 1e-6
    )
    assert parse_time("2023-05", "since") == datetime(2023, 5, 1, tzinfo=UTC).timestamp()
    assert parse_time("2023-05", "until", end_of_day=True) == pytest.approx(
        datetime(2023, 6, 1, tzinfo=UTC).timestamp() - 1e-6
    )
    assert parse_time("2023-12", "until", end_of_day=True) == pytest.approx(y0 + 365 * 86400 - 1e-6)
    assert parse_time(1700000000, "since") == 1700000000.0
    assert parse_time("1700000000", "since") == 1700000000.0  # a query string's number
    tokyo = zone("Asia/Tokyo")
    assert (
        parse_time("2026-03-14", "since", zone=tokyo)
        == datetime(2026, 3, 13, 15, tzinfo=UTC).timestamp()
    )
    assert (
        parse_time("2026-03-14T08:00", "since", zone=tokyo)
        == datetime(2026, 3, 13, 23, tzinfo=UTC).timestamp()
    )
    assert (
        parse_time("2026-03-14T08:00Z", "since", zone=tokyo)
        == datetime(2026, 3, 14, 8, tzinfo=UTC).timestamp()
    )
    assert parse_time("9999", "until", end_of_day=True) is not None
    for bad in ("2023-13", "yesterday", "2023/05", "May 2023", "2023-05-32"):
        with pytest.raises(FilterError) as err:
            parse_time(bad, "since")
        assert err.value.field == "since"


@pytest.mark.fast
def test_zones_by_name_offset_or_refused() -> None:
    assert zone(None) is UTC and zone("", "Asia/Tokyo") == zone("Asia/Tokyo")
    assert zone("+09:00").utcoffset(None).total_seconds() == 9 * 3600  # type: ignore[union-attr]
    assert zone("-0730").utcoffset(None).total_seconds() == -(7.5 * 3600)  # type: ignore[union-attr]
    for bad in ("Mars/Olympus", "../../etc/passwd", "+25:00", 9, "x" * 100):
        with pytest.raises(ZoneError) as err:
            zone(bad)
        assert err.value.field == "tz"


@pytest.mark.fast
def test_a_users_stored_zone_is_the_default(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "auth", owner_user="alice")
    store.ensure_owner()
    store.create("u-tok", projects=["c60"], tz="Asia/Tokyo")
    ident = store.identity_of("u-tok")
    assert ident is not None and ident.tz == "Asia/Tokyo"
    with pytest.raises(ValueError):
        store.create("u-bad", tz="Nowhere/Land")


@pytest.mark.fast
def test_a_session_keeps_the_offset_its_events_were_sent_at() -> None:
    from wiki_memory.capture.observation import SessionMeta, parse_event, ts_offset
    from wiki_memory.wiki.compiler import compile_session

    assert ts_offset("2026-03-15T00:20:00.000+09:00") == 540
    assert ts_offset("2026-03-07T23:50:00-08:00") == -480
    assert ts_offset("2026-03-07T23:50:00Z") is None and ts_offset(1.5) is None
    assert ts_offset("2026-03-07") is None
    obs = parse_event(
        {
            "harness": "claude-code",
            "event": "UserPromptSubmit",
            "session_id": "s2",
            "project": "c60",
            "ts": SESSIONS[1][2],
            "payload": {"prompt": SESSIONS[1][3]},
        },
        "alice",
    )
    assert obs.offset == 540 and obs.ts == datetime(2026, 3, 14, 15, 20, tzinfo=UTC).timestamp()
    assert type(obs).from_json(obs.to_json()).offset == 540
    meta = SessionMeta("k" * 16, "claude-code", "s2", "c60", "alice", None, obs.ts)
    page = compile_session(meta, [obs], status="active", ended=None, now=obs.ts)
    assert page.metadata["started"] == "2026-03-15T00:20:00+09:00"
    text = page.body
    assert "- **Started:** 2026-03-15 00:20 +09:00 (2026-03-14 15:20 UTC)" in text
    # the entry keeps its UTC clock, which the index reads
    assert "**15:20:00** · prompt" in text


@pytest.mark.process
def test_the_zone_header_and_the_users_stored_zone_stand_in_for_tz(mem: Memory) -> None:
    """The hooks, the CLI and the bridge send ``X-Wiki-Memory-TZ``; a user created with
    ``--tz`` needs neither."""
    from wiki_memory.server.app import create_app

    tokens = TokenStore(mem.settings.auth_dir, owner_user="alice")
    owner, _ = tokens.ensure_owner()
    tok = tokens.create("u-tok", "admin", tz="Asia/Tokyo")
    body = {"query": "what did I do yesterday with KIWI", "project": "c60", "now": TOK[1]}
    with TestClient(create_app(mem, tokens), base_url="http://127.0.0.1") as http:
        for headers in (
            {"Authorization": f"Bearer {owner}", "X-Wiki-Memory-TZ": "Asia/Tokyo"},
            {"Authorization": f"Bearer {tok}"},
        ):
            r = http.post("/v1/recall", json=body, headers=headers)
            assert r.status_code == 200, r.text
            first = r.json()["items"][0]
            assert "KIWI-14" in _text(mem, first) and "when" in first["why"], first
        bad = http.post(
            "/v1/recall",
            json=body | {"tz": "Mars/Olympus"},
            headers={"Authorization": f"Bearer {owner}"},
        )
        assert bad.status_code == 400 and bad.json()["field"] == "tz", bad.text
        # a string that is no time: a 400 naming the field
        bad = http.post(
            "/v1/recall",
            json=body | {"since": "last year"},
            headers={"Authorization": f"Bearer {owner}"},
        )
        assert bad.status_code == 400 and bad.json()["field"] == "since", bad.text


@pytest.mark.fast
def test_the_hook_sends_its_zone_and_local_times(monkeypatch: pytest.MonkeyPatch) -> None:
    from wiki_memory.harness.outbox import load_hooklib
    from wiki_memory.zones import local_zone_name

    hooks = load_hooklib()
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        hooks._ZONE.clear()
        assert hooks.local_zone() == local_zone_name() == "Asia/Tokyo"
        s2 = datetime.fromisoformat(SESSIONS[1][2]).timestamp()
        assert hooks._iso_local(s2) == "2026-03-15T00:20:00.000+09:00"
        hooks._ZONE.clear()
        monkeypatch.setenv("TZ", "JST-9")  # a POSIX rule: its current offset
        time.tzset()
        assert hooks.local_zone() == local_zone_name() == "+09:00"
        hooks._ZONE.clear()
        monkeypatch.setenv("TZ", "Evil/Zone\r\nX-Injected: 1")
        time.tzset()
        assert "\n" not in hooks.local_zone()
    finally:
        hooks._ZONE.clear()
        monkeypatch.undo()
        time.tzset()
