"""The harnesses' own instruction and memory files in the wiki (docs/agent-files.md),
through a real server, the real CLI and the hook ``install-hooks`` writes.

A fresh HOME holds each file the import knows, written in its harness's documented
format (no network here: the formats as the developers knew them, noted in
docs/agent-files.md):

- ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``CLAUDE.local.md`` in the project and
  ``~/.claude/CLAUDE.md``: plain markdown (Claude Code, "Manage Claude's memory",
  docs.anthropic.com/en/docs/claude-code/memory);
- Claude Code's auto memory ``~/.claude/projects/<project path with every other
  character than letters and digits as '-'>/memory/MEMORY.md``, an index whose links name
  topic files beside it (same page of Claude Code's documentation);
- ``AGENTS.md`` and ``~/.codex/AGENTS.md``: plain markdown (Codex CLI, "AGENTS.md",
  github.com/openai/codex docs/getting-started.md, and agents.md);
- ``GEMINI.md`` and ``~/.gemini/GEMINI.md``: plain markdown (Gemini CLI, "Context files",
  github.com/google-gemini/gemini-cli docs/cli/configuration.md);
- ``.cursor/rules/*.mdc``: markdown with a YAML frontmatter of ``description``, ``globs``
  and ``alwaysApply`` (Cursor, "Rules", docs.cursor.com/context/rules).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from clikit import run_cli_here, run_in_process
from hookkit import run_hook
from serverproc import ServerProcess
from support import wait_for

from wiki_memory.auth import TokenStore
from wiki_memory.capture.agentfiles import BEGIN, END, encode_project_path
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.page import parse_page

pytestmark = [pytest.mark.process, pytest.mark.slow]

#: source -> a convention no other file holds (one made-up word each, for recall)
WORDS = {
    "CLAUDE.md": "zorbatabs",
    ".claude/CLAUDE.md": "quillmigrate",
    "CLAUDE.local.md": "plinkport",
    "AGENTS.md": "vexlinter",
    "GEMINI.md": "gorptests",
    ".cursor/rules/style.mdc": "frobquotes",
    "~/.claude/CLAUDE.md": "wumblecommits",
    "~/.codex/AGENTS.md": "snargreviews",
    "~/.gemini/GEMINI.md": "blorpbranches",
    "MEMORY": "trundlecache",
    "DEBUG": "fizzlelogs",
}


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.org",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.org",
    }
    r = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_home(tmp: Path) -> tuple[Path, Path, dict[str, Path]]:
    """HOME, the project's repository in it, and every instruction file (source -> path)."""
    home = tmp / "home"
    api = home / "work" / "api"
    api.mkdir(parents=True)
    git(api, "init", "-q", "-b", "main")
    write(api / "README.md", "# api\n")
    git(api, "add", "README.md")
    git(api, "commit", "-q", "-m", "start")
    mem = home / ".claude" / "projects" / encode_project_path(str(api.resolve())) / "memory"
    files = {
        "CLAUDE.md": api / "CLAUDE.md",
        ".claude/CLAUDE.md": api / ".claude" / "CLAUDE.md",
        "CLAUDE.local.md": api / "CLAUDE.local.md",
        "AGENTS.md": api / "AGENTS.md",
        "GEMINI.md": api / "GEMINI.md",
        ".cursor/rules/style.mdc": api / ".cursor" / "rules" / "style.mdc",
        "~/.claude/CLAUDE.md": home / ".claude" / "CLAUDE.md",
        "~/.codex/AGENTS.md": home / ".codex" / "AGENTS.md",
        "~/.gemini/GEMINI.md": home / ".gemini" / "GEMINI.md",
    }
    for source, path in files.items():
        if source.endswith(".mdc"):
            text = (
                "---\ndescription: Quoting style\nglobs: src/**/*.py\nalwaysApply: false\n---\n"
                f"# Quotes\n\n- Use double quotes ({WORDS[source]}).\n"
            )
        else:
            text = f"# Conventions\n\n- Always follow the {WORDS[source]} convention.\n"
        write(path, text)
    memory_md = mem / "MEMORY.md"
    write(
        memory_md,
        f"# Memory\n\n- The build cache is {WORDS['MEMORY']}.\n- See [debugging](debugging.md).\n",
    )
    write(mem / "debugging.md", f"# Debugging\n\n- Read the {WORDS['DEBUG']} first.\n")
    rel = "~/" + str(memory_md.relative_to(home))
    files[rel] = memory_md
    files[rel.replace("MEMORY.md", "debugging.md")] = mem / "debugging.md"
    return home, api, files


def hashes(files: dict[str, Path]) -> dict[str, str]:
    return {s: hashlib.sha256(p.read_bytes()).hexdigest() for s, p in files.items()}


def cli(data: Path, home: Path, *args: str, token: str | None = None) -> Any:
    env = {"HOME": str(home)}
    if token:
        env["WIKI_MEMORY_TOKEN"] = token
    return run_cli_here(data, *args, env=env)


def imported(data: Path, home: Path, api: Path, *extra: str, token: str | None = None) -> Any:
    r = cli(data, home, "import-agent-files", str(api), "--json", *extra, token=token)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def recall_paths(srv: ServerProcess, word: str) -> set[str]:
    r = srv.post("/v1/recall", {"query": word, "budget_tokens": 20000})
    assert r.status_code == 200, r.text
    return {str(i["path"]) for i in r.json()["items"]}


def hook_start(tmp: Path, srv: ServerProcess, home: Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIKI_MEMORY_", "XDG_"))}
    env["HOME"] = str(home)
    r = run_in_process(
        ["install-hooks", "--agent", "claude-code", "--apply"],
        {**env, "WIKI_MEMORY_HOME": str(srv.data_dir)},
    )
    assert r.returncode == 0, r.stderr
    cfg = json.loads((home / ".claude" / "settings.json").read_text())
    cmd = next(
        h["command"]
        for g in cfg["hooks"]["SessionStart"]
        for h in g["hooks"]
        if "wiki_memory_hook" in h["command"]
    )
    payload = {"session_id": "s1", "cwd": str(cwd), "hook_event_name": "SessionStart"}
    run = run_hook(cmd, {**payload, "source": "startup"}, env, cwd=str(cwd))
    assert run.rc == 0, run
    return str(json.loads(run.stdout)["hookSpecificOutput"].get("additionalContext", ""))


def test_import_recall_brief_and_conflict_through_the_server(tmp_path: Path) -> None:
    home, api, files = make_home(tmp_path)
    before = hashes(files)
    srv = ServerProcess(tmp_path / "data").start()
    data = srv.data_dir
    try:
        # the dry run lists exactly the files, and writes nothing
        dry = imported(data, home, api, "--dry-run")
        assert sorted(f["source"] for f in dry["files"]) == sorted(files)
        assert {f["action"] for f in dry["files"]} == {"new"}
        assert not (data / "wiki" / "projects" / "api" / "agent-files").exists()
        r = cli(data, home, "import-agent-files", str(api), "--dry-run")
        assert r.returncode == 0 and "dry run: 11 file(s)" in r.stdout, r.stdout

        # the import: one page each, with its source, hash and time
        res = imported(data, home, api)
        assert res["project"] == "api"
        assert {f["action"] for f in res["files"]} == {"new"}
        paths = {f["source"]: f["path"] for f in res["files"]}
        assert len(set(paths.values())) == len(files)
        owner = TokenStore(data / "auth").owner_name()
        for source, rel in paths.items():
            meta = parse_page((data / "wiki" / rel).read_bytes(), rel).metadata
            assert meta["source"] == source and meta["type"] == "agent-file"
            assert meta["source_hash"].startswith("sha256:") and meta["imported"]
            own = source.startswith("~") or source == "CLAUDE.local.md"  # one person's
            want = f"people/{owner}/agent-files/" if own else "projects/api/agent-files/"
            assert rel.startswith(want), rel
        assert paths["CLAUDE.local.md"] == f"people/{owner}/agent-files/api/claude-local-md.md"
        # a dry run now: every file unchanged, and not a byte of the wiki written (once
        # the import's own writes have landed: the project's index page follows it)
        wait_for(lambda: (data / "wiki" / "projects" / "api" / "index.md").exists(), 30)
        wiki_files = {p: p.read_bytes() for p in (data / "wiki").rglob("*.md")}
        again = imported(data, home, api, "--dry-run")
        assert {f["action"] for f in again["files"]} == {"unchanged"}
        assert {p: p.read_bytes() for p in (data / "wiki").rglob("*.md")} == wiki_files
        rule = parse_page((data / "wiki" / paths[".cursor/rules/style.mdc"]).read_bytes(), "x.md")
        assert rule.metadata["cursor_rule"]["globs"] == "src/**/*.py"

        # recall finds a convention of each
        ends = {"MEMORY": "/MEMORY.md", "DEBUG": "/debugging.md"}
        for key, word in WORDS.items():
            src = next(s for s in files if s.endswith(ends[key])) if key in ends else key
            assert paths[src] in recall_paths(srv, word), (src, word)

        # a second member with a clone of the repository under another folder name: the
        # same project, and no second page of CLAUDE.md
        bob = TokenStore(data / "auth").create("bob", None, ["api"])
        bob_home = tmp_path / "bob"
        clone = bob_home / "src" / "api-copy"
        clone.parent.mkdir(parents=True)
        git(clone.parent, "clone", "-q", str(api), str(clone))
        shutil.copy(files["CLAUDE.md"], clone / "CLAUDE.md")
        res_b = imported(data, bob_home, clone, token=bob)
        assert res_b["project"] == "api"
        assert [(f["source"], f["action"]) for f in res_b["files"]] == [("CLAUDE.md", "unchanged")]
        pages = sorted((data / "wiki" / "projects" / "api" / "agent-files").iterdir())
        sources = [parse_page(p.read_bytes(), p.name).metadata.get("source") for p in pages]
        assert sources.count("CLAUDE.md") == 1 and len(pages) == 5

        # a Claude Code session in the project: its brief does not repeat CLAUDE.md (the
        # hook reported it), and says so in one line; without the report it would
        brief = hook_start(tmp_path, srv, home, api)
        assert WORDS["CLAUDE.md"] not in brief and WORDS["AGENTS.md"] not in brief, brief
        assert "already loaded" in brief and "CLAUDE.md" in brief
        plain = srv.post("/v1/brief", {"project": "api", "budget_tokens": 4000}).json()["text"]
        assert WORDS["CLAUDE.md"] in plain
        assert paths["CLAUDE.md"] in recall_paths(srv, WORDS["CLAUDE.md"])

        # the original changes and a person edits the page: the import keeps both
        page = data / "wiki" / paths["CLAUDE.md"]
        page.write_text(page.read_text() + "\n- A person's own note.\n", encoding="utf-8")
        edited = page.read_bytes()
        write(files["CLAUDE.md"], files["CLAUDE.md"].read_text() + "- Also lint twice.\n")
        before["CLAUDE.md"] = hashlib.sha256(files["CLAUDE.md"].read_bytes()).hexdigest()
        again = {f["source"]: f for f in imported(data, home, api)["files"]}
        row = again["CLAUDE.md"]
        assert row["action"] == "conflict" and row["copy"].endswith(".md"), row
        assert {f["action"] for s, f in again.items() if s != "CLAUDE.md"} == {"unchanged"}
        assert page.read_bytes() == edited
        copy = parse_page((data / "wiki" / row["copy"]).read_bytes(), row["copy"])
        assert copy.metadata["conflict_of"] == paths["CLAUDE.md"]
        assert copy.metadata["conflict_side"] == "import"
        assert "Also lint twice" in copy.body
        shown = srv.get("/v1/sync-conflicts").json()["conflicts"]
        assert [(c["copy"], c["page"]) for c in shown] == [(row["copy"], paths["CLAUDE.md"])]
        r = cli(data, home, "sync-conflicts")
        assert r.returncode == 0 and row["copy"] in r.stdout, r.stdout + r.stderr

        # no original was ever written
        assert hashes(files) == before
    finally:
        srv.stop()


def test_brief_write_keeps_everything_outside_its_markers(tmp_path: Path) -> None:
    home, api, files = make_home(tmp_path)
    agents = files["AGENTS.md"]
    above, below = "# Agents\n\nKeep this line.\n\n", "\n## Below\n\nAnd this one.\n"
    write(agents, f"{above}{BEGIN}\nstale text\n{END}\n{below}")
    srv = ServerProcess(tmp_path / "data").start()
    data = srv.data_dir
    try:
        assert imported(data, home, api)["project"] == "api"
        srv.post("/v1/remember", {"project": "api", "text": "Deploys go out on Tuesdays."})
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "300")
        assert r.returncode == 0 and "memory section written" in r.stdout, r.stderr
        # plain `brief` in the repository is that project's brief, as --write's is
        os.chdir(api)
        try:
            r = run_cli_here(data, "brief", env={"HOME": str(home)})
        finally:
            os.chdir(tmp_path)
        assert r.returncode == 0 and "Memory brief: project `api`" in r.stdout, r.stdout + r.stderr
        text = agents.read_text(encoding="utf-8")
        assert text.startswith(above) and text.endswith(below)
        section = text[len(above) : len(text) - len(below)]
        assert section.startswith(BEGIN) and section.endswith(END + "\n")
        assert "stale text" not in section and WORDS["CLAUDE.md"] in section
        assert WORDS["AGENTS.md"] not in section  # the file's own text is not repeated
        assert WORDS["~/.claude/CLAUDE.md"] not in section  # nobody's own page
        assert count_tokens(section) <= 300
        first = agents.read_bytes()
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "300")
        assert r.returncode == 0 and "unchanged" in r.stdout
        assert agents.read_bytes() == first
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "300", "--check")
        assert r.returncode == 0 and "current" in r.stdout, r.stdout + r.stderr
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "200", "--check")
        assert r.returncode == 1 and "out of date" in r.stdout

        # a re-import skips the section: the page is unchanged, then changes only by
        # what changed outside the markers
        row = next(f for f in imported(data, home, api)["files"] if f["source"] == "AGENTS.md")
        assert row["action"] == "unchanged"
        agents.write_text(agents.read_text().replace("Keep this line.", "Keep this one."))
        row = next(f for f in imported(data, home, api)["files"] if f["source"] == "AGENTS.md")
        assert row["action"] == "update"
        page = (data / "wiki" / row["path"]).read_text(encoding="utf-8")
        assert "Keep this one." in page and "And this one." in page
        assert "wiki-memory:begin" not in page and WORDS["CLAUDE.md"] not in page

        # a file git tracks is refused without --tracked-ok
        git(api, "add", "AGENTS.md")
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "200")
        assert r.returncode == 2 and "--tracked-ok" in r.stderr
        assert "Keep this one." in agents.read_text()
        r = cli(data, home, "brief", "--write", str(agents), "--budget", "200", "--tracked-ok")
        assert r.returncode == 0, r.stderr
        assert count_tokens(agents.read_text().split(BEGIN)[1]) <= 200

        # a file outside any repository names no project: the message says how to name one
        loose = tmp_path / "loose" / "AGENTS.md"
        loose.parent.mkdir()
        for extra in ((), ("--check",)):
            r = cli(data, home, "brief", "--write", str(loose), *extra)
            assert r.returncode == 2 and "pass --project NAME" in r.stderr, r.stderr
        assert not loose.exists()
        r = cli(data, home, "brief", "--write", str(loose), "--project", "api")
        assert r.returncode == 0, r.stderr
        assert "Memory brief: project `api`" in loose.read_text(encoding="utf-8")
    finally:
        srv.stop()


def test_a_reader_is_refused_and_a_members_own_files_stay_hers(tmp_path: Path) -> None:
    """Through the one door: a reader of the project may import nothing into it (403);
    a member's per-user files go to her own folder, which the owner cannot see."""
    home, api, _files = make_home(tmp_path)
    srv = ServerProcess(tmp_path / "data").start()
    data = srv.data_dir
    try:
        assert imported(data, home, api)["project"] == "api"
        tokens = TokenStore(data / "auth")
        reader = tokens.create("rita", None, ["api"], read_only=True)
        carol = tokens.create("carol", None, ["api"])
        body = {
            "files": [{"source": "CLAUDE.md", "scope": "project", "text": "# Mine\n"}],
            "project": "api",
        }
        r = httpx.post(
            srv.url + "/v1/agent-files",
            json=body,
            headers={"Authorization": f"Bearer {reader}"},
            timeout=30,
        )
        assert r.status_code == 403, r.text
        own = {"files": [{"source": "~/.codex/AGENTS.md", "scope": "user", "text": "# Carol\n"}]}
        r = httpx.post(
            srv.url + "/v1/agent-files",
            json=own,
            headers={"Authorization": f"Bearer {carol}"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        (row,) = r.json()["files"]
        assert row["path"] == "people/carol/agent-files/codex-agents-md.md"
        assert srv.get(f"/v1/pages/{row['path']}").status_code == 404
        mine = httpx.get(
            f"{srv.url}/v1/pages/{row['path']}",
            headers={"Authorization": f"Bearer {carol}"},
            timeout=30,
        )
        assert mine.status_code == 200 and "# Carol" in mine.json()["content"]
    finally:
        srv.stop()


def test_the_hook_reports_the_files_with_the_standard_library_alone(tmp_path: Path) -> None:
    """The installed hook runs under ``python -S``: its report of the instruction files
    loads nothing but the standard library and names each file by source and hash."""
    home, api, files = make_home(tmp_path)
    hooks = Path(__file__).resolve().parents[2] / "hooks"
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import wiki_memory_hooklib as h; "
        "h._sanitizer(); out = h.instruction_files(sys.argv[2]); "
        "names = {m.split('.')[0] for m in sys.modules}; "
        "print(json.dumps([out, sorted(names - sys.stdlib_module_names - "
        "{'__main__', 'wiki_memory', 'wiki_memory_hooklib'})]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIKI_MEMORY_", "XDG_"))}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(hooks), str(api)],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(home)},
        cwd=tmp_path,
        check=True,
    )
    reported, foreign = json.loads(out.stdout)
    assert foreign == []
    assert {r["source"]: r["hash"] for r in reported} == {
        s: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for s, p in files.items()
    }
