"""Contradictions between two notes, found without a language model (docs/knowledge.md,
"Contradictions").

Two notes contradict when they are about the same subject (a shared title, alias or
``subject:``), say it in the same frame (the words left once the subject's words and the
values are taken out overlap), and give incompatible values of one kind:

- numbers with a unit (ports, counts, sizes, durations), compared after converting units
  (``10 MB`` = ``10,000 KB``, ``30 minutes`` = ``1800 seconds``); a range that holds the
  other side's value (``4 to 16 threads``) is compatible;
- versions of one named thing (``PostgreSQL 15`` / ``16``); a longer version that
  extends the other (``1.29`` / ``1.29.4``) and a range that holds it are compatible;
- dates, times (converted to UTC where a zone is named, so ``02:00 UTC`` = ``03:00
  CET``) and weekdays; a time inside the other side's window is compatible;
- paths (``./db/migrations`` = ``db/migrations/``; a path that extends the other, such
  as ``config/.env.example`` beside ``config/.env``, is a sibling, not a replacement);
- names of tools or products of one kind (databases, queues, CI systems, ...);
- negation: one side negates what the other states (``not``, ``never``, ``no
  longer``), the other words being the same.

A side that gives the other side's value too (``moved to 6543; 5432 is free``) is not
flagged: precision comes first, since a flag that is usually wrong teaches the agent to
ignore flags. A pair one of whose pages supersedes the other, or that a person marked
``compatible_with``, is never flagged (the caller checks both).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import Stemmer

__all__ = ["Flag", "Note", "contradiction", "subject_names"]

_STEM = Stemmer.Stemmer("english")

_STOP = frozenset(
    """a an the is are was were be been being to of in on at for from by with and or as it
    its this that these those we our you your they their there here now also only any
    more than then so but if into via per each every all some has have had do does did
    will would can could should may might must just still since after before up out
    about over under again once new old same other which who what when where how""".split()
)
_NEGATIONS = frozenset({"not", "never", "no", "n't", "cannot", "nor"})
_NOW_ON = re.compile(r"\b(from now on|no longer|any ?more|not any more)\b", re.I)

#: product names by kind: two different names of one kind in the same frame disagree
_PRODUCTS: dict[str, tuple[str, ...]] = {
    "database": ("postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb",
                 "oracle", "sql server", "cockroachdb", "dynamodb", "cassandra"),
    "queue": ("rabbitmq", "kafka", "sqs", "nats", "redis streams", "activemq", "pulsar"),
    "ci": ("github actions", "gitlab ci", "jenkins", "circleci", "travis", "buildkite",
           "drone", "teamcity", "azure pipelines"),
    "js_packages": ("npm", "pnpm", "yarn", "bun"),
    "py_packages": ("pip", "poetry", "uv", "pipenv", "conda", "pdm"),
    "errors": ("sentry", "rollbar", "bugsnag", "honeybadger", "airbrake"),
    "search": ("elasticsearch", "opensearch", "solr", "meilisearch", "typesense", "algolia"),
    "storage": ("s3", "gcs", "azure blob", "minio", "r2"),
    "cloud": ("aws", "gcp", "azure", "hetzner", "digitalocean"),
    "chat": ("slack", "discord", "teams", "mattermost"),
    "orchestrator": ("kubernetes", "nomad", "docker swarm", "ecs"),
}  # fmt: skip
_PRODUCT_RE = re.compile(
    r"(?<![\w.-])("
    + "|".join(sorted((re.escape(n) for v in _PRODUCTS.values() for n in v), key=len)[::-1])
    + r")(?![\w-])",
    re.I,
)
_KIND_OF = {n: k for k, v in _PRODUCTS.items() for n in v}
_SAME = {"postgres": "postgresql"}

_UNITS: dict[str, tuple[str, float]] = {
    "b": ("bytes", 1), "byte": ("bytes", 1), "bytes": ("bytes", 1),
    "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "kib": ("bytes", 1024), "mib": ("bytes", 1024**2), "gib": ("bytes", 1024**3),
    "ms": ("seconds", 1e-3), "s": ("seconds", 1), "sec": ("seconds", 1),
    "second": ("seconds", 1), "seconds": ("seconds", 1), "min": ("seconds", 60),
    "minute": ("seconds", 60), "minutes": ("seconds", 60), "h": ("seconds", 3600),
    "hour": ("seconds", 3600), "hours": ("seconds", 3600), "day": ("seconds", 86400),
    "days": ("seconds", 86400), "%": ("percent", 1), "percent": ("percent", 1),
}  # fmt: skip
_ZONES = {"utc": 0, "gmt": 0, "z": 0, "cet": 60, "cest": 120, "eet": 120, "bst": 60,
          "est": -300, "edt": -240, "cst": -360, "cdt": -300, "pst": -480, "pdt": -420,
          "ist": 330, "jst": 540}  # fmt: skip
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_RE = re.compile(
    r"\b(mon|tue|wed|thu|fri|sat|sun)(day|days|s|\.)?(?=\b)|\b(tues|wednes|thurs|satur)days?\b",
    re.I,
)

_NUM = r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?"
_PORT_RE = re.compile(r"(?:\bport\s*:?\s*|(?<![\w/.]):)(\d{2,5})\b", re.I)
_RANGE_RE = re.compile(rf"({_NUM})\s*(?:to|through|-|–|and)\s*({_NUM})\s*([a-zA-Z%]+)?", re.I)
_QTY_RE = re.compile(rf"(?<![\w.:/-])({_NUM})\s*([a-zA-Z%]+)\b", re.I)
_VERSION_RE = re.compile(
    r"(?<![\w.])(?:([A-Za-z][\w+-]*?)[ -]v?|v)(\d+(?:\.\d+){0,3})(?![\w.]*\d)(?:\s*([^\W\d_]+))?"
)
_BARE_VERSION_RE = re.compile(r"(?<![\w.:/-])(\d+\.\d+(?:\.\d+){0,2})(?![\w.]*\d)(?!\s*[a-zA-Z%])")
_VGLUED_RE = re.compile(r"(?<![\w.])([a-z]+)(\d+(?:\.\d+){1,3})\b")
_VRANGE_RE = re.compile(r">=?\s*(\d+(?:\.\d+)*)\s*,?\s*<=?\s*(\d+(?:\.\d+)*)")
_DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_TIME_RE = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b(?:\s*([A-Za-z]{1,4})\b)?")
_PATH_RE = re.compile(r"(?<![\w:])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]*|\.[\w-]+(?:\.[\w-]+)*)")
_WORD_RE = re.compile(r"[^\W\d_][\w'-]*", re.U)


@dataclass(frozen=True)
class Note:
    """One side of a pair: its ``title``, other ``names`` (aliases, ``subject:``) and
    ``text`` (the body; frontmatter off)."""

    title: str
    text: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Flag:
    """Why two notes contradict: ``kind`` (``numbers``, ``versions``, ``dates``,
    ``paths``, ``products``, ``negation``), the two values as written (``a``, ``b``; for
    a negation, the sentences) and the sentence of each note that holds its value
    (``a_says``, ``b_says``)."""

    kind: str
    a: str
    b: str
    a_says: str = ""
    b_says: str = ""


def _fold(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", unicodedata.normalize("NFKC", name).casefold()).split())


def subject_names(note: Note) -> set[str]:
    """The names a note is about, folded: its title and its other names."""
    return {f for f in (_fold(n) for n in (note.title, *note.names)) if f}


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _quantities(text: str) -> dict[str, list[tuple[float, float, str]]]:
    """Per unit kind, ``(low, high, as written)`` for each number with a unit, ranges
    and ports included (a port is its own kind)."""
    out: dict[str, list[tuple[float, float, str]]] = {}
    for m in _PORT_RE.finditer(text):
        v = float(m.group(1))
        out.setdefault("port", []).append((v, v, m.group(0).strip()))
    taken: list[tuple[int, int]] = []
    for m in _RANGE_RE.finditer(text):
        unit = (m.group(3) or "").lower()
        kind, scale = _unit(unit, text[m.end() :])
        if kind is None:
            continue
        lo, hi = sorted((_num(m.group(1)) * scale, _num(m.group(2)) * scale))
        out.setdefault(kind, []).append((lo, hi, m.group(0).strip()))
        taken.append(m.span())
    for m in _QTY_RE.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        kind, scale = _unit(m.group(2).lower(), text[m.end() :])
        if kind is None:
            continue
        v = _num(m.group(1)) * scale
        out.setdefault(kind, []).append((v, v, m.group(0).strip()))
    return out


def _unit(unit: str, after: str) -> tuple[str | None, float]:
    if unit in _UNITS:
        kind, scale = _UNITS[unit]
        return kind, scale
    if unit in ("to", "through", "and", "is", "are", "was", "of", "or", "in", "at", "on"):
        return None, 1
    if not unit.isalpha() or len(unit) < 3:
        return None, 1
    stem = _STEM.stemWord(unit)
    return f"count:{stem}", 1


def _versions(text: str, subject: str) -> dict[str, list[tuple[str, str]]]:
    """Per named thing, ``(version, as written)``; a bare version is the subject's."""
    out: dict[str, list[tuple[str, str]]] = {}
    for m in _VGLUED_RE.finditer(text):
        out.setdefault(m.group(1).lower(), []).append((m.group(2), m.group(0)))
    spans: list[tuple[int, int]] = []
    for m in _VERSION_RE.finditer(text):
        name = (m.group(1) or "").lower()
        ver = m.group(2)
        after = (m.group(3) or "").lower()
        if after and after not in _STOP and after not in _NEGATIONS:
            continue  # "8 threads", "10 MB": a quantity, not a version
        if name in _STOP or name in _NEGATIONS or name in _UNITS:
            name = ""
        if "." not in ver and not (name and (m.group(1)[0].isupper() or name in _KIND_OF)):
            continue
        written = text[m.start() : m.end(2)].strip()
        out.setdefault(name or subject, []).append((ver, written))
        spans.append((m.start(2), m.end(2)))
    for m in _BARE_VERSION_RE.finditer(text):
        if any(a <= m.start() < b for a, b in spans) or _DATE_RE.search(
            text[m.start() - 5 : m.end() + 3]
        ):
            continue
        out.setdefault(subject, []).append((m.group(1), m.group(1)))
    return out


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _times(text: str) -> list[tuple[int, str]]:
    """Times of day in minutes after midnight, UTC where a zone is named."""
    out = []
    for m in _TIME_RE.finditer(text):
        minutes = int(m.group(1)) * 60 + int(m.group(2))
        zone = (m.group(3) or "").lower()
        if zone in _ZONES:
            minutes = (minutes - _ZONES[zone]) % 1440
        out.append((minutes, m.group(0).strip()))
    return out


def _days(text: str) -> set[str]:
    found = set()
    for m in _DAY_RE.finditer(text):
        word = m.group(0).lower()
        found.add(word[:3])
    return found


def _paths(text: str) -> list[str]:
    out = []
    for m in _PATH_RE.finditer(text):
        p = m.group(1)
        if p.startswith("."):
            if "/" not in p and not re.match(r"\.[\w-]+(\.[\w-]+)*$", p):
                continue
            if p in (".", ".."):
                continue
        if "://" in text[max(0, m.start() - 8) : m.end()]:
            continue
        norm = re.sub(r"^\./", "", p).rstrip("/.")
        if norm and not re.fullmatch(r"[\d./-]+", norm) and len(norm) > 2:
            out.append(norm)
    return out


def _products(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in _PRODUCT_RE.finditer(text):
        name = m.group(1).lower()
        name = _SAME.get(name, name)
        out.setdefault(_KIND_OF.get(name, _KIND_OF.get(m.group(1).lower(), "")), set()).add(name)
    return out


def _masked(text: str) -> str:
    for rx in (_PATH_RE, _DATE_RE, _TIME_RE, _PORT_RE, _QTY_RE, _VGLUED_RE, _PRODUCT_RE):
        text = rx.sub(" ", text)
    return re.sub(r"\d+(?:\.\d+)*", " ", text)


def _frame(text: str, subject_words: set[str]) -> tuple[set[str], bool]:
    """The stems of a text's own words (no stop word, no value, no word of the
    subject) and whether it negates."""
    words = [w.lower() for w in _WORD_RE.findall(_masked(text).replace("n't", " not"))]
    negated = any(w in _NEGATIONS for w in words) or bool(_NOW_ON.search(text))
    if re.search(r"\bno longer\b|\bany ?more\b", text, re.I):
        negated = True
    stems = {
        _STEM.stemWord(w)
        for w in words
        if w not in _STOP and w not in _NEGATIONS and w not in ("longer", "anymore")
    }
    stems -= subject_words
    stems -= set(_DAYS) | {_STEM.stemWord(d) for d in ("monday", "tuesday", "wednesday",
                                                      "thursday", "friday", "saturday",
                                                      "sunday")}  # fmt: skip
    return stems, negated


def _overlap(a: set[str], b: set[str]) -> float | None:
    if not a or not b:
        return None
    return len(a & b) / min(len(a), len(b))


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?;])\s+|\n+", text)
    return [p.strip() for p in parts if p.strip()]


def contradiction(a: Note, b: Note) -> Flag | None:
    """The :class:`Flag` when notes ``a`` and ``b`` contradict, else None. Pure: it
    reads the two notes only (the caller leaves out pairs one of which supersedes the
    other, or marked ``compatible_with``)."""
    names_a, names_b = subject_names(a), subject_names(b)
    if not names_a & names_b:
        return None
    subject = sorted(names_a & names_b)[0]
    subject_words = {
        _STEM.stemWord(w) for n in (names_a | names_b) for w in n.split() if w not in _STOP
    }
    best: Flag | None = None
    for sa in _sentences(a.text):
        for sb in _sentences(b.text):
            flag = _pair(sa, sb, a.text, b.text, subject, subject_words)
            if flag is not None and best is None:
                best = Flag(flag.kind, flag.a, flag.b, sa, sb)
    return best


def _pair(
    sa: str, sb: str, whole_a: str, whole_b: str, subject: str, subject_words: set[str]
) -> Flag | None:
    fa, neg_a = _frame(sa, subject_words)
    fb, neg_b = _frame(sb, subject_words)
    ov = _overlap(fa, fb)
    same_frame = ov is None or ov >= 0.5
    if same_frame:
        for check in (_numbers, _versions_differ, _dates, _paths_differ, _products_differ):
            flag = check(sa, sb, whole_a, whole_b, subject)
            if flag is not None:
                return flag
    if neg_a != neg_b and ov is not None:
        strong = bool(_NOW_ON.search(sa) or _NOW_ON.search(sb))
        if ov >= (0.5 if strong else 0.6) and len(fa & fb) >= 2:
            return Flag("negation", sa, sb)
    return None


def _numbers(sa: str, sb: str, whole_a: str, whole_b: str, subject: str) -> Flag | None:
    qa, qb = _quantities(sa), _quantities(sb)
    all_a, all_b = _quantities(whole_a), _quantities(whole_b)
    for kind in sorted(set(qa) & set(qb)):
        for lo_a, hi_a, wa in qa[kind]:
            for lo_b, hi_b, wb in qb[kind]:
                if _fits(lo_a, hi_a, all_b.get(kind, [])) or _fits(lo_b, hi_b, all_a.get(kind, [])):
                    continue
                return Flag("numbers", wa, wb)
    return None


def _fits(lo: float, hi: float, others: Iterable[tuple[float, float, str]]) -> bool:
    """Does a value (or range) agree with any of ``others``: equal, or inside a range
    of theirs, or a range holding theirs."""
    for olo, ohi, _ in others:
        if abs(lo - olo) <= 1e-9 * max(1, abs(lo)) and abs(hi - ohi) <= 1e-9 * max(1, abs(hi)):
            return True
        if olo <= lo and hi <= ohi and olo != ohi:
            return True
        if lo <= olo and ohi <= hi and lo != hi:
            return True
    return False


def _versions_differ(sa: str, sb: str, whole_a: str, whole_b: str, subject: str) -> Flag | None:
    va, vb = _versions(sa, subject), _versions(sb, subject)
    all_a, all_b = _versions(whole_a, subject), _versions(whole_b, subject)
    ranges = [
        (_vkey(m.group(1)), _vkey(m.group(2))) for m in _VRANGE_RE.finditer(whole_a + " " + whole_b)
    ]
    for name in sorted(set(va) & set(vb)):
        for ver_a, wa in va[name]:
            for ver_b, wb in vb[name]:
                if _vsame(ver_a, [v for v, _ in all_b.get(name, [])]) or _vsame(
                    ver_b, [v for v, _ in all_a.get(name, [])]
                ):
                    continue
                if any(lo <= _vkey(ver_a) < hi or lo <= _vkey(ver_b) < hi for lo, hi in ranges):
                    continue
                if _DATE_RE.search(wa) or _DATE_RE.search(wb):
                    continue
                return Flag("versions", wa, wb)
    return None


def _vsame(v: str, others: list[str]) -> bool:
    """A version equals, or extends, or is extended by, one of ``others``."""
    k = _vkey(v)
    for o in others:
        ko = _vkey(o)
        n = min(len(k), len(ko))
        if k[:n] == ko[:n]:
            return True
    return False


def _dates(sa: str, sb: str, whole_a: str, whole_b: str, subject: str) -> Flag | None:
    da, db = set(_DATE_RE.findall(sa)), set(_DATE_RE.findall(sb))
    if (
        da
        and db
        and not da & set(_DATE_RE.findall(whole_b))
        and not db & set(_DATE_RE.findall(whole_a))
    ):
        return Flag("dates", ", ".join(sorted(da)), ", ".join(sorted(db)))
    ta, tb = _times(sa), _times(sb)
    if ta and tb:
        va, vb = [t for t, _ in ta], [t for t, _ in tb]
        wa_all, wb_all = [t for t, _ in _times(whole_a)], [t for t, _ in _times(whole_b)]
        inside_b = len(vb) == 1 and len(va) == 2 and min(va) <= vb[0] <= max(va)
        inside_a = len(va) == 1 and len(vb) == 2 and min(vb) <= va[0] <= max(vb)
        if not (inside_a or inside_b) and not set(va) & set(wb_all) and not set(vb) & set(wa_all):
            return Flag("dates", ta[0][1], tb[0][1])
    ya, yb = _days(sa), _days(sb)
    if ya and yb and not ya & yb and not (ta and tb):
        return Flag("dates", ", ".join(sorted(ya)), ", ".join(sorted(yb)))
    return None


def _paths_differ(sa: str, sb: str, whole_a: str, whole_b: str, subject: str) -> Flag | None:
    pa, pb = _paths(sa), _paths(sb)
    if not pa or not pb:
        return None
    all_a, all_b = _paths(whole_a), _paths(whole_b)
    for x in pa:
        for y in pb:
            if x in all_b or y in all_a or x.startswith(y) or y.startswith(x):
                return None
    return Flag("paths", pa[0], pb[0])


def _products_differ(sa: str, sb: str, whole_a: str, whole_b: str, subject: str) -> Flag | None:
    pa, pb = _products(sa), _products(sb)
    all_a, all_b = _products(whole_a), _products(whole_b)
    for kind in sorted(set(pa) & set(pb)):
        if not kind:
            continue
        if pa[kind] & all_b.get(kind, set()) or pb[kind] & all_a.get(kind, set()):
            continue
        return Flag("products", ", ".join(sorted(pa[kind])), ", ".join(sorted(pb[kind])))
    return None


def note_of(meta: Mapping[str, Any], body: str, fallback_title: str) -> Note:
    """A :class:`Note` from a page's frontmatter and body: ``title`` (else
    ``fallback_title``), ``aliases`` and ``subject`` as its other names."""
    names: list[str] = []
    aliases = meta.get("aliases")
    if isinstance(aliases, str):
        names.append(aliases)
    elif isinstance(aliases, list):
        names.extend(a for a in aliases if isinstance(a, str))
    if isinstance(meta.get("subject"), str):
        names.append(meta["subject"])
    title = meta.get("title") if isinstance(meta.get("title"), str) else fallback_title
    return Note(str(title), body, tuple(names))
