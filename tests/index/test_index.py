"""The search index: folding, CJK, identifiers, safe queries, rebuild-and-swap, concurrency.

Real apsw databases in tmp_path; pages are written as files and indexed from there.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import apsw
import pytest

from tests.conftest import shared_path
from wiki_memory.index.files import read_file as store_read
from wiki_memory.index.query import build_match, query_terms
from wiki_memory.index.store import Index, SearchError, is_indexable
from wiki_memory.index.text import (
    cjk_bigrams,
    fold,
    identifier_expansions,
    index_text,
    split_identifiers,
)

# --- helpers ---------------------------------------------------------------------------


def write_page(wiki: Path, rel: str, body: str, **meta: str) -> Path:
    path = wiki / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    front = "".join(f"{k}: {v}\n" for k, v in meta.items())
    path.write_text(f"---\n{front}---\n{body}\n" if meta else body + "\n", encoding="utf-8")
    return path


def stems(hits: list) -> list[str]:
    return [h.path.rsplit("/", 1)[-1].removesuffix(".md") for h in hits]


def read_case(name: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Pages (name → body) and (query, expected) pairs of a case input file."""
    text = shared_path("cases", "inputs", name).read_text(encoding="utf-8")
    head, _, tail = text.partition("QUERIES")
    pages = {}
    for line in head.splitlines()[1:]:
        if "|" in line:
            n, b = line.split("|", 1)
            pages[n.strip()] = b.strip()
    queries = []
    for line in tail.splitlines()[1:]:
        if "->" in line:
            q, expected = line.split("->", 1)
            q = q.strip()
            queries.append(("" if q == "<empty string>" else q, expected.split()[0]))
    return pages, queries


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    w = tmp_path / "wiki"
    w.mkdir()
    return w


@pytest.fixture
def index(tmp_path: Path):
    ix = Index(tmp_path / "index.db")
    yield ix
    ix.close()


def case_index(wiki: Path, index: Index, name: str) -> list[tuple[str, str]]:
    pages, queries = read_case(name)
    for n, body in pages.items():
        write_page(wiki, f"projects/demo/notes/{n}.md", body, type="note", title=n)
    assert index.rebuild(wiki) == len(pages)
    return queries


# --- C15: user text never reaches MATCH raw ------------------------------------------------


def test_c15_every_query_finds_its_page(wiki: Path, index: Index) -> None:
    queries = case_index(wiki, index, "C15.txt")
    assert len(queries) == 18
    for q, expected in queries:
        if expected == "(no":
            assert build_match(q) is None, q
            assert index.query(q) == [], q
            assert index.query(q, mode="or") == [], q
            continue
        for mode in ("and", "or", "auto"):
            hits = index.query(q, mode=mode)  # type: ignore[arg-type]
            assert expected in stems(hits), (q, mode, build_match(q))


def test_c15_raw_queries_would_fail_and_errors_are_not_empty(wiki: Path, index: Index) -> None:
    queries = case_index(wiki, index, "C15.txt")
    raw_failures = 0
    for q, _ in queries:
        try:
            index.search(q)
        except SearchError:
            raw_failures += 1
    assert raw_failures >= 10  # most of them break FTS5 when passed raw
    with pytest.raises(SearchError):
        index.search('NEAR(a b "')
    # An engine failure inside a normal query is an error, never zero hits.
    index._conn().execute("DROP TABLE fts")
    with pytest.raises(SearchError):
        index.query("rollback")


def test_build_match_only_emits_safe_grammar() -> None:
    nasty = ['"', '""', "a\x00b", "NEAR(", "col:x", "^start", "a*", "-x", "+y", "(", ")", "{a b}"]
    for q in nasty:
        m = build_match(q)
        if m is not None:
            apsw_conn = apsw.Connection(":memory:")
            apsw_conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            apsw_conn.execute("SELECT * FROM t WHERE t MATCH ?", (m,)).fetchall()
    assert build_match("what did we decide about the cache") == '"decide" AND "cache"'
    assert build_match("the") == '"the"'  # stop words alone still search
    assert query_terms("x " * 100).count('"x"') == 1
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 32
    with pytest.raises(ValueError):
        build_match("x", "xor")  # type: ignore[arg-type]


# --- C16: CJK -----------------------------------------------------------------------------


def test_c16_cjk_queries_find_their_page(wiki: Path, index: Index) -> None:
    queries = case_index(wiki, index, "C16.txt")
    assert len(queries) == 8
    for q, expected in queries:
        assert expected in stems(index.query(q)), (q, build_match(q))
    # One CJK character is a prefix query on the bigrams.
    assert "cn" in stems(index.query("孤"))


def test_c16_neither_unicode61_nor_trigram_alone_passes() -> None:
    pages, queries = read_case("C16.txt")
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE u USING fts5(name, body, tokenize='unicode61')")
    db.execute("CREATE VIRTUAL TABLE g USING fts5(name, body, tokenize='trigram')")
    for n, body in pages.items():
        db.execute("INSERT INTO u VALUES (?, ?)", (n, body))
        db.execute("INSERT INTO g VALUES (?, ?)", (n, body))

    def misses(table: str) -> set[str]:
        out = set()
        for q, expected in queries:
            match = " AND ".join('"' + w.replace('"', '""') + '"' for w in q.split())
            got = {
                r[0] for r in db.execute(f"SELECT name FROM {table} WHERE body MATCH ?", (match,))
            }
            if expected not in got:
                out.add(q)
        return out

    u, g = misses("u"), misses("g")
    print(f"\nC16 misses: unicode61 {sorted(u)}; trigram {sorted(g)}")
    assert {"孤立", "大阪", "孤立引用", "統合計画", "ledger"} <= u
    assert {"孤立", "大阪", "배포", "검토 회의"} <= g  # trigram needs 3 characters


def test_cjk_bigrams_and_glued_ascii() -> None:
    assert cjk_bigrams("大阪拠点").split() == ["大阪", "阪拠", "拠点"]
    assert cjk_bigrams("a孤b").split() == ["a", "孤", "b"]
    tokens = index_text("修复sync-ledger后孤立").split()
    assert tokens[:4] == ["修复", "sync-ledger", "后孤", "孤立"]
    assert "syncledger" in index_text("修复sync-ledger后孤立")
    assert cjk_bigrams("plain ascii") == "plain ascii"


# --- folding, scripts -----------------------------------------------------------------------


def test_fold_unit() -> None:
    assert fold("Łódź Straße café Æsir Ørsted œuvre þorn ıi đa") == (
        "Lodz Strasse cafe AEsir Orsted oeuvre thorn ii da"
    )
    assert fold("cafe\u0301") == "cafe"  # decomposed input
    assert fold("Привет") == "Привет" and fold("йод") == "йод" and fold("ёлка") == "елка"
    assert fold("مَرْحَبًا") == "مرحبا"  # harakat removed, letters kept
    assert fold("ＡＢＣ ﬁle") == "ABC file"
    assert fold("don’t") == "don't"
    assert fold("大阪 배포") == "大阪 배포"


def test_diacritics_both_ways_cyrillic_arabic(wiki: Path, index: Index) -> None:
    write_page(wiki, "notes/lodz.md", "Office in Łódź near the Straße")
    write_page(wiki, "notes/cafe.md", "Meet at the café after standup")
    write_page(wiki, "notes/plain.md", "The cafe menu and the strasse map")
    write_page(wiki, "notes/ru.md", "Привет, мир! Сервер собирает наблюдения.")
    write_page(wiki, "notes/ar.md", "مَرْحَبًا بِالْعَالَمِ")
    write_page(wiki, "notes/ar2.md", "كتاب جديد")
    index.sync_paths(wiki, [""])
    assert "lodz" in stems(index.query("lodz"))
    assert "lodz" in stems(index.query("ŁÓDŹ"))
    assert {"lodz", "plain"} <= set(stems(index.query("strasse")))
    assert {"lodz", "plain"} <= set(stems(index.query("Straße")))
    assert {"cafe", "plain"} <= set(stems(index.query("cafe")))
    assert {"cafe", "plain"} <= set(stems(index.query("café")))
    assert stems(index.query("привет")) == ["ru"]
    assert stems(index.query("НАБЛЮДЕНИЯ")) == ["ru"]
    assert stems(index.query("مرحبا")) == ["ar"]
    assert stems(index.query("كِتَاب")) == ["ar2"]


# --- code identifiers -------------------------------------------------------------------------

IDENT_PAGES = {
    "file": "The failing test lives in tests/test_app.py since Monday.",
    "snake": "Rename the flag to max_retry_count everywhere.",
    "camel": "The helper getUserName returns None for bots.",
    "pascal": "HTTPServerError is raised when the CamelCaseThing breaks.",
    "dotted": "Storage lives in wiki_memory.index.store for now.",
    "code": "pylint reports E1101 on the proxy object.",
    "errno": "Clients saw ERR_CONN_RESET during the deploy.",
    "kebab": "Set the kebab-case-option in the config.",
    "joined": "The replica is readonly until the failover.",
}

IDENT_QUERIES = [
    ("test_app.py", "file"),
    ("app", "file"),
    ("test_app", "file"),
    ("max_retry_count", "snake"),
    ("retry count", "snake"),
    ("maxretrycount", "snake"),
    ("MaxRetryCount", "snake"),
    ("getUserName", "camel"),
    ("user name", "camel"),
    ("UserName", "camel"),
    ("getusername", "camel"),
    ("get_user_name", "camel"),
    ("HTTPServerError", "pascal"),
    ("server error", "pascal"),
    ("CamelCase", "pascal"),
    ("wiki_memory.index.store", "dotted"),
    ("index.store", "dotted"),
    ("store", "dotted"),
    ("E1101", "code"),
    ("e1101", "code"),
    ("1101", "code"),
    ("ERR_CONN_RESET", "errno"),
    ("conn reset", "errno"),
    ("ErrConnReset", "errno"),
    ("kebab-case-option", "kebab"),
    ("kebabcaseoption", "kebab"),
    ("read-only", "joined"),
    ("read_only", "joined"),
]


def test_code_identifiers(wiki: Path, index: Index) -> None:
    for name, body in IDENT_PAGES.items():
        write_page(wiki, f"notes/{name}.md", body)
    index.rebuild(wiki)
    for q, expected in IDENT_QUERIES:
        assert expected in stems(index.query(q, mode="and")), (q, build_match(q))


def test_identifier_text_unit() -> None:
    ex = identifier_expansions("call getUserName in test_app.py: E1101, ERR_CONN_RESET, HTTPServer")
    assert "get User Name" in ex and "testapppy" in ex and "E 1101" in ex
    assert "ERRCONNRESET" in ex and "HTTP Server" in ex
    assert identifier_expansions("plain prose with Title and UPPER words") == []
    assert split_identifiers("getUserName x_y") == "get User Name x y"


def test_identifier_word_cache_keeps_no_long_words() -> None:
    """Pages full of base64 data URIs must not leave hundreds of MB in the word cache."""
    from wiki_memory.index import text as text_mod

    rng = random.Random(3)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    blobs = ["data:image/png;base64," + "".join(rng.choices(alphabet, k=20_000)) for _ in range(40)]
    for blob in blobs:
        ex = identifier_expansions(f"see {blob} and getUserName")
        assert "get User Name" in ex  # still expanded, every time
    cached = list(text_mod._WORD_IDS) + list(text_mod._PLAIN_WORDS)
    assert not any(b in cached for b in blobs)
    assert "getUserName" in cached  # short words are


# --- rebuild, incremental, files -------------------------------------------------------------


def _random_page(rng: random.Random, i: int) -> str:
    words = "deploy cache rollback latency session recall budget handoff claim watcher".split()
    lines = [f"# Page {i}", "", " ".join(rng.choice(words) for _ in range(30)), ""]
    for h in range(rng.randint(0, 3)):
        lines += [f"## Part {h}", "", " ".join(rng.choice(words) for _ in range(20)), ""]
    lines += [f"See [[Page {rng.randint(0, 50)}]] and #tag{i % 5}. Block ^b{i}"]
    return "\n".join(lines)


def test_rebuild_equals_incremental(tmp_path: Path, wiki: Path) -> None:
    rng = random.Random(7)
    inc = Index(tmp_path / "inc.db")
    for i in range(60):
        rel = f"projects/p{i % 3}/notes/n{i}.md"
        write_page(wiki, rel, _random_page(rng, i), type="note", title=f"Page {i}")
        inc.upsert_page(rel, (wiki / rel).read_bytes(), os.stat(wiki / rel).st_mtime)
    # Edits, deletes, a directory removal and a rename, applied through sync_paths.
    for i in range(0, 60, 7):
        rel = f"projects/p{i % 3}/notes/n{i}.md"
        write_page(wiki, rel, _random_page(rng, 1000 + i), type="note")
    (wiki / "projects/p0/notes/n3.md").unlink()
    os.rename(wiki / "projects/p1", wiki / "projects/moved")
    inc.sync_paths(
        wiki,
        [f"projects/p{i % 3}/notes/n{i}.md" for i in range(0, 60, 7)]
        + ["projects/p0/notes/n3.md", "projects/p1", "projects/moved"],
    )
    # The same page bytes again: no work.
    rel = "projects/p2/notes/n2.md"
    assert inc.upsert_page(rel, (wiki / rel).read_bytes()) is False

    full = Index(tmp_path / "full.db")
    n = full.rebuild(wiki)
    assert n == len(list(wiki.rglob("*.md")))
    assert inc.rows() == full.rows()
    assert inc.paths() == full.paths()
    assert not any(p.startswith("projects/p1/") for p in inc.paths())
    for q in ("deploy cache", "rollback", "Page 12", "tag3"):
        a, b = inc.query(q), full.query(q)
        assert [(h.path, h.anchor) for h in a] == [(h.path, h.anchor) for h in b], q
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-9), q
    # Rebuilding the incremental index in place gives the same rows too.
    inc.rebuild(wiki)
    assert inc.rows() == full.rows()
    assert not Path(f"{tmp_path / 'inc.db'}.new").exists()
    inc.close()
    full.close()


def test_sync_paths_ignores_temp_files_git_and_symlinks(tmp_path: Path, wiki: Path) -> None:
    write_page(wiki, "notes/daily.md", "newword in the daily note")
    junk = [
        "notes/4913",
        "notes/daily.md~",
        "notes/.daily.md.swp",
        "notes/daily.md___jb_tmp___",
        "notes/daily.md___jb_old___",
        "notes/.#daily.md",
        "notes/#daily.md#",
        "notes/.daily.md.wm-tmp-1234",
        ".git/COMMIT_EDITMSG.md",
        ".obsidian/workspace.md",
        ".trash/old.md",
        ".hidden.md",
    ]
    for rel in junk:
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("newword junk\n")
    outside = tmp_path / "outside.md"
    outside.write_text("newword outside\n")
    os.symlink(outside, wiki / "notes/link.md")
    os.symlink(tmp_path, wiki / "linkdir")
    os.symlink(wiki / "gone.md", wiki / "notes/dangling.md")  # a dangling lock-like link
    ix = Index(tmp_path / "index.db")
    ix.sync_paths(wiki, ["notes/daily.md", *junk, "notes/link.md", "linkdir", "notes/dangling.md"])
    assert set(ix.paths()) == {"notes/daily.md"}
    ix.sync_paths(wiki, [""])
    assert set(ix.paths()) == {"notes/daily.md"}
    assert ix.rebuild(wiki) == 1
    assert stems(ix.query("newword")) == ["daily"]
    # Absolute paths from a watcher work too; a deleted file leaves the index.
    (wiki / "notes/daily.md").unlink()
    ix.sync_paths(wiki, [str(wiki / "notes/daily.md")])
    assert ix.paths() == {}
    for rel in ["notes/daily.md", "projects/x/notes/a b.md", "a.md"]:
        assert is_indexable(rel), rel
    for rel in [*junk, "notes/x.txt", "../x.md", "/abs.md", "notes/.x.md", ""]:
        assert not is_indexable(rel), rel
    ix.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_named_like_a_page_never_blocks_indexing(tmp_path: Path, wiki: Path) -> None:
    """Opening a FIFO for reading waits for a writer; the indexer must not (it would
    stop the watcher and every later sync)."""
    write_page(wiki, "notes/real.md", "pipeword in a real page")
    os.mkfifo(wiki / "notes/pipe.md")
    ix = Index(tmp_path / "index.db")
    done: list[int] = []

    def run() -> None:
        # the file may become a FIFO between the directory scan and the read
        assert store_read(wiki / "notes/pipe.md") is None
        ix.sync_paths(wiki, ["notes/pipe.md", "notes/real.md"])
        ix.sync_paths(wiki, [""])
        done.append(ix.rebuild(wiki))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # unblock the reader so the test process can end
        fd = os.open(wiki / "notes/pipe.md", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    assert done == [1], "indexing blocked on a FIFO"  # (or failed: see the thread's error)
    assert set(ix.paths()) == {"notes/real.md"}
    ix.close()


def test_page_rows_links_and_filters(wiki: Path, index: Index) -> None:
    write_page(
        wiki,
        "projects/alpha/notes/deploy-guide.md",
        "# Deploy Guide\n\nRollback steps for the gateway.\n\n## Escalation\n\nCall the oncall.",
        type="note",
        title="Deploy Guide",
        id="note-1",
        updated="2024-05-02T10:00:00",
        aliases="[DG]",
        tags="[ops, release]",
    )
    write_page(
        wiki,
        "projects/alpha/sessions/s1.md",
        "Worked on the gateway. See [[Deploy Guide#Escalation]] and [[dg|the guide]].",
        type="session",
        title="Session one",
    )
    write_page(wiki, "people/ann/profile.md", "Ann prefers the gateway dashboards.")
    index.sync_paths(wiki, [""])
    meta = index.page_meta("projects/alpha/notes/deploy-guide.md")
    assert meta is not None
    assert (meta["id"], meta["kind"], meta["project"], meta["title"]) == (
        "note-1",
        "note",
        "alpha",
        "Deploy Guide",
    )
    assert meta["tags"] == ["ops", "release"] and meta["aliases"] == ["DG"]
    assert index.page_meta("people/ann/profile.md")["kind"] == "page"  # type: ignore[index]
    assert index.page_meta("people/ann/profile.md")["project"] is None  # type: ignore[index]
    assert [s["anchor"] for s in index.sections_of("projects/alpha/notes/deploy-guide.md")][
        -1
    ] == "Escalation"
    links = index.links_from("projects/alpha/sessions/s1.md")
    assert [(lk["target"], lk["fragment"]) for lk in links] == [
        ("Deploy Guide", "Escalation"),
        ("dg", None),
    ]
    back = index.links_to("projects/alpha/notes/deploy-guide.md")
    assert [b["src_path"] for b in back] == ["projects/alpha/sessions/s1.md"] * 2
    assert len(index.links_to("deploy guide")) == 2
    assert index.links_to("Deploy") == []  # exact names only
    # Filters apply before ranking: the title match is in another project.
    hits = index.query("gateway", project="alpha", kinds=["session"], limit=1)
    assert stems(hits) == ["s1"]
    assert stems(index.query("rollback gateway", kinds=["note"])) == ["deploy-guide"]
    assert index.query("gateway", kinds=[]) == []
    assert "profile" in stems(index.query("gateway"))
    assert "profile" not in stems(index.query("gateway", exclude_dirs=["people/ann"]))
    assert "profile" in stems(index.query("gateway", exclude_dirs=["people/an"]))
    hit = index.query("Deploy Guide")[0]
    assert hit.title == "Deploy Guide" and hit.updated == "2024-05-02T10:00:00" and hit.score > 0
    assert [p["path"] for p in index.list_pages(project="alpha", kind="session")] == [
        "projects/alpha/sessions/s1.md"
    ]
    assert len(index.list_pages(limit=2)) == 2 and len(index.list_pages(offset=2)) == 1
    assert [p["path"] for p in index.list_pages(since="2024-05-02")][0].startswith("p")


def test_scope_filter_cannot_be_crowded_out(wiki: Path, index: Index) -> None:
    for i in range(80):
        write_page(wiki, f"projects/big/notes/n{i}.md", "quota quota quota", title=f"quota {i}")
    write_page(wiki, "projects/small/notes/one.md", "a long page that mentions quota once " * 5)
    index.rebuild(wiki)
    assert stems(index.query("quota", project="small", limit=3)) == ["one"]


def test_auto_mode_falls_back_to_or(wiki: Path, index: Index) -> None:
    write_page(wiki, "notes/a.md", "alpha only")
    write_page(wiki, "notes/b.md", "zeta only")
    write_page(wiki, "notes/c.md", "alpha and zeta")
    index.rebuild(wiki)
    assert stems(index.query("alpha zeta", mode="and")) == ["c"]
    auto = stems(index.query("alpha zeta", limit=50))
    assert auto[0] == "c" and set(auto) == {"a", "b", "c"}
    assert set(stems(index.query("alpha zeta", mode="or"))) == {"a", "b", "c"}


def test_spool_search_and_rebuild_keeps_it(wiki: Path, index: Index) -> None:
    rows = [
        {
            "session_key": "claude:s1",
            "obs_id": f"o{i}",
            "project": "alpha" if i % 2 else "beta",
            "harness": "claude",
            "session_id": "s1",
            "user": "ann",
            "ts": f"2024-05-01T10:0{i}:00Z",
            "text": f"ran pytest on test_app.py attempt {i}",
        }
        for i in range(4)
    ]
    assert index.add_spool(rows) == 4
    assert index.add_spool(rows[:1]) == 1  # same key replaces
    hits = index.query_spool("test_app.py", project="alpha")
    assert {h.obs_id for h in hits} == {"o1", "o3"} and all(h.score > 0 for h in hits)
    write_page(wiki, "notes/x.md", "something")
    index.rebuild(wiki)
    assert len(index.query_spool("pytest")) == 4
    assert index.delete_spool_session("claude:s1") == 4
    assert index.query_spool("pytest") == []
    index.replace_spool(rows[:2])
    assert len(index.query_spool("pytest")) == 2
    with pytest.raises(SearchError):
        index.search_spool("AND AND")


def test_schema_version_mismatch_and_damaged_file(tmp_path: Path, wiki: Path) -> None:
    write_page(wiki, "notes/a.md", "hello")
    db = tmp_path / "index.db"
    ix = Index(db)
    assert ix.needs_rebuild  # a new file is empty
    ix.rebuild(wiki)
    assert not ix.needs_rebuild
    ix.close()
    conn = apsw.Connection(str(db))
    conn.pragma("user_version", 999)
    conn.close()
    ix = Index(db)
    assert ix.needs_rebuild and ix.count_pages() == 0
    ix.rebuild(wiki)
    assert ix.count_pages() == 1
    ix.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    ix = Index(db)
    assert ix.needs_rebuild
    ix.rebuild(wiki)
    assert stems(ix.query("hello")) == ["a"]
    # Deleting index.db under a running index: the next call reopens a fresh file.
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    assert ix.query("hello") == []
    ix.rebuild(wiki)
    assert stems(ix.query("hello")) == ["a"]
    ix.close()


# --- C38-ish: rebuild while others search --------------------------------------------------------

SECOND_PROCESS = textwrap.dedent(
    """
    import sys, time
    from wiki_memory.index.store import Index
    ix = Index(sys.argv[1])
    deadline = time.monotonic() + float(sys.argv[2])
    n = empty = 0
    while time.monotonic() < deadline:
        hits = ix.query("getUserName3 gateway", limit=10)
        time.sleep(0.005)
        n += 1
        empty += not hits
    print(n, empty)
    sys.exit(1 if empty or n == 0 else 0)
    """
)


@pytest.mark.process
def test_rebuild_while_searching(tmp_path: Path, wiki: Path) -> None:
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    words += "deploy cache rollback session recall budget handoff claim watcher".split() * 50
    for i in range(2000):
        body = "\n\n".join(
            [
                f"# Page {i}",
                " ".join(rng.choice(words) for _ in range(60)) + " gateway latency",
                "## Details",
                f"Call getUserName{i % 10} in test_app.py; see [[Page {i // 2}]] #tag{i % 7}.",
                "## Notes",
                " ".join(rng.choice(words) for _ in range(40)),
            ]
        )
        write_page(wiki, f"projects/p{i % 4}/notes/n{i}.md", body, type="note", id=f"n{i}")
    db = tmp_path / "index.db"
    ix = Index(db)
    n = ix.rebuild(wiki)
    assert n == 2000

    errors: list[str] = []
    empties: list[str] = []
    answered = [0]
    stop = threading.Event()

    def searcher() -> None:
        while not stop.is_set():
            q = rng.choice(["gateway", "rollback cache", "getUserName3", "test_app.py", "page 7"])
            try:
                hits = ix.query(q, limit=20)
            except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                errors.append(repr(exc))
                continue
            answered[0] += 1
            if not hits:
                empties.append(q)
            time.sleep(0.01)  # a client, not a busy loop

    written: list[str] = []

    def writer() -> None:
        for k in range(20):
            rel = f"projects/p9/notes/new{k}.md"
            write_page(wiki, rel, f"freshword{k} written during the reindex", type="note")
            try:
                ix.sync_paths(wiki, [rel])
                written.append(rel)
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))
            time.sleep(0.01)

    other = subprocess.Popen(
        [sys.executable, "-c", SECOND_PROCESS, str(db), "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    threads = [threading.Thread(target=searcher) for _ in range(4)]
    for th in threads:
        th.start()
    w = threading.Thread(target=writer)
    time.sleep(0.2)
    w.start()
    rebuilds = 0
    while other.poll() is None or rebuilds < 1:
        ix.rebuild(wiki)
        rebuilds += 1
    w.join()
    stop.set()
    for th in threads:
        th.join()
    out, err = other.communicate(timeout=60)

    assert not errors, errors[:3]
    assert not empties, empties[:3]
    assert other.returncode == 0, (out, err)
    assert "locked" not in err.lower() and "busy" not in err.lower()
    assert len(written) == 20
    for k in range(20):
        assert stems(ix.query(f"freshword{k}")) == [f"new{k}"], k
    assert answered[0] > 0  # the searchers really searched during the rebuilds
    # How fast: bench/index.py (rebuild pages/s; query latency quiet and during rebuilds).
    ix.close()


def test_a_pages_lang_counts_for_the_next_query(wiki: Path, index: Index) -> None:
    """A page that names its ``lang`` adds that stemmer to the queries from the next
    recall on (no wait), and the lookup reads only the pages that name one (the partial
    index ``pages_lang``), not every page's frontmatter: it runs on every recall."""
    for i in range(30):
        write_page(wiki, f"notes/n{i}.md", f"plain note {i}", title=f"Note {i}")
    index.rebuild(wiki)
    assert index.query_languages() == ("english",)
    p = write_page(wiki, "notes/haus.md", "Die Häuser am Fluss", title="Häuser", lang="de")
    index.upsert_page("notes/haus.md", p.read_bytes())
    assert index.query_languages() == ("english", "german")
    conn = apsw.Connection(str(index.db_path))
    plan = " ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT DISTINCT json_extract(meta, '$.lang') FROM pages "
            "WHERE json_extract(meta, '$.lang') IS NOT NULL"
        )
    )
    conn.close()
    assert "pages_lang" in plan, plan
    p.unlink()
    index.sync_paths(wiki, ["notes/haus.md"])
    assert index.query_languages() == ("english",)
