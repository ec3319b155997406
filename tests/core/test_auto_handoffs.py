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

from support import SHARED  # noqa: E402

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


if __name__ == "__main__":
    print(report())
