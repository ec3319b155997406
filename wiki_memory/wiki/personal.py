"""The one personal rule applied to a file's bytes: scope, the index, replication and
the border all ask :func:`page_owner`.

:func:`wiki_memory.identity.personal_owner` decides on a path and a frontmatter; this
module supplies the frontmatter the same way everywhere: the page's whole frontmatter
(no window of the first bytes), read by the page parser, so YAML's escaped keys
(``"vis\\x69bility": personal``) count like plain ones; the ``people/<user>/`` folder is
compared with the identity fold (case and width: ``ｐｅｏｐｌｅ/bob/`` is Bob's).
"""

from __future__ import annotations

import re
from typing import Any

from wiki_memory.identity import fold, personal_owner

__all__ = ["frontmatter_head", "frontmatter_of", "is_people_folder", "page_owner"]

#: a frontmatter line that marks the page personal, read as text (quotes and case allowed)
_PERSONAL_LINE = re.compile(rb"(?mi)^[ \t]*[\"']?visibility[\"']?[ \t]*:[ \t]*[\"']?personal\b")
#: a frontmatter line naming the page's user, read as text
_USER_LINE = re.compile(rb"(?m)^[ \t]*[\"']?user[\"']?[ \t]*:[ \t]*[\"']?([^\s\"'#]+)")
#: a line that may close a frontmatter block (``---`` or ``...``, trailing blanks)
_CLOSE = re.compile(rb"\n(?:---|\.\.\.)[ \t\r]*(?=\n|$)")


def is_people_folder(name: str | bytes) -> bool:
    """True when the top-level folder ``name`` is ``people`` after the identity fold."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    return fold(name) == "people"


def frontmatter_of(data: bytes | None, rel: str) -> dict[str, Any]:
    """The whole frontmatter of ``data`` (``{}`` when there is none or it is unreadable)."""
    if not data:
        return {}
    from wiki_memory.wiki.page import parse_page

    meta = parse_page(data, rel).metadata
    return meta if isinstance(meta, dict) else {}


def frontmatter_head(data: bytes | None) -> bytes | None:
    """The bytes that may hold ``data``'s frontmatter, with every U+FEFF removed (the
    parser drops them everywhere, so ``vis<U+FEFF>ibility`` spells the key), or None when
    the first line is not a fence (no frontmatter). The head ends at the first line that
    may close the frontmatter (the parser's own close is never later), else it is the
    whole file. A key the head does not spell, plainly or with a backslash escape, is not
    in the frontmatter."""
    if not data:
        return None
    nl = data.find(b"\n")
    first = data[: nl if nl >= 0 else len(data)].replace(b"\xef\xbb\xbf", b"")
    if not first.startswith(b"---"):
        return None
    end = _CLOSE.search(data)
    return (data[: end.end()] if end else data).replace(b"\xef\xbb\xbf", b"")


def page_owner(rel: str, data: bytes | None) -> str | None:
    """The folded user the file ``rel`` with bytes ``data`` belongs to alone, or None for
    a shared one (:func:`wiki_memory.identity.personal_owner` on the whole frontmatter).

    Bytes whose first line is not a fence (byte order marks removed, as the parser
    does) hold no frontmatter, and a frontmatter that holds neither ``visibility`` nor a
    backslash cannot spell the key in YAML (an escape needs the backslash): neither is
    parsed (byte order marks are removed from it first, as the parser removes them
    everywhere). The frontmatter's end is the first line that may close it (the parser's
    own close is never later), else the whole file. A frontmatter line that says
    ``visibility: personal`` makes the page personal even when YAML does not read it
    so (invalid YAML, a key given twice): a failed parse never shares a page; its
    ``user`` line (read as text) names whose, else it is the owner's."""
    meta: dict[str, Any] = {}
    head = frontmatter_head(data)
    if head is not None and (b"visibility" in head or b"\\" in head):
        meta = frontmatter_of(data, rel)
    owner = personal_owner(rel, meta)
    if owner is None and head is not None:
        line = _PERSONAL_LINE.search(head)
        if line is not None:
            # a line says personal but YAML did not read it so (broken YAML, a repeated
            # key): the page is held personal, never shared by a parse that failed
            user = _USER_LINE.search(head)
            owner = personal_owner(
                rel,
                {
                    "visibility": "personal",
                    "user": (user.group(1).decode("utf-8", "replace") if user else None),
                },
            )
    return owner
