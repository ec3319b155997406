"""A method of a class that is one of its collaborators' methods, declared in the class
body so a reader (and mypy) sees it there: ``read_page = Delegated("reader",
Reader.read_page, audit="read")`` makes ``memory.read_page(...)`` call
``memory.reader.read_page(...)`` with ``Reader.read_page``'s signature.

The bound method is looked up on first use and kept on the instance (a non-data
descriptor), so later calls cost a plain attribute read, and a test may still replace
it on one instance (``monkeypatch.setattr``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from wiki_memory.audit import audit_result
from wiki_memory.config import Settings
from wiki_memory.errors import Forbidden, NotFound
from wiki_memory.identity import Identity

__all__ = ["Audits", "Delegated", "audit_reads"]

_S = TypeVar("_S")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class Audits(Protocol):
    """What an owner of ``audit=`` delegates provides (the Memory)."""

    @property
    def settings(self) -> Settings: ...

    def audited(
        self, who: Identity | None, op: str, target: str, result: str = "ok", **extra: Any
    ) -> None: ...


def audit_reads(owner: Audits, op: str, fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` (a reader method taking the caller as ``user`` or as its last positional
    argument) with one ``read`` line in ``owner``'s audit log per call when its settings'
    ``audit_reads`` is set; refusals are written with their result."""

    @functools.wraps(fn)
    def wrapped(*args: _P.args, **kw: _P.kwargs) -> _R:
        if not owner.settings.audit_reads:
            return fn(*args, **kw)
        raw = kw.get("user", args[-1] if len(args) > 1 else None)
        who = raw if isinstance(raw, Identity) else None
        target = str(args[0]) if args and op != "list" else str(kw.get("project") or "")
        try:
            out = fn(*args, **kw)
        except (NotFound, Forbidden) as exc:
            owner.audited(who, "read", target, audit_result(exc), read=op)
            raise
        owner.audited(who, "read", target, "ok", read=op)
        return out

    return wrapped


class Delegated(Generic[_S, _P, _R]):
    """``holder``: the owner's attribute holding the collaborator; ``fn``: the
    collaborator's method (its name and signature are the delegate's); ``audit``: the
    read kind :func:`audit_reads` logs for each call (``"read"``, ``"list"``,
    ``"expand"``), or None for no audit line."""

    def __init__(
        self, holder: str, fn: Callable[Concatenate[_S, _P], _R], audit: str | None = None
    ) -> None:
        self.holder = holder
        self.fn = fn
        self.audit = audit
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Delegated[_S, _P, _R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[_P, _R]: ...

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        bound = self._bound(obj)
        obj.__dict__[self.name] = bound
        return bound

    def __call__(self, obj: object, *args: _P.args, **kw: _P.kwargs) -> _R:
        """Called through the class (``Memory.recall(memory, ...)``): nothing is kept
        on the instance, so a replacement on the class keeps being called."""
        return self._bound(obj)(*args, **kw)

    def _bound(self, obj: object) -> Callable[_P, _R]:
        bound: Callable[_P, _R] = getattr(getattr(obj, self.holder), self.fn.__name__)
        if self.audit is not None:
            bound = audit_reads(cast(Audits, obj), self.audit, bound)
        return bound
