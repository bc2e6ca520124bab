"""`knowbench study`: each study trains and runs a tiny local model through the ordinary
commands into one directory and tabulates what those runs scored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run_knowbench
from hf_helpers import make_corpus, tiny_model
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import (
    BundleExample,
    BundleParameter,
    BundleSignature,
    FunctionTask,
    KnowledgeBundle,
)
from knowbench.knowledge.corpus import open_corpus
from knowbench.store import RunDirectory
from knowbench.training.split import make_split, write_split

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]
BASIC = ROOT / "examples" / "basic"
RUN = ["--max-tokens", "4", "--env", "self", "--workers", "1"]


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "KNOWBENCH_HOME": str(tmp_path / "home"),
            "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}


def pass_at_1(run_dir: str) -> float:
    return RunDirectory.open(Path(run_dir)).summary()["scores"]["overall"]["pass_at"]["1"]


def settings(run_dir: str) -> dict:
    return RunDirectory.open(Path(run_dir)).document()["settings"]


def test_forgetting_scores_base_and_tuned_model_the_same_way(tmp_path: Path, env) -> None:
    model = tiny_model(tmp_path / "model")
    make_corpus(tmp_path / "corpus", ["def mean(v):\n    return sum(v) / len(v)\n"])
    done = run_knowbench("train", "--model", f"hf:{model}", "--data", f"corpus:{tmp_path / 'corpus'}",
                         "--max-steps", "1", "--batch-size", "1", "--max-length", "32", "--out",
                         str(tmp_path / "lora"), env=env)
    assert done.returncode == 0, done.stderr
    done = run_knowbench("study", "forgetting", str(BASIC), "--model", f"hf:{model}", "--tuned",
                         f"hf:{tmp_path / 'lora'}", "--out", str(tmp_path / "study"), *RUN, env=env)
    assert done.returncode == 0, done.stderr
    study = json.loads((tmp_path / "study" / "study.json").read_text())
    row = study["rows"][0]
    assert settings(row["base"]["run"])["model"].get("adapter") is None
    assert settings(row["tuned"]["run"])["model"]["adapter"] == str(tmp_path / "lora")
    base, tuned = pass_at_1(row["base"]["run"]), pass_at_1(row["tuned"]["run"])
    assert (row["base"]["pass@1"], row["tuned"]["pass@1"]) == (base, tuned)
    assert row["delta"] == pytest.approx(tuned - base)
    assert "| basic |" in (tmp_path / "study" / "study.md").read_text()
    assert "<td>basic</td>" in (tmp_path / "study" / "study.html").read_text()
    refused = run_knowbench("study", "forgetting", str(BASIC), "--model", "reference", "--tuned",
                            f"hf:{model}", "--out", str(tmp_path / "x"), env=env)
    assert refused.returncode == 2 and "hf:PATH" in refused.stderr


@pytest.mark.slow
def test_corpus_size_trains_and_retrieves_on_the_same_nested_shares(tmp_path: Path, env) -> None:
    bench = load_benchmark(BASIC)
    target = next(task for task in bench.tasks if isinstance(task, FunctionTask))
    texts = [f"def helper{i}(x):\n    return x + {i}\n" for i in range(6)]
    model = tiny_model(tmp_path / "model", texts)
    make_corpus(tmp_path / "corpus", [*texts, f"# the target\n{target.reference}\n"])
    done = run_knowbench("study", "corpus-size", str(BASIC), "--model", f"hf:{model}", "--corpus",
                         str(tmp_path / "corpus"), "--methods", "lora,rag-bm25", "--shares",
                         "0.5,1", "--max-steps", "1", "--max-length", "32", "--out",
                         str(tmp_path / "study"), *RUN, env=env)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "study" / "study.json").read_text())["rows"]
    assert [(row["share"], row["method"]) for row in rows] == [
        (0.0, "none"), (0.5, "lora"), (0.5, "rag-bm25"), (1.0, "lora"), (1.0, "rag-bm25")]
    half = open_corpus(tmp_path / "study" / "corpora" / "share-0.5")
    whole = open_corpus(tmp_path / "study" / "corpora" / "share-1")
    # leakage control first (the target's chunk is in neither), then nested shares
    assert [chunk.text for chunk in whole.chunks] == texts
    assert {chunk.id for chunk in half.chunks} < {chunk.id for chunk in whole.chunks}
    assert len(half.chunks) == 3 and rows[1]["chunks"] == 3 and rows[3]["chunks"] == 6
    assert 0 < rows[1]["tokens"] < rows[3]["tokens"]
    for row in rows[1:]:
        assert row["pass@1"] == pass_at_1(row["run"])
    assert settings(rows[2]["run"])["method"]["corpus_hash"] == half.content_hash
    trained = json.loads((Path(rows[1]["training"]["model"]) / "knowbench-train.json").read_text())
    assert trained["data"]["chunks"] == 3 and trained["data"]["corpus_hash"] == half.content_hash
    page = (tmp_path / "study" / "study.html").read_text()
    assert '<svg id="chart-corpus-size"' in page and ">rag-bm25<" in page


def bundle_for(task: FunctionTask) -> KnowledgeBundle:
    return KnowledgeBundle(
        signature=BundleSignature(qualified_name=task.entry_point,
                                  parameters=[BundleParameter(name="value", type="str")],
                                  returns="str"),
        examples=[BundleExample(code=f"{task.entry_point}(...)", status="passed")],
        mechanism="", source="")


@pytest.mark.slow
def test_bundle_stripped_evaluates_a_bundle_tuned_model_with_and_without(tmp_path: Path,
                                                                         env) -> None:
    basic = load_benchmark(BASIC)
    tasks = [task.model_copy(update={"bundle": bundle_for(task)}) for task in basic.tasks
             if isinstance(task, FunctionTask)][:4]
    bench = write_benchmark(tmp_path / "bench", basic.manifest, tasks)
    split = make_split(bench, "task", 0.5, 0)
    write_split(split, tmp_path / "split.json")
    model = tiny_model(tmp_path / "model")
    done = run_knowbench("study", "bundle-stripped", str(bench.path), "--model", f"hf:{model}",
                         "--split", str(tmp_path / "split.json"), "--cell", "S+E", "--max-steps",
                         "1", "--max-length", "256", "--out", str(tmp_path / "study"), *RUN, env=env)
    assert done.returncode == 0, done.stderr
    study = json.loads((tmp_path / "study" / "study.json").read_text())
    trained = json.loads((Path(study["training"]["model"]) / "knowbench-train.json").read_text())
    assert trained["data"]["knowledge"]["method"] == "oracle:S+E"
    assert [(row["model"], row["prompt"]) for row in study["rows"]] == [
        ("base", "bundle"), ("base", "stripped"), ("tuned", "bundle"), ("tuned", "stripped")]
    for row in study["rows"]:
        samples = RunDirectory.open(Path(row["run"])).results()
        assert sorted(sample.task_id for sample in samples) == sorted(split.test)
        traces = [sample.extra.get("knowledge", {}) for sample in samples]
        assert all(trace.get("bundle", False) is (row["prompt"] == "bundle") for trace in traces)
        assert (settings(row["run"])["model"].get("adapter") is not None) is (row["model"] == "tuned")
