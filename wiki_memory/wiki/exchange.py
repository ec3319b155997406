"""The portable JSON form of a wiki's pages (docs/operations.md, "Export and import").

JSON Lines, UTF-8, one object per line, written and read one page at a time:

- the first line ``{"format": "wiki-memory-export", "version": 1, "created": ISO 8601,
  "pages": N, "attachments": M, "omitted": {...}}`` where ``omitted`` counts what an
  export leaves out (:func:`left_out`: commits of history, spool files, tokens, audit
  lines, files in dot folders);
- then one line per page (every ``*.md`` file of the wiki, ``.git`` and dot folders left
  out, by path): ``{"record": "page" | "handoff", "path", "metadata", "body", "text",
  "mtime"}`` where ``metadata`` is the parsed frontmatter (``{}`` when none), ``body`` the
  text after it (:func:`wiki_memory.wiki.page.parse_page`), ``text`` the whole file, so an
  import gives the same bytes back (a file that is not UTF-8 has ``text_base64``
  instead), and ``mtime`` the file's modification time (epoch seconds: the time recall
  filters on for a page whose frontmatter has no ``updated`` or ``created``).
  ``record`` is ``handoff`` for a page of a ``handoffs/`` folder whose frontmatter
  ``type`` is ``handoff``;
- then one line per attachment (every other regular file outside dot folders, by path):
  ``{"record": "attachment", "path", "text_base64", "mtime"}``.
- then, optionally, one line per row of the use record (:mod:`wiki_memory.core.userecord`):
  ``{"record": "use", "day", "path", "user", "recalled", "expanded", "repeated", "read",
  "cited", "helped", "not_helpful"}``.
  An importer that does not know them skips them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from wiki_memory.wiki.oddnames import on_disk, page_name
from wiki_memory.wiki.page import parse_page

__all__ = [
    "FORMAT",
    "Exported",
    "Record",
    "attachment_files",
    "export_pages",
    "left_out",
    "page_files",
    "read_export",
]

FORMAT = "wiki-memory-export"


def page_files(wiki_dir: Path) -> list[str]:
    """Every page of the wiki: ``*.md`` regular files outside dot folders, by path (a
    name that is not valid UTF-8 by its escaped name, :mod:`wiki_memory.wiki.oddnames`;
    read it with ``on_disk``)."""
    return sorted(rel for rel, _p in _plain_files(wiki_dir) if rel.endswith(".md"))


def _plain_files(wiki_dir: Path) -> Iterator[tuple[str, Path]]:
    """Every regular file of the wiki outside dot folders (and ``.git``), with its path
    (a name that is not valid UTF-8 by its escaped name; one that has none is left
    out, as the index leaves it out)."""
    for p in wiki_dir.rglob("*"):
        rel = p.relative_to(wiki_dir)
        if any(part.startswith(".") for part in rel.parts) or p.is_symlink() or not p.is_file():
            continue
        name = page_name(wiki_dir, rel.as_posix())
        if name is not None:
            yield name, p


def attachment_files(wiki_dir: Path) -> list[str]:
    """Every file of the wiki an export carries besides the pages (images, PDFs, ...):
    regular files outside dot folders that are not ``*.md``, by path."""
    return sorted(rel for rel, _p in _plain_files(wiki_dir) if not rel.endswith(".md"))


def left_out(wiki_dir: Path, data_dir: Path | None) -> dict[str, int]:
    """What an export of ``wiki_dir`` does not carry, counted: ``history`` (commits
    reachable from HEAD), ``spool`` (files of observations not yet compiled), ``tokens``
    (token records), ``audit`` (lines of the audit log) and ``dot_files`` (files in dot
    folders of the wiki, e.g. ``.obsidian/`` settings). ``data_dir`` None (a wiki named
    by path): the spool, tokens and audit log are not looked for and count 0. A backup
    keeps them all (docs/operations.md)."""
    from dulwich.repo import Repo

    counts = {"history": 0, "spool": 0, "tokens": 0, "audit": 0, "dot_files": 0}
    try:
        repo = Repo(str(wiki_dir))
    except Exception:  # noqa: BLE001 - no repository: no history to leave out
        repo = None
    if repo is not None:
        try:
            counts["history"] = sum(1 for _ in repo.get_walker())
        except (KeyError, ValueError):  # no commit yet
            pass
        finally:
            repo.close()
    for p in wiki_dir.rglob("*"):
        rel = p.relative_to(wiki_dir)
        if rel.parts[0] != ".git" and any(part.startswith(".") for part in rel.parts):
            if p.is_file() and not p.is_symlink():
                counts["dot_files"] += 1
    if data_dir is not None:
        spool = data_dir / "spool"
        if spool.is_dir():
            counts["spool"] = sum(1 for f in spool.rglob("*.jsonl") if f.is_file())
        tokens = data_dir / "auth" / "tokens.json"  # the owner's token is listed there too
        try:
            records = json.loads(tokens.read_bytes()).get("tokens", {})
            counts["tokens"] = len(records) if isinstance(records, (dict, list)) else 0
        except (OSError, ValueError, AttributeError):
            pass
        try:
            with open(data_dir / "logs" / "audit.jsonl", "rb") as f:
                counts["audit"] = sum(1 for _ in f)
        except OSError:
            pass
    return counts


def _record(rel: str, raw: bytes) -> dict[str, Any]:
    parsed = parse_page(raw, rel)
    meta = parsed.metadata if isinstance(parsed.metadata, dict) else {}
    kind = "handoff" if "/handoffs/" in f"/{rel}" and meta.get("type") == "handoff" else "page"
    rec: dict[str, Any] = {"record": kind, "path": rel, "metadata": meta, "body": parsed.body}
    try:
        rec["text"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        rec["text_base64"] = base64.b64encode(raw).decode()
    return rec


@dataclass(frozen=True)
class Exported:
    """What :func:`export_pages` wrote: ``pages`` and ``attachments`` (counts) and
    ``omitted`` (:func:`left_out`'s counts, as the header says them)."""

    pages: int
    attachments: int
    omitted: dict[str, int]


def export_pages(
    wiki_dir: Path,
    out: TextIO,
    tick: Callable[[int], None] | None = None,
    data_dir: Path | None = None,
    use: Iterable[dict[str, Any]] = (),
) -> Exported:
    """Write the export of ``wiki_dir`` to ``out``, one file at a time; ``tick(1)`` after
    each page or attachment (a progress bar), then the rows ``use`` (the use record) as
    ``use`` records. ``data_dir`` is the wiki's data directory when it has one (for the
    counts of what is left out). Raises OSError."""
    paths = page_files(wiki_dir)
    attachments = attachment_files(wiki_dir)
    omitted = left_out(wiki_dir, data_dir)
    head = {
        "format": FORMAT,
        "version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pages": len(paths),
        "attachments": len(attachments),
        "omitted": omitted,
    }
    out.write(json.dumps(head) + "\n")
    for rel in paths:
        full = on_disk(wiki_dir, rel)
        rec = _record(rel, full.read_bytes())
        rec["mtime"] = full.stat().st_mtime
        out.write(json.dumps(rec, ensure_ascii=False))
        out.write("\n")
        if tick is not None:
            tick(1)
    for rel in attachments:
        full = on_disk(wiki_dir, rel)
        rec = {
            "record": "attachment",
            "path": rel,
            "text_base64": base64.b64encode(full.read_bytes()).decode(),
            "mtime": full.stat().st_mtime,
        }
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if tick is not None:
            tick(1)
    for row in use:
        out.write(json.dumps({"record": "use", **row}, ensure_ascii=False) + "\n")
    return Exported(len(paths), len(attachments), omitted)


@dataclass(frozen=True)
class Record:
    """One file of an export: its ``line`` number, ``kind`` (``page``, ``handoff`` or
    ``attachment``), ``path`` as the record spells it, ``raw`` bytes and ``mtime``
    (epoch seconds, None when the record has none or an unusable one)."""

    line: int
    kind: str
    path: str
    raw: bytes
    mtime: float | None


def read_export(
    lines: Iterable[str], on_use: Callable[[dict[str, Any]], None] | None = None
) -> Iterator[Record]:
    """The files of an export (pages and attachments) as :class:`Record`, one at a time;
    each ``use`` record is handed to ``on_use`` (skipped without it). Whether a path may
    be written is not decided here: the importer hands
    each to the border (:func:`wiki_memory.wiki.border.check`). Raises ValueError for a
    file that is not an export or a line that is not a page record (naming its number)."""
    it = iter(lines)
    try:
        head = json.loads(next(it))
    except (StopIteration, json.JSONDecodeError):
        raise ValueError("not a wiki-memory export (no header line)") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT or head.get("version") != 1:
        raise ValueError("not a wiki-memory export of version 1")
    for n, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("record") == "use":
                if on_use is not None:
                    on_use(rec)
                continue
            rel = rec["path"]
            if not isinstance(rel, str):
                raise TypeError("the path is not a string")
            kind = rec.get("record", "page")
            if kind not in ("page", "handoff", "attachment"):
                raise TypeError(f"unknown record {kind!r}")
            if "text" in rec:
                raw = rec["text"].encode("utf-8")
            else:
                raw = base64.b64decode(rec["text_base64"], validate=True)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ValueError(f"line {n}: not a page record ({exc})") from None
        mtime = rec.get("mtime")
        ok = isinstance(mtime, (int, float)) and not isinstance(mtime, bool)
        ok = ok and 0 <= mtime < 253402300800  # the years 1970-9999
        yield Record(n, kind, rel, raw, float(mtime) if ok else None)
