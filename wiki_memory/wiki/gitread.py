"""Reading the wiki's git history: :class:`GitHistory`, the read side of
:class:`wiki_memory.wiki.git.GitStore` (HEAD and its branch, the log, one commit, a
file at a commit or as of a time, diffs, blame, changed paths, the working tree's
status).

Every read takes the store's read lock and goes through its own repository handle
(``_reader``), never the writer's, so reads run beside a commit. Paths are repo-relative
POSIX strings, times UTC epoch seconds; an unknown rev raises KeyError (docs/git.md).
"""

from __future__ import annotations

import io
import stat
import threading

from dulwich.diff_tree import tree_changes
from dulwich.errors import NotTreeError
from dulwich.objects import Blob, Commit, ObjectID, SubmoduleEncountered
from dulwich.objectspec import parse_commit
from dulwich.patch import write_object_diff
from dulwich.refs import HEADREF
from dulwich.repo import Repo

from wiki_memory.wiki.gitcommon import BlameLine, CommitInfo, decode_path, validate_path
from wiki_memory.wiki.oddnames import git_name, unescaped
from wiki_memory.wiki.paths import name_key, odd_name

#: how many case-only renames :meth:`GitHistory.page_log` follows back
MAX_CASE_RENAMES = 16


class GitHistory:
    """The read operations of a :class:`~wiki_memory.wiki.git.GitStore` (which opens
    ``_reader``, a repository handle of its own, and ``_read_lock``)."""

    _reader: Repo
    _read_lock: threading.RLock

    # ------------------------------------------------------------------ reading

    def head(self) -> str | None:
        """The commit sha HEAD resolves to, or None before the first commit."""
        with self._read_lock:
            sha = self._reader.refs.follow(HEADREF)[1]
            return sha.decode("ascii") if sha else None

    def branch(self) -> str | None:
        """The branch HEAD points to (``main``), or None when HEAD is detached."""
        with self._read_lock:
            names = self._reader.refs.follow(HEADREF)[0]
            last = names[-1] if names else b"HEAD"
            return (
                decode_path(last[len(b"refs/heads/") :])
                if last.startswith(b"refs/heads/")
                else None
            )

    def log(self, path: str | None = None, limit: int = 50) -> list[CommitInfo]:
        """The newest ``limit`` commits reachable from HEAD, newest first; with ``path``
        (a file or folder), only commits that changed it."""
        with self._read_lock:
            head = self._reader.refs.follow(HEADREF)[1]
            if head is None or limit <= 0:
                return []
            walk_paths = [validate_path(path).encode()] if path else None
            walker = self._reader.get_walker(include=[head], paths=walk_paths, max_entries=limit)
            return [self._info(entry.commit) for entry in walker]

    def page_log(self, path: str, limit: int = 50) -> list[tuple[str, CommitInfo]]:
        """The newest ``limit`` commits reachable from HEAD that changed the page at
        ``path``, newest first, each with the page's path in that commit: a commit that
        added ``path`` while removing the one path its first parent had that differs from
        it only in case or Unicode form (a case-only rename, ``Notes.md`` → ``notes.md``)
        is followed to the older spelling (at most :data:`MAX_CASE_RENAMES` times). Raises
        ValueError for a path that is not a clean repo-relative path."""
        rel = validate_path(path)
        out: list[tuple[str, CommitInfo]] = []
        with self._read_lock:
            start = self._reader.refs.follow(HEADREF)[1]
            renames = 0
            while start is not None and len(out) < limit:
                top = self._reader[start]
                assert isinstance(top, Commit)
                bpath = self._tree_name(top.tree, rel)
                walker = self._reader.get_walker(
                    include=[start], paths=[bpath], max_entries=limit - len(out)
                )
                start = None
                for entry in walker:
                    c = entry.commit
                    info = self._info(c)
                    out.append((rel, info))
                    if renames >= MAX_CASE_RENAMES or not c.parents:
                        continue
                    old = self._case_twin(c, info, rel, bpath)
                    if old is not None:
                        rel, start, renames = old, c.parents[0], renames + 1
                        break
        return out

    def _case_twin(self, c: Commit, info: CommitInfo, rel: str, bpath: bytes) -> str | None:
        """The older spelling when ``c`` renamed it to ``rel`` by case only: ``rel`` is
        new in ``c``, and exactly one path ``c`` removed equals it after folding case and
        Unicode form. None otherwise."""
        key = name_key(rel)
        twins = [p for p in info.paths if p != rel and not odd_name(p) and name_key(p) == key]
        if not twins:
            return None
        parent = self._reader[c.parents[0]]
        assert isinstance(parent, Commit)
        if self._entry_at(parent.tree, bpath) is not None:
            return None
        gone = [
            p
            for p in twins
            if self._entry_at(c.tree, p.encode()) is None
            and self._entry_at(parent.tree, p.encode()) is not None
        ]
        return gone[0] if len(gone) == 1 else None

    def commit_info(self, rev: str = "HEAD") -> CommitInfo:
        """The :class:`CommitInfo` of one commit. Raises KeyError for an unknown rev."""
        with self._read_lock:
            return self._info(self._commit_of(rev))

    def read_at(self, path: str, rev: str = "HEAD") -> bytes | None:
        """The bytes of ``path`` in commit ``rev`` (sha, short sha, branch, ``HEAD``), or
        None when the path does not exist there (or is a folder). Raises KeyError for
        an unknown rev."""
        with self._read_lock:
            c = self._commit_of(rev)
            return self._blob_at(c.tree, validate_path(path).encode())

    def read_as_of(self, path: str, when_epoch: float) -> bytes | None:
        """The bytes of ``path`` as committed at UTC epoch ``when_epoch``: its content in
        the newest commit on HEAD's history whose commit time is <= ``when_epoch``.
        None when there was no such commit or the path did not exist then. Cost grows
        with the number of commits made after ``when_epoch``."""
        with self._read_lock:
            head = self._reader.refs.follow(HEADREF)[1]
            if head is None:
                return None
            bpath = validate_path(path).encode()
            for entry in self._reader.get_walker(include=[head]):
                if entry.commit.commit_time <= when_epoch:
                    return self._blob_at(entry.commit.tree, bpath)
            return None

    def diff(self, path: str, rev: str = "HEAD") -> str:
        """Unified diff (git format, ``a/`` and ``b/`` prefixes) of ``path`` between the
        first parent of ``rev`` and ``rev``; "" when ``rev`` did not change it. Paths are
        shown as plain Unicode, never quoted or escaped; content is decoded as UTF-8
        (undecodable bytes become U+FFFD). Raises KeyError for an unknown rev."""
        with self._read_lock:
            c = self._commit_of(rev)
            bpath = validate_path(path).encode()
            new = self._entry_at(c.tree, bpath)
            old = None
            if c.parents:
                parent = self._reader[c.parents[0]]
                assert isinstance(parent, Commit)
                old = self._entry_at(parent.tree, bpath)
            if old == new:
                return ""
            buf = io.BytesIO()
            write_object_diff(
                buf,
                self._reader.object_store,
                (bpath if old else None, old[0] if old else None, old[1] if old else None),
                (bpath if new else None, new[0] if new else None, new[1] if new else None),
            )
            return buf.getvalue().decode("utf-8", "replace")

    def blame(self, path: str, rev: str = "HEAD") -> list[BlameLine]:
        """Each line of ``path`` at ``rev`` with the commit that last changed it (renames
        followed). Empty when the path does not exist at ``rev``."""
        from dulwich.annotate import annotate_lines

        with self._read_lock:
            c = self._commit_of(rev)
            bpath = validate_path(path).encode()
            if self._entry_at(c.tree, bpath) is None:
                return []
            out = []
            for (commit, _entry), line in annotate_lines(self._reader.object_store, c.id, bpath):
                name, email = split_ident(commit.author)
                out.append(
                    BlameLine(
                        sha=commit.id.decode("ascii"),
                        author_name=name,
                        author_email=email,
                        time=commit.author_time,
                        line=line.decode("utf-8", "replace").rstrip("\r\n"),
                    )
                )
            return out

    def changed_paths(self, old_sha: str | None, new_sha: str | None) -> list[str]:
        """Sorted repo-relative paths that differ between two commits (None = empty
        tree), e.g. after HEAD moved under the server (``git pull``/``checkout``)."""
        with self._read_lock:
            old_tree = self._commit_of(old_sha).tree if old_sha else None
            new_tree = self._commit_of(new_sha).tree if new_sha else None
            return self._tree_diff_paths(old_tree, new_tree)

    def is_clean(self, include_untracked: bool = False) -> bool:
        """True when the index and the working tree match HEAD. Untracked files count
        only with ``include_untracked`` (files matched by .gitignore never count). Uses
        dulwich's status (it walks the whole tree: not for the hot path) without taking
        any lock."""
        from dulwich import porcelain

        with self._read_lock:
            st = porcelain.status(
                self._reader,
                untracked_files="all" if include_untracked else "no",
                optional_locks=False,
            )
        if any(st.staged.values()) or st.unstaged:
            return False
        return not (include_untracked and st.untracked)

    def dirty_paths(self) -> list[str]:
        """Sorted repo-relative paths whose working-tree state differs from HEAD: modified,
        deleted, staged, and untracked files not matched by ``.gitignore``. Walks the whole
        tree (dulwich status): for start-up recovery, not the hot path."""
        from dulwich import porcelain

        with self._read_lock:
            st = porcelain.status(self._reader, untracked_files="all", optional_locks=False)
        out: set[str] = set()
        for group in st.staged.values():
            out.update(decode_path(p) if isinstance(p, bytes) else str(p) for p in group)
        out.update(decode_path(p) if isinstance(p, bytes) else str(p) for p in st.unstaged)
        out.update(decode_path(p) if isinstance(p, bytes) else str(p) for p in st.untracked)
        return sorted(p.rstrip("/") for p in out)

    # ------------------------------------------------------------------ internals

    def _commit_of(self, rev: str | bytes) -> Commit:
        if isinstance(rev, str):
            rev = rev.encode("utf-8")
        try:
            c = parse_commit(self._reader, rev)
        except (KeyError, ValueError) as exc:
            raise KeyError(f"unknown revision: {rev.decode('utf-8', 'replace')}") from exc
        return c

    def _entry_at(self, tree_id: ObjectID, path: bytes) -> tuple[int, ObjectID] | None:
        """The file ``path`` names in the tree (an escaped name, when no file has it,
        reaches the file of its exact bytes: :mod:`wiki_memory.wiki.oddnames`)."""
        found = self._exact_entry(tree_id, path)
        if found is None and b"%" in path:
            odd = unescaped(path.decode("utf-8", "surrogateescape"))
            if odd is not None:
                found = self._exact_entry(tree_id, git_name(odd))
        return found

    def _tree_name(self, tree_id: ObjectID | None, rel: str) -> bytes:
        """The bytes the page name ``rel`` has in the tree: its own, or, for an escaped
        name only its file's exact bytes are found under, those."""
        odd = unescaped(rel)
        if tree_id is None or odd is None or self._exact_entry(tree_id, rel.encode()):
            return rel.encode()
        raw = git_name(odd)
        return raw if self._exact_entry(tree_id, raw) is not None else rel.encode()

    def _exact_entry(self, tree_id: ObjectID, path: bytes) -> tuple[int, ObjectID] | None:
        try:
            mode, sha = self._reader.object_store[tree_id].lookup_path(  # type: ignore[attr-defined]
                self._reader.object_store.__getitem__, path
            )
        except (KeyError, NotTreeError, SubmoduleEncountered):
            return None
        if stat.S_ISDIR(mode):
            return None
        return mode, sha

    def _blob_at(self, tree_id: ObjectID, path: bytes) -> bytes | None:
        found = self._entry_at(tree_id, path)
        if found is None:
            return None
        blob = self._reader.object_store[found[1]]
        return blob.as_raw_string() if isinstance(blob, Blob) else None

    def _tree_diff_paths(self, old_tree: ObjectID | None, new_tree: ObjectID | None) -> list[str]:
        out: set[bytes] = set()
        for ch in tree_changes(self._reader.object_store, old_tree, new_tree):
            if ch.old is not None and ch.old.path is not None:
                out.add(ch.old.path)
            if ch.new is not None and ch.new.path is not None:
                out.add(ch.new.path)
        return sorted(decode_path(p) for p in out)

    def _info(self, c: Commit) -> CommitInfo:
        parent_tree = None
        if c.parents:
            parent = self._reader[c.parents[0]]
            assert isinstance(parent, Commit)
            parent_tree = parent.tree
        name, email = split_ident(c.author)
        return CommitInfo(
            sha=c.id.decode("ascii"),
            author_name=name,
            author_email=email,
            time=int(c.author_time),
            message=c.message.decode(commit_encoding(c), "replace").rstrip("\n"),
            paths=self._tree_diff_paths(parent_tree, c.tree),
            parents=tuple(p.decode("ascii") for p in c.parents),
        )

    # -- building a commit


def split_ident(ident: bytes) -> tuple[str, str]:
    """``b"Name <email>"`` → ``("Name", "email")``."""
    text = ident.decode("utf-8", "replace")
    if "<" in text and text.endswith(">"):
        name, email = text[:-1].rsplit("<", 1)
        return name.strip(), email.strip()
    return text.strip(), ""


def commit_encoding(c: Commit) -> str:
    """The encoding a commit's message is in (its ``encoding`` header, else UTF-8)."""
    enc = c.encoding.decode("ascii", "replace") if c.encoding else "utf-8"
    try:
        "".encode(enc)
    except LookupError:
        return "utf-8"
    return enc
