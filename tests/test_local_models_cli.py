"""The local-model workflow from the command line: split a benchmark, tune a tiny model on its
train part, evaluate base + adapter on its test part, and run kNN-LM."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run_knowbench
from hf_helpers import make_corpus, tiny_model

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]
BASIC = ROOT / "examples" / "basic"


@pytest.mark.slow
def test_split_train_then_run_with_the_adapter_and_knn_lm(tmp_path: Path) -> None:
    env = {**os.environ, "KNOWBENCH_HOME": str(tmp_path / "home"),
           "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    model = tiny_model(tmp_path / "model")
    split = tmp_path / "split.json"
    done = run_knowbench("split", str(BASIC), "--by", "library", "--leave-out", "json", "--out",
                         str(split), env=env)
    assert done.returncode == 0, done.stderr
    test_ids = json.loads(split.read_text())["test"]

    adapter = tmp_path / "adapter"
    done = run_knowbench("train", "--model", f"hf:{model}", "--data", f"tasks:{BASIC}", "--split",
                         str(split), "--knowledge", "none", "--max-steps", "2", "--batch-size",
                         "2", "--max-length", "256", "--out", str(adapter), env=env)
    assert done.returncode == 0, done.stderr
    assert "step 2/2" in done.stderr and "--adapter" in done.stdout
    manifest = json.loads((adapter / "knowbench-train.json").read_text())
    assert manifest["data"]["tasks"] == 16 - len(test_ids) and manifest["method"] == "lora"

    common = ["--split", str(split), "--max-tokens", "8", "--workers", "1", "--env", "self"]
    run_dir = tmp_path / "run-lora"
    done = run_knowbench("run", str(BASIC), "--model", f"hf:{model}", "--adapter", str(adapter),
                         "--out", str(run_dir), *common, env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert sorted(row["task_id"] for row in rows) == sorted(test_ids)
    assert all(row["usage"]["completion_tokens"] >= 1 for row in rows)
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    assert settings["model"]["adapter"] == str(adapter)

    make_corpus(tmp_path / "corpus", ["import json\n\njson.dumps({'a': 1}, sort_keys=True)\n"])
    knn_dir = tmp_path / "run-knn"
    done = run_knowbench("run", str(BASIC), "--model", f"hf:{model}", "--method", "knn-lm",
                         "--corpus", str(tmp_path / "corpus"), "--knn-lambda", "0.5",
                         "--knn-k", "4", "--out", str(knn_dir), *common, env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (knn_dir / "samples.jsonl").read_text().splitlines()]
    trace = rows[0]["extra"]["knowledge"]
    assert (trace["method"], trace["lambda"], trace["k"]) == ("knn-lm", 0.5, 4)
    assert trace["store_size"] > 0

    refused = run_knowbench("run", str(BASIC), "--model", "null", "--method", "knn-lm",
                            "--corpus", str(tmp_path / "corpus"), "--out", str(tmp_path / "x"),
                            *common, env=env)
    assert refused.returncode == 2 and "hf:PATH" in refused.stderr
