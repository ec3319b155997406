"""Which secret rules can match a text at all, decided in one compiled pass (Hyperscan).

The generated rules that need a run of 20 secret characters (``leaks``), the provider
tokens (``sanitize``) and Discord's bot tokens (``formats``) are each looked for, in pure
Python, one step per run of token characters: thousands of steps over ordinary text in
which none of them matches. Where the optional ``hyperscan`` package is importable (the
server's environment: a dependency in ``pyproject.toml``; the wheel bundles Intel's
Hyperscan library), every one of their regexes is compiled into one Hyperscan database,
in prefilter mode (a construct it lacks, such as a look-around, is widened, never
narrowed) and one scan of a text says which of them can match anywhere in it. A rule it
does not name cannot match there, so the sanitizer runs only the rules it names, with the
same regexes, windows, entropy, allowlists and keywords as without it: the findings are
the same (``tests/capture/test_rulescan.py``). In ordinary text it names none, and the
per-run Python steps are skipped.

The hook (``python -S``, standard library only) never uses it, nor does a process where
the import or the compile fails: :func:`build` returns ``None`` and every rule runs as
before. Compiling the database costs about a second; it is compiled once per machine
and pattern set and kept in the user's cache folder (``rulescan-<digest>.hsdb`` under
``platformdirs.user_cache_dir("wiki-memory")``, the digest over the library's version and
every pattern; the file holds the SHA-256 of the database it stores, so a damaged copy is
compiled again), which a later process loads in under a millisecond.
"""

from __future__ import annotations

import codecs
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: non-ASCII characters become this byte in the scanned copy (one byte per character, so
#: bounded repeats count as Python's ``re`` counts; no pattern names it, so it matches
#: exactly what any non-ASCII character matches under ``re.ASCII``: ``.``, ``\\W``, ``\\S``,
#: ``\\D`` and negated classes)
_HIGH = b"\x80"
_ERRORS = "wiki-memory-rulescan"


def _high(err: UnicodeError) -> tuple[bytes, int]:
    assert isinstance(err, UnicodeEncodeError)
    return _HIGH * (err.end - err.start), err.end


codecs.register_error(_ERRORS, _high)


class RuleScan:
    """A compiled set of labelled regexes: :meth:`labels` tells which of them can match
    somewhere in a text (a superset of those Python's ``re`` would find: prefilter mode)."""

    __slots__ = ("patterns", "_db", "_scratch", "_scan", "_on", "_busy")

    def __init__(self, hyperscan: Any, db: Any, patterns: Sequence[tuple[str, str]]) -> None:
        """``db``: a compiled block-mode database whose pattern ids index ``patterns``
        (``(label, re source)``, kept as :attr:`patterns`)."""
        self.patterns = tuple(patterns)
        labels = [label for label, _ in patterns]
        self._db = db
        self._scratch = hyperscan.Scratch(db)
        self._scan = db.scan
        self._on = lambda i, _s, _e, _f, found: found.add(labels[i])
        self._busy = hyperscan.ScratchInUseError

    def labels(self, text: str, raw: bytes | None = None) -> set[str]:
        """The labels of the patterns that can match somewhere in ``text``; empty when
        none can. ``raw``: ``text`` encoded to ASCII, when the caller has it (used only
        when ``text`` is ASCII; any other character is scanned as ``\\x80``)."""
        data = raw if raw is not None and text.isascii() else text.encode("ascii", _ERRORS)
        found: set[str] = set()
        try:
            self._scan(data, match_event_handler=self._on, context=found, scratch=self._scratch)
        except self._busy:  # another thread scans with it: this call takes a copy of its own
            found.clear()
            scratch = self._scratch.clone()
            self._scan(data, match_event_handler=self._on, context=found, scratch=scratch)
        return found


def _compile(hyperscan: Any, sources: list[str]) -> Any:
    flags = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH
    flags |= hyperscan.HS_FLAG_ALLOWEMPTY
    db = hyperscan.Database()
    db.compile(
        expressions=[source.encode("ascii") for source in sources],
        ids=list(range(len(sources))),
        elements=len(sources),
        flags=[flags] * len(sources),
    )
    return db


def cache_folder() -> str:
    """The folder the compiled databases are kept in: the user's cache folder for
    wiki-memory (``platformdirs.user_cache_dir``; ``~/.cache/wiki-memory`` on Linux)."""
    import platformdirs

    return str(platformdirs.user_cache_dir("wiki-memory", appauthor=False))


def kept_files() -> list[str]:
    """The compiled databases kept in :func:`cache_folder` (``rulescan-*.hsdb``), sorted;
    ``uninstall`` removes them, as it removes every other file wiki-memory wrote outside
    its data directory."""
    folder = cache_folder()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        os.path.join(folder, n) for n in names if n.startswith("rulescan-") and n.endswith(".hsdb")
    )


def _cache_file(hyperscan: Any, sources: list[str]) -> str:
    import hashlib  # here, not at the top: the hook imports this module and never builds

    digest = hashlib.sha256(f"prefilter\n{hyperscan.__version__}".encode())
    for source in sources:
        digest.update(b"\0" + source.encode("ascii"))
    return os.path.join(cache_folder(), f"rulescan-{digest.hexdigest()[:24]}.hsdb")


def _load(hyperscan: Any, path: str) -> Any:
    """The database kept at ``path``, or ``None`` (none, damaged, or another build's)."""
    import hashlib

    try:
        with open(path, "rb") as f:
            blob = f.read()
        body = blob[32:]
        if hashlib.sha256(body).digest() != blob[:32]:
            return None
        return hyperscan.loadb(body, hyperscan.HS_MODE_BLOCK)
    except Exception:  # absent, unreadable, or from another platform or version
        return None


def _keep(hyperscan: Any, path: str, db: Any) -> None:
    import hashlib

    body = hyperscan.dumpb(db)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compiled again next time
        try:
            os.unlink(tmp)
        except OSError:
            pass


def build(patterns: Sequence[tuple[str, str]], cache: bool = True) -> RuleScan | None:
    """The compiled pass over ``patterns`` (``(label, re source)``; several may share a
    label), or ``None``: under ``python -S`` (the hook), without the library, or when a
    pattern does not compile. ``cache``: load the database from, and keep it in, the
    user's cache folder (see the module's docstring); ``False`` always compiles."""
    if sys.flags.no_site:
        return None
    try:
        import hyperscan

        sources = [source for _, source in patterns]
        path = _cache_file(hyperscan, sources) if cache else ""
        db = _load(hyperscan, path) if cache else None
        if db is None:
            db = _compile(hyperscan, sources)
            if cache:
                _keep(hyperscan, path, db)
        return RuleScan(hyperscan, db, patterns)
    except Exception:  # not installed, or a pattern the library refuses
        return None
