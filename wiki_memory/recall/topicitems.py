"""What a recall item of a topic page adds: the timeline entries the page links
(docs/sessions.md, "Topic pages"), so an agent can expand exactly those."""

from __future__ import annotations

from typing import Any

from wiki_memory.index.store import Index
from wiki_memory.wiki.topics import linked_entries

ENTRIES_NAMED = 20
"""A topic item names at most this many entries (the page's first ones, oldest first)."""


def topic_entries(index: Index, path: str, kind: str) -> dict[str, Any]:
    """``{"entries": [anchor, ...]}`` for an item of a topic page (``kind`` ``topic``):
    the anchors (``path#^tN``) of the timeline entries it embeds, in page order, at most
    :data:`ENTRIES_NAMED`; ``{}`` for any other page or a topic page linking none. The
    entries are the project's shared session pages, which whoever may read the topic
    page (a page of the same project) may read too."""
    if kind != "topic":
        return {}
    found = linked_entries(index.links_from(path))[:ENTRIES_NAMED]
    return {"entries": found} if found else {}
