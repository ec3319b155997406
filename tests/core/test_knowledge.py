"""Knowledge that stays true (docs/knowledge.md), in process: supersession on write and
by hand (one rule), chains to their head, broken supersessions that hide nothing and that
doctor names, proposals that retire nothing, and one memory per fact (cases C54, C56).
The same through a real server and the MCP SDK client is tests/mcp/test_knowledge_mcp.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import as_user, make_memory

from wiki_memory.cli.doctor import doctor_report
from wiki_memory.core import knowledge
from wiki_memory.core.brief import pinned_pages
from wiki_memory.core.memory import Memory
from wiki_memory.core.remember import remember
from wiki_memory.errors import Forbidden, NotFound
from wiki_memory.identity import Identity
from wiki_memory.wiki.page import parse_page

N1 = "The staging database listens on port 5432."
N2 = "Staging DB port: moved to 6543 on 2026-03-02 (ticket OPS-311)."
N3 = "The billing cron runs at 02:00 UTC and reads the staging database."
N4 = "Staging DB port is 7001 from 2026-04-10."


def meta(m: Memory, path: str) -> dict[str, Any]:
    return parse_page((m.wiki_dir / path).read_bytes(), path).metadata


def paths(items: list[dict[str, Any]]) -> list[str]:
    return [i["path"] for i in items]


@pytest.mark.fast
def test_C54_remember_supersedes_in_one_commit_and_recall_gives_the_head_first(mem):
    r1 = remember(mem, N1, project="atlas", title="Staging DB port", user=as_user(mem, "alice"))
    r2 = remember(mem, N2, project="atlas", supersedes=r1["path"], user=as_user(mem, "alice"))
    r3 = remember(mem, N3, project="atlas", user=as_user(mem, "alice"))
    r4 = remember(mem, N4, project="atlas", supersedes=[r2["path"]], user=as_user(mem, "alice"))
    assert r2["supersedes"] == [r1["path"]] and r4["supersedes"] == [r2["path"]]
    # the older page: state, superseded_by, valid_until; the newer: supersedes, valid_from
    m1, m2 = meta(mem, r1["path"]), meta(mem, r2["path"])
    assert (m1["state"], m1["superseded_by"]) == ("superseded", r2["path"])
    assert m1["valid_until"] and m2["valid_from"] and m2["supersedes"] == r1["path"]
    # one commit holds the newer page and the older one's retirement
    last = mem.git.log()[0]
    assert set(last.paths) >= {r4["path"], r2["path"]}

    items = mem.recall("staging database port", project="atlas", user=as_user(mem, "alice")).items
    got = paths(items)
    assert got[0] == r4["path"]
    assert "7001" in items[0]["snippet"] and "state" not in items[0]
    for old in (r1["path"], r2["path"]):
        it = items[got.index(old)]
        assert (it["state"], it["superseded_by"]) == ("superseded", r4["path"])
    # a mention supersedes nothing
    billing = mem.recall("billing cron", project="atlas", user=as_user(mem, "alice")).items
    assert billing[0]["path"] == r3["path"] and "state" not in billing[0]
    assert "state" not in meta(mem, r3["path"])
    # expand marks the state; listings mark the others (newest first: the head first)
    ex = mem.expand([items[got.index(r1["path"])]["id"]], 2000, user=as_user(mem, "alice"))[
        "items"
    ][0]
    assert ex["superseded_by"] == r4["path"]
    listed = [p for p in mem.list_pages(project="atlas", user=as_user(mem, "alice"))]
    order = [p["path"] for p in listed]
    assert listed[order.index(r1["path"])]["superseded_by"] == r4["path"]
    assert listed[order.index(r2["path"])]["superseded_by"] == r4["path"]
    assert "superseded_by" not in listed[order.index(r4["path"])]


@pytest.mark.fast
def test_a_hand_edited_supersedes_is_the_same_rule_and_the_brief_leaves_the_old_out(tmp_path):
    files = {
        "projects/p/notes/old.md": "---\ntitle: Old\npinned: true\n---\nThe cache TTL is 60s.\n",
        # only the newer page says it: the older one needs no edit
        "projects/p/notes/new.md": "---\ntitle: New\npinned: true\nsupersedes: '[[Old]]'\n"
        "---\nThe cache TTL is 300s.\n",
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        items = m.recall("cache TTL", user=as_user(m, "alice")).items
        assert paths(items) == ["projects/p/notes/new.md", "projects/p/notes/old.md"]
        assert items[1]["superseded_by"] == "projects/p/notes/new.md"
        assert [p["path"] for p in pinned_pages(m, "p", as_user(m, "alice"))] == [
            "projects/p/notes/new.md"
        ]
    finally:
        m.stop()


@pytest.mark.fast
def test_the_head_is_brought_in_when_only_the_old_page_matches(tmp_path):
    files = {
        "notes/a.md": "---\nstate: superseded\nsuperseded_by: notes/b.md\n---\nquokkaport 1\n",
        "notes/b.md": "# B\n\nthe new value is 2\n",
    }
    m = make_memory(tmp_path / "data", files=files)
    try:
        items = m.recall("quokkaport", user=as_user(m, "alice")).items
        assert paths(items) == ["notes/b.md", "notes/a.md"]
        assert "successor" in items[0]["why"]
        # compact handles keep the mark
        tiny = m.recall("quokkaport", user=as_user(m, "alice"), budget_tokens=60).items
        assert all(i.get("compact") for i in tiny)
        marked = [i for i in tiny if i["id"] == items[1]["id"]]
        assert not marked or marked[0]["superseded_by"] == "notes/b.md"
    finally:
        m.stop()


BROKEN = {
    "notes/p1.md": "---\nstate: superseded\nsuperseded_by: notes/does-not-exist.md\n---\n"
    "wombat one\n",
    "notes/p2.md": "---\nstate: superseded\nsuperseded_by: notes/p3.md\n---\nwombat two\n",
    "notes/p3.md": "---\nstate: superseded\nsuperseded_by: notes/p2.md\n---\nwombat three\n",
    "notes/p4.md": "---\nstate: superseded\nsuperseded_by: notes/p5.md\n---\nwombat four\n",
    "notes/p5.md": "---\nstate: forgotten\n---\nwombat five\n",
}


@pytest.mark.process  # doctor's other checks may ask the service manager
def test_C54_broken_supersessions_hide_nothing_and_doctor_names_each(tmp_path):
    m = make_memory(tmp_path / "data", files=BROKEN)
    try:
        items = m.recall("wombat", user=as_user(m, "alice")).items
        assert set(paths(items)) == {f"notes/p{i}.md" for i in range(1, 5)}
        assert not any("state" in i for i in items)  # found as current
        chains = m.index.chains()
        assert {p: why for p, (why, _t) in chains.broken.items()} == {
            "notes/p1.md": "missing",
            "notes/p2.md": "cycle",
            "notes/p3.md": "cycle",
            "notes/p4.md": "forgotten",
        }
        settings = m.settings
    finally:
        m.stop()
    rep = doctor_report(settings, wait_seconds=0)
    assert not rep["ok"]
    msgs = [e for e in rep["errors"] if "supersession broken" in e]
    for p, why in (("p1", "missing"), ("p2", "cycle"), ("p3", "cycle"), ("p4", "forgotten")):
        assert any(f"notes/{p}.md" in e and f"superseded_by_{why}" in e for e in msgs), msgs


class Grants:
    """A token directory of two members: ``bob`` reads project r, ``cid`` sees none."""

    def identity_of(self, user: str) -> Identity | None:
        return {
            "bob": Identity("bob", role="member", grants={"q": "write", "r": "read"}),
            "cid": Identity("cid", role="member", grants={"q": "write"}),
        }.get(user)


@pytest.mark.fast
def test_supersedes_needs_write_on_both_pages_and_a_refusal_changes_nothing(mem):
    mine = remember(mem, "The queue limit is 10.", project="q", user=as_user(mem, "alice"))["path"]
    other = remember(mem, "The tax rate is 5.", project="r", user=as_user(mem, "alice"))["path"]
    before = {p: (mem.wiki_dir / p).read_bytes() for p in (mine, other)}
    mem.scope.directory = Grants()  # type: ignore[assignment]
    with pytest.raises(Forbidden) as exc:
        remember(mem, "The tax rate is 7.", project="q", supersedes=other, user=as_user(mem, "bob"))
    assert "write on project r" in str(exc.value)
    with pytest.raises(NotFound):
        remember(mem, "The tax rate is 8.", project="q", supersedes=other, user=as_user(mem, "cid"))
    with pytest.raises(NotFound):
        remember(mem, "x", project="q", supersedes="no such page", user=as_user(mem, "alice"))
    assert {p: (mem.wiki_dir / p).read_bytes() for p in (mine, other)} == before
    assert len(list((mem.wiki_dir / "projects/q/notes").glob("*.md"))) == 1


@pytest.mark.fast
def test_page_write_supersedes_by_title(mem):
    old = remember(
        mem, "Builds run on ci-1.", project="p", title="Build host", user=as_user(mem, "alice")
    )
    mem.write_page(
        "projects/p/notes/host.md",
        b"---\ntitle: Build host now\n---\nBuilds run on ci-2.\n",
        user="alice",
        message="w",
        who=as_user(mem, "alice"),
        supersedes="Build host",
    )
    assert meta(mem, old["path"])["superseded_by"] == "projects/p/notes/host.md"
    assert meta(mem, "projects/p/notes/host.md")["supersedes"] == old["path"]


@pytest.mark.fast
def test_proposals_retire_nothing_and_a_mention_proposes_nothing(mem):
    a = remember(
        mem,
        "Deploys go through ship.",
        project="p",
        title="Deploy path",
        user=as_user(mem, "alice"),
    )
    b = remember(
        mem,
        "Deploys go through argo.",
        project="p",
        title="Deploy path",
        user=as_user(mem, "alice"),
    )
    assert b["may_supersede"] == [a["path"]]
    assert "state" not in meta(mem, a["path"])
    c = remember(mem, "See Deploy path for how we ship.", project="p", user=as_user(mem, "alice"))
    assert "may_supersede" not in c
    s1 = remember(
        mem, "---\nsubject: db-port\n---\nPort 1.", project="p", user=as_user(mem, "alice")
    )
    s2 = remember(
        mem, "---\nsubject: DB-port\n---\nPort 2.", project="p", user=as_user(mem, "alice")
    )
    assert s2["may_supersede"] == [s1["path"]]
    # confirming retires it
    knowledge.retire(mem, s2["path"], [s1["path"]], as_user(mem, "alice"))
    assert meta(mem, s1["path"])["superseded_by"] == s2["path"]


R1 = "Run `make ship` to deploy; never push to prod by hand."


@pytest.mark.fast
def test_C56_one_memory_per_fact(mem):
    r1 = remember(mem, R1, project="atlas", tags=["deploy"], user=as_user(mem, "alice"))
    r2 = remember(
        mem, R1, project="atlas", tags=["deploy"], user=as_user(mem, "alice"), session_id="s1"
    )
    r3 = remember(mem, R1, project="atlas", user=as_user(mem, "alice"), session_id="s2")
    assert r2["duplicate"] and r3["duplicate"]
    assert (r2["path"], r2["id"], r2["duplicate_of"]) == (r1["path"], r1["id"], r1["path"])
    assert r3["count"] == 3
    notes = mem.wiki_dir / "projects/atlas/notes"
    assert len(list(notes.glob("*.md"))) == 1
    repeats = (mem.settings.data_dir / "use" / "repeats.jsonl").read_text().splitlines()
    assert [json.loads(x)["path"] for x in repeats] == [r1["path"]] * 2
    # CRLF, trailing spaces, no final period: the same fact; new tags merge in
    r4 = remember(
        mem, R1[:-1] + "  \r\n", project="atlas", tags=["ops"], user=as_user(mem, "alice")
    )
    assert r4["duplicate"] and r4["tags_added"] == ["ops"]
    assert meta(mem, r1["path"])["tags"] == ["deploy", "ops"]
    assert parse_page((notes / Path(r1["path"]).name).read_bytes(), "x").body.strip() == R1
    # case is kept: another text
    assert "duplicate" not in remember(mem, R1.upper(), project="atlas", user=as_user(mem, "alice"))
    r5 = remember(
        mem,
        "To deploy, run make ship. Never push to prod by hand.",
        project="atlas",
        user=as_user(mem, "alice"),
    )
    assert r1["path"] in r5["similar"]
    r5b = remember(
        mem,
        "To deploy run make ship; never push to prod by hand!!",
        project="atlas",
        user=as_user(mem, "alice"),
        if_new=True,
    )
    assert r5b["written"] is False and r5b["path"] is None and r5b["similar"]
    r7 = remember(mem, R1.replace("prod", "staging"), project="atlas", user=as_user(mem, "alice"))
    assert "duplicate" not in r7 and r7["path"] != r1["path"]
    r8 = remember(mem, R1, project="borealis", user=as_user(mem, "alice"))
    assert "duplicate" not in r8 and r8["path"].startswith("projects/borealis/notes/")


@pytest.mark.fast
def test_a_superseded_note_is_no_duplicate_target(mem):
    old = remember(mem, "Port is 1.", project="p", user=as_user(mem, "alice"))
    remember(mem, "Port is 2.", project="p", supersedes=old["path"], user=as_user(mem, "alice"))
    again = remember(mem, "Port is 1.", project="p", user=as_user(mem, "alice"))
    assert "duplicate" not in again and again["path"] != old["path"]


@pytest.mark.fast
def test_normalized_and_similarity():
    assert knowledge.normalized("  a b.  \r\nc!  \n") == "a b.\nc"
    assert knowledge.normalized("done.") == "done" and knowledge.normalized("x..") == "x."
    assert knowledge.similarity(R1, "To deploy, run make ship. Never push to prod by hand.") >= (
        knowledge.SIMILAR_AT
    )
    assert knowledge.similarity(R1, R1.replace("prod", "staging")) < knowledge.SIMILAR_AT


def test_cli_remember_supersedes_and_answers_duplicates(tmp_path):
    from clikit import run_cli_here as run_cli

    data = tmp_path / "data"
    # a new install: the first note starts its project (an unknown name alone never does)
    first = run_cli(data, "remember", "Port is 1.", "--project", "p", "--new-project", "--json")
    assert first.returncode == 0, first.stderr
    old = json.loads(first.stdout)["path"]
    second = run_cli(data, "remember", "Port is 2.", "--project", "p", "--supersedes", old)
    assert second.returncode == 0 and f"supersedes: {old}" in second.stdout, second.stdout
    again = run_cli(data, "remember", "Port is 2", "--project", "p")
    assert again.stdout.startswith("already remembered: ") and "(2 times)" in again.stdout
    assert "state: superseded" in (data / "wiki" / old).read_text()


@pytest.mark.fast
@pytest.mark.parametrize("plain", [True, False])
def test_in_the_tail_a_superseded_page_comes_after_every_other_match(tmp_path, monkeypatch, plain):
    from wiki_memory.recall import rank

    for name, value in (("FULL_RANK", 0), ("POOL", 1), ("TEXT_LIMIT", 1), ("OTHER_LIMIT", 1)):
        monkeypatch.setattr(rank, name, value)
    # the pool (one section) takes one of the f pages; the other ones, the old page and
    # the new one are the tail, where by bm25 alone the old page comes before the new one
    files = {f"notes/f{i}.md": f"# F{i}\n\n{'okapi ' * 6}{i}\n" for i in range(4)}
    files["notes/old.md"] = (
        "---\nstate: superseded\nsuperseded_by: notes/new.md\n---\nokapi okapi x\n"
    )
    files["notes/new.md"] = "# New\n\nthe okapi value, long text here and more words to dilute it\n"
    m = make_memory(tmp_path / "data", files=files)
    try:
        found = rank.ranked(m._sources, "okapi", who=as_user(m, "alice"), plain=plain)
        got = [found.item(i)["path"] for i in range(len(found))]
        pool = [c.path for c in found._cands]
        assert "notes/old.md" not in pool and "notes/new.md" not in pool, pool
        assert "notes/old.md" in got and "notes/new.md" in got, got
        assert got.index("notes/new.md") < got.index("notes/old.md"), got
    finally:
        m.stop()
