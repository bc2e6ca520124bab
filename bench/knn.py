"""kNN-LM datastore cost: build rate and per-token lookup latency against store size.

1. Build rate: `build_entries` (one forward pass per window, the final-layer hidden state of
   every token kept) over Python source (knowbench's own files), in tokens per second. The
   model is `--model PATH` or, by default, a randomly initialised Llama of `--hidden` width and
   `--layers` layers with a byte-level BPE tokenizer trained here (speed does not depend on
   the weights' values, only on the architecture).
2. Lookup: stores of 10k, 100k and 1M entries (`--sizes`) of `--dim`-dimensional keys (random
   Gaussian: the hardest case for an inverted file, whose recall is reported) searched for k
   neighbours of one query at a time, as one decoding step of one sequence does: exact faiss
   (IndexFlatL2), faiss IVF (IndexIVFFlat, nlist = 4·√N, nprobe 32) and exact numpy. Index
   build time, mean and p95 latency per query and IVF's recall@k against exact search.

    python bench/knn.py [--sizes 10000,100000,1000000] [--dim 256] [--k 1024] [--queries 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from knowbench import __version__
from knowbench.knowledge.datastore import Datastore, build_entries, faiss_available
from options import count, counts

SOURCE = Path(__file__).resolve().parents[1] / "src" / "knowbench"


def random_model(directory: Path, texts: list[str], hidden: int, layers: int) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=8000, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")
    fast.save_pretrained(directory)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 4,
                         num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
                         max_position_embeddings=2048)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def build_rate(model_ref: str | None, hidden: int, layers: int, tokens: int,
               max_length: int) -> dict[str, float]:
    from knowbench.models.hf import load_model

    texts = [path.read_text() for path in sorted(SOURCE.rglob("*.py"))]
    with tempfile.TemporaryDirectory() as scratch:
        ref = model_ref or str(random_model(Path(scratch) / "model", texts, hidden, layers))
        loaded = load_model(ref)
        chosen, count = [], 0
        for text in texts:  # about `tokens` tokens of source
            chosen.append(text)
            count += len(loaded.tokenizer(text)["input_ids"])
            if count >= tokens:
                break
        build_entries(loaded.model, loaded.tokenizer, chosen[:1], max_length, device=loaded.device)
        started = time.perf_counter()
        keys, _ = build_entries(loaded.model, loaded.tokenizer, chosen, max_length,
                                device=loaded.device)
        elapsed = time.perf_counter() - started
    return {"entries": len(keys), "dim": keys.shape[1], "seconds": elapsed,
            "tokens_per_s": len(keys) / elapsed, "model": model_ref or f"random llama {hidden}x{layers}"}


def lookup(size: int, dim: int, k: int, queries: int, kinds: list[str]) -> list[dict[str, float | str]]:
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((size, dim), dtype=np.float32)
    values = rng.integers(0, 32000, size)
    probes = keys[rng.choice(size, queries, replace=False)] + \
        0.1 * rng.standard_normal((queries, dim), dtype=np.float32)
    rows: list[dict[str, float | str]] = []
    exact: np.ndarray | None = None
    for kind in kinds:
        started = time.perf_counter()
        store = Datastore(keys, values, index=kind)
        built = time.perf_counter() - started
        store.search(probes[:1], k)  # warm up
        latencies, found = [], []
        for probe in probes:
            started = time.perf_counter()
            _, tokens = store.search(probe[None, :], k)
            latencies.append(time.perf_counter() - started)
            found.append(tokens[0])
        row: dict[str, float | str] = {
            "size": size, "index": kind, "build_s": built,
            "mean_ms": 1000 * statistics.mean(latencies),
            "p95_ms": 1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))]}
        if kind == "flat" or (kind == "numpy" and exact is None):
            exact = store.search(probes, k)[1]
        if kind == "ivf" and exact is not None:
            ivf = store.search(probes, k)[1]
            row["recall"] = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ivf, exact, strict=True)]))
        rows.append(row)
        del store
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=counts(1), default="10000,100000,1000000")
    parser.add_argument("--dim", type=count(1), default=256)
    parser.add_argument("--k", type=count(1), default=1024)
    parser.add_argument("--queries", type=count(1), default=100)
    parser.add_argument("--model", default=None, help="a local model directory for the build rate")
    parser.add_argument("--hidden", type=count(1), default=256)
    parser.add_argument("--layers", type=count(1), default=4)
    parser.add_argument("--build-tokens", type=count(1), default=20000)
    parser.add_argument("--max-length", type=count(1), default=512)
    args = parser.parse_args()

    print(f"knowbench {__version__} · kNN-LM datastore · faiss: {faiss_available()}")
    rate = build_rate(args.model, args.hidden, args.layers, args.build_tokens, args.max_length)
    print(f"build: {rate['entries']} entries (dim {rate['dim']}) in {rate['seconds']:.2f} s = "
          f"{rate['tokens_per_s']:.0f} tokens/s ({rate['model']}, CPU)")
    kinds = ["flat", "ivf", "numpy"] if faiss_available() else ["numpy"]
    print(f"\nlookup: one query, k={args.k}, dim {args.dim}, {args.queries} queries per store")
    print(f"{'entries':>9} {'index':>6} {'build s':>8} {'mean ms':>8} {'p95 ms':>8} {'recall':>7}")
    for size in args.sizes:
        for row in lookup(size, args.dim, args.k, args.queries, kinds):
            recall = f"{row['recall']:.3f}" if "recall" in row else "exact"
            print(f"{row['size']:>9} {row['index']:>6} {row['build_s']:>8.2f} "
                  f"{row['mean_ms']:>8.2f} {row['p95_ms']:>8.2f} {recall:>7}", flush=True)


if __name__ == "__main__":
    main()
