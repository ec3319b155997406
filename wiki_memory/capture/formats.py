"""Our own rules for secrets gitleaks has no rule for, or ties to a file path or a nearby
keyword that captured text lacks (standard library only; ``sanitize`` imports it on first
use, with the generated rules).

Each rule starts from a cue searched in the lowercased text and is a small parser where
a regex would be fragile:

- ``kubernetes-secret-yaml``: every value under ``data:`` / ``stringData:`` of a
  ``kind: Secret`` manifest (YAML, block or flow, and JSON);
- ``docker-config-auth``: the ``auth`` and ``identitytoken`` values of a Docker
  ``config.json`` (``"auths": {...}``);
- ``netrc-password``: ``password`` (and ``account``) tokens of ``.netrc`` lines
  (``machine HOST login USER password SECRET``);
- ``npmrc-auth``: ``_auth=`` and ``_authToken=`` lines of ``.npmrc``;
- ``cli-password``: ``openssl ... -pass/-passin/-passout pass:SECRET`` and a NuGet API key
  given as ``-k``/``--api-key``/``-ApiKey`` on a ``nuget`` command line;
- ``base64-credential``: a base64 value piped to, or fed as a here-string to, ``base64 -d``;
- ``mailgun-private-api-token``: Mailgun's ``key-`` + 32 hex digits, wherever it stands;
- ``discord-bot-token``: Discord bot tokens (base64 user id, timestamp, HMAC).

Every regex here is bounded (no unbounded repeat that can backtrack over a long run).
"""

from __future__ import annotations

import re
import sys

from wiki_memory.capture.keyscan import starts as _starts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


class _Lazy:
    """A regex compiled on its first use: the hook imports this module on its first
    redaction, and compiling all of them up front cost more than the rest of that call."""

    __slots__ = ("_args", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._rx: re.Pattern[str] | None = None

    def get(self) -> re.Pattern[str]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(*self._args)
        return rx

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.get().search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.get().match(text, pos)

    def finditer(
        self, text: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self.get().finditer(text, pos, endpos)


_B64 = r"[A-Za-z0-9+/]{4,4096}={0,2}"

# a manifest's data block: the line "data:" / "stringData:", then the lines indented deeper
_K8S_KIND_RE = _Lazy(r"""kind["']?[ \t]*:[ \t]*["']?Secret\b""")  # only: is there one
_K8S_BLOCK_RE = _Lazy(r"(?m)^(?P<ind>[ \t]{0,40})(?:string)?[Dd]ata[ \t]*:[ \t]*(?:#[^\n]*)?$")
_K8S_ENTRY_RE = _Lazy(
    r"(?m)^(?P<ind>[ \t]{1,80})[\"']?[\w.-]{1,253}[\"']?[ \t]*:[ \t]*"
    r"(?P<q>[\"']?)(?P<secret>[^\s\"'#][^\n\"']{0,8192}?)(?P=q)[ \t]*$"
)
_K8S_FLOW_RE = _Lazy(r"""["']?(?:string)?[Dd]ata["']?[ \t]*:[ \t]*\{(?P<body>[^{}]{0,65536})\}""")
_K8S_PAIR_RE = _Lazy(r"""["']?[\w.-]{1,253}["']?[ \t]*:[ \t]*["']?(?P<secret>[^\s"',}]{1,8192})""")

_DOCKER_AUTH_RE = _Lazy(
    r"""["'](?:auth|identitytoken|registrytoken)["'][ \t]*:[ \t]*["'](?P<secret>[^"'\s]{8,8192})["']"""
)
_NETRC_RE = _Lazy(
    r"(?:^|(?<=\s))(?:password|account)[ \t]+(?P<q>[\"']?)(?P<secret>[^\s\"'`{}<>$]{6,1024})(?P=q)"
    r"(?![^\s\"'])"
)
_NPMRC_RE = _Lazy(
    r"(?m)(?:^|[\s:])_(?:auth|authToken|password)[ \t]*=[ \t]*[\"']?(?P<secret>[^\s\"'$]{4,4096})"
)
_OPENSSL_RE = _Lazy(
    r"-pass(?:in|out|word)?[ \t]+[\"']?pass:(?P<secret>[^\s\"'`{}<>$]{4,1024})(?![^\s\"'])"
)
_NUGET_KEY_RE = _Lazy(
    r"(?i)(?:^|[ \t])(?:-k|--api-key|-apikey)[ \t]+[\"']?(?P<secret>(?!-)[^\s\"']{8,1024})"
)
_B64_PIPE_RE = _Lazy(
    r"(?:echo|printf)[ \t]+(?:-[neE]{1,2}[ \t]+)?(?:'%s'[ \t]+)?[\"']?(?P<secret>"
    + _B64
    + r")[\"']?"
    r"[ \t]*\|[ \t]*base64[ \t]+(?:-d|-D|--decode)\b"
)
_B64_HERE_RE = _Lazy(r"base64[ \t]+(?:-d|-D|--decode)[ \t]*<<<[ \t]*[\"']?(?P<secret>" + _B64 + ")")
_MAILGUN_RE = _Lazy(r"(?<![\w-])key-[0-9a-f]{32}(?![\w-])")
#: Discord's bot token (public for the sanitizer's compiled pass, ``rulescan``)
DISCORD_SOURCE = (
    r"(?<![\w.-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?![\w.-])"
)
_DISCORD_BOT_RE = _Lazy(DISCORD_SOURCE)


def _cued(rx: _Lazy, text: str, cues: tuple[str, ...], back: int) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)``, found faster: every match of ``rx`` starts at most ``back``
    characters before an occurrence of one of ``cues`` (case as written), so ``rx`` is
    tried only there, in ascending order, and after a match only from its end on, as
    ``finditer`` does. A regex that starts with a look-behind or an anchor has no literal
    prefix for ``re`` to skip to, and a scan of it costs ~30 times a ``str.find``."""
    starts = _starts(text, cues)
    match = rx.get().match
    nxt = 0  # the first position not tried yet (and not inside a match)
    for c in starts:
        for p in range(max(c - back, nxt), c + 1):
            m = match(text, p)
            if m is not None:
                yield m
                nxt = m.end()
                break
        else:
            nxt = max(nxt, c + 1)


def _kubernetes(text: str) -> Iterator[tuple[int, int]]:
    if _K8S_KIND_RE.search(text) is None:  # its literal "kind" first: re skips to it
        return
    for b in _K8S_BLOCK_RE.finditer(text):
        ind = len(b.group("ind"))
        pos = b.end() + 1
        while pos < len(text):
            m = _K8S_ENTRY_RE.match(text, pos)
            if m is None or len(m.group("ind")) <= ind:
                break
            yield m.span("secret")
            pos = m.end() + 1
    for f in _K8S_FLOW_RE.finditer(text):
        body_start = f.start("body")
        for m in _K8S_PAIR_RE.finditer(f.group("body")):
            s, e = m.span("secret")
            yield body_start + s, body_start + e


def _stand_in(v: str) -> bool:
    """A documentation stand-in (``SECRET``, ``PASSWORD``, ``P``): capitals only."""
    return v.isupper() and v.isalpha()


def _mixed_value(v: str) -> bool:
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


#: every word :func:`find` looks for in the lowercased text before it runs a rule
CUES: tuple[str, ...] = (
    "secret", "data", "kind", "auths", "identitytoken", "machine", "login", "password",
    "_auth", "_password", "pass:", "nuget", "base64", "key-",
)  # fmt: skip


def find(
    text: str,
    low: str,
    present: set[str] | None = None,
    raw: bytes | None = None,
    runs: list[tuple[int, int]] | None = None,
) -> list[tuple[int, int, str]]:
    """Every secret these rules find: ``(start, end, kind)``. ``present``: when the caller
    has already found which words occur in ``low`` (a set holding at least those of
    :data:`CUES` that occur), that set; else each cue is looked for in ``low``. ``raw``:
    ``text`` encoded to ASCII with ``?`` for other characters, when the caller has it.
    ``runs``: the text's maximal runs of ``leaks.RUN_CHARS`` at least 20 long
    (``(start, end)``, from ``leaks.find``), when the caller has them: a Discord token,
    made of fewer characters, lies inside one, so only the long ones are looked into."""
    has = low.__contains__ if present is None else present.__contains__
    out: list[tuple[int, int, str]] = []
    if has("secret") and has("data") and has("kind"):
        out.extend((s, e, "kubernetes-secret-yaml") for s, e in _kubernetes(text))
    if has("auths") or has("identitytoken"):
        for m in _DOCKER_AUTH_RE.finditer(text):
            out.append((*m.span("secret"), "docker-config-auth"))
    if has("machine") and (has("login") or has("password")):
        for m in _cued(_NETRC_RE, text, ("password", "account"), 0):
            ls = text.rfind("\n", 0, m.start()) + 1
            line_low = low[ls : m.start()]
            # a .netrc line (or a continuation of one): its machine, or its login, precede
            if _stand_in(m.group("secret")):
                continue
            if "machine" in line_low or "login" in line_low or "default" in line_low:
                out.append((*m.span("secret"), "netrc-password"))
    if has("_auth") or has("_password"):
        for m in _cued(_NPMRC_RE, text, ("_auth", "_password"), 1):
            out.append((*m.span("secret"), "npmrc-auth"))
    if has("pass:"):
        for m in _OPENSSL_RE.finditer(text):
            if not _stand_in(m.group("secret")):
                out.append((*m.span("secret"), "cli-password"))
    if has("nuget"):
        for m in _NUGET_KEY_RE.finditer(text):
            ls = text.rfind("\n", 0, m.start()) + 1
            if "nuget" in low[ls : m.start()]:
                out.append((*m.span("secret"), "cli-password"))
    if has("base64"):
        for m in _cued(_B64_PIPE_RE, text, ("echo", "printf"), 0):
            out.append((*m.span("secret"), "base64-credential"))
        for m in _cued(_B64_HERE_RE, text, ("base64",), 0):
            out.append((*m.span("secret"), "base64-credential"))
    if has("key-"):
        for m in _cued(_MAILGUN_RE, text, ("key-",), 0):
            if _mixed_value(m.group(0)[4:]):
                out.append((*m.span(), "mailgun-private-api-token"))
    if runs is not None:
        if raw is None:
            raw = text.encode("ascii", "replace")
        for s, e in runs:
            if e - s >= _DISCORD_MIN:
                out.extend(_discord(text, raw, s, e))
    elif len(text) >= _DISCORD_MIN and text.count(".") >= 2:
        out.extend(_discord(text, raw))
    return out


#: a Discord bot token is one run of at least 59 characters of ``[A-Za-z0-9_.-]``
_DISCORD_MIN = 59
_table = bytearray(b" " * 256)  # T for a character of a token's runs, space for others
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-":
    _table[_c] = 84
_DISCORD_TABLE = bytes(_table)
del _table, _c
_DISCORD_NEEDLE = b"T" * _DISCORD_MIN


def _discord(
    text: str, raw: bytes | None = None, lo: int = 0, hi: int = -1
) -> list[tuple[int, int, str]]:
    """Discord bot tokens, looked for only in runs long enough to hold one (a regex that
    starts at every M, N and O of the text costs more than the rest of this module);
    ``lo``, ``hi``: only in ``text[lo:hi]``, a stretch no such run crosses."""
    if raw is None:
        raw = text.encode("ascii", "replace")
    if hi < 0:
        hi = len(raw)
    cls = (
        raw[lo:hi].translate(_DISCORD_TABLE)
        if lo or hi < len(raw)
        else raw.translate(_DISCORD_TABLE)
    )
    out: list[tuple[int, int, str]] = []
    i = cls.find(_DISCORD_NEEDLE)
    while i >= 0:
        e = cls.find(b" ", i)
        if e < 0:
            e = len(cls)
        # positions in cls are lo less than in text
        for m in _DISCORD_BOT_RE.finditer(text, lo + i, min(len(text), lo + e + 1)):  # sees the end
            v = m.group(0)
            if _mixed_value(v) and any(c.isupper() for c in v[4:]) and any(c.islower() for c in v):
                out.append((*m.span(), "discord-bot-token"))
        i = cls.find(_DISCORD_NEEDLE, e)
    return out
