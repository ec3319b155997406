"""LoCoMo evidence-retrieval benchmark: /v1/recall against BM25 baselines in the same run.

Run: ``python bench/locomo.py`` (about 3-6 minutes here). Options: ``--data FILE`` (default
``../shared/data/locomo/locomo7-dev.json``), ``--conversations N`` (first N only),
``--budget 4000`` (``budget_tokens`` of every recall), ``--data-dir DIR`` (keep the
server's data directory there; an existing one that already holds the pages is reused,
which skips ingestion), ``--json FILE`` (also write the numbers as JSON), ``--vectors``
(the ``vectors`` setting on, with the extra installed: the ``dense`` signal joins, an
index built without vectors is rebuilt when the server starts, and the tuning tries
:data:`DENSE_GRID` too), ``--topics`` (the ``topic_pages`` setting on: each session's
end compiles its conversation's topic pages; a topic item takes one rank position and
counts as the first entry it lists, and the tables give the replies with topic items
taken out beside them: ``wm -topics``; the tuning tries :data:`TOPIC_GRID` too),
``--topics-only`` (in process, only the default
weights' table of topic items on and taken out, no ablation or tuning).

Method (see docs/benchmarks.md):

1. A real ``wiki-memory serve`` process starts on a temp data directory (127.0.0.1, a free
   port). Each conversation is ingested through ``POST /v1/observations`` only: one
   captured session per LoCoMo session (harness ``locomo``, project = the ``sample_id``,
   session id ``<sample_id>-s<n>``), one ``UserPromptSubmit`` observation per turn with
   payload ``{"prompt": text [+ " [shares a photo of <blip_caption>]"], "speaker",
   "dia_id"}`` and ``ts`` = ``session_<n>_date_time`` + 5 s per turn, then ``SessionEnd``
   so the session page is compiled.
2. The bench waits until every session page is listed by ``GET /v1/pages`` with all its
   turns, and reads each page (``GET /v1/pages/{path}``) to map every timeline anchor
   ``path#^tN`` to the ``dia_id`` in its entry's head line (``prompt · <speaker> · D1:3``).
3. Every question is asked through ``POST /v1/recall`` with ``project`` = its
   conversation and ``budget_tokens`` = ``--budget``. The top-k *units* are scored: the
   turns, in reading order, are each item's ``anchor`` followed by the anchors its slot
   carries (``also``: a page's entries beyond the per-page cap, docs/ranking.md), and a
   turn counts as returned when it is among the first k of them; a session counts when
   any of the top-k items lies on its page.
4. Baselines on the same turns (text + photo caption, prefixed with the speaker, exactly
   what the product ingests), tokenized by lowercase ``\\w+``: ``rank_bm25.BM25Okapi``
   over single turns, and over whole sessions (all turns of a session joined), one
   index per conversation.

Recall@k is "any evidence": a question is a hit when at least one of its (normalised)
evidence ids is among the top-k units. Evidence ids are parsed tolerantly (split on
``[;\\s]+``, keep ``D<n>:<m>``, strip zero padding); ids that match no turn are dropped
and questions left without evidence are skipped (see the data README). Category 5
(adversarial) is reported apart and not in "all".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serverproc import ServerProcess  # noqa: E402

SHARED = Path(os.environ.get("WIKI_MEMORY_SHARED") or ROOT.parent / "shared")
DEFAULT_DATA = SHARED / "data" / "locomo" / "locomo7-dev.json"
KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TURN_SECONDS = 5
_WORD = re.compile(r"\w+")
_HEAD = re.compile(r"^\*\*\d\d:\d\d:\d\d\*\* · prompt · [^\n]*?· (D\d+:\d+)\s*$", re.M)
_BLOCK = re.compile(r"^\^(t\d+)\s*$", re.M)


# --- data -------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str  # what is ingested: text + photo caption


@dataclass
class Conversation:
    sample_id: str
    sessions: dict[int, list[Turn]]
    dates: dict[int, float]
    qa: list[dict[str, Any]]
    turns: list[Turn] = field(default_factory=list)


def norm_evidence(evidence: list[Any]) -> set[str]:
    """Evidence ids, tolerant of the file's defects: ``"D8:6; D9:17"``, ``"D30:05"``."""
    out: set[str] = set()
    for raw in evidence or []:
        for tok in re.split(r"[;\s]+", str(raw).replace("(", "").replace(")", "")):
            m = re.fullmatch(r"D(\d+):(\d+)", tok)
            if m:
                out.add(f"D{int(m[1])}:{int(m[2])}")
    return out


def parse_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` → UTC epoch seconds (the file has no time zone)."""
    dt = datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    return dt.replace(tzinfo=UTC).timestamp()


def load(path: Path, limit: int | None) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    convs = []
    for sample in data[:limit] if limit else data:
        c = sample["conversation"]
        sessions: dict[int, list[Turn]] = {}
        dates: dict[int, float] = {}
        for key, value in c.items():
            m = re.fullmatch(r"session_(\d+)", key)
            if not m or not isinstance(value, list) or not value:
                continue
            n = int(m[1])
            dates[n] = parse_date(c[f"session_{n}_date_time"])
            turns = []
            for t in value:
                text = t["text"]
                if t.get("blip_caption"):
                    text += f" [shares a photo of {t['blip_caption']}]"
                turns.append(Turn(t["dia_id"], n, t["speaker"], text))
            sessions[n] = turns
        conv = Conversation(
            sample["sample_id"], dict(sorted(sessions.items())), dates, sample["qa"]
        )
        conv.turns = [t for n in conv.sessions for t in conv.sessions[n]]
        convs.append(conv)
    return convs


def session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":")[0])


# --- ingest through the HTTP API --------------------------------------------------------


def session_key(conv: Conversation, n: int) -> str:
    return f"{conv.sample_id}-s{n}"


def ingest(srv: ServerProcess, convs: list[Conversation]) -> float:
    """Post every turn and each session's end; returns the seconds it took."""
    t0 = time.perf_counter()
    with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=120) as cl:
        for conv in convs:
            for n, turns in conv.sessions.items():
                sid = session_key(conv, n)
                base = conv.dates[n]
                events: list[dict[str, Any]] = []
                for i, t in enumerate(turns):
                    events.append(
                        {
                            "harness": "locomo",
                            "event": "UserPromptSubmit",
                            "session_id": sid,
                            "project": conv.sample_id,
                            "event_id": f"{sid}-{t.dia_id}",
                            "ts": base + TURN_SECONDS * i,
                            "payload": {"prompt": t.text, "speaker": t.speaker, "dia_id": t.dia_id},
                        }
                    )
                events.append(
                    {
                        "harness": "locomo",
                        "event": "SessionEnd",
                        "session_id": sid,
                        "project": conv.sample_id,
                        "event_id": f"{sid}-end",
                        "ts": base + TURN_SECONDS * len(turns),
                        "payload": {"reason": "other"},
                    }
                )
                r = cl.post("/v1/observations", json=events)
                r.raise_for_status()
    return time.perf_counter() - t0


def anchor_map(content: str, path: str) -> dict[str, str]:
    """``path#^tN`` → dia_id, read from the timeline entries' head lines."""
    out: dict[str, str] = {}
    heads = [(m.start(), m.group(1)) for m in _HEAD.finditer(content)]
    blocks = [(m.start(), m.group(1)) for m in _BLOCK.finditer(content)]
    for pos, dia in heads:
        nxt = next((b for p, b in blocks if p > pos), None)
        if nxt is not None:
            out[f"{path}#^{nxt}"] = dia
    return out


def wait_for_pages(
    srv: ServerProcess, convs: list[Conversation], timeout: float = 600
) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    """Wait until every session page is compiled with all its turns.

    Returns (anchor → dia_id, page path → (sample_id, session number))."""
    anchors: dict[str, str] = {}
    pages: dict[str, tuple[str, int]] = {}
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=120) as cl:
        for conv in convs:
            want = {session_key(conv, n): len(t) for n, t in conv.sessions.items()}
            done: set[str] = set()
            while True:
                listed = cl.get(
                    "/v1/pages",
                    params={"project": conv.sample_id, "kind": "session", "limit": 1000},
                ).json()["pages"]
                for p in listed:
                    if p["path"] in done:
                        continue
                    page = cl.get(f"/v1/pages/{p['path']}", params={"max_bytes": 4 << 20}).json()
                    sid = str(page["metadata"].get("session_id", ""))
                    amap = anchor_map(page["content"], p["path"])
                    if sid in want and len(amap) == want[sid]:
                        done.add(p["path"])
                        anchors.update(amap)
                        pages[p["path"]] = (conv.sample_id, int(sid.rsplit("-s", 1)[1]))
                if len(done) == len(want):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{conv.sample_id}: {len(done)}/{len(want)} pages compiled")
                time.sleep(0.2)
    return anchors, pages


# --- scoring ----------------------------------------------------------------------------


@dataclass
class Ranked:
    """One system's answer to one question: ranked session numbers and turn ids."""

    sessions: list[int | None]  # per unit, its session (None: not a session)
    turns: list[str | None]  # per unit, its turn (None: not a turn anchor)
    tokens: int = 0
    ms: float = 0.0


def hit_at(units: list[Any], gold: set[Any], k: int) -> bool:
    return any(u in gold for u in units[:k] if u is not None)


@dataclass
class Score:
    n: int = 0
    s: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    t: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    tokens: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, r: Ranked, gold: set[str]) -> None:
        gold_s = {session_of(d) for d in gold}
        self.n += 1
        for k in KS:
            self.s[k] += hit_at(r.sessions, gold_s, k)
            self.t[k] += hit_at(r.turns, gold, k)
        self.tokens.append(r.tokens)
        self.ms.append(r.ms)


def _tok(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class Baselines:
    """BM25Okapi over single turns and over whole sessions of one conversation."""

    def __init__(self, conv: Conversation) -> None:
        from rank_bm25 import BM25Okapi

        from wiki_memory.recall.tokens import count_tokens

        self.turns = conv.turns
        docs = [f"{t.speaker}: {t.text}" for t in self.turns]
        self.turn_tokens = [count_tokens(d) for d in docs]
        self.turn_bm25 = BM25Okapi([_tok(d) for d in docs])
        self.sess = list(conv.sessions)
        sdocs = ["\n".join(f"{t.speaker}: {t.text}" for t in conv.sessions[n]) for n in self.sess]
        self.sess_tokens = [count_tokens(d) for d in sdocs]
        self.sess_bm25 = BM25Okapi([_tok(d) for d in sdocs])

    def by_turns(self, q: str) -> Ranked:
        t0 = time.perf_counter()
        scores = self.turn_bm25.get_scores(_tok(q))
        order = sorted(range(len(self.turns)), key=lambda i: (-scores[i], i))[: max(KS)]
        ms = (time.perf_counter() - t0) * 1000
        return Ranked(
            [self.turns[i].session for i in order],
            [self.turns[i].dia_id for i in order],
            sum(self.turn_tokens[i] for i in order),
            ms,
        )

    def by_sessions(self, q: str) -> Ranked:
        t0 = time.perf_counter()
        scores = self.sess_bm25.get_scores(_tok(q))
        order = sorted(range(len(self.sess)), key=lambda i: (-scores[i], i))[:5]
        ms = (time.perf_counter() - t0) * 1000
        return Ranked(
            [self.sess[i] for i in order],
            [None] * len(order),
            sum(self.sess_tokens[i] for i in order),
            ms,
        )


def now_of(conv: Conversation) -> str:
    """The reference time for relative dates in a conversation's questions: the start of
    its last session (the questions are asked after the conversation), ISO-8601 UTC."""
    return datetime.fromtimestamp(max(conv.dates.values()), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ask(
    cl: httpx.Client,
    conv: Conversation,
    q: str,
    budget: int,
    anchors: dict[str, str],
    pages: dict[str, tuple[str, int]],
) -> Ranked:
    """One recall over HTTP, scored with topic items counted (:func:`ask_both`)."""
    return ask_both(cl, conv, q, budget, anchors, pages)[0]


def ask_both(
    cl: httpx.Client,
    conv: Conversation,
    q: str,
    budget: int,
    anchors: dict[str, str],
    pages: dict[str, tuple[str, int]],
) -> tuple[Ranked, Ranked]:
    """One recall over HTTP, scored with the topic pages' items counted and taken out."""
    t0 = time.perf_counter()
    r = cl.post(
        "/v1/recall",
        json={"query": q, "project": conv.sample_id, "budget_tokens": budget, "now": now_of(conv)},
    )
    ms = (time.perf_counter() - t0) * 1000
    r.raise_for_status()
    body = r.json()
    out = []
    for topics in (True, False):
        items = [i for i in body["items"] if topics or i.get("kind") != "topic"]
        sessions = session_units(items, pages, conv.sample_id)
        out.append(Ranked(sessions, turn_units(items, anchors), int(body["used_tokens"]), ms))
    return out[0], out[1]


def first_entry(item: dict[str, Any]) -> str:
    """The anchor an item counts as: a topic page's first linked entry (``entries``; ""
    when it lists none), else the item's own anchor."""
    if item.get("kind") == "topic":
        return str((item.get("entries") or [""])[0])
    return str(item.get("anchor", ""))


def session_units(
    items: list[dict[str, Any]], pages: dict[str, tuple[str, int]], sample_id: str
) -> list[int | None]:
    """Per item, the session it lies on; a topic item counts as its first entry's."""
    out: list[int | None] = []
    for item in items:
        path = first_entry(item).split("#", 1)[0] if item.get("kind") == "topic" else None
        page = pages.get(path if path is not None else item.get("path", ""))
        out.append(page[1] if page and page[0] == sample_id else None)
    return out


def turn_units(items: list[dict[str, Any]], anchors: dict[str, str]) -> list[str | None]:
    """The turns a reply returns, in reading order: each item's anchor, then the anchors
    of the entries its slot carries (``also``: the per-page cap's carried entries). T@k
    counts the first k of these, so carrying never lets more than k turns count. A topic
    item takes one position and counts as the first entry it lists."""
    out: list[str | None] = []
    for item in items:
        out.append(anchors.get(first_entry(item)))
        out.extend(anchors.get(a.get("anchor", "")) for a in item.get("also", []))
    return out


SYSTEMS = ("wiki-memory", "wm -topics", "BM25 turns", "BM25 sessions")
"""``wm -topics``: the same replies with the topic pages' items taken out (the items after
them move up)."""


def run(convs: list[Conversation], srv: ServerProcess, budget: int) -> dict[str, Any]:
    anchors, pages = wait_for_pages(srv, convs)
    scores: dict[tuple[str, str], Score] = defaultdict(Score)
    skipped = 0
    t0 = time.perf_counter()
    with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=120) as cl:
        for conv in convs:
            base = Baselines(conv)
            valid = {t.dia_id for t in conv.turns}
            for qa in conv.qa:
                gold = norm_evidence(qa.get("evidence", [])) & valid
                if not gold:
                    skipped += 1
                    continue
                cat = int(qa["category"])
                q = str(qa["question"])
                on, off = ask_both(cl, conv, q, budget, anchors, pages)
                results = {
                    "wiki-memory": on,
                    "wm -topics": off,
                    "BM25 turns": base.by_turns(q),
                    "BM25 sessions": base.by_sessions(q),
                }
                groups = [str(cat)] + (["all"] if cat != 5 else [])
                for name, res in results.items():
                    for g in groups:
                        scores[(g, name)].add(res, gold)
    return {
        "scores": scores,
        "skipped": skipped,
        "seconds": time.perf_counter() - t0,
        "maps": (anchors, pages),
    }


# --- in process: ablation and leave-one-conversation-out ------------------------------

#: signals switched off one at a time in the ablation table (names of rank.TUNABLE;
#: ``dense`` too when the index holds vectors)
ABLATE = (
    "text",
    "all-words",
    "page",
    "fields",
    "link",
    "when",
    "dates",
    "stems",
    "context",
    "cap",
)
"""``entity`` and ``recent`` are left out: LoCoMo's pages are session pages titled by
their first turn and compiled within seconds of each other, so neither moves it."""

#: weight settings tried by leave-one-conversation-out: each is chosen on 6 conversations
#: and scored on the seventh; the default is the one best on all 7 (docs/ranking.md)
GRID: dict[str, dict[str, float]] = {
    "default": {},
    "fields 0.5": {"fields": 0.5},
    "fields 0.8": {"fields": 0.8},
    "page 2 d3 .5": {"page": 2.0, "page_depth": 3, "page_ratio": 0.5},
    "page 2": {"page": 2.0},
    "d10": {"page_depth": 10},
    "context 0.6": {"context": 0.6},
}
"""``page 2 d3 .5`` is the ``page`` signal of the first grid (weight 2 over best + ½ second
+ ¼ third); ``d10`` and ``fields 0.5`` are the depth and the ``fields`` weight shipped
before the days that entries refer to joined the index (docs/ranking.md)."""

#: tried besides :data:`GRID` when the index holds vectors (the ``vectors`` extra and
#: setting): the ``dense`` signal's weight
DENSE_GRID: dict[str, dict[str, float]] = {
    "dense 0.3": {"dense": 0.3},
    "dense 1": {"dense": 1.0},
}


#: tried besides :data:`GRID` when topic pages are on (``--topics``): the fusion's factor
#: of a topic page's candidates (the shipped one is 0.5, docs/ranking.md)
TOPIC_GRID: dict[str, dict[str, float]] = {
    "topic 1": {"topic": 1.0},
    "topic 0.75": {"topic": 0.75},
}


@dataclass
class Hits:
    """Per question (categories 1-4): its conversation, session hit at 5, turn hit at 10."""

    conv: list[int] = field(default_factory=list)
    s5: list[bool] = field(default_factory=list)
    t10: list[bool] = field(default_factory=list)
    cat: list[int] = field(default_factory=list)
    #: the same with the topic pages' items taken out
    s5_off: list[bool] = field(default_factory=list)
    t10_off: list[bool] = field(default_factory=list)

    def rate(
        self, convs: set[int] | None = None, off: bool = False, cat: int | None = None
    ) -> tuple[float, float]:
        idx = [
            i
            for i, c in enumerate(self.conv)
            if (convs is None or c in convs) and (cat is None or self.cat[i] == cat)
        ]
        if not idx:
            return 0.0, 0.0
        s5, t10 = (self.s5_off, self.t10_off) if off else (self.s5, self.t10)
        return (
            sum(s5[i] for i in idx) / len(idx),
            sum(t10[i] for i in idx) / len(idx),
        )


def evaluate(
    mem: Any,
    convs: list[Conversation],
    anchors: dict[str, str],
    pages: dict[str, tuple[str, int]],
    budget: int,
    tuning: dict[str, float],
) -> Hits:
    """Every category 1-4 question through the core's ranking in this process (the same
    ``rank.ranked`` that ``Memory.recall`` runs, then ``pack``) with ``tuning``."""
    from wiki_memory.recall import rank
    from wiki_memory.recall.pack import pack

    out = Hits()
    for ci, conv in enumerate(convs):
        valid = {t.dia_id for t in conv.turns}
        now = now_of(conv)
        for qa in conv.qa:
            gold = norm_evidence(qa.get("evidence", [])) & valid
            if not gold or int(qa["category"]) == 5:
                continue
            # the first 15 matches decide S@5 and T@10 (the first 10 always fit the
            # budget); items are built only for those, as Memory.recall builds them
            question = rank.RecallQuery(str(qa["question"]), project=conv.sample_id, now=now)
            found = rank.ranked(mem._sources, question, tuning=tuning)
            items = [found.item(i) for i in range(min(30, len(found)))]
            gold_s = {session_of(d) for d in gold}
            out.conv.append(ci)
            out.cat.append(int(qa["category"]))
            for topics in (True, False):
                kept = [i for i in items if topics or i.get("kind") != "topic"][:15]
                packed = pack(kept, budget).items
                sess = session_units(packed, pages, conv.sample_id)
                turns = turn_units(packed, anchors)
                (out.s5 if topics else out.s5_off).append(hit_at(sess, gold_s, 5))
                (out.t10 if topics else out.t10_off).append(hit_at(turns, gold, 10))
    return out


def tune(
    data_dir: Path,
    convs: list[Conversation],
    anchors: dict[str, str],
    pages: dict[str, tuple[str, int]],
    budget: int,
) -> str:
    """The ablation table and the leave-one-conversation-out table, as text."""
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory

    mem = Memory(load_settings(data_dir, watch=False), owner_user="owner")
    mem.start()
    grid = {**GRID, **(DENSE_GRID if mem.index.vectors_on else {})}
    grid.update(TOPIC_GRID if mem.settings.topic_pages else {})
    ablate = (*ABLATE, "dense") if mem.index.vectors_on else ABLATE
    try:
        runs: dict[str, Hits] = {}
        for name, tuning in grid.items():
            runs[name] = evaluate(mem, convs, anchors, pages, budget, tuning)
        for name in ablate:
            runs[f"-{name}"] = evaluate(mem, convs, anchors, pages, budget, {name: 0.0})
    finally:
        mem.stop()
    base_s, base_t = runs["default"].rate()
    lines = topic_table(runs["default"]) + [""]
    lines += [
        "Ablation (in process, categories 1-4): each signal off in turn (weight 0)",
        f"{'signal off':<14} {'S@5':>6} {'ΔS@5':>7} {'T@10':>6} {'ΔT@10':>7}",
        f"{'(none)':<14} {base_s:6.3f} {'':>7} {base_t:6.3f}",
    ]
    for name in ablate:
        s5, t10 = runs[f"-{name}"].rate()
        lines.append(f"{name:<14} {s5:6.3f} {s5 - base_s:+7.3f} {t10:6.3f} {t10 - base_t:+7.3f}")
    lines += [
        "",
        "Leave one conversation out: the setting with the best S@5 + T@10 on the other six"
        f" (of {len(grid)}: {', '.join(grid)}), scored on the held-out one",
        f"{'held out':<10} {'chosen':<12} {'S@5':>6} {'T@10':>6}",
    ]
    folds: list[tuple[float, float]] = []
    every = set(range(len(convs)))
    for ci, conv in enumerate(convs):
        train = every - {ci}
        best = max(grid, key=lambda n: (sum(runs[n].rate(train)), n == "default"))
        s5, t10 = runs[best].rate({ci})
        folds.append((s5, t10))
        lines.append(f"{conv.sample_id:<10} {best:<12} {s5:6.3f} {t10:6.3f}")
    chosen = max(grid, key=lambda n: (sum(runs[n].rate()), n == "default"))
    off = [
        runs[n].rate({ci}, off=True)
        for ci, n in enumerate(
            max(grid, key=lambda n: (sum(runs[n].rate(every - {ci}, off=True)), n == "default"))
            for ci in range(len(convs))
        )
    ]
    lines += [
        f"{'mean':<10} {'':<12} {statistics.mean(f[0] for f in folds):6.3f} "
        f"{statistics.mean(f[1] for f in folds):6.3f}",
        f"{'worst':<10} {'':<12} {min(f[0] for f in folds):6.3f} {min(f[1] for f in folds):6.3f}",
        f"{'mean, topic items out (chosen on the other six the same way)':<23} "
        f"{statistics.mean(f[0] for f in off):6.3f} {statistics.mean(f[1] for f in off):6.3f}",
        f"best on all {len(convs)}: {chosen} (S@5 {runs[chosen].rate()[0]:.3f}, "
        f"T@10 {runs[chosen].rate()[1]:.3f}); the shipped weights are 'default'",
    ]
    return "\n".join(lines)


def topics_in_process(
    data_dir: Path,
    convs: list[Conversation],
    anchors: dict[str, str],
    pages: dict[str, tuple[str, int]],
    budget: int,
) -> str:
    """The default weights in process: :func:`topic_table` alone (no weight tuned)."""
    from wiki_memory.config import load_settings
    from wiki_memory.core.memory import Memory

    mem = Memory(load_settings(data_dir, watch=False), owner_user="owner")
    mem.start()
    try:
        hits = evaluate(mem, convs, anchors, pages, budget, {})
    finally:
        mem.stop()
    return "\n".join(topic_table(hits))


def topic_table(h: Hits) -> list[str]:
    """Per category, the default weights with the topic pages' items counted (each one
    position, as its first entry) and taken out."""
    lines = [
        "Topic pages (in process, default weights): items counted as their first entry, "
        "and taken out",
        f"{'category':<16} {'n':>5} {'S@5 on':>7} {'T@10 on':>8} {'S@5 off':>8} {'T@10 off':>9}",
    ]
    for cat in (None, 1, 2, 3, 4):
        n = sum(1 for c in h.cat if cat is None or c == cat)
        s_on, t_on = h.rate(cat=cat)
        s_off, t_off = h.rate(off=True, cat=cat)
        label = "all (cat 1-4)" if cat is None else f"{cat} {CATEGORIES[cat]}"
        lines.append(f"{label:<16} {n:>5} {s_on:7.3f} {t_on:8.3f} {s_off:8.3f} {t_off:9.3f}")
    return lines


# --- report -----------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def table(scores: dict[tuple[str, str], Score]) -> str:
    head = (
        f"{'category':<16} {'n':>5}  {'system':<14}"
        + "".join(f" {'S@' + str(k):>5}" for k in KS)
        + "".join(f" {'T@' + str(k):>5}" for k in KS)
        + f" {'tok/q':>6} {'p50 ms':>7} {'p95 ms':>7}"
    )
    lines = [head, "-" * len(head)]
    for g in ["all", "1", "2", "3", "4", "5"]:
        label = "all (cat 1-4)" if g == "all" else f"{g} {CATEGORIES[int(g)]}"
        for i, name in enumerate(SYSTEMS):
            sc = scores.get((g, name))
            if sc is None or not sc.n:
                continue
            s = "".join(f" {sc.s[k] / sc.n:5.3f}" for k in KS)
            if name == "BM25 sessions":
                t = "".join(f" {'-':>5}" for _ in KS)
                s = f" {sc.s[1] / sc.n:5.3f} {sc.s[5] / sc.n:5.3f} {'-':>5}"
            else:
                t = "".join(f" {sc.t[k] / sc.n:5.3f}" for k in KS)
            lines.append(
                f"{label if i == 0 else '':<16} {sc.n if i == 0 else '':>5}  {name:<14}{s}{t}"
                f" {statistics.mean(sc.tokens):6.0f} {pct(sc.ms, 50):7.1f} {pct(sc.ms, 95):7.1f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--conversations", type=int, default=None)
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--no-tune",
        action="store_true",
        help="skip the ablation and leave-one-out tables (in process, about 10 minutes)",
    )
    ap.add_argument(
        "--topics-only",
        action="store_true",
        help="in process, only the default weights' table of topic items on and taken out",
    )
    ap.add_argument(
        "--vectors",
        action="store_true",
        help="the vectors setting on (needs the vectors extra): the dense signal joins",
    )
    ap.add_argument(
        "--topics",
        action="store_true",
        help="the topic_pages setting on: topic pages are compiled as sessions end",
    )
    args = ap.parse_args(argv)
    if args.topics:
        os.environ["WIKI_MEMORY_TOPIC_PAGES"] = "true"  # the server and the in-process runs
    if args.vectors:
        os.environ["WIKI_MEMORY_VECTORS"] = "true"  # the server and the in-process runs
    convs = load(args.data, args.conversations)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        reuse = (data_dir / "wiki" / "projects").exists()
        srv = ServerProcess(data_dir, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.5"})
        srv.start(timeout=300)
        try:
            ingest_s = 0.0 if reuse else ingest(srv, convs)
            res = run(convs, srv, args.budget)
        finally:
            srv.stop()
        report(args, convs, res, ingest_s, reuse, t_start)
        if args.topics_only:
            print()
            print(topics_in_process(data_dir, convs, *res["maps"], args.budget), flush=True)
        elif not args.no_tune:
            print()
            print(tune(data_dir, convs, *res["maps"], args.budget), flush=True)
    return 0


def report(
    args: argparse.Namespace,
    convs: list[Conversation],
    res: dict[str, Any],
    ingest_s: float,
    reuse: bool,
    t_start: float,
) -> None:
    """Print the HTTP run's table (and write ``--json``)."""
    scores = res["scores"]
    n_turns = sum(len(c.turns) for c in convs)
    print(
        f"LoCoMo evidence recall, {args.data.name}: {len(convs)} conversations, "
        f"{sum(len(c.sessions) for c in convs)} sessions, {n_turns} turns; "
        f"budget_tokens={args.budget}; {res['skipped']} questions without valid evidence skipped; "
        f"vectors {'on' if args.vectors else 'off'}"
    )
    print(
        "S@k: an evidence session among the top-k units; T@k: an evidence turn is the anchor of "
        "one of the top-k units (BM25 sessions: top 5 only). tok/q: tokens returned per query "
        "(wiki-memory: used_tokens of the whole reply; BM25 turns: the top 10 turns; "
        "BM25 sessions: the top 5 sessions). ms: wiki-memory over HTTP, BM25 in process."
    )
    print(table(scores))
    print(
        f"ingest {ingest_s:.1f} s{' (reused)' if reuse else ''}; questions {res['seconds']:.1f} s; "
        f"total {time.perf_counter() - t_start:.1f} s",
        flush=True,
    )
    if args.json:
        out = {
            f"{g}/{name}": {
                "n": sc.n,
                **{f"S@{k}": sc.s[k] / sc.n for k in KS},
                **{f"T@{k}": sc.t[k] / sc.n for k in KS},
                "tokens": statistics.mean(sc.tokens),
                "p50_ms": pct(sc.ms, 50),
                "p95_ms": pct(sc.ms, 95),
            }
            for (g, name), sc in scores.items()
        }
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
