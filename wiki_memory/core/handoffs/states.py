"""The handoff state machine: the effective status, the offers, and each transition's rule.

Owns :class:`Leases` (the offers: one lease per handoff, kept in memory only, so losing
them just reopens the handoffs), :func:`status_of` (stored status, ``offered`` while a
lease runs, ``expired`` past ``expires``) and the ``decide_*`` rules of claim, complete,
release and cancel.

A rule gets the handoff as its page holds it now and the time, and raises to refuse
(:class:`~wiki_memory.core.handoffs.model.HandoffConflict`,
:class:`~wiki_memory.core.handoffs.model.HandoffForbidden`), returns None for "already
so" (the same caller's repeat: nothing is written), or returns the frontmatter keys to
set. Rules run inside the service's compare-and-set job on the single writer thread, so
the state a rule checks is the state it changes.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterable
from typing import Any

from wiki_memory.capture.observation import iso
from wiki_memory.core.handoffs.model import (
    STATES,
    Claimant,
    Handoff,
    HandoffConflict,
    HandoffForbidden,
    Lease,
    claim_fields,
    new_offer_code,
)

#: how many used offer codes are remembered (to answer "already used" to their user)
SPENT_CODES = 10_000


class ExpiredNow(Exception):
    """Internal: a transition found an open handoff past ``expires``."""

    def __init__(self, conflict: HandoffConflict) -> None:
        super().__init__(str(conflict))
        self.conflict = conflict


# --------------------------------------------------------------------------- leases


class Leases:
    """The live offers, handoff id → :class:`Lease` (thread-safe). Only one session
    holds an offer on a handoff at a time. Each lease carries its offer code
    (:func:`~wiki_memory.core.handoffs.model.new_offer_code`): made when the offer is
    granted, kept while it is renewed, dead when the lease ends. A code used for a claim
    is remembered as spent (its SHA-256, the handoff and the user; the last
    :data:`SPENT_CODES` of them), so that presenting it again can say so."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Lease] = {}
        self._spent: dict[str, tuple[str, str]] = {}

    def live(self, hid: str, now: float) -> Lease | None:
        """The lease on ``hid`` while it runs; one that ran out is dropped."""
        with self._lock:
            lease = self._by_id.get(hid)
            if lease is not None and lease.until <= now:
                del self._by_id[hid]
                return None
            return lease

    def by_code(self, code: str, now: float) -> tuple[str, Lease] | None:
        """The live lease whose offer code is ``code`` (compared in constant time, any
        case) and its handoff id; None when no running offer has it."""
        want = code.strip().lower()
        with self._lock:
            for hid, lease in self._by_id.items():
                if lease.code and hmac.compare_digest(lease.code, want) and lease.until > now:
                    return hid, lease
        return None

    def spent(self, code: str) -> tuple[str, str] | None:
        """``(handoff id, user)`` of a code already used for a claim, else None."""
        with self._lock:
            return self._spent.get(_digest(code))

    def drop(self, hid: str) -> None:
        with self._lock:
            self._by_id.pop(hid, None)

    def give_back(self, who: Claimant, ids: Iterable[str]) -> None:
        """Drop the leases ``who`` holds on ``ids``."""
        with self._lock:
            for hid in ids:
                lease = self._by_id.get(hid)
                if lease is not None and lease.holder == who:
                    del self._by_id[hid]

    def claimed(self, hid: str, who: Claimant) -> None:
        """``who`` claimed ``hid``: its lease ends (its code is spent), and so do
        ``who``'s other offers (one handoff at a time: the session's other offers go back
        to the pool)."""
        with self._lock:
            lease = self._by_id.pop(hid, None)
            if lease is not None and lease.code:
                self._spent[_digest(lease.code)] = (hid, lease.holder.user)
                while len(self._spent) > SPENT_CODES:
                    del self._spent[next(iter(self._spent))]
            for other in [k for k, v in self._by_id.items() if v.holder == who]:
                del self._by_id[other]

    def held_by(self, who: Claimant, now: float) -> list[str]:
        """The ids of the live leases ``who`` holds."""
        with self._lock:
            return [k for k, v in self._by_id.items() if v.holder == who and v.until > now]

    def renew(self, hid: str, who: Claimant, until: float) -> None:
        """Lease ``hid`` to ``who`` until ``until`` (epoch seconds); a lease ``who``
        already holds keeps its offer code."""
        with self._lock:
            old = self._by_id.get(hid)
            code = old.code if old is not None and old.holder == who else new_offer_code()
            self._by_id[hid] = Lease(who, until, code or new_offer_code())

    def grant(self, hid: str, who: Claimant, now: float, until: float) -> bool:
        """Lease ``hid`` to ``who`` until ``until``, unless another holds a live lease
        on it (then False). A new lease gets a new offer code."""
        with self._lock:
            lease = self._by_id.get(hid)
            if lease is not None and lease.until > now and lease.holder != who:
                return False
            keep = lease is not None and lease.holder == who and lease.until > now
            code = lease.code if keep and lease is not None else ""
            self._by_id[hid] = Lease(who, until, code or new_offer_code())
            return True


def _digest(code: str) -> str:
    return hashlib.sha256(code.strip().lower().encode()).hexdigest()


# --------------------------------------------------------------------------- status


def status_of(h: Handoff, now: float, leases: Leases) -> str:
    """The effective status: stored status, ``offered`` while a lease runs, and
    ``expired`` for an open handoff past ``expires``."""
    st = h.stored_status
    if st in ("open", "offered"):
        exp = h.expires
        if exp is not None and exp <= now:
            return "expired"
        return "offered" if leases.live(h.id, now) else "open"
    return st


def refuse_final(h: Handoff, now: float, action: str) -> None:
    """Raise the 409 for done/cancelled/expired handoffs (and an unknown status).

    An open handoff just found past ``expires`` raises :class:`ExpiredNow`, so the
    transition stamps ``status: expired`` before it refuses."""
    st = h.stored_status
    m = h.meta
    holder = h.holder()
    if st == "done":
        by = m.get("done_by") or m.get("claimed_by") or "its claimant"
        raise HandoffConflict(
            "done",
            f"cannot {action} handoff {h.id}: it is done (completed by {by} at {m.get('done_at')})",
            "done",
            holder.to_json() if holder else None,
        )
    if st == "cancelled":
        extra = f"; superseded by {m['superseded_by']}" if m.get("superseded_by") else ""
        raise HandoffConflict(
            "cancelled",
            f"cannot {action} handoff {h.id}: it was cancelled"
            f" (by {m.get('cancelled_by') or 'its creator'} at {m.get('cancelled_at')}{extra})",
            "cancelled",
        )
    exp = h.expires
    if st == "expired" or (st in ("open", "offered") and exp is not None and exp <= now):
        conflict = HandoffConflict(
            "expired",
            f"cannot {action} handoff {h.id}: it expired at {m.get('expires')}",
            "expired",
        )
        if st != "expired":
            raise ExpiredNow(conflict)
        raise conflict
    if st not in STATES:
        raise HandoffConflict(
            "bad_status",
            f"cannot {action} handoff {h.id}: its status {st!r} is not one of {', '.join(STATES)}",
            st,
        )


# --------------------------------------------------------------------------- rules


def decide_claim(h: Handoff, now: float, who: Claimant, leases: Leases) -> dict[str, Any] | None:
    """Claim: open (or offered to ``who``) → claimed by ``who``, for good. The holder's
    repeat is None; another holder, a lease to another user or a final state refuse.
    While the offer runs, a claim by the offered user from any session of theirs is the
    offered session's claim (the claim keys name the offered session). Ends the
    claimant's other offers."""
    holder = h.holder()
    if h.stored_status == "claimed" and holder is not None:
        if holder == who:
            return None
        raise HandoffConflict(
            "claimed",
            f"handoff {h.id} is already claimed by {holder.describe()}"
            f" since {h.meta.get('claimed_at')}",
            "claimed",
            holder.to_json(),
        )
    refuse_final(h, now, "claim")
    if h.stored_status == "claimed":  # claimed without a holder: a hand edit
        raise HandoffConflict(
            "claimed", f"handoff {h.id} is already claimed (no holder recorded)", "claimed"
        )
    lease = leases.live(h.id, now)
    if lease is not None and lease.holder != who and lease.holder.user == who.user:
        # the offered user's sessions count as one claimant while the offer runs: the
        # claim is the offered session's (its brief shows it held on resume)
        who = lease.holder
    if lease is not None and lease.holder != who:
        raise HandoffConflict(
            "offered",
            f"handoff {h.id} is offered to {lease.holder.describe()} until"
            f" {iso(lease.until)}; it reopens then unless they claim it",
            "offered",
            lease.holder.to_json(),
        )
    leases.claimed(h.id, who)
    return {"status": "claimed", **claim_fields(who, iso(now)), "updated": iso(now)}


def decide_complete(h: Handoff, now: float, who: Claimant, leases: Leases) -> dict[str, Any] | None:
    """Complete: claimed by ``who``'s user (any session of theirs) → done. The same
    user's repeat is None."""
    user = who.user
    holder = h.holder()
    if h.stored_status == "done":
        if (h.meta.get("done_by") or (holder.user if holder else None)) == user:
            return None
    refuse_final(h, now, "complete")
    if h.stored_status != "claimed" or holder is None:
        raise HandoffConflict(
            "not_claimed",
            f"handoff {h.id} is {status_of(h, now, leases)}: claim it before completing it",
            status_of(h, now, leases),
        )
    if holder.user != user:
        raise HandoffConflict(
            "claimed",
            f"handoff {h.id} is claimed by {holder.describe()}; only they can complete it",
            "claimed",
            holder.to_json(),
        )
    return {"status": "done", "done_at": iso(now), "done_by": who.user, "updated": iso(now)}


def decide_release(h: Handoff, now: float, user: str, leases: Leases) -> dict[str, Any] | None:
    """Release: claimed by ``user`` → open again, the claim keys cleared."""
    holder = h.holder()
    if h.stored_status != "claimed":
        refuse_final(h, now, "release")
        raise HandoffConflict(
            "not_claimed",
            f"handoff {h.id} is {status_of(h, now, leases)}: nobody holds it",
            status_of(h, now, leases),
        )
    if holder is not None and holder.user != user:
        raise HandoffConflict(
            "claimed",
            f"handoff {h.id} is claimed by {holder.describe()}; only they can release it",
            "claimed",
            holder.to_json(),
        )
    return {"status": "open", **claim_fields(None), "updated": iso(now)}


def decide_cancel(
    h: Handoff, now: float, user: str, wiki_owner: str, reason: str, leases: Leases
) -> dict[str, Any] | None:
    """Cancel: open or offered → cancelled (its lease ends), by its creator or
    ``wiki_owner`` only. The same user's repeat is None; a claimed handoff must be
    released first."""
    if h.stored_status == "cancelled" and h.meta.get("cancelled_by") == user:
        return None
    holder = h.holder()
    if h.stored_status == "claimed" and holder is not None:
        raise HandoffConflict(
            "claimed",
            f"handoff {h.id} is claimed by {holder.describe()}; it must be released"
            " before it can be cancelled",
            "claimed",
            holder.to_json(),
        )
    refuse_final(h, now, "cancel")
    if user not in (h.owner, wiki_owner):
        raise HandoffForbidden(
            f"only {h.owner or 'its creator'} (or the wiki's owner) can cancel handoff {h.id}"
        )
    leases.drop(h.id)
    updates: dict[str, Any] = {
        "status": "cancelled",
        "cancelled_at": iso(now),
        "cancelled_by": user,
        "updated": iso(now),
    }
    if reason:
        updates["cancel_reason"] = reason
    return updates
