"""Retrievers share one interface: score every chunk of a corpus for a query, then `search`
walks the ranking, skipping chunks an exclusion rule rejects (leakage control), until it has k.

Because exclusion happens while walking the full ranking, an excluded chunk never takes one of
the k places and can never be returned, whatever its score.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from knowbench.errors import UserError
from knowbench.knowledge.corpus import Chunk, Corpus

RETRIEVERS = ("bm25", "dense", "hybrid")
RRF_K = 60

ExcludeRule = Callable[[int, Chunk], str | None]  # (position, chunk) -> reason, None to keep


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk: `rank` counts from 1 among the chunks returned."""

    chunk: Chunk
    score: float
    rank: int
    position: int  # index of the chunk in the corpus


@dataclass(frozen=True)
class Excluded:
    """A chunk that ranked high enough to be returned but was withheld, and why."""

    chunk: Chunk
    reason: str
    would_be_rank: int


class Retriever(ABC):
    """Scores every chunk of `corpus` for a query (higher is better)."""

    name: str = "abstract"
    # Chunks scoring at or below this are never returned (BM25: no query term in common).
    floor: float = -np.inf

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    @abstractmethod
    def scores(self, query: str) -> np.ndarray:
        """One float per chunk of the corpus, in corpus order."""

    def describe(self) -> dict[str, Any]:
        """Everything about the retriever that changes what it returns."""
        return {"retriever": self.name}

    def search(self, query: str, k: int, exclude: ExcludeRule | None = None,
               ) -> tuple[list[Hit], list[Excluded]]:
        """The k best chunks for `query` that `exclude` keeps, and those it withheld on the way."""
        scores = self.scores(query)
        hits: list[Hit] = []
        withheld: list[Excluded] = []
        for position in ranked_positions(scores):
            if len(hits) >= k or not scores[position] > self.floor:
                break
            chunk = self.corpus.chunks[position]
            reason = exclude(position, chunk) if exclude else None
            if reason is not None:
                withheld.append(Excluded(chunk, reason, len(hits) + 1))
                continue
            hits.append(Hit(chunk, float(scores[position]), len(hits) + 1, int(position)))
        return hits, withheld


def ranked_positions(scores: np.ndarray, first: int = 64) -> Iterator[int]:
    """Positions by descending score (ties by position): the top `first` from a partial sort,
    the rest only if the caller keeps asking."""
    count = len(scores)
    if count == 0:
        return
    head = min(first, count)
    if head < count:
        top = np.argpartition(-scores, head - 1)[:head]
        top = top[np.lexsort((top, -scores[top]))]
    else:
        top = np.argsort(-scores, kind="stable")
    yield from (int(position) for position in top)
    if head < count:
        rest = np.argsort(-scores, kind="stable")
        seen = set(top.tolist())
        yield from (int(position) for position in rest if int(position) not in seen)


def reciprocal_rank_fusion(*score_lists: tuple[np.ndarray, float], k: int = RRF_K) -> np.ndarray:
    """RRF over full rankings: sum of 1 / (k + rank) per list; chunks scoring at or below a
    list's floor (no match) get nothing from that list."""
    fused = np.zeros(len(score_lists[0][0]), dtype=np.float64)
    for scores, floor in score_lists:
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(len(scores), dtype=np.float64)
        ranks[order] = np.arange(1, len(scores) + 1)
        contribution = 1.0 / (k + ranks)
        contribution[~(scores > floor)] = 0.0
        fused += contribution
    return fused


class HybridRetriever(Retriever):
    """Reciprocal-rank fusion (k=60) of BM25 and dense rankings."""

    name = "hybrid"
    floor = 0.0

    def __init__(self, corpus: Corpus, lexical: Retriever, dense: Retriever) -> None:
        super().__init__(corpus)
        self.lexical, self.dense = lexical, dense

    def scores(self, query: str) -> np.ndarray:
        return reciprocal_rank_fusion((self.lexical.scores(query), self.lexical.floor),
                                      (self.dense.scores(query), self.dense.floor))

    def describe(self) -> dict[str, Any]:
        return {"retriever": self.name, "rrf_k": RRF_K, "lexical": self.lexical.describe(),
                "dense": self.dense.describe()}


def open_retriever(kind: str, corpus: Corpus) -> Retriever:
    """A ready retriever of `kind` ('bm25', 'dense' or 'hybrid') over `corpus`, loading its
    persisted index or building it when the corpus changed. Raises `UserError` for an unknown
    kind or, for dense and hybrid, when the optional `knowbench[dense]` extra is missing."""
    from knowbench.knowledge.bm25 import BM25Retriever

    if kind == "bm25":
        return BM25Retriever(corpus)
    if kind in ("dense", "hybrid"):
        from knowbench.knowledge.dense import DenseRetriever

        dense = DenseRetriever(corpus)
        return dense if kind == "dense" else HybridRetriever(corpus, BM25Retriever(corpus), dense)
    raise UserError(f"unknown retriever '{kind}'; choose one of {', '.join(RETRIEVERS)}")
