"""What leaked to a hub: the commits of a hub's branch (as last fetched, so no network)
that hold what never should have left a server (docs/git.md, "What already leaked").

:func:`hub_leaks` walks every commit reachable from a remote-tracking ref and names the
commits whose tree holds a personal page (a ``people/`` folder by the identity fold, or a
page the one personal rule, :func:`wiki_memory.wiki.personal.page_owner`, makes personal:
pushed by a version from before the rule, or by a rule with a hole) or a version a purge
tombstoned, and the commits whose message names a personal path or a personal handoff
(``Handoff P-…``: its title rode in the message before messages named paths only).
``doctor`` lists them; ``sync --rewrite-hub`` replaces them (docs/operations.md).

Each tree and blob is read once however many commits share it, so the cost is one pass
over the hub's distinct objects.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field

from dulwich.objects import Blob, ObjectID, Tree
from dulwich.repo import Repo

from wiki_memory.identity import fold
from wiki_memory.wiki.personal import is_people_folder, page_owner
from wiki_memory.wiki.replicate import walk

__all__ = [
    "PERSONAL_MESSAGE",
    "PERSONAL_PAGE",
    "PURGED_VERSION",
    "Leak",
    "hub_leaks",
    "personal_message",
]

#: the reasons a commit is listed
PERSONAL_PAGE = "a personal page in its tree"
PURGED_VERSION = "a purged version in its tree"
PERSONAL_MESSAGE = "personal content in its message"

_HANDOFF = re.compile(r"Handoff P-[0-9a-f]{4,}")


@dataclass
class Leak:
    """One commit of the hub's branch that holds what should not be there: ``commit``
    (hex id), ``reasons`` (some of :data:`PERSONAL_PAGE`, :data:`PURGED_VERSION`,
    :data:`PERSONAL_MESSAGE`), ``files`` (how many of its files are personal or purged;
    no path is given: it may be the personal content itself)."""

    commit: str
    reasons: list[str] = field(default_factory=list)
    files: int = 0


def personal_message(message: bytes) -> bool:
    """True when a commit message names a personal path (``people/…``, by the identity
    fold) or a personal handoff (``Handoff P-…``)."""
    text = message.decode("utf-8", "replace")
    return "people/" in fold(text) or _HANDOFF.search(text) is not None


class _Walker:
    def __init__(self, repo: Repo, purged: set[str]) -> None:
        self.repo = repo
        self.purged = purged
        self.trees: dict[tuple[ObjectID, bool], tuple[int, int]] = {}
        self.blobs: dict[ObjectID, bool] = {}

    def personal_blob(self, sha: ObjectID) -> bool:
        if sha not in self.blobs:
            try:
                obj = self.repo[sha]
            except KeyError:
                obj = None
            self.blobs[sha] = isinstance(obj, Blob) and page_owner("x/x.md", obj.data) is not None
        return self.blobs[sha]

    def tree(self, sha: ObjectID, top: bool) -> tuple[int, int]:
        """(personal files, purged files) under tree ``sha``."""
        key = (sha, top)
        if key in self.trees:
            return self.trees[key]
        try:
            tree = self.repo[sha]
        except KeyError:
            tree = None
        personal = purged = 0
        if isinstance(tree, Tree):
            for item in tree.iteritems():
                if stat.S_ISDIR(item.mode):
                    if top and is_people_folder(item.path):
                        n = self.tree(item.sha, False)
                        personal += max(1, n[0] + n[1])
                        continue
                    a, b = self.tree(item.sha, False)
                    personal, purged = personal + a, purged + b
                elif stat.S_ISREG(item.mode):
                    if item.sha.decode() in self.purged:
                        purged += 1
                    elif item.path.lower().endswith(b".md") and self.personal_blob(item.sha):
                        personal += 1
        self.trees[key] = (personal, purged)
        return self.trees[key]


def hub_leaks(repo: Repo, tip: ObjectID, purged: set[str]) -> list[Leak]:
    """The commits reachable from ``tip`` (a remote-tracking ref's commit) that hold
    personal content or a version whose blob id (hex) is in ``purged`` (the wiki's
    tombstones), newest first by commit time. Missing objects are skipped."""
    walker = _Walker(repo, purged)
    out: list[tuple[int, Leak]] = []
    for sha, commit in walk(repo, tip, missing_ok=True):
        personal, gone = walker.tree(commit.tree, True)
        leak = Leak(sha.decode(), files=personal + gone)
        if personal:
            leak.reasons.append(PERSONAL_PAGE)
        if gone:
            leak.reasons.append(PURGED_VERSION)
        if personal_message(commit.message):
            leak.reasons.append(PERSONAL_MESSAGE)
        if leak.reasons:
            out.append((commit.commit_time, leak))
    out.sort(key=lambda x: -x[0])
    return [leak for _t, leak in out]
