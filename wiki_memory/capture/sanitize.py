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
from dataclasses import dataclass
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~2.5 ms to import; the hook only needs it for mypy
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    SpanFinder = Callable[[str], Iterator[tuple[int, int]]]

_MAXPOS = 2**63 - 1

__all__ = ["DETECTORS", "Detector", "Redaction", "redact_obj", "redact_text"]

PLACEHOLDER = "[REDACTED:{kind}]"


class _Lazy:
    """A regex compiled on first use, so that importing this module stays cheap.

    Compiling the ~50 regexes of this module costs ~10 ms, more than the rest of
    the import; a hook that sees no ``ghp_`` never compiles the GitHub pattern.
    ``rx`` is the compiled ``re.Pattern``; the usual methods delegate to it.
    """

    __slots__ = ("source", "flags", "_rx")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._rx: re.Pattern[str] | None = None

    @property
    def rx(self) -> re.Pattern[str]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.source, self.flags)
        return rx

    def match(self, string: str, pos: int = 0, endpos: int = _MAXPOS) -> re.Match[str] | None:
        return self.rx.match(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = _MAXPOS) -> re.Match[str] | None:
        return self.rx.search(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = _MAXPOS) -> re.Match[str] | None:
        return self.rx.fullmatch(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = _MAXPOS) -> Iterator[re.Match[str]]:
        return self.rx.finditer(string, pos, endpos)

    def findall(self, string: str) -> list[Any]:
        return self.rx.findall(string)

    def __repr__(self) -> str:
        return f"_Lazy({self.source!r})"


# A placeholder already in the text (ours, maybe with the "#2" suffix that
# redact_obj adds to keep two redacted dict keys apart).
_PLACEHOLDER_RE = _Lazy(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\](?:#\d+)?")
_KIND_RE = _Lazy(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Redaction:
    """One replaced secret.

    ``kind`` is the detector kind shown in the placeholder (``"github-token"``);
    ``start`` and ``end`` are character offsets (Python ``str`` indices, end
    exclusive) of the replaced text in the ORIGINAL input, so
    ``text[start:end]`` is the secret that was removed.
    """

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
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
    """

    kind: str
    pattern: re.Pattern[str] | _Lazy | SpanFinder
    description: str
    check: Callable[[str], bool] | None = None
    not_after: str = ""
    needles: tuple[str, ...] = ()

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


def _boundary(text: str, start: int, not_after: str) -> bool:
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


def _lower(text: str) -> str:
    """``text.lower()`` with offsets aligned to ``text`` (one-entry cache).

    Searching a lowered copy with ``str.find`` is ~10x faster than a regex with
    re.IGNORECASE. The one code point whose lowercase is longer (U+0130, "İ")
    is lowered to a plain "i" so that offsets still match.
    """
    global _LOWERED
    cached, low = _LOWERED
    if cached is text:
        return low
    low = text.replace("\u0130", "i").lower() if "\u0130" in text else text.lower()
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
        low = _lower(text)
        grouped = "secret" in regex.rx.groupindex
        starts = sorted({i for nd in needles for i in _find_all(low, nd)})
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
QUOTED, ENV, CODE = "quoted", "env", "code"


def _code_or_words(v: str, context: str) -> bool:
    """A value that reads as code or words rather than random characters.

    ``context``: ``"quoted"`` (a string literal or a JSON string), ``"env"``
    (unquoted after an UPPER_SNAKE name: a .env line, a compose file) or
    ``"code"`` (any other unquoted value: YAML, source code, prose). Rejected:

    - a dotted name, unless quoted (``token = settings.api_key``);
    - lowercase words joined by ``-``/``_``/``.``, unless env
      (``"role-secret-key"``, ``random-looking``);
    - a camelCase/CamelCase identifier with no digits made of word-like humps
      (``"waitForTaskToken"``, ``SecretStr``, ``RSAPrivateKey``); random mixed
      case (``eCvSoSZMWUyURvBABX``) has one-letter humps and stays;
    - Title-Case-Words, unless env (``"Access-Control-Allow-Credentials"``);
    - one lowercase word, in code only (``credential_helper = osxkeychain``);
    - ``Name=default`` in code (a parameter with its default).
    """
    ident = _IDENT_CHAIN_RE.fullmatch(v) is not None
    if ident and "." in v and context != QUOTED:
        return True
    if ident and "." not in v and not any(c.isdigit() for c in v):
        humps = _NAME_WORD_RE.findall(v)
        if all(len(h) >= 2 for h in humps) and len(v) >= 3 * len(humps):
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
    if len(v) < 8:
        return False
    if v.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER_VALUE_RE.search(v):
        return False
    if _NUMERIC_RE.fullmatch(v):  # a count, a size, a float, an IP or a version: not a secret
        return numeric_ok and v.isdigit()
    if v[0] in "/~" or v.startswith(("./", "../")) or (v[1:3] in (":\\", ":/") and v[0].isalpha()):
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


def secret_name(name: str) -> bool:
    """Whether an identifier names a secret (``DB_PASSWORD``, ``apiKey``, ``x-api-key``).

    True when the name contains secret/token/password/passwd/pwd/apikey/api_key/
    private/credential (any case; also passphrase, a last word ``pass``, and
    access/auth/signing/encryption/master/client key) in its last dotted part,
    none of its words marks it as a setting about secrets (``max_tokens``,
    ``token_count``, ``password_reset_url``, ``NextToken``), and it is not the id
    of a key (``AccessKeyId``; ``secret_id`` stays a secret).
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


def _find_assignments(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the values of ``NAME=value``, ``NAME: value``, ``"NAME": "value"``, ``--name value``."""
    n = len(text)
    low = _lower(text)
    hits = sorted({i for kw in _NAME_KW_LITERALS for i in _find_all(low, kw)})
    last_name_end = -1
    for s in hits:
        if s < last_name_end:
            continue
        e = s
        while s > 0 and text[s - 1] in _NAME_CHARS:
            s -= 1
        while e < n and text[e] in _NAME_CHARS:
            e += 1
        if s >= 2 and text[s - 1] == "\\" and text[s] in "nrt":
            s += 1  # a JSON-escaped line break (\nDB_PASSWORD=...) is not part of the name
        last_name_end = e
        if s > 0 and text[s - 1] == ":":
            continue  # a namespaced type (AWS::IAM::AccessKey) or ARN part (:secret:), not a setting
        if text[max(0, s - 3) : s] == "://":
            continue  # https://x-access-token:...@host: the url-password detector's
        name = text[s:e].strip(".")
        if not secret_name(name):
            continue
        am = _ASSIGN_RE.match(text, e)
        if am is None and name.startswith("-"):
            am = _FLAG_VALUE_RE.match(text, e)
        if am is None:
            continue
        literal = am.group("qv") is not None
        grp = "qv" if literal else "uv"
        vs, ve = am.span(grp)
        value = text[vs:ve]
        if not literal:
            if ve < n and text[ve] in "([":
                continue  # a call or an index: password = getpass(...), token = d["t"]
            if value.endswith((".", ",", ":")):  # sentence punctuation after a value
                value = value.rstrip(".,:")
                ve = vs + len(value)
        context = QUOTED if literal else ENV if name.lstrip("-").isupper() else CODE
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


def _find_aws_secret(text: str) -> Iterator[tuple[int, int]]:
    """AWS secret access keys assigned to an aws_secret_access_key-like name, or
    within 200 characters of an access key id."""
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
    for k in _AWS_KEY_ID_RE.finditer(text):
        if not _boundary(text, k.start(), _ALNUM):
            continue
        lo, hi = max(0, k.start() - 200), min(len(text), k.end() + 200)
        pos = lo
        while (m := _AWS_SECRET_BARE_RE.search(text, pos, hi)) is not None:
            if not _boundary(text, m.start(), _ALNUM + "/+="):
                pos = m.start() + 1  # inside a longer run: move on one character
                continue
            pos = m.end()
            if _aws_secret_shape(m.group()):
                yield m.span()


# ---------------------------------------------------------------------------
# credentials in URLs: scheme://user:password@host -> keep scheme, user, host

_URL_AUTH_RE = _Lazy(
    r"""(?P<user>[^\s:/?#@'"\\<>\[\]]*):(?P<secret>[^\s/?#'"\\<>]+)@(?P<host>[A-Za-z0-9\[][A-Za-z0-9.\-_:\]%]*)"""
)
_URL_PW_PLACEHOLDERS = frozenset(
    "pass password passwd pw pwd secret xxx xxxx changeme token apikey ***".split()
)


def _find_url_password(text: str) -> Iterator[tuple[int, int]]:
    """The password part of ``scheme://user:password@host`` (the rest stays)."""
    pos = 0
    while True:
        i = text.find("://", pos)
        if i < 0:
            return
        pos = i + 3
        if i == 0 or not text[i - 1].isalnum():
            continue
        m = _URL_AUTH_RE.match(text, pos)
        if m is None:
            continue
        pw = m.group("secret")
        if len(pw) < 3 or pw.lower() in _URL_PW_PLACEHOLDERS or _PLACEHOLDER_VALUE_RE.search(pw):
            continue
        pos = m.end()
        yield m.span("secret")


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


DETECTORS: tuple[Detector, ...] = (
    Detector(
        "gcp-service-account-key",
        _Lazy(
            r"""private_key\\{0,3}["'][ \t]*:[ \t]*\\{0,3}["']"""
            r"""(?P<secret>-----BEGIN[^"']{0,20000}?)\\{0,3}["']"""
        ),
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
    Detector(
        "aws-access-key",
        _AWS_KEY_ID_RE,
        "AWS access key ids: AKIA (long-term), ASIA (temporary), ABIA, ACCA + 16 chars.",
        not_after=_ALNUM,
        needles=_AWS_NEEDLES,
    ),
    Detector(
        "aws-secret-key",
        _find_aws_secret,
        "AWS secret access keys (40 chars) assigned to an aws_secret_access_key-like name"
        " or within 200 characters of an access key id.",
        needles=("secret", *_AWS_NEEDLES),
    ),
    Detector(
        "azure-storage-key",
        _anchored(
            ("accountkey=", "sharedaccesskey="),
            r"(?i:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
            check=_not_placeholder,
        ),
        "Azure storage account keys and Service Bus keys in connection strings (AccountKey=...).",
    ),
    Detector(
        "azure-sas-token",
        _anchored(
            ("sig=",),
            r"sig=(?P<secret>[A-Za-z0-9%+/=]{20,})",
            check=_not_placeholder,
            not_after="".join(c for c in map(chr, range(33, 127)) if c not in "?&"),
        ),
        "The signature of an Azure shared access signature URL (...&sig=...).",
    ),
    Detector(
        "github-token",
        _Lazy(r"gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}"),
        "GitHub tokens: classic and OAuth/user/server/refresh (ghp_ gho_ ghu_ ghs_ ghr_)"
        " and fine-grained (github_pat_).",
        _token_value,
        _ALNUM,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Detector(
        "gitlab-token",
        _Lazy(
            r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent)-[A-Za-z0-9_-]{20,}"
            r"|GR1348941[A-Za-z0-9_-]{20,}"
        ),
        "GitLab personal/deploy/runner/trigger tokens (glpat-, gldt-, glrt-, glptt-, ...).",
        _token_value,
        _ALNUM,
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-")
        + ("glagent-", "gr1348941"),
    ),
    Detector(
        "slack-webhook",
        _Lazy(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{8,}"),
        "Slack incoming-webhook and workflow URLs (the whole URL is the secret).",
        needles=("hooks.slack.com/",),
    ),
    Detector(
        "slack-token",
        _Lazy(r"xox[abposer]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"),
        "Slack bot/user/app tokens (xoxb-, xoxp-, xoxa-, xoxe-, xoxs-, xapp-).",
        _token_value,
        _ALNUM,
        ("xox", "xapp-"),
    ),
    Detector(
        "stripe-key",
        _chain(
            _anchored(
                ("k_live_", "k_test_"),
                r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
                check=_token_value,
                back=1,
                not_after=_ALNUM,
            ),
            _anchored(
                ("whsec_",),
                r"whsec_[A-Za-z0-9+/=]{16,}",
                check=_token_value,
                not_after=_ALNUM,
            ),
        ),
        "Stripe secret and restricted keys (sk_live_, sk_test_, rk_live_, rk_test_) and"
        " webhook signing secrets (whsec_). Publishable pk_ keys are public and kept.",
    ),
    Detector(
        "anthropic-key",
        _Lazy(r"sk-ant-[A-Za-z0-9_-]{16,}"),
        "Anthropic API, admin and OAuth keys (sk-ant-api03-..., sk-ant-admin01-...).",
        _token_value,
        _ALNUM + "_-",
        ("sk-ant-",),
    ),
    Detector(
        "openai-key",
        _Lazy(r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
        "OpenAI API keys (sk-..., sk-proj-..., sk-svcacct-..., sk-admin-...).",
        _token_value,
        _ALNUM + "_-",
        ("sk-",),
    ),
    Detector(
        "npm-token",
        _Lazy(r"npm_[A-Za-z0-9]{30,}"),
        "npm access tokens (npm_ + 36 chars).",
        _token_value,
        _ALNUM,
        ("npm_",),
    ),
    Detector(
        "pypi-token",
        _Lazy(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{16,}"),
        "PyPI and TestPyPI API tokens (pypi-AgEIcHlwaS5vcmc...).",
        needles=("pypi-ag",),
    ),
    Detector(
        "google-api-key",
        _Lazy(r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        "Google API keys (AIza + 35 chars).",
        not_after=_ALNUM,
        needles=("aiza",),
    ),
    Detector(
        "huggingface-token",
        _Lazy(r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
        "Hugging Face access tokens (hf_ + 34 chars).",
        _token_value,
        _ALNUM + "_",
        ("hf_",),
    ),
    Detector(
        "wiki-memory-offer-code",
        _Lazy(r"wmo_[A-Za-z0-9]{20,}"),
        "wiki-memory's own handoff offer codes (wmo_ + 26 chars): single use, but a claim"
        " ticket all the same, so no page, spool file or log keeps one.",
        not_after=_ALNUM + "_",
        needles=("wmo_",),
    ),
    Detector(
        "jwt",
        _Lazy(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        "JSON Web Tokens (eyJ<header>.eyJ<payload>.<signature>).",
        not_after=_ALNUM + "_-",
        needles=("eyj",),
    ),
    Detector(
        "url-password",
        _find_url_password,
        "The password in scheme://user:password@host URLs (scheme, user and host stay).",
        needles=("://",),
    ),
    Detector(
        "auth-header",
        _chain(
            _anchored(
                ("authorization", "bearer"),
                r"(?i:(?:authorization\\{0,3}[\"']?[ \t]*[:=][ \t]*\\{0,3}[\"']?[ \t]*"
                rf"(?:(?:{_AUTH_SCHEMES})[ \t]+)?)|bearer[ \t]+)"
                r"(?P<secret>[A-Za-z0-9._~+/=:-]{8,})",
                check=_auth_value,
                not_after=_ALNUM,
            ),
            _anchored(
                ("-u ", "--user"),
                r"(?:-u|--user)[ \t=]+[\"']?[^\s:\"'$]+:(?P<secret>[^\s\"']{3,})",
                check=_auth_value,
                not_after=_ALNUM + "-",
            ),
        ),
        "The credential of an Authorization: Bearer|Basic|Token ... header (also in"
        " curl -H and JSON headers), of a bare 'Bearer <token>', and the password of"
        " curl -u/--user user:password.",
    ),
    Detector(
        "generic-secret",
        _find_assignments,
        'The value of NAME=value, NAME: value, "NAME": "value" and --name value where'
        " NAME contains secret/token/password/passwd/pwd/apikey/api_key/private/credential"
        " (the name stays; counts, paths, URLs and placeholders are kept).",
    ),
)


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
    items = tuple(extra_patterns) if not isinstance(extra_patterns, (str, dict)) else None
    if items is None or not all(
        isinstance(it, (tuple, list)) and len(it) == 2 and all(isinstance(x, str) for x in it)
        for it in items
    ):
        raise ValueError("extra_patterns must be a sequence of (kind, regex) string pairs")
    return tuple((k, p) for k, p in items)


def redact_text(
    text: str, extra_patterns: Sequence[tuple[str, str]] = ()
) -> tuple[str, list[Redaction]]:
    """Replace every secret in ``text`` by ``[REDACTED:<kind>]``.

    ``text``: any string (a prompt, a tool output, a file path, JSON text; JSON
    escapes such as a literal ``\\n`` inside a PEM key are understood).
    ``extra_patterns``: ``(kind, regex)`` pairs from settings; the regex's named
    group ``secret``, or else its whole match, is replaced by
    ``[REDACTED:<kind>]``. Built-in detectors win where spans overlap.

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
    detectors = DETECTORS
    if extra_patterns:
        detectors = DETECTORS + _extra_detectors(_normalize_extra(extra_patterns))
    if not text:
        return text, []
    # Existing placeholders are never redacted again (idempotence).
    held = [m.span() for m in _PLACEHOLDER_RE.finditer(text)] if "[REDACTED:" in text else []
    found: list[tuple[int, int, int, str]] = []
    for prio, det in enumerate(detectors):
        for s, e in det.spans(text):
            if held and any(s < he and hs < e for hs, he in held):
                continue
            found.append((s, e, prio, det.kind))
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

    def walk_str(s: str, hint: str | None) -> str:
        nonlocal count
        red, found = redact_text(s, extra)
        count += len(found)
        if hint is not None and "[REDACTED:" not in red and _name_hint(hint):
            if _plausible_value(red, context=QUOTED, numeric_ok=_numeric_ok(hint)):
                count += 1
                return PLACEHOLDER.format(kind="generic-secret")
        head = red.lstrip()[:1]
        if head in ("{", "[") and len(red) <= 8_000_000:
            try:
                parsed = json.loads(red)
            except (ValueError, RecursionError):
                return red
            if isinstance(parsed, (dict, list)):
                sub, n = redact_obj(parsed, extra)
                if n:
                    count += n
                    indent = 2 if "\n" in red.strip() else None
                    return json.dumps(sub, ensure_ascii=False, indent=indent)
        return red

    def walk(o: Any, hint: str | None) -> Any:
        if isinstance(o, str):
            return walk_str(o, hint)
        if isinstance(o, dict):
            pair_hint = None
            for nk in _NAME_KEYS:
                nv = o.get(nk)
                if isinstance(nv, str) and _name_hint(nv):
                    pair_hint = nv
                    break
            new: dict[Any, Any] = {}
            for k, v in o.items():
                key = walk_str(k, None) if isinstance(k, str) else k
                if key in new:
                    i = 2
                    while f"{key}#{i}" in new:
                        i += 1
                    key = f"{key}#{i}"
                child_hint = k if isinstance(k, str) else None
                if pair_hint is not None and k in _VALUE_KEYS:
                    child_hint = pair_hint
                new[key] = walk(v, child_hint)
            return new
        if isinstance(o, list):
            return [walk(x, hint) for x in o]
        if isinstance(o, tuple):
            return tuple(walk(x, hint) for x in o)
        return o

    return walk(obj, None), count
