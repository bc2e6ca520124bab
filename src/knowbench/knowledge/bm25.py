"""BM25 over a corpus with `bm25s` and the code-aware tokenizer, persisted next to the corpus.

The index lives in `<corpus>/index/bm25/` with a `meta.json` naming the corpus content hash,
tokenizer version and BM25 parameters it was built for; when any of them differs from the
current corpus and code, the index is rebuilt (and replaced atomically).
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from knowbench.knowledge.corpus import Chunk, Corpus
from knowbench.knowledge.retrieval import Retriever
from knowbench.knowledge.tokenizer import TOKENIZER_VERSION, tokenize, tokenize_to_ids

INDEX_TEXT_VERSION = 1  # bump when index_text() changes
PARAMS = {"method": "lucene", "k1": 1.5, "b": 0.75}
META_FILE = "meta.json"


def index_text(chunk: Chunk) -> str:
    """What BM25 indexes for a chunk: its qualified name and path, then its text."""
    return f"{chunk.full_name} {chunk.path}\n{chunk.text}"


class BM25Retriever(Retriever):
    """Lexical retrieval. `built` tells whether this instance had to (re)build the index."""

    name = "bm25"
    floor = 0.0

    def __init__(self, corpus: Corpus, index_dir: Path | None = None) -> None:
        super().__init__(corpus)
        self.index_dir = index_dir or corpus.index_dir / "bm25"
        self.built = False
        model = self._load()
        if model is None:
            model = self._build()
            self.built = True
        self.model = model
        self.vocab: dict[str, int] = model.vocab_dict

    def _meta(self) -> dict[str, Any]:
        return {"content_hash": self.corpus.content_hash, "chunks": len(self.corpus),
                "tokenizer": TOKENIZER_VERSION, "index_text": INDEX_TEXT_VERSION,
                "bm25s": metadata.version("bm25s"), **PARAMS}

    def _load(self) -> bm25s.BM25 | None:
        meta_path = self.index_dir / META_FILE
        try:
            if json.loads(meta_path.read_text()) != self._meta():
                return None
            return bm25s.BM25.load(str(self.index_dir), mmap=False, show_progress=False)
        except (OSError, ValueError, KeyError):
            return None

    def _build(self) -> bm25s.BM25:
        model = bm25s.BM25(**PARAMS)
        model.index(tokenize_to_ids(index_text(chunk) for chunk in self.corpus.chunks),
                    show_progress=False)
        self.index_dir.parent.mkdir(parents=True, exist_ok=True)
        partial = self.index_dir.with_name(f".{self.index_dir.name}.{os.getpid()}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save(str(partial), show_progress=False)
        (partial / META_FILE).write_text(json.dumps(self._meta(), indent=2) + "\n")
        _replace_dir(partial, self.index_dir)
        return model

    def scores(self, query: str) -> np.ndarray:
        ids = [self.vocab[token] for token in dict.fromkeys(tokenize(query)) if token in self.vocab]
        if not ids:
            return np.zeros(len(self.corpus), dtype=np.float32)
        return np.asarray(self.model.get_scores_from_ids(ids), dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        return {"retriever": self.name, "tokenizer": TOKENIZER_VERSION, **PARAMS}


def _replace_dir(new: Path, target: Path) -> None:
    """Put `new` at `target`, moving any old one aside first (readers never see a mix)."""
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)
