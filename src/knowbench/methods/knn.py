"""kNN-LM (`--method knn-lm --corpus NAME`): the prompt is the task alone, as with `none`; the
knowledge enters at every decoding step. The model's next-token distribution is mixed with
one from the corpus's datastore (`knowbench.knowledge.datastore`):

    p(w) = (1 - λ) · p_model(w) + λ · p_kNN(w),   p_kNN(w) ∝ Σ_{neighbours with value w} exp(-d / T)

over the k nearest keys of the current final-layer hidden state, d their squared L2 distance.
Only local models can take it (`--model hf:...`). The datastore holds the corpus without the
chunks leakage control withholds from any task of the run (`withheld_chunks`), is built once
and cached, keyed by the model, the corpus hash and what was withheld.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.knowledge.corpus import Corpus, open_corpus
from knowbench.knowledge.leakage import withheld_chunks
from knowbench.methods.base import Method, Prompt
from knowbench.methods.prompts import task_messages
from knowbench.models.base import ModelBackend

if TYPE_CHECKING:
    import numpy as np

    from knowbench.knowledge.datastore import Datastore
    from knowbench.models.hf import LoadedModel


class KnnProcessor:
    """The logits processor: returns log((1-λ)·softmax(scores) + λ·p_kNN) for each row."""

    def __init__(self, store: Datastore, captured: dict[str, Any], lam: float, k: int,
                 temperature: float) -> None:
        self.store, self.captured = store, captured
        self.lam, self.k, self.temperature = lam, k, temperature

    def knn_distribution(self, states: np.ndarray, vocab: int) -> np.ndarray:
        import numpy as np  # only where a local model decodes: the command line starts without it

        distances, tokens = self.store.search(states, self.k)
        logits = -distances / self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.where(tokens >= 0, np.exp(logits), 0.0)
        weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-30)
        p_knn = np.zeros((len(states), vocab), dtype=np.float64)
        rows = np.repeat(np.arange(len(states)), tokens.shape[1])
        valid = (tokens >= 0).ravel() & (tokens < vocab).ravel()
        np.add.at(p_knn, (rows[valid], tokens.ravel()[valid]), weights.ravel()[valid])
        return p_knn

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        states = self.captured["states"][:, -1, :].float().cpu().numpy()
        p_knn = torch.from_numpy(self.knn_distribution(states, scores.shape[-1]))
        p_model = torch.softmax(scores.double().cpu(), dim=-1)
        mixed = (1.0 - self.lam) * p_model + self.lam * p_knn
        return torch.log(mixed).to(dtype=torch.float32, device=scores.device)


class KnnLM(Method):
    name = "knn-lm"

    def __init__(self, corpus: str | Corpus | None = None, knn_lambda: float = 0.25,
                 knn_k: int = 1024, knn_temperature: float = 1.0, knn_index: str = "auto",
                 knn_max_length: int = 512, **options: Any) -> None:
        del options  # options of other methods
        if not corpus:
            raise UserError("method 'knn-lm' needs a knowledge corpus for its datastore\n  fix: "
                            "pass --corpus NAME (build one with `knowbench corpus build SOURCE "
                            "--name NAME`)")
        if not 0.0 <= knn_lambda <= 1.0:
            raise UserError(f"--knn-lambda must lie in [0, 1], got {knn_lambda}")
        if knn_k < 1 or knn_temperature <= 0 or knn_max_length < 2:
            raise UserError("--knn-k must be >= 1, --knn-temperature > 0 and the window >= 2 tokens")
        self.corpus = corpus if isinstance(corpus, Corpus) else open_corpus(corpus)
        self.lam, self.k, self.temperature = knn_lambda, knn_k, knn_temperature
        self.index, self.max_length = knn_index, knn_max_length
        self.backend: Any = None
        self.tasks: list[FunctionTask | ChoiceTask] = []
        self._store: Datastore | None = None
        self._withheld: dict[str, str] = {}
        self._key = ""

    def attach(self, backend: ModelBackend) -> None:
        if not hasattr(backend, "add_hook") or not hasattr(backend, "loaded"):
            raise UserError(f"--method knn-lm interpolates a local model's next-token "
                            f"distribution; --model {backend.name} gives no access to it\n"
                            "  fix: use a local model, --model hf:PATH (see docs/local-models.md)")
        self.backend = backend
        if self not in backend.hooks:
            backend.add_hook(self)

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        """Keeps the run's tasks (their targets are withheld from the datastore) and builds or
        opens the datastore, so a run fails before any sample when it cannot be built."""
        self.tasks = list(tasks)
        self._store = None
        self.datastore()
        return []

    def datastore(self) -> Datastore:
        """The datastore of this method's corpus for the attached model (built once, cached)."""
        if self._store is not None:
            return self._store
        if self.backend is None:
            raise UserError("method 'knn-lm' has no model yet: attach it to an hf backend first")
        from knowbench.knowledge.datastore import (
            Datastore,
            build_entries,
            cached_entries,
            datastore_key,
            default_datastore_dir,
        )

        loaded: LoadedModel = self.backend.loaded
        self._withheld = withheld_chunks(self.corpus.chunks, self.tasks)
        kept = [chunk for chunk in self.corpus.chunks if chunk.id not in self._withheld]
        identity = {"model": loaded.identity, "corpus_hash": self.corpus.content_hash,
                    "withheld": sorted(self._withheld), "max_length": self.max_length}
        self._key = datastore_key(identity)
        keys, values, _ = cached_entries(
            default_datastore_dir(self._key),
            lambda: build_entries(loaded.model, loaded.tokenizer, [chunk.text for chunk in kept],
                                  self.max_length, device=loaded.device),
            {"corpus": self.corpus.name, **identity, "withheld": len(self._withheld)})
        self._store = Datastore(keys, values, index=self.index)
        return self._store

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        store = self.datastore()
        messages = task_messages(task)
        trace = {"method": self.name, "corpus": self.corpus.name,
                 "corpus_hash": self.corpus.content_hash, "lambda": self.lam, "k": self.k,
                 "temperature": self.temperature, "store_size": len(store),
                 "index": store.kind, "withheld_chunks": len(self._withheld),
                 "prompt_tokens": Prompt(messages=messages).approx_tokens}
        return Prompt(messages=messages, trace=trace)

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "corpus": self.corpus.name,
                "corpus_hash": self.corpus.content_hash, "knn_lambda": self.lam,
                "knn_k": self.k, "knn_temperature": self.temperature, "knn_index": self.index,
                "knn_max_length": self.max_length, "datastore": self._key}

    @contextlib.contextmanager
    def processor(self, loaded: LoadedModel) -> Iterator[KnnProcessor]:
        """The decoding hook the hf backend applies: one processor per generated batch."""
        from knowbench.knowledge.datastore import captured_hidden_states

        store = self.datastore()
        with captured_hidden_states(loaded.model) as captured:
            yield KnnProcessor(store, captured, self.lam, self.k, self.temperature)
