"""Cold session pages condensed to their durable facts, reversibly (docs/knowledge.md,
"Cold sessions condensed"): sessions built from the shared hook payload shapes
(tests/condensekit.py) are condensed; the five facts chosen from each timeline before
(goal, a decision, a file, a command that worked, an error) are still found by recall,
every linked ``^tN`` still lands, ``uncondense`` puts each timeline back byte for byte
and keeps a person's later edit, a member is refused, a dry run writes nothing, and a
resumed session numbers its entries after the last one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import condensekit as ck
import pytest
from appkit import AppServer
from support import as_user, shared_path

from wiki_memory.core.condense import condense_sessions, scheduled_run, uncondense
from wiki_memory.errors import Forbidden
from wiki_memory.wiki.condense import timeline_span

pytestmark = pytest.mark.fast

YEAR = 365 * 86400.0
N = 12


def hooks() -> Path:
    return shared_path("data", "hooks")


def build(srv: AppServer, n: int = N) -> dict[str, ck.Plan]:
    """``n`` ended sessions; page path → its plan."""
    m = srv.memory
    assert m is not None
    for i in range(n):
        for e in ck.events(hooks(), i):
            m.capture(e, as_user(m, m.owner))
    m.writer.flush()
    out = {}
    for i in range(n):
        info = next(x for x in m.spool.sessions.values() if x.session_id == ck.plan(i).sid)
        out[info.state["path"]] = ck.plan(i)
    return out


def timeline(text: str) -> str:
    span = timeline_span(text)
    assert span is not None
    return text[span[0] : span[1]]


def head(srv: AppServer) -> Any:
    m = srv.memory
    assert m is not None
    return m.git.head()


def test_facts_found_links_kept_and_uncondense_restores_byte_for_byte(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        pages = build(srv)
        linked = sorted(pages)[:3]
        # a note links to the failed test run of three sessions (entry 10: the prompt,
        # eight reads, then the failure)
        links = "\n".join(f"- [[{Path(p).stem}#^t10]]" for p in linked)
        r = srv.post(
            "/v1/remember",
            {
                "text": f"Failures to remember:\n\n{links}\n",
                "project": "atlas",
                "title": "Failures",
            },
        )
        assert r.status_code in (200, 201), r.text
        m.writer.flush()
        before = {p: (m.wiki_dir / p).read_bytes() for p in pages}
        for p in linked:
            assert "\n^t10\n" in timeline(before[p].decode())

        res = condense_sessions(m, None, now=time.time() + YEAR)
        assert res["condensed"] == N
        assert res["tokens_after"] * 4 < res["tokens_before"], res
        commits = m.git.log(limit=5)
        assert sum(c.message.startswith("Condense ") for c in commits) == 1
        assert set(commits[0].paths) == set(pages)  # one commit for the run

        for path, plan in pages.items():
            text = (m.wiki_dir / path).read_text()
            assert "last_entry: 14" in text and "condensed: " in text
            assert len(timeline(text)) * 4 < len(timeline(before[path].decode()))
            facts = {
                "goal": plan.goal,
                "decision": plan.decision,
                "file": plan.file,
                "command": plan.command,
                "error": plan.error.split(" - ")[1],
            }
            for what, fact in facts.items():
                assert fact.split("'")[0].strip() in text, (what, path)
                items = m.recall(fact, project="atlas", user=as_user(m, m.owner)).items
                assert path in [i.get("path") for i in items[:10]], (what, fact, path)

        for p in linked:
            text = (m.wiki_dir / p).read_text()
            assert "\n^t10\n" in timeline(text)
            assert "^t10" in [s["anchor"] for s in m.index.sections_of(p)]
            assert ("projects/atlas/notes/Failures.md", "^t10") in {
                (b["src_path"], b["fragment"]) for b in m.index.backlinks(p)
            }
        out = m.index.outlinks("projects/atlas/notes/Failures.md")
        assert [x["status"] for x in out] == ["resolved"] * 3, out
        unlinked = sorted(pages)[5]
        assert "\n^t10\n" not in timeline((m.wiki_dir / unlinked).read_text())

        # a person adds a section after condensing; uncondense keeps it
        p = linked[0]
        edited = (m.wiki_dir / p).read_text() + "\n## My notes\n\nkeep this line\n"
        r = srv.client.put(
            f"/v1/pages/{p}",
            content=edited.encode(),
            headers={**srv.headers, "If-Match": f'"{_hash(m, p)}"'},
        )
        assert r.status_code == 200, r.text
        m.writer.flush()
        for path in pages:
            out = uncondense(m, as_user(m, m.owner), path)
            assert out["tokens_after"] > out["tokens_before"]
            now = (m.wiki_dir / path).read_text()
            assert timeline(now) == timeline(before[path].decode())
            assert "\ncondensed:" not in now and "\nuncondensed: " in now
        assert "## My notes\n\nkeep this line\n" in (m.wiki_dir / p).read_text()


def _hash(m: Any, path: str) -> str:
    from wiki_memory.plainfile import page_hash

    return page_hash((m.wiki_dir / path).read_bytes())


def test_a_member_is_refused_and_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        pages = build(srv, 3)
        files = {p: (m.wiki_dir / p).read_bytes() for p in pages}
        member = {"Authorization": f"Bearer {srv.token_for('mo', role='member')}"}
        r = srv.post("/v1/admin/condense", {"older_than_days": 0}, headers=member)
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text
        r = srv.post("/v1/admin/uncondense", {"path": sorted(pages)[0]}, headers=member)
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text
        with pytest.raises(Forbidden):
            condense_sessions(m, as_user(m, "mo"), older_than_days=0)
        r = srv.post("/v1/admin/condense", {"older_than_days": "soon"})
        assert r.status_code == 400 and r.json()["field"] == "older_than_days", r.text

        at = head(srv)
        r = srv.post("/v1/admin/condense", {"older_than_days": 0, "dry_run": True})
        assert r.status_code == 200, r.text
        assert r.json()["condensed"] == 3 and r.json()["dry_run"] is True
        assert all(x["tokens_after"] < x["tokens_before"] for x in r.json()["pages"])
        assert head(srv) == at
        assert {p: (m.wiki_dir / p).read_bytes() for p in pages} == files
        # not old enough: nothing
        r = srv.post("/v1/admin/condense", {})
        assert r.status_code == 200 and r.json()["condensed"] == 0, r.text
        assert head(srv) == at
        r = srv.post("/v1/admin/condense", {"older_than_days": 0, "project": "atlas"})
        assert r.json()["condensed"] == 3
        assert head(srv) != at
        r = srv.post("/v1/admin/uncondense", {"path": "projects/atlas/notes/none.md"})
        assert r.status_code == 404, r.text


def test_a_resumed_session_numbers_after_the_last_entry(tmp_path: Path) -> None:
    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        pages = build(srv, 1)
        path = next(iter(pages))
        res = condense_sessions(m, as_user(m, m.owner), older_than_days=0)
        assert res["condensed"] == 1
        plan = ck.plan(0)
        ev = ck.events(hooks(), 0)[0]
        ev["payload"]["prompt"] = "Now also export the archived rows, please"
        m.capture(ev, as_user(m, m.owner))
        m.capture(
            {
                "harness": "claude-code",
                "project": "atlas",
                "payload": {
                    **ck.events(hooks(), 0)[-2]["payload"],
                    "last_assistant_message": "Archived rows are exported too.",
                    "session_id": plan.sid,
                },
            },
            as_user(m, m.owner),
        )
        m.writer.flush()
        text = (m.wiki_dir / path).read_text()
        ids = [ln for ln in timeline(text).splitlines() if ln.startswith("^t")]
        assert len(ids) == len(set(ids)), ids
        numbers = [int(i[2:].rstrip("r")) for i in ids]
        new = [n for n in numbers if n > 14]
        assert new, text
        assert "Now also export the archived rows" in timeline(text)


def test_the_scheduled_run_is_off_by_default_and_condenses_when_set(tmp_path: Path) -> None:
    from support import make_memory, wait_for

    data = tmp_path / "data"
    with AppServer(data, watch=False, commit_delay_seconds=0.02) as srv:
        path = next(iter(build(srv, 1)))
    page = data / "wiki" / path
    m = make_memory(data, owner="owner", condense_after_days=0)
    try:
        assert m.settings.condense_sessions is False  # off by default
        assert scheduled_run(m, 0.0, time.time()) == 0.0  # what the idle loop calls
        m.writer.flush()
    finally:
        m.stop()
    assert b"condensed: " not in page.read_bytes()
    m = make_memory(
        data, owner="owner", idle_check_seconds=0.05, condense_after_days=0, condense_sessions=True
    )
    try:
        wait_for(lambda: b"condensed: " in page.read_bytes(), 20, "the scheduled run")
        m.writer.flush()
        assert any(c.message.startswith("Condense 1 ") for c in m.git.log(limit=3))
    finally:
        m.stop()


def test_a_condensed_prompt_is_still_found_at_its_own_entry(tmp_path: Path) -> None:
    # a prompt condensed to its head line alone was the compiler's words to recall
    # (neither ranked nor counted): LoCoMo's turns vanished
    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        events = ck.events(hooks(), 0)
        second = dict(events[0], payload=dict(events[0]["payload"]))
        second["payload"]["prompt"] = "Also rename the quastelbrink dashboard to overview"
        events.insert(1, second)
        m.capture(events, as_user(m, m.owner))
        m.writer.flush()
        assert condense_sessions(m, as_user(m, m.owner), older_than_days=0)["condensed"] == 1
        path = m.index.list_pages(kind="session")[0]["path"]
        items = m.recall("quastelbrink dashboard", project="atlas", user=as_user(m, m.owner)).items
        assert f"{path}#^t2" in [i.get("anchor") for i in items[:5]], items[:5]


def test_another_users_personal_sessions_are_theirs_and_an_uncondense_sticks(
    tmp_path: Path,
) -> None:
    """An admin's (or the owner's) run passes over a member's personal session page and
    names it nowhere; uncondensing it is a 404 as for a missing page. A page a person
    uncondensed is left whole by the next run."""
    with AppServer(tmp_path / "data", watch=False, commit_delay_seconds=0.02) as srv:
        m = srv.memory
        assert m is not None
        pages = build(srv, 2)
        shared = sorted(pages)[0]
        carl = {"Authorization": f"Bearer {srv.token_for('carl', role='member')}"}
        adam = {"Authorization": f"Bearer {srv.token_for('adam', role='admin')}"}
        mine = "people/carl/sessions/2025-01-01-aaaa.md"
        r = srv.client.put(
            "/v1/pages/" + mine, content=(m.wiki_dir / shared).read_bytes(), headers=carl
        )
        assert r.status_code in (200, 201), r.text
        m.writer.flush()
        before = (m.wiki_dir / mine).read_bytes()
        for who in (adam, srv.headers):
            r = srv.post("/v1/admin/condense", {"older_than_days": 0, "dry_run": True},
                         headers=who)  # fmt: skip
            assert r.status_code == 200 and mine not in r.text, r.text
        r = srv.post("/v1/admin/condense", {"older_than_days": 0}, headers=adam)
        assert r.status_code == 200 and r.json()["condensed"] == 2, r.text
        assert (m.wiki_dir / mine).read_bytes() == before
        r = srv.post("/v1/admin/uncondense", {"path": mine}, headers=adam)
        assert r.status_code == 404, r.text
        r = srv.post("/v1/admin/condense", {"older_than_days": 0, "project": "nope"}, headers=adam)
        assert r.status_code == 404, r.text

        r = srv.post("/v1/admin/uncondense", {"path": shared})
        assert r.status_code == 200, r.text
        r = srv.post("/v1/admin/condense", {"older_than_days": 0})
        assert r.status_code == 200 and shared not in r.text, r.text
        text = (m.wiki_dir / shared).read_text(encoding="utf-8")
        assert "\nuncondensed: " in text.split("\n---", 1)[0] and "\ncondensed: " not in text
