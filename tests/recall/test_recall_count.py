"""Recall's count of the matches after the pool, taken from FTS5 alone for the
sections outside ``sections_apart``, is the count the plain path gives, for every kind of
section the rule sets apart and for every kind of caller.

The corpus holds every case :data:`wiki_memory.index.schema.APART_SQL` names beside
ordinary shared pages: pages in ``people/<user>/`` and pages marked ``visibility:
personal`` (of alice, of bob, with no user), pages whose ``state`` hides them (in any
case and spacing) or does not (``current``, a state that is not text), pages that repeat a
heading, and compiled session pages whose last timeline entry is its bare head line
(``session end``). Each caller (the owner, a member, a reader of one project, an
anonymous caller, the server) walks every page of the reply from cursor 0 on both paths;
the counts are also compared with the count that joins every match with its rows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import apsw
import pytest
from support import as_user, make_memory, wait_for

from wiki_memory.core.memory import Memory
from wiki_memory.core.recaller import Recaller
from wiki_memory.identity import Identity
from wiki_memory.index import signals, tail
from wiki_memory.recall import rank

STATES = ["forgotten", "superseded", " Forgotten ", "SUPERSEDED", "current", "[forgotten]"]


def _page(title: str, body: str, meta: dict[str, str] | None = None) -> str:
    head = [f"title: {title}", *(f"{k}: {v}" for k, v in (meta or {}).items())]
    return "---\n" + "\n".join(head) + "\n---\n" + body


def _files() -> dict[str, str]:
    files: dict[str, str] = {}
    for i in range(120):
        project = f"p{i % 3}"
        body = (
            f"# Zebra {i}\n\n## Stripes\n\nzebra stripes {i} in the meadow\n\n## Other\n\nplain\n"
        )
        files[f"projects/{project}/notes/z{i:03d}.md"] = _page(f"Zebra {i}", body)
    for user in ("alice", "bob"):
        for i in range(6):
            files[f"people/{user}/z{i}.md"] = _page(f"{user} {i}", f"# Z\n\nzebra of {user} {i}\n")
    for i, who in enumerate(["alice", "bob", ""]):
        meta = {"visibility": "personal", **({"user": who} if who else {})}
        files[f"projects/p0/personal-{i}.md"] = _page(f"P {i}", "zebra personal note\n", meta)
    for i, state in enumerate(STATES):
        files[f"projects/p1/state-{i}.md"] = _page(
            f"S {i}", f"# S\n\n## Part\n\nzebra in state {i}\n", {"state": state}
        )
    for i in range(4):
        files[f"projects/p2/repeat-{i}.md"] = _page(
            f"R {i}", f"# R\n\n## Notes\n\nzebra one {i}\n\n## Notes\n\nzebra two {i}\n"
        )
    return files


def _events(session: str, project: str, seed: int) -> list[dict[str, Any]]:
    base = 1_780_000_000 + seed * 1000
    out: list[dict[str, Any]] = [
        {
            "harness": "chat",
            "event": "UserPromptSubmit",
            "session_id": session,
            "project": project,
            "ts": base + t,
            "payload": {"prompt": f"zebra session talk {t} of {seed} until the end"},
        }
        for t in range(4)
    ]
    out.append(
        {
            "harness": "chat",
            "event": "SessionEnd",
            "session_id": session,
            "project": project,
            "ts": base + 10,
        }
    )
    return out


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = make_memory(tmp_path_factory.mktemp("count") / "data", files=_files())
    m.capture([e for k in range(3) for e in _events(f"s{k}", f"p{k}", k)], as_user(m, "alice"))
    wait_for(lambda: len(m.list_pages(kind="session")) == 3, 30, "3 session pages compiled")
    yield m
    m.stop()


@pytest.fixture(autouse=True)
def _pool_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """This corpus is smaller than :data:`rank.FULL_RANK` matches: rank a pool anyway."""
    monkeypatch.setattr(rank, "FULL_RANK", 0)


CALLERS: list[Any] = [
    Identity("alice", role="owner"),  # the owner
    Identity("bob", role="member"),  # every project, his own personal pages
    Identity("carol", role="member", grants={"p1": "read"}),  # one project
    None,  # anonymous: shared pages only
]


def _walk(m: Memory, plain: bool, query: str, user: Any) -> list[dict[str, Any]]:
    r = Recaller(m._sources, m.scope, replace(m.settings, recall_plain=plain), m.audit_read)
    pages, cursor = [], 0
    while True:
        res = r.recall(query, budget_tokens=1500, cursor=cursor, user=user).to_json()
        pages.append(res)
        if res["next_cursor"] is None:
            return pages
        cursor = res["next_cursor"]


def _apart(m: Memory) -> set[str]:
    conn = m.index._conn()
    rows = conn.execute(
        "SELECT s.path FROM sections_apart AS a JOIN sections AS s ON s.rowid = a.rowid"
    ).fetchall()
    return {r[0] for r in rows}


def test_the_corpus_sets_every_kind_apart(mem: Memory) -> None:
    """The comparisons below mean something: each kind of section is in the table, and
    no ordinary note is."""
    paths = _apart(mem)
    assert {f"people/{u}/z0.md" for u in ("alice", "bob")} <= paths
    assert {f"projects/p0/personal-{i}.md" for i in range(3)} <= paths
    gone = {i for i, s in enumerate(STATES) if s.strip().lower() == "forgotten"}
    assert {f"projects/p1/state-{i}.md" for i in range(len(STATES)) if i not in gone} <= paths
    # a forgotten page keeps no section in the index (its words left it): none set apart
    assert gone and not {f"projects/p1/state-{i}.md" for i in gone} & paths
    assert {f"projects/p2/repeat-{i}.md" for i in range(4)} <= paths
    assert any(p.startswith("projects/") and "/sessions/" in p for p in paths), paths
    assert not any("/notes/z" in p for p in paths)


@pytest.mark.parametrize("user", CALLERS, ids=["owner", "member", "reader-p1", "anonymous"])
@pytest.mark.parametrize("query", ["zebra", "zebra stripes meadow", "session end"])
def test_every_caller_gets_the_plain_count(mem: Memory, user: Any, query: str) -> None:
    fast, plain = _walk(mem, False, query, user), _walk(mem, True, query, user)
    assert fast == plain
    ids = [i["id"] for p in fast for i in p["items"]]
    assert len(ids) == len(set(ids)) == fast[0]["total"] > 0


def _counts(mem: Memory, query: str, who: Identity | None, upto: int | None) -> list[int]:
    """count_own by FTS5 alone beside count_own joining every match, with a pool left out."""
    found = rank.ranked(mem._sources, query, who=who)
    ranker = found._ranker
    assert ranker is not None and ranker.pooled
    pool = {(c.hit.path, c.hit.anchor) for c in ranker.cands.values() if c.hit is not None}
    out = []
    for plain in (False, True):  # plain: every match joined with its rows
        scope = ranker.scope
        assert scope.every_shared
        out.append(
            tail.count_own(mem.index, ranker.or_match, scope, ranker.cols, pool, plain=plain)
        )
        out.append(
            tail.count_own(
                mem.index, ranker.or_match, scope, ranker.cols, (), upto=upto, plain=plain
            )
        )
    return out


@pytest.mark.parametrize("upto", [1, 50, 10_000])
@pytest.mark.parametrize("who", [None, Identity("bob", role="member")], ids=["server", "member"])
@pytest.mark.parametrize("query", ["zebra", "session end"])
def test_the_fts5_count_is_the_joined_count(
    mem: Memory, who: Identity | None, upto: int, query: str
) -> None:
    """Also where the walk above cannot tell: a count too high by bare timeline heads
    would only end the reply early (the tail read finds fewer rows than counted)."""
    fast_keys, fast_upto, joined_keys, joined_upto = _counts(mem, query, who, upto)
    assert (fast_keys, fast_upto) == (joined_keys, joined_upto)
    assert fast_upto <= upto and fast_keys >= 0


def _set(m: Memory, rel: str, text: str) -> None:
    (m.settings.wiki_dir / rel).write_text(text, encoding="utf-8")
    m.index.sync_paths(m.settings.wiki_dir, [rel])


def test_an_edit_or_delete_moves_a_page_in_and_out(tmp_path: Any) -> None:
    """A note that gains a hiding state, loses it, and is deleted: the count follows each
    change on both paths, and no rowid of a removed section stays in the table."""
    files = {f"n{i:02d}.md": f"# N{i}\n\nyak words {i}\n" for i in range(130)}
    m = make_memory(tmp_path / "data", files=files)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rank, "FULL_RANK", 0)

            def totals() -> list[int]:
                return [
                    _walk(m, plain, "yak", as_user(m, "alice"))[0]["total"]
                    for plain in (False, True)
                ]

            assert totals() == [130, 130]
            _set(m, "n05.md", "---\nstate: forgotten\n---\n# N5\n\nyak words 5\n")
            assert totals() == [129, 129]
            _set(m, "n05.md", "# N5\n\nyak words 5\n")
            assert totals() == [130, 130]
            (m.settings.wiki_dir / "n06.md").unlink()
            m.index.sync_paths(m.settings.wiki_dir, ["n06.md"])
            assert totals() == [129, 129]
        conn: apsw.Connection = m.index._conn()
        stale = conn.execute(
            "SELECT count(*) FROM sections_apart WHERE rowid NOT IN (SELECT rowid FROM sections)"
        ).fetchall()
        assert stale[0][0] == 0
    finally:
        m.stop()


def test_a_count_is_one_snapshot_while_pages_change(tmp_path: Any) -> None:
    """A writer adds and removes ``state: current`` on 20 of 130 matching notes (each
    version matches, so the wiki always holds 130) while the count runs 3,000 times: every
    count is 130. The two parts of the count (the sections set apart, the others) once ran
    as two statements, and a page that moved between them in between was counted twice or
    not at all (counts of 110 and 150 were seen)."""
    files = {f"n{i:03d}.md": f"# N{i}\n\nyak words {i}\n" for i in range(130)}
    m = make_memory(tmp_path / "data", files=files)
    wiki = m.settings.wiki_dir
    stop = threading.Event()

    def writer() -> None:
        k = 0
        rels = [f"n{i:03d}.md" for i in range(20)]
        while not stop.is_set():
            head = "---\nstate: current\n---\n" if k % 2 == 0 else ""
            for i, rel in enumerate(rels):
                (wiki / rel).write_text(f"{head}# N{i}\n\nyak words {i}\n", encoding="utf-8")
            m.index.sync_paths(wiki, rels)
            k += 1

    t = threading.Thread(target=writer)
    t.start()
    seen: dict[int, int] = {}
    try:
        scope = signals.Scope(who=None)  # the server: every shared page, the FTS5 count
        assert scope.every_shared
        for _ in range(3000):
            n = tail.count_own(m.index, '"yak"', scope)
            seen[n] = seen.get(n, 0) + 1
    finally:
        stop.set()
        t.join()
        m.stop()
    assert set(seen) == {130}, f"counts seen (value: times): {seen}"
