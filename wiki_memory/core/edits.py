"""Precise edits of one page, for agents and people alike (docs/api.md "Precise edits",
docs/mcp.md ``page_edit``): the one core operation behind ``POST /v1/edit``, the MCP
tool ``page_edit`` and ``wiki-memory page edit``.

Operations (``op``):

- ``append``: ``text`` as whole lines at the end of the page or of ``section``;
- ``item``: a checklist item ``- [ ] text`` after the last checklist item of the page or
  of ``section``;
- ``replace_section``: the body of ``section`` (everything under its heading line)
  becomes ``text``, when ``expected_hash`` is the section's hash
  (:func:`wiki_memory.wiki.sections.section_hash`); else 412 ``conflict`` with the current
  hash (428 ``precondition_required`` with it when no hash was sent);
- ``rename``: the page moves to ``new_path`` (:mod:`wiki_memory.core.rename`).

``append`` and ``item`` need no hash: they are spliced into the text on disk at the
moment of the write, and when a person saves in between they are spliced into the
person's text instead (``Memory.update_page``; invariant 8). Every edit passes the scope
rule (:mod:`wiki_memory.core.scope`) before the text is scanned for secrets and again on
the bytes on disk, is written by the one writer, and is committed at once with the caller
as author. ``edit_id`` (optional, the caller's own): an id seen before answers the
first result (``repeated: true``) and changes nothing, kept durably
(:mod:`wiki_memory.core.editlog`); the look-up, the edit and the record run in one job
on the writer thread, so two calls with one id never both edit.
"""

from __future__ import annotations

import weakref
from typing import Any

from wiki_memory.core.editlog import EditLog, check_edit_id
from wiki_memory.core.knowledge import now_iso
from wiki_memory.core.pages import page_path_for_write, redact_page_text
from wiki_memory.core.scope import not_found
from wiki_memory.core.writer import WriteResult
from wiki_memory.errors import BadRequest, Conflict, PreconditionRequired
from wiki_memory.identity import Identity
from wiki_memory.plainfile import page_hash
from wiki_memory.wiki import sections
from wiki_memory.wiki.frontmatter import set_keys
from wiki_memory.wiki.page import parse_page

__all__ = ["OPS", "edit_page"]

#: the operations :func:`edit_page` knows
OPS = ("append", "item", "replace_section", "rename")

_logs: weakref.WeakKeyDictionary[Any, EditLog] = weakref.WeakKeyDictionary()


def _log(memory: Any) -> EditLog:
    """The memory's edit log (opened on first use, on the writer thread)."""
    log = _logs.get(memory)
    if log is None:
        log = _logs[memory] = EditLog(memory.settings.data_dir / "edits.db")
    return log


def _decode(current: bytes | None, rel: str) -> str:
    if current is None:
        raise not_found(rel)
    try:
        return current.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(f"{rel} is not UTF-8 text; write it whole", field="path") from None


def _touched(new: bytes) -> bytes:
    """``new`` with its frontmatter ``updated`` set to now (UTC) when the page keeps one:
    an edit is a change, which ``since``/``until`` and the web view's "changed" read."""
    if b"updated" not in new[:4096] or "updated" not in parse_page(new, "edit").metadata:
        return new
    return set_keys(new, {"updated": now_iso()})


def _splice(op: str, rel: str, add: str, section: str | None, expected: str | None) -> Any:
    """The pure ``fn(current) -> new bytes`` of one text edit."""

    def fn(current: bytes | None) -> bytes:
        return _touched(edited(current))

    def edited(current: bytes | None) -> bytes:
        text = _decode(current, rel)
        if op == "append":
            return sections.append_text(text, add, section).encode("utf-8")
        if op == "item":
            return sections.insert_item(text, add, section).encode("utf-8")
        assert section is not None
        new, before = sections.replace_body(text, section, add, expected or "")
        if expected is None:
            raise PreconditionRequired(
                f"replace_section needs the section's hash: {before}", hash=before
            )
        if before != expected:
            err = Conflict(
                f"section {section!r} of {rel} changed since it was read; its hash is now "
                f"{before}: read it again and retry with that hash",
                before,
            )
            err.extra["hash"] = before
            raise err
        return new.encode("utf-8")

    return fn


def edit_page(
    memory: Any,
    op: str,
    path: str,
    *,
    who: Identity,
    text: str | None = None,
    section: str | None = None,
    expected_hash: str | None = None,
    new_path: str | None = None,
    edit_id: str | None = None,
    face: str = "api",
    timeout: float = 60,
) -> dict[str, Any]:
    """Run one precise edit (see the module) for the user ``who``; committed before this
    returns.

    Returns ``{"op", "path", "hash", "changed", "redacted"}`` (``hash``: sha256 of the
    page's bytes after the edit; for ``replace_section`` also ``section_hash``, of the
    section after it; for ``rename`` also ``from``, ``rewritten`` (paths whose links
    now name the new path) and ``kept`` (how many linking pages the caller may not write,
    left as they are)), plus ``repeated: true`` when ``edit_id`` answered an earlier
    result. Raises BadRequest (a missing or wrong field, an unknown or ambiguous
    section), PathRefused/PathNotWritable (400), NotFound (404: missing, or hidden from
    ``who``), Forbidden (403: ``who`` may read but not write), Conflict (412, ``hash``:
    the section's current hash; for ``rename``: ``new_path`` exists),
    PreconditionRequired (428, ``replace_section`` without ``expected_hash``).
    """
    if op not in OPS:
        raise BadRequest(f"op must be one of {', '.join(OPS)}", field="op")
    eid = check_edit_id(edit_id)
    rel = page_path_for_write(path)
    ident = memory.scope.identity(who)
    # the right to write, before the text is scanned (DESIGN.md invariant 13)
    memory.scope.write_check(ident, rel, "page.edit")
    add, redacted = "", 0
    if op == "rename":
        if not isinstance(new_path, str) or not new_path.strip():
            raise BadRequest("rename needs new_path", field="new_path")
    else:
        if not isinstance(text, str) or (op != "replace_section" and not text.strip()):
            raise BadRequest(f"{op} needs text", field="text")
        limit = memory.settings.max_body_bytes
        if len(text.encode("utf-8")) > limit:
            raise BadRequest(f"text is over the limit of {limit} bytes", field="text")
        data, redacted = redact_page_text(text)
        add = data.decode("utf-8")
        if op == "replace_section" and not (section or "").strip():
            raise BadRequest("replace_section needs section", field="section")
    if section is not None and not section.strip():
        section = None
    expected = expected_hash.strip().lower() if expected_hash else None

    def apply() -> dict[str, Any]:
        res = memory.update_page(
            rel,
            _splice(op, rel, add, section, expected),
            user=ident.user,
            message=f"{_verb(op)} {rel} ({face})",
            who=ident,
            op="page.edit",
        )
        out: dict[str, Any] = {
            "op": op,
            "path": rel,
            "hash": res.value,
            "changed": res.value is not None,
            "redacted": redacted,
        }
        if res.value is None:
            out["hash"] = page_hash(memory.scope.read(ident, rel).data)
        if op == "replace_section" and section is not None:
            now = memory.scope.read(ident, rel).data.decode("utf-8")
            out["section_hash"] = sections.section_hash(now, sections.find_section(now, section))
        return out

    def job() -> WriteResult:
        if eid is not None:
            found = _log(memory).get(ident.user, eid)
            if found is not None:
                return WriteResult(value={**found, "repeated": True})
        if op == "rename":
            from wiki_memory.core.rename import rename_page

            done = rename_page(memory, rel, str(new_path), ident, face=face)
        else:
            done = WriteResult(value=apply(), commit_now=True)
        if eid is not None:
            _log(memory).put(ident.user, eid, done.value)
        return done

    res: WriteResult = memory.writer.call(job, timeout=timeout)
    value: dict[str, Any] = res.value
    return value


def _verb(op: str) -> str:
    return {"append": "Append to", "item": "Add an item to", "replace_section": "Edit"}[op]
