"""Wikilink resolution: which page (or attachment) a ``[[target]]`` names.

The rules (``docs/obsidian.md``):

* Names are compared after Unicode NFC normalisation and case folding
  (:func:`name_key`), never fuzzily: ``summary (billing-pipeline)`` never finds
  ``Billing Pipeline Summary``.
* A target names a page by, in this order of precedence: its path from the wiki root
  without ``.md`` (``How To/Set up``), a trailing part of its path (``Set up`` is also the
  file name; ``To/Set up`` a suffix), its title (pages whose file name was made from that
  title by :func:`wiki_memory.wiki.names.file_stem` first, then other pages with that
  title), one of its aliases. ``.md`` at the end of a
  target is ignored; ``./x`` and ``../x`` are taken relative to the linking page's folder.
* Within the first rule that finds anything: one page -> resolved. Several pages -> the
  one in the linking page's own folder if exactly one is there, else the link is
  *ambiguous* and reported with its candidates, never guessed.
* A target with a file extension other than ``.md`` that names no page is an
  *attachment* (``![[diagram.png|400]]``, ``[[spec.pdf]]``), found the same way among the
  non-markdown files of the wiki.
* Nothing found: *unresolved*. The link keeps its literal text and resolves by itself
  when a page with that name appears (the index re-resolves on every change).

Heading fragments are checked loosely, as Obsidian writes them: the characters
``# | ^ : % [ ] \\`` count as spaces, then case and whitespace are ignored
(:func:`heading_key`). A missing heading never makes a link unresolved; it is a warning.

This module is pure (no I/O): the index feeds it names and files.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from wiki_memory.wiki.copies import icloud_original
from wiki_memory.wiki.names import file_stem
from wiki_memory.wiki.page import WIKILINK_RE

__all__ = [
    "ATTACHMENT",
    "AMBIGUOUS",
    "RESOLVED",
    "UNRESOLVED",
    "Resolution",
    "Resolver",
    "heading_key",
    "is_attachment_target",
    "name_key",
    "page_name_keys",
    "rename_links",
    "unlink",
    "resolve",
    "target_key",
]

RESOLVED = "resolved"
UNRESOLVED = "unresolved"
AMBIGUOUS = "ambiguous"
ATTACHMENT = "attachment"
#: a link whose one page is forgotten: shown as forgotten, never followed
FORGOTTEN = "forgotten"

#: precedence of the ways a page can be named (lower wins)
SOURCE_RANK = {"path": 0, "suffix": 1, "stem": 1, "title": 2, "title_other": 3, "alias": 4}

_EXT_RE = re.compile(r"\.([A-Za-z0-9]{1,10})$")
_HEADING_JUNK = re.compile(r"[#|^:%\[\]\\]+")


def name_key(text: str) -> str:
    """The comparison key of a page name: NFC, case-folded, inner whitespace collapsed.

    ``name_key("Café  Résumé") == name_key("cafe\\u0301 résumé".title())``.
    """
    if text.isascii():
        return " ".join(text.lower().split())  # casefold and NFC change nothing else here
    s = unicodedata.normalize("NFC", text)
    s = unicodedata.normalize("NFC", s.casefold())
    return " ".join(s.split())


def _strip_md(target: str) -> str:
    return target[:-3] if target.lower().endswith(".md") else target


def target_key(target: str, src_path: str = "") -> str:
    """The name key a link target is looked up by.

    ``.md`` is dropped; ``./`` and ``../`` targets are made wiki-relative from the folder of
    ``src_path``; a leading ``/`` is dropped. Example: ``target_key("../b/Note.md",
    "a/x/page.md") == "a/b/note"``.
    """
    t = _strip_md(target.strip()).replace("\\", "/")
    if t.startswith("./") or t.startswith("../"):
        base = posixpath.dirname(src_path)
        t = posixpath.normpath(posixpath.join(base, t))
        if t.startswith("../") or t == "..":
            t = t.lstrip("./")
    t = t.lstrip("/")
    return name_key(t)


def is_attachment_target(target: str) -> bool:
    """True when ``target`` ends with a file extension other than ``.md`` (``a.png``)."""
    m = _EXT_RE.search(target.strip())
    return m is not None and m.group(1).lower() != "md"


def page_name_keys(path: str, title: str, aliases: Iterable[str]) -> list[tuple[str, str]]:
    """Every ``(key, source)`` a page can be linked by; ``source`` is a :data:`SOURCE_RANK` key.

    ``path`` is wiki-relative with ``.md``. Path suffixes of two or more parts are
    ``suffix`` names (``b/c`` for ``a/b/c.md``); the file name alone is ``stem``.
    """
    stem_path = _strip_md(path)
    parts = stem_path.split("/")
    out: dict[str, str] = {}

    def add(key: str, source: str) -> None:
        if key and (key not in out or SOURCE_RANK[source] < SOURCE_RANK[out[key]]):
            out[key] = source

    add(name_key(stem_path), "path")
    for i in range(1, len(parts) - 1):
        add(name_key("/".join(parts[i:])), "suffix")
    add(name_key(parts[-1]), "stem")
    if title:
        # a page whose file is named after its title (wiki_memory.wiki.names) comes before
        # others with the same title: ``Sync On-Off Toggle.md`` before ``... 2.md`` or a
        # session page titled the same
        own = name_key(file_stem(title)) == name_key(parts[-1])
        add(name_key(title), "title" if own else "title_other")
    for a in aliases:
        add(name_key(a), "alias")
    return sorted(out.items())


def file_name_keys(path: str) -> list[str]:
    """Keys an attachment file is found by: its whole path and every trailing part of it."""
    parts = path.split("/")
    return sorted({name_key("/".join(parts[i:])) for i in range(len(parts))})


@dataclass(frozen=True)
class Resolution:
    """Where a link leads. ``status`` is resolved, unresolved, ambiguous, attachment or
    forgotten (its one page is forgotten: no ``path``).

    ``path`` is the page (or, for an attachment, the file) when there is exactly one;
    ``candidates`` lists the paths an ambiguous link could mean (sorted).
    """

    status: str
    path: str | None = None
    candidates: tuple[str, ...] = field(default_factory=tuple)


def _pick(src_path: str, paths: Sequence[str]) -> Resolution:
    if len(paths) == 1:
        return Resolution(RESOLVED, paths[0])
    uniq = sorted(set(paths))
    if len(uniq) == 1:
        return Resolution(RESOLVED, uniq[0])
    folder = src_path.rpartition("/")[0]
    near = [p for p in uniq if p.rpartition("/")[0] == folder]
    if len(near) == 1:
        return Resolution(RESOLVED, near[0])
    return Resolution(AMBIGUOUS, None, tuple(uniq))


class Resolver:
    """:func:`resolve` for many links at once: the candidates of each name key are worked
    out once and reused (a rebuild resolves every link of the wiki in one pass).

    ``resolve_key(key, src_path)`` takes the stored :func:`target_key` of a non-empty
    target; the result is the same as ``resolve(target, src_path, names, files)``.
    """

    def __init__(
        self,
        names: Mapping[str, Sequence[tuple[str, str]]],
        files: Mapping[str, Sequence[str]] | None = None,
        forgotten: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        self.names = names
        self.files = files or {}
        self.forgotten = forgotten
        self._cache: dict[str, tuple[str, tuple[str, ...], dict[str, list[str]]]] = {}

    def _candidates(self, key: str) -> tuple[str, tuple[str, ...], dict[str, list[str]]]:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        entries = self.names.get(key, ())
        status = RESOLVED
        if entries:
            best = min(SOURCE_RANK[s] for _, s in entries)
            paths = tuple(sorted({p for p, s in entries if SOURCE_RANK[s] == best}))
            if len(paths) > 1:  # an iCloud-style copy never takes a name from its page
                paths = tuple(p for p in paths if icloud_original(p) not in paths)
        elif is_attachment_target(key):
            status = ATTACHMENT
            paths = tuple(sorted(set(self.files.get(key, ()))))
        else:
            status, paths = UNRESOLVED, ()
        by_folder: dict[str, list[str]] = {}
        if len(paths) > 1:
            for p in paths:
                by_folder.setdefault(p.rpartition("/")[0], []).append(p)
        hit = (status, paths, by_folder)
        self._cache[key] = hit
        return hit

    def paths(self, key: str) -> tuple[str, ...]:
        """Every page (or, for an attachment target, file) the target key ``key`` names,
        sorted; for a page name only those of the best-ranked name source. These are
        the candidates whenever a link with this key is ambiguous."""
        return self._candidates(key)[1]

    def resolve_key(self, key: str, src_path: str) -> Resolution:
        status, paths, by_folder = self._candidates(key)
        if not paths:
            return Resolution(status, None)
        if len(paths) == 1:
            return self._leads(status, paths[0])
        near = by_folder.get(src_path.rpartition("/")[0], ())
        if len(near) == 1:
            return self._leads(status, near[0])
        return Resolution(AMBIGUOUS, None, paths)

    def _leads(self, status: str, path: str) -> Resolution:
        """A link to one page: :data:`FORGOTTEN` (no path) when that page is forgotten."""
        if path in self.forgotten:
            return Resolution(FORGOTTEN, None)
        return Resolution(status, path)


def resolve(
    target: str,
    src_path: str,
    names: Mapping[str, Sequence[tuple[str, str]]],
    files: Mapping[str, Sequence[str]] | None = None,
) -> Resolution:
    """Resolve one link target written in the page ``src_path``.

    ``names`` maps a name key to ``[(page path, source), ...]`` (see :func:`page_name_keys`);
    ``files`` maps a file key to attachment paths (see :func:`file_name_keys`). An empty
    target (a same-page reference) resolves to ``src_path``.
    """
    if not target.strip():
        return Resolution(RESOLVED, src_path)
    key = target_key(target, src_path)
    entries = names.get(key, ())
    if len(entries) == 1:
        return Resolution(RESOLVED, entries[0][0])
    if entries:
        best = min(SOURCE_RANK[s] for _, s in entries)
        return _pick(src_path, [p for p, s in entries if SOURCE_RANK[s] == best])
    if is_attachment_target(target):
        found = files.get(key, ()) if files else ()
        if not found:
            return Resolution(ATTACHMENT, None)
        res = _pick(src_path, list(found))
        if res.status == RESOLVED:
            return Resolution(ATTACHMENT, res.path)
        return Resolution(AMBIGUOUS, None, res.candidates)
    return Resolution(UNRESOLVED, None)


def heading_key(text: str) -> str:
    """A heading or ``#fragment`` as Obsidian compares them (see the module docstring)."""
    return name_key(_HEADING_JUNK.sub(" ", text))


def fragment_found(fragment: str, headings: Iterable[str], block_ids: Iterable[str]) -> bool:
    """True when ``fragment`` (``Heading``, ``H1#H2`` or ``^block``) names a part of the page.

    For nested heading fragments only the last part is checked.
    """
    last = fragment.split("#")[-1].strip()
    if last.startswith("^"):
        return last in set(block_ids)
    k = heading_key(last)
    return any(heading_key(h) == k for h in headings)


# --------------------------------------------------------------------------- renames


def rename_links(text: str, old_keys: Iterable[str], new_target: str, src_path: str = "") -> str:
    """Point every wikilink in ``text`` whose target key is in ``old_keys`` at ``new_target``.

    The fragment, alias and embed marker are kept, and so is the table escape:
    ``[[Auth Service\\|auth]]`` becomes ``[[Identity Service\\|auth]]`` and
    ``[[Auth Service|the auth service]]`` becomes ``[[Identity Service|the auth service]]``.
    Links inside code are not links, so they are left alone (``text`` is a whole page: the
    same code rules as :func:`wiki_memory.wiki.page.parse_page` apply through its masking).
    """
    from wiki_memory.wiki.page import code_mask  # no cycle at import time

    keys = set(old_keys)
    live = code_mask(text)

    def sub(m: re.Match[str]) -> str:
        if live[m.start()] != text[m.start()]:  # inside code or a comment
            return m.group(0)
        inner = m.group(2)
        head, sep, rest = inner.partition("|")
        escaped = head.endswith("\\")
        core = head[:-1] if escaped else head
        tgt, hsep, frag = core.partition("#")
        if not tgt.strip() or target_key(tgt, src_path) not in keys:
            return m.group(0)
        new_core = new_target + (hsep + frag if hsep else "")
        new_head = new_core + ("\\" if escaped else "")
        return f"{m.group(1)}[[{new_head}{sep}{rest}]]"

    return WIKILINK_RE.sub(sub, text)


def unlink(text: str, old_keys: Iterable[str], mark: str, src_path: str = "") -> str:
    """Replace every wikilink in ``text`` whose target key is in ``old_keys`` by ``mark``,
    whole (its fragment and alias too: they may name what the link pointed to). Links
    inside code are left alone, as in :func:`rename_links`. Used by purge for the links
    to a page it removed."""
    from wiki_memory.wiki.page import code_mask  # no cycle at import time

    keys = set(old_keys)
    live = code_mask(text)

    def sub(m: re.Match[str]) -> str:
        if live[m.start()] != text[m.start()]:
            return m.group(0)
        head = m.group(2).partition("|")[0]
        tgt = (head[:-1] if head.endswith("\\") else head).partition("#")[0]
        if not tgt.strip() or target_key(tgt, src_path) not in keys:
            return m.group(0)
        return mark

    return WIKILINK_RE.sub(sub, text)
