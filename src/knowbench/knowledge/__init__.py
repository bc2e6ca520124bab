"""Knowledge for methods: corpora (ingest, chunks, storage), retrieval (BM25, dense, hybrid),
leakage control, and knowledge bundles.

    corpus = build_corpus("click==8.1.8", "click")         # or open_corpus("click")
    retriever = open_retriever("bm25", corpus)              # index persisted next to the corpus
    hits, withheld = retriever.search("group subcommand", k=5, exclude=LeakageGuard(task).reason)

Retrieval modules import numpy (and, for dense, sentence-transformers); they load on first use.
"""

from __future__ import annotations

from typing import Any

from knowbench.knowledge.bundles import CELLS, render_cell
from knowbench.knowledge.context import fit_chunks, format_chunk
from knowbench.knowledge.corpus import Chunk, Corpus, CorpusManifest, open_corpus
from knowbench.knowledge.ingest import build_corpus
from knowbench.knowledge.leakage import LeakageGuard
from knowbench.knowledge.tokenizer import tokenize

_LAZY = {"Retriever": "retrieval", "Hit": "retrieval", "HybridRetriever": "retrieval",
         "open_retriever": "retrieval", "BM25Retriever": "bm25", "DenseRetriever": "dense"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"knowbench.knowledge.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'knowbench.knowledge' has no attribute '{name}'")


__all__ = [
    "CELLS", "BM25Retriever", "Chunk", "Corpus", "CorpusManifest", "DenseRetriever", "Hit",
    "HybridRetriever", "LeakageGuard", "Retriever", "build_corpus", "fit_chunks", "format_chunk",
    "open_corpus", "open_retriever", "render_cell", "tokenize",
]
