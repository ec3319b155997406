"""Topic pages in a sync's merge (docs/git.md, "Topic pages in a merge"): when both
replicas changed a project and one of them changed a compiled topic page of it, the part
below the marker of every topic page of that project is recompiled from the merged
sessions in the merge commit, never merged line by line and never a conflict copy; the
people's part above the marker merges as any page does.

:func:`merge_trees` is :func:`wiki_memory.wiki.pagemerge.merge_trees` with that rule: the
compiled topic pages of such projects are held out of the per-file merge, the rest of
the tree merges, then each held page gets its merged head (a three-way merge of the
parts above the marker) and a compiled part from the merged tree's shared sessions and
notes (:func:`wiki_memory.wiki.topics.compiled_pages`), so the merge commit holds what a
compile of the merged sessions writes. A page one side holds without a marker (a person
took it over) merges as any page.
"""

from __future__ import annotations

from dulwich.objects import Blob, ObjectID
from dulwich.repo import Repo

from wiki_memory.core.topics import GONE, folder_of
from wiki_memory.wiki import pagemerge
from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki import topics as tp
from wiki_memory.wiki.copies import mark_bytes
from wiki_memory.wiki.frontmatter import FrontmatterError
from wiki_memory.wiki.personal import page_owner
from wiki_memory.wiki.replicate import Files

__all__ = ["merge_trees", "recompiled_projects"]

_MARK = tp.MARKER.encode()
_MODE = 0o100644


def _blob(repo: Repo, entry: tuple[int, ObjectID] | None) -> bytes | None:
    if entry is None:
        return None
    try:
        obj = repo[entry[1]]
    except KeyError:
        return None
    return bytes(obj.data) if isinstance(obj, Blob) else None


def _project(path: bytes) -> str | None:
    """The project of a path below ``projects/<p>/``, else None."""
    parts = path.split(b"/")
    if len(parts) < 3 or parts[0] != b"projects":
        return None
    return parts[1].decode("utf-8", "surrogateescape")


def _compiled(data: bytes | None) -> bool:
    """True for a topic page's bytes that hold the marker line and say ``type: topic``
    (the compiler's page, as a compile judges it: :func:`wiki_memory.wiki.topics.
    is_topic_page`); a person's page that only quotes the marker merges as any page."""
    if data is None or not (data.startswith(_MARK) or b"\n" + _MARK in data):
        return False
    return tp.is_topic_page(data)


def recompiled_projects(repo: Repo, base: Files, ours: Files, theirs: Files) -> set[str]:
    """The projects whose topic pages a merge recompiles: both sides changed a file below
    ``projects/<p>/`` since ``base`` and one side changed a compiled topic page
    (``projects/<p>/topics/*.md`` holding the marker) there."""
    changed: dict[str, set[int]] = {}
    topical: set[str] = set()
    for side_no, side in enumerate((ours, theirs)):
        for path in set(base) | set(side):
            entry = side.get(path)
            if entry == base.get(path):
                continue
            proj = _project(path)
            if proj is None:
                continue
            changed.setdefault(proj, set()).add(side_no)
            rel = path.decode("utf-8", "surrogateescape")
            if proj not in topical and tp.is_topic_path(rel) and rel.endswith(".md"):
                if _compiled(_blob(repo, entry)) or _compiled(_blob(repo, base.get(path))):
                    topical.add(proj)
    return {p for p in topical if changed.get(p) == {0, 1}}


def merge_trees(repo: Repo, base: Files, ours: Files, theirs: Files, remote: str) -> rp.MergeResult:
    """:func:`wiki_memory.wiki.pagemerge.merge_trees` (same arguments and result) with
    the compiled topic pages of :func:`recompiled_projects` recompiled from the merged
    tree instead of merged per file (see the module)."""
    projects = recompiled_projects(repo, base, ours, theirs)
    if not projects:
        return pagemerge.merge_trees(repo, base, ours, theirs, remote)
    held: set[bytes] = set()
    for path in set(base) | set(ours) | set(theirs):
        rel = path.decode("utf-8", "surrogateescape")
        if _project(path) not in projects or not tp.is_topic_path(rel):
            continue
        versions = [_blob(repo, side.get(path)) for side in (base, ours, theirs)]
        if rel.endswith(".md") and all(_compiled(v) for v in versions if v is not None):
            held.add(path)

    def without(files: Files) -> Files:
        return {p: e for p, e in files.items() if p not in held}

    merged = pagemerge.merge_trees(repo, without(base), without(ours), without(theirs), remote)
    files, conflicts = dict(merged.files), dict(merged.conflicts)
    for proj in sorted(projects):
        _recompile(repo, proj, (base, ours, theirs), held, files, conflicts, remote)
    return rp.MergeResult(files, conflicts)


def _sources(repo: Repo, files: Files, project: str) -> tuple[list[tp.Session], list[tp.Note]]:
    """The merged tree's shared sessions and notes of ``project`` (what a compile reads:
    :func:`wiki_memory.core.topics.compile_project`)."""
    prefix = f"projects/{project}/"
    folder = folder_of(project) + "/"
    sessions: list[tp.Session] = []
    notes: list[tp.Note] = []
    for path, entry in files.items():
        rel = path.decode("utf-8", "surrogateescape")
        if not rel.startswith(prefix) or rel.startswith(folder) or not rel.endswith(".md"):
            continue
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        raw = _blob(repo, entry)
        if raw is None or page_owner(rel, raw) is not None:
            continue
        s = tp.read_session(rel, raw)
        if s is not None:
            sessions.append(s)
        elif (n := tp.read_note(rel, raw)) is not None:
            notes.append(n)
    return sessions, notes


def _head(data: bytes | None) -> bytes | None:
    """A compiled topic page's part above the marker (None for no page)."""
    if data is None:
        return None
    pos = 0 if data.startswith(_MARK) else data.find(b"\n" + _MARK) + 1
    return data[:pos]


def _recompile(
    repo: Repo,
    project: str,
    sides: tuple[Files, Files, Files],
    held: set[bytes],
    files: Files,
    conflicts: dict[str, str],
    remote: str,
) -> None:
    """Write ``project``'s topic pages into ``files``: the held ones with merged heads,
    new ones for topics the merged sessions now show, the compiled part from
    the merged tree; a held topic no longer seen goes when its head is the compiler's,
    else says it links nothing (:data:`wiki_memory.core.topics.GONE`)."""
    sessions, notes = _sources(repo, files, project)
    pages = tp.compiled_pages(sessions, notes, folder_of(project))
    base, ours, theirs = sides
    mine = {p for p in held if _project(p) == project}
    for path in sorted(mine | {rel.encode() for rel in pages}):
        rel = path.decode("utf-8", "surrogateescape")
        if path not in mine and path in files:
            continue  # a page of that name a person took over (no marker): theirs
        b, o, t = (_head(_blob(repo, side.get(path))) for side in (base, ours, theirs))
        head: bytes | None
        if o is None and t is None:
            head = pages[rel][0].encode() if rel in pages else None
        elif o is None or t is None:
            head = o if t is None else t
        else:
            head = pagemerge.merge_page(b, o, t)
            if head is None:  # both people changed the same lines: the usual copy
                head = o
                _copy(repo, path, theirs[path], files, conflicts, remote)
        if head is None:
            continue
        if rel in pages:
            compiled = pages[rel][1]
        elif _untouched(head):
            continue  # the compiler's own page of a topic no longer seen: gone
        else:
            compiled = GONE
        data = head + (tp.MARKER + "\n\n" + compiled).encode()
        blob = Blob.from_string(data)
        repo.object_store.add_object(blob)
        files[path] = (_MODE, ObjectID(blob.id))


def _untouched(head: bytes) -> bool:
    """True when ``head`` is what the compiler writes above the marker for its page."""
    from wiki_memory.wiki.page import parse_page

    md = parse_page(head + _MARK, "topic.md").metadata
    if not isinstance(md, dict):
        return False
    t = tp.Topic(str(md.get("title") or ""), str(md.get("topic") or ""))
    return head.decode("utf-8", "surrogateescape") == tp.head_for(t)


def _copy(
    repo: Repo,
    path: bytes,
    entry: tuple[int, ObjectID],
    files: Files,
    conflicts: dict[str, str],
    remote: str,
) -> None:
    """The remote's whole page as a marked conflict copy beside ``path`` (its people's
    part overlapped this side's)."""
    data = _blob(repo, entry)
    copy = rp.conflict_name(path, remote, entry[1])
    if data is not None:
        try:
            data = mark_bytes(data, path.decode("utf-8", "surrogateescape"), remote)
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            entry = (entry[0], ObjectID(blob.id))
        except FrontmatterError:
            pass
    files[copy] = entry
    conflicts[path.decode("utf-8", "surrogateescape")] = copy.decode("utf-8", "surrogateescape")
