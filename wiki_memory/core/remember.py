"""Remember: one note written into a project's shared notes folder.

:func:`remember` owns the whole operation every face calls (the MCP tool
``memory_remember``, ``POST /v1/remember``): the title (as given, else the text's own
frontmatter ``title``, else its first line), the tags, the note's frontmatter
(``type: note``, ``id``, ``title``, ``created``, ``updated``, ``project``, ``tags``,
``user``, ``harness``, ``session``), a file name that is legal on Windows, macOS and
Linux and not taken yet (``wiki_memory.wiki.names``), secrets redacted before anything
reaches the disk, and a create-only write (a note never overwrites a page).

The caller's right to write into the project's notes folder is decided before the text
is parsed or scanned. It needs only a page writer (:class:`NoteWriter`: ``wiki_dir``,
``scope.write_check`` and ``write_page``), so
it does not import :mod:`wiki_memory.core.memory`; ``Memory`` is one.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from wiki_memory.capture.observation import iso
from wiki_memory.capture.sanitize import redact_text
from wiki_memory.core.pages import project_folder
from wiki_memory.errors import BadRequest, Conflict
from wiki_memory.wiki.frontmatter import dump_page
from wiki_memory.wiki.names import unique_page_path
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.core.writer import WriteResult

__all__ = ["NoteWriter", "Remembered", "remember", "portable_name", "MAX_TEXT_CHARS"]

#: the longest note text, in characters (the MCP tool's schema says the same)
MAX_TEXT_CHARS = 200_000
#: the longest ``harness`` and ``session_id`` (the MCP tools' schemas say the same)
MAX_HARNESS_CHARS = 100
MAX_SESSION_CHARS = 200
#: the harness a note is attributed to when the caller names none
DEFAULT_HARNESS = "api"
#: how many taken names are stepped over before giving up
_MAX_TRIES = 1000

# Windows' reserved device names (also with an extension: "con.md" is the device too)
_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{p}{i}" for p in ("COM", "LPT") for i in range(10)}
_UNPORTABLE = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
_TAG_RE = re.compile(r"^[\w/\-]+$", re.UNICODE)


class WriteCheck(Protocol):
    """The scope rule's check of a write (:class:`wiki_memory.core.scope.ScopeRule`)."""

    def write_check(self, who: str, path: str, op: str = ...) -> tuple[str, Path]: ...


class NoteWriter(Protocol):
    """What :func:`remember` needs of the memory (``wiki_memory.core.memory.Memory``)."""

    @property
    def wiki_dir(self) -> Path: ...

    @property
    def scope(self) -> WriteCheck: ...

    def write_page(
        self,
        path: str,
        data: bytes,
        *,
        user: str,
        message: str,
        create_only: bool = ...,
        who: str | None = ...,
    ) -> WriteResult: ...


class Remembered(TypedDict):
    """The result of :func:`remember` (and of both faces). ``indexed`` is present, and
    False, only when the note was written and committed but its index update failed
    (it is indexed again later)."""

    path: str
    id: str
    title: str
    hash: str
    redacted: int
    indexed: NotRequired[bool]


def remember(
    memory: NoteWriter,
    text: str,
    *,
    project: str,
    title: str | None = None,
    tags: list[str] | None = None,
    user: str,
    harness: str | None = None,
    session_id: str | None = None,
) -> Remembered:
    """Write ``text`` as a new note ``projects/<project>/notes/<name>.md``; return
    ``{path, id, title, hash, redacted}``.

    - ``project``: a plain name (one folder); cleaned as the hooks clean it.
    - ``title``: kept exactly as given (secrets redacted); without one, the ``title`` of
      the frontmatter ``text`` opens with, else its first non-empty line (80 characters).
      The file name comes from it (``wiki_memory.wiki.names``): legal everywhere, and a
      name already taken (case-insensitively) gets `` 2``, `` 3``…, never an overwrite.
    - ``tags``: plus the frontmatter's ``tags``; ``#`` stripped, words, ``/`` and ``-``
      only, duplicates dropped, at most 50. Every other frontmatter key of ``text`` is
      dropped (``pinned``, ``visibility``, ``user`` included: a note is shared and
      nobody pins by remembering).
    - ``user``: who remembers (the note's ``user``, the commit's author, and the caller
      the scope rule checks the write for); ``harness`` (default ``"api"``) and
      ``session_id`` (left out of the frontmatter when None) are recorded as given.
    - ``hash``: sha256 hex of the bytes written; ``redacted``: how many secrets were
      replaced by ``[REDACTED:<kind>]`` in the title and the text.

    Raises BadRequest (a ValueError) naming the field: ``text`` empty or not a string or
    over :data:`MAX_TEXT_CHARS`, ``project`` missing, a path or starting with a dot,
    ``title`` not a string or a path with ``..`` in it, ``tags`` not a list of strings,
    ``harness``/``session_id`` not a string or too long, or
    (``field="title"``) too many notes of this title. The writer's own errors pass
    through (NotFound for a folder the caller may not see, GitBusy…).
    """
    _check(text, project, title, tags, harness, session_id)
    proj = project_folder(project)
    folder = f"projects/{proj}/notes"
    # the right to write there, before the text is parsed or scanned (DESIGN.md 13)
    memory.scope.write_check(user, folder)
    body, fm_title, fm_tags = _split_frontmatter(text)
    # the title is kept exactly as given (C27); only the file name is made portable
    if not (title and title.strip()):
        title = fm_title if fm_title and fm_title.strip() else _title_from(body)
    if any(seg.strip() == ".." for seg in re.split(r"[/\\]", title)):
        raise BadRequest("a title cannot be a path with '..' in it", field="title")
    all_tags = _clean_tags(list(tags or []) + fm_tags)
    clean_body, found = redact_text(body)
    clean_title, found_t = redact_text(title)
    harness = (harness or "").strip() or DEFAULT_HARNESS
    now = time.time()
    meta: dict[str, Any] = {
        "type": "note",
        "id": f"note_{uuid.uuid4().hex[:16]}",
        "title": clean_title,
        "created": iso(now),
        "updated": iso(now),
        "project": proj,
        "tags": all_tags,
        "user": user,
        "harness": harness,
    }
    if session_id:
        meta["session"] = session_id
    data = dump_page(meta, clean_body.strip("\n") + "\n").encode("utf-8")
    for _ in range(_MAX_TRIES):
        # a free name (case-insensitively); create_only makes the claim on it atomic
        path = unique_page_path(memory.wiki_dir, folder, clean_title)
        try:
            res = memory.write_page(
                path,
                data,
                user=user,
                message=f"Remember {path} ({harness})",
                create_only=True,
                who=user,
            )
        except Conflict:
            continue
        out: Remembered = {
            "path": path,
            "id": meta["id"],
            "title": clean_title,
            "hash": res.value or hashlib.sha256(data).hexdigest(),
            "redacted": len(found) + len(found_t),
        }
        if not res.indexed:
            out["indexed"] = False  # written and committed; indexed again later
        return out
    raise BadRequest("too many notes with this title", field="title")


def portable_name(title: str, max_len: int = 100) -> str:
    """A file name stem from a title that is legal on Windows, macOS and Linux.

    ``<>:"/\\|?*`` and control characters become spaces, runs of whitespace one space,
    leading dots and trailing dots and spaces go, a reserved device name (``CON``,
    ``com1``…) gets a trailing ``_``, and the result is NFC and at most ``max_len``
    characters. An empty result is ``"note"``. Case C27. (Notes are named by
    :func:`wiki_memory.wiki.names.unique_page_path`, which applies the wiki's own rule.)
    """
    name = unicodedata.normalize("NFC", title)
    name = _UNPORTABLE.sub(" ", name)
    name = " ".join(name.split())
    name = name[:max_len].lstrip(". ").rstrip(". ")
    if not name:
        return "note"
    if name.split(".", 1)[0].strip().upper() in _RESERVED:
        name += "_"
    return name


def _check(text: Any, project: Any, title: Any, tags: Any, harness: Any, session_id: Any) -> None:
    """The argument checks every face shares (a face's schema may check them first);
    what a project name may be is :func:`wiki_memory.core.pages.project_folder`'s."""
    if not isinstance(text, str) or not text:
        raise BadRequest("text is required (a non-empty string)", field="text")
    if len(text) > MAX_TEXT_CHARS:
        raise BadRequest(f"text is over {MAX_TEXT_CHARS} characters", field="text")
    if not isinstance(project, str):
        raise BadRequest("project is required (a project name)", field="project")
    if title is not None and not isinstance(title, str):
        raise BadRequest("title must be a string", field="title")
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
    ):
        raise BadRequest("tags must be a list of strings", field="tags")
    for name, value, most in (
        ("harness", harness, MAX_HARNESS_CHARS),
        ("session_id", session_id, MAX_SESSION_CHARS),
    ):
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"{name} must be a string", field=name)
        if value is not None and len(value) > most:
            raise BadRequest(f"{name} is over {most} characters", field=name)


def _split_frontmatter(text: str) -> tuple[str, str | None, list[str]]:
    """A note text that opens with its own frontmatter: the body, and the title and tags
    found there. Every other key (``pinned`` included: agents cannot pin) is dropped."""
    stripped = text.lstrip("\ufeff")
    if not stripped.startswith("---"):
        return text, None, []
    parsed = parse_page(stripped, "note.md")
    if parsed.frontmatter_end is None or not parsed.metadata:
        return text, None, []
    lines = stripped.split("\n")
    body = "\n".join(lines[parsed.frontmatter_end :])
    title = parsed.metadata.get("title")
    tags = parsed.metadata.get("tags")
    tag_list = [str(t) for t in tags] if isinstance(tags, list) else str(tags or "").split()
    return body, title if isinstance(title, str) else None, tag_list


def _title_from(body: str) -> str:
    for line in body.splitlines():
        s = line.strip().lstrip("#").strip()
        if s:
            return s[:80]
    return f"Note {time.strftime('%Y-%m-%d %H%M%S', time.gmtime())}"


def _clean_tags(tags: list[str]) -> list[str]:
    out: list[str] = []
    for t in tags:
        s = str(t).strip().lstrip("#").strip()
        if s and _TAG_RE.match(s) and s not in out:
            out.append(s)
    return out[:50]
