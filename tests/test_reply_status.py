"""Replies that fail as replies: cut off at the token limit, holding no code, naming no option.

A real OpenAI-compatible server on 127.0.0.1 cuts replies at `max_tokens` (finish_reason
"length"), as real servers do; the run records why each reply ended and gives samples that
did not pass the status that names the failure of the reply, through samples.jsonl, the
summary, diagnosis and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark
from knowbench.scoring.taxonomy import classify_all
from openai_server import ScriptedOpenAIServer, last_user_message

ROOT = Path(__file__).resolve().parents[1]
BENCH = load_benchmark(ROOT / "examples" / "basic")
TASKS = {task.task_id: task for task in BENCH.tasks}
MAX_TOKENS = 150

_REASONING = " ".join(
    ["Let me think about this step by step. The function must handle several cases, and"
     " Option (B) looks tempting at first, but I need to check the edge cases first."] * 8)


def _key(task: FunctionTask | ChoiceTask) -> str:
    if isinstance(task, FunctionTask):
        return f"Complete the function `{task.entry_point}`."
    return task.question.strip()[:60]


def _replies() -> dict[str, str]:
    slugify, wrap, to_utc = (TASKS[i] for i in ("text/slugify", "text/wrap_paragraphs",
                                                "datetime/to_utc"))
    choice, unsure, right = (TASKS[i] for i in ("text/re-match-vs-search",
                                                "datetime/aware-datetimes", "data/json-int-keys"))
    assert isinstance(slugify, FunctionTask) and isinstance(wrap, FunctionTask)
    assert isinstance(right, ChoiceTask)
    return {
        # Complete code, then chatter cut off by the limit: it passes, cut off or not.
        _key(slugify): f"```python\n{slugify.reference}\n```\n\n{_REASONING}",
        # Reasoning cut off before any code.
        _key(wrap): f"{_REASONING}\n\n```python\n{wrap.reference}\n```",
        _key(to_utc): "Sure, I can help with that.",
        _key(choice): _REASONING + "\n\nAnswer: A",
        _key(unsure): "I am not sure; both statements sound plausible to me.",
        _key(right): "Answer: " + ", ".join(right.answer),
    }


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    replies = _replies()
    selected = [task_id for task_id, task in TASKS.items() if _key(task) in replies]

    def respond(body: dict[str, object]) -> str:
        message = last_user_message(body)
        return next(reply for key, reply in replies.items() if key in message)

    out = tmp_path_factory.mktemp("reply-status") / "run"
    with ScriptedOpenAIServer(responder=respond) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url)
        engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
        try:
            run_benchmark(BENCH, backend, get_method("none"), engine, out,
                          SamplingParams(max_tokens=MAX_TOKENS), Limits(), task_ids=selected)
        finally:
            engine.close()
    return out


def _samples(run_dir: Path) -> dict[str, dict[str, object]]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {str(row["task_id"]): row for row in rows}


def test_samples_carry_why_the_reply_ended_and_the_status_of_the_reply(run_dir: Path) -> None:
    samples = _samples(run_dir)
    found = {task_id: (row["status"], row["finish_reason"]) for task_id, row in samples.items()}
    assert found == {
        "text/slugify": ("pass", "length"),
        "text/wrap_paragraphs": ("truncated", "length"),
        "datetime/to_utc": ("no-code", "stop"),
        "text/re-match-vs-search": ("truncated", "length"),
        "datetime/aware-datetimes": ("no-answer", "stop"),
        "data/json-int-keys": ("pass", "stop"),
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status_counts"] == {"pass": 2, "truncated": 2, "no-code": 1, "no-answer": 1}


def test_a_no_code_sample_still_runs_the_masked_body(run_dir: Path) -> None:
    """The `null` self-check relies on it: tests that pass on the stub are a defect."""
    row = _samples(run_dir)["datetime/to_utc"]
    assert row["code"] == ""
    assert row["execution"] is not None and row["tests_total"] > 0


def test_diagnosis_labels_reply_failures_apart_from_code_failures(run_dir: Path) -> None:
    from knowbench.store import RunDirectory

    diagnoses = {d.task_id: d for d in classify_all(RunDirectory.open(run_dir).results())}
    assert {task_id: (d.label, d.evidence.rule, d.koco) for task_id, d in diagnoses.items()} == {
        "text/wrap_paragraphs": ("Truncated", "cut-off", None),
        "datetime/to_utc": ("NoCode", "no-code", None),
    }
    assert "max_tokens" in diagnoses["text/wrap_paragraphs"].evidence.detail


def test_the_report_counts_reply_failures(run_dir: Path, tmp_path: Path) -> None:
    import re

    from helpers import run_knowbench

    report = tmp_path / "report.html"
    made = run_knowbench("report", str(run_dir), "--out", str(report))
    assert made.returncode == 0, made.stderr
    # Before any diagnosis, from the samples alone, every task kind: 6 samples, 2 cut off,
    # 1 without code, 1 naming no option.
    html = report.read_text()
    assert "cut off at max_tokens" in html
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", html)]
    assert any(row[1:] == ["6", "2", "1", "1"] for row in cells if len(row) == 5), cells

    diagnosed = run_knowbench("diagnose", str(run_dir))
    assert diagnosed.returncode == 0, diagnosed.stderr
    made = run_knowbench("report", str(run_dir), "--out", str(report))
    assert made.returncode == 0, made.stderr
    html = report.read_text()
    assert "Truncated" in html and "NoCode" in html


def test_replaying_a_runs_samples_keeps_its_reply_statuses(run_dir: Path, tmp_path: Path) -> None:
    from knowbench.models.offline import ReplayBackend

    samples = _samples(run_dir)
    engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
    try:
        summary = run_benchmark(BENCH, ReplayBackend(run_dir / "samples.jsonl"), get_method("none"),
                                engine, tmp_path / "replayed", SamplingParams(), Limits(),
                                task_ids=sorted(samples))
    finally:
        engine.close()
    assert {r.task_id: r.status for r in summary.results} == {
        task_id: row["status"] for task_id, row in samples.items()}


def test_the_cli_says_how_many_replies_were_cut_off_and_what_to_do(tmp_path: Path) -> None:
    import subprocess
    import sys

    from helpers import run_knowbench

    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(_replies()))
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"),
                               "--replies", str(replies)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        done = run_knowbench("run", str(ROOT / "examples" / "basic"), "--model", "scripted",
                             "--base-url", f"http://127.0.0.1:{port}/v1", "--max-tokens",
                             str(MAX_TOKENS), "--task", "text/wrap_paragraphs", "--task",
                             "datetime/to_utc", "--out", str(tmp_path / "run"))
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert f"1 of 2 replies were cut off at --max-tokens {MAX_TOKENS}" in " ".join(done.stderr.split())


def test_a_replayed_cut_off_reply_is_not_blamed_on_this_runs_max_tokens(
        run_dir: Path, tmp_path: Path) -> None:
    from helpers import run_knowbench

    done = run_knowbench("run", str(ROOT / "examples" / "basic"), "--model",
                         f"replay:{run_dir / 'samples.jsonl'}", "--task", "text/wrap_paragraphs",
                         "--out", str(tmp_path / "replayed"))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "1 of 1 replies were cut off at the token limit they were generated with" in said, said
    assert "--max-tokens" not in said
