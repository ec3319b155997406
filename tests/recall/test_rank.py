"""Recall ranking in process (Memory.recall): every script and identifier, natural language,
names and aliases, the link graph, recency, filters (project, kind, tags, dates, as_of),
near-duplicates, anchors and ``why``."""

from __future__ import annotations

import random
import time

import apsw
import pytest
from support import as_user

from wiki_memory.core.memory import Memory
from wiki_memory.index import signals
from wiki_memory.recall import dedup as dedup_rules
from wiki_memory.recall import rank
from wiki_memory.recall.filters import FilterError, Filters, parse_time
from wiki_memory.recall.query import RecallQuery
from wiki_memory.recall.terms import analyze


def write(m: Memory, path: str, text: str) -> None:
    m.write_page(path, text.encode("utf-8"), user="alice", message=f"write {path}")


def note(title: str, body: str, **meta: object) -> str:
    lines = ["---", "type: note", f"title: {title}"]
    for k, v in meta.items():
        lines.append(f"{k}: {v}")
    lines += ["---", "", f"# {title}", "", body, ""]
    return "\n".join(lines)


def paths(m: Memory, query: str, **kw: object) -> list[str]:
    res = m.recall(query, budget_tokens=kw.pop("budget_tokens", 4000), **kw)  # type: ignore[arg-type]
    return [i["path"] for i in res.items]


def first(m: Memory, query: str, **kw: object) -> dict:
    res = m.recall(query, budget_tokens=4000, **kw)  # type: ignore[arg-type]
    assert res.items, f"nothing for {query!r}"
    return res.items[0]


FILLER = [
    ("notes/deploy.md", "Deploy guide", "Run the release pipeline, then watch the dashboards."),
    ("notes/cache.md", "Cache rules", "Flush the cache only outside peak hours."),
    ("notes/oncall.md", "On-call", "Escalate to the platform team after thirty minutes."),
]


@pytest.fixture
def wiki(mem):
    for path, title, body in FILLER:
        write(mem, path, note(title, body))
    return mem


# --- scripts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("Meeting at the café near the station.", "cafe"),
        ("Meeting at the cafe near the station.", "café"),
        ("The plant in Łódź ships on Mondays.", "lodz"),
        ("The plant in Lodz ships on Mondays.", "Łódź"),
        ("Office on the Hauptstraße, second floor.", "hauptstrasse"),
        ("Office on the Hauptstrasse, second floor.", "Hauptstraße"),
        ("Résumé screening happens on Fridays.", "resume screening"),
        ("Crème brûlée recipe from Ærø.", "aero creme brulee"),
    ],
)
def test_latin_diacritics_both_ways(wiki, body, query):
    write(wiki, "notes/target.md", note("Target", body))
    assert paths(wiki, query)[0] == "notes/target.md"


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("Развёртывание сервиса в Москве назначено на вторник.", "развертывание"),
        ("Развёртывание сервиса в Москве назначено на вторник.", "Москве"),
        ("Развертывание сервиса в Москве назначено на вторник.", "развёртывание сервиса"),
        ("ПРОВЕРКА ЖУРНАЛА перед релизом.", "проверка журнала"),
    ],
)
def test_cyrillic(wiki, body, query):
    write(wiki, "notes/ru.md", note("Заметка", body))
    assert paths(wiki, query)[0] == "notes/ru.md"


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("تم النَّشْرُ إلى بيئة الإنتاج بنجاح", "النشر"),  # harakat in the page, none in the query
        ("تم النشر إلى بيئة الإنتاج بنجاح", "النَّشْرُ الإنتاج"),  # and the other way round
        ("مراجعة الكود قبل الدمج", "ﻣﺮاﺟﻌﺔ"),  # presentation forms in the query
    ],
)
def test_arabic(wiki, body, query):
    write(wiki, "notes/ar.md", note("ملاحظة", body))
    assert paths(wiki, query)[0] == "notes/ar.md"


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("第二阶段 修复sync-ledger后孤立引用全部清除", "孤立"),
        ("第二阶段 修复sync-ledger后孤立引用全部清除", "孤立引用"),
        ("第二阶段 修复sync-ledger后孤立引用全部清除", "ledger"),
        ("大阪拠点の統合計画メモ", "大阪"),
        ("大阪拠点の統合計画メモ", "統合計画"),
        ("배포 절차 검토 회의", "배포"),
        ("배포 절차 검토 회의", "검토 회의"),
    ],
)
def test_cjk(wiki, body, query):
    write(wiki, "notes/cjk.md", note("Memo", body))
    assert paths(wiki, query)[0] == "notes/cjk.md"


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("Raise max_retry_count to 5 in the client.", "max_retry_count"),
        ("Raise max_retry_count to 5 in the client.", "retry count"),
        ("Raise max_retry_count to 5 in the client.", "maxRetryCount"),
        ("The getUserName helper returns None for bots.", "getUserName"),
        ("The getUserName helper returns None for bots.", "user name"),
        ("The getUserName helper returns None for bots.", "GetUserName"),
        ("HTTPServer closes idle sockets.", "http server"),
        ("Moved it to wiki_memory.index.store last week.", "index.store"),
        ("Moved it to wiki_memory.index.store last week.", "wiki_memory.index.store"),
        ("tests/test_app.py fails on Windows.", "test_app.py"),
        ("tests/test_app.py fails on Windows.", "test_app"),
        ("pylint reports E1101 on the model.", "E1101"),
        ("The socket died with ERR_CONN_RESET twice.", "ERR_CONN_RESET"),
        ("The socket died with ERR_CONN_RESET twice.", "conn reset"),
        ("Use the kebab-case-option flag.", "kebab-case-option"),
    ],
)
def test_code_identifiers(wiki, body, query):
    write(wiki, "notes/code.md", note("Code note", body))
    assert paths(wiki, query)[0] == "notes/code.md"


# --- natural language ------------------------------------------------------------------


def test_natural_language_question_uses_stop_words_stems_and_or_fallback(wiki):
    write(
        wiki,
        "notes/caroline.md",
        note("Caroline", "Caroline researched adoption agencies last spring."),
    )
    write(wiki, "notes/melanie.md", note("Melanie", "Melanie painted a lake sunrise."))
    # no section holds every word (AND finds nothing): the OR fallback still answers
    top = first(wiki, "What did Caroline research about adopting?")
    assert top["path"] == "notes/caroline.md"
    assert "text" in top["why"]
    assert first(wiki, "Who paints sunrises?")["path"] == "notes/melanie.md"


def test_all_words_rank_above_some_words(wiki):
    write(wiki, "notes/a.md", note("Alpha", "The login test fails on CI."))
    write(wiki, "notes/b.md", note("Beta", "The login page is slow. The login form too."))
    top = first(wiki, "login test CI")
    assert top["path"] == "notes/a.md" and "all-words" in top["why"]


def test_terms_are_safe_and_stemmed():
    q = analyze("What did Caroline research about the adoption agencies?")
    # each word also matches its Snowball stem, which the index keeps in its stems column
    assert q.terms == [
        '("caroline" OR "carolin")',
        '"research"',
        '("adoption" OR "adopt")',
        '("agencies" OR "agenc")',
    ]
    assert q.all_match == " AND ".join(q.terms)
    assert analyze("*").empty and analyze("").empty and analyze("  (  ").empty
    # numbers, identifiers and other scripts are matched as written
    assert analyze("2023 getUserName москва").terms[0] == '"2023"'
    assert analyze("marrying", ()).terms == ['"marrying"']


def test_empty_and_syntax_only_queries_are_empty_successes(wiki):
    for q in ("", "*", "  ", "(", '"', "AND", "NEAR("):
        res = wiki.recall(q, budget_tokens=500)
        assert res.used_tokens <= 500


# --- names, aliases, links, recency ----------------------------------------------------


def test_title_and_alias_found_in_the_query_across_scripts(wiki):
    write(
        wiki,
        "notes/moscow-office.md",
        "---\ntitle: Moscow office\naliases: [Москва, МСК]\n---\n# Moscow office\n\n"
        "Badge requests go through facilities.\n",
    )
    write(wiki, "notes/other.md", note("Travel", "Badge requests for travel go to HR first."))
    top = first(wiki, "badge requests in Москва")
    assert top["path"] == "notes/moscow-office.md"
    assert "entity" in top["why"] and "alias" in top["why"]
    top = first(wiki, "who runs the moscow office")
    assert top["path"] == "notes/moscow-office.md" and "entity" in top["why"]


def test_alias_with_diacritics_found_folded(wiki):
    write(
        wiki,
        "notes/plant.md",
        "---\ntitle: Central plant\naliases: [Łódź plant]\n---\n# Central plant\n\nShips Mondays.\n",
    )
    top = first(wiki, "when does the lodz plant ship")
    assert top["path"] == "notes/plant.md" and "entity" in top["why"]


def test_a_page_at_the_wiki_root_is_named_by_its_file_name(wiki):
    # a page at the root has its file name as its whole path: its name key was kept as a
    # "path" name only, which the entity signal did not look at ("Tasks" in a vault where
    # every page says "tasks" missed Tasks.md)
    write(wiki, "Tasks.md", "# Tasks\n\n## All\n\nquery block\n")
    for i in range(12):
        write(
            wiki,
            f"notes/plugin-{i}.md",
            note(f"Plugin {i}", "Tasks tasks tasks: toggling tasks, recurring tasks."),
        )
    got = first(wiki, "Tasks")
    assert got["path"] == "Tasks.md" and "entity" in got["why"]
    named = signals.pages_named(wiki.index, ["tasks"], Filters())
    assert [p for _, p, _ in named] == ["Tasks.md"]


def test_wikilinks_bring_linked_pages_that_share_query_words(wiki):
    write(
        wiki,
        "notes/incident.md",
        note(
            "Incident 42",
            "The gateway outage; see [[Postmortem template]] for the write-up. "
            "Owner: [[Team roster]].",
        ),
    )
    write(
        wiki,
        "notes/Postmortem template.md",
        note("Postmortem template", "Timeline and impact of an outage."),
    )
    write(wiki, "notes/Team roster.md", note("Team roster", "Ana, Bo, Cy."))
    write(wiki, "notes/linker.md", note("Outage index", "Ops pages: [[Incident 42]]."))
    write(wiki, "notes/other.md", note("Other", "Links: [[Incident 42]]."))
    items = wiki.recall("gateway outage", budget_tokens=4000).items
    by_path = {i["path"]: i for i in items}
    assert items[0]["path"] == "notes/incident.md"
    assert "link" in by_path["notes/Postmortem template.md"]["why"]  # linked from the hit
    assert "link" in by_path["notes/linker.md"]["why"]  # links to the hit
    # linked, but sharing no query word and not named by the query: not a result
    assert "notes/Team roster.md" not in by_path and "notes/other.md" not in by_path


def test_recency_breaks_a_tie(wiki):
    write(wiki, "notes/old.md", note("Old", "Quarterly budget review.", updated="2020-01-01"))
    write(wiki, "notes/new.md", note("New", "Quarterly budget review.", updated="2026-01-01"))
    items = wiki.recall("quarterly budget review", budget_tokens=4000).items
    assert [i["path"] for i in items][:1] == ["notes/new.md"]
    assert "recent" in items[0]["why"]


# --- diversity, anchors, why ----------------------------------------------------------


def test_near_duplicates_collapse(wiki):
    text = "The staging database password rotates every ninety days via the vault job."
    for i in range(5):
        write(wiki, f"notes/copy-{i}.md", note(f"Copy {i}", text))
    write(wiki, "notes/distinct.md", note("Distinct", "The vault job also rotates API keys."))
    items = wiki.recall("vault job rotates", budget_tokens=4000).items
    copies = [i for i in items if i["path"].startswith("notes/copy-")]
    # one stands for the group; the others follow every other match, grouped, not lost
    shown = [i for i in copies if not i.get("collapsed_into")]
    assert len(shown) == 1 and shown[0]["collapsed"] == 4 and len(copies) == 5
    assert any(i["path"] == "notes/distinct.md" for i in items)
    assert [i["path"] for i in items].index("notes/distinct.md") < items.index(copies[1])
    assert rank.near_duplicate({"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e", "f"})
    assert not rank.near_duplicate({"a", "b"}, {"c", "d"})
    assert not rank.near_duplicate(set(), set())


def test_near_duplicate_lookup_answers_as_comparing_with_each_kept_match():
    """Recall keeps a match unless it nearly duplicates an earlier kept one; the lookup
    through word prefixes must name the same earlier match as comparing in turn, or a
    reply would keep a copy (or drop a distinct entry) that the rule says otherwise."""
    rng = random.Random(23)
    common = frozenset(f"word{chr(97 + i)}" for i in range(20))  # no digits: no numbers
    dedup = dedup_rules.Dedup([common] * 5)  # these words are frequent, the two below unseen
    dedup.add(0, common | {"rareone"})
    # Jaccard 20/22: a copy, though neither set's rarest word is in the other
    assert dedup.find(common | {"raretwo"}) == 0
    vocab = [f"w{i}" for i in range(60)] + ["2023", "v1"]
    for _round in range(30):
        base = [frozenset(rng.sample(vocab, rng.randint(1, 40))) for _ in range(12)]
        sets = []
        for _ in range(300):  # copies with a word or two changed, and fresh sets
            b = set(rng.choice(base))
            for _ in range(rng.randint(0, 4)):
                b.symmetric_difference_update({rng.choice(vocab)})
            sets.append(frozenset(b) if rng.random() < 0.8 else frozenset())
        dedup = dedup_rules.Dedup(sets[:50])
        kept: list[frozenset[str]] = []
        for toks in sets:
            group = [
                i for i, k in enumerate(kept) if dedup_rules.numbers(k) == dedup_rules.numbers(toks)
            ]
            at = dedup_rules.duplicate_of(toks, [kept[i] for i in group[: rank.DEDUP_SCAN]])
            want = group[at] if at is not None else None
            assert dedup.find(toks) == want
            if want is None:
                dedup.add(len(kept), toks)
                kept.append(toks)


def test_anchor_points_at_the_best_section_and_timeline_entry(wiki):
    write(
        wiki,
        "notes/runbook.md",
        note(
            "Runbook",
            "Intro text.\n\n## Rollback\n\nUse the blue-green switch to roll back.\n\n"
            "## Scaling\n\nAdd nodes.\n\n- check the queue depth first ^q1\n",
        ),
    )
    assert first(wiki, "blue-green switch")["anchor"] == "notes/runbook.md#Rollback"
    assert first(wiki, "queue depth")["anchor"] == "notes/runbook.md#^q1"


def test_session_turns_are_items_with_timeline_anchors_and_context(mem):
    events = []
    turns = [
        ("Alice", "How long have you been married?"),
        ("Bob", "Five years already, time flies!"),
        ("Alice", "Nice. Any plans for the weekend?"),
    ]
    for i, (who, text) in enumerate(turns):
        events.append(
            {
                "harness": "chat",
                "event": "UserPromptSubmit",
                "session_id": "s1",
                "project": "p",
                "ts": 1_700_000_000 + i,
                "payload": {"prompt": text, "speaker": who, "dia_id": f"D1:{i + 1}"},
            }
        )
    events.append(
        {
            "harness": "chat",
            "event": "SessionEnd",
            "session_id": "s1",
            "project": "p",
            "ts": 1_700_000_010,
        }
    )
    mem.capture(events, as_user(mem, "alice"))
    deadline = time.monotonic() + 20
    while not mem.list_pages(project="p", kind="session") and time.monotonic() < deadline:
        time.sleep(0.05)
    items = mem.recall("how long married", project="p", budget_tokens=4000).items
    anchors = [i["anchor"].rsplit("#", 1)[-1] for i in items]
    assert anchors[0] == "^t1"
    # the answer right after the question is an item too, found by its context
    assert "^t2" in anchors
    t2 = items[anchors.index("^t2")]
    assert "context" in t2["why"]


# --- filters ---------------------------------------------------------------------------


@pytest.fixture
def filtered(mem):
    write(
        mem,
        "projects/alpha/notes/db.md",
        note(
            "DB alpha",
            "Postgres vacuum schedule for alpha.",
            tags="[ops, db/postgres]",
            updated="2024-03-10",
        ),
    )
    write(
        mem,
        "projects/beta/notes/db.md",
        note(
            "DB beta",
            "Postgres vacuum schedule, nightly at two.",
            tags="[ops]",
            updated="2025-06-01",
        ),
    )
    write(
        mem,
        "projects/beta/handoffs/h1.md",
        "---\ntype: handoff\ntitle: Vacuum handoff\nproject: beta\ncreated: 2025-07-01\n---\n"
        "# Vacuum handoff\n\nFinish the postgres vacuum schedule.\n",
    )
    return mem


def test_filter_project_and_kind(filtered):
    assert set(paths(filtered, "postgres vacuum", project="alpha")) == {
        "projects/alpha/notes/db.md"
    }
    assert set(paths(filtered, "postgres vacuum", project="beta", kinds=["handoff"])) == {
        "projects/beta/handoffs/h1.md"
    }
    assert set(paths(filtered, "postgres vacuum", kinds=["note"])) == {
        "projects/alpha/notes/db.md",
        "projects/beta/notes/db.md",
    }


def test_filter_tags_every_one_and_nested(filtered):
    assert set(paths(filtered, "postgres vacuum", tags=["ops"])) == {
        "projects/alpha/notes/db.md",
        "projects/beta/notes/db.md",
    }
    assert set(paths(filtered, "postgres vacuum", tags=["#ops", "db"])) == {
        "projects/alpha/notes/db.md"
    }
    assert set(paths(filtered, "postgres vacuum", tags="db/postgres")) == {
        "projects/alpha/notes/db.md"
    }
    assert paths(filtered, "postgres vacuum", tags=["nope"]) == []


def test_filter_date_range(filtered):
    assert set(paths(filtered, "postgres vacuum", until="2024-12-31")) == {
        "projects/alpha/notes/db.md"
    }
    assert set(paths(filtered, "postgres vacuum", since="2025-06-01", until="2025-06-01")) == {
        "projects/beta/notes/db.md"
    }
    assert set(paths(filtered, "postgres vacuum", since="2025-06-15")) == {
        "projects/beta/handoffs/h1.md"
    }


def test_filter_values_are_checked():
    with pytest.raises(FilterError) as e:
        RecallQuery("q", since="last tuesday").filters(None)
    assert e.value.field == "since"
    with pytest.raises(FilterError):
        RecallQuery("q", since="2025-02-01", until="2025-01-01").filters(None)
    with pytest.raises(FilterError):
        RecallQuery("q", kinds=[1, 2]).filters(None)
    assert parse_time("2024-05-01", "x") == 1714521600.0
    assert parse_time("2024-05-01", "x", end_of_day=True) == pytest.approx(1714607999.999999)
    assert parse_time("2024-05-01T10:30:00+02:00", "x") == 1714552200.0
    assert parse_time(12.5, "x") == 12.5


@pytest.mark.slow
def test_as_of_reads_the_wiki_as_committed_then(mem):
    write(mem, "notes/policy.md", note("Policy", "Deploys need one approval from ops."))
    mem.writer.flush()
    time.sleep(1.1)
    between = time.time()
    time.sleep(1.1)
    write(mem, "notes/policy.md", note("Policy", "Deploys need two approvals and a canary."))
    write(mem, "notes/later.md", note("Later", "Deploys freeze on Fridays."))
    mem.writer.flush()
    now_items = mem.recall("deploys approval", budget_tokens=4000).items
    assert any("canary" in i["snippet"] for i in now_items)
    old = mem.recall("deploys approval", budget_tokens=4000, as_of=between).items
    assert old and all("as_of" in i["why"] for i in old)
    assert any("one approval" in i["snippet"] for i in old)
    assert not any("canary" in i["snippet"] for i in old)
    assert not any(i["path"] == "notes/later.md" for i in old)
    assert mem.recall("deploys", budget_tokens=4000, as_of=0).items == []
    # an as-of index left by an older version (another schema) is built again, not
    # served with the emptied tables an upgrade leaves
    from wiki_memory.recall import asof

    with asof._lock:
        for idx in asof._open.values():
            idx.close()
        asof._open.clear()
    for db in (mem.settings.index_path.parent / "as-of").glob("*.db"):
        conn = apsw.Connection(str(db))
        conn.pragma("user_version", 1)
        conn.close()
    again = mem.recall("deploys approval", budget_tokens=4000, as_of=between).items
    assert [i["anchor"] for i in again] == [i["anchor"] for i in old]


def test_scope_filters_apply_to_every_signal(wiki):
    # a linked page and a named page outside the project never appear
    write(wiki, "projects/a/notes/x.md", note("Xylophone tuning", "See [[Yodel notes]]."))
    write(wiki, "projects/b/notes/Yodel notes.md", note("Yodel notes", "Alpine yodel."))
    got = paths(wiki, "xylophone tuning yodel notes", project="a")
    assert got == ["projects/a/notes/x.md"]
    scope = Filters(project="a")
    assert signals.pages_named(wiki.index, ["yodel notes"], scope) == []


def test_a_hidden_page_lends_no_signal(wiki):
    # a personal page of bob's outside people/: alice's recall never sees it, nor what it
    # links to because of it (invariant 9)
    write(
        wiki,
        "projects/demo/handoffs/h-bob.md",
        "---\ntype: handoff\ntitle: Bob's reminder\nvisibility: personal\nuser: bob\n---\n"
        "# Bob's reminder\n\nwalrusbanjo: see [[Deploy guide]].\n",
    )
    assert wiki.recall("walrusbanjo", budget_tokens=4000, user=as_user(wiki, "alice")).items == []
    # the deploy guide shares a query word, so it is found either way; the link to it
    # counts for bob, who sees the page that links, and not for alice
    got = {
        i["path"]: i for i in wiki.recall("walrusbanjo deploy", user=as_user(wiki, "alice")).items
    }
    assert "projects/demo/handoffs/h-bob.md" not in got
    assert "link" not in got["notes/deploy.md"]["why"]
    mine = wiki.recall("walrusbanjo deploy", budget_tokens=4000, user=as_user(wiki, "bob")).items
    assert mine[0]["path"] == "projects/demo/handoffs/h-bob.md"
    assert "link" in {i["path"]: i for i in mine}["notes/deploy.md"]["why"]
