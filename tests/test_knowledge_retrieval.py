"""BM25 retrieval, index persistence, rank fusion and exclusion while searching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from knowbench.errors import UserError
from knowbench.knowledge.bm25 import BM25Retriever
from knowbench.knowledge.retrieval import (
    open_retriever,
    ranked_positions,
    reciprocal_rank_fusion,
)
from knowledge_fixtures import topics_corpus


def test_bm25_ranks_the_obviously_relevant_chunk_first(tmp_path: Path) -> None:
    retriever = BM25Retriever(topics_corpus(tmp_path))
    for query, expected in [
        ("area of a circle given its radius", "shapes.circle_area"),
        ("retry each attempt until the transport response is ok", "http.HttpClient.send_request"),
        ("client class that sends http requests", "http.HttpClient"),
        ("how long to boil spaghetti", "Cooking > Boiling pasta"),
        ("RectanglePerimeter", "shapes.rectangle_perimeter"),
    ]:
        hits, _ = retriever.search(query, 3)
        assert hits[0].chunk.full_name == expected, query
        assert [hit.rank for hit in hits] == list(range(1, len(hits) + 1))
        assert hits == sorted(hits, key=lambda hit: -hit.score)


def test_bm25_returns_nothing_for_a_query_without_known_terms(tmp_path: Path) -> None:
    retriever = BM25Retriever(topics_corpus(tmp_path))
    assert retriever.search("zzyzx qwertyuiop", 5) == ([], [])
    assert retriever.search("", 5) == ([], [])


def test_bm25_index_persists_and_is_reused(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    first = BM25Retriever(corpus)
    assert first.built and (corpus.index_dir / "bm25" / "meta.json").is_file()
    second = BM25Retriever(corpus)
    assert not second.built
    query = "circle radius area"
    assert np.array_equal(first.scores(query), second.scores(query))


def test_bm25_index_rebuilds_when_the_corpus_changes(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    BM25Retriever(corpus)
    changed = topics_corpus(tmp_path, extra={"docs/tea.md": "# Tea\n\nSteep green tea briefly.\n"})
    assert changed.content_hash != corpus.content_hash
    rebuilt = BM25Retriever(changed)
    assert rebuilt.built
    hits, _ = rebuilt.search("steep green tea", 1)
    assert hits[0].chunk.qualname == "Tea"
    assert not BM25Retriever(changed).built


def test_a_damaged_index_is_rebuilt(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    BM25Retriever(corpus)
    for file in (corpus.index_dir / "bm25").glob("*.npy"):
        file.write_bytes(b"garbage")
    assert BM25Retriever(corpus).built


def test_search_skips_excluded_chunks_without_losing_places(tmp_path: Path) -> None:
    retriever = BM25Retriever(topics_corpus(tmp_path))
    query = "circle area radius rectangle perimeter"
    plain, _ = retriever.search(query, 2)
    banned = plain[0].chunk.id
    hits, withheld = retriever.search(query, 2,
                                      exclude=lambda _, chunk: "banned" if chunk.id == banned else None)
    assert banned not in {hit.chunk.id for hit in hits}
    assert [item.chunk.id for item in withheld] == [banned] and withheld[0].reason == "banned"
    assert hits[0].chunk.id == plain[1].chunk.id and hits[0].rank == 1


def test_ranked_positions_orders_by_score_then_position() -> None:
    scores = np.array([0.5, 2.0, 0.5, 3.0, -1.0], dtype=np.float32)
    assert list(ranked_positions(scores)) == [3, 1, 0, 2, 4]
    many = np.random.default_rng(0).random(500).astype(np.float32)
    assert list(ranked_positions(many, first=8)) == list(np.argsort(-many, kind="stable"))


def test_reciprocal_rank_fusion_rewards_agreement_and_ignores_non_matches() -> None:
    lexical = np.array([3.0, 0.0, 1.0, 2.0])  # ranks: 0, -, 2, 1 (chunk 1 has no term)
    dense = np.array([0.1, 0.9, 0.5, 0.8])  # ranks: 3, 0, 2, 1
    fused = reciprocal_rank_fusion((lexical, 0.0), (dense, -np.inf))
    expected = [1 / 61 + 1 / 64, 1 / 61, 1 / 63 + 1 / 63, 1 / 62 + 1 / 62]
    assert np.allclose(fused, expected)
    assert int(np.argmax(fused)) == 3


def test_unknown_retriever_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown retriever"):
        open_retriever("tfidf", topics_corpus(tmp_path))
