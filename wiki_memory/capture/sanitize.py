"""Secret redaction: one table of detectors, standard library only.

(Over 600 lines on purpose: the hook imports this one file under ``python -S`` with
the standard library only, and every module more is start-up time it pays per event.)

The harness hook program (which must start in tens of milliseconds and may only
use the standard library) imports this module to redact a payload before it
sends it, and the server runs it again at its door before anything is written
anywhere (DESIGN.md, invariant 4). So this module imports nothing outside the
standard library and nothing heavy (no ``typing`` at run time).

Every secret found is replaced by a typed placeholder ``[REDACTED:<kind>]``,
e.g. ``[REDACTED:github-token]``. For secrets that sit in an assignment
(``DB_PASSWORD=...``), a header (``Authorization: Bearer ...``) or a URL
(``postgres://user:...@host``) only the value is replaced: the name, the
scheme, the user and the host stay readable.

Redaction is idempotent: running it over its own output changes nothing, because
no detector accepts a value that overlaps an existing placeholder.

See docs/sanitizer.md for every detector with an example shape and for the
look-alikes (git SHAs, UUIDs, ``max_tokens=512``, public keys, ...) that are kept.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from wiki_memory.capture.keyscan import starts as _starts

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~2.5 ms to import; the hook only needs it for mypy
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    SpanFinder = Callable[[str], Iterator[tuple[int, int]]]


__all__ = ["DETECTORS", "Detector", "Redaction", "redact_obj", "redact_text"]

PLACEHOLDER = "[REDACTED:{kind}]"


class _Lazy:
    """A regex compiled on first use, so that importing this module stays cheap.

    Compiling the ~150 regexes of this module costs tens of milliseconds, more than
    the rest of the import; a hook that sees no ``ghp_`` never compiles the GitHub
    pattern. ``rx`` is the compiled ``re.Pattern``; ``match``, ``search``,
    ``fullmatch``, ``finditer`` and ``findall`` are its own bound methods, put in
    place on first use (so a call costs no Python frame of ours).
    """

    __slots__ = ("source", "flags", "_rx", "match", "search", "fullmatch", "finditer", "findall")

    match: Callable[..., re.Match[str] | None]
    search: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]
    findall: Callable[..., list[Any]]

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._rx: re.Pattern[str] | None = None

    @property
    def rx(self) -> re.Pattern[str]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.source, self.flags)
            self.match = rx.match
            self.search = rx.search
            self.fullmatch = rx.fullmatch
            self.finditer = rx.finditer
            self.findall = rx.findall
        return rx

    def __getattr__(self, name: str) -> Any:
        """Only reached while a method's slot is still empty: compile, then answer."""
        if name in _LAZY_METHODS:
            return getattr(self.rx, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"_Lazy({self.source!r})"


_LAZY_METHODS = frozenset(("match", "search", "fullmatch", "finditer", "findall"))


# A placeholder already in the text (ours, maybe with the "#2" suffix that
# redact_obj adds to keep two redacted dict keys apart).
_PLACEHOLDER_RE = _Lazy(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\](?:#\d+)?")
_KIND_RE = _Lazy(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class Redaction:
    """One replaced secret.

    ``kind`` is the detector kind shown in the placeholder (``"github-token"``);
    ``start`` and ``end`` are character offsets (Python ``str`` indices, end
    exclusive) of the replaced text in the ORIGINAL input, so
    ``text[start:end]`` is the secret that was removed. Compared by value.
    (A plain class: ``dataclasses`` costs the hook ~8 ms of imports.)
    """

    __slots__ = ("kind", "start", "end")

    def __init__(self, kind: str, start: int, end: int) -> None:
        self.kind = kind
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Redaction):
            return NotImplemented
        return (self.kind, self.start, self.end) == (other.kind, other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.kind, self.start, self.end))

    def __repr__(self) -> str:
        return f"Redaction(kind={self.kind!r}, start={self.start}, end={self.end})"


class Detector:
    """One row of the detector table.

    ``kind``: the name in the placeholder (lowercase, dash-separated).
    ``pattern``: either a regex (compiled on first use: ``Detector.regex``
    gives the ``re.Pattern``), whose named group ``secret`` (or the whole
    match when there is no such group) is the text to replace, or a callable
    ``text -> iterator of (start, end)`` character spans to replace.
    ``description``: what it finds, in one sentence.
    ``check``: optional ``value -> bool``; a regex match whose secret text fails
    it is not a secret (used to drop look-alikes). Callables check on their own.
    ``not_after``: characters that may not come right before a regex match (a
    word boundary kept out of the regex so that its literal prefix stays fast).
    ``needles``: lowercase strings of which one must occur in the lowercased
    text for the detector to run at all (a cheap ``in`` test before any regex).
    ``prefixes``: for a provider token, the fixed literal prefixes (case-sensitive)
    its tokens start with; :func:`redact_text` finds them through one shared scan
    (see "One pass" in the module's notes) instead of running ``pattern`` itself.
    """

    __slots__ = ("kind", "pattern", "description", "check", "not_after", "needles", "prefixes")

    def __init__(
        self,
        kind: str,
        pattern: re.Pattern[str] | _Lazy | SpanFinder,
        description: str,
        check: Callable[[str], bool] | None = None,
        not_after: str = "",
        needles: tuple[str, ...] = (),
        prefixes: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.pattern = pattern
        self.description = description
        self.check = check
        self.not_after = not_after
        self.needles = needles
        self.prefixes = prefixes

    def __repr__(self) -> str:
        return f"Detector({self.kind!r})"

    @property
    def regex(self) -> re.Pattern[str] | None:
        """The compiled regex (compiling it now), or None for a callable detector."""
        pat = self.pattern
        if isinstance(pat, _Lazy):
            return pat.rx
        return pat if isinstance(pat, re.Pattern) else None

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Yield the ``(start, end)`` character spans of ``text`` to replace."""
        if self.needles:
            low = _lower(text)
            if not any(n in low for n in self.needles):
                return
        pat = self.regex
        if pat is None:
            yield from self.pattern(text)  # type: ignore[operator]
            return
        grouped = "secret" in pat.groupindex
        check = self.check
        not_after = self.not_after
        for m in pat.finditer(text):
            if not_after and not _boundary(text, m.start(), not_after):
                continue
            s, e = m.span("secret") if grouped else m.span()
            if s < 0 or s == e:
                continue
            if check is not None and not check(text[s:e]):
                continue
            yield s, e


def _boundary(text: str, start: int, not_after: str | frozenset[str]) -> bool:
    """Whether ``start`` begins a token: the character before is not in ``not_after``,
    or it is the letter of a JSON escape (the ``n`` of a literal ``\\n``)."""
    if start <= 0:
        return True
    prev = text[start - 1]
    if prev not in not_after:
        return True
    return prev in "nrt" and start >= 2 and text[start - 2] == "\\"


# ---------------------------------------------------------------------------
# a lowercase copy with the same offsets, shared by the case-insensitive finders

_LOWERED: tuple[str | None, str] = (None, "")


_ASCII: tuple[str | None, bytes] = (None, b"")


def _ascii(text: str) -> bytes:
    """``text`` as ASCII bytes, one byte per character (others become ``b"?"``), so
    that offsets match ``text`` (one-entry cache, shared by the scans of one text)."""
    global _ASCII
    cached, raw = _ASCII
    if cached is text:
        return raw
    raw = text.encode("ascii") if text.isascii() else text.encode("ascii", "replace")
    _ASCII = (text, raw)
    return raw


_TOKEN_MAP: tuple[str | None, bytes] = (None, b"")


def _token_map(text: str) -> bytes:
    """``text`` as ``b"a"`` (a token character, ``A-Z a-z 0-9 _ -``) or ``b" "`` per
    character (one-entry cache): :func:`_find_provider_tokens` walks its runs, and the
    keyword rule finds where a name starts with ``bytes.rfind``."""
    global _TOKEN_MAP
    cached, cls = _TOKEN_MAP
    if cached is text:
        return cls
    cls = _ascii(text).translate(_RUN_TABLE)
    _TOKEN_MAP = (text, cls)
    return cls


def _lower(text: str) -> str:
    """``text.lower()`` with offsets aligned to ``text`` (one-entry cache).

    Searching a lowered copy with ``str.find`` is ~10x faster than a regex with
    re.IGNORECASE. Every needle searched for is ASCII, so a character outside
    ASCII becomes one ``"?"`` (offsets still match, and ``str.lower`` of
    non-ASCII text, several times slower, is not needed).
    """
    global _LOWERED
    cached, low = _LOWERED
    if cached is text:
        return low
    if text.isascii():
        low = text.lower()
    else:  # every needle is ASCII: other characters become "?" (one each, offsets stay)
        low = _ascii(text).lower().decode("ascii")
    _LOWERED = (text, low)
    return low


def _find_all(low: str, needle: str) -> Iterator[int]:
    i = low.find(needle)
    while i >= 0:
        yield i
        i = low.find(needle, i + 1)


def _anchored(
    needles: tuple[str, ...],
    source: str,
    check: Callable[[str], bool] | None = None,
    back: int = 0,
    not_after: str = "",
) -> SpanFinder:
    """A finder that runs ``regex.match`` at each case-insensitive occurrence of a needle.

    ``back``: how many characters before the needle the regex starts (the
    regex itself decides what is there). The regex's group ``secret`` (or the
    whole match) is the span; ``check`` and ``not_after`` work as in :class:`Detector`.
    """

    regex = _Lazy(source)

    def find(text: str) -> Iterator[tuple[int, int]]:
        starts = _starts(_lower(text), needles)
        if not starts:
            return
        grouped = "secret" in regex.rx.groupindex
        done = -1
        for i in starts:
            if i < done:
                continue
            start = i - back
            if start < 0 or (not_after and not _boundary(text, start, not_after)):
                continue
            m = regex.match(text, start)
            if m is None:
                continue
            span = m.span("secret") if grouped else m.span()
            if check is None or check(text[span[0] : span[1]]):
                done = m.end()
                yield span

    return find


def _chain(*finders: SpanFinder) -> SpanFinder:
    """One finder yielding the spans of several."""

    def find(text: str) -> Iterator[tuple[int, int]]:
        for f in finders:
            yield from f(text)

    return find


# ---------------------------------------------------------------------------
# value heuristics shared by the context detectors (assignments, headers)

_PLACEHOLDER_WORDS = frozenset(
    """none null nil true false undefined required optional string str bytes
    changeme change_me changeit password passwd secret token apikey api_key redacted
    hidden masked example sample placeholder dummy todo tbd n/a empty default
    unknown unset notset missing invalid secretstr sensitive""".split()
)
# Values that stand for a secret rather than being one: <your-token>, ${VAR},
# $VAR, $(cmd), {{ secrets.X }}, %(name)s, {name}, os.environ[...], ***, xxxx...
_PLACEHOLDER_VALUE_RE = _Lazy(
    r"""^(?:<[^>]*>|\$\{[^}]*\}|\$[A-Za-z_]\w*|\$\([^)]*\)|%\(?\w*\)?s|\{[^{}]*\}
    |[*xX#.•…_-]+|(.)\1{7,}|\[[^\]]*\]|(?:your|insert|enter|replace|put|some)[-_ ].*)$
    |\{\{|os\.environ|getenv|process\.env|ENV\[|\.\.\.|…|\[REDACTED""",
    re.X,
)
_STAND_IN_RE = _Lazy(
    r"(?:my|the|your|some|a)?[-_]?(?:password|passwd|secret|token|changeme|letmein|admin|test)"
    r"[-_]?[0-9]{0,4}[!.]?",
    re.I,
)
_NUMERIC_RE = _Lazy(r"[+-]?[\d_,. ]+[kKmMgG]?")
# GITHUB_TOKEN (a name, not a value), EXAMPLE-PASSWORD
_UPPER_REF_RE = _Lazy(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]+(?:-[A-Z]+)+")
_IDENT_CHAIN_RE = _Lazy(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_WORD_RE = _Lazy(r"[`(\"']?[A-Za-z][A-Za-z'-]*[`)\"']?[,.!?;:]?|[-/&+|]")
_TYPE_EXPR_RE = _Lazy(r"[A-Za-z_][\w.]*\[[\w., \[\]|]*\]")  # Optional[str], Iterable[x.Y]


def _prose(v: str) -> bool:
    """Words ("not applicable", "Enter your password here"), not a secret.

    Two words that are both plain, or three or more with at least half plain.
    """
    words = v.split()
    if len(words) < 2:
        return False
    plain = sum(1 for w in words if _WORD_RE.fullmatch(w))
    return plain == len(words) or (len(words) >= 3 and plain * 2 >= len(words))


_LOWER_WORD_RE = _Lazy(r"[a-z]+")
_LOWER_WORDS_RE = _Lazy(r"[a-z]+(?:[-_.][a-z]+)+")
_TITLE_WORDS_RE = _Lazy(r"[A-Z][a-z]+(?:-[A-Z][a-z]+)+")
_ASSIGNED_RE = _Lazy(r"[A-Za-z_][\w.]*=[\w.'\"]*")
_FORMAT_RE = _Lazy(r"%[-+ #0-9.]*[sdrfxi]|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}|%\(\w+\)")

_REF_RE = _Lazy(r"[:$][A-Za-z_][\w.:-]*")
# A file path (not base64 that happens to start with "/": no "+" or "=" in a path here)
_PATH_RE = _Lazy(r"(?:~|\.{1,2}|[A-Za-z]:)?(?:[/\\][\w.@%~ -]*)+|~")
QUOTED, ENV, CODE = "quoted", "env", "code"


def _code_or_words(v: str, context: str) -> bool:
    """A value that reads as code or words rather than random characters.

    ``context``: ``"quoted"`` (a string literal or a JSON string), ``"env"``
    (unquoted after an UPPER_SNAKE name: a .env line, a compose file) or
    ``"code"`` (any other unquoted value: YAML, source code, prose). Rejected:

    - a dotted name with no digits, in code only (``token = settings.api_key``,
      ``password = form.password``); in a .env line, a flag or quotes, and with a
      digit anywhere (a dotted value with a digit after ``password:``), it is a value;
    - lowercase words joined by ``-``/``_``/``.``, unless env
      (``"role-secret-key"``, ``random-looking``);
    - a camelCase/CamelCase identifier with no digits made of word-like humps
      (``"waitForTaskToken"``, ``SecretStr``, ``RSAPrivateKey``, also with a type
      variable's final capital: ``AccessTokenT``); random mixed case
      (``eCvSoSZMWUyURvBABX``) has one-letter humps and stays;
    - Title-Case-Words, unless env (``"Access-Control-Allow-Credentials"``);
    - one lowercase word, in code only (``credential_helper = osxkeychain``);
    - ``Name=default`` in code (a parameter with its default).
    """
    ident = _IDENT_CHAIN_RE.fullmatch(v) is not None
    digits = any(c.isdigit() for c in v)
    if ident and "." in v and context == CODE and not digits:
        return True
    if ident and "." not in v and not digits:
        humps = _NAME_WORD_RE.findall(v)
        short = [h for h in humps if len(h) == 1]
        if len(short) == 1 and len(humps) > 2 and short[0].isupper():
            humps = [h for h in humps if len(h) > 1]  # AccessTokenT, OAuthToken, IAmSensitive
        if humps and all(len(h) >= 2 for h in humps) and len(v) >= 3 * len(humps):
            if any(c.isupper() for c in v):
                return True  # TokenType, RSAPrivateKey, waitForTaskToken
            if context == CODE:
                return True  # one lowercase word
    if context == CODE and _ASSIGNED_RE.fullmatch(v):
        return True  # startToken: Token=None
    if context == ENV:
        return False
    return bool(_LOWER_WORDS_RE.fullmatch(v) or _TITLE_WORDS_RE.fullmatch(v))


def _plausible_value(value: str, *, context: str, numeric_ok: bool = True) -> bool:
    """Whether a value in a secret context looks like a secret, not a stand-in.

    ``context``: ``"quoted"``, ``"env"`` or ``"code"`` (see :func:`_code_or_words`).
    ``numeric_ok``: whether an all-digits value may be a secret (a PIN after
    ``password=``) or is a count (after a name that only says token).
    """
    v = value.strip()
    if len(v) < (6 if context == ENV else 8):
        return False
    if v.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER_VALUE_RE.search(v):
        return False
    if _STAND_IN_RE.fullmatch(v):
        return False  # password1, secret123, changeme!: documentation's stand-ins
    if _NUMERIC_RE.fullmatch(v):  # a count, a size, a float, an IP or a version: not a secret
        return numeric_ok and v.isdigit()
    if _PATH_RE.fullmatch(v):
        return False  # a path to the secret (TOKEN_FILE=/run/secrets/x), not the secret
    if "://" in v[:24] and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", v):
        return False  # a URL: the url-password detector handles credentials in it
    if _UPPER_REF_RE.fullmatch(v):
        return False
    if value[:1].isspace() or value[-1:].isspace() or " + " in v:
        return False  # 'Credential=' + access_key + '...': the quotes are not around a value
    if _prose(v):
        return False  # "Enter your password here"
    if _TYPE_EXPR_RE.fullmatch(v) or v.count("*") * 2 >= len(v):
        return False  # a type annotation, a mask such as ****/**/**
    if v[0] in ":$" and _REF_RE.fullmatch(v):
        return False  # :py:class, $request.header.x-api-key
    if v.startswith("arn:") or _FORMAT_RE.search(v):
        return False  # an AWS resource name, a format string ("%d,%d", "{token}")
    return not _code_or_words(v, context)


def _mixed(value: str) -> bool:
    """At least two of lowercase, uppercase, digits: random-looking, not a word."""
    lower = any(c.islower() for c in value)
    upper = any(c.isupper() for c in value)
    digit = any(c.isdigit() for c in value)
    return lower + upper + digit >= 2


def _not_placeholder(value: str) -> bool:
    return not _PLACEHOLDER_VALUE_RE.search(value) and not _UPPER_REF_RE.fullmatch(value)


def _token_value(value: str) -> bool:
    """A provider token body: random-looking and not a documentation stand-in."""
    return _mixed(value) and _not_placeholder(value)


# ---------------------------------------------------------------------------
# secret names for the generic NAME=value rule

_NAME_KW_RE = _Lazy(
    r"secret|token|passw|pwd|api[-_]?key|private|credential|pass[-_]?phrase"
    r"|(?:access|auth|signing|encryption|master|client)[-_]?key",
    re.I,
)
# Literals whose occurrences (in a lowered copy) start the search for a name;
# secret_name() then decides on the whole name.
_NAME_KW_LITERALS = ("secret", "token", "pass", "pwd", "private", "credential", "key")
# The same words found by three regex scans instead of seven str.find passes: each regex
# starts with letters its words share, which sre looks for in a tight C loop before it tries
# the rest, so one scan finds two or three words for about the time of one find pass (over
# the bench mix: 3.8 ms for "k" against 2.8 + 3.0 ms for finding token and key). A lookbehind
# after the shared letters checks the start of the word (to-ken, se-cret) without giving up
# the literal prefix that makes the scan fast.
_K_WORDS_RE = _Lazy("k(?:(?<=tok)en|ey)")  # token (matched from its "k"), key
_CRE_WORDS_RE = _Lazy("cre(?:(?<=secre)t|dential)")  # secret (from its "cre"), credential
_P_WORDS_RE = _Lazy("p(?:ass|wd|rivate)")  # pass, pwd, private
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
_NAME_WORD_RE = _Lazy(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# A word in the name that makes it a setting ABOUT secrets, not one holding a
# secret: max_tokens, token_count, TOKEN_LIMIT, password_reset_url, token_file.
_NAME_NOT_SECRET = frozenset(
    """tokens tokenizer tokenizers tokenize tokenized tokenization tokenizing
    count counts counter limit limits budget budgets max min num number size len
    length usage used type types kind name names url urls uri path paths file files
    dir endpoint field fields header headers hint policy prompt format pattern
    regex ttl timeout expiry expires expiration expire label placeholder estimate
    estimated total remaining window rate cost price stdin env var strength rules
    rule validator validation mode enabled enable disabled flag visibility index
    idx pos position offset input output description desc help doc docs message
    msg error text title comment comments note notes info example examples
    sample samples prefix suffix pct percent ratio ip ips host hostname address addr
    port subnet cidr network dns domain arn manager secretsmanager next page
    continuation change creation idempotency pagination marker cursor request public
    string symbol operator verification expression selection""".split()
)
_TOKENISH_ONLY = _Lazy(r"token", re.I)

_ASSIGN_RE = _Lazy(
    r"""(?:\\{0,3}["'])?[ \t]*(?P<sep>:=|\?=|=>|=(?!=)|:(?![:/\\]))[ \t]*"""
    r"""(?:(?P<q>\\{0,3}["'])(?P<qv>[^\r\n]{0,512}?)(?P=q)"""
    r"""|(?P<uv>[^\s"'`,;&<>(){}\[\]\\|]{1,512}))"""
)
_FLAG_VALUE_RE = _Lazy(
    r"""[ \t]+(?:(?P<q>["'])(?P<qv>[^\r\n]{0,512}?)(?P=q)|(?P<uv>[^\s"'`,;&<>(){}\[\]\\|-][^\s"'`,;&<>(){}\[\]\\|]{0,511}))"""
)


@lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Whether an identifier names a secret (``DB_PASSWORD``, ``apiKey``, ``x-api-key``).

    True when the name contains secret/token/password/passwd/pwd/apikey/api_key/
    private/credential (any case; also passphrase, a last word ``pass``, and
    access/auth/signing/encryption/master/client key) in its last dotted part,
    none of its words marks it as a setting about secrets (``max_tokens``,
    ``token_count``, ``password_reset_url``, ``NextToken``), and it is not the id
    of a key (``AccessKeyId``; ``secret_id`` stays a secret). Cached: code and tool
    output repeat the same few names (``max_tokens``, ``api_key``) many times.
    """
    name = name.rsplit(".", 1)[-1]  # Token.String.Symbol, credential.helper: a namespace
    words = [w.lower() for w in _NAME_WORD_RE.findall(name)]
    if not words:
        return False
    bare_pass = words[-1:] == ["pass"] and (len(words) > 1 or name.isupper())
    if not (_NAME_KW_RE.search(name) or bare_pass):
        return False  # "pass" counts only as the last word: DB_PASS, not pass_context
    if words[-1] == "id" and "secret" not in words:
        return False  # the id of a key (AccessKeyId, private_key_id), not the key; secret_id is
    return not _NAME_NOT_SECRET.intersection(words)


def _numeric_ok(name: str) -> bool:
    """An all-digits value can be a secret after password=, never after a token count name."""
    return not (_TOKENISH_ONLY.search(name) and not re.search(r"secret|pass|pwd|key", name, re.I))


# The rest of a name from a keyword on, then (as the empty group "sep") whether a
# separator follows: one match per keyword hit where two would cost a call more.
_NAME_TAIL_RE = _Lazy(r"[A-Za-z0-9_.-]*(?:(?=[\"'\\ \t]{0,8}[:=?])(?P<sep>))?")
_YAML_BLOCK_RE = _Lazy(r"[ \t]*\\{0,3}[\"']?[ \t]*:[ \t]*[|>][-+0-9]{0,2}[ \t]*(?P<nl>\r?\n|\\n)")


def _yaml_block(text: str, s: int, e: int) -> tuple[int, int] | None:
    """The span of a YAML block scalar's lines (``password: |`` and the lines indented
    deeper than the name), or None. ``s``/``e``: the name's span. Line breaks may be
    real or JSON-escaped (a literal ``\\n``)."""
    m = _YAML_BLOCK_RE.match(text, e)
    if m is None:
        return None
    nl = "\\n" if m.group("nl") == "\\n" else "\n"
    line_start = text.rfind(nl, 0, s)
    if line_start >= 0:
        indent = s - line_start - len(nl)  # the name's column
    else:  # the first line (of a text, or of a JSON string): the blanks before the name
        indent = s - len(text[:s].rstrip(" \t"))
    pos = m.end()
    start = end = -1
    while pos < len(text):
        eol = text.find(nl, pos)
        if eol < 0:
            eol = len(text)
        line = text[pos:eol]
        body = line.lstrip(" \t")
        if body.strip():
            if len(line) - len(body) <= indent:
                break
            if start < 0:
                start = pos + len(line) - len(body)
            end = pos + len(line.rstrip())
        pos = eol + len(nl)
    if start < 0 or end - start < 8 or not _not_placeholder(text[start:end].split(nl)[0].strip()):
        return None
    return start, end


def _keyword_hits(low: str) -> dict[str, list[int]]:
    """Where each of :data:`_NAME_KW_LITERALS` occurs in a lowercased text (one scan
    each, shared by the detectors that start from a secret-ish word)."""
    out: dict[str, list[int]] = {}
    for kw in _NAME_KW_LITERALS:
        i = low.find(kw)
        found = []
        while i >= 0:
            found.append(i)
            i = low.find(kw, i + 1)
        out[kw] = found
    return out


def _find_assignments(text: str, hits: list[int] | None = None) -> Iterator[tuple[int, int]]:
    """Spans of the values of ``NAME=value``, ``NAME: value``, ``"NAME": "value"``,
    ``--name value``, ``--name=value`` and YAML block scalars (``NAME: |`` + lines).
    ``hits``: the sorted offsets of :data:`_NAME_KW_LITERALS` in the lowercased text,
    if already known."""
    n = len(text)
    if hits is None:
        hits = sorted(i for found in _keyword_hits(_lower(text)).values() for i in found)
    last_name_end = -1
    tail = _NAME_TAIL_RE.rx.match
    tmap: bytes | None = None
    for s in hits:
        if s < last_name_end:
            continue
        tm = tail(text, s)
        e = tm.end()  # type: ignore[union-attr]  # "*" always matches
        last_name_end = e
        sep = tm.lastindex is not None  # type: ignore[union-attr]
        if not sep:  # a flag (--db-password value)? its name starts with "-"
            if tmap is None:
                tmap = _token_map(text)
            ns = tmap.rfind(b" ", 0, s) + 1  # the start of the name, in C
            if text[ns] != "-" and not (text[ns] in "nrt" and text[ns - 1 : ns + 2] == "\\n-"):
                continue  # no assignment and no flag (a cheap test before anything else)
        while s > 0 and text[s - 1] in _NAME_CHARS:
            s -= 1
        if s >= 2 and text[s - 1] == "\\" and text[s] in "nrt":
            s += 1  # a JSON-escaped line break (\nDB_PASSWORD=...) is not part of the name
        if s > 0 and text[s - 1] == ":":
            continue  # a namespaced type (AWS::IAM::AccessKey) or ARN part (:secret:), not a setting
        if text[max(0, s - 3) : s] == "://":
            continue  # https://x-access-token:...@host: the url-password detector's
        if not sep and text[s] != "-":
            continue
        name = text[s:e].strip(".")
        if not name or not secret_name(name):
            continue
        am = _ASSIGN_RE.match(text, e)
        if am is None and name.startswith("-"):
            am = _FLAG_VALUE_RE.match(text, e)
        if am is None:
            block = _yaml_block(text, s, e)
            if block is not None:
                last_name_end = block[1]
                yield block
            continue
        literal = am.group("qv") is not None
        grp = "qv" if literal else "uv"
        vs, ve = am.span(grp)
        value = text[vs:ve]
        if not literal:
            if ve < n and text[ve] in "([":
                continue  # a call or an index: password = getpass(...), token = d["t"]
            if (
                text[vs].isupper()
                and am.re is _ASSIGN_RE.rx
                and am.group("sep") == ":"
                and text.startswith((" |", ")", "]", " =", " ->"), ve)
                and _IDENT_CHAIN_RE.fullmatch(text[vs:ve])
            ):
                continue  # a type annotation: private_key: Ed25519PrivateKey | None
            if value.endswith((".", ",", ":")):  # sentence punctuation after a value
                value = value.rstrip(".,:")
                ve = vs + len(value)
        # a .env line (UPPER_SNAKE name) or a command-line flag: a literal, not code
        context = QUOTED if literal else ENV if name.isupper() or name[0] == "-" else CODE
        if not _plausible_value(value, context=context, numeric_ok=_numeric_ok(name)):
            continue
        last_name_end = ve
        yield vs, ve


# ---------------------------------------------------------------------------
# PEM private keys in every shape

_PEM_BEGIN_RE = _Lazy(r"-----BEGIN[ A-Z0-9]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = _Lazy(r"-----END[ A-Z0-9]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
# separators: real whitespace, or \n \r \t written as escapes (any escaping depth)
_PEM_SEP = r"(?:[ \t\r\n]|\\+[nrt])"
_PEM_HEADERS_RE = _Lazy(
    rf"(?:{_PEM_SEP}+[A-Za-z][A-Za-z-]{{1,30}}:[ \t][^\r\n\\]{{0,200}})*"
)  # Proc-Type: 4,ENCRYPTED / DEK-Info: ... / Version: ... / Comment: ...
_PEM_BODY_RE = _Lazy(rf"(?:{_PEM_SEP}|[A-Za-z0-9+/=])*+")
_PEM_TOKEN_RE = _Lazy(r"[A-Za-z0-9+/=]+")


def _find_pem(text: str) -> Iterator[tuple[int, int]]:
    """PEM/OpenSSH/PGP private key blocks: whole, JSON-escaped, on one line, or truncated."""
    pos = 0
    while True:
        m = _PEM_BEGIN_RE.search(text, pos)
        if m is None:
            return
        hdr = _PEM_HEADERS_RE.match(text, m.end())
        body_start = hdr.end() if hdr else m.end()
        body = _PEM_BODY_RE.match(text, body_start)
        body_end = body.end() if body else body_start
        tokens = list(_PEM_TOKEN_RE.finditer(text, body_start, body_end))
        end = _PEM_END_RE.match(text, body_end)
        if end is not None and tokens and max(len(t.group()) for t in tokens) >= 12:
            yield m.start(), end.end()
            pos = end.end()
            continue
        # No END line (truncated): redact from BEGIN to the end of the base64 run.
        # The run is full-width lines (>= 40 chars) plus one shorter last line.
        stop = -1
        for i, t in enumerate(tokens):
            length = len(t.group())
            if i == 0 and length < 16:
                break
            stop = t.end()
            if length < 40:
                break
        if stop > 0:
            yield m.start(), stop
            pos = stop
        else:
            pos = m.end()


# ---------------------------------------------------------------------------
# AWS secret access keys: by name, or next to an access key id

_AWS_KEY_ID = r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"
_AWS_KEY_ID_RE = _Lazy(rf"{_AWS_KEY_ID}(?![A-Za-z0-9])")
_AWS_NEEDLES = ("akia", "asia", "abia", "acca", "a3t")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# matched at each "secret" of the lowered text; the name must also say aws or access
_AWS_SECRET_NAMED_RE = _Lazy(
    r"(?i:secret_?(?:access_?)?key)\\{0,3}[\"']?[ \t]*[:=][ \t]*"
    r"\\{0,3}[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9+])"
)
_AWS_SECRET_BARE_RE = _Lazy(r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9+=])")
_HEX_RE = _Lazy(r"[0-9a-fA-F]+")


def _aws_secret_shape(v: str) -> bool:
    """40 chars of base64 with both cases: never a git SHA (hex) or a word run."""
    return any(c.islower() for c in v) and any(c.isupper() for c in v) and not _HEX_RE.fullmatch(v)


def _find_aws_secret(text: str, key_ids: list[tuple[int, int]] | None) -> Iterator[tuple[int, int]]:
    """AWS secret access keys assigned to an aws_secret_access_key-like name, or
    within 200 characters of an access key id. ``key_ids``: the spans of the access
    key ids already found in ``text`` (None: find them here)."""
    low = _lower(text)
    for i in _find_all(low, "secret"):
        m = _AWS_SECRET_NAMED_RE.match(text, i)
        if m is None or not _not_placeholder(m.group("secret")):
            continue
        name_start = i
        while name_start > 0 and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        if "aws" in low[name_start:i] or "access" in low[i : m.start("secret")]:
            yield m.span("secret")
    if key_ids is None:
        key_ids = [
            k.span() for k in _AWS_KEY_ID_RE.finditer(text) if _boundary(text, k.start(), _ALNUM)
        ]
    for ks, ke in key_ids:
        lo, hi = max(0, ks - 200), min(len(text), ke + 200)
        pos = lo
        while (m := _AWS_SECRET_BARE_RE.search(text, pos, hi)) is not None:
            if not _boundary(text, m.start(), _ALNUM + "/+="):
                pos = m.start() + 1  # inside a longer run: move on one character
                continue
            pos = m.end()
            if _aws_secret_shape(m.group()):
                yield m.span()


# ---------------------------------------------------------------------------
# credentials in URLs: scheme://user:password@host -> keep scheme, user, host;
# a key as the whole user part (a Sentry-style DSN); webhook URLs whose path is the secret

_URL_AUTH_RE = _Lazy(
    r"""(?P<user>[^\s:/?#@'"\\<>\[\]]*)(?::(?P<secret>[^\s/?#'"\\<>]*))?@(?P<host>[A-Za-z0-9\[][A-Za-z0-9.\-_:\]%]*)"""
)
_URL_PW_PLACEHOLDERS = frozenset(
    "pass password passwd pw pwd secret xxx xxxx changeme token apikey ***".split()
)
# (host + path prefix after "://", kind, group "secret" = the part to replace)
_WEBHOOKS: tuple[tuple[str, str, _Lazy], ...] = (
    (
        "hooks.slack.com/",
        "slack-webhook",
        _Lazy(r"(?P<secret>hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{8,})"),
    ),
    (
        ".webhook.office.com/",
        "teams-webhook",
        _Lazy(r"[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/(?P<secret>[^\s\"'<>]{20,})"),
    ),
    (
        "discord",
        "discord-webhook",
        _Lazy(
            r"(?:canary\.|ptb\.)?discord(?:app)?\.com/api/webhooks/(?P<secret>[0-9]+/[A-Za-z0-9_-]{20,})"
        ),
    ),
    (
        "api.telegram.org/bot",
        "telegram-bot-token",
        _Lazy(r"api\.telegram\.org/(?:file/)?bot(?P<secret>[0-9]{5,12}:[A-Za-z0-9_-]{30,})"),
    ),
)
_DSN_KEY_RE = _Lazy(r"[0-9a-f]{16,}|[A-Za-z0-9]{20,}")  # a Sentry key is 32 hex


def _find_urls(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, kind)`` in URLs: the password of ``scheme://user:password@host``
    (``url-password``); a key that is the whole user part, ``https://<key>@host``, as
    in a Sentry DSN (``dsn-key``); the secret path of Slack, Teams and Discord webhooks
    and of Telegram bot URLs."""
    pos = 0
    while True:
        i = text.find("://", pos)
        if i < 0:
            return
        pos = i + 3
        if i == 0 or not text[i - 1].isalnum():
            continue
        head = text[pos : pos + 40]
        for needle, kind, rx in _WEBHOOKS:
            if needle in head:
                w = rx.match(text, pos)
                if w is not None:
                    pos = w.end()
                    start = w.start("secret")
                    if kind == "slack-webhook":  # the whole URL, scheme included
                        start = i
                        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
                            start -= 1
                    yield start, w.end("secret"), kind
                    break
        else:
            m = _URL_AUTH_RE.match(text, pos)
            if m is None:
                continue
            pw = m.group("secret")
            if pw is None:
                user = m.group("user")
                if _DSN_KEY_RE.fullmatch(user) and _mixed(user) and _not_placeholder(user):
                    if any(c.isdigit() for c in user) and not _LOWER_WORDS_RE.fullmatch(user):
                        pos = m.end()
                        yield m.start("user"), m.end("user"), "dsn-key"
                continue
            if (
                len(pw) < 3
                or pw.lower() in _URL_PW_PLACEHOLDERS
                or _PLACEHOLDER_VALUE_RE.search(pw)
            ):
                continue
            if "%20" in pw or ("," in pw and ":" in pw):
                continue  # words ("a%20secret") or a multi-host list (h1:1,h2:2): not a password
            pos = m.end()
            yield m.start("secret"), m.end("secret"), "url-password"


# ---------------------------------------------------------------------------
# passwords given to a command as a short flag: sshpass -p, docker login -p,
# mysql -p<password>, redis-cli -a

_CLI_COMMANDS = (
    ("sshpass", "-p"),
    (" login", "-p"),
    ("mysql", "-p"),
    ("mariadb", "-p"),
    ("redis-cli", "-a"),
)
#: a -p, -a or -u after a space or tab, or the -u of --user: where a flag can start (a
#: bare "-[pau]" also stops at every hyphenated word: multi-process, non-ascii, ...)
_FLAG_CUE_RE = _Lazy(r"-(?:(?<=[ \t]-)[pau]|(?<=--)u(?=ser))")
_CURL_USER_RE = _Lazy(r"(?:-u|--user)[ \t=]+[\"']?[^\s:\"'$]+:(?P<secret>[^\s\"']{3,})")
_CURL_HEAD_RE = _Lazy(r"(?:-u|--user)[ \t=]+[\"']?")  # _CURL_USER_RE up to the user part
_USER_END_RE = _Lazy(r"[\s:\"'$]")  # what ends the user part
_CLI_VALUE_RE = _Lazy(
    r"""[ \t]*(?:(?P<q>["'])(?P<qv>[^"'\r\n]{1,512})(?P=q)|(?P<uv>[^\s"'`;&|<>()]{1,512}))"""
)


def _find_flag_credentials(text: str, low: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, kind)``: the password of curl ``-u``/``--user user:password``
    (``auth-header``), and (``cli-password``) the value of ``-p``/``-a`` after sshpass, ``* login`` (docker, podman, helm
    registry, oc, ...), mysql/mariadb (glued to the flag) and redis-cli, on the
    same line. ``mysql -p dbname`` (a prompt, then the database) is left alone.

    Linear in the text, however many flags one line holds: the line's start and the
    nearest command before a flag are carried forward from flag to flag (never searched
    back from each flag), a ``user:`` part is matched only where the first character
    that ends it is the ``:`` (found once per run of the text, not once per flag), and a
    ``--user`` inside a value an earlier ``-u``/``--user`` took is part of that value."""
    line_from = 0  # the start of the line the last flag stood on ...
    seen = 0  # ... known to hold no newline up to here
    last = {name: -1 for name, _ in _CLI_COMMANDS}  # each command's last place before the flag
    nxt: dict[str, int] = {}  # ... and its next one (looked for on the first flag it takes)
    user_end = (-1, -1)  # (from, at): the first character ending a user part at or after from
    taken = 0  # the end of the last user:password value matched

    def curl_user(at: int) -> Iterator[tuple[int, int, str]]:
        nonlocal user_end, taken
        if at < taken:
            return
        head = _CURL_HEAD_RE.match(text, at)
        if head is None:
            return
        u = head.end()
        lo, end = user_end
        if not lo <= u <= end:
            t = _USER_END_RE.search(text, u)
            end = t.start() if t is not None else len(text)
            user_end = (u, end)
        if end >= len(text) or text[end] != ":":
            return
        cm = _CURL_USER_RE.match(text, at)
        if cm is None:
            return
        taken = cm.end()
        if _auth_value(cm.group("secret")):
            yield cm.start("secret"), cm.end("secret"), "auth-header"

    for fm in _FLAG_CUE_RE.rx.finditer(text):
        f = fm.start()
        flag = text[f : f + 2]
        if f == 0 or text[f - 1] not in " \t":
            if flag == "-u" and text.startswith("--user", f - 1):
                yield from curl_user(f - 1)
            continue
        if flag == "-u":
            yield from curl_user(f)
            continue
        nl = low.rfind("\n", seen, f)
        if nl >= 0:
            line_from = nl + 1
        seen = f
        cmd, at = "", -1
        for name, want in _CLI_COMMANDS:  # the nearest command before the flag
            if want != flag:
                continue
            pos = nxt.get(name, -2)
            if pos == -2:  # first use: the places before this line never count
                pos = low.find(name, line_from)
            while 0 <= pos and pos + len(name) <= f:
                last[name] = pos
                pos = low.find(name, pos + 1)
            nxt[name] = pos
            pos = last[name]
            if pos >= line_from and pos > at:
                cmd, at = name, pos
        if not cmd:
            continue
        after = f + 2
        glued = cmd in ("mysql", "mariadb")
        nxt_char = text[after : after + 1]
        if glued and nxt_char and not nxt_char.isspace() and nxt_char not in "=\"'":
            m = _CLI_VALUE_RE.match(text, after)
        elif not glued and nxt_char in (" ", "\t", "="):
            m = _CLI_VALUE_RE.match(text, after + (nxt_char == "="))
        else:
            continue
        if m is not None:
            grp = "qv" if m.group("qv") is not None else "uv"
            v = m.group(grp)
            if len(v) >= 4 and v[0] not in "-$" and _not_placeholder(v):
                yield m.start(grp), m.end(grp), "cli-password"


# ---------------------------------------------------------------------------
# provider tokens: a fixed prefix and a documented body
#
# One row per provider: (kind, provider, prefixes, regex). The regex is ours, written
# from each provider's published token format, with the public gitleaks rule set
# (github.com/gitleaks/gitleaks, config/gitleaks.toml) as the checklist of which
# providers have a fixed prefix. ``prefixes`` are the case-sensitive literals a token
# starts with; the regex matches the whole token from its first character.

_PROVIDERS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("anthropic-key", "Anthropic", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_-]{16,}"),
    ("openrouter-key", "OpenRouter", ("sk-or-v1-",), r"sk-or-v1-[0-9a-f]{64}"),
    (
        "openai-key",
        "OpenAI",
        ("sk-",),
        r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
    ),
    (
        "github-token",
        "GitHub",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255}",
    ),
    (
        "gitlab-token",
        "GitLab",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-")
        + ("glagent-", "glffct-", "gloas-", "GR1348941"),
        r"(?:gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent|ffct|oas)-|GR1348941)[A-Za-z0-9_.-]{20,}",
    ),
    (
        "slack-token",
        "Slack",
        ("xoxb-", "xoxp-", "xoxa-", "xoxe-", "xoxs-", "xoxr-", "xoxo-", "xoxe.xox", "xapp-"),
        r"(?:xox[abposer]|xoxe\.xox[bp]|xapp)-[A-Za-z0-9-]{10,}",
    ),
    (
        "stripe-key",
        "Stripe",
        ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_", "whsec_"),
        r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{16,}",
    ),
    (
        "aws-access-key",
        "AWS",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    (
        "aws-bedrock-key",
        "Amazon Bedrock",
        ("ABSK", "bedrock-api-key-"),
        r"ABSK[A-Za-z0-9+/]{100,}={0,2}|bedrock-api-key-[A-Za-z0-9+/=]{20,}",
    ),
    ("google-api-key", "Google Cloud", ("AIza",), r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    (
        "google-oauth",
        "Google OAuth",
        ("GOCSPX-", "ya29."),
        r"GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{30,}",
    ),
    (
        "huggingface-token",
        "Hugging Face",
        ("hf_", "api_org_"),
        r"(?:hf_|api_org_)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])",
    ),
    ("npm-token", "npm", ("npm_",), r"npm_[A-Za-z0-9]{30,}"),
    (
        "wiki-memory-offer-code",
        "wiki-memory handoff offer codes",
        ("wmo_",),
        r"wmo_[A-Za-z0-9]{20,}(?![A-Za-z0-9_])",
    ),
    (
        "pypi-token",
        "PyPI",
        ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"),
        r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{16,}",
    ),
    (
        "grafana-token",
        "Grafana",
        ("eyJrIjoi", "glc_", "glsa_"),
        r"eyJrIjoi[A-Za-z0-9]{40,}={0,3}|glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    ),
    (
        "jwt",
        "JSON Web Token",
        ("eyJ",),
        r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    ),
    (
        "1password-token",
        "1Password",
        ("ops_eyJ", "A3-"),
        r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"
        r"|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    ),
    ("adobe-client-secret", "Adobe", ("p8e-",), r"p8e-[A-Za-z0-9]{32}"),
    (
        "age-secret-key",
        "age",
        ("AGE-SECRET-KEY-1",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    ),
    ("airtable-token", "Airtable", ("pat",), r"pat[A-Za-z0-9]{14}\.[0-9a-f]{64}"),
    ("alibaba-access-key", "Alibaba Cloud", ("LTAI",), r"LTAI[A-Za-z0-9]{20}"),
    (
        "jfrog-token",
        "JFrog Artifactory",
        ("AKCp", "cmVmd"),
        r"AKCp[A-Za-z0-9]{60,}|cmVmd[A-Za-z0-9]{50,}",
    ),
    ("clickhouse-key", "ClickHouse Cloud", ("4b1d",), r"4b1d[A-Za-z0-9]{38}"),
    ("clojars-token", "Clojars", ("CLOJARS_",), r"CLOJARS_[A-Za-z0-9]{60}"),
    (
        "cloudflare-origin-ca-key",
        "Cloudflare",
        ("v1.0-",),
        r"v1\.0-[0-9a-f]{24}-[0-9a-f]{146}",
    ),
    ("databricks-token", "Databricks", ("dapi",), r"dapi[0-9a-f]{32}(?:-\d)?"),
    (
        "digitalocean-token",
        "DigitalOcean",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        r"do[por]_v1_[0-9a-f]{64}",
    ),
    (
        "doppler-token",
        "Doppler",
        ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9._-]{40,}",
    ),
    (
        "duffel-token",
        "Duffel",
        ("duffel_test_", "duffel_live_"),
        r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
    ),
    ("dynatrace-token", "Dynatrace", ("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ("easypost-key", "EasyPost", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}"),
    ("facebook-token", "Facebook", ("EAAM", "EAAC"), r"EAA[MC][A-Za-z0-9]{100,}"),
    (
        "flutterwave-key",
        "Flutterwave",
        ("FLWSECK_TEST-", "FLWSECK-"),
        r"FLWSECK(?:_TEST)?-[0-9a-hA-H]{12,32}(?:-X)?",
    ),
    (
        "flyio-token",
        "Fly.io",
        ("fo1_", "fm1a_", "fm1r_", "fm2_"),
        r"fo1_[A-Za-z0-9_-]{43}|(?:fm1[ar]|fm2)_[A-Za-z0-9+/]{100,}={0,3}",
    ),
    ("frameio-token", "Frame.io", ("fio-u-",), r"fio-u-[A-Za-z0-9_=-]{64}"),
    (
        "harness-token",
        "Harness",
        ("pat.", "sat."),
        r"[ps]at\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    ("heroku-key", "Heroku", ("HRKU-AA",), r"HRKU-AA[A-Za-z0-9_-]{58}"),
    ("infracost-token", "Infracost", ("ico-",), r"ico-[A-Za-z0-9]{32}"),
    (
        "intra42-secret",
        "42 Intra",
        ("s-s4t2ud-", "s-s4t2af-"),
        r"s-s4t2(?:ud|af)-[0-9a-f]{64}",
    ),
    ("linear-key", "Linear", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}"),
    (
        "notion-token",
        "Notion",
        ("ntn_", "secret_"),
        r"(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})(?![A-Za-z0-9])",
    ),
    ("octopus-key", "Octopus Deploy", ("API-",), r"API-[A-Z0-9]{26}(?![A-Za-z0-9])"),
    ("openshift-token", "OpenShift", ("sha256~",), r"sha256~[A-Za-z0-9_-]{43}"),
    ("perplexity-key", "Perplexity", ("pplx-",), r"pplx-[A-Za-z0-9]{48}"),
    (
        "planetscale-token",
        "PlanetScale",
        ("pscale_tkn_", "pscale_oauth_", "pscale_pw_"),
        r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_.=-]{32,64}",
    ),
    ("postman-key", "Postman", ("PMAK-",), r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    ("prefect-token", "Prefect", ("pnu_",), r"pnu_[A-Za-z0-9]{36}"),
    ("pulumi-token", "Pulumi", ("pul-",), r"pul-[0-9a-f]{40}"),
    ("readme-key", "ReadMe", ("rdme_",), r"rdme_[a-z0-9]{70}"),
    ("rubygems-key", "RubyGems", ("rubygems_",), r"rubygems_[0-9a-f]{48}"),
    ("scalingo-token", "Scalingo", ("tk-us-",), r"tk-us-[A-Za-z0-9_-]{48}"),
    (
        "sendgrid-key",
        "SendGrid (Twilio)",
        ("SG.",),
        r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
    ),
    (
        "brevo-key",
        "Brevo (Sendinblue)",
        ("xkeysib-", "xsmtpsib-"),
        r"x(?:keysib|smtpsib)-[0-9a-f]{64}-[A-Za-z0-9]{16}",
    ),
    (
        "sentry-token",
        "Sentry",
        ("sntrys_", "sntryu_"),
        r"sntrys_eyJ[A-Za-z0-9+/=_-]{40,}|sntryu_[0-9a-f]{64}",
    ),
    (
        "settlemint-token",
        "SettleMint",
        ("sm_aat_", "sm_pat_", "sm_sat_"),
        r"sm_[aps]at_[A-Za-z0-9]{16}",
    ),
    (
        "shippo-token",
        "Shippo",
        ("shippo_live_", "shippo_test_"),
        r"shippo_(?:live|test)_[0-9a-fA-F]{40}",
    ),
    (
        "shopify-token",
        "Shopify",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}",
    ),
    (
        "sourcegraph-token",
        "Sourcegraph",
        ("sgp_",),
        r"sgp_(?:[0-9a-fA-F]{16}_|local_)?[0-9a-fA-F]{40}",
    ),
    (
        "square-token",
        "Square",
        ("EAAA", "sq0atp-", "sq0csp-"),
        r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_-]{22,60}",
    ),
    ("twilio-key", "Twilio", ("SK",), r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    ("typeform-token", "Typeform", ("tfp_",), r"tfp_[A-Za-z0-9_.=-]{40,59}"),
    ("vault-token", "HashiCorp Vault", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    (
        "definednetworking-token",
        "Defined Networking",
        ("dnkey-",),
        r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}",
    ),
    (
        "newrelic-key",
        "New Relic",
        ("NRAK-", "NRII-", "NRJS-"),
        r"NR(?:AK|II|JS)-[A-Za-z0-9-]{19,40}",
    ),
    (
        "mapbox-token",
        "Mapbox",
        ("sk.eyJ",),
        r"sk\.eyJ[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{16,}",
    ),
    ("yandex-key", "Yandex Cloud", ("AQVN",), r"AQVN[A-Za-z0-9_-]{35,38}"),
    (
        "twitter-bearer-token",
        "X (Twitter)",
        ("AAAAAAAAAAAAAAAAAAAAA",),
        r"A{21,22}[A-Za-z0-9%]{60,}",
    ),
    (
        "plaid-token",
        "Plaid",
        ("access-sandbox-", "access-development-", "access-production-"),
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}"
        r"-[0-9a-f]{4}-[0-9a-f]{12}",
    ),
    ("dropbox-token", "Dropbox", ("sl.",), r"sl\.[A-Za-z0-9_-]{130,}"),
    (
        "atlassian-token",
        "Atlassian, Bitbucket",
        ("ATATT3", "ATCTT3", "ATBB"),
        r"AT[AC]TT3[A-Za-z0-9_=+/-]{100,}|ATBB[A-Za-z0-9]{28,}",
    ),
    (
        "docker-token",
        "Docker Hub",
        ("dckr_pat_", "dckr_oat_"),
        r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
    ),
    ("groq-key", "Groq", ("gsk_",), r"gsk_[A-Za-z0-9]{48,}"),
    ("xai-key", "xAI", ("xai-",), r"xai-[A-Za-z0-9]{60,}"),
    ("replicate-token", "Replicate", ("r8_",), r"r8_[A-Za-z0-9]{36,}"),
    (
        "tailscale-key",
        "Tailscale",
        ("tskey-",),
        r"tskey-[a-z]+-[A-Za-z0-9]{8,}-[A-Za-z0-9]{16,}",
    ),
    (
        "supabase-token",
        "Supabase",
        ("sbp_", "sb_secret_"),
        r"sbp_[0-9a-f]{40}|sb_secret_[A-Za-z0-9_-]{20,}",
    ),
    ("contentful-token", "Contentful", ("CFPAT-",), r"CFPAT-[A-Za-z0-9_-]{43}"),
    ("figma-token", "Figma", ("figd_",), r"figd_[A-Za-z0-9_-]{40,}"),
    ("sonarqube-token", "SonarQube", ("squ_", "sqp_", "sqa_"), r"sq[upa]_[0-9a-f]{40}"),
    ("buildkite-token", "Buildkite", ("bkua_",), r"bkua_[0-9a-f]{40}"),
    ("circleci-token", "CircleCI", ("CCIPAT_",), r"CCIPAT_[A-Za-z0-9]{22}_[0-9a-f]{40}"),
    (
        "langsmith-key",
        "LangSmith",
        ("lsv2_pt_", "lsv2_sk_"),
        r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}",
    ),
    ("pinecone-key", "Pinecone", ("pcsk_",), r"pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{60,}"),
    ("nvidia-key", "NVIDIA", ("nvapi-",), r"nvapi-[A-Za-z0-9_-]{64}"),
    ("tavily-key", "Tavily", ("tvly-",), r"tvly-(?:dev-)?[A-Za-z0-9]{32}"),
)

# Tokens whose fixed part is inside or at the end rather than at the start: (kind,
# provider, infix test, regex). The test is ``(token-run, start) -> bool`` on the run
# of token characters; the regex then matches from the run's first character.
_SHAPED: tuple[tuple[str, str, str, str], ...] = (
    (
        "terraform-token",
        "HashiCorp Terraform Cloud",
        ".atlasv1.",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
    ),
    ("maxmind-key", "MaxMind", "_mmk", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    ("mailchimp-key", "Mailchimp", "-us", r"[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"),
    (
        "authress-key",
        "Authress",
        ".acc",
        r"(?:sc|ext|scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}"
        r"\.[A-Za-z0-9+/_=-]{30,120}",
    ),
)

# The characters of a token "run": a maximal stretch of these is where a provider
# token can start. Found in C: the text is encoded to ASCII (one byte per character,
# so offsets stay) and translated to b"a" (token character) or b" " (anything else).
_RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_RUN_TABLE = bytes(0x61 if chr(c) in _RUN_CHARS else 0x20 for c in range(256))
# A run right after one of these may be the tail of a token with a dot, tilde or
# base64 character in it (SG.<id>.<secret>, sha256~<token>, <id>.atlasv1.<token>,
# ABSK<base64>): look back for its start.
_JOINERS = ".~+/"
_RUN_SET = frozenset(_RUN_CHARS)
_TOKEN_SET = frozenset(_RUN_CHARS + ".~")  # what may not come right before a token
_RUN_MIN = 20  # no provider token is shorter
#: How far back a run after a joiner looks for the token's start: a base64 body (Bedrock's
#: ``ABSK`` + 100 or more characters) may hold ``+`` and ``/`` anywhere, so that every run
#: in its first 160 characters is shorter than :data:`_RUN_MIN`.
_JOIN_BACK = 192
_RUN_NEEDLE = b"a" * _RUN_MIN
_HEX = frozenset("0123456789abcdefABCDEF")
_NUCLEOTIDES = frozenset("ACGTU")
#: providers whose token body is base32 of one case (A-Z2-7 or a-z2-7), so that it may
#: hold letters only: the two-classes test of other tokens would keep such a token whole
_ONE_CASE = frozenset({"aws-access-key", "wiki-memory-offer-code"})
_BODY_RE = _Lazy(r"[A-Za-z0-9]{16}")  # a token body: 16 letters and digits in a row


class _Provider:
    """A compiled-on-first-use provider row (see :data:`_PROVIDERS`)."""

    __slots__ = ("kind", "regex")

    def __init__(self, kind: str, source: str) -> None:
        self.kind = kind
        self.regex = _Lazy(source)


# {first two characters of a prefix: [(prefix, provider), ...] longest prefix first}
_PREFIX_INDEX: dict[str, list[tuple[str, _Provider]]] = {}
_SHAPED_JOINED: list[tuple[str, _Provider]] = []  # infix with a dot: found by a look-back
_SHAPED_END: list[tuple[str, _Provider]] = []  # suffix: at the end of a run


def _build_index() -> None:
    rows: list[tuple[str, _Provider]] = []
    for kind, _name, prefixes, source in _PROVIDERS:
        prov = _Provider(kind, source)
        rows.extend((p, prov) for p in prefixes)
    rows.sort(key=lambda r: -len(r[0]))
    for prefix, prov in rows:
        _PREFIX_INDEX.setdefault(prefix[:2], []).append((prefix, prov))
    for kind, _name, infix, source in _SHAPED:
        rows_for = _SHAPED_JOINED if infix[0] in _JOINERS else _SHAPED_END
        rows_for.append((infix, _Provider(kind, source)))


_build_index()
# "-" or "_" and then the first two characters of a prefix: a token glued to a word
_GLUED_RE = _Lazy("[-_](?=" + "|".join(re.escape(k) for k in sorted(_PREFIX_INDEX)) + ")")


def _token_end(text: str, end: int, run_end: int) -> int:
    """Where a matched token's redaction ends: the regex's end or the end of its run
    of token characters, whichever is later (so no tail of a longer token stays),
    without a sentence's final dot."""
    if run_end > end:
        end = run_end
        while end > 0 and text[end - 1] == ".":
            end -= 1
    return end


def _match_prefix(
    text: str, s: int, run_end: int, cands: list[tuple[str, _Provider]]
) -> tuple[int, int, str] | None:
    for prefix, prov in cands:
        if text.startswith(prefix, s):
            m = prov.regex.match(text, s)
            if m is None:
                continue
            e = m.end()
            if e < run_end and text[e].isalnum():
                continue  # a longer word (a SHA-256 that starts like a token), not the token
            value = m.group()
            if (
                # base32 of one case has no second class of characters 1 time in 28 (AWS
                # ids, 16 characters) or in 220 (offer codes, 26): the body need only not
                # be a stand-in; a DNA or RNA sequence (a 20-nucleotide guide or primer:
                # ACCAGT...) is no AWS id
                _not_placeholder(value[len(prefix) :]) and not _NUCLEOTIDES.issuperset(value)
                if prov.kind in _ONE_CASE
                else _token_value(value)
            ):
                return s, _token_end(text, e, run_end), prov.kind
    return None


def _find_provider_tokens(
    text: str, spans: list[tuple[int, int]]
) -> Iterator[tuple[int, int, str]]:
    """``(start, end, kind)`` of every provider token: one C scan for runs of token
    characters at least :data:`_RUN_MIN` long, then a dictionary look-up of each
    run's first two characters among the prefixes (and the infix tests of
    :data:`_SHAPED` on the run), and the provider's
    own regex only where a prefix is there. A token starts a run (after a space,
    quote, ``=``, ``:``, ``/``, ... or a JSON escape such as a literal ``\\n``) or
    follows a ``-`` or ``_`` inside one (``h-ghp_...``). ``spans``: the text's maximal
    runs of ``leaks.RUN_CHARS`` (a superset of the token characters) at least
    :data:`_RUN_MIN` long, ``(start, end)`` ascending, as ``leaks.near_runs`` finds them
    for the generated rules: every run of token characters lies inside one, so only
    they are searched (the text is scanned for runs once, not twice)."""
    cls = _token_map(text)
    find = cls.find
    nspans = len(spans)
    nxt = 0  # the next span to search
    i = -1
    while i < 0 and nxt < nspans:
        i = find(_RUN_NEEDLE, *spans[nxt])
        nxt += 1
    if i < 0:
        return
    span_end = spans[nxt - 1][1]
    get = _PREFIX_INDEX.get
    glued = _GLUED_RE.rx.search
    body = _BODY_RE.rx.search
    while i >= 0:
        j = find(b" ", i + _RUN_MIN, span_end)
        if j < 0:
            j = span_end
        before = text[i - 1] if i else ""
        if before == "\\" and text[i] in "nrt":
            i += 1  # a JSON-escaped line break or tab (a literal \\n) before the token
        hit = None
        cands = get(text[i : i + 2])
        if cands is not None:
            hit = _match_prefix(text, i, j, cands)
        if hit is None and before in ("%", "\\"):
            # a token after a percent-escape (%3DAKIA..., a URL inside a URL) or a JSON
            # \u escape (\u0022AKIA...): the run starts with the escape's hex digits
            k = i + 2 if before == "%" else i + 5 if text[i] == "u" else i
            if k > i and all(c in _HEX for c in text[i + (before == "\\") : k]):
                cands = get(text[k : k + 2])
                if cands is not None:
                    hit = _match_prefix(text, k, j, cands)
        if hit is None:
            # a token glued to a word by "-" or "_" (h-ghp_..., backup_AKIA...), in a run
            # with a token body (16 letters and digits in a row, which snake_case names
            # lack): search for a separator followed by a prefix's first two characters
            if body(text, i, j) is not None:
                last = min(j - _RUN_MIN, i + 48)  # a glued word is short
                g = glued(text, i, last + 3)
                while g is not None and g.start() < last and hit is None:
                    p = g.start() + 1
                    hit = _match_prefix(text, p, j, _PREFIX_INDEX[text[p : p + 2]])
                    g = glued(text, p, last + 3)
        if hit is None and before and before in _JOINERS:
            # walk back one joined segment at a time (SG.<id>.<here>, ABSK<b64>/<here>),
            # trying each segment's start, at most _JOIN_BACK characters back
            k, lo = i - 1, max(0, i - _JOIN_BACK)
            while hit is None and k > lo:
                m = cls.rfind(b" ", lo, k) + 1 or lo  # the segment's start, in C
                if m == k:
                    break
                if m > 0 and text[m - 1] == "\\" and text[m] in "nrt":
                    m += 1
                cands = get(text[m : m + 2])
                if cands is not None:
                    hit = _match_prefix(text, m, j, cands)
                if hit is None:
                    seg = text[m:i]
                    for infix, prov in _SHAPED_JOINED:
                        if infix in seg:
                            sm = prov.regex.match(text, m)
                            if sm is not None and _token_value(sm.group()):
                                hit = (m, _token_end(text, sm.end(), j), prov.kind)
                                break
                if m > 0 and text[m - 1] in _JOINERS:
                    k = m - 1
                else:
                    break
        if hit is None:
            # infixes with a dot (.atlasv1., .acc) are tried by the look-back above; the
            # others (_mmk, -us) sit at the end of the run
            run = text[j - 6 : j]
            for infix, prov in _SHAPED_END:
                if infix in run:
                    tm = prov.regex.match(text, i)
                    if tm is not None and _token_value(tm.group()):
                        hit = (i, _token_end(text, tm.end(), j), prov.kind)
                        break
        if hit is not None:
            yield hit
            j = max(j, hit[1])
        # the next run: later in this span, else in the next span that ends after j
        i = find(_RUN_NEEDLE, j, span_end) if j < span_end else -1
        while i < 0 and nxt < nspans:
            span_start, span_end = spans[nxt]
            nxt += 1
            if span_end > j:
                i = find(_RUN_NEEDLE, span_start if span_start > j else j, span_end)


# ---------------------------------------------------------------------------
# the table

_AUTH_SCHEMES = (
    "bearer|basic|token|digest|bot|apikey|api-key|jwt|sso-key|negotiate|ntlm|key|aws4-hmac-sha256"
)
_SNAKE_RE = _Lazy(r"[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+")
_WORDS_SLASHED_RE = _Lazy(r"[A-Za-z][a-z]+(?:[/|,][A-Za-z][a-z]+)+")


def _auth_value(v: str) -> bool:
    """A header credential: random-looking, not a stand-in, not a variable
    (``auth_header``), not a list of schemes (``Bearer/Basic/Token``)."""
    return (
        not v.isdigit()
        and _not_placeholder(v)
        and v.lower() not in _PLACEHOLDER_WORDS
        and _mixed(v)
        and not _SNAKE_RE.fullmatch(v)
        and not _WORDS_SLASHED_RE.fullmatch(v)
    )


_AZURE_KEY = _anchored(
    ("accountkey=", "sharedaccesskey="),
    r"(?i:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
    check=_not_placeholder,
)
_AZURE_AD_RE = _Lazy(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])")


def _AZURE_AD(text: str) -> Iterator[tuple[int, int]]:
    """Microsoft Entra ID (Azure AD) client secrets: 3 characters, a digit, ``Q~``,
    31-34 more; found from each ``Q~`` (their ``.`` and ``~`` break the token runs
    the provider scan looks for). Each ``~`` is found with a one-character search of the
    ASCII lowercase copy (a memchr, much faster than a search for ``Q~``)."""
    low = _lower(text)
    i = low.find("~")
    while i >= 0:
        start = i - 5
        if start >= 0 and text[i - 1] == "Q" and _boundary(text, start, _TOKEN_SET):
            m = _AZURE_AD_RE.rx.match(text, start)
            if m is not None and _token_value(m.group()):
                yield m.span()
        i = low.find("~", i + 1)


_AZURE_SAS = _anchored(
    ("sig=",),
    r"sig=(?P<secret>[A-Za-z0-9%+/=]{20,})",
    check=_not_placeholder,
    not_after="".join(c for c in map(chr, range(33, 127)) if c not in "?&"),
)
_AUTH_HEADER = _anchored(
    ("authorization", "bearer"),
    r"(?i:(?:(?:proxy-)?authorization\\{0,3}[\"']?[ \t]*[:=][ \t]*\\{0,3}[\"']?[ \t]*"
    rf"(?:(?:{_AUTH_SCHEMES})[ \t]+)?)|bearer[ \t]+)"
    r"(?P<secret>[A-Za-z0-9._~+/=:-]{8,})",
    check=_auth_value,
    not_after=_ALNUM,
)


def _find_gcp_key(text: str) -> Iterator[tuple[int, int]]:
    rx = _GCP_KEY_RE.rx
    for m in rx.finditer(text):
        yield m.span("secret")


_GCP_KEY_RE = _Lazy(
    r"""private_key\\{0,3}["'][ \t]*:[ \t]*\\{0,3}["']"""
    r"""(?P<secret>-----BEGIN[^"']{0,20000}?)\\{0,3}["']"""
)


def _provider_rows() -> tuple[Detector, ...]:
    rows = []
    for kind, name, prefixes, source in _PROVIDERS:
        shown = ", ".join(prefixes)
        rows.append(
            Detector(
                kind,
                _Lazy(source),
                f"{name} tokens ({shown}).",
                _token_value,
                _RUN_CHARS,
                (),
                prefixes,
            )
        )
    for kind, name, infix, source in _SHAPED:
        rows.append(
            Detector(
                kind,
                _Lazy(source),
                f"{name} tokens (with {infix} inside).",
                _token_value,
                _RUN_CHARS,
            )
        )
    return tuple(rows)


def _url_kind(kind: str) -> SpanFinder:
    def find(text: str) -> Iterator[tuple[int, int]]:
        for s, e, k in _find_urls(text):
            if k == kind:
                yield s, e

    return find


def _flag_kind(kind: str) -> SpanFinder:
    def find(text: str) -> Iterator[tuple[int, int]]:
        for s, e, k in _find_flag_credentials(text, _lower(text)):
            if k == kind:
                yield s, e

    return find


DETECTORS: tuple[Detector, ...] = (
    Detector(
        "gcp-service-account-key",
        _GCP_KEY_RE,
        "The private_key field of a Google Cloud service-account JSON key file.",
        needles=("private_key",),
    ),
    Detector(
        "private-key",
        _find_pem,
        "PEM, OpenSSH and PGP private key blocks: complete, JSON-escaped (literal \\n),"
        " on one line, or truncated with no END line (redacted to the end of the base64).",
        needles=("private key",),
    ),
    *_provider_rows(),
    Detector(
        "aws-secret-key",
        lambda text: _find_aws_secret(text, None),
        "AWS secret access keys (40 chars) assigned to an aws_secret_access_key-like name"
        " or within 200 characters of an access key id.",
    ),
    Detector(
        "azure-storage-key",
        _AZURE_KEY,
        "Azure storage account keys and Service Bus keys in connection strings (AccountKey=...).",
    ),
    Detector(
        "azure-ad-client-secret",
        _AZURE_AD,
        "Microsoft Entra ID (Azure AD) client secrets: <3 chars><digit>Q~<31-34 chars>.",
    ),
    Detector(
        "azure-sas-token",
        _AZURE_SAS,
        "The signature of an Azure shared access signature URL (...&sig=...).",
    ),
    Detector(
        "slack-webhook",
        _url_kind("slack-webhook"),
        "Slack incoming-webhook and workflow URLs (host and path are the secret).",
    ),
    Detector(
        "teams-webhook",
        _url_kind("teams-webhook"),
        "Microsoft Teams incoming-webhook URLs (the path after /webhookb2/).",
    ),
    Detector(
        "discord-webhook",
        _url_kind("discord-webhook"),
        "Discord webhook URLs (the id and token after /api/webhooks/).",
    ),
    Detector(
        "telegram-bot-token",
        _url_kind("telegram-bot-token"),
        "Telegram bot tokens in api.telegram.org/bot<token> URLs.",
    ),
    Detector(
        "url-password",
        _url_kind("url-password"),
        "The password in scheme://user:password@host URLs (scheme, user and host stay).",
    ),
    Detector(
        "dsn-key",
        _url_kind("dsn-key"),
        "A key that is the whole user part of a URL, scheme://<key>@host, as in a Sentry"
        " DSN (16+ hex digits, or 20+ letters and digits; scheme, host and path stay).",
    ),
    Detector(
        "auth-header",
        _chain(_AUTH_HEADER, _flag_kind("auth-header")),
        "The credential of an Authorization or Proxy-Authorization: Bearer|Basic|Token ..."
        " header (also in curl -H and JSON headers), of a bare 'Bearer <token>', and the"
        " password of curl -u/--user user:password.",
    ),
    Detector(
        "cli-password",
        _flag_kind("cli-password"),
        "The password given as a short flag: sshpass -p, docker/podman/helm ... login -p,"
        " mysql/mariadb -p (glued to the flag), redis-cli -a.",
    ),
    Detector(
        "generic-secret",
        _find_assignments,
        'The value of NAME=value, NAME: value, "NAME": "value", --name value and YAML'
        " block values where NAME contains secret/token/password/passwd/pwd/apikey/api_key/"
        "private/credential (the name stays; counts, paths, URLs, placeholders and"
        " references in code are kept).",
    ),
)
_PRIO: dict[str, int] = {}
for _i, _d in enumerate(DETECTORS):
    _PRIO.setdefault(_d.kind, _i)
del _i, _d


_LEAKS: Any = None  # wiki_memory.capture.leaks, imported on first use (hook start-up)
_FORMATS: Any = None  # wiki_memory.capture.formats, likewise
_WORDS: Any = None  # keyscan.KeySet of both modules' whole-text keywords and cues
_SCAN: Any = None  # rulescan.RuleScan (the compiled pass), or None where it is absent
#: the secret-ish words the keyword rule and a few context rules start from (see
#: _K_WORDS_RE), each with the flag it sets (1 key, 2 secret, 4 private, 0 none), and the
#: password flags' cues (8: what _FLAG_CUE_RE finds, in any case): where the one-pass
#: automaton runs, they are found in the same pass as the keywords and the format cues
_SECRET_WORDS = {
    "token": 0,
    "key": 1,
    "secret": 2,
    "credential": 0,
    "pass": 0,
    "pwd": 0,
    "private": 4,
    **dict.fromkeys((" -p", " -a", " -u", "\t-p", "\t-a", "\t-u", "--user"), 8),
}
_FLAG_CUE = 8
_WORD_HITS: dict[int, int] = {}  # _WORDS' index of each secret-ish word or cue -> its flag
_GITLEAKS_PRIO = len(DETECTORS)  # after every rule of ours: on overlap our name wins


def _gitleaks() -> Any:
    """Import the generated rules and our structured-format rules (first call only)."""
    global _LEAKS, _FORMATS, _WORDS, _SCAN
    if _LEAKS is None:
        from wiki_memory.capture import formats, leaks, rulescan
        from wiki_memory.capture.keyscan import KeySet

        words = tuple(sorted({*leaks.WHOLE_KEYWORDS, *formats.CUES, *_SECRET_WORDS}))
        _WORDS = KeySet(words)
        _WORD_HITS.update((n, _SECRET_WORDS[w]) for n, w in enumerate(words) if w in _SECRET_WORDS)
        # the compiled pass: our labels start with a line break, which no rule id holds
        pats = [("\n:tokens", row[-1]) for row in (*_PROVIDERS, *_SHAPED)]
        pats += [*leaks.near_sources(), ("\n:discord", formats.DISCORD_SOURCE)]
        _LEAKS, _FORMATS, _SCAN = leaks, formats, rulescan.build(pats)
    return _LEAKS


def _scan_words(low: str, low_ascii: bytes | None) -> tuple[list[int], int, set[str] | None]:
    """Where the secret-ish words of :data:`_SECRET_WORDS` start in ``low`` (a lowercased
    text; unsorted, each occurrence once), their flags or-ed (1 key, 2 secret, 4
    private; and 8 when a password flag's cue may occur: then, and only then, the caller
    looks for :data:`_FLAG_CUE_RE`), and the set of :data:`_WORDS`' keywords that occur
    (``None`` when not looked for). ``low_ascii``: ``low``'s ASCII bytes (``?`` for any
    other character), when the keyword automaton is to run
    (:meth:`keyscan.KeySet.available`): the words come from its one pass with the
    generated rules' keywords and the format cues; else three regex scans find them (the
    hook's way), and flag 8 is set whatever the text. Both give the same starts: no two
    of the words overlap but at one start, where they differ in a later letter."""
    hits: list[int] = []
    hit = hits.append
    flags = 0
    if low_ascii is not None:
        occ = _WORDS.occurrences(low_ascii)
        kws = _WORDS.keywords
        words = _WORD_HITS
        for i, s, _ in occ:
            f = words.get(i)
            if f is not None:
                if f < _FLAG_CUE:
                    hit(s)
                flags |= f
        return hits, flags, {kws[i] for i, _, _ in occ}
    for m in _K_WORDS_RE.finditer(low):
        i = m.start()
        if low[i + 2] == "y":
            flags |= 1
            hit(i)
        else:
            hit(i - 2)  # token
    for m in _CRE_WORDS_RE.finditer(low):
        i = m.start()
        if low[i + 3] == "t":
            flags |= 2
            hit(i - 2)
        else:
            hit(i)  # credential
    for m in _P_WORDS_RE.finditer(low):
        i = m.start()
        hit(i)
        if m.end() - i == 7:
            flags |= 4
    return hits, flags | _FLAG_CUE, None


def _builtin_spans(text: str, path: str | None = None) -> list[tuple[int, int, int, str]]:
    """Every built-in finding ``(start, end, priority, kind)``: one compiled pass (or C
    scan) for provider tokens, then only the context detectors whose cue occurs in the text."""
    global _ASCII, _LOWERED
    found: list[tuple[int, int, int, str]] = []
    add = found.append
    prio = _PRIO
    aws_ids: list[tuple[int, int]] = []
    # the ASCII copy and its lowercase (see _ascii and _lower), made here once and left in
    # their one-entry caches for the detectors below: a function call per copy costs more
    # than the copy of a short text, and most texts are short
    plain = text.isascii()
    raw = text.encode("ascii") if plain else text.encode("ascii", "replace")
    low = text.lower() if plain else raw.lower().decode("ascii")
    _ASCII, _LOWERED = (text, raw), (text, low)
    leaks = _LEAKS or _gitleaks()
    near_runs = maybe = None
    if len(text) >= _RUN_MIN:
        # which rules that need a run of 20 token characters can match at all, where the
        # compiled pass is (rulescan); none, in most texts: no run is looked for. Else one
        # scan for long runs, shared with the generated rules (see leaks.near_runs)
        maybe = _SCAN.labels(text, raw) if _SCAN else None
        near_runs = leaks.near_runs(low, raw) if maybe is None or maybe else (b"", [])
        if near_runs[1] and (maybe is None or "\n:tokens" in maybe):
            for s, e, kind in _find_provider_tokens(text, near_runs[1]):
                add((s, e, prio[kind], kind))
                if kind == "aws-access-key":
                    aws_ids.append((s, e))
    if "://" in low:
        for s, e, kind in _find_urls(text):
            add((s, e, prio[kind], kind))
    # the secret-ish words (see _scan_words), shared by the detectors that start there;
    # every other detector is called only when its cue occurs (a call costs more than a
    # scan of a small text)
    hits, flags, present = _scan_words(low, raw.lower() if _WORDS.available(low) else None)
    key, secret, private = flags & 1, flags & 2, flags & 4
    if private:
        if "private key" in low:
            p = prio["private-key"]
            for s, e in _find_pem(text):
                add((s, e, p, "private-key"))
        if "private_key" in low:
            p = prio["gcp-service-account-key"]
            for s, e in _find_gcp_key(text):
                add((s, e, p, "gcp-service-account-key"))
    if aws_ids or secret:
        p = prio["aws-secret-key"]
        for s, e in _find_aws_secret(text, aws_ids):
            add((s, e, p, "aws-secret-key"))
    if key and "key=" in low:
        p = prio["azure-storage-key"]
        for s, e in _AZURE_KEY(text):
            add((s, e, p, "azure-storage-key"))
    if "~" in low:  # one memchr; "Q~" would be a slower two-character search
        p = prio["azure-ad-client-secret"]
        for s, e in _AZURE_AD(text):
            add((s, e, p, "azure-ad-client-secret"))
    if "sig=" in low:
        p = prio["azure-sas-token"]
        for s, e in _AZURE_SAS(text):
            add((s, e, p, "azure-sas-token"))
    if "authorization" in low or "bearer" in low:
        p = prio["auth-header"]
        for s, e in _AUTH_HEADER(text):
            add((s, e, p, "auth-header"))
    # -u, -p, -a: one scan for the three, where the one pass saw a cue (in any case)
    if flags & _FLAG_CUE and _FLAG_CUE_RE.search(text) is not None:
        for s, e, kind in _find_flag_credentials(text, low):
            add((s, e, prio[kind], kind))
    if hits:
        hits.sort()
        p = prio["generic-secret"]
        for s, e in _find_assignments(text, hits):
            add((s, e, p, "generic-secret"))
    # one pass for the keywords of both (where keyscan can, above; else each looks for its own)
    runs: list[tuple[int, int]] = []  # leaks' runs of secret characters, for Discord's rule
    for s, e, kind in leaks.find(text, low, path, raw, present, runs, near_runs, maybe):
        add((s, e, prio.get(kind, _GITLEAKS_PRIO), kind))
    for s, e, kind in _FORMATS.find(text, low, present, raw, runs):
        add((s, e, prio.get(kind, _GITLEAKS_PRIO), kind))
    return found


@lru_cache(maxsize=32)
def _extra_detectors(extra: tuple[tuple[str, str], ...]) -> tuple[Detector, ...]:
    """Compile settings' ``(kind, regex)`` pairs once (cached per distinct tuple)."""
    out = []
    for kind, pattern in extra:
        if not _KIND_RE.fullmatch(kind):
            raise ValueError(
                f"extra pattern kind {kind!r} must be 1-64 letters, digits, '_', '.', '-'"
            )
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"extra pattern {kind!r} is not a valid regex: {exc}") from exc
        out.append(Detector(kind, compiled, f"extra pattern from settings: {pattern}"))
    return tuple(out)


def _normalize_extra(extra_patterns: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    if extra_patterns.__class__ is tuple and not extra_patterns:
        return ()  # the default: no extra patterns (every redact_obj call)
    items = tuple(extra_patterns) if not isinstance(extra_patterns, (str, dict)) else None
    if items is None or not all(
        isinstance(it, (tuple, list)) and len(it) == 2 and all(isinstance(x, str) for x in it)
        for it in items
    ):
        raise ValueError("extra_patterns must be a sequence of (kind, regex) string pairs")
    return tuple((k, p) for k, p in items)


#: short texts in which no built-in detector found anything (dict keys, field values and
#: short values repeat across events): answered without a scan. Only texts with nothing
#: to redact are kept, so the set holds no secret; emptied when it reaches _CLEAN_SIZE.
_CLEAN: set[str] = set()
_CLEAN_MAX_LEN = 128
_CLEAN_SIZE = 4096


def redact_text(
    text: str, extra_patterns: Sequence[tuple[str, str]] = (), path: str | None = None
) -> tuple[str, list[Redaction]]:
    """Replace every secret in ``text`` by ``[REDACTED:<kind>]``.

    ``text``: any string (a prompt, a tool output, a file path, JSON text; JSON
    escapes such as a literal ``\\n`` inside a PEM key are understood).
    ``extra_patterns``: ``(kind, regex)`` pairs from settings; the regex's named
    group ``secret``, or else its whole match, is replaced by
    ``[REDACTED:<kind>]``. Built-in detectors win where spans overlap.
    ``path``: the file the text is from or for, when known: gitleaks' rules with a path
    condition (Kubernetes ``*.yaml``, ``nuget.config``, ...) run only then.

    Returns ``(redacted_text, redactions)``: ``redactions`` is sorted by
    ``start``, one :class:`Redaction` per placeholder, with offsets into the
    ORIGINAL ``text``. Overlapping findings are merged into one placeholder
    named after the most specific detector (table order). Idempotent:
    ``redact_text(redact_text(t)[0])`` finds nothing.

    Raises ``TypeError`` if ``text`` is not a ``str`` and ``ValueError`` if an
    extra pattern is not a ``(kind, regex)`` pair, its kind is not 1-64
    characters of ``[A-Za-z0-9_.-]``, or its regex does not compile.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact_text needs a str, not {type(text).__name__}")
    if len(text) < 8 and not extra_patterns:
        return text, []  # no name, separator and 8-character value fit
    short = len(text) <= _CLEAN_MAX_LEN and not extra_patterns and not path
    if short and text in _CLEAN:
        return text, []
    found = _builtin_spans(text, path)
    if extra_patterns:
        base = len(DETECTORS) + 1
        for n, det in enumerate(_extra_detectors(_normalize_extra(extra_patterns))):
            for s, e in det.spans(text):
                found.append((s, e, base + n, det.kind))
    if not found:
        if short:
            if len(_CLEAN) >= _CLEAN_SIZE:
                _CLEAN.clear()
            _CLEAN.add(text)
        return text, []
    if "[REDACTED:" in text:
        # Existing placeholders are never redacted again (idempotence).
        held = [m.span() for m in _PLACEHOLDER_RE.finditer(text)]
        found = [f for f in found if not any(f[0] < he and hs < f[1] for hs, he in held)]
        if not found:
            return text, []
    found.sort()
    merged: list[list[Any]] = []
    for s, e, prio, kind in found:
        if merged and s < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], e)
            if prio < last[2]:
                last[2], last[3] = prio, kind
        else:
            merged.append([s, e, prio, kind])
    parts: list[str] = []
    redactions: list[Redaction] = []
    pos = 0
    for s, e, _prio, kind in merged:
        parts.append(text[pos:s])
        parts.append(PLACEHOLDER.format(kind=kind))
        redactions.append(Redaction(kind, s, e))
        pos = e
    parts.append(text[pos:])
    return "".join(parts), redactions


_VALUE_KEYS = ("value", "Value")
_NAME_KEYS = ("name", "Name", "key", "Key")


def _name_hint(key: str) -> bool:
    """A dict key that names a secret: an identifier (not a sentence) that secret_name accepts."""
    return len(key) <= 80 and all(c in _NAME_CHARS for c in key) and secret_name(key)


#: :func:`_name_hint` of keys that hold nothing to redact (shorter than 8 characters, or
#: in :data:`_CLEAN`): payloads repeat the same few keys; emptied at _CLEAN_SIZE
_HINTS: dict[str, bool] = {}


def _key_hint(key: str) -> bool:
    """:func:`_name_hint`, remembered for keys that hold no secret."""
    hint = _HINTS.get(key)
    if hint is None:
        hint = _name_hint(key)
        if len(key) < 8 or key in _CLEAN:
            if len(_HINTS) >= _CLEAN_SIZE:
                _HINTS.clear()
            _HINTS[key] = hint
    return hint


def redact_obj(obj: Any, extra_patterns: Sequence[tuple[str, str]] = ()) -> tuple[Any, int]:
    """Return a sanitized deep copy of a JSON value and the number of redactions.

    ``obj``: a JSON-like value: dicts, lists/tuples, strings, numbers, booleans,
    ``None`` (other objects are returned as they are). Every string is passed
    through :func:`redact_text`, dict KEYS included. In addition:

    - a string under a dict key that names a secret (``{"password": "..."}``,
      also ``{"name": "DB_PASSWORD", "value": "..."}``) is replaced whole by
      ``[REDACTED:generic-secret]`` when it looks like a secret;
    - a string holding JSON text is also parsed and walked, so secrets in
      JSON-escaped content are found even in encodings the text rules miss (the
      string is then re-serialized with ``json.dumps``).

    Two keys that redact to the same placeholder are kept apart by a ``#2``,
    ``#3``... suffix. Lists stay lists and tuples stay tuples; the input is not
    modified. The count is the number of placeholders written. Idempotent.
    Raises ``ValueError`` for bad ``extra_patterns`` (see :func:`redact_text`).
    """
    extra = _normalize_extra(extra_patterns)
    if extra:
        _extra_detectors(extra)  # validate once, up front
    count = 0
    # redact_text's own quick answers, given here without its call (most strings of a
    # payload are keys and short values): a text shorter than 8 characters, or a short
    # one found clean before, has nothing to redact (with no extra patterns)
    quick = not extra
    clean = _CLEAN
    short_max = _CLEAN_MAX_LEN
    hints = _HINTS

    def walk_str(s: str, hint: str | None) -> str:
        nonlocal count
        n = len(s)
        if quick and (n < 8 or (n <= short_max and s in clean)):
            red = s
        else:
            red, found = redact_text(s, extra)
            count += len(found)
        if hint is not None:
            named = hints.get(hint)
            if named is None:
                named = _key_hint(hint)
            if named and "[REDACTED:" not in red:
                if _plausible_value(red, context=QUOTED, numeric_ok=_numeric_ok(hint)):
                    count += 1
                    return PLACEHOLDER.format(kind="generic-secret")
        head = red[:1]
        if head.isspace():
            head = red.lstrip()[:1]
        if (head == "{" or head == "[") and len(red) <= 8_000_000:
            try:
                parsed = json.loads(red)
            except (ValueError, RecursionError):
                return red
            if isinstance(parsed, (dict, list)):
                sub, k = redact_obj(parsed, extra)
                if k:
                    count += k
                    indent = 2 if "\n" in red.strip() else None
                    return json.dumps(sub, ensure_ascii=False, indent=indent)
        return red

    def walk(o: Any, hint: str | None) -> Any:
        cls = o.__class__
        if cls is str:
            return walk_str(o, hint)
        if cls is dict or (cls is not list and isinstance(o, dict)):
            pair_hint = None
            for nk in _NAME_KEYS:
                nv = o.get(nk)
                if isinstance(nv, str) and _name_hint(nv):
                    pair_hint = nv
                    break
            new: dict[Any, Any] = {}
            for k, v in o.items():
                if k.__class__ is str:
                    key = walk_str(k, None)
                    child_hint = k
                elif isinstance(k, str):
                    key = walk_str(k, None)
                    child_hint = k
                else:
                    key, child_hint = k, None
                if key in new:
                    i = 2
                    while f"{key}#{i}" in new:
                        i += 1
                    key = f"{key}#{i}"
                if pair_hint is not None and k in _VALUE_KEYS:
                    child_hint = pair_hint
                new[key] = walk_str(v, child_hint) if v.__class__ is str else walk(v, child_hint)
            return new
        if cls is list:
            return [walk_str(x, hint) if x.__class__ is str else walk(x, hint) for x in o]
        if isinstance(o, str):
            return walk_str(o, hint)
        if isinstance(o, list):
            return [walk(x, hint) for x in o]
        if isinstance(o, tuple):
            return tuple(walk(x, hint) for x in o)
        return o

    return walk(obj, None), count
