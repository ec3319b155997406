"""Optional dense vectors of sections: the model, their compact storage, and scoring.

Installed with the ``vectors`` extra (``pip install 'wiki-memory[vectors]'``, which
brings ``wordllama`` and with it numpy, tokenizers and safetensors). Without it nothing
here imports numpy or the model, :func:`available` is False, and the index stores no
vectors (docs/ranking.md, "Vectors").

The models (the setting ``vectors_model``, one per process: :func:`select`)
    ``wordllama`` (the default): ``wordllama``'s ``l2_supercat`` static token embeddings
    (32,000 tokens × 256 float16 in a 16 MB file inside its wheel; held as float32 in
    memory, 32 MB): a text's vector is the mean of its tokens' embeddings, scaled to unit
    length. No download ever happens: version 0.4 looks for its tokenizer file in a
    folder that does not exist unless told ``cache_dir=<its package folder>``, and
    ``disable_download=True`` turns a missing file into an error instead of a fetch
    (DESIGN.md, "Measured on this machine"). Importing it configures the root logger
    (``logging.basicConfig``); the handler it adds is removed again.

    ``minilm``: the sentence model all-MiniLM-L6-v2 (384 components), a 6-layer encoder
    run with numpy from the weights of an installed package (:mod:`wiki_memory.index.minilm`,
    which says how it is installed).

Storage (a table in ``index.db``, so a rebuild, the backup-API switch and deleting the
file treat it as the rest of the index)
    ``vectors(rowid INTEGER PRIMARY KEY, v BLOB)``: rowid = ``sections.rowid``; ``v`` is
    ``4 + dim`` bytes (:func:`row_bytes`; 260 for wordllama, 388 for minilm): the
    per-row scale (float32, little-endian) then the components as int8, ``component ≈ code × scale`` with ``scale =
    max|component| / 127`` (symmetric linear quantisation per row). A section whose text
    has no token gets no row. ``meta`` holds ``vectors`` (:func:`model_id`, or ``""``
    when the index was built without vectors) and ``vectors_gen`` (a random token that
    changes with every write of the table, so readers know to reload).

Scoring
    :class:`Matrix` holds every row in memory as int8 (``N × dim`` bytes plus 4 bytes of
    scale and 8 of rowid per row) and scores a query by cosine similarity (dot product
    of unit vectors: ``numpy.einsum`` over chunks of :data:`CHUNK` int8 rows, single
    threaded, then the rows' scales); it reloads when ``vectors_gen`` changed.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import secrets
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from wiki_memory.config import VECTORS_MODELS

if TYPE_CHECKING:  # numpy comes with the extra only
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "available",
    "MODELS",
    "select",
    "selected",
    "model_id",
    "dim",
    "row_bytes",
    "install_hint",
    "MODEL_ID",
    "DIM",
    "ROW_BYTES",
    "INSTALL_HINT",
    "Model",
    "model",
    "encode",
    "embed_text",
    "write",
    "delete_path",
    "Matrix",
]

MODEL = "l2_supercat"
"""The wordllama configuration (trained on Llama 2's token embeddings)."""
DIM = 256
"""Components per vector of wordllama (the model's full width)."""
ROW_BYTES = 4 + DIM
"""Bytes of one stored wordllama vector: float32 scale + DIM int8 codes."""
MODEL_ID = f"wordllama/{MODEL}/{DIM}/int8"
"""What ``meta.vectors`` says of an index built with wordllama vectors."""
MODELS = VECTORS_MODELS
"""The values of the setting ``vectors_model`` (:data:`wiki_memory.config.VECTORS_MODELS`);
the first is its default."""
_IDS = {"wordllama": MODEL_ID, "minilm": "minilm/all-MiniLM-L6-v2/384/int8"}
_DIMS = {"wordllama": DIM, "minilm": 384}
INSTALL_HINT = "pip install 'wiki-memory[vectors]'"
"""How a user gets the extra (doctor prints it when the extra is missing)."""
MAX_CHARS = 4000
"""Only the first this many characters of a section are embedded (a mean of token
vectors changes little after that; the cost grows with the length)."""
CHUNK = 8192
"""Rows multiplied at a time when scoring (8192 × 256 int8 = 2 MB)."""

_TIMELINE_HEAD = re.compile(r"^\*\*\d\d:\d\d:\d\d\*\*(?: \([^)\n]{1,24}\))? · [^\n]*\n?")
_FENCE_LINE = re.compile(r"^[ \t]*(?:~{3,}|`{3,})[^\n]*$", re.M)


_selected = MODELS[0]


def _check(name: str | None) -> str:
    if name is None:
        return _selected
    if name not in MODELS:
        raise ValueError(f"vectors_model {name!r}: expected one of {', '.join(MODELS)}")
    return name


def select(name: str) -> None:
    """Make ``name`` (one of :data:`MODELS`) the process's model: the one every index
    with vectors on embeds with. Raises ValueError for another name."""
    global _selected
    _selected = _check(name)


def selected() -> str:
    """The process's model (:func:`select`; ``wordllama`` until then)."""
    return _selected


def model_id(name: str | None = None) -> str:
    """What ``meta.vectors`` says of an index built with the model ``name`` (default the
    selected one); an index built with another value is rebuilt. Raises ValueError for
    an unknown name."""
    return _IDS[_check(name)]


def dim(name: str | None = None) -> int:
    """Components of the model ``name``'s vectors (default the selected one)."""
    return _DIMS[_check(name)]


def row_bytes(name: str | None = None) -> int:
    """Bytes of one stored vector of the model ``name``: float32 scale + int8 codes."""
    return 4 + dim(name)


def install_hint(name: str | None = None) -> str:
    """How a user gets the model ``name`` (default the selected one)."""
    if _check(name) == "minilm":
        from wiki_memory.index import minilm

        return minilm.INSTALL_HINT
    return INSTALL_HINT


def available(name: str | None = None) -> bool:
    """True when the model ``name`` (default the selected one) can run: for
    ``wordllama`` the ``vectors`` extra, for ``minilm`` also its weights package.
    Imports neither. Raises ValueError for an unknown name."""
    if _check(name) == "minilm":
        from wiki_memory.index import minilm

        return minilm.available()
    return importlib.util.find_spec("wordllama") is not None


def embed_text(heading: str, anchor: str, text: str) -> str:
    """What is embedded for a section: its heading (not for a timeline entry or block,
    whose heading is its page's section) and its text without a timeline entry's head
    line (``**09:01:39** · prompt · Ann · D1:3``) and fence lines, at most
    :data:`MAX_CHARS` characters."""
    body = _FENCE_LINE.sub("", _TIMELINE_HEAD.sub("", text, count=1))
    if heading and not anchor.startswith("^"):
        body = heading + "\n" + body
    return body.strip()[:MAX_CHARS]


class Model:
    """The selected embedding model (:func:`select`), loaded on first use (wordllama:
    about 0.6 s, +32 MB) and shared by every thread. :meth:`embed` gives unit vectors,
    shape ``(len(texts), dim())``, float32; a text with no token gives a row of zeros.
    Raises ImportError when the extra is missing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inf: Any = None
        self._minilm: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._inf is None:
                root = logging.getLogger()
                handlers, level = list(root.handlers), root.level
                try:
                    import wordllama
                finally:  # its inference module calls logging.basicConfig on import
                    for h in list(root.handlers):
                        if h not in handlers:
                            root.removeHandler(h)
                    root.setLevel(level)
                folder = Path(wordllama.__file__).parent
                self._inf = wordllama.WordLlama.load(
                    config=MODEL, dim=DIM, cache_dir=folder, disable_download=True
                )
            return self._inf

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if _selected == "minilm":
            from wiki_memory.index import minilm

            with self._lock:
                if self._minilm is None:
                    self._minilm = minilm.Encoder()
            return self._minilm.embed(texts)  # type: ignore[no-any-return]
        inf = self._load()
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        # batches of similar length: each batch is padded to its longest text
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        got = np.asarray(
            inf.embed([texts[i] for i in order], norm=False, batch_size=64), dtype=np.float32
        )
        out = np.empty_like(got)
        out[order] = got
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        out[(norms <= 0).ravel()] = 0.0
        return out


_MODEL = Model()


def model() -> Model:
    """The process's one :class:`Model`."""
    return _MODEL


def encode(vecs: npt.NDArray[np.float32]) -> list[bytes | None]:
    """Each row of ``vecs`` (shape ``(n, dim)``) as ``4 + dim`` bytes (see the module's
    "Storage"); None for an all-zero row."""
    import numpy as np

    peak = np.abs(vecs).max(axis=1)
    out: list[bytes | None] = []
    for row, m in zip(vecs, peak, strict=True):
        if m <= 0:
            out.append(None)
            continue
        scale = np.float32(m / 127.0)
        codes = np.clip(np.rint(row / scale), -127, 127).astype(np.int8)
        out.append(scale.astype("<f4").tobytes() + codes.tobytes())
    return out


def _bump(conn: apsw.Connection) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('vectors_gen', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (secrets.token_hex(8),),
    )


def write(conn: apsw.Connection, rows: Sequence[tuple[int, str, str, str]]) -> int:
    """Embed and store the sections ``rows`` = ``(rowid, heading, anchor, text)`` inside
    the caller's transaction; returns how many vectors were written."""
    if not rows:
        return 0
    texts = [embed_text(h, a, t) for _, h, a, t in rows]
    blobs = encode(model().embed(texts))
    data = [(r[0], b) for r, b in zip(rows, blobs, strict=True) if b is not None]
    if data:
        conn.executemany("INSERT OR REPLACE INTO vectors(rowid, v) VALUES (?, ?)", data)
        _bump(conn)
    return len(data)


def delete_path(conn: apsw.Connection, path: str) -> None:
    """Remove the vectors of the page ``path``'s sections (before its sections go)."""
    conn.execute(
        "DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM sections WHERE path = ?)", (path,)
    )
    if conn.changes():
        _bump(conn)


class Matrix:
    """Every stored vector of one index in memory, reloaded when ``meta.vectors_gen``
    changed. Thread-safe: a reload builds new arrays and swaps them in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gen: str | None = None
        self._rowids: Any = None
        self._codes: Any = None
        self._scales: Any = None

    def _current(self, conn: apsw.Connection) -> tuple[Any, Any, Any]:
        import numpy as np

        row = conn.execute("SELECT value FROM meta WHERE key = 'vectors_gen'").fetchone()
        gen = str(row[0]) if row else ""
        with self._lock:
            if gen == self._gen and self._rowids is not None:
                return self._rowids, self._codes, self._scales
            ids: list[int] = []
            blobs: list[bytes] = []
            width = row_bytes()
            for rid, v in conn.execute("SELECT rowid, v FROM vectors ORDER BY rowid"):
                if len(v) == width:
                    ids.append(rid)
                    blobs.append(v)
            raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), width)
            self._rowids = np.asarray(ids, dtype=np.int64)
            self._scales = raw[:, :4].copy().view("<f4").ravel().astype(np.float32)
            self._codes = np.ascontiguousarray(raw[:, 4:]).view(np.int8)
            self._gen = gen
            return self._rowids, self._codes, self._scales

    def scores(
        self, conn: apsw.Connection, query: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """``(rowids, cosine similarities)`` of every stored section with the unit vector
        ``query`` (shape ``(dim(),)``), both of length N, in rowid order."""
        import numpy as np

        rowids, codes, scales = self._current(conn)
        out = np.empty(len(rowids), dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        for i in range(0, len(rowids), CHUNK):
            # einsum, not ``@``: BLAS's threads cost 10-15x on a busy 2-core machine
            out[i : i + CHUNK] = np.einsum(
                "ij,j->i", codes[i : i + CHUNK], q, dtype=np.float32, casting="unsafe"
            )
        out *= scales
        return rowids, out

    def nbytes(self) -> int:
        """Bytes the loaded arrays hold (0 before the first query)."""
        if self._rowids is None:
            return 0
        return int(self._rowids.nbytes + self._codes.nbytes + self._scales.nbytes)
