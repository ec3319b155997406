"""Automatic handoffs measured on a labelled set of sessions.

``tests/core/data/handoff_sessions.json`` holds realistic sessions in the payload shapes
of ``../shared/data/hooks`` (Claude Code, Codex, Gemini CLI), each labelled
``finished`` or ``unfinished`` with a one-line reason; the shared Claude Code sample
session is labelled there too and read from ``../shared``. Run this file as a script
to print the confusion matrix::

    .venv/bin/python tests/core/test_auto_handoffs.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import SHARED, as_user  # noqa: E402

from wiki_memory.capture.observation import Observation, parse_event  # noqa: E402
from wiki_memory.core.handoffs.auto import session_signals  # noqa: E402

DATA = Path(__file__).with_name("data") / "handoff_sessions.json"
T0 = 1_796_000_000  # 2026-11-30, the sessions' first event


def labelled() -> list[dict[str, Any]]:
    """Every labelled session as ``{name, label, reason, style, events}`` where ``events``
    are ``POST /v1/observations`` bodies one second apart; the shared sample is included
    when ``../shared`` is present."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    out = []
    for s in data["sessions"]:
        evs = []
        for i, e in enumerate(s["events"]):
            p = e["payload"]
            evs.append(
                {
                    "harness": s["harness"],
                    "event": e["event"],
                    "session_id": p.get("session_id") or p.get("thread-id"),
                    "cwd": p.get("cwd"),
                    "event_id": f"{s['name']}-{i}",
                    "ts": T0 + i,
                    "payload": p,
                }
            )
        out.append({**s, "events": evs})
    folder = SHARED / "data" / "hooks" / "claude-code"
    for s in data["shared"]:
        if not folder.is_dir():
            continue
        evs = []
        for i, f in enumerate(s["files"]):
            p = json.loads((folder / f).read_text(encoding="utf-8"))
            evs.append(
                {
                    "harness": "claude-code",
                    "event": p["hook_event_name"],
                    "session_id": p["session_id"],
                    "cwd": p["cwd"],
                    "event_id": f"{s['name']}-{i}",
                    "ts": T0 + i,
                    "payload": p,
                }
            )
        out.append({**s, "style": "shared", "harness": "claude-code", "events": evs})
    return out


def observations(session: dict[str, Any]) -> list[Observation]:
    return [parse_event(e, "alice") for e in session["events"]]


def confusion() -> tuple[dict[str, int], list[tuple[str, str, list[str]]]]:
    """``({tp, fp, fn, tn}, [(name, expected, signals) for each miss])`` with
    "unfinished" as the positive class (an automatic handoff opens)."""
    m = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    misses = []
    for s in labelled():
        names = session_signals(observations(s)).names
        predicted = bool(names)
        actual = s["label"] == "unfinished"
        key = ("t" if predicted == actual else "f") + ("p" if predicted else "n")
        m[key] += 1
        if predicted != actual:
            misses.append((s["name"], s["label"], names))
    return m, misses


def report() -> str:
    m, misses = confusion()
    p = m["tp"] / max(m["tp"] + m["fp"], 1)
    r = m["tp"] / max(m["tp"] + m["fn"], 1)
    lines = [
        f"{sum(m.values())} labelled sessions ({DATA.name})",
        "                     predicted unfinished  predicted finished",
        f"  unfinished         {m['tp']:>20}  {m['fn']:>18}",
        f"  finished           {m['fp']:>20}  {m['tn']:>18}",
        f"precision {p:.3f}  recall {r:.3f}",
    ]
    lines += [f"  miss: {n} (labelled {lab}; signals {sig})" for n, lab, sig in misses]
    return "\n".join(lines)


def test_the_labelled_set_is_complete():
    sessions = labelled()
    assert len([s for s in sessions if s["style"] != "shared"]) >= 40
    assert len([s for s in sessions if s["style"] == "different"]) >= 10
    assert {s["label"] for s in sessions} == {"finished", "unfinished"}
    assert all(s["reason"].strip() and "\n" not in s["reason"] for s in sessions)
    assert len({s["name"] for s in sessions}) == len(sessions)
    for s in sessions:
        observations(s)  # every event is accepted by the server's parser
    shared = [s for s in sessions if s["style"] == "shared"]
    assert not SHARED.is_dir() or [s["label"] for s in shared] == ["finished"]


def test_precision_and_recall_on_the_labelled_set():
    m, misses = confusion()
    print("\n" + report())
    assert m["tp"] / max(m["tp"] + m["fp"], 1) >= 0.9, misses
    assert m["tp"] / max(m["tp"] + m["fn"], 1) >= 0.9, misses


def by_name(name: str) -> dict[str, Any]:
    return next(s for s in labelled() if s["name"] == name)


def ended_page(mem: Any, session: dict[str, Any]) -> str:
    mem.capture(session["events"], as_user(mem, "alice"))
    sid = session["events"][0]["session_id"]
    key = next(k for k, v in mem.spool.sessions.items() if v.session_id == sid)
    path = mem.request_compile(key, end=True).result(timeout=60).value
    mem.writer.flush()
    return str(path)


def test_a_finished_session_after_a_red_test_opens_no_handoff(mem):
    for name in ("red-test-then-fix", "grep-no-match-last", "lint-fixed"):
        ended_page(mem, by_name(name))
    assert mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice")) == []


def test_the_handoff_names_what_is_still_open(mem):
    ended_page(mem, by_name("polite-wrapup-with-followups"))
    (h,) = mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice"))
    sections = mem.handoffs.show(as_user(mem.handoffs, "alice"), h["id"])["sections"]
    assert "the access log still writes to stdout in prod" in sections["next_steps"]
    assert "failed" not in sections["what_failed"]


def test_the_handoff_quotes_the_failure_that_stands_and_lists_the_resolved_ones(mem):
    session = by_name("build-still-fails")
    ended_page(mem, session)
    (h,) = mem.handoffs.list_handoffs(as_user(mem.handoffs, "alice"))
    sections = mem.handoffs.show(as_user(mem.handoffs, "alice"), h["id"])["sections"]
    assert "libpq-dev: not found" in sections["what_failed"]
    assert "docker build -t atlas ." in sections["what_failed"]
    assert h["title"].startswith("Unfinished: Get the docker image building again")


if __name__ == "__main__":
    print(report())
