"""A retrieval corpus from a benchmark's pool of knowledge bundles, so `rag-bm25` / `rag-dense`
over the same knowledge can be compared with `oracle:<cell>` on the same tasks (NovelAPIBench's
oracle-against-retriever comparison).

Each bundle becomes up to four kinds of chunk, named so hit@k finds its API:

- S: a `function` chunk holding the signature line and the parameter descriptions
  (module and qualname from the API's dotted name, so its full name is the API);
- C: a `function` chunk holding the implementation source, named the same way;
- E: one `example` chunk per example that did not fail (`bundles/<api>/example_<i>.py`);
- M: a `doc` chunk holding the mechanism text, with a `.. py:function:: <api>` line first so
  that a documentation chunk is recognised as documenting the API.

The pool can be read from a release `bundles.jsonl` (or a release root), from `knowbench
import novelapibench`'s `bundles.jsonl`, or from a benchmark whose tasks carry bundles.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from knowbench import __version__
from knowbench.benchmark.schema import FunctionTask, KnowledgeBundle
from knowbench.builders.novelapibench import BENCHMARK_DIR, bundle_from_record
from knowbench.errors import UserError
from knowbench.jsonl import read_objects
from knowbench.knowledge.bundles import _mechanism, _signature
from knowbench.knowledge.corpus import (
    CHUNK_KINDS,
    Chunk,
    ChunkKind,
    Corpus,
    CorpusManifest,
    content_hash,
    write_corpus,
)


def read_pool(source: Path) -> dict[str, KnowledgeBundle]:
    """api_name -> bundle, from any of the layouts in the module docstring. `UserError` for a
    path that holds none, naming the file and line of a record that cannot be read."""
    source = Path(source)
    candidates = [source] if source.is_file() else [
        source / BENCHMARK_DIR / "bundles.jsonl", source / "bundles.jsonl", source / "tasks.jsonl"]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise UserError(f"{source}: no bundles found\n  fix: pass a bundles.jsonl (release records or "
                        "`knowbench import novelapibench` output), a release root, or a benchmark "
                        "directory whose tasks carry bundles")
    pool: dict[str, KnowledgeBundle] = {}
    for number, row in read_objects(path):
        try:
            if "bundle" in row and "api_name" in row:  # knowbench's importer output
                pool[row["api_name"]] = KnowledgeBundle.model_validate(row["bundle"])
            elif "s_name" in row:  # a release record
                pool[row.get("api_name") or row["s_name"]] = bundle_from_record(row)
            elif row.get("kind") == "function" and row.get("bundle"):  # a benchmark task
                task = FunctionTask.model_validate(row)
                if task.bundle is not None:
                    pool.setdefault(task.target_api or task.bundle.signature.qualified_name, task.bundle)
            elif path.name != "tasks.jsonl":
                raise ValueError("neither a release bundle record (s_name), an imported one "
                                 "(api_name + bundle), nor a task with a bundle")
        except ValueError as error:
            raise UserError(f"{path}:{number}: {error}") from None
    if not pool:
        raise UserError(f"{path}: holds no knowledge bundle")
    return pool


def bundle_chunks(api: str, bundle: KnowledgeBundle) -> list[Chunk]:
    module, _, leaf = api.rpartition(".")
    base = f"bundles/{api}"
    chunks: list[Chunk] = []

    def add(kind: ChunkKind, path: str, text: str, qualname: str, module_name: str = "") -> None:
        lines = max(1, text.count("\n") + 1)
        chunks.append(Chunk.create(kind, path, 1, lines, text, module=module_name, qualname=qualname))

    signature = _signature(bundle)
    if signature:
        add("function", f"{base}/signature.py", signature, leaf, module)
    if bundle.source.strip():
        add("function", f"{base}/implementation.py", bundle.source.strip(), leaf, module)
    for index, example in enumerate(bundle.examples):
        if example.status != "failed" and example.code.strip():
            add("example", f"{base}/example_{index}.py", example.code.strip(), f"{leaf} example {index}")
    mechanism = _mechanism(bundle)
    if mechanism:
        add("doc", f"{base}/mechanism.md", f".. py:function:: {api}\n\n{mechanism}", f"{api} > mechanism")
    return chunks


def build_bundle_corpus(pool: dict[str, KnowledgeBundle], name: str, directory: Path,
                        source: str) -> Corpus:
    chunks = [chunk for api, bundle in sorted(pool.items()) for chunk in bundle_chunks(api, bundle)]
    if not chunks:
        raise UserError(f"{source}: the bundles hold no text to index")
    counts = Counter(chunk.kind for chunk in chunks)
    digest = hashlib.sha256(json.dumps({api: bundle.model_dump(mode="json") for api, bundle in sorted(pool.items())},
                                       sort_keys=True).encode()).hexdigest()
    manifest = CorpusManifest(
        name=name, source=source, source_kind="bundles", version=None, sha256=f"sha256:{digest}",
        content_hash=content_hash(chunks), chunks=len(chunks),
        counts={kind: counts.get(kind, 0) for kind in CHUNK_KINDS}, files=len(pool),
        created=datetime.now(UTC).isoformat(timespec="seconds"), knowbench=__version__)
    return write_corpus(directory, manifest, chunks)
