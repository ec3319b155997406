"""Memory's API is declared in its class body (core/delegate.py): each delegate calls
its collaborator's method with that method's signature, and an audited one writes one
audit line per call when reads are audited."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from wiki_memory.core.delegate import Delegated
from wiki_memory.core.memory import Memory
from wiki_memory.core.reader import Reader
from wiki_memory.identity import Identity


class Shelf:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Identity | None]] = []

    def read(self, path: str, user: Identity | None = None) -> str:
        self.calls.append((path, user))
        return f"text of {path}"


class Owner:
    read = Delegated("shelf", Shelf.read, audit="read")
    plain = Delegated("shelf", Shelf.read)

    def __init__(self, audit_reads: bool) -> None:
        self.shelf = Shelf()
        self.settings = SimpleNamespace(audit_reads=audit_reads)
        self.lines: list[tuple[Any, ...]] = []

    def audited(self, who: Any, op: str, target: str, result: str = "ok", **extra: Any) -> None:
        self.lines.append((who, op, target, result, extra))


def test_memory_declares_its_read_api_in_the_class_body() -> None:
    for name in ("read_page", "list_pages", "expand", "recall", "resolve_project", "page_meta"):
        assert isinstance(vars(Memory)[name], Delegated), name
    assert Memory.read_page.fn is Reader.read_page
    assert Memory.read_page.__doc__ == Reader.read_page.__doc__


def test_a_delegate_calls_its_collaborator_and_audits_when_asked() -> None:
    quiet, loud = Owner(audit_reads=False), Owner(audit_reads=True)
    ann = Identity("ann")
    assert quiet.read("notes/a.md", user=ann) == "text of notes/a.md"
    assert quiet.lines == []
    assert loud.read("notes/a.md", user=ann) == "text of notes/a.md"
    assert loud.plain("notes/b.md") == "text of notes/b.md"
    assert loud.lines == [(ann, "read", "notes/a.md", "ok", {"read": "read"})]
    assert loud.shelf.calls == [("notes/a.md", ann), ("notes/b.md", None)]


def test_a_delegate_can_be_replaced_on_one_instance_or_called_through_the_class() -> None:
    a, b = Owner(False), Owner(False)
    a.read = lambda path, user=None: "replaced"  # type: ignore[method-assign]
    assert a.read("x") == "replaced"
    assert b.read("x") == "text of x"
    assert Owner.read(b, "y") == "text of y"
