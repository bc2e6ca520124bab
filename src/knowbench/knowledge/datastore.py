"""The kNN-LM datastore: the final-layer hidden state of every corpus token's context (the
input of the model's output projection) as a key, with the token that follows it as the value
(Khandelwal et al., 2020).

Keys are searched by squared L2 distance: with faiss (faiss-cpu) an exact `IndexFlatL2` up to
`EXACT_LIMIT` entries and an `IndexIVFFlat` beyond (approximate: `nprobe` of its `nlist`
cells are searched); without faiss, an exact numpy search. Stores are cached on disk under
`$KNOWBENCH_HOME/datastores/KEY/` (`keys.npy`, `values.npy`, `meta.json`), KEY covering the
model's identity, the corpus content hash, the withheld chunks and the window length.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowbench.errors import UserError
from knowbench.paths import knowbench_home

DATASTORE_FORMAT = 1
EXACT_LIMIT = 1_000_000
# Searches of fewer queries than this run on one thread: for the few rows of one decoding step,
# faiss's OpenMP threads cost more than they save (10x slower on a busy 2-core machine).
SINGLE_THREAD_BELOW = 16
INDEX_KINDS = ("auto", "flat", "ivf", "numpy")


def faiss_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


class Datastore:
    """Keys (float32, one row per entry) and values (token ids), with a search index."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, index: str = "auto",
                 nprobe: int = 32) -> None:
        if index not in INDEX_KINDS:
            raise UserError(f"unknown datastore index '{index}'; choose one of {', '.join(INDEX_KINDS)}")
        if len(keys) != len(values) or not len(keys):
            raise UserError("a kNN-LM datastore needs at least one entry (is the corpus empty, "
                            "or did leakage control withhold all of it?)")
        self.keys = np.ascontiguousarray(keys, dtype=np.float32)
        self.values = np.asarray(values, dtype=np.int64)
        if index == "auto":
            index = "numpy" if not faiss_available() else ("flat" if len(keys) <= EXACT_LIMIT else "ivf")
        self.kind = index
        self.nprobe = nprobe
        self._index = self._build_index(index)
        self._norms = (self.keys * self.keys).sum(axis=1) if index == "numpy" else None

    def _build_index(self, kind: str) -> Any:
        if kind == "numpy":
            return None
        if not faiss_available():
            raise UserError(f"datastore index '{kind}' needs faiss\n  fix: pip install 'knowbench[train]' "
                            "(faiss-cpu), or use the numpy index")
        import faiss

        dim = self.keys.shape[1]
        if kind == "flat":
            index = faiss.IndexFlatL2(dim)
        else:
            nlist = max(1, min(int(4 * np.sqrt(len(self.keys))), len(self.keys) // 39 or 1))
            index = faiss.IndexIVFFlat(faiss.IndexFlatL2(dim), dim, nlist)
            sample = self.keys[np.random.default_rng(0).permutation(len(self.keys))[: nlist * 64]]
            index.train(sample)
            index.nprobe = min(self.nprobe, nlist)
        index.add(self.keys)
        return index

    def __len__(self) -> int:
        return len(self.values)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(squared L2 distances, next tokens) of the `k` nearest keys of each query, nearest
        first; rows an approximate index could not fill have distance inf and token -1."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = max(1, min(k, len(self)))
        if self._index is not None:
            import faiss

            threads = faiss.omp_get_max_threads()
            if len(queries) < SINGLE_THREAD_BELOW:
                faiss.omp_set_num_threads(1)
            try:
                distances, found = self._index.search(queries, k)
            finally:
                faiss.omp_set_num_threads(threads)
        else:
            assert self._norms is not None
            distances = ((queries * queries).sum(axis=1, keepdims=True) - 2.0 * queries @ self.keys.T
                         + self._norms[None, :])
            found = np.argpartition(distances, k - 1, axis=1)[:, :k] if k < len(self) else \
                np.tile(np.arange(len(self)), (len(queries), 1))
            distances = np.take_along_axis(distances, found, axis=1)
            order = np.argsort(distances, axis=1, kind="stable")
            found = np.take_along_axis(found, order, axis=1)
            distances = np.maximum(np.take_along_axis(distances, order, axis=1), 0.0)
        tokens = np.where(found >= 0, self.values[np.maximum(found, 0)], -1)
        return np.where(found >= 0, distances, np.inf).astype(np.float32), tokens

    def describe(self) -> dict[str, Any]:
        return {"entries": len(self), "dim": int(self.keys.shape[1]), "index": self.kind}


@contextlib.contextmanager
def captured_hidden_states(model: Any, skip_head: bool = False) -> Iterator[dict[str, Any]]:
    """While open, `captured["states"]` holds the input of the model's output projection (the
    final-layer hidden states, after the final norm) of its latest forward pass. `skip_head`:
    the projection itself is not computed (its output is a placeholder of width 1), which saves
    most of the work when only the states are wanted."""
    captured: dict[str, Any] = {}
    head = model.get_output_embeddings()
    if head is None:
        raise UserError("kNN-LM needs a model with an output projection (a causal LM head)")

    def keep(module: Any, args: tuple[Any, ...]) -> None:
        captured["states"] = args[0]

    handle = head.register_forward_pre_hook(keep)
    if skip_head:
        head.forward = lambda states, *args, **kwargs: states[..., :1]
    try:
        yield captured
    finally:
        handle.remove()
        if skip_head:
            del head.forward


def token_ids(tokenizer: Any, text: str) -> list[int]:
    """How a corpus text is tokenized for the datastore (and for training on it)."""
    return list(tokenizer(text)["input_ids"])


def build_entries(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int = 512,
                  batch_size: int = 8, device: str = "cpu",
                  on_progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keys and values of every token of `texts` that has a next token, in windows of
    `max_length` tokens. `on_progress(done, total)` after each batch of windows."""
    import torch

    windows = [ids[start:start + max_length] for ids in (token_ids(tokenizer, text) for text in texts)
               for start in range(0, max(len(ids) - 1, 0), max_length)]
    windows = [window for window in windows if len(window) > 1]
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    keys: list[np.ndarray] = []
    values: list[np.ndarray] = []
    with torch.inference_mode(), captured_hidden_states(model, skip_head=True) as captured:
        for start in range(0, len(windows), batch_size):
            batch = windows[start:start + batch_size]
            width = max(len(window) for window in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, window in enumerate(batch):
                ids[row, :len(window)] = torch.tensor(window)
                mask[row, :len(window)] = 1
            model(input_ids=ids.to(device), attention_mask=mask.to(device))
            states = captured["states"].float().cpu().numpy()
            for row, window in enumerate(batch):
                keys.append(states[row, :len(window) - 1])
                values.append(np.asarray(window[1:], dtype=np.int64))
            if on_progress:
                on_progress(min(start + batch_size, len(windows)), len(windows))
    if not keys:
        raise UserError("the corpus gave no tokens for a kNN-LM datastore")
    return np.concatenate(keys).astype(np.float32), np.concatenate(values)


def datastore_key(identity: dict[str, Any]) -> str:
    canonical = json.dumps({"format": DATASTORE_FORMAT, **identity}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def default_datastore_dir(key: str) -> Path:
    return knowbench_home() / "datastores" / key


def cached_entries(directory: Path, build: Callable[[], tuple[np.ndarray, np.ndarray]],
                   meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, bool]:
    """(keys, values, reused): those stored in `directory`, else built and stored there
    (written to a temporary name first, so a killed build leaves nothing half written)."""
    keys_file, values_file = directory / "keys.npy", directory / "values.npy"
    if keys_file.is_file() and values_file.is_file():
        return np.load(keys_file), np.load(values_file), True
    started = time.monotonic()
    keys, values = build()
    directory.mkdir(parents=True, exist_ok=True)
    for path, array in ((keys_file, keys), (values_file, values)):
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        with partial.open("wb") as handle:
            np.save(handle, array)
        os.replace(partial, path)
    record = {**meta, "entries": len(values), "dim": int(keys.shape[1]),
              "build_s": round(time.monotonic() - started, 3)}
    (directory / "meta.json").write_text(json.dumps(record, indent=2) + "\n")
    return keys, values, False
