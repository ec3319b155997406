"""Three-way merge of pages and trees, finer than whole files (docs/git.md, "Merging").

* :func:`merge_page`: a page's body merges line by line from the common ancestor with
  ``merge3`` (Breezy's three-way merge); where both sides only *inserted* lines at the same
  place (two appends), both insertions are kept, in a fixed order (the shorter one that
  the other starts with is dropped; otherwise sorted by bytes) so that every server
  merging the same two versions writes the same bytes. The frontmatter merges key by
  key: a key changed on one side takes that side; lists of plain values (``tags``,
  ``aliases``, ...) merge as sets (additions from both, removals from both); two
  different times (ISO dates, ``updated``) take the later. Only a true overlap (the same
  lines or the same key changed differently) is a conflict: None.
* :func:`merge_trees`: per file, what one side changed wins; the page merge for
  files both sides changed, renames followed (a page one side moved, with the
  same blob or the same frontmatter ``id``, while the other edited it, ends up once, at
  the new path, with the edit), and conflict copies marked in their frontmatter
  (``conflict_of``: the page's path, ``conflict_side``: the remote) with their own title.

Session timelines merge entry by entry (:mod:`wiki_memory.wiki.sessionmerge`): the
hub's entries keep their ``^tN``, this side's not pushed yet are numbered after the last
and the links to them follow (in the page, and in this side's other changed pages). A
session page that does not parse as one merges line by line, entries matched as lines.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from dulwich.objects import Blob, ObjectID
from dulwich.repo import Repo
from merge3 import Merge3

from wiki_memory.wiki import replicate as rp
from wiki_memory.wiki.copies import mark_bytes
from wiki_memory.wiki.frontmatter import FrontmatterError, set_keys
from wiki_memory.wiki.page import parse_metadata
from wiki_memory.wiki.replicate import Files
from wiki_memory.wiki.sessionmerge import merge_session
from wiki_memory.wiki.sessionparts import session_of_part

__all__ = ["merge_page", "merge_trees"]

_TEXT = (b".md", b".markdown", b".txt")
_MISSING = object()


def _split(raw: bytes) -> tuple[bytes, bytes]:
    """(the frontmatter block with its fences, or b""; the body)."""
    if not raw.startswith((b"---\n", b"---\r\n")):
        return b"", raw
    lines = raw.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip(b"\r\n") in (b"---", b"..."):
            return b"".join(lines[: i + 1]), b"".join(lines[i + 1 :])
    return b"", raw


_BLOCK_ID = re.compile(rb"^\^t(\d+)\s*$")


def _ids(lines: list[bytes]) -> list[int]:
    return [int(m.group(1)) for m in (_BLOCK_ID.match(x) for x in lines) if m]


def _renumber(mine: list[bytes], last: int, moved: dict[int, int]) -> list[bytes]:
    """``mine``'s timeline entries numbered after ``last`` (``moved``: old -> new, filled
    in), their links within the block following."""
    for n in _ids(mine):
        if n not in moved:
            last += 1
            moved[n] = last
    out = []
    for line in mine:
        m = _BLOCK_ID.match(line)
        if m:
            line = b"^t%d" % moved[int(m.group(1))] + line[m.end(1) :]
        else:
            line = _LINK_ID.sub(
                lambda x: x.group(1) + b"%d" % moved.get(int(x.group(2)), int(x.group(2))), line
            )
        out.append(line)
    return out


_LINK_ID = re.compile(rb"(#\^t)(\d+)")


def _merge_lines(
    base: bytes, ours: bytes, theirs: bytes, moved: dict[int, int] | None = None
) -> bytes | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    b, o, t = (x.splitlines(keepends=True) for x in (base, ours, theirs))
    # a last line without a newline would glue to what the other side appended
    for lines in (b, o, t):
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
    out: list[bytes] = []
    for region in Merge3(b, o, t).merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out.extend(b[region[1] : region[2]])
        elif kind in ("same", "a"):
            out.extend(o[region[1] : region[2]])
        elif kind == "b":
            out.extend(t[region[1] : region[2]])
        else:
            zb1, zb2, za1, za2, zt1, zt2 = (int(x) for x in region[1:7])
            if zb1 != zb2:
                return None  # the same lines changed differently: a true overlap
            mine, other = o[za1:za2], t[zt1:zt2]
            if moved is not None and _ids(mine) and _ids(other):
                # one session's new entries on both sides: the hub's keep their numbers,
                # this side's (not pushed yet) are numbered after the last
                last = max(_ids(b) + _ids(t) + [0])
                out.extend(other + _renumber(mine, max(last, *moved.values(), 0), moved))
            elif mine[: len(other)] == other:
                out.extend(mine)
            elif other[: len(mine)] == mine:
                out.extend(other)
            else:
                first, second = sorted([mine, other], key=lambda x: b"".join(x))
                out.extend(first + second)
    return b"".join(out)


def _when(v: Any) -> datetime | None:
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=None)
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day)
    if isinstance(v, str) and len(v) >= 10 and v[4:5] == "-" and v[7:8] == "-":
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _plain_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v)


def _merge_value(b: Any, o: Any, t: Any) -> Any:
    """The merged value of one key (``_MISSING``: absent); raises ValueError on a true
    overlap."""
    if o == t or t == b:
        return o
    if o == b:
        return t
    lists = [x for x in (b, o, t) if x is not _MISSING]
    if all(_plain_list(x) for x in lists):
        base = b if b is not _MISSING else []
        mine = o if o is not _MISSING else []
        other = t if t is not _MISSING else []
        gone = [x for x in base if x not in mine or x not in other]
        out = [x for x in mine if x not in gone]
        out += [x for x in other if x not in out and x not in gone]
        return out
    wo, wt = _when(o), _when(t)
    if wo is not None and wt is not None:
        try:
            return o if wo >= wt else t
        except TypeError:  # naive against aware
            return o if str(o) >= str(t) else t
    raise ValueError("both sides changed this key differently")


def _merge_frontmatter(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    mb, mo, mt = (parse_metadata(x + b"\n") if x else {} for x in (base, ours, theirs))
    if (ours and not mo) or (theirs and not mt):
        return None  # a block nobody can read key by key
    updates: dict[str, Any] = {}
    remove: list[str] = []
    for key in list(mo) + [k for k in mt if k not in mo]:
        try:
            v = _merge_value(mb.get(key, _MISSING), mo.get(key, _MISSING), mt.get(key, _MISSING))
        except ValueError:
            return None
        if v is _MISSING:
            if key in mo:
                remove.append(key)
        elif key not in mo or mo[key] != v:
            updates[key] = v
    try:
        return set_keys(ours, updates, remove=remove) if ours else set_keys(b"", updates)
    except FrontmatterError:
        return None


def merge_page(
    base: bytes | None,
    ours: bytes,
    theirs: bytes,
    moved: dict[int, int] | None = None,
    stem: bytes = b"",
    floor: int = 0,
    *,
    entries_only: bool = False,
) -> bytes | None:
    """The three-way merge of a page's versions (see the module); None on a true overlap
    or when a version is not UTF-8 text. ``moved`` (a session page named ``stem``,
    ``theirs`` the hub's): timeline entries merge entry by entry
    (:func:`wiki_memory.wiki.sessionmerge.merge_session`), this side's not pushed yet
    renumbered after the last (and after ``floor``, the session's highest number over
    all its parts), old -> new filled into ``moved``; ``entries_only``: None where the
    entry-by-entry merge does not apply, instead of a line merge."""
    if ours == theirs:
        return ours
    if moved is not None:
        merged = merge_session(
            base,
            ours,
            theirs,
            moved,
            stem=stem,
            split=_split,
            merge_front=_merge_frontmatter,
            merge_lines=_merge_lines,
            floor=floor,
        )
        if merged is not None or entries_only:
            return merged
        moved.clear()
    try:
        for x in (base or b"", ours, theirs):
            x.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fo, bo = _split(ours)
    ft, bt = _split(theirs)
    if base is None:
        # added on both sides: what both start with is their common ancestor
        lo, lt = bo.splitlines(keepends=True), bt.splitlines(keepends=True)
        n = 0
        while n < min(len(lo), len(lt)) and lo[n] == lt[n]:
            n += 1
        fb, bb = b"", b"".join(lo[:n])
    else:
        fb, bb = _split(base)
    fm = _merge_frontmatter(fb, fo, ft)
    body = _merge_lines(bb, bo, bt, moved)
    if fm is None or body is None:
        return None
    return fm + body


# --------------------------------------------------------------------------- trees


def _data(repo: Repo, sha: ObjectID) -> bytes | None:
    try:
        obj = repo[sha]
    except KeyError:
        return None
    return bytes(obj.data) if isinstance(obj, Blob) else None


def _store(repo: Repo, data: bytes) -> ObjectID:
    blob = Blob.from_string(data)
    repo.object_store.add_object(blob)
    return ObjectID(blob.id)


def _page_id(repo: Repo, sha: ObjectID) -> str | None:
    data = _data(repo, sha)
    if data is None or not data.startswith(b"---"):
        return None
    pid = parse_metadata(data).get("id")
    return None if pid is None else str(pid)


def _renames(repo: Repo, base: Files, side: Files) -> dict[bytes, bytes]:
    """Old path -> new path for the files ``side`` moved since ``base``: a path gone from
    ``side`` whose blob, or page id, appears at exactly one path new in ``side``."""
    gone = [p for p in base if p not in side]
    new = [p for p in side if p not in base]
    if not gone or not new:
        return {}
    by_blob: dict[ObjectID, list[bytes]] = {}
    for p in new:
        by_blob.setdefault(side[p][1], []).append(p)
    by_id: dict[str, list[bytes]] = {}
    for p in new:
        if p.lower().endswith(b".md"):
            pid = _page_id(repo, side[p][1])
            if pid:
                by_id.setdefault(pid, []).append(p)
    out: dict[bytes, bytes] = {}
    for p in gone:
        hits = by_blob.get(base[p][1], [])
        if len(hits) != 1 and p.lower().endswith(b".md"):
            pid = _page_id(repo, base[p][1])
            hits = by_id.get(pid, []) if pid else []
        if len(hits) == 1 and hits[0] not in out.values():
            out[p] = hits[0]
    return out


def _follow(repo: Repo, base: Files, moved: Files, other: Files) -> tuple[Files, Files]:
    """Base and ``other`` with every rename ``moved`` made applied where ``other`` kept
    the old path and has nothing at the new one (its edit goes with the page)."""
    base, other = dict(base), dict(other)
    for old, new in _renames(repo, base, moved).items():
        if old in other and new not in other and new not in base:
            other[new] = other.pop(old)
            base[new] = base.pop(old)
    return base, other


def merge_trees(repo: Repo, base: Files, ours: Files, theirs: Files, remote: str) -> rp.MergeResult:
    """Three-way merge of flat trees (see the module): renames followed, pages both sides
    changed merged by :func:`merge_page`, a true overlap kept as a marked conflict copy."""
    base1, theirs = _follow(repo, base, ours, theirs)
    base2, ours = _follow(repo, base1, theirs, ours)
    base = base2
    out: Files = {}
    conflicts: dict[str, str] = {}
    renumbered: dict[bytes, dict[int, int]] = {}  # session page stem -> old -> new
    tops: dict[str, int] = {}  # session page path -> highest entry number of the session
    for path in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(path), ours.get(path), theirs.get(path)
        if o == t or t == b:
            pick = o
        elif o == b:
            pick = t
        elif o is None:
            pick = t  # deleted here, changed there: the change is kept
        elif t is None:
            pick = o
        else:
            pick = o
            merged = None
            if path.lower().endswith(_TEXT) and o[0] == t[0]:
                mine, other = _data(repo, o[1]), _data(repo, t[1])
                old = _data(repo, b[1]) if b is not None else None
                if mine is not None and other is not None:
                    moved: dict[int, int] | None = {} if b"/sessions/" in path else None
                    family = session_of_part(path.decode("utf-8", "surrogateescape"))[0]
                    if moved is not None and family not in tops:
                        kept = {p: e for p, e in ours.items() if base.get(p) == theirs.get(p)}
                        tops[family] = _session_top(repo, family, (base, theirs, kept))
                    stem = path.rsplit(b"/", 1)[-1][:-3]
                    floor = tops.get(family, 0)
                    merged = merge_page(old, mine, other, moved, stem, floor)
                    if moved:
                        renumbered[stem] = moved
                        tops[family] = max(floor, *moved.values())
            if merged is not None:
                pick = (o[0], _store(repo, merged))
            else:
                copy = rp.conflict_name(path, remote, t[1])
                out[copy] = _marked(repo, t, path, remote)
                conflicts[path.decode("utf-8", "surrogateescape")] = copy.decode(
                    "utf-8", "surrogateescape"
                )
        if pick is not None:
            out[path] = pick
    if renumbered:
        _follow_links(repo, out, base, ours, renumbered)
    return rp.MergeResult(out, conflicts)


_ENTRY_ID = re.compile(rb"^\^t(\d+)r?[ \t]*\r?$", re.M)


def _session_top(repo: Repo, family: str, trees: tuple[Files, ...]) -> int:
    """The highest entry number (``^tN``) on any version in ``trees`` of the session page
    ``family`` or its parts (0: none): a long session's pages share one numbering, so an
    entry a merge numbers anew goes after this one. ``trees``: the ancestor's, the hub's,
    and this side's pages the hub left as they were (kept with their numbers)."""
    top = 0
    for files in trees:
        for p, (_, sha) in files.items():
            rel = p.decode("utf-8", "surrogateescape")
            if not rel.endswith(".md") or session_of_part(rel)[0] != family:
                continue
            data = _data(repo, sha) or b""
            top = max([top, *(int(m) for m in _ENTRY_ID.findall(data))])
    return top


def _follow_links(
    repo: Repo, out: Files, base: Files, ours: Files, renumbered: dict[bytes, dict[int, int]]
) -> None:
    """Links this side changed (``[[<session>#^tN]]`` in its pages changed since
    ``base``) follow the entries the merge renumbered."""
    for stem, moved in renumbered.items():
        link = re.compile(rb"(\[\[(?:[^\]|#\n]*/)?" + re.escape(stem) + rb"(?:\.md)?#\^t)(\d+)")

        def follow(m: re.Match[bytes], moved: dict[int, int] = moved) -> bytes:
            n = int(m.group(2))
            return m.group(1) + b"%d" % moved.get(n, n)

        for path, entry in list(out.items()):
            own = path.rsplit(b"/", 1)[-1][:-3] == stem  # renumbered within the merge
            if own or not path.lower().endswith(b".md") or ours.get(path) == base.get(path):
                continue
            data = _data(repo, entry[1])
            if data is None or stem not in data:
                continue
            new = link.sub(follow, data)
            if new != data:
                out[path] = (entry[0], _store(repo, new))


def _marked(
    repo: Repo, entry: tuple[int, ObjectID], path: bytes, remote: str
) -> tuple[int, ObjectID]:
    """The conflict copy's entry: a page gets ``conflict_of``, ``conflict_side`` and its
    own title in its frontmatter (:func:`wiki_memory.wiki.copies.mark_bytes`); any other
    file is copied as it is."""
    data = _data(repo, entry[1])
    if data is None or not path.lower().endswith(b".md"):
        return entry
    try:
        marked = mark_bytes(data, path.decode("utf-8", "surrogateescape"), remote)
    except FrontmatterError:
        return entry
    return (entry[0], _store(repo, marked))
