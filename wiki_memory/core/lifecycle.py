"""A session's lifecycle as the harness keeps it (docs/sessions.md, "The lifecycle"):
which events end it and which resume it, whether it holds anything worth a page, the
page a ``clear`` continues, a fork's repeated prompts, and the count of events left as
placeholders. Functions over a session's observations and the spool's sessions;
:class:`~wiki_memory.core.sessions.SessionPages` applies them."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from wiki_memory.capture.observation import Observation
from wiki_memory.capture.spool import SessionInfo, Spool
from wiki_memory.wiki import compiler

#: events that end a session
END_KINDS = {"session_end"}


def prompt_id(o: Observation) -> str | None:
    """The harness's own id of a prompt (``prompt_id``, ``turn_id``), when it gives one."""
    if o.kind not in ("prompt", "turn"):
        return None
    for k in ("prompt_id", "turn_id", "turn-id"):
        v = o.payload.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def repeats_of(state: dict[str, Any]) -> dict[int, str]:
    return {int(k): str(v) for k, v in (state.get("repeats") or {}).items()}


def compile_extras(state: dict[str, Any]) -> dict[str, Any]:
    """What a session's spool ``state`` adds to its compile
    (:func:`wiki_memory.wiki.compiler.compile_session` keywords): ``repeats`` (a fork's
    prompts its origin holds) and ``forgotten`` (the block ids of forgotten entries,
    ``state["forgotten_entries"]``: block id -> the code of its stub)."""
    return {
        "repeats": repeats_of(state),
        "forgotten": frozenset(str(b) for b in (state.get("forgotten_entries") or {})),
    }


#: what makes a session worth a page: a prompt, a tool call or a reply
CONTENT_KINDS = {"prompt", "turn", "tool_pre", "tool_post", "tool_failure"}


def has_content(observations: list[Observation]) -> bool:
    """True when a session holds a prompt, a tool call or a reply (a session that only
    started gets no page)."""
    for o in observations:
        if o.kind in CONTENT_KINDS:
            return True
        if o.kind in ("stop", "subagent_stop") and compiler.reply_text(o):
            return True
    return False


def _last_run(observations: list[Observation]) -> list[Observation]:
    """The events since the last SessionStart that followed a SessionEnd (a resume)."""
    seen_end = False
    at = 0
    for i, o in enumerate(observations):
        if o.kind in END_KINDS:
            seen_end = True
        elif o.kind == "session_start" and seen_end:
            at, seen_end = i, False
    return observations[at:]


def ended_by_events(observations: list[Observation]) -> bool:
    """True when the session's last run (:func:`_last_run`) holds a SessionEnd: a
    SessionStart after it (a resume of the same id) makes the session active again."""
    # read from the end: the last SessionEnd counts unless a SessionStart follows it
    # (what the last run is), and the answer is near the end once a session ended
    for o in reversed(observations):
        if o.kind in END_KINDS:
            return True
        if o.kind == "session_start":
            return False
    return False


class EndMemo:
    """:func:`ended_by_events` of each session, walking only the events that came since
    the last answer (a long session that never saw a SessionStart is walked back to its
    first event otherwise, at every compile).

    Remembers per session key ``(count, obs_id of the last event, answer)``; the answer
    for more events is the answer of the new ones when they hold a SessionEnd or a
    SessionStart, else the remembered one. When the events no longer start with the ones
    answered for (fewer of them, or another event at the remembered place: a spool read
    again), it walks them all. Keeps no event text (ids only), at most ``size`` sessions.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._memo: dict[str, tuple[int, str, bool]] = {}

    def ended(self, key: str, observations: list[Observation]) -> bool:
        """:func:`ended_by_events` of ``observations``, the events of session ``key``."""
        hit = self._memo.pop(key, None)
        n = len(observations)
        answer: bool | None = None
        if hit is not None and 0 < hit[0] <= n and hit[1]:
            count, last_id, before = hit
            if observations[count - 1].obs_id == last_id:
                for o in reversed(observations[count:]):
                    if o.kind in END_KINDS:
                        answer = True
                        break
                    if o.kind == "session_start":
                        answer = False
                        break
                else:
                    answer = before
        if answer is None:
            answer = ended_by_events(observations)
        if n and observations[-1].obs_id:
            self._memo[key] = (n, observations[-1].obs_id, answer)
            while len(self._memo) > self.size:
                del self._memo[next(iter(self._memo))]
        return answer


def end_time(observations: list[Observation], fallback: float) -> float:
    """When a session ended: the time of the event that ended it (the first
    ``SessionEnd`` since its last resume), else of its last event (a session ended by
    idleness); ``fallback`` (the server's clock) only for a session without events. UTC
    epoch seconds."""
    ends = [o.ts for o in _last_run(observations) if o.kind in END_KINDS]
    if ends:
        return min(ends)
    return max((o.ts for o in observations), default=fallback)


def continues_page(spool: Spool, info: SessionInfo, obs: list[Observation]) -> str | None:
    """The page a session started by ``clear`` continues: the latest session with a
    page of the same user, harness and folder that started before it (None for any
    other start)."""
    first = next((o for o in obs if o.kind == "session_start"), None)
    if first is None or first.payload.get("source") != "clear":
        return None
    best: tuple[float, str] | None = None
    for other in list(spool.sessions.values()):
        path = other.state.get("path")
        if (
            other.key == info.key
            or not isinstance(path, str)
            or other.user != info.user
            or other.harness != info.harness
            or other.cwd != info.cwd
            or other.started > first.ts
        ):
            continue
        if best is None or other.last_ts > best[0]:
            best = (other.last_ts, path)
    return best[1] if best else None


def find_repeats(
    spool: Spool, info: SessionInfo, obs: list[Observation], state: dict[str, Any]
) -> None:
    """A fork repeats its origin's prompts with their ids (``prompt_id``, ``turn_id``):
    each such prompt (same id and same text) of this session found in an earlier session of the same user,
    harness and folder is linked to its entry there (``state["repeats"]``: arrival
    number → ``page#^tN``). Only prompts not looked at before are looked up."""
    done = int(state.get("repeats_checked") or 0)
    wanted: dict[tuple[str, str], int] = {}
    for n, o in enumerate(obs[done:], start=done + 1):
        pid = prompt_id(o)
        if pid:
            wanted[(pid, compiler.prompt_text(o))] = n
    state["repeats_checked"] = len(obs)
    if not wanted:
        return
    found: dict[str, str] = dict(state.get("repeats") or {})
    for other in list(spool.sessions.values()):
        path = other.state.get("path")
        if (
            other.key == info.key
            or not isinstance(path, str)
            or (other.user, other.harness, other.cwd) != (info.user, info.harness, info.cwd)
            or other.started > info.started
        ):
            continue
        theirs = other.state.get("repeats") or {}
        for m, o in enumerate(spool.observations(other.key), start=1):
            pid = prompt_id(o)
            same = (pid, compiler.prompt_text(o)) if pid else None
            if same in wanted and str(m) not in theirs:
                found[str(wanted.pop(same))] = f"{path.removesuffix('.md')}#^t{m}"
        if not wanted:
            break
    if found:
        state["repeats"] = found


def unrendered_count(spool: Spool) -> int:
    """How many accepted events are on no page as themselves (their compile failed and a
    placeholder stands in for them), over every session of ``spool``: doctor and status
    show it."""
    return sum(len(i.state.get("unrendered") or []) for i in list(spool.sessions.values()))


class Backoff:
    """When a session's compile fails: the next try after ``first`` seconds, doubled at
    each failure in a row up to ``most`` (5 s to an hour), one timer per session at a
    time, so a compile that keeps failing is never run in a loop.

    With a ``spool``, a failure is also written into the session's spool state
    (``compile_failed``: ``{"at", "cause", "tries", "events"}``, ``events`` the accepted
    events on no page), so ``doctor``, ``status`` and ``wiki-memory unrendered`` see it
    without the server; a success removes it."""

    def __init__(
        self, first: float = 5.0, most: float = 3600.0, spool: Spool | None = None
    ) -> None:
        self.first = first
        self.most = most
        self.spool = spool
        self._failures: dict[str, int] = {}
        self._timers: dict[str, threading.Timer] = {}

    def failed(self, key: str, again: Callable[[], object]) -> tuple[int, float]:
        """Count a failure of ``key`` and, unless a try is already due, call ``again``
        after the wait. Called inside the ``except`` that caught the failure: its
        exception is the cause recorded. Returns (failures in a row, the wait)."""
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        wait = min(self.first * 2 ** (n - 1), self.most)
        self._note(key, n, sys.exc_info()[1])
        if key not in self._timers:

            def fire() -> None:
                self._timers.pop(key, None)
                again()

            t = threading.Timer(wait, fire)
            t.daemon = True
            self._timers[key] = t
            t.start()
        return n, wait

    def succeeded(self, key: str) -> None:
        """A compile of ``key`` worked: the failures in a row and the record go."""
        self._failures.pop(key, None)
        info = self.spool.sessions.get(key) if self.spool is not None else None
        if self.spool is not None and info is not None and "compile_failed" in info.state:
            state = dict(info.state)
            state.pop("compile_failed")
            with suppress(OSError):
                self.spool.write_state(key, state)

    def _note(self, key: str, tries: int, exc: BaseException | None) -> None:
        info = self.spool.sessions.get(key) if self.spool is not None else None
        if self.spool is None or info is None:
            return
        cause = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown"
        state = dict(info.state)
        state["compile_failed"] = {
            "at": time.time(),
            "cause": " ".join(cause.split())[:300],
            "tries": tries,
            "events": max(0, info.count - int(state.get("compiled_count") or 0)),
        }
        with suppress(OSError):  # a full disk: the log line and the retry still come
            self.spool.write_state(key, state)
