"""A page's lifecycle state: the one list of states and what each one means.

Frontmatter ``state`` (docs/pages.md, "Page states") says where a page is in its life.
``status`` is a different key and keeps its meaning on session and handoff pages. This
module is the only place that knows the states; recall, the brief, listings and the web
view ask it (in Python with :func:`page_state`, in SQL with :func:`shown_sql`) and a
later feature adds a row to :data:`STATES` instead of inventing another key.

- ``current``: the default, also when ``state`` is absent, not a string, or a value
  this list does not know (a vault's own ``state: draft`` leaves the page current);
- ``superseded``: replaced by the page ``superseded_by`` names; never hidden by SQL:
  recall, listings and the web view rank it after the page that replaced it, marked, and
  the brief leaves it out, all through :mod:`wiki_memory.index.supersede` (which also
  decides that a broken ``superseded_by``, missing, forgotten or in a cycle, leaves the
  page current: a broken supersession never hides a page);
- ``forgotten``: set by ``wiki-memory forget`` with ``forgotten_by`` and
  ``forgotten_at``; left out of recall, the brief and every listing for every user, and
  kept in git history; reading it by its path still works (its frontmatter says
  ``state: forgotten``).

Values are compared after ``strip()`` and ASCII lower-casing, in Python and in SQL alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULT", "STATES", "State", "page_state", "shown", "shown_sql"]

#: where a page can show up: ``recall`` (recall and its ranking), ``brief`` (the
#: session-start brief, pinned pages included), ``list`` (page listings, the web view's
#: lists)
Where = Literal["recall", "brief", "list"]


@dataclass(frozen=True)
class State:
    """One lifecycle state: ``name`` and where a page in it shows up; ``keys`` are the
    frontmatter keys that go with it (written by the operation that sets it)."""

    name: str
    recall: bool
    brief: bool
    list: bool
    keys: tuple[str, ...] = ()

    def shown_in(self, where: Where) -> bool:
        """True when a page in this state shows up in ``where``."""
        return bool(getattr(self, where))


#: every state a page can be in, by name (the first is the default)
STATES: dict[str, State] = {
    "current": State("current", recall=True, brief=True, list=True),
    # shown everywhere by SQL: where it ranks, and whether the brief takes it, is decided
    # after the query by wiki_memory.index.supersede (a broken one stays current)
    "superseded": State(
        "superseded", recall=True, brief=True, list=True, keys=("superseded_by", "valid_until")
    ),
    "forgotten": State(
        "forgotten", recall=False, brief=False, list=False, keys=("forgotten_by", "forgotten_at")
    ),
}
DEFAULT = "current"


def _fold(value: str) -> str:
    # ASCII lower-casing only, so that SQLite's lower() agrees (shown_sql)
    return value.strip(" ").translate(
        str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
    )


def page_state(meta: Mapping[str, Any] | None) -> str:
    """The state name of a page with frontmatter ``meta`` (None or ``{}``: no
    frontmatter): ``meta["state"]`` when it is a string naming a state of
    :data:`STATES`, else :data:`DEFAULT`."""
    value = (meta or {}).get("state")
    if isinstance(value, str):
        name = _fold(value)
        if name in STATES:
            return name
    return DEFAULT


def shown(meta: Mapping[str, Any] | None, where: Where) -> bool:
    """True when a page with frontmatter ``meta`` shows up in ``where``."""
    return STATES[page_state(meta)].shown_in(where)


def shown_sql(alias: str, where: Where) -> str:
    """The SQL condition keeping the ``pages`` rows ``alias`` whose state shows up in
    ``where``, read from the stored frontmatter (``alias.meta``, a JSON object). No
    arguments: the state names are constants of this module."""
    hidden = sorted(s.name for s in STATES.values() if not s.shown_in(where))
    if not hidden:
        return "1"
    names = ", ".join(f"'{n}'" for n in hidden)
    value = f"json_extract({alias}.meta, '$.state')"
    return (
        f"(json_type({alias}.meta, '$.state') IS NOT 'text' "
        f"OR lower(trim({value})) NOT IN ({names}))"
    )
