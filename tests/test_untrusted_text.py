"""Text from sources knowbench does not control (a sample's output, a model's reply) may decode
to a lone UTF-16 surrogate, which JSON can escape but no record can be written with: it is
stored written as its escape, `\\ud800`, and the run goes on."""

from __future__ import annotations

import json
from pathlib import Path

from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.execution.engine import SubprocessEngine
from knowbench.jsonl import load_json
from knowbench.methods import get_method
from knowbench.models.offline import ReplayBackend
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SampleResult, SamplingParams
from knowbench.run import run_benchmark
from knowbench.store import RunDirectory
from openai_server import ScriptedOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "basic"
BENCH = load_benchmark(EXAMPLE)
SLUGIFY = next(task for task in BENCH.tasks if task.task_id == "text/slugify")
assert isinstance(SLUGIFY, FunctionTask)
LONE = "\ud800"
ESCAPED = "\\ud800"  # the six characters a lone surrogate is stored as


def test_load_json_writes_a_lone_surrogate_as_its_escape_and_keeps_valid_text() -> None:
    value = load_json('{"k\\udc00": ["a\\ud800b", "\\ud83d\\ude00", "a\\\\b", 1, null]}')
    assert value == {"k\\udc00": ["a\\ud800b", "\U0001f600", "a\\b", 1, None]}


def _replayed(completion: str, tmp_path: Path, engine: SubprocessEngine) -> SampleResult:
    """The one result of a run of `text/slugify` whose model replies `completion`."""
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"task_id": SLUGIFY.task_id, "completion": completion}) + "\n")
    run_benchmark(BENCH, ReplayBackend(replies), get_method("none"), engine, tmp_path / "run",
                  SamplingParams(), Limits(), task_ids=[SLUGIFY.task_id])
    (result,) = RunDirectory.open(tmp_path / "run").results()
    return result


def test_a_sample_raising_a_lone_surrogate_completes_its_run_with_the_message_stored(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    completion = f'```python\ndef slugify(text, separator="-"):\n    raise ValueError("{ESCAPED}")\n```'
    result = _replayed(completion, tmp_path, engine)
    assert result.status == "error" and result.execution is not None
    assert all(f"ValueError: {ESCAPED}" in test.message for test in result.execution.tests)


def test_a_model_reply_holding_a_lone_surrogate_is_stored_and_scored(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    reply = f"```python\n{SLUGIFY.reference}\n```\nNo surrogate pair: {LONE}"
    with ScriptedOpenAIServer(responder=lambda body: reply) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url)
        run_benchmark(BENCH, backend, get_method("none"), engine, tmp_path / "run",
                      SamplingParams(), Limits(), task_ids=[SLUGIFY.task_id])
    run = RunDirectory.open(tmp_path / "run")
    with run.store() as store:
        (generation,) = store.generations().values()
    assert generation.completion.endswith(f"No surrogate pair: {ESCAPED}")
    (result,) = run.results()
    assert result.passed


def test_a_replayed_completion_holding_a_lone_surrogate_is_stored_and_scored(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    result = _replayed(f"```python\n{SLUGIFY.reference}\n```\nNo surrogate pair: {LONE}", tmp_path, engine)
    assert result.passed and result.completion.endswith(f"No surrogate pair: {ESCAPED}")
