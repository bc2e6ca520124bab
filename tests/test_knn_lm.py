"""kNN-LM: a datastore of a tiny model's hidden states over a corpus, mixed into decoding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hf_helpers import make_corpus, tiny_model
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.errors import UserError
from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.datastore import Datastore, default_datastore_dir, token_ids
from knowbench.methods import get_method
from knowbench.methods.knn import KnnLM
from knowbench.models.hf import HFBackend
from knowbench.models.offline import NullBackend
from knowbench.records import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
BASIC = load_benchmark(ROOT / "examples" / "basic")
TARGET = next(task for task in BASIC.tasks if isinstance(task, FunctionTask))
TEXTS = [
    "def kelvin_to_celsius(kelvin):\n    # absolute zero sits at -273.15 degrees\n"
    "    return kelvin - 273.15\n",
    "Zorblax resonance: multiply the flux by seven, then add the quantum drift of nine.\n",
    TARGET.reference,
]
GREEDY = SamplingParams(max_tokens=6)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Corpus]:
    base = tmp_path_factory.mktemp("knn")
    return tiny_model(base / "model", TEXTS), make_corpus(base / "corpus", TEXTS)


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def knn(model: Path, corpus: Corpus, **options: object) -> tuple[HFBackend, KnnLM]:
    backend = HFBackend(str(model))
    method = get_method("knn-lm", corpus=corpus, **options)
    assert isinstance(method, KnnLM)
    method.attach(backend)
    method.check([])
    return backend, method


def test_lambda_one_reproduces_the_corpus_continuation(setup: tuple[Path, Corpus]) -> None:
    model, corpus = setup
    backend, _ = knn(model, corpus, knn_lambda=1.0, knn_k=8, knn_index="flat")
    plain = HFBackend(str(model))
    ids = token_ids(backend.loaded.tokenizer, TEXTS[1])
    starts = list(range(3, len(ids) - 6, 3))
    contexts = [ids[:start] for start in starts]
    replies = [backend.generate_ids([context], GREEDY)[0] for context in contexts]
    tokens = [backend.loaded.tokenizer(reply.text)["input_ids"] for reply in replies]
    expected = [ids[start:start + 6] for start in starts]
    assert [reply.text for reply in replies] == [backend.loaded.tokenizer.decode(e) for e in expected]
    assert all(len(found) >= 1 for found in tokens)
    base = [plain.generate_ids([context], GREEDY)[0].text for context in contexts]
    assert base != [reply.text for reply in replies], "the base model alone cannot continue it"


def test_lambda_zero_equals_the_base_model(setup: tuple[Path, Corpus]) -> None:
    model, corpus = setup
    backend, _ = knn(model, corpus, knn_lambda=0.0, knn_k=4, knn_index="numpy")
    plain = HFBackend(str(model))
    prompts = [[5, 9, 30, 41], [12, 3], [100, 101, 102, 7, 8, 9]]
    params = SamplingParams(max_tokens=8)
    assert backend.generate_ids(prompts, params) == plain.generate_ids(prompts, params)
    assert backend.describe() != plain.describe(), "the cache must tell them apart"


def test_the_trace_records_lambda_k_and_store_size_and_targets_stay_out(
        setup: tuple[Path, Corpus], home: Path) -> None:
    model, corpus = setup
    backend, method = knn(model, corpus, knn_lambda=0.5, knn_k=16)
    everything = len(method.datastore())
    method.check([TARGET])  # the run's task: its reference (the third text) is withheld
    trace = method.prompt(TARGET).trace
    tokenizer = backend.loaded.tokenizer
    expected = sum(len(token_ids(tokenizer, text)) - 1 for text in TEXTS[:2])
    assert trace["store_size"] == expected < everything
    assert (trace["lambda"], trace["k"], trace["withheld_chunks"]) == (0.5, 16, 1)
    assert len(list((home / "datastores").iterdir())) == 2  # one store per withheld set
    again = get_method("knn-lm", corpus=corpus, knn_lambda=0.5, knn_k=16)
    again.attach(HFBackend(str(model)))
    again.check([TARGET])
    assert again.describe()["datastore"] == method.describe()["datastore"]
    assert (default_datastore_dir(method.describe()["datastore"]) / "meta.json").is_file()


def test_knn_lm_needs_a_local_model(setup: tuple[Path, Corpus]) -> None:
    _, corpus = setup
    with pytest.raises(UserError, match="hf:PATH"):
        get_method("knn-lm", corpus=corpus).attach(NullBackend())
    with pytest.raises(UserError, match="--corpus"):
        get_method("knn-lm")


@pytest.mark.parametrize("kind", ["flat", "ivf", "numpy"])
def test_every_index_finds_an_exact_key_first(kind: str) -> None:
    rng = np.random.default_rng(0)
    keys = rng.normal(size=(3000, 16)).astype(np.float32)
    store = Datastore(keys, np.arange(3000), index=kind)
    distances, tokens = store.search(keys[[5, 2500]], 10)
    assert tokens[:, 0].tolist() == [5, 2500] and np.allclose(distances[:, 0], 0.0, atol=1e-4)
    assert (np.diff(distances, axis=1) >= -1e-5).all()
