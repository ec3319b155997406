"""The portable JSON form of a wiki's pages (docs/operations.md, "Export and import").

JSON Lines, UTF-8, one object per line, written and read one page at a time:

- the first line ``{"format": "wiki-memory-export", "version": 1, "created": ISO 8601,
  "pages": N}``;
- then one line per page (every ``*.md`` file of the wiki, ``.git`` and dot folders left
  out, by path): ``{"record": "page" | "handoff", "path", "metadata", "body", "text"}``
  where ``metadata`` is the parsed frontmatter (``{}`` when none), ``body`` the text after
  it (:func:`wiki_memory.wiki.page.parse_page`), and ``text`` the whole file, so an
  import gives the same bytes back; a file that is not UTF-8 has ``text_base64``
  instead. ``record`` is ``handoff`` for a page of a ``handoffs/`` folder whose
  frontmatter ``type`` is ``handoff``;
- then, optionally, one line per row of the use record (:mod:`wiki_memory.core.userecord`):
  ``{"record": "use", "day", "path", "user", "recalled", "expanded", "repeated"}``.
  An importer that does not know them skips them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from wiki_memory.wiki.page import parse_page

__all__ = ["FORMAT", "export_pages", "page_files", "read_export"]

FORMAT = "wiki-memory-export"


def page_files(wiki_dir: Path) -> list[str]:
    """Every page of the wiki: ``*.md`` regular files outside dot folders, by path."""
    out = []
    for p in wiki_dir.rglob("*.md"):
        rel = p.relative_to(wiki_dir)
        if any(part.startswith(".") for part in rel.parts) or p.is_symlink() or not p.is_file():
            continue
        out.append(rel.as_posix())
    return sorted(out)


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


def export_pages(
    wiki_dir: Path,
    out: TextIO,
    tick: Callable[[int], None] | None = None,
    use: Iterable[dict[str, Any]] = (),
) -> int:
    """Write the export of ``wiki_dir`` to ``out``, one page at a time; ``tick(1)`` after
    each page (a progress bar), then the rows ``use`` (the use record) as ``use`` records.
    Returns the number of pages."""
    paths = page_files(wiki_dir)
    head = {
        "format": FORMAT,
        "version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pages": len(paths),
    }
    out.write(json.dumps(head) + "\n")
    for rel in paths:
        out.write(json.dumps(_record(rel, (wiki_dir / rel).read_bytes()), ensure_ascii=False))
        out.write("\n")
        if tick is not None:
            tick(1)
    for row in use:
        out.write(json.dumps({"record": "use", **row}, ensure_ascii=False) + "\n")
    return len(paths)


def read_export(
    lines: Iterable[str], on_use: Callable[[dict[str, Any]], None] | None = None
) -> Iterator[tuple[int, str, bytes]]:
    """The pages of an export, as ``(line number, path as the record spells it, bytes)``,
    one at a time; each ``use`` record is handed to ``on_use`` (skipped without it).
    Whether a path may be written is not decided here: the importer hands
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
            if "text" in rec:
                raw = rec["text"].encode("utf-8")
            else:
                raw = base64.b64decode(rec["text_base64"], validate=True)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ValueError(f"line {n}: not a page record ({exc})") from None
        yield n, rel, raw
