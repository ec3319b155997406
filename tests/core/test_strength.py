"""A page's strength (docs/knowledge.md, "Strength"), as users meet it over HTTP in
process: feedback of five users lifts a page above an equal one, and one user's fifty
count once; a session page used 90 days ago ranks below one used today (a simulated
clock); a pinned page never falls; feedback on a page the caller may not read is a 404
that records nothing; nobody sees another user's reads; recall and the brief never count."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer

from wiki_memory.core import strength as st
from wiki_memory.index import signals
from wiki_memory.mcp.tools import build_server

pytestmark = pytest.mark.fast

DAY = 86400.0
T0 = 1_800_000_000.0  # 2027-01-15, a fixed "now" moved by the tests


def write(data: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        f = data / "wiki" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")


def users(srv: AppServer, n: int, prefix: str = "u") -> list[dict[str, str]]:
    """Headers of ``n`` members who may read project p."""
    return [
        {"Authorization": "Bearer " + srv.token_for(f"{prefix}{i}", "member", ("p",))}
        for i in range(n)
    ]


def order(srv: AppServer, query: str, headers: dict[str, str] | None = None) -> list[str]:
    r = srv.post("/v1/recall", {"query": query, "project": "p"}, headers=headers or srv.headers)
    assert r.status_code == 200, r.text
    return [i["path"] for i in r.json()["items"]]


def why(srv: AppServer, query: str, path: str) -> list[str]:
    items = srv.post("/v1/recall", {"query": query, "project": "p"}).json()["items"]
    return next(i["why"] for i in items if i["path"] == path)


def helped(srv: AppServer, path: str, who: dict[str, str], verdict: str = "helped") -> Any:
    return srv.post("/v1/feedback", {"path": path, "verdict": verdict}, headers=who)


def strength_of(srv: AppServer, path: str, kind: str = "note", pinned: bool = False) -> float:
    assert srv.memory is not None
    return srv.memory.reader.strength.of({path: (kind, pinned)}).get(path, 0.0)


NOTE = (
    "---\nproject: p\ntype: note\nupdated: 2026-11-01\n---\n# {title}\n\nThe kiwi deploy {words}.\n"
)
A = "projects/p/notes/alpha.md"
B = "projects/p/notes/beta.md"


def test_five_users_helped_outranks_an_equal_page_and_one_user_counts_once(tmp_path):
    data = tmp_path / "data"
    write(
        data,
        {
            A: NOTE.format(title="Alpha", words="runs blue green switches nightly"),
            B: NOTE.format(title="Beta", words="runs amber violet switches nightly"),
        },
    )
    with AppServer(data) as srv:
        first = order(srv, "kiwi deploy")
        assert first[:2] == [A, B]  # equal pages: by path
        for who in users(srv, 5):
            assert helped(srv, B, who).status_code == 200
        assert order(srv, "kiwi deploy")[:2] == [B, A]
        assert "strength" in why(srv, "kiwi deploy", B)
        assert "strength" not in why(srv, "kiwi deploy", A)
        five = strength_of(srv, B)
        assert five == pytest.approx(5 * st.VERDICT, rel=0.01)
        # one user's fifty count once: as much as one other user's one
        one, many = users(srv, 2, prefix="v")
        assert helped(srv, A, one).status_code == 200
        single = strength_of(srv, A)
        for _ in range(50):
            assert helped(srv, A, many).status_code == 200
        assert strength_of(srv, A) == pytest.approx(2 * single)
        # the last verdict of the day is the one that counts
        assert helped(srv, A, many, "not_helpful").status_code == 200
        assert strength_of(srv, A) == pytest.approx(0.0, abs=0.01)
        bad = helped(srv, A, one, "meh")
        assert bad.status_code == 400 and bad.json()["field"] == "verdict", bad.text


SESSION = (
    "---\nproject: p\ntype: session\nstarted: 2026-12-01T10:00:00Z\n"
    "ended: 2026-12-01T11:00:00Z\n---\n# {title}\n\nWe tuned the okapi cache {words}.\n"
)
S1 = "projects/p/sessions/s1.md"
S2 = "projects/p/sessions/s2.md"


def test_a_session_page_unused_for_90_days_ranks_below_a_fresh_one(tmp_path):
    data = tmp_path / "data"
    write(
        data,
        {
            S1: SESSION.format(title="One", words="with larger buckets"),
            S2: SESSION.format(title="Two", words="with smaller shards"),
        },
    )
    t = [T0]
    with AppServer(data) as srv:
        assert srv.memory is not None
        srv.memory.use.clock = lambda: t[0]
        readers = users(srv, 3)
        for who in readers:  # s2 used 90 days ago ...
            assert srv.get(f"/v1/pages/{S2}", headers=who).status_code == 200
        assert order(srv, "okapi cache")[:2] == [S2, S1]
        t[0] += 90 * DAY
        for who in readers:  # ... s1 used today, as much
            assert srv.get(f"/v1/pages/{S1}", headers=who).status_code == 200
        assert order(srv, "okapi cache")[:2] == [S1, S2]
        old, fresh = strength_of(srv, S2, "session"), strength_of(srv, S1, "session")
        assert old == pytest.approx(fresh * 0.5 ** (90 / st.HALF_LIFE_DAYS["session"]), rel=0.02)
        # a note decays slower than a session page
        assert strength_of(srv, S2, "note") > 4 * old


def test_a_pinned_page_never_falls(tmp_path):
    data = tmp_path / "data"
    pinned = NOTE.replace("type: note\n", "type: note\npinned: true\n")
    write(
        data,
        {
            A: NOTE.format(title="Alpha", words="runs blue green switches nightly"),
            B: pinned.format(title="Beta", words="runs amber violet switches nightly"),
        },
    )
    t = [T0]
    with AppServer(data) as srv:
        assert srv.memory is not None
        srv.memory.use.clock = lambda: t[0]
        for who in users(srv, 3):
            assert helped(srv, B, who).status_code == 200
        at_first = strength_of(srv, B, pinned=True)
        assert at_first > 0
        for days in (30, 180, 365):
            t[0] = T0 + days * DAY
            got = srv.memory.reader.strength.of(signals.page_decay(srv.memory.index, [B]))
            assert got[B] == pytest.approx(at_first), days
            assert order(srv, "kiwi deploy")[0] == B, days
            assert strength_of(srv, B, pinned=False) < at_first  # unpinned, it would fall


PERSONAL = "people/bob/notes/secret.md"


def test_feedback_on_a_page_the_caller_may_not_read_is_404_and_records_nothing(tmp_path):
    data = tmp_path / "data"
    write(
        data,
        {
            A: NOTE.format(title="Alpha", words="runs blue green switches nightly"),
            PERSONAL: "---\ntype: note\n---\n# Bob's\n\nThe kiwi deploy key is in the blue box.\n",
        },
    )
    with AppServer(data) as srv:
        assert srv.memory is not None
        (sam,) = users(srv, 1, prefix="sam")
        hidden = helped(srv, PERSONAL, sam)
        missing = helped(srv, "people/bob/notes/nosuch.md", sam)
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["error"] == missing.json()["error"]
        assert hidden.json()["message"].replace("secret", "nosuch") == missing.json()["message"]
        assert "kiwi" not in hidden.text and "Bob's" not in hidden.text
        srv.memory.use.flush()
        assert not [r for r in srv.memory.use.every_row() if r["path"] == PERSONAL]
        # through MCP (the same operation): the same 404 as a missing page, as the owner
        # may read the page the owner's own feedback counts
        assert helped(srv, A, sam).status_code == 200
        bob = {"Authorization": "Bearer " + srv.token_for("bob", "member", ("p",))}
        assert helped(srv, PERSONAL, bob).json()["counted"] is True


def mcp_call(srv: AppServer, name: str, args: dict[str, Any]) -> Any:
    from mcp import Client

    assert srv.memory is not None

    async def main() -> Any:
        async with Client(build_server(srv.memory)) as c:
            return await c.call_tool(name, args)

    return asyncio.run(main())


def test_mcp_feedback_counts_and_a_missing_page_is_an_error(tmp_path):
    data = tmp_path / "data"
    write(data, {A: NOTE.format(title="Alpha", words="runs blue green switches nightly")})
    with AppServer(data) as srv:
        res = mcp_call(srv, "memory_feedback", {"path": A, "verdict": "helped"})
        assert not res.is_error, res
        assert strength_of(srv, A) == pytest.approx(st.VERDICT, rel=0.01)
        gone = mcp_call(
            srv, "memory_feedback", {"path": "projects/p/notes/no.md", "verdict": "helped"}
        )
        assert gone.is_error and "no such page" in gone.content[0].text


def test_reads_count_per_user_and_day_and_nobody_sees_another_s_reads(tmp_path):
    data = tmp_path / "data"
    write(data, {A: NOTE.format(title="Alpha", words="runs blue green switches nightly")})
    with AppServer(data) as srv:
        assert srv.memory is not None
        alice, bob = users(srv, 2)
        for _ in range(3):
            assert srv.get(f"/v1/pages/{A}", headers=alice).status_code == 200
        assert strength_of(srv, A) == pytest.approx(st.READ, rel=0.01)  # once a day
        mine = srv.get("/v1/use?days=1", headers=alice).json()["rows"]
        assert [(r["path"], r["read"]) for r in mine] == [(A, 3)]
        assert srv.get("/v1/use?days=1", headers=bob).json()["rows"] == []
        # the web page view counts as a read of its viewer
        web = srv.sign_in(srv.token_for("carol", "member", ("p",)))
        assert web.get(srv.url + f"/page/{A}").status_code == 200
        assert strength_of(srv, A) == pytest.approx(2 * st.READ, rel=0.01)
        assert srv.get("/v1/use?days=1", headers=bob).json()["rows"] == []


def test_recall_and_the_brief_never_count(tmp_path):
    data = tmp_path / "data"
    write(data, {A: NOTE.format(title="Alpha", words="runs blue green switches nightly")})
    with AppServer(data) as srv:
        for who in users(srv, 3):
            assert order(srv, "kiwi deploy", who) == [A]
            r = srv.post("/v1/brief", {"harness": "claude-code", "project": "p"}, headers=who)
            assert r.status_code == 200, r.text
        assert strength_of(srv, A) == 0.0
        assert "strength" not in why(srv, "kiwi deploy", A)


def test_a_handoff_that_links_a_page_cites_it(tmp_path):
    data = tmp_path / "data"
    write(data, {A: NOTE.format(title="Alpha", words="runs blue green switches nightly")})
    with AppServer(data) as srv:
        (dana,) = users(srv, 1, prefix="dana")
        r = srv.post(
            "/v1/handoffs",
            {"project": "p", "title": "Finish the deploy", "where_we_left_off": "See [[alpha]]."},
            headers=dana,
        )
        assert r.status_code in (200, 201), r.text
        rows = srv.get("/v1/use?days=1", headers=dana).json()["rows"]
        assert [(x["path"], x["cited"]) for x in rows] == [(A, 1)]
        assert strength_of(srv, A) == pytest.approx(st.CITED, rel=0.01)


def test_rows_of_an_older_record_take_new_counts_and_anonymous_use_never_counts(tmp_path):
    from wiki_memory.core.userecord import UseRecord

    t = [T0]
    rec = UseRecord(tmp_path, clock=lambda: t[0])
    days = tmp_path / "use" / "days"
    days.mkdir(parents=True)
    # a day file written before read/cited/helped existed
    (days / "2027-01-15.jsonl").write_text(
        '{"day": "2027-01-15", "path": "n/a.md", "user": "u", "recalled": 2, "expanded": 0, '
        '"repeated": 0}\n'
    )
    rec.note("read", ["n/a.md"], "u")
    rec.note("read", ["n/a.md"], None)  # an anonymous caller: recorded, never counted
    rec.feedback("n/a.md", "u", "helped")
    (row,) = [r for r in rec.rows("u", days=1)]
    assert (row["recalled"], row["read"], row["helped"]) == (2, 1, 1)
    s = st.Strength(rec)
    assert s.of({"n/a.md": ("note", False)})["n/a.md"] == pytest.approx(
        st.READ + st.VERDICT, rel=0.01
    )
    t[0] += 180 * DAY  # one note half-life later: half of it (a day of its own now)
    assert s.of({"n/a.md": ("note", False)})["n/a.md"] == pytest.approx(1.5, rel=0.01)
