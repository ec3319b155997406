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

import re
import time
import unicodedata
import uuid
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict

from wiki_memory.capture.observation import iso
from wiki_memory.capture.sanitize import redact_text
from wiki_memory.core import knowledge
from wiki_memory.core.pagehost import PageDoor
from wiki_memory.core.pages import project_folder
from wiki_memory.errors import BadRequest, Conflict
from wiki_memory.identity import Identity
from wiki_memory.plainfile import page_hash
from wiki_memory.wiki.frontmatter import dump_page, page_head
from wiki_memory.wiki.names import unique_page_path
from wiki_memory.wiki.page import parse_page

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

    def write_check(self, who: Identity | None, path: str, op: str = ...) -> tuple[str, Path]: ...


class NoteWriter(PageDoor, Protocol):
    """What :func:`remember` needs of the memory (``wiki_memory.core.memory.Memory``)."""

    @property
    def wiki_dir(self) -> Path: ...

    @property
    def scope(self) -> WriteCheck: ...


class Remembered(TypedDict):
    """The result of :func:`remember` (and of both faces). The keys after ``redacted``
    are there only when they say something (docs/knowledge.md); ``indexed`` is present,
    and False, only when the note was written and committed but its index update failed
    (it is indexed again later)."""

    path: str | None
    id: str | None
    title: str
    hash: str | None
    redacted: int
    #: the text equals a current note's: nothing was written, ``path``/``id`` are its
    duplicate: NotRequired[bool]
    duplicate_of: NotRequired[str]
    #: how many times this note was remembered (its first time included)
    count: NotRequired[int]
    #: tags the duplicate added to the existing note
    tags_added: NotRequired[list[str]]
    #: current notes of the project at least knowledge.SIMILAR_AT alike
    similar: NotRequired[list[str]]
    #: False with ``if_new`` and a similar note: nothing was written
    written: NotRequired[bool]
    #: current notes with the same title, alias or subject: proposals, nothing retired
    may_supersede: NotRequired[list[str]]
    #: the pages this note retired (``supersedes`` given)
    supersedes: NotRequired[list[str]]
    #: False: written and committed, but its index update failed (indexed again later)
    indexed: NotRequired[bool]


def remember(
    memory: NoteWriter,
    text: str,
    *,
    project: str,
    title: str | None = None,
    tags: list[str] | None = None,
    user: Identity,
    harness: str | None = None,
    session_id: str | None = None,
    supersedes: str | list[str] | None = None,
    if_new: bool = False,
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
    - ``user``: who remembers, as its door built it (its name is the note's ``user`` and
      the commit's author; the scope rule checks the write for it); ``harness`` (default ``"api"``) and
      ``session_id`` (left out of the frontmatter when None) are recorded as given.
    - ``hash``: sha256 hex of the bytes written; ``redacted``: how many secrets were
      replaced by ``[REDACTED:<kind>]`` in the title and the text.

    Raises BadRequest (a ValueError) naming the field: ``text`` empty or not a string or
    over :data:`MAX_TEXT_CHARS`, ``project`` missing, a path or starting with a dot,
    ``title`` not a string or a path with ``..`` in it, ``tags`` not a list of strings,
    ``harness``/``session_id`` not a string or too long, or
    (``field="title"``) too many notes of this title. The writer's own errors pass
    through (NotFound for a folder the caller may not see, GitBusy…).

    With a full memory (``Memory``; docs/knowledge.md): ``supersedes`` (paths or titles)
    retires those pages in the same commit (NotFound for one the caller may not see,
    Forbidden for one it may only read; nothing written then); a text equal to a current
    note of the project (:func:`wiki_memory.core.knowledge.normalized`) writes nothing
    and answers that note with ``duplicate: true`` (new tags merged into it, the repeat
    counted); a similar one is written with ``similar``, or with ``if_new`` not written;
    a note with a current note's title, alias or ``subject`` gets ``may_supersede``.
    """
    _check(text, project, title, tags, harness, session_id)
    name = user.user
    sup_names = knowledge.check_supersedes(supersedes)
    proj = project_folder(project)
    folder = f"projects/{proj}/notes"
    # the right to write there, before the text is parsed or scanned (DESIGN.md 13)
    memory.scope.write_check(user, folder)
    body, fm_title, fm_tags, extra = _split_frontmatter(text)
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
        **page_head("note", f"note_{uuid.uuid4().hex[:16]}", clean_title, iso(now), iso(now), proj),
        "tags": all_tags,
        "user": name,
        "harness": harness,
    }
    if session_id:
        meta["session"] = session_id
    meta.update(extra)
    full = getattr(memory, "index", None) is not None  # the knowledge rules need the index
    said: dict[str, Any] = {}
    olds: list[str] = []
    when = knowledge.now_iso()
    if full:
        m: Any = memory
        ident = m.scope.identity(user)
        dup, similar = knowledge.matches(m, proj, clean_body, ident)
        if dup is not None:
            return _duplicate(
                m, dup, all_tags, clean_title, len(found) + len(found_t), user, harness, session_id
            )
        if similar:
            said["similar"] = similar
            if if_new:
                return {
                    "path": None,
                    "id": None,
                    "title": clean_title,
                    "hash": None,
                    "redacted": len(found) + len(found_t),
                    "similar": similar,
                    "written": False,
                }
        if sup_names:
            olds = knowledge.resolve_targets(m, sup_names, f"projects/{proj}/notes/x.md", ident)
            meta["supersedes"] = olds[0] if len(olds) == 1 else olds
            meta["valid_from"] = when
        names = [clean_title, *[a for a in extra.get("aliases", []) if isinstance(a, str)]]
        subject = extra.get("subject") if isinstance(extra.get("subject"), str) else None
        proposed = knowledge.may_supersede(m, proj, names, subject, ident, set(olds))
        if proposed:
            said["may_supersede"] = proposed
    data = dump_page(meta, clean_body.strip("\n") + "\n").encode("utf-8")
    for _ in range(_MAX_TRIES):
        # a free name (case-insensitively); create_only makes the claim on it atomic
        path = unique_page_path(memory.wiki_dir, folder, clean_title)
        message = f"Remember {path} ({harness})"
        try:
            if olds:
                res = knowledge.write_superseding(
                    m,
                    path,
                    _create(path, data),
                    olds,
                    user=name,
                    ident=ident,
                    message=message,
                    when=when,
                )
            else:
                res = memory.write_page(
                    path, data, user=name, message=message, create_only=True, who=user
                )
        except Conflict:
            continue
        out: Remembered = {
            "path": path,
            "id": meta["id"],
            "title": clean_title,
            "hash": res.value or page_hash(data),
            "redacted": len(found) + len(found_t),
        }
        if olds:
            out["supersedes"] = olds
        out.update(said)  # type: ignore[typeddict-item]
        if not res.indexed:
            out["indexed"] = False  # written and committed; indexed again later
        return out
    raise BadRequest("too many notes with this title", field="title")


def _create(path: str, data: bytes) -> Any:
    def fn(current: bytes | None) -> bytes:
        if current is not None:
            raise Conflict(f"{path} already exists", None)
        return data

    return fn


def _duplicate(
    memory: Any,
    path: str,
    tags: list[str],
    title: str,
    redacted: int,
    who: Identity,
    harness: str,
    session_id: str | None,
) -> Remembered:
    """The answer to a text a current note already holds: that note, its new tags merged
    in (one commit), the repeat counted in the use record."""
    added: list[str] = []

    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            return None
        new = knowledge.merge_tags(current, path, tags)
        added[:] = (
            []
            if new is None
            else [
                t
                for t in tags
                if t.casefold() not in {x.casefold() for x in parse_page(current, path).tags}
            ]
        )
        return new

    if tags:
        memory.update_page(
            path, fn, user=who.user, message=f"Tags of {path} ({harness})", who=who, commit_now=True
        )
    row = memory.index.page_meta(path) or {}
    meta = row.get("meta") or {}
    memory.use.note("repeated", [path], who.user or None)
    count = knowledge.count_repeat(
        memory.settings.data_dir,
        {
            "path": path,
            "ts": knowledge.now_iso(),
            "user": who.user,
            "harness": harness,
            "session": session_id,
        },
    )
    out: Remembered = {
        "path": path,
        "id": str(meta.get("id") or row.get("id") or path),
        "title": str(meta.get("title") or row.get("title") or title),
        "hash": row.get("hash"),
        "redacted": redacted,
        "duplicate": True,
        "duplicate_of": path,
        "count": count,
    }
    if added:
        out["tags_added"] = added
    return out


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


#: frontmatter keys of a note's own text that the note keeps besides ``title`` and ``tags``
_KEPT = ("aliases", "subject")


def _split_frontmatter(text: str) -> tuple[str, str | None, list[str], dict[str, Any]]:
    """A note text that opens with its own frontmatter: the body, the title and tags
    found there, and its ``aliases`` and ``subject`` (docs/knowledge.md). Every other key
    (``pinned`` included: agents cannot pin) is dropped."""
    stripped = text.lstrip("\ufeff")
    if not stripped.startswith("---"):
        return text, None, [], {}
    parsed = parse_page(stripped, "note.md")
    if parsed.frontmatter_end is None or not parsed.metadata:
        return text, None, [], {}
    extra: dict[str, Any] = {}
    if parsed.aliases:
        extra["aliases"] = [redact_text(a)[0] for a in parsed.aliases]
    subj = parsed.metadata.get("subject")
    if isinstance(subj, str) and subj.strip():
        extra["subject"] = redact_text(subj.strip())[0]
    lines = stripped.split("\n")
    body = "\n".join(lines[parsed.frontmatter_end :])
    title = parsed.metadata.get("title")
    tags = parsed.metadata.get("tags")
    tag_list = [str(t) for t in tags] if isinstance(tags, list) else str(tags or "").split()
    return body, title if isinstance(title, str) else None, tag_list, extra


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
