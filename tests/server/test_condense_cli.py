"""``wiki-memory condense`` and ``uncondense`` as the owner runs them against their
server: a dry run lists the session page and changes nothing, the run condenses it in
one commit, ``uncondense`` puts its timeline back byte for byte; a member's token is
refused with the admin grant named and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import condensekit as ck
import pytest
from clikit import run_cli_here as run_cli
from serverproc import ServerProcess
from support import shared_path, wait_for

from wiki_memory.wiki.condense import timeline_span

pytestmark = pytest.mark.process


def test_condense_and_uncondense_from_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data, env={"WIKI_MEMORY_COMMIT_DELAY_SECONDS": "0.1"}) as srv:
        r = srv.post("/v1/observations", ck.events(shared_path("data", "hooks"), 0))
        assert r.status_code < 300, r.text

        def listed() -> list[str]:
            pages = srv.get("/v1/pages", params={"kind": "session"}).json()["pages"]
            return [p["path"] for p in pages]

        path = wait_for(listed, 30, what="the session page")[0]
        page = data / "wiki" / path
        wait_for(lambda: "status: ended" in page.read_text(), 30, what="the session's end")
        before = page.read_bytes()

        r = run_cli(data, "condense", "--older-than", "0", "--dry-run")
        assert r.returncode == 0, r.stderr
        assert path in r.stdout and "would condense 1 session page(s)" in r.stdout, r.stdout
        assert page.read_bytes() == before

        r = run_cli(data, "condense", "--older-than", "0", "--project", "atlas")
        assert r.returncode == 0, r.stderr
        assert "condensed 1 session page(s)" in r.stdout and "(one commit)" in r.stdout
        assert b"condensed: " in page.read_bytes()

        r = run_cli(data, "uncondense", path)
        assert r.returncode == 0, r.stderr
        assert "timeline restored from git history" in r.stdout
        text, old = page.read_text(), before.decode()
        a, b = timeline_span(text), timeline_span(old)
        assert a is not None and b is not None
        assert text[a[0] : a[1]] == old[b[0] : b[1]]

        r = run_cli(data, "uncondense", path)
        assert r.returncode != 0 and "is not condensed" in r.stderr, r.stderr


def test_a_member_is_refused_by_the_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data):
        r = run_cli(data, "token", "create", "--user", "mo", "--role", "member")
        assert r.returncode == 0, r.stderr
        token = r.stdout.strip().split()[-1]
        r = run_cli(data, "condense", "--dry-run", env={"WIKI_MEMORY_TOKEN": token})
        assert r.returncode != 0, r.stdout
        assert "403" in r.stderr and "owner and admins" in r.stderr, r.stderr
