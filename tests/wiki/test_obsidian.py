"""Real Obsidian vaults served in place with ``serve --wiki``, counted independently; the
round trip of every page through a server write; ``doctor`` and ``import``.

The independent counter below shares no code with the product: markdown-it-py finds the
code blocks, PyYAML's BaseLoader reads the frontmatter, and a few regexes written for this
test find links, tags and code spans.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from clikit import run_cli_here
from markdown_it import MarkdownIt
from serverproc import ServerProcess
from support import shared_path

from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout
from wiki_memory.wiki.frontmatter import set_keys

VAULTS = ["obsidian-tasks-docs", "obsidian-tasks-demo"]

# --------------------------------------------------------------------------- independent count

_MD = MarkdownIt("commonmark")
_LINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(
    r"(?:(?<=\s)|(?<=^)|(?<=>))#([^\s!-,.:-@\[-^`{-~\u3000-\u303f\u2018-\u201f\u2026]+)", re.M
)
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _key(s: str) -> str:
    return " ".join(
        unicodedata.normalize("NFC", unicodedata.normalize("NFC", s).casefold()).split()
    )


def _strings(v: Any) -> Any:
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)


def _values(v: Any, split: str) -> list[str]:
    if v is None:
        return []
    out: list[str] = []
    for it in v if isinstance(v, list) else [v]:
        if isinstance(it, (dict, list)) or it is None:
            continue
        parts = re.split(split, it) if (not isinstance(v, list) or split == r"[,\s]+") else [it]
        out += [p.strip() for p in parts if p.strip()]
    return out


def _dedupe(xs: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in xs:
        if x and x.casefold() not in seen and not re.fullmatch(r"[\d/]+", x):
            seen.add(x.casefold())
            out.append(x)
    return out


def _link(bang: str, inner: str) -> tuple[str, bool]:
    head = inner.partition("|")[0].rstrip()
    if head.endswith("\\"):
        head = head[:-1]
    return head.partition("#")[0].strip(), bool(bang)


def count_page(text: str) -> dict[str, Any]:
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    meta: Any = {}
    links: list[tuple[str, bool]] = []
    body_at = 0
    if lines[0].rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
        if end is not None:
            body_at = end + 1
            try:
                meta = yaml.load("\n".join(lines[1:end]), Loader=yaml.BaseLoader) or {}
            except yaml.YAMLError:
                meta = {}
            meta = meta if isinstance(meta, dict) else {}
            for s in _strings(meta):
                links += [_link(*m.groups()) for m in _LINK.finditer(s)]
    body_lines = lines[body_at:]
    toks = _MD.parse("\n".join(body_lines))
    code: set[int] = set()
    for t in toks:
        if t.type in ("fence", "code_block") and t.map:
            code.update(range(*t.map))
    body = "\n".join("" if i in code else ln for i, ln in enumerate(body_lines))
    body = "".join(_SPAN.sub(" ", p) for p in re.split(r"(\n[ \t]*\n)", body))
    body = _COMMENT.sub(" ", body)
    links += [_link(*m.groups()) for m in _LINK.finditer(body)]
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    if not (title and title.strip()):
        title = next(
            (
                toks[i + 1].content.strip()
                for i, t in enumerate(toks)
                if t.type == "heading_open" and t.tag == "h1"
            ),
            None,
        )
    tags = [t.lstrip("#") for t in _values(meta.get("tags"), r"[,\s]+")]
    tags += [m.group(1).rstrip("/") for m in _TAG.finditer(body)]
    return {
        "links": [lk for lk in links if lk[0]],
        "title": title,
        "aliases": _dedupe(_values(meta.get("aliases"), ",")),
        "tags": _dedupe(tags),
    }


def count_vault(root: Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Counts over every page: links (to a target), embeds, resolved, unresolved,
    attachments, aliases and tags; plus the unresolved (page, target) pairs."""
    pages: dict[str, dict[str, Any]] = {}
    for dp, dn, fn in os.walk(root):
        dn[:] = [d for d in dn if not d.startswith(".")]
        for f in fn:
            if f.endswith(".md") and not f.startswith("."):
                rel = os.path.relpath(os.path.join(dp, f), root).replace(os.sep, "/")
                with open(os.path.join(dp, f), encoding="utf-8", errors="replace") as fh:
                    pages[rel] = count_page(fh.read())
    names: dict[str, set[str]] = {}
    for rel, p in pages.items():
        parts = rel[:-3].split("/")
        keys = {_key("/".join(parts[i:])) for i in range(len(parts))}
        keys.add(_key(p["title"] or parts[-1]))
        keys |= {_key(a) for a in p["aliases"]}
        for k in keys:
            names.setdefault(k, set()).add(rel)
    c = dict.fromkeys(
        ["pages", "links", "embeds", "resolved", "unresolved", "attachments", "aliases", "tags"], 0
    )
    c["pages"] = len(pages)
    unresolved = []
    for rel, p in pages.items():
        c["aliases"] += len(p["aliases"])
        c["tags"] += len(p["tags"])
        for tgt, emb in p["links"]:
            c["links"] += 1
            c["embeds"] += emb
            k = _key(tgt[:-3] if tgt.lower().endswith(".md") else tgt)
            if k in names:
                c["resolved"] += 1
            elif re.search(r"\.[A-Za-z0-9]{1,10}$", tgt):
                c["attachments"] += 1
            else:
                c["unresolved"] += 1
                unresolved.append((rel, tgt))
    return c, sorted(unresolved)


# --------------------------------------------------------------------------- serve --wiki


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def vault_copy(tmp_path: Path, name: str, as_repo: bool) -> Path:
    dst = tmp_path / name
    shutil.copytree(shared_path("data", "vaults", name, "vault"), dst)
    if as_repo:  # an existing repository with its own history and branch
        git(dst, "init", "-q", "-b", "trunk")
        git(dst, "-c", "user.name=P", "-c", "user.email=p@x", "add", "-A")
        git(dst, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-qm", "my vault")
    return dst


def served_counts(srv: ServerProcess) -> tuple[dict[str, int], list[tuple[str, str]], list[Any]]:
    """The same counts, from the API only: GET /v1/pages, then every page."""
    listing = srv.get("/v1/pages", params={"limit": 1000}).json()["pages"]
    c = dict.fromkeys(
        ["pages", "links", "embeds", "resolved", "unresolved", "attachments", "aliases", "tags"], 0
    )
    c["pages"] = len(listing)
    unresolved = []
    diagnostics = []
    with httpx.Client(headers=srv.headers, timeout=60) as client:
        for row in listing:
            c["aliases"] += len(row["aliases"])
            c["tags"] += len(row["tags"])
            r = client.get(f"{srv.url}/v1/pages/{row['path']}")
            assert r.status_code == 200, (row["path"], r.text)
            page = r.json()
            for lk in page["links"]:
                c["links"] += 1
                c["embeds"] += lk["embed"]
                c[lk["status"]] += 1
                if lk["status"] == "unresolved":
                    unresolved.append((row["path"], lk["target"]))
            for at in page["attachments"]:
                c["links"] += 1
                c["embeds"] += at["embed"]
                c["attachments"] += 1
            diagnostics += [(row["path"], d) for d in page["diagnostics"]]
    return c, sorted(unresolved), diagnostics


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
@pytest.mark.parametrize("name", VAULTS)
def test_vault_served_in_place_and_indexed_whole(tmp_path, name):
    demo = name.endswith("demo")
    vault = vault_copy(tmp_path, name, as_repo=demo)
    app_json = (vault / ".obsidian" / "app.json").read_bytes()
    want, want_unresolved = count_vault(vault)
    data = tmp_path / "data"
    with ServerProcess(data, args=["--wiki", str(vault)]) as srv:
        got, unresolved, diagnostics = served_counts(srv)
        assert got == want
        assert unresolved == want_unresolved
        # the README's own independent counts agree where they count the same thing
        if demo:
            assert unresolved == [
                ("Test Data/link_in_task_wikilink.md", "pa"),
                ("Test Data/link_is_broken.md", "broken link - do not fix me"),
            ]
            assert got["embeds"] == 29  # + 1 same-page embed ![[#^ca47c7]] = the README's 30
        else:
            assert (got["pages"], got["links"] - got["embeds"], got["embeds"]) == (118, 980, 28)
            assert got["aliases"] == 22 and got["unresolved"] == 0
        kinds = {d["kind"] for _, d in diagnostics}
        assert [p for p, d in diagnostics if d["kind"] == "unresolved_link"] == [
            p for p, _ in want_unresolved
        ]
        assert "ambiguous_link" not in kinds
        assert "frontmatter_invalid" not in kinds
        # every page can be found by its title
        for path in ("Tasks.md",) if demo else ("Getting Started/Priority.md",):
            title = Path(path).stem
            r = srv.post("/v1/recall", {"query": title, "budget_tokens": 4000})
            assert path in {i["path"] for i in r.json()["items"]}
        # doctor: healthy, and reports the two broken links as unresolved, nothing else
        r = run_cli(data, "doctor", "--wiki", str(vault), "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        rep = json.loads(r.stdout)
        assert rep["ok"] and rep["lock"]["server_running"]
        assert rep["index"]["lag"] == 0
        bad = [(p["src_path"], p["target"]) for p in rep["links"]["problems"]]
        unresolved_rep = [
            (p["src_path"], p["target"])
            for p in rep["links"]["problems"]
            if p["status"] == "unresolved"
        ]
        assert unresolved_rep == want_unresolved
        assert len(bad) == len(want_unresolved) + want["attachments"]  # + missing images
        # reindex of another folder while this one is served: refused, naming both
        other = tmp_path / "other"
        other.mkdir()
        r = run_cli(data, "reindex", "--wiki", str(other))
        assert r.returncode == 2 and str(vault.resolve()) in r.stderr, r.stdout + r.stderr
    # once the server stops, plain doctor and reindex follow the vault this data directory
    # indexed, instead of comparing its index with the empty default wiki
    r = run_cli(data, "doctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert (rep["wiki"], rep["wiki_source"], rep["index"]["lag"]) == (
        str(vault.resolve()),
        "index",
        0,
    )
    r = run_cli(data, "reindex", "--quiet")
    assert r.returncode == 0, r.stderr
    assert f"reindexed {want['pages']} pages of {vault.resolve()}" in r.stdout
    # the vault is still the person's repository: branch, history, settings untouched
    assert (vault / ".obsidian" / "app.json").read_bytes() == app_json
    if demo:
        assert git(vault, "rev-parse", "--abbrev-ref", "HEAD") == "trunk"
        assert git(vault, "log", "--format=%s") == "my vault"
        assert git(vault, "status", "--porcelain") == ""
    assert not (data / "wiki").exists() or not any((data / "wiki").iterdir())


# --------------------------------------------------------------------------- round trip


def only_key_line_changed(before: bytes, after: bytes, key: str) -> None:
    """``after`` differs from ``before`` only in ``key``'s line (plus the two fence lines
    when the page had no frontmatter)."""
    a = before.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    b = after.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        assert tag == "insert" or all(ln.startswith(f"{key}:") for ln in a[i1:i2]), a[i1:i2]
        added += b[j1:j2]
    eol = "\r\n" if a and a[0].endswith("\r\n") else "\n"
    fences = [ln for ln in added if ln.rstrip("\r\n") == "---"]
    (line,) = [ln for ln in added if ln not in fences]
    # block style, or a line of its own inside JSON-style frontmatter ({ ... })
    assert line in (
        f"{key}: 2026-12-01T10:00:00Z{eol}",
        f'  , "{key}": "2026-12-01T10:00:00Z"{eol}',
    )
    assert not fences or fences == [f"---{eol}"] * 2


@pytest.mark.slow
def test_round_trip_of_every_vault_page_through_a_server_write(tmp_path):
    settings = load_settings(tmp_path / "data", watch=False, commit_delay_seconds=0.05)
    ensure_layout(settings)
    originals: dict[str, bytes] = {}
    for name in VAULTS:
        src = shared_path("data", "vaults", name, "vault")
        shutil.copytree(src, settings.wiki_dir / name)
        for p in (settings.wiki_dir / name).rglob("*.md"):
            originals[p.relative_to(settings.wiki_dir).as_posix()] = p.read_bytes()
    assert len(originals) == 297
    m = Memory(settings, owner_user="owner")
    m.start()
    try:
        for rel in sorted(originals):
            m.update_page(
                rel,
                lambda cur: set_keys(cur or b"", {"updated": "2026-12-01T10:00:00Z"}),
                user="owner",
                message="stamp",
            )
        m.writer.flush()
        for rel, before in originals.items():
            after = (settings.wiki_dir / rel).read_bytes()
            only_key_line_changed(before, after, "updated")
            assert m.index.page_meta(rel)["updated"] == "2026-12-01T10:00:00Z"  # type: ignore[index]
        # a second write of the same value changes nothing
        before_head = m.git.head()
        for rel in list(originals)[:20]:
            res = m.update_page(
                rel,
                lambda cur: set_keys(cur or b"", {"updated": "2026-12-01T10:00:00Z"}),
                user="owner",
                message="stamp again",
            )
            assert res.value is None
        m.writer.flush()
        assert m.git.head() == before_head
    finally:
        m.stop()


# --------------------------------------------------------------------------- import


def run_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``wiki-memory --data-dir DATA ARGS...`` in this process (import, reindex and doctor
    change nothing of the process; the command's parsing and messages are the same)."""
    return run_cli_here(data, *args)


@pytest.mark.process
def test_import_copies_a_vault_and_never_overwrites(tmp_path):
    src = tmp_path / "vault"
    (src / ".obsidian").mkdir(parents=True)
    (src / ".obsidian" / "app.json").write_text("{}")
    (src / ".obsidian" / "workspace.json").write_text("{}")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/x\n")
    (src / ".trash").mkdir()
    (src / ".trash" / "old.md").write_text("old")
    (src / "sub").mkdir()
    (src / "sub" / "Cafe\u0301.md").write_text("# Café\n[[Other]]\n")  # NFD name
    (src / "Other.md").write_text("# Other\n")
    (src / "img.png").write_bytes(b"\x89PNG")
    (src / "notes.md~").write_text("backup")
    os.symlink("/etc/hostname", src / "link.md")
    data = tmp_path / "data"
    r = run_cli(data, "import", str(src))
    assert r.returncode == 0, r.stderr
    wiki = data / "wiki"
    files = sorted(p.relative_to(wiki).as_posix() for p in wiki.rglob("*") if p.is_file())
    files = [f for f in files if not f.startswith(".git/")]
    assert files == [".gitignore", ".obsidian/app.json", "Other.md", "img.png", "sub/Café.md"]
    assert "sub/Café.md" in files and unicodedata.is_normalized("NFC", files[-1])
    assert "skipped link.md (mode: symbolic link)" in r.stdout
    log = git(wiki, "log", "--format=%an|%s")
    assert log.splitlines()[0].startswith("owner|Import vault vault (4 files, 2 pages)")
    # again, with one file changed meanwhile: same files skipped, the changed one not copied
    (src / "Other.md").write_text("# Other, changed\n")
    r2 = run_cli(data, "import", str(src))
    assert r2.returncode == 1
    assert "not copied: Other.md" in r2.stderr
    assert (wiki / "Other.md").read_text() == "# Other\n"
    r3 = run_cli(data, "import", str(src), "--into", "archive/v1")
    assert r3.returncode == 0, r3.stderr
    assert (wiki / "archive/v1/Other.md").read_text() == "# Other, changed\n"
    assert not (wiki / "archive/v1/.obsidian").exists()
    assert run_cli(data, "import", str(wiki)).returncode == 2  # the wiki itself


# --------------------------------------------------------------------------- doctor


@pytest.mark.process  # doctor asks systemctl about the service
def test_doctor_reports_problems_and_exits_non_zero(tmp_path):
    data = tmp_path / "data"
    wiki = data / "wiki"
    wiki.mkdir(parents=True)
    (wiki / "a.md").write_text(
        "---\ntitle: A\ndescription: Rules (OPS/DEV): check\n---\n[[Nowhere]]\n"
    )
    (wiki / "x").mkdir()
    (wiki / "y").mkdir()
    (wiki / "x" / "dup.md").write_text("# dup\n")
    (wiki / "y" / "dup.md").write_text("# dup\n")
    (wiki / "b.md").write_text("[[dup]] ![[pic.png]]\n")
    (wiki / "daily.md~").write_text("backup")
    (wiki / "c.md~.md").write_text("fine name\n")
    os.symlink("/etc/hostname", wiki / "s.md")
    r = run_cli(data, "reindex", "--quiet")
    assert r.returncode == 0, r.stderr
    r = run_cli(data, "doctor", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0  # warnings only: healthy
    assert rep["ok"] is True
    assert "not a git repository yet (the server creates one at start)" in rep["warnings"]
    probs = {(p["status"], p["target"]) for p in rep["links"]["problems"]}
    assert probs == {
        ("unresolved", "Nowhere"),
        ("ambiguous", "dup"),
        ("missing_attachment", "pic.png"),
    }
    assert [d["kind"] for d in rep["pages"]["diagnostics"]] == ["frontmatter_invalid"]
    assert {s["path"] for s in rep["skipped"]} == {"s.md"}
    # a page the index has not seen yet is lag: an error
    (wiki / "new.md").write_text("# New\n")
    r = run_cli(data, "doctor")
    assert r.returncode == 1
    assert "ERROR: the index is behind the files: 1 page(s) not indexed" in r.stdout
    assert "unresolved: a.md:5 [[Nowhere]]" in r.stdout
    run_cli(data, "reindex", "--quiet")
    rep = json.loads(run_cli(data, "doctor", "--json").stdout)
    assert rep["index"]["lag"] == 0
    # --strict: warnings count
    assert run_cli(data, "doctor", "--strict").returncode == 1
