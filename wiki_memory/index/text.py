"""Text normalisation shared by indexing and querying.

SQLite FTS5's ``unicode61`` tokenizer (with ``remove_diacritics 2``) lowercases and
strips the Latin diacritics it knows, and splits on anything that is not a letter
or digit. That leaves three gaps this module closes, and it is applied the same way
to indexed text and to query text so both sides produce the same tokens:

1. **Folding** (:func:`fold`): letters that have no decomposition (``ł``, ``ß``,
   ``æ``, ``ø``, ``đ``, ``œ``, ``þ``, ``ı`` ...) are spelled out in ASCII, other
   Latin and Greek letters lose their accents (NFKD, combining marks dropped),
   compatibility forms (full-width ``Ａ``, ligature ``ﬁ``, Arabic presentation
   forms) become their plain letters, Arabic harakat and Hebrew points are
   dropped, curly quotes become ASCII quotes. Cyrillic keeps its letters (only
   ``ё`` → ``е``), CJK, Hangul and kana are left as they are.
2. **CJK** (:func:`cjk_bigrams`): runs of Han, Hiragana, Katakana and Hangul have
   no spaces, so ``unicode61`` makes a whole sentence one token. Each run becomes
   its overlapping character bigrams (a 1-character run stays itself), separated
   by spaces; a 2-character query is then one token and a 4-character query a
   3-bigram phrase. ASCII glued to CJK (``修复sync-ledger后``) is split off.
3. **Identifiers** (:func:`identifier_expansions`): ``getUserName``,
   ``HTTPServer``, ``E1101`` and ``sha256`` are one ``unicode61`` token each, so a
   search for ``user name`` could not find them. Tokens with case humps or
   letter/digit boundaries get their parts added (``get user name``), tokens
   joined by ``_ . -`` get a joined form (``test_app.py`` → ``testapppy``). The
   expansions are appended after the text, never inserted in it, so phrases in the
   original text stay intact.

:func:`index_text` is the whole pipeline for a column value at insert time; the
query side (:mod:`wiki_memory.index.query`) uses :func:`normalize` (fold + CJK
bigrams in one pass) and :func:`split_identifiers`. Pure-ASCII text skips the
Unicode work, so typical pages cost a few regular-expression passes.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain
from typing import cast

__all__ = [
    "fold",
    "cjk_bigrams",
    "has_cjk",
    "identifier_expansions",
    "split_identifiers",
    "index_text",
    "index_text_words",
    "normalize",
    "CJK_CHARS",
]

# Letters NFKD leaves alone, plus typographic characters worth normalising.
_SPECIAL: dict[str, str] = {
    "ß": "ss",
    "ẞ": "SS",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "ł": "l",
    "Ł": "L",
    "đ": "d",
    "Đ": "D",
    "ð": "d",
    "Ð": "D",
    "þ": "th",
    "Þ": "TH",
    "ı": "i",
    "ħ": "h",
    "Ħ": "H",
    "ŧ": "t",
    "Ŧ": "T",
    "ĸ": "k",
    "ŀ": "l",
    "Ŀ": "L",
    "ŉ": "n",
    "ſ": "s",
    "ƒ": "f",
    "ŋ": "n",
    "Ŋ": "N",
    "ƀ": "b",
    "ǥ": "g",
    "Ǥ": "G",
    "ɨ": "i",
    "ʉ": "u",
    "ȼ": "c",
    "Ȼ": "C",
    "ɇ": "e",
    "Ɇ": "E",
    # Cyrillic: only the letters Russian writers use interchangeably.
    "ё": "е",
    "Ё": "Е",
    "ѐ": "е",
    "Ѐ": "Е",
    "ѝ": "и",
    "Ѝ": "И",
    # Typography.
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u2033": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u00a0": " ",
    "\u00ad": "",  # soft hyphen
    "\u200b": "",  # zero-width space
    "\u2060": "",  # word joiner
    "\ufeff": "",  # BOM / zero-width no-break space
}

# Marks removed wherever they appear: generic combining diacritics (left over when
# NFC cannot compose them with their base), Arabic harakat and Quranic marks,
# tatweel, Hebrew points and cantillation.
_STRIP_RANGES: tuple[tuple[int, int], ...] = (
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
    (0x0591, 0x05BD),
    (0x05BF, 0x05BF),
    (0x05C1, 0x05C2),
    (0x05C4, 0x05C5),
    (0x05C7, 0x05C7),
    (0x0610, 0x061A),
    (0x0640, 0x0640),
    (0x064B, 0x065F),
    (0x0670, 0x0670),
    (0x06D6, 0x06DC),
    (0x06DF, 0x06E4),
    (0x06E7, 0x06E8),
    (0x06EA, 0x06ED),
)

# Scripts whose accents are removed (NFKD, then combining marks dropped).
_DECOMPOSE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00C0, 0x02AF),  # Latin-1 letters, Latin Extended-A/B, IPA
    (0x0370, 0x03FF),  # Greek
    (0x1E00, 0x1EFF),  # Latin Extended Additional (Vietnamese ...)
    (0x1F00, 0x1FFF),  # Greek Extended
    (0x2C60, 0x2C7F),  # Latin Extended-C
    (0xA720, 0xA7FF),  # Latin Extended-D
    (0xAB30, 0xAB6F),  # Latin Extended-E
)


def _in(cp: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def _fold_char(cp: int) -> str | int | None:
    """The replacement of one code point: a string, itself (int) or None (delete)."""
    ch = chr(cp)
    special = _SPECIAL.get(ch)
    if special is not None:
        return special
    if _in(cp, _STRIP_RANGES):
        return None
    decomposition = unicodedata.decomposition(ch)
    if _in(cp, _DECOMPOSE_RANGES) or decomposition.startswith("<"):
        out = "".join(
            _SPECIAL.get(c, c)
            for c in unicodedata.normalize("NFKD", ch)
            if not unicodedata.combining(c)
        )
        if out != ch:
            return out
    return cp


class _FoldMap(dict[int, str | int | None]):
    """Code point → replacement, computed on first use (``str.translate`` table)."""

    def __missing__(self, cp: int) -> str | int | None:
        value = _fold_char(cp)
        self[cp] = value
        return value


_FOLD_MAP = _FoldMap()
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _fold_run(m: re.Match[str]) -> str:
    return m.group().translate(_FOLD_MAP)


def fold(text: str) -> str:
    """Fold letters so that accented and unaccented spellings meet.

    ``"Łódź Straße café"`` → ``"Lodz Strasse cafe"``. Case is kept (FTS5
    lowercases; identifier splitting needs the humps). ASCII text is returned
    unchanged without any Unicode work. Cyrillic, Arabic letters, CJK, Hangul and
    kana pass through. Never raises.
    """
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return _NON_ASCII.sub(_fold_run, text)


# --- CJK ------------------------------------------------------------------------

CJK_CHARS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # 々 〆 〇
    "\u3041-\u3096\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana (not the middle dot)
    "\u3131-\u318e"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended-A
    "\uac00-\ud7af"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
"""Character class (for ``[...]``) of the scripts written without spaces that are bigrammed."""

_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_FIRST_CJK = "\u1100"


def _bigram_run(m: re.Match[str]) -> str:
    run = m.group()
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join([run[i : i + 2] for i in range(len(run) - 1)]) + " "


def has_cjk(text: str) -> bool:
    """True when ``text`` contains at least one character that :func:`cjk_bigrams` rewrites."""
    if text.isascii() or max(text) < _FIRST_CJK:
        return False
    return _CJK_RUN.search(text) is not None


def cjk_bigrams(text: str) -> str:
    """Replace every CJK run by its overlapping bigrams, spaced off from its neighbours.

    ``"修复sync后孤立引用"`` → ``" 修复 sync 后孤 孤立 立引 引用 "`` (modulo spacing).
    A 1-character run stays as is. Text without CJK is returned unchanged.
    """
    if text.isascii() or max(text) < _FIRST_CJK:
        return text
    return _CJK_RUN.sub(_bigram_run, text)


# --- identifiers ------------------------------------------------------------------

_SEPARATORS = re.compile(r"[_.\-]+")
_HUMPS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_MAX_PARTS = 12


# Identifiers repeat across pages: cache their expansions (a pure function of the token).
_EXPAND_CACHE: dict[str, list[str]] = {}
_EXPAND_CACHE_MAX = 200_000


def _expand_token(token: str) -> list[str]:
    """Expansions of one identifier-ish token (without surrounding separators)."""
    out = _EXPAND_CACHE.get(token)
    if out is None:
        out = _expand_token_uncached(token)
        if len(_EXPAND_CACHE) >= _EXPAND_CACHE_MAX:
            _EXPAND_CACHE.clear()
        _EXPAND_CACHE[token] = out
    return out


def _expand_token_uncached(token: str) -> list[str]:
    chunks = [c for c in _SEPARATORS.split(token) if c]
    if not chunks:
        return []
    parts: list[str] = []
    for chunk in chunks:
        parts.extend(_HUMPS.findall(chunk))
    out: list[str] = []
    if len(parts) > len(chunks) and len(parts) <= _MAX_PARTS:
        out.append(" ".join(parts))
    if 1 < len(chunks) <= _MAX_PARTS:
        out.append("".join(chunks))
    return out


# Whitespace-separated words seen before, by what they contribute: the ASCII words in
# them that expand (``()`` for most words). Prose repeats its words, so a page's words
# are mostly looked up with C-level set operations instead of being examined again.
_WORD_IDS: dict[str, tuple[str, ...]] = {}
_PLAIN_WORDS: set[str] = set()
_WORD_CACHE_MAX = 300_000
_WORD_CACHE_LEN = 64  # longer words are not cached: the cache stays under ~40 MB


def _word_identifiers(word: str) -> tuple[str, ...]:
    """The ASCII words inside a whitespace-separated ``word`` that have expansions."""
    if word.isalpha() and (word.islower() or word.isupper() or word.istitle()):
        return ()
    return tuple(w for w in _ASCII_WORD.findall(word) if _expand_token(w))


def identifier_expansions(text: str) -> list[str]:
    """Extra token groups for the code identifiers in ``text`` (ASCII only), deduplicated.

    ``"call getUserName in test_app.py, error E1101"`` →
    ``["get User Name", "testapppy", "E 1101"]``. Each entry is a space-separated
    group whose words are adjacent when appended to the indexed text, so the
    query side can match it as a phrase. Groups come in the sorted order of the
    identifiers they expand.
    """
    return _expansions(text.split())


def _expansions(words: list[str]) -> list[str]:
    """:func:`identifier_expansions` of the text whose whitespace-separated words are
    ``words``. Words and identifiers seen before are looked up at C speed (``map``);
    only new ones are examined in Python."""
    found_words = set(words)
    found_words.difference_update(_PLAIN_WORDS)  # words known to expand to nothing
    if not found_words:
        return []
    if len(_WORD_IDS) + len(_PLAIN_WORDS) >= _WORD_CACHE_MAX:
        _WORD_IDS.clear()
        _PLAIN_WORDS.clear()
    known: list[tuple[str, ...] | None] = list(map(_WORD_IDS.get, found_words))
    ids_of: list[tuple[str, ...]] = (
        [
            _learn_word(word) if ids is None else ids
            for word, ids in zip(found_words, known, strict=True)
        ]
        if None in known
        else cast("list[tuple[str, ...]]", known)
    )
    idents = sorted(set(chain.from_iterable(ids_of)))
    if not idents:
        return []
    cached: list[list[str] | None] = list(map(_EXPAND_CACHE.get, idents))
    groups: list[list[str]] = (
        [_expand_token(i) if g is None else g for i, g in zip(idents, cached, strict=True)]
        if None in cached
        else cast("list[list[str]]", cached)
    )
    return list(dict.fromkeys(chain.from_iterable(groups)))


def _learn_word(word: str) -> tuple[str, ...]:
    """:func:`_word_identifiers` of a word not seen before, remembered (unless longer
    than :data:`_WORD_CACHE_LEN`)."""
    ids = _word_identifiers(word)
    if len(word) > _WORD_CACHE_LEN:  # base64 blobs, URLs: not worth keeping
        pass
    elif not ids:
        _PLAIN_WORDS.add(word)
    else:
        _WORD_IDS[word] = ids
    return ids


def _split_word(m: re.Match[str]) -> str:
    parts: list[str] = []
    for chunk in _SEPARATORS.split(m.group()):
        if chunk:
            parts.extend(_HUMPS.findall(chunk))
    return " ".join(parts)


def split_identifiers(text: str) -> str:
    """Split humps and letter/digit boundaries in every ASCII word of ``text``.

    ``"getUserName E1101 snake_case"`` → ``"get User Name E 1101 snake case"``.
    Used on the query side to build the alternative phrase matching the parts
    group that :func:`identifier_expansions` indexes.
    """
    return _ASCII_WORD.sub(_split_word, text)


# Non-ASCII runs repeat a lot (punctuation, words of non-Latin text): cache them.
_RUN_CACHE: dict[str, str] = {}
_RUN_CACHE_MAX = 100_000


def _fold_bigram_run(m: re.Match[str]) -> str:
    key = m.group()
    out = _RUN_CACHE.get(key)
    if out is None:
        out = key.translate(_FOLD_MAP)
        if out and max(out) >= _FIRST_CJK:
            out = _CJK_RUN.sub(_bigram_run, out)
        if len(_RUN_CACHE) >= _RUN_CACHE_MAX:
            _RUN_CACHE.clear()
        _RUN_CACHE[key] = out
    return out


def normalize(text: str) -> str:
    """:func:`fold` then :func:`cjk_bigrams`, in one pass over the non-ASCII runs.

    This is what both the indexer and the query builder apply before identifier
    handling. ASCII text is returned unchanged.
    """
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return _NON_ASCII.sub(_fold_bigram_run, text)


def index_text(text: str) -> str:
    """The text to store in an FTS5 column: folded, CJK bigrammed, identifiers expanded.

    The original token sequence comes first, then a newline and the expansion
    groups. The result is only for matching; show the original text to people.
    """
    return index_text_words(text)[0]


def index_text_words(text: str) -> tuple[str, list[str]]:
    """:func:`index_text` of ``text`` and that value's whitespace-separated words
    (``value.split()``), found in the same pass: the indexer stems these words
    (:func:`wiki_memory.index.stem.stems_of_words`) without splitting the text again."""
    if not text:
        return "", []
    out = normalize(text)
    words = out.split()
    extra = _expansions(words)
    if extra:
        for group in extra:
            words.extend(group.split())
        return out + "\n" + "\n".join(extra), words
    return out, words
