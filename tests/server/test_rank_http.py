"""Recall through the HTTP API of the server (the app in process): cases C15 (query syntax) and C16 (CJK),
scripts and identifiers, and the filters of ``POST /v1/recall``."""

from __future__ import annotations

import re
import time

import pytest
from appkit import AppServer
from support import shared_path

# tiers per test: the app runs in process (no socket); the as-of test waits on the clock


def parse_case(name: str) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """PAGES (``name | body``) and QUERIES (``query -> page(s)``) of a case input file."""
    text = shared_path("cases", "inputs", f"{name}.txt").read_text(encoding="utf-8")
    pages: dict[str, str] = {}
    queries: list[tuple[str, list[str]]] = []
    section = None
    for line in text.splitlines():
        if line.startswith("PAGES"):
            section = "pages"
            continue
        if line.startswith("QUERIES"):
            section = "queries"
            continue
        if not line.strip():
            continue
        if section == "pages" and "|" in line:
            name_, body = line.split("|", 1)
            pages[name_.strip()] = body.strip()
        elif section == "queries" and "->" in line:
            q, want = line.rsplit("->", 1)
            q = q.rstrip()
            if q == "<empty string>":
                q = ""
            if want.strip().startswith("("):
                queries.append((q, []))
            else:
                queries.append(
                    (q, [w.strip() for w in re.split(r"[ ,]+", want.split("(")[0]) if w.strip()])
                )
    return pages, queries


SCRIPT_PAGES = {
    "latin": "Meeting at the café in Łódź, Hauptstraße 5, about the résumé.",
    "cyrillic": "Развёртывание сервиса в Москве назначено на вторник.",
    "arabic": "تم النَّشْرُ إلى بيئة الإنتاج بنجاح",
    "code": "Raise max_retry_count; getUserName fails in tests/test_app.py with ERR_CONN_RESET and E1101 in wiki_memory.index.store.",
}
SCRIPT_QUERIES = [
    ("cafe", "latin"),
    ("lodz", "latin"),
    ("hauptstrasse", "latin"),
    ("resume", "latin"),
    ("развертывание", "cyrillic"),
    ("москве", "cyrillic"),
    ("النشر", "arabic"),
    ("retry count", "code"),
    ("user name", "code"),
    ("test_app.py", "code"),
    ("conn reset", "code"),
    ("E1101", "code"),
    ("index.store", "code"),
]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("rank") / "data"
    notes = data / "wiki" / "notes"
    notes.mkdir(parents=True)
    for case in ("C15", "C16"):
        pages, _ = parse_case(case)
        for name, body in pages.items():
            (notes / f"{name}.md").write_text(f"# {name}\n\n{body}\n", encoding="utf-8")
    for name, body in SCRIPT_PAGES.items():
        (notes / f"{name}.md").write_text(f"# {name}\n\n{body}\n", encoding="utf-8")
    (notes / "tagged.md").write_text(
        "---\ntitle: Tagged\ntags: [ops, db/postgres]\nupdated: 2024-03-10\n---\n"
        "# Tagged\n\nVacuum the postgres replicas weekly.\n",
        encoding="utf-8",
    )
    (notes / "untagged.md").write_text(
        "---\ntitle: Untagged\nupdated: 2025-06-01\n---\n# Untagged\n\n"
        "Postgres replicas get a vacuum after every migration.\n",
        encoding="utf-8",
    )
    with AppServer(data, commit_delay_seconds=0.05) as s:
        yield s


def recall(srv: AppServer, query: str, **kw: object) -> dict:
    r = srv.post("/v1/recall", {"query": query, "budget_tokens": 4000, **kw})
    assert r.status_code == 200, (query, r.text)
    return r.json()


def names(body: dict) -> list[str]:
    return [i["path"].removeprefix("notes/").removesuffix(".md") for i in body["items"]]


@pytest.mark.parametrize("case", ["C15", "C16"])
def test_case_queries_return_their_pages(srv, case):
    _, queries = parse_case(case)
    assert len(queries) == (18 if case == "C15" else 8)
    for query, want in queries:
        body = recall(srv, query)
        got = names(body)
        if not want:
            assert got == [], (query, got)
        else:
            for page in want:
                assert page in got, (query, page, got)
            if case == "C16":
                assert got[0] == want[0], (query, got)


def test_title_colon_is_text_not_a_column_filter(srv):
    assert "lang" in names(recall(srv, "title:secret"))


@pytest.mark.parametrize(("query", "page"), SCRIPT_QUERIES)
def test_scripts_and_identifiers_over_http(srv, query, page):
    got = names(recall(srv, query))
    assert got and got[0] == page, (query, got)


def test_filters_over_http(srv):
    def two(**kw: object) -> set[str]:
        return set(names(recall(srv, "postgres vacuum replicas", **kw))) & {"tagged", "untagged"}

    assert two() == {"tagged", "untagged"}
    assert names(recall(srv, "postgres vacuum replicas", tags=["ops"])) == ["tagged"]
    assert names(recall(srv, "postgres vacuum replicas", tags="db")) == ["tagged"]
    assert two(since="2025-01-01") == {"untagged"}
    assert two(until="2024-12-31") == {"tagged"}
    assert two(since="2024-03-10", until="2024-03-10") == {"tagged"}
    assert two(kinds=["page"]) == {"tagged", "untagged"}
    assert names(recall(srv, "postgres vacuum replicas", kinds=["note"])) == []
    r = srv.post("/v1/recall", {"query": "x", "since": "last tuesday"})
    assert r.status_code == 400 and r.json()["field"] == "since"
    r = srv.post("/v1/recall", {"query": "x", "tags": [1]})
    assert r.status_code == 400 and r.json()["field"] == "tags"
    # kinds must be a string or a list of strings: an object (even an empty one) is an
    # error, not "every kind"; so is an empty list (it would match nothing)
    for bad in ({}, {"note": 1}, 3, []):
        r = srv.post("/v1/recall", {"query": "postgres", "kinds": bad})
        assert r.status_code == 400 and r.json()["field"] == "kinds", bad
    # the page listing checks its since as recall does, and takes epoch seconds too
    r = srv.get("/v1/pages", params={"since": "garbage"})
    assert r.status_code == 400 and r.json()["field"] == "since"

    def listed(since: str) -> set[str]:
        r = srv.get("/v1/pages", params={"since": since, "limit": 1000})
        assert r.status_code == 200, r.text
        return {p["path"] for p in r.json()["pages"]} & {"notes/tagged.md", "notes/untagged.md"}

    assert listed("2025-01-01") == {"notes/untagged.md"}
    assert listed("2024-01-01") == {"notes/tagged.md", "notes/untagged.md"}
    assert listed("1735689600") == {"notes/untagged.md"}  # 2025-01-01T00:00:00Z


def test_now_sets_what_last_month_means_over_http(srv):
    # both pages match; the query's "last month" lifts the one dated inside it
    def top(now: str) -> str:
        got = names(recall(srv, "postgres vacuum replicas last month", now=now))
        return [n for n in got if n in ("tagged", "untagged")][0]

    assert top("2024-04-05") == "tagged"  # dated 2024-03-10
    assert top("2025-07-01T08:00:00Z") == "untagged"  # dated 2025-06-01
    r = srv.post("/v1/recall", {"query": "x", "now": "someday"})
    assert r.status_code == 400 and r.json()["field"] == "now"


@pytest.mark.slow
def test_as_of_over_http(srv):
    # the start-up commit holds the pages; a later edit is not visible as of before it
    time.sleep(1.1)
    before = time.time()
    time.sleep(1.1)
    r = srv.post(
        "/v1/observations",
        {
            "harness": "codex",
            "event": "UserPromptSubmit",
            "session_id": "asof-1",
            "project": "asof",
            "payload": {"prompt": "zebra crossing repainted"},
        },
    )
    assert r.status_code == 202
    srv.post(
        "/v1/observations",
        {"harness": "codex", "event": "SessionEnd", "session_id": "asof-1", "project": "asof"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = recall(srv, "zebra crossing")
        if body["items"] and "spool" not in body["items"][0]["why"]:
            break
        time.sleep(0.2)
    assert body["items"] and body["items"][0]["path"].startswith("projects/asof/sessions/")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the page's commit is grouped: wait for it
        if recall(srv, "zebra crossing", as_of=time.time())["items"]:
            break
        time.sleep(0.2)
    old = recall(srv, "zebra crossing", as_of=before)
    assert old["items"] == []
    assert names(recall(srv, "postgres vacuum replicas", as_of=before, tags=["ops"])) == ["tagged"]
