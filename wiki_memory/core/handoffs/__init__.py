"""Claim-once handoffs: typed pages that one agent leaves and exactly one other takes up.

A handoff is a page, ``projects/<project>/handoffs/<id>.md`` (or, when personal,
``people/<user>/handoffs/<id>.md``: the owner's private folder, which no other user's
list, show, brief or recall sees). Its frontmatter holds the lasting state; see
``docs/handoffs.md`` for the protocol.

States: ``open`` → ``offered`` → ``claimed`` → ``done``; ``open``/``offered`` →
``cancelled``; ``open``/``offered`` → ``expired`` once ``expires`` has passed. An offer
is a lease to one session (``lease_seconds``, default 30 min) kept in memory only:
losing it (a restart) just reopens the handoff. Every other state lives in the page.

Every transition is a compare-and-set on the single writer thread (the writer runs one
job at a time, so the state a transition checks is the state it changes), and each one
is committed before the call returns. The claimant is a (user, harness, session) triple.

Errors: :class:`~wiki_memory.errors.NotFound` (no such handoff, or one the caller may not
see), :class:`HandoffConflict` (409: the state forbids the action; the message names the
holder or says expired/cancelled/done), :class:`HandoffForbidden` (403: not the
creator/claimant), ``ValueError`` (400: a bad field).

The package owns nothing itself; it re-exports the public names of its modules:
``model`` (data, page format, errors, tunables, the :class:`HandoffMemory` protocol),
``states`` (effective status, leases, the rule of each transition), ``pages`` (finding,
reading, numbering and writing the pages), ``service`` (:class:`HandoffService`) and ``auto`` (automatic handoffs at session end). It never imports
``wiki_memory.core.memory``: the core's ``Memory`` builds ``HandoffService(self)``.
"""

from wiki_memory.core.handoffs.auto import (
    NEXT_STEP_RE,
    SessionSignals,
    next_step_lines,
    open_automatic,
    session_signals,
)
from wiki_memory.core.handoffs.model import (
    CLAIM_KEYS,
    ID_RE,
    LIST_OMITS,
    OWNED_KEYS,
    SECTIONS,
    STATES,
    Claimant,
    Handoff,
    HandoffConfig,
    HandoffConflict,
    HandoffForbidden,
    HandoffMemory,
    Lease,
    claim_fields,
    list_entry,
    parse_handoff,
    render_page,
    session_link,
)
from wiki_memory.core.handoffs.pages import HandoffPages
from wiki_memory.core.handoffs.service import HandoffService
from wiki_memory.core.handoffs.states import Leases, status_of

__all__ = [
    "CLAIM_KEYS",
    "ID_RE",
    "LIST_OMITS",
    "NEXT_STEP_RE",
    "OWNED_KEYS",
    "SECTIONS",
    "STATES",
    "Claimant",
    "Handoff",
    "HandoffConfig",
    "HandoffConflict",
    "HandoffForbidden",
    "HandoffMemory",
    "HandoffPages",
    "HandoffService",
    "Lease",
    "Leases",
    "claim_fields",
    "list_entry",
    "SessionSignals",
    "next_step_lines",
    "open_automatic",
    "parse_handoff",
    "render_page",
    "session_link",
    "session_signals",
    "status_of",
]
