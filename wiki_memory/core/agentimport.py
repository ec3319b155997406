"""Importing the harnesses' instruction and memory files (docs/agent-files.md): the one
core operation behind ``POST /v1/agent-files`` and ``wiki-memory import-agent-files``.

The client reads the files on its own machine (:mod:`wiki_memory.capture.agentfiles`)
and sends their text; the server never reads the client's disk. Each file becomes one
page:

- a **project** file (``scope: project``, ``source`` relative to the repository's top)
  goes to ``projects/<p>/agent-files/<name>.md``, where ``<p>`` is the project of the
  repository (its ``repo_id``, :mod:`wiki_memory.core.repos`) and ``<name>`` comes from
  the source alone: one page per project and file, whoever imports it;
- a **per-user** file (``scope: user``) goes to the caller's own folder:
  ``people/<user>/agent-files/<name>.md`` for a ``~/...`` source, and
  ``people/<user>/agent-files/<p>/<name>.md`` for one person's file of a project
  (``CLAUDE.local.md``), which never becomes a page others see.

The page's frontmatter says where it came from: ``type: agent-file``, ``source``,
``source_hash`` (:func:`wiki_memory.capture.agentfiles.content_hash`), ``imported``
(UTC time), ``imported_by``, ``harness``, ``repo_id`` and ``project`` when known,
``body_hash`` (sha256 of the body as written: whether a person edited it since) and, for
a Cursor rule, its own frontmatter as ``cursor_rule``. The text of the project's own
section (``brief --write``) is left out; the rest is scanned for secrets.

Importing again: the same ``source_hash`` changes nothing; a new one replaces the page
when its body is still the one imported; when a person edited it, the page stays as it
is and the new version is kept beside it as a conflict copy
(``<name>.conflict-import-<7 hex>.md`` with ``conflict_of`` and ``conflict_side:
import``, the marks sync's copies carry: ``wiki-memory sync-conflicts`` lists it and
resolves it). Every page goes through the border check
(:func:`wiki_memory.wiki.border.check`), the scope rule and the one writer; each write
is a line of the audit log.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from wiki_memory.capture.agentfiles import content_hash, without_section
from wiki_memory.core.knowledge import now_iso
from wiki_memory.core.pages import redact_page_text
from wiki_memory.errors import BadRequest, NotFound
from wiki_memory.identity import Identity
from wiki_memory.plainfile import page_hash as sha256
from wiki_memory.wiki import border
from wiki_memory.wiki.copies import mark_bytes
from wiki_memory.wiki.page import parse_page
from wiki_memory.wiki.replicate import conflict_name

__all__ = ["MAX_FILES", "SCOPES", "check_files", "import_files", "page_name"]

#: most files in one request
MAX_FILES = 100
#: where a file belongs
SCOPES = ("project", "user")
#: the side a conflict copy of an import names
SIDE = "import"
_FENCE = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.S | re.M)


def page_name(source: str) -> str:
    """The page's file name for a source: ``CLAUDE.md`` -> ``claude-md.md``,
    ``~/.claude/CLAUDE.md`` -> ``claude-claude-md.md``, ``.cursor/rules/a.mdc`` ->
    ``cursor-rules-a-mdc.md`` (at most 120 characters before ``.md``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", source.removeprefix("~/").lower()).strip("-")
    return (slug[:120].rstrip("-") or "file") + ".md"


def _check_file(f: Any, i: int) -> dict[str, str]:
    where = f"files[{i}]"
    if not isinstance(f, dict):
        raise BadRequest(f"{where} must be an object", field="files")
    out: dict[str, str] = {}
    for key in ("source", "scope", "text"):
        if not isinstance(f.get(key), str):
            raise BadRequest(f"{where}.{key} must be a string", field="files")
        out[key] = f[key]
    h = f.get("harness")
    out["harness"] = h if isinstance(h, str) and re.fullmatch(r"[a-z0-9-]{1,40}", h) else ""
    src = out["source"]
    if out["scope"] not in SCOPES:
        raise BadRequest(f"{where}.scope must be project or user", field="files")
    bare = src.removeprefix("~/")
    bad = (
        not bare
        or len(src) > 300
        or bare.startswith("/")
        or "\\" in src
        or any(p in ("", ".", "..") for p in bare.split("/"))
        or any(ord(c) < 32 for c in src)
        or (out["scope"] == "project" and src.startswith("~/"))
    )
    if bad:
        raise BadRequest(
            f"{where}.source must be a clean relative path (a project file's never starts with ~/)",
            field="files",
        )
    return out


def check_files(files: Any) -> list[dict[str, str]]:
    """A request's ``files``, each checked (``source``, ``scope``, ``text``, ``harness``
    as a string, "" when absent or not a harness name). Raises BadRequest naming
    ``files``: not a non-empty list of at most :data:`MAX_FILES`, or a malformed item
    (a ``source`` that is no clean relative path; a per-user one starts with ``~/``)."""
    if not isinstance(files, list) or not files:
        raise BadRequest("files must be a non-empty list", field="files")
    if len(files) > MAX_FILES:
        raise BadRequest(f"at most {MAX_FILES} files at once", field="files")
    return [_check_file(f, i) for i, f in enumerate(files)]


def _split_rule(text: str) -> tuple[dict[str, Any] | None, str]:
    """A Cursor rule's own frontmatter (a mapping) and its body; (None, text) otherwise."""
    m = _FENCE.match(text)
    if m is None:
        return None, text
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return None, text
    if not isinstance(meta, dict):
        return None, text
    return {str(k): v for k, v in meta.items()}, text[m.end() :]


def _page(f: dict[str, str], digest: str, user: str, project: str | None, rid: str | None) -> Any:
    """``(page bytes, redactions)`` of one file."""
    text = without_section(f["text"].encode("utf-8")).decode("utf-8")
    rule = None
    if f["source"].endswith(".mdc"):
        rule, text = _split_rule(text)
    data, redacted = redact_page_text(text)
    body = parse_page(data, "x.md").body
    meta: dict[str, Any] = {
        "type": "agent-file",
        "title": f["source"],
        "source": f["source"],
        "source_hash": digest,
        "imported": now_iso(),
        "imported_by": user,
    }
    if f["harness"]:
        meta["harness"] = f["harness"]
    if project:
        meta["project"] = project
    if rid and f["scope"] == "project":
        meta["repo_id"] = rid
    if rule is not None:
        meta["cursor_rule"] = rule
    meta["body_hash"] = sha256(body.encode("utf-8"))
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{head}---\n\n{body}\n".encode(), redacted


def _decide(current: bytes | None, source: str, digest: str) -> str:
    """``new``, ``unchanged``, ``update`` or ``conflict`` (see the module); ``taken``
    when the page at that name holds another source."""
    if current is None:
        return "new"
    page = parse_page(current, "x.md")
    meta = page.metadata
    if meta.get("source") != source:
        return "taken"
    if meta.get("source_hash") == digest:
        return "unchanged"
    if meta.get("body_hash") == sha256(page.body.encode("utf-8")):
        return "update"
    return "conflict"


def _current(memory: Any, ident: Identity, rel: str) -> bytes | None:
    try:
        return bytes(memory.scope.read(ident, rel).data)
    except NotFound:
        return None


def import_files(
    memory: Any,
    who: Identity,
    files: Any,
    *,
    project: str | None,
    repo_id: str | None = None,
    dry_run: bool = False,
    new_project: bool = False,
) -> dict[str, Any]:
    """Import ``files`` (``[{"source", "scope", "text", "harness"?}]``) for ``who`` into
    ``project`` (project files; None: none may be sent) and ``who``'s own folder.

    Returns ``{"project", "dry_run", "files": [{"source", "scope", "path", "hash",
    "action", "copy"?, "redacted"?, "reason"?}]}`` with ``action`` one of ``new``,
    ``update``, ``unchanged``, ``conflict`` (``copy``: the conflict copy holding the new
    version) or ``refused`` (``reason``: the border check's). A dry run decides the same
    and writes nothing. Raises BadRequest (a malformed file, more than
    :data:`MAX_FILES`, a project file without a project), NotFound/Forbidden from the
    scope rule (a folder ``who`` may not write). ``new_project`` (a dry run only): the
    project does not exist yet, so each of its files would be ``new``."""
    checked = check_files(files)
    ident = memory.scope.identity(who)
    limit = memory.settings.max_body_bytes
    out: list[dict[str, Any]] = []
    for f in checked:
        in_project = not f["source"].startswith("~/")
        if in_project and not project:
            raise BadRequest(
                f"{f['source']} is a file of a project: name the project (or its repo_id)",
                field="project",
            )
        raw = f["text"].encode("utf-8")
        digest = content_hash(raw)
        if f["scope"] == "project":
            folder = f"projects/{project}/agent-files"
        else:
            folder = f"people/{ident.user}/agent-files" + (f"/{project}" if in_project else "")
        rel = f"{folder}/{page_name(f['source'])}"
        fresh = new_project and f["scope"] == "project"
        if not fresh:
            memory.scope.write_check(ident, rel, "page.write")
        row: dict[str, Any] = {"source": f["source"], "scope": f["scope"], "path": rel}
        row["hash"] = digest
        verdict = border.check(
            [border.Entry(rel, 0o100644, len(raw), digest)],
            border.Source.OWN,
            limits=border.Limits(max_entry_bytes=limit, max_total_bytes=limit * MAX_FILES),
        )
        if verdict.refused:
            out.append({**row, "action": "refused", "reason": verdict.refused[0].reason})
            continue
        # scanned for secrets only once the caller's right and the border allow it
        page, redacted = _page(f, digest, ident.user, project, repo_id)
        action = "new" if fresh else _decide(_current(memory, ident, rel), f["source"], digest)
        if action == "taken":  # two sources with one name: the second gets its own
            rel = rel[:-3] + "-" + sha256(f["source"].encode())[:6] + ".md"
            row["path"] = rel
            action = _decide(_current(memory, ident, rel), f["source"], digest)
        if not dry_run and not new_project:
            action = _write(memory, ident, rel, f["source"], digest, page)
        row["action"] = action
        if redacted:
            row["redacted"] = redacted
        if action == "conflict":
            blob: Any = digest.removeprefix("sha256:").encode()
            copy = conflict_name(rel.encode(), SIDE, blob)
            row["copy"] = copy.decode()
            if not dry_run:
                marked = mark_bytes(page, rel, SIDE)
                memory.update_page(
                    row["copy"],
                    lambda cur, m=marked: None if cur is not None else m,
                    user=ident.user,
                    message=f"Keep the imported {f['source']} beside the edited page",
                    who=ident,
                    op="page.write",
                )
        out.append(row)
    return {"project": project, "dry_run": dry_run, "files": out}


def _write(memory: Any, ident: Identity, rel: str, source: str, digest: str, page: bytes) -> str:
    """Write one page when :func:`_decide` says so, decided again on the bytes on disk at
    the moment of the write (a person's save in between is seen). Returns the action."""
    seen = {"action": "unchanged"}

    def fn(current: bytes | None) -> bytes | None:
        action = _decide(current, source, digest)
        seen["action"] = action
        return page if action in ("new", "update") else None

    memory.update_page(
        rel, fn, user=ident.user, message=f"Import {source}", who=ident, op="page.write"
    )
    return seen["action"]
