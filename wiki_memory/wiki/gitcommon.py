"""What every part of the wiki's git layer shares (docs/git.md): its errors
(:class:`GitError`, :class:`GitBusy`), the records it answers with (:class:`CommitInfo`,
:class:`BlameLine`), commit identities (:func:`author_email_for`,
:func:`author_identity`) and the checks of repo-relative paths and commit messages.

Imports no dulwich and nothing of the package but :mod:`wiki_memory.errors`; the store
itself is :class:`wiki_memory.wiki.git.GitStore`, which re-exports these names.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from wiki_memory.errors import Unavailable

DEFAULT_BRANCH = "main"
DEFAULT_EMAIL_DOMAIN = "wiki-memory.local"
SYSTEM_AUTHOR = ("wiki-memory", "wiki-memory@" + DEFAULT_EMAIL_DOMAIN)


class GitError(Exception):
    """A git operation failed for a reason the caller cannot retry away."""


class GitBusy(GitError, Unavailable):
    """503 ``busy``: another git program holds the repository; try again later.

    ``retry_after_seconds`` (int, >= 1) is sent as the HTTP ``Retry-After`` header;
    ``reason`` says what is going on, in words safe to show a client (no file paths).
    """

    code = "busy"

    def __init__(
        self, retry_after_seconds: int, reason: str = "another git command is running"
    ) -> None:
        self.retry_after_seconds = max(1, int(retry_after_seconds))
        self.reason = reason
        Unavailable.__init__(
            self,
            f"the wiki's git repository is busy ({reason}); retry in {self.retry_after_seconds} s",
            headers={"Retry-After": str(self.retry_after_seconds)},
        )


@dataclass(frozen=True)
class CommitInfo:
    """One commit as the faces show it.

    ``time`` is the author time in UTC epoch seconds; ``paths`` are the repo-relative
    paths changed against the first parent (all paths for a root commit), sorted.
    """

    sha: str
    author_name: str
    author_email: str
    time: int
    message: str
    paths: list[str] = field(default_factory=list)
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlameLine:
    """One line of a file with the commit that last changed it (``time``: UTC epoch s)."""

    sha: str
    author_name: str
    author_email: str
    time: int
    line: str


# --------------------------------------------------------------------------- identity

_EMAIL_UNSAFE = re.compile(r"[\s<>@\"',;:\\()\[\]]+")
_NAME_CRUD = "".join(chr(c) for c in range(33)) + ".,:;<>\"\\'"


def author_email_for(
    user: str,
    *,
    emails: Mapping[str, str] | None = None,
    domain: str = DEFAULT_EMAIL_DOMAIN,
) -> str:
    """Return the commit e-mail for ``user``: ``emails[user]`` if configured, else
    ``<user>@<domain>`` (``alice@wiki-memory.local``).

    The local part is the NFC user name with spaces and characters that are not
    allowed unquoted in an address replaced by ``-``; an empty result becomes
    ``unknown``.
    """
    if emails and user in emails and emails[user].strip():
        return _clean_email(emails[user])
    local = _EMAIL_UNSAFE.sub("-", unicodedata.normalize("NFC", user)).strip("-.")
    return f"{local or 'unknown'}@{domain}"


def _clean_email(email: str) -> str:
    return re.sub(r"[\s<>\x00]+", "", unicodedata.normalize("NFC", email))


def author_identity(name: str, email: str) -> bytes:
    """Return ``b"Name <email>"`` as git writes it: NFC UTF-8, with ``<``, ``>``, newlines
    and NUL removed and git's "crud" stripped from the ends of the name. An empty name
    becomes the e-mail's local part."""
    clean_email = _clean_email(email)
    clean_name = re.sub(r"[<>\x00\r\n]+", "", unicodedata.normalize("NFC", name)).strip(_NAME_CRUD)
    if not clean_name:
        clean_name = clean_email.split("@", 1)[0] or "unknown"
    return f"{clean_name} <{clean_email}>".encode()


# --------------------------------------------------------------------------- paths


def validate_path(path: str) -> str:
    """Check a repo-relative POSIX path; return it unchanged. Raises ValueError."""
    if not isinstance(path, str) or not path:
        raise ValueError("empty path")
    if "\x00" in path or path.startswith("/") or "\\" in path:
        raise ValueError(f"not a repo-relative POSIX path: {path!r}")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(f"not a normalized repo-relative path: {path!r}")
        if part.lower() == ".git":
            raise ValueError(f"path inside .git: {path!r}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"path is not valid UTF-8: {path!r}") from None
    return path


_MESSAGE_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_message(message: str) -> str:
    """A commit message as git wants it: CRLF as LF, no other control character (a NUL
    would make the commit object unreadable to git), a final newline."""
    text = _MESSAGE_CONTROL.sub("", message.replace("\r\n", "\n"))
    return text if text.endswith("\n") else text + "\n"


def decode_path(path: bytes) -> str:
    """A path as git stores it (bytes) → str; bytes that are not UTF-8 survive as
    surrogates."""
    return path.decode("utf-8", "surrogateescape")


def tz_offset(when: float) -> int:
    """This machine's UTC offset (seconds) at UTC epoch ``when``, as commits record it."""
    return time.localtime(when).tm_gmtoff or 0
