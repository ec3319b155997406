"""A long page that grew at its end is parsed by its new part (index/pagetail.py): the
index after each such update holds, row by row, what a fresh index of the same files
holds, whatever the new version changed (the summary, the frontmatter's length, an
entry in the middle, a fence left open, a heading, a comment, a repeated id)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import as_user, make_memory

from wiki_memory.index import pages, pagetail
from wiki_memory.index.store import Index

PATH = "projects/p/sessions/2026-01-01-abcd1234.md"


def table(ix: Index, path: str | None = None) -> list[tuple[object, ...]]:
    """Every row the index holds (of ``path``, or of every page), rowids left out."""
    conn = ix._conn()  # noqa: SLF001 - the rows themselves are what is compared
    where, args = ("WHERE s.path = ?", (path,)) if path else ("", ())
    secs = list(
        conn.execute(
            "SELECT s.path, s.anchor, s.heading, s.ord, s.line, s.hash, s.text, s.project, "
            "s.kind, s.day, s.t0, s.t1, f.title, f.aliases, f.tags, f.heading, f.body, "
            "f.stems, f.dates, s.rowid IN (SELECT rowid FROM sections_apart) "
            f"FROM sections s JOIN fts f ON f.rowid = s.rowid {where} ORDER BY s.path, s.ord",
            args,
        )
    )
    pwhere = "WHERE path = ?" if path else ""
    cols = "path, id, title, kind, project, tags, aliases, updated, created, hash, size, meta"
    # mtime left out: the compile indexes the bytes it wrote, a reindex reads the file
    rows = list(conn.execute(f"SELECT {cols}, diagnostics, owner FROM pages {pwhere}", args))
    names = list(
        conn.execute(f"SELECT key, path, source FROM names {pwhere} ORDER BY 1, 2, 3", args)
    )
    lwhere = "WHERE src_path = ?" if path else ""
    links = list(
        conn.execute(
            "SELECT src_path, target, fragment, alias, embed, line, target_key, "
            f"in_frontmatter, status, resolved_path FROM links {lwhere} ORDER BY 1, 6, 2",
            args,
        )
    )
    return [*secs, *rows, *names, *links]


def entry(n: int, kind: str = "plain") -> list[str]:
    """Timeline entry ``n``: a time, a fenced output (which may hold text that looks
    like a block id, a heading or a blank line), sometimes a tag or a link."""
    out = [f"**10:{n // 60 % 60:02d}:{n % 60:02d}** · tool **Bash** · ok", "", "output:", ""]
    body = [f"line {n} " + "parser offsets kept " * 14]
    if n % 7 == 0:
        body += ["", f"^t{n + 1}", "", "## not a heading", "<!-- not a comment"]
    out += ["~~~~text", *body, "~~~~", ""]
    if n % 5 == 0:
        out += [f"see [[Parser notes#^t{n}]] and #parsing and `code ^t{n}`", ""]
    if kind == "open":
        out += ["~~~~text", "left open"]
        return out
    if kind == "heading":
        out += ["## Later", "", "text under a later heading", ""]
    if kind == "comment":
        out += ["<!-- a comment", "-->", ""]
    out += [f"^t{n}", ""]
    return out


def version(
    n: int,
    *,
    files: int = 1,
    last: str = "plain",
    edit: int = 0,
    dup: bool = False,
    extra: tuple[str, ...] = (),
) -> bytes:
    """A session page of ``n`` entries; ``files``: frontmatter lines of files; ``last``:
    what the last entry holds; ``edit``: an entry whose text changed; ``dup``: the last
    entry repeats the first one's id; ``extra``: more frontmatter lines."""
    front = ["---", "type: session", "title: Fix the parser", "project: p"]
    front += ["started: 2026-01-01T10:00:00Z", "tags: [session]", "files:"]
    front += [f"- f{i}.py" for i in range(files)]
    front += extra
    body = ["# Fix the parser", "", "## Summary", "", f"- **Last reply:** entry {n} #summary", ""]
    body += ["## Timeline", ""]
    for i in range(1, n + 1):
        lines = entry(i, last if i == n else "plain")
        if i == edit:
            lines = [ln.replace("parser offsets", "lexer offsets") for ln in lines]
        if dup and i == n:
            lines = [ln if ln != f"^t{n}" else "^t1" for ln in lines]
        body += lines
    return ("\n".join(front + ["---"] + body).rstrip("\n") + "\n").encode()


def steps() -> list[bytes]:
    """Versions of one page, each the next the index sees."""
    out = [version(n) for n in range(90, 100)]
    out += [version(100, files=3), version(101, files=3), version(102, files=2)]
    out += [version(103, last="open"), version(104), version(105, last="heading")]
    out += [version(106), version(107, last="comment"), version(108), version(109, edit=50)]
    out += [version(110, edit=50), version(111, dup=True), version(112), version(60)]
    out += [version(n) for n in range(61, 66)]
    # YAML that does not parse, with a line like a block id between blank lines in it
    out += [version(n, extra=("bad: [open", "", "^t0", "")) for n in (66, 67)]
    out += [version(68)]
    return out


def test_each_version_of_a_grown_page_indexes_as_a_fresh_index_of_it(tmp_path: Path) -> None:
    pagetail.clear()
    assert len(version(90)) > pagetail.MIN_BYTES
    live = Index(tmp_path / "live.db")
    parts = 0
    try:
        for i, raw in enumerate(steps()):
            parts += pagetail.parse(PATH, raw) is not None
            live.upsert_page(PATH, raw)
            fresh = Index(tmp_path / f"fresh{i}.db")
            try:
                fresh.upsert_page(PATH, raw)
                assert table(live) == table(fresh), f"version {i}"
            finally:
                fresh.close()
            assert pages.prepare(PATH, raw, None, grown=True) == pages.prepare(PATH, raw, None)
    finally:
        live.close()
        pagetail.clear()
    # the versions that only grew were read by their parts; the others whole
    assert 10 <= parts < len(steps()), parts


def event(name: str, **payload: Any) -> dict[str, Any]:
    """A Claude Code hook's event as the installed hook posts it."""
    payload.update(session_id="long-1", cwd="/home/dev/atlas", hook_event_name=name)
    return {"harness": "claude-code", "project": "atlas", "payload": payload}


def turn(n: int) -> list[dict[str, Any]]:
    return [
        event("UserPromptSubmit", prompt=f"prompt {n}: look at the parser again " * 4),
        event(
            "PostToolUse",
            tool_name="Bash",
            tool_use_id=f"toolu_{n}",
            tool_input={"command": f"grep -n parse src/mod{n % 7}.py"},
            tool_response={"stdout": f"12: def parse(x):  # ^t{n}\n\n## out\n" * 3, "stderr": ""},
        ),
        event("Stop", last_assistant_message=f"reply {n}: offsets kept #parser " * 4),
    ]


def test_a_long_session_indexed_turn_by_turn_equals_a_fresh_reindex(tmp_path: Path) -> None:
    pagetail.clear()
    mem = make_memory(tmp_path / "data")
    try:
        batch: list[dict[str, Any]] = []
        for n in range(1, 121):
            batch.extend(turn(n))
        mem.capture(batch, as_user(mem, "alice"))
        mem.writer.flush()
        for n in range(121, 151):
            for ev in turn(n):
                mem.capture(ev, as_user(mem, "alice"))
            mem.writer.flush()
        wiki = mem.settings.wiki_dir
        sessions = sorted(p for p in wiki.rglob("sessions/*.md"))
        assert len(sessions) == 1
        path = sessions[0].relative_to(wiki).as_posix()
        raw = sessions[0].read_bytes()
        assert b"^t450" in raw and len(raw) > pagetail.MIN_BYTES
        # the last turns were indexed by their new part
        assert pagetail.parse(path, raw) is not None
        live = table(mem.index)
    finally:
        mem.stop()
        pagetail.clear()
    fresh = Index(tmp_path / "fresh.db")
    try:
        fresh.rebuild(wiki)
        again = table(fresh)
    finally:
        fresh.close()
    assert len(live) > 450
    for a, b in zip(live, again, strict=True):
        assert a == b
