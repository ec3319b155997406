"""The session reserved for setup's self-check (docs/operations.md, "The self-check"):
searchable at once like any other, never a page or a commit, and gone when it ends, when
it goes idle, or at the next start if a setup was stopped half-way."""

from __future__ import annotations

from pathlib import Path

from support import as_user, hook_event, make_memory

from wiki_memory.core.capture import SELF_CHECK_PREFIX
from wiki_memory.core.writer import WriteResult


def _pages_and_commits(m) -> tuple[list[Path], int]:
    from dulwich.repo import Repo

    with Repo(str(m.wiki_dir)) as repo:
        commits = len(list(repo.get_walker()))
    return sorted(m.wiki_dir.rglob("*.md")), commits


def _found(m, word: str) -> bool:
    res = m.recall(word, user=as_user(m, "alice"), budget_tokens=2000)
    return any(word in it["snippet"] for it in res.items)


def test_ended_idle_and_restarted_self_check_sessions_leave_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    m = make_memory(data)
    try:
        pages, commits = _pages_and_commits(m)
        # ended: searchable first, then gone
        sid = SELF_CHECK_PREFIX + "a1"
        m.capture(hook_event("UserPromptSubmit", sid, prompt="zebraword one"), as_user(m, "alice"))
        assert _found(m, "zebraword")
        m.capture(
            hook_event("Stop", sid), as_user(m, "alice")
        )  # a stop compiles others: not this one
        m.capture(hook_event("SessionEnd", sid), as_user(m, "alice"))
        m.writer.call(WriteResult)
        assert not _found(m, "zebraword")
        assert list((data / "spool").glob("*.jsonl")) == []
        # idle: the idle end deletes it instead of compiling it
        sid2 = SELF_CHECK_PREFIX + "b2"
        m.capture(
            hook_event("UserPromptSubmit", sid2, prompt="quokkaword two"), as_user(m, "alice")
        )
        key = next(k for k, i in m.spool.sessions.items() if i.session_id == sid2)
        m.request_compile(key, end=True).result(timeout=30)
        assert not _found(m, "quokkaword")
        # left behind by a stopped setup: deleted at the next start
        sid3 = SELF_CHECK_PREFIX + "c3"
        m.capture(
            hook_event("UserPromptSubmit", sid3, prompt="wombatword three"), as_user(m, "alice")
        )
    finally:
        m.stop()
    m = make_memory(data)
    try:
        m.writer.call(WriteResult)
        assert not _found(m, "wombatword")
        assert list((data / "spool").glob("*.jsonl")) == []
        # no page and no commit came of any of them; an ordinary session does make a page
        assert _pages_and_commits(m) == (pages, commits)
        m.capture(
            hook_event("UserPromptSubmit", "ordinary", prompt="emuword four"), as_user(m, "alice")
        )
        m.capture(hook_event("SessionEnd", "ordinary"), as_user(m, "alice"))
        m.writer.call(WriteResult)
        assert _pages_and_commits(m)[0] != pages
    finally:
        m.stop()
