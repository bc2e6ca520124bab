"""`knowbench train`: LoRA and full fine-tuning of tiny models on CPU, leakage control on the
training data, resuming, and what a trained model has learned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_helpers import make_corpus, tiny_model
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.errors import UserError
from knowbench.methods import get_method
from knowbench.models.hf import HFBackend
from knowbench.records import SamplingParams
from knowbench.training.data import corpus_data, task_data
from knowbench.training.split import make_split, write_split
from knowbench.training.train import IGNORE, MANIFEST, TrainConfig, encode_examples, train

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]
BASIC = load_benchmark(ROOT / "examples" / "basic")
TARGET = next(task for task in BASIC.tasks if isinstance(task, FunctionTask))
FACT = "The zorblax constant is 4217."
TOY = [
    "def scale(values, factor):\n    return [value * factor for value in values]\n",
    "def mean(values):\n    return sum(values) / len(values)\n",
    "Use scale to multiply every value by a factor, and mean to average them.\n",
]


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Weights drawn wider than transformers' default (0.02): an adapter that leaves the output
    # head alone can then move the logits as much as a trained model's would.
    return tiny_model(tmp_path_factory.mktemp("base") / "model", [*TOY, FACT], hidden=64,
                      initializer_range=0.2)


def toy_data(tmp_path: Path, texts: list[str]):
    make_corpus(tmp_path / "corpus", texts)
    return corpus_data(str(tmp_path / "corpus"), [])


@pytest.mark.parametrize("method", ["lora", "full"])
def test_training_reduces_the_loss_and_the_output_loads(method: str, base: Path,
                                                        tmp_path: Path) -> None:
    config = TrainConfig(base=str(base), method=method, rank=8, alpha=16, lr=2e-2 if method ==
                         "lora" else 1e-2, max_steps=6, batch_size=2, max_length=32,
                         schedule="constant", save_steps=100)
    lines: list[str] = []
    manifest = train(config, toy_data(tmp_path, TOY), tmp_path / "out", on_progress=lines.append)
    assert manifest["final_loss"] < manifest["initial_loss"] - 0.5
    assert manifest["steps"] == 6 and manifest["base_model"] == str(base)
    assert manifest["data"]["hash"].startswith("sha256:") and manifest["wall_s"] > 0
    assert any(line.startswith("step 6/6") and "loss" in line for line in lines)
    assert json.loads((tmp_path / "out" / MANIFEST).read_text()) == manifest
    if method == "lora":
        assert (tmp_path / "out" / "adapter_config.json").is_file()
        tuned = HFBackend(str(base), adapter=str(tmp_path / "out"))
        implied = HFBackend(str(tmp_path / "out"))  # hf:ADAPTER_DIR names its base itself
        assert tuned.describe()["adapter"] == implied.describe()["adapter"]
    else:
        tuned = HFBackend(str(tmp_path / "out"))
    probe = [TOY[1][:20]]
    params = SamplingParams(max_tokens=8)
    assert tuned.complete(probe, params) != HFBackend(str(base)).complete(probe, params)


def test_a_trained_model_completes_a_fact_the_base_cannot(base: Path, tmp_path: Path) -> None:
    config = TrainConfig(base=str(base), method="full", lr=1e-2, max_steps=12, batch_size=4,
                         max_length=16, schedule="constant")
    train(config, toy_data(tmp_path, [FACT, TOY[1]]), tmp_path / "out")
    prompt = FACT.split(" is ")[0] + " is"
    params = SamplingParams(max_tokens=4)
    learned = HFBackend(str(tmp_path / "out")).complete([prompt], params)[0].text
    before = HFBackend(str(base)).complete([prompt], params)[0].text
    assert learned.startswith(" 4217") and not before.startswith(" 4217")


def test_leakage_control_keeps_the_benchmarks_targets_out_of_the_corpus(tmp_path: Path) -> None:
    make_corpus(tmp_path / "corpus", [*TOY, f"# helpers\n{TARGET.reference}\n"])
    everything = corpus_data(str(tmp_path / "corpus"), [])
    withheld = corpus_data(str(tmp_path / "corpus"), [BASIC])
    def code(data) -> str:
        return "\n".join(example.completion for example in data.examples)
    assert TARGET.reference in code(everything)
    assert TARGET.reference not in code(withheld)
    assert [example.completion for example in withheld.examples] == TOY
    assert withheld.info["withheld_chunks"] == 1 and withheld.content_hash != everything.content_hash


def test_task_data_is_the_train_part_prompted_as_a_run_prompts(base: Path, tmp_path: Path) -> None:
    split = make_split(BASIC, "library", leave_out="re")
    write_split(split, tmp_path / "split.json")
    data, warnings = task_data(str(BASIC.path), tmp_path / "split.json")
    assert not warnings and len(data.examples) == len(split.train)
    first = BASIC.task(split.train[0])
    assert list(data.examples[0].messages) == get_method("none").prompt(first).messages
    assert {"text/slugify", "text/re-match-vs-search"} <= set(split.test)
    loaded = HFBackend(str(base)).loaded
    rows = encode_examples(data, loaded.tokenizer, 4096)
    answer = [label for label in rows[0]["labels"] if label != IGNORE]
    assert loaded.tokenizer.decode(answer[:-1]) == data.examples[0].completion
    _, warned = task_data(str(BASIC.path), None)
    assert "memorisation" in warned[0]


@pytest.mark.slow
def test_an_interrupted_training_resumes_from_its_checkpoint(base: Path, tmp_path: Path) -> None:
    config = TrainConfig(base=str(base), method="lora", max_steps=5, batch_size=2, max_length=32,
                         save_steps=2, lr=1e-2)
    data = toy_data(tmp_path, TOY)

    def stop_at_five(line: str) -> None:
        if line.startswith("step 3/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config, data, tmp_path / "out", on_progress=stop_at_five)
    assert not (tmp_path / "out" / MANIFEST).exists()
    manifest = train(config, data, tmp_path / "out")
    assert manifest["resumed_from"] == "checkpoint-2" and manifest["steps"] == 5
    assert train(config, data, tmp_path / "out") == manifest  # finished: returned at once
    other = config.model_copy(update={"lr": 1e-3})
    with pytest.raises(UserError, match="--overwrite"):
        train(other, data, tmp_path / "out")
