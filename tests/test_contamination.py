"""`knowbench contamination`: CDD (Dong et al. 2024) on models whose output distribution is
known: one that has memorised its answer (peaked) and one that has not (diverse)."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.scoring.contamination import (
    CddSettings,
    check_task,
    date_check,
    edit_distance,
    summarise,
    tokens,
)
from openai_server import ScriptedOpenAIServer, sampling_responder

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"
MEMORISED = ("text/slugify", "text/wrap_paragraphs")
DIVERSE = ("datetime/to_utc", "datetime/add_business_days")
CREATED = {"text/slugify": "2023-03-01", "text/wrap_paragraphs": "2025-02-01T10:00:00Z",
           "datetime/to_utc": "2023-06-30"}


def test_edit_distance_counts_token_insertions_deletions_and_substitutions() -> None:
    assert tokens("def f(x): return x+1") == ["def", "f", "(", "x", ")", ":", "return", "x", "+", "1"]
    assert edit_distance(list("kitten"), list("sitting")) == 3
    assert edit_distance([], ["a", "b"]) == 2
    assert edit_distance(["a", "b"], ["a", "b"]) == 0


def test_peakedness_is_the_share_of_samples_within_alpha_times_the_longest_output() -> None:
    greedy = " ".join(f"w{i}" for i in range(20))  # 20 tokens: alpha * l = 0.05 * 20 = 1 edit
    one_edit = greedy.replace("w7", "other")
    far = " ".join(f"z{i}" for i in range(20))
    samples = [greedy] * 3 + [one_edit] + [far] * 6
    result = check_task("t", greedy, samples)
    assert result.distances == [0, 0, 0, 1, 20, 20, 20, 20, 20, 20]
    assert result.max_length == 20 and result.peak == 0.4 and result.identical == 0.3
    assert result.verdict == "flagged"
    strict = check_task("t", greedy, samples, CddSettings(alpha=0.0, xi=0.2))  # the paper's real-world setting
    assert strict.peak == 0.3 and strict.verdict == "flagged"
    assert check_task("t", greedy, [far] * 10).verdict == "not flagged"
    # Exactly xi is not above it: the verdict needs Peak > xi.
    assert check_task("t", greedy, [greedy] + [far] * 99).peak == 0.01
    assert check_task("t", greedy, [greedy] + [far] * 99).verdict == "not flagged"
    assert check_task("t", "", ["", ""]).verdict == "no output"


def test_outputs_are_compared_on_their_first_length_tokens_only() -> None:
    head = " ".join(f"w{i}" for i in range(100))
    result = check_task("t", head + " tail one", [head + " different ending entirely"] * 4)
    assert result.distances == [0, 0, 0, 0] and result.max_length == 100


def test_the_date_check_compares_a_tasks_source_date_with_the_cutoff() -> None:
    cutoff = date(2024, 1, 1)
    assert date_check({"source_created": "2023-12-31"}, cutoff) == ("2023-12-31", "before cutoff")
    assert date_check({"source_created": "2024-01-02T00:00:00Z"}, cutoff)[1] == "after cutoff"
    assert date_check({}, cutoff) == (None, "no date")
    assert date_check({"source_created": "last year"}, cutoff) == (None, "no date")
    assert date_check({"source_created": "2023-12-31"}, None)[1] == "no cutoff"
    flagged = check_task("a", "x y z", ["x y z"])
    summary = summarise("m", CddSettings(), [flagged.model_copy(update={"date_check": "after cutoff"}),
                                             check_task("b", "", [""])], cutoff)
    assert (summary.flagged, summary.checked, summary.flagged_share) == (1, 1, 1.0)
    assert summary.flagged_after_cutoff == ["a"]


@pytest.fixture
def dated_benchmark(tmp_path: Path) -> Path:
    """examples/basic with the creation dates of three tasks' sources recorded."""
    bench = load_benchmark(EXAMPLE)
    tasks = [task.model_copy(update={"metadata": {**task.metadata, "source_created": CREATED[task.task_id]}})
             if task.task_id in CREATED else task for task in bench.tasks]
    write_benchmark(tmp_path / "bench", bench.manifest, tasks)
    return tmp_path / "bench"


def _scripts(bench: Path) -> dict[str, tuple[str, float]]:
    """Per task: its reference (what a memorising model reproduces), and how often it does."""
    scripts = {}
    for task in load_benchmark(bench).tasks:
        if isinstance(task, FunctionTask) and task.task_id in MEMORISED + DIVERSE:
            p = 0.9 if task.task_id in MEMORISED else 0.0
            scripts[f"`{task.entry_point}`"] = (f"```python\n{task.reference}\n```", p)
    return scripts


def test_a_memorising_model_is_flagged_and_a_diverse_one_is_not(dated_benchmark: Path,
                                                                  tmp_path: Path) -> None:
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    report = tmp_path / "cdd.json"
    selected = [arg for task in MEMORISED + DIVERSE for arg in ("--task", task)]
    command = ("contamination", str(dated_benchmark), "--model", "scripted", "--cutoff", "2024-01-01",
               "--out", str(report), *selected)
    with ScriptedOpenAIServer(responder=sampling_responder(_scripts(dated_benchmark))) as server:
        done = run_knowbench(*command, "--base-url", server.base_url, env=env)
        assert done.returncode == 0, done.stderr
        asked = len(server.requests)
        temperatures = sorted({request.body["temperature"] for request in server.requests})
        again = run_knowbench(*command, "--base-url", server.base_url, env=env)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == asked  # every output came from the generation cache
    assert asked == 4 * (50 + 1) and temperatures == [0.0, 0.8]
    summary = json.loads(report.read_text())
    verdicts = {task["task_id"]: task for task in summary["tasks"]}
    assert {t for t, v in verdicts.items() if v["verdict"] == "flagged"} == set(MEMORISED)
    assert all(verdicts[t]["peak"] > 0.7 for t in MEMORISED)
    assert all(verdicts[t]["peak"] == 0.0 for t in DIVERSE)
    assert all(len(task["distances"]) == 50 for task in summary["tasks"])
    assert summary["flagged_share"] == 0.5 and summary["settings"]["alpha"] == 0.05
    assert {t: v["date_check"] for t, v in verdicts.items()} == {
        "text/slugify": "before cutoff", "text/wrap_paragraphs": "after cutoff",
        "datetime/to_utc": "before cutoff", "datetime/add_business_days": "no date"}
    assert summary["flagged_after_cutoff"] == ["text/wrap_paragraphs"]
    assert "flagged: 2 of 4 tasks (50.0%)" in done.stdout
    assert "text/wrap_paragraphs" in done.stdout.split("flagged although newer")[1]


def test_a_model_that_cannot_sample_and_a_bad_cutoff_are_refused(tmp_path: Path) -> None:
    offline = run_knowbench("contamination", str(EXAMPLE), "--model", "reference")
    assert offline.returncode == 2 and "calls no model" in offline.stderr
    bad = run_knowbench("contamination", str(EXAMPLE), "--model", "m", "--base-url",
                        "http://127.0.0.1:9/v1", "--cutoff", "spring 2024")
    assert bad.returncode == 2 and "not an ISO 8601 date" in bad.stderr
