"""Knowledge that stays true: supersession on write, proposals, one memory per fact.

docs/knowledge.md is the user's description; this module is the one place that rule is
written for every face (``memory_remember``, ``POST /v1/remember``, ``PUT /v1/pages``,
``page_write``, the CLI).

- **Supersession on write** (:func:`write_superseding`, :func:`retire`): a write that
  names ``supersedes`` changes the newer page (``supersedes``, ``valid_from``) and every
  older one (``state: superseded``, ``superseded_by``, ``valid_until``) in one commit,
  through :meth:`~wiki_memory.core.memory.Memory.update_pages` (the one door on every
  page; a refusal changes nothing). Names resolve like wikilinks among the pages the
  caller may see, so a page it may not see answers 404 as if missing.
- **Proposals** (:func:`may_supersede`): a new note whose title or alias names an
  existing current note of the project, or whose ``subject`` is one's, is answered with
  those paths; nothing is retired until someone confirms.
- **One memory per fact** (:func:`matches`, :func:`count_repeat`): a text equal to a
  current note of the project after :func:`normalized` is a duplicate; one whose word
  shingles are :data:`SIMILAR_AT` alike is similar.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiki_memory.core.scope import not_found
from wiki_memory.errors import BadRequest
from wiki_memory.identity import Identity, may_read
from wiki_memory.states import page_state
from wiki_memory.wiki import links as wl
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_page

if TYPE_CHECKING:
    from wiki_memory.core.writer import WriteResult

#: a :class:`wiki_memory.core.memory.Memory` (not imported: the Memory calls this module,
#: and the rooms allow no import cycle); what is used of it: ``index``, ``scope``,
#: ``wiki_dir``, ``update_pages``
Memory = Any

__all__ = [
    "MAX_SUPERSEDES",
    "SIMILAR_AT",
    "count_repeat",
    "matches",
    "may_supersede",
    "normalized",
    "resolve_targets",
    "retire",
    "similarity",
    "write_superseding",
]

#: the most pages one write may supersede
MAX_SUPERSEDES = 20
#: word-shingle similarity (Jaccard of the words and word pairs) from which a new note
#: is answered ``similar`` (docs/knowledge.md, "One memory per fact")
SIMILAR_AT = 0.8
#: notes of the project compared with a new one (the best text matches)
_COMPARED = 20
_WORD = re.compile(r"\w+", re.UNICODE)
_repeats_lock = threading.Lock()


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_supersedes(value: Any) -> list[str]:
    """``supersedes`` as given (a string or a list of strings) as a list; BadRequest
    otherwise."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        raise BadRequest("supersedes must be a page path or title, or a list", field="supersedes")
    if len(items) > MAX_SUPERSEDES:
        raise BadRequest(f"supersedes names over {MAX_SUPERSEDES} pages", field="supersedes")
    return [v.strip() for v in items]


def resolve_targets(
    memory: Memory, names: list[str], src: str, ident: Identity | None
) -> list[str]:
    """The pages ``names`` name (paths, or titles resolved like wikilinks from ``src``)
    among those ``ident`` may see (None: the server itself, every page); NotFound for one that names none, as if missing."""
    found = memory.index.resolve_names(names, src, ident)
    out: list[str] = []
    for name in names:
        path = found.get(name)
        if path is None:
            raise not_found(name)
        if path == src:
            raise BadRequest("a page cannot supersede itself", field="supersedes")
        if path not in out:
            out.append(path)
    return out


def _retire_fn(rel: str, newer: str, when: str) -> Callable[[bytes | None], bytes | None]:
    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            raise not_found(rel)
        if page_state(parse_page(current, rel).metadata) == "forgotten":
            raise not_found(rel)
        try:
            return set_keys(
                current, {"state": "superseded", "superseded_by": newer, "valid_until": when}
            )
        except FrontmatterError as exc:
            raise BadRequest(
                f"cannot edit the frontmatter of {rel}: {exc}", field="supersedes"
            ) from None

    return fn


def stamp_newer(data: bytes, olds: list[str], when: str) -> bytes:
    """``data`` with ``supersedes`` (one path, or a list) and ``valid_from`` set."""
    try:
        return set_keys(
            data, {"supersedes": olds[0] if len(olds) == 1 else olds, "valid_from": when}
        )
    except FrontmatterError as exc:
        raise BadRequest(f"cannot edit the frontmatter: {exc}", field="text") from None


def write_superseding(
    memory: Memory,
    rel: str,
    new_fn: Callable[[bytes | None], bytes | None],
    olds: list[str],
    *,
    user: str,
    ident: Identity | None,
    message: str,
    when: str,
) -> WriteResult:
    """Write the newer page ``rel`` (``new_fn`` gives its bytes, already stamped by
    :func:`stamp_newer`) and retire each of ``olds`` in one commit."""
    changes = [(rel, new_fn)] + [(old, _retire_fn(old, rel, when)) for old in olds]
    res: WriteResult = memory.update_pages(
        changes, user=user, message=message, who=ident, op="supersede"
    )
    return res


def retire(memory: Memory, newer: str, names: list[str], who: Identity | None) -> dict[str, Any]:
    """Confirm a proposal: ``newer`` (an existing page) supersedes ``names``, in one
    commit. Returns ``{"path", "supersedes"}``."""
    ident = memory.scope.identity(who)
    rel, _full = memory.scope.check_target(ident, newer)
    olds = resolve_targets(memory, names, rel, ident)
    when = now_iso()

    def fn(current: bytes | None) -> bytes | None:
        if current is None:
            raise not_found(rel)
        return stamp_newer(current, olds, when)

    write_superseding(
        memory,
        rel,
        fn,
        olds,
        user=ident.user,
        ident=ident,
        message=f"Supersede by {rel}",
        when=when,
    )
    return {"path": rel, "supersedes": olds}


# -- proposals ---------------------------------------------------------------------------


def may_supersede(
    memory: Memory,
    project: str,
    names: list[str],
    subject: str | None,
    ident: Identity,
    exclude: set[str],
) -> list[str]:
    """Current notes of ``project`` whose title or alias is one of ``names``, or whose
    frontmatter ``subject`` equals ``subject`` (compared as page names are): what a new
    note may supersede. A mention (the name in the text) proposes nothing."""
    keys = {wl.name_key(n) for n in names if n and n.strip()}
    found: list[str] = []
    for _key, path, _source in memory.index.names_for(keys, ident):
        if path not in found:  # checked against its own title and aliases below
            found.append(path)
    if subject and subject.strip():
        found += [p for p in memory.index.same_subject(project, subject, ident) if p not in found]
    chains = memory.index.chains(ident)
    out: list[str] = []
    for path in found:
        row = memory.index.page_meta(path, ident)
        if row is None or path in exclude or row.get("project") != project:
            continue
        if row.get("kind") != "note" or path in chains.by:
            continue
        if page_state(row.get("meta") or {}) != "current":
            continue
        own = {wl.name_key(str(n)) for n in [row.get("title") or "", *(row.get("aliases") or [])]}
        same_subject = subject and wl.name_key(str((row.get("meta") or {}).get("subject") or ""))
        if not (own & keys) and not (subject and same_subject == wl.name_key(subject)):
            continue
        out.append(path)
    return sorted(out)


# -- one memory per fact -----------------------------------------------------------------


def normalized(text: str) -> str:
    """The text two notes are compared by: CRLF and CR as LF, trailing spaces of each
    line removed, surrounding whitespace removed, then one final ``.`` or ``!``; case
    kept."""
    t = text.replace("\r\n", "\n").replace("\r", "\n")
    t = "\n".join(line.rstrip() for line in t.split("\n")).strip()
    if t.endswith((".", "!")):
        t = t[:-1].rstrip()
    return t


def _shingles(text: str) -> set[str]:
    words = _WORD.findall(text.casefold())
    return set(words) | {f"{a} {b}" for a, b in zip(words, words[1:], strict=False)}


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the words and word pairs of ``a`` and ``b`` (0 … 1)."""
    sa, sb = _shingles(a), _shingles(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def matches(
    memory: Memory, project: str, body: str, ident: Identity
) -> tuple[str | None, list[str]]:
    """``(duplicate, similar)``: the current note of ``project`` whose text equals
    ``body`` after :func:`normalized` (None when there is none), and the others at least
    :data:`SIMILAR_AT` alike. Only the best :data:`_COMPARED` text matches are read."""
    want = normalized(body)
    if not want:
        return None, []
    hits = memory.index.query(want[:4000], project=project, kinds=["note"], limit=60, mode="or")
    paths = list(dict.fromkeys(h.path for h in hits))[:_COMPARED]
    chains = memory.index.chains(ident) if paths else None
    duplicate: str | None = None
    similar: list[tuple[float, str]] = []
    for path in paths:
        row = memory.index.page_meta(path, ident)
        meta = (row or {}).get("meta") or {}
        if row is None or not may_read(ident, path, meta) or page_state(meta) != "current":
            continue
        if chains is not None and path in chains.by:
            continue
        try:
            raw = (memory.wiki_dir / path).read_bytes()
        except OSError:
            continue
        theirs = normalized(parse_page(raw, path).body)
        if theirs == want:
            if duplicate is None or path < duplicate:
                duplicate = path
            continue
        score = similarity(want, theirs)
        if score >= SIMILAR_AT:
            similar.append((-score, path))
    return duplicate, [p for _s, p in sorted(similar) if p != duplicate]


def merge_tags(raw: bytes, rel: str, tags: list[str]) -> bytes | None:
    """``raw`` with ``tags`` added to its frontmatter ``tags`` (None: nothing new)."""
    have = parse_page(raw, rel).tags
    folded = {t.casefold() for t in have}
    new = [t for t in tags if t.casefold() not in folded]
    if not new:
        return None
    meta_tags = parse_page(raw, rel).metadata.get("tags")
    base = [str(t) for t in meta_tags] if isinstance(meta_tags, list) else []
    try:
        return set_keys(raw, {"tags": base + new})
    except FrontmatterError:
        return None


def count_repeat(data_dir: Path, record: dict[str, Any]) -> int:
    """Add one line to ``<data_dir>/use/repeats.jsonl`` (the start of the use record: not
    in git, not replicated) and return how many times the note at ``record["path"]`` was
    remembered: its first time plus every repeat recorded."""
    folder = data_dir / "use"
    with _repeats_lock:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        f = folder / "repeats.jsonl"
        n = 1
        try:
            with f.open("rb") as fh:
                for line in fh:
                    try:
                        if json.loads(line).get("path") == record["path"]:
                            n += 1
                    except ValueError:
                        continue
        except FileNotFoundError:
            pass
        fd = os.open(f, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    return n + 1
