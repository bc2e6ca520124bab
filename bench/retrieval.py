"""Retrieval cost on a large corpus: index build, index load and query latency.

A corpus of >= 50k chunks is synthesised from real chunks: the installed source of
knowbench's own dependencies (click, rich, pydantic, typer, httpx; or `--corpus NAME`) is
chunked and replicated, each replica renaming a different quarter of the identifiers so the
vocabulary grows as it would with more code. Then, for each retriever:

  bm25    build = tokenize + index + save; load = read the persisted index; query = search(k=10)
  dense   build = fill the embedding cache and the matrix from precomputed vectors (random unit
          vectors: no model time); query = exact numpy cosine search + top-k
  hybrid  query = bm25 + dense + reciprocal-rank fusion over the whole corpus

With the dense extra installed it also measures the real model: chunks embedded per second and
the latency of encoding one query. Goals (not asserted): BM25 build < 10 s, query < 10 ms.

    python bench/retrieval.py [--chunks 50000] [--queries 200] [--corpus NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from knowbench import __version__
from knowbench.knowledge.bm25 import BM25Retriever
from knowbench.knowledge.corpus import (
    CHUNK_KINDS,
    Chunk,
    Corpus,
    CorpusManifest,
    content_hash,
    open_corpus,
    write_corpus,
)
from knowbench.knowledge.dense import DenseRetriever, dense_available, embed_text
from knowbench.knowledge.ingest import chunk_tree, installed_source
from knowbench.knowledge.retrieval import HybridRetriever
from options import count

SEED_PACKAGES = ("click", "rich", "pydantic", "typer", "httpx")
_IDENTIFIER = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{3,})\b")


class RandomEncoder:
    """Unit vectors derived from a hash of the text: stands in for precomputed embeddings."""

    model_id = "random-unit-384"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.stack([np.random.default_rng(_seed(text)).standard_normal(384)
                            for text in texts]).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def seed_chunks(corpus_name: str | None) -> tuple[list[Chunk], str]:
    if corpus_name:
        corpus = open_corpus(corpus_name)
        return corpus.chunks, f"corpus {corpus.name} ({corpus.manifest.source})"
    chunks: list[Chunk] = []
    used = []
    for package in SEED_PACKAGES:
        try:
            source = installed_source(package)
        except Exception:  # not installed here: use the others
            continue
        chunks.extend(chunk_tree(source.root, source.base).chunks)
        used.append(package)
    return chunks, "installed " + ", ".join(used)


def perturb(chunk: Chunk, replica: int) -> Chunk:
    if replica == 0:
        return chunk

    def rename(match: re.Match[str]) -> str:
        word = match.group(1)
        return f"{word}_r{replica}" if _seed(word) % 4 == replica % 4 else word

    return Chunk.create(chunk.kind, f"replica{replica}/{chunk.path}", chunk.start_line,
                        chunk.end_line, _IDENTIFIER.sub(rename, chunk.text),
                        module=chunk.module, qualname=_IDENTIFIER.sub(rename, chunk.qualname))


def synthesise(seed: list[Chunk], target: int, directory: Path) -> Corpus:
    chunks: list[Chunk] = []
    replica = 0
    while len(chunks) < target:
        chunks.extend(perturb(chunk, replica) for chunk in seed)
        replica += 1
    chunks = list({chunk.id: chunk for chunk in chunks[:target]}.values())
    counts = Counter(chunk.kind for chunk in chunks)
    manifest = CorpusManifest(
        name="bench", source="bench/retrieval.py synthesis", source_kind="directory",
        sha256="sha256:" + "0" * 64, content_hash=content_hash(chunks), chunks=len(chunks),
        counts={kind: counts.get(kind, 0) for kind in CHUNK_KINDS}, files=0, knowbench=__version__)
    write_corpus(directory, manifest, chunks)
    return open_corpus(directory)


def timed(action: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def latencies(action: Callable[[str], object], queries: list[str]) -> tuple[float, float]:
    action(queries[0])  # warm-up
    times = []
    for query in queries:
        started = time.perf_counter()
        action(query)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def make_queries(chunks: list[Chunk], count: int) -> list[str]:
    rng = random.Random(0)
    functions = [chunk for chunk in chunks if chunk.kind == "function"]
    picked = rng.sample(functions, min(count, len(functions)))
    return [chunk.text.split(":\n", 1)[0].removeprefix("def ")[:300] for chunk in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=count(1), default=50_000)
    parser.add_argument("--queries", type=count(1), default=200)
    parser.add_argument("--corpus", default=None, help="seed from this corpus instead")
    args = parser.parse_args()

    rows: list[tuple[str, str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="knowbench-bench-") as tmp:
        seed, seed_label = seed_chunks(args.corpus)
        build_s, corpus = timed(lambda: synthesise(seed, args.chunks, Path(tmp) / "corpus"))
        assert isinstance(corpus, Corpus)
        tokens = sum(len(chunk.text) for chunk in corpus.chunks) // 4
        print(f"seed: {len(seed):,} chunks from {seed_label}")
        print(f"corpus: {len(corpus):,} chunks, ~{tokens:,} tokens (synthesised and written in "
              f"{build_s:.1f} s)")
        queries = make_queries(corpus.chunks, args.queries)

        bm25_build, bm25 = timed(lambda: BM25Retriever(corpus))
        bm25_load, _ = timed(lambda: BM25Retriever(corpus))
        assert isinstance(bm25, BM25Retriever)
        median, p95 = latencies(lambda q: bm25.search(q, 10), queries)
        rows.append(("bm25", f"{len(corpus):,}", f"{bm25_build:.2f}", f"{bm25_load:.2f}",
                     f"{median:.2f}", f"{p95:.2f}"))

        dense_build, dense = timed(lambda: DenseRetriever(corpus, RandomEncoder()))
        dense_load, _ = timed(lambda: DenseRetriever(corpus, RandomEncoder()))
        assert isinstance(dense, DenseRetriever)
        # The random encoder's query "encoding" costs ~0.05 ms: the latency is the search.
        median, p95 = latencies(lambda q: dense.search(q, 10), queries)
        rows.append(("dense (exact, random vectors)", f"{len(corpus):,}", f"{dense_build:.2f}",
                     f"{dense_load:.2f}", f"{median:.2f}", f"{p95:.2f}"))

        hybrid = HybridRetriever(corpus, bm25, dense)
        median, p95 = latencies(lambda q: hybrid.search(q, 10), queries)
        rows.append(("hybrid (rrf, k=60)", f"{len(corpus):,}", "-", "-", f"{median:.2f}",
                     f"{p95:.2f}"))

        if dense_available() is None:
            from knowbench.knowledge.dense import default_encoder

            encoder = default_encoder()
            sample = [embed_text(chunk) for chunk in random.Random(1).sample(corpus.chunks, 128)]
            seconds, _ = timed(lambda: encoder.encode(sample))
            rate = len(sample) / seconds
            median, p95 = latencies(lambda q: encoder.encode([q]), queries[:30])
            rows.append(("MiniLM: embed chunks", "128 sampled", f"{rate:.1f} chunks/s",
                         f"full: ~{len(corpus) / rate / 60:.0f} min", "-", "-"))
            rows.append(("MiniLM: encode one query", "30 queries", "-", "-", f"{median:.1f}",
                         f"{p95:.1f}"))
        else:
            print("dense extra not installed: real-model rows skipped")

    headers = ("retriever", "chunks", "build s", "load s", "median query ms", "p95 query ms")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    print()
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    print("\ngoals: BM25 build < 10 s, BM25 query < 10 ms (not asserted; depends on the machine)")


if __name__ == "__main__":
    main()
