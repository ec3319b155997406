"""The harnesses' files in process (docs/agent-files.md): finding them on a HOME, the
section this project writes being invisible to the hash and the import, the import's
actions (new, unchanged, update, conflict) on a real Memory, and the brief leaving out
what the hook reported. The formats are those of tests/harness/test_agent_files.py (its
docstring names where each comes from)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import as_user

from wiki_memory.capture import agentfiles
from wiki_memory.core.agentimport import import_files
from wiki_memory.core.brief import build_brief
from wiki_memory.core.memory import Memory
from wiki_memory.errors import BadRequest
from wiki_memory.recall.tokens import count_tokens
from wiki_memory.wiki.page import parse_page

GH_TOKEN = "gh" + "p_" + ("FAKEfake0123456789" * 2)


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_find_lists_each_file_once_by_its_source(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = home / "src" / "api"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg"
    for rel in ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md"):
        put(repo / rel, f"# {rel}\n")
    put(sub / "AGENTS.md", "# nested\n")
    put(repo / ".cursor" / "rules" / "style.mdc", "---\nalwaysApply: true\n---\nx\n")
    put(repo / ".cursor" / "rules" / "notes.txt", "not a rule\n")
    for rel in (".claude/CLAUDE.md", ".codex/AGENTS.md", ".gemini/GEMINI.md"):
        put(home / rel, "# mine\n")
    mem = home / ".claude" / "projects" / agentfiles.encode_project_path(str(repo)) / "memory"
    put(mem / "MEMORY.md", "- [a](topic.md)\n- [[other]]\n- [gone](missing.md)\n")
    put(mem / "topic.md", "topic\n")
    put(mem / "other.md", "other\n")
    put(mem / "unlinked.md", "not linked\n")
    os.symlink(repo / "AGENTS.md", sub / "GEMINI.md")  # a link is never followed
    found = agentfiles.find(str(sub), str(home))
    enc = agentfiles.encode_project_path(str(repo))
    assert [(e["source"], e["scope"]) for e in found] == [
        ("pkg/AGENTS.md", "project"),
        ("CLAUDE.md", "project"),
        (".claude/CLAUDE.md", "project"),
        ("CLAUDE.local.md", "user"),
        ("AGENTS.md", "project"),
        ("GEMINI.md", "project"),
        (".cursor/rules/style.mdc", "project"),
        ("~/.claude/CLAUDE.md", "user"),
        ("~/.codex/AGENTS.md", "user"),
        ("~/.gemini/GEMINI.md", "user"),
        (f"~/.claude/projects/{enc}/memory/MEMORY.md", "user"),
        (f"~/.claude/projects/{enc}/memory/topic.md", "user"),
        (f"~/.claude/projects/{enc}/memory/other.md", "user"),
    ]
    assert agentfiles.encode_project_path("/home/u/my.api") == "-home-u-my-api"
    # the home folder itself, outside any repository: its own files only, as per-user
    assert {e["scope"] for e in agentfiles.find(str(home), str(home))} == {"user"}


def test_the_section_is_neither_hashed_nor_imported(tmp_path: Path) -> None:
    plain = b"# Agents\n\nabove\n\nbelow\n"
    with_section = (
        b"# Agents\n\nabove\n"
        + agentfiles.BEGIN.encode()
        + b"\nanything\n"
        + agentfiles.END.encode()
        + b"\n\nbelow\n"
    )
    assert agentfiles.content_hash(with_section) == agentfiles.content_hash(
        b"# Agents\n\nabove\n\nbelow\n"
    )
    assert agentfiles.without_section(with_section) == plain
    assert agentfiles.split_section(plain) is None
    assert agentfiles.split_section(plain + agentfiles.BEGIN.encode() + b"\nno end\n") is None


def one(mem: Memory, text: str, source: str = "CLAUDE.md", scope: str = "project") -> dict:
    res = import_files(
        mem,
        as_user(mem, mem.owner),
        [{"source": source, "scope": scope, "text": text, "harness": "claude-code"}],
        project="demo" if scope == "project" else None,
        repo_id="root:" + "a" * 40,
    )
    mem.writer.flush()
    return dict(res["files"][0])


def test_import_new_unchanged_update_and_conflict(mem: Memory) -> None:
    row = one(mem, f"# Rules\n\n- Use tabs.\n- token {GH_TOKEN}\n")
    assert row["action"] == "new" and row["path"] == "projects/demo/agent-files/claude-md.md"
    assert row["redacted"] == 1
    full = mem.wiki_dir / row["path"]
    page = parse_page(full.read_bytes(), row["path"])
    assert page.metadata["source"] == "CLAUDE.md" and page.metadata["repo_id"].startswith("root:")
    assert GH_TOKEN not in full.read_text() and "- Use tabs." in page.body
    assert one(mem, f"# Rules\n\n- Use tabs.\n- token {GH_TOKEN}\n")["action"] == "unchanged"
    assert one(mem, "# Rules\n\n- Use spaces.\n")["action"] == "update"
    assert "Use spaces" in full.read_text()
    # a person edits the page, the original changes: both kept
    full.write_text(full.read_text() + "\nMy own note.\n", encoding="utf-8")
    edited = full.read_bytes()
    row = one(mem, "# Rules\n\n- Use both.\n")
    assert row["action"] == "conflict" and full.read_bytes() == edited
    copy = parse_page((mem.wiki_dir / row["copy"]).read_bytes(), row["copy"])
    assert copy.metadata["conflict_of"] == row["path"] and "Use both" in copy.body
    assert one(mem, "# Rules\n\n- Use both.\n")["copy"] == row["copy"]  # the same copy


def test_a_file_over_the_page_limit_is_refused_at_the_border(mem: Memory) -> None:
    big = "- a rule\n" * (mem.settings.max_body_bytes // 9 + 10)
    row = one(mem, big, source="AGENTS.md")
    assert row["action"] == "refused" and row["reason"].startswith("size: ")
    assert not (mem.wiki_dir / row["path"]).exists()


def test_a_per_user_file_goes_to_the_callers_folder_and_bad_sources_are_named(
    mem: Memory,
) -> None:
    row = one(mem, "# Mine\n", source="~/.codex/AGENTS.md", scope="user")
    assert row["path"] == f"people/{mem.owner}/agent-files/codex-agents-md.md"
    for source, scope in (("../CLAUDE.md", "project"), ("~/x.md", "project"), ("/etc/x", "user")):
        with pytest.raises(BadRequest) as err:
            one(mem, "x", source=source, scope=scope)
        assert err.value.field == "files"


def test_brief_leaves_out_what_the_hook_reported(mem: Memory) -> None:
    text = "# Rules\n\n- Always run zorbacheck first.\n"
    one(mem, text)
    one(mem, "# Mine\n\n- I like quillpens.\n", source="~/.codex/AGENTS.md", scope="user")
    full = build_brief(mem, as_user(mem, mem.owner), project="demo", budget_tokens=2000)
    assert "zorbacheck" in full["text"] and "quillpens" in full["text"]
    digest = agentfiles.content_hash(text.encode())
    told = build_brief(
        mem,
        as_user(mem, mem.owner),
        project="demo",
        budget_tokens=2000,
        loaded={("CLAUDE.md", digest)},
    )
    assert "zorbacheck" not in told["text"] and "quillpens" in told["text"]
    assert "already loaded" in told["text"] and "CLAUDE.md" in told["text"]
    other = build_brief(
        mem,
        as_user(mem, mem.owner),
        project="demo",
        budget_tokens=2000,
        loaded={("CLAUDE.md", "sha256:0")},
    )
    assert "zorbacheck" in other["text"]  # another version of the file: not what it loaded
    shared = build_brief(
        mem, as_user(mem, mem.owner), project="demo", budget_tokens=60, shared=True
    )
    assert "quillpens" not in shared["text"] and count_tokens(shared["text"]) <= 60
