"""What a client may name when it writes: page paths and texts, and project folders.

Every face that writes a page a client sent (``PUT /v1/pages/{path}``, the MCP tool
``page_write``) checks the path and redacts the text here, and every face that writes
into a project's folder (``memory_remember``, ``POST /v1/remember``, the MCP tools that
take a ``project``) turns the name it was given into one folder name here, so that the
faces cannot disagree on what is writable. Who may write the page (the scope rule) is
decided from the path alone, before the text is scanned
(:meth:`wiki_memory.core.scope.ScopeRule.write_check`), and again on the file itself by
:meth:`wiki_memory.core.memory.Memory.write_page`.
"""

from __future__ import annotations

from wiki_memory.capture.observation import ObservationError, project_name
from wiki_memory.capture.sanitize import redact_text
from wiki_memory.errors import BadRequest
from wiki_memory.wiki.paths import PathRefused, clean_rel

__all__ = [
    "INLINE_SCAN_CHARS",
    "PathNotWritable",
    "page_path_for_write",
    "page_text_for_write",
    "project_folder",
    "redact_page_text",
]


class PathNotWritable(PathRefused):
    """A page path that clients may read but not write (not ``.md``, or a hidden folder)."""


#: the longest text a face scans for secrets on its event loop; a longer one is scanned
#: in a worker thread (DESIGN.md invariant 13: the sanitizer takes about 0.1-0.3 s per MiB,
#: which every other request on the loop would wait for)
INLINE_SCAN_CHARS = 4096


def page_path_for_write(path: str) -> str:
    """The repo-relative path of a page a client wants to write, checked from the name
    alone (nothing is read). Raises PathRefused for a path outside ``wiki/`` or inside
    ``.git/``, PathNotWritable for a file that is not a ``.md`` page or sits in a hidden
    folder (``.obsidian/``, ``.trash/``: an editor's code and settings are not pages)."""
    rel = clean_rel(path)
    if not rel.lower().endswith(".md"):
        raise PathNotWritable("only .md pages can be written")
    if any(part.startswith(".") for part in rel.split("/")):
        raise PathNotWritable("a page cannot be written in a hidden folder")
    return rel


def redact_page_text(text: str) -> tuple[bytes, int]:
    """A page text a client sent, as UTF-8 bytes with secrets redacted, and the number
    of redactions. Linear in the text; a face on an event loop calls it in a worker
    thread for a text over :data:`INLINE_SCAN_CHARS`."""
    clean, found = redact_text(text)
    return clean.encode("utf-8"), len(found)


def page_text_for_write(path: str, text: str) -> tuple[str, bytes, int]:
    """Check a page path and text that a client wants to write:
    :func:`page_path_for_write` then :func:`redact_page_text`. Returns ``(repo-relative
    path, UTF-8 bytes with secrets redacted, number of redactions)``. A face decides the
    caller's right to write (``memory.scope.write_check``) between the two, before the scan."""
    rel = page_path_for_write(path)
    data, n = redact_page_text(text)
    return rel, data, n


def project_folder(name: str) -> str:
    """A project name usable as one folder (``projects/<name>/``).

    Raises BadRequest (``field="project"``, a ValueError) for a path, a name starting
    with a dot (``..`` included), NUL, or a name nothing usable is left of.
    """
    raw = name.strip()
    if not raw or "/" in raw or "\\" in raw or "\x00" in raw or raw.startswith("."):
        raise BadRequest(f"project must be a plain name, not a path: {name!r}", field="project")
    try:
        return project_name(raw)
    except ObservationError as exc:
        raise BadRequest(exc.message, field="project") from None
