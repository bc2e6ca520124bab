"""End to end: `knowbench run` against a real OpenAI-compatible server on 127.0.0.1.

The server (tests/openai_server.py) answers scripted replies: the gold code for some tasks,
wrong code for the others, so the expected score of every task is known in advance.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import knowbench_command, run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark
from openai_server import ScriptedOpenAIServer, last_user_message

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"
SERVER = ROOT / "tests" / "openai_server.py"
BENCH = load_benchmark(EXAMPLE)


def _scripted_replies() -> tuple[dict[str, str], set[str]]:
    """Prompt substring -> reply, and the task ids whose reply is correct."""
    replies, solved = {}, set()
    for index, task in enumerate(BENCH.tasks):
        correct = index % 2 == 0
        if isinstance(task, FunctionTask):
            key = f"Complete the function `{task.entry_point}`."
            name = task.entry_point.split(".")[-1]
            wrong = f"def {name}(*args, **kwargs):\n    return None\n"
            replies[key] = f"Here you go:\n```python\n{task.reference if correct else wrong}\n```"
        else:
            assert isinstance(task, ChoiceTask)
            key = task.question.strip()[:60]
            letters = task.answer if correct else [next(x for x in task.options if x not in task.answer)]
            replies[key] = f"Let me think.\nAnswer: {', '.join(letters)}"
        if correct:
            solved.add(task.task_id)
    return replies, solved


REPLIES, SOLVED = _scripted_replies()


def _reply_for(body: dict[str, object]) -> str:
    message = last_user_message(body)
    return next((reply for key, reply in REPLIES.items() if key in message), "no idea")


def _passed_tasks(run_dir: Path) -> set[str]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {row["task_id"] for row in rows if row["passed"]}


def test_openai_backend_run_scores_exactly_the_solved_tasks_after_a_429(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=_reply_for) as server:
        server.fail_next(429, times=1, retry_after="0")
        backend = OpenAIBackend(model="scripted", base_url=server.base_url, backoff_s=0.01)
        engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
        try:
            summary = run_benchmark(BENCH, backend, get_method("none"), engine, tmp_path / "run",
                                    SamplingParams(), Limits())
        finally:
            engine.close()
        assert len(server.requests) == len(BENCH.tasks) + 1  # the 429 was retried once
    assert {r.task_id for r in summary.results if r.passed} == SOLVED
    assert summary.scores.overall.samples == len(BENCH.tasks)
    assert all(r.usage.completion_tokens > 0 for r in summary.results)
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["settings"]["model"] == {"backend": "openai", "model": "scripted",
                                             "base_url": server.base_url}
    assert run_json["settings"]["limits"]["wall_s"] == Limits().wall_s
    assert run_json["settings"]["sandbox"] in ("bwrap", "unshare")


def _start_server(tmp_path: Path, delay: float) -> tuple[subprocess.Popen[str], str, Path]:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(REPLIES))
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen([sys.executable, str(SERVER), "--replies", str(replies), "--delay",
                               str(delay), "--fallback", "no idea", "--log", str(log)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = server.stdout.readline().split()[1]
    return server, f"http://127.0.0.1:{port}/v1", log


def _requested_tasks(log: Path) -> list[str]:
    requested = []
    for line in log.read_text().splitlines():
        message = last_user_message(json.loads(line))
        for task in BENCH.tasks:
            key = (f"Complete the function `{task.entry_point}`." if isinstance(task, FunctionTask)
                   else task.question.strip()[:60])
            if key in message:
                requested.append(task.task_id)
    return requested


def _stored_results(run_dir: Path) -> dict[str, str]:
    if not (run_dir / "run.sqlite").exists():
        return {}
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        try:
            return dict(db.execute("SELECT task_id, record FROM results").fetchall())
        except sqlite3.OperationalError:
            return {}


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_without_redoing_finished_samples(tmp_path: Path) -> None:
    server, url, log = _start_server(tmp_path, delay=0.4)
    run_dir = tmp_path / "run"
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    command = knowbench_command("run", str(EXAMPLE), "--model", "scripted", "--base-url", url,
                                "--out", str(run_dir), "--concurrency", "1", "--no-cache")
    try:
        victim = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while len(_stored_results(run_dir)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        before_kill = _stored_results(run_dir)
        assert 4 <= len(before_kill) < len(BENCH.tasks), "the kill must land mid-run"

        resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        assert f"resuming: {len(before_kill)} of {len(BENCH.tasks)}" in resumed.stderr
    finally:
        server.terminate()
        server.wait()
    after = _stored_results(run_dir)
    assert set(after) == {task.task_id for task in BENCH.tasks}
    for task_id, record in before_kill.items():
        assert after[task_id] == record, f"{task_id} was redone"
    requested = _requested_tasks(log)
    for task_id in before_kill:
        assert requested.count(task_id) == 1, f"{task_id} was requested again after resuming"
    assert _passed_tasks(run_dir) == SOLVED


@pytest.mark.slow
def test_generation_cache_makes_a_rerun_cost_no_model_calls(tmp_path: Path) -> None:
    server, url, log = _start_server(tmp_path, delay=0.0)
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    try:
        first = run_knowbench("run", str(EXAMPLE), "--model", "scripted", "--base-url", url, "--out",
                     str(tmp_path / "a"), env=env, timeout=600)
        assert first.returncode == 0, first.stderr
        calls = len(log.read_text().splitlines())
        second = run_knowbench("run", str(EXAMPLE), "--model", "scripted", "--base-url", url, "--out",
                      str(tmp_path / "b"), env=env, timeout=600)
        assert second.returncode == 0, second.stderr
    finally:
        server.terminate()
        server.wait()
    assert calls == len(BENCH.tasks)
    assert len(log.read_text().splitlines()) == calls
    assert _passed_tasks(tmp_path / "a") == _passed_tasks(tmp_path / "b") == SOLVED


def test_reference_scores_one_and_null_scores_zero(tmp_path: Path) -> None:
    for model, expected in (("reference", 1.0), ("null", 0.0)):
        done = run_knowbench("run", str(EXAMPLE), "--model", model, "--out", str(tmp_path / model))
        assert done.returncode == 0, done.stderr
        summary = json.loads((tmp_path / model / "summary.json").read_text())
        overall = summary["scores"]["overall"]
        assert overall["pass_at"]["1"] == expected and overall["accuracy"] == expected
        assert summary["self_check"]["ok"] is True
        assert "self-check passed" in done.stdout


def test_replay_scores_a_samples_file(tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as handle:
        for task in BENCH.tasks:
            body = {"model": "x", "messages": [{"role": "user", "content": _prompt_key(task)}]}
            handle.write(json.dumps({"task_id": task.task_id, "sample_idx": 0,
                                     "completion": _reply_for(body)}) + "\n")
    done = run_knowbench("run", str(EXAMPLE), "--model", f"replay:{samples}", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert _passed_tasks(tmp_path / "r") == SOLVED


def _prompt_key(task: FunctionTask | ChoiceTask) -> str:
    if isinstance(task, FunctionTask):
        return f"Complete the function `{task.entry_point}`."
    return task.question.strip()[:60]


def test_rerunning_into_a_run_with_other_settings_is_refused(tmp_path: Path) -> None:
    run_dir = str(tmp_path / "run")
    assert run_knowbench("run", str(EXAMPLE), "--model", "reference", "--out", run_dir).returncode == 0
    clash = run_knowbench("run", str(EXAMPLE), "--model", "null", "--out", run_dir)
    assert clash.returncode == 2
    assert "different settings" in clash.stderr and "--overwrite" in clash.stderr
    assert "Traceback" not in clash.stderr
    fresh = run_knowbench("run", str(EXAMPLE), "--model", "null", "--out", run_dir, "--overwrite")
    assert fresh.returncode == 0
    assert _passed_tasks(Path(run_dir)) == set()


def test_an_unreachable_endpoint_stops_the_run_with_advice(tmp_path: Path) -> None:
    done = run_knowbench("run", str(EXAMPLE), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                "--out", str(tmp_path / "run"), "--no-cache", "--max-retries", "0")
    assert done.returncode == 1
    assert "cannot reach" in done.stderr and "run the same command again" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors_exit_2_without_a_traceback() -> None:
    for args in (("run",), ("run", str(EXAMPLE), "--model", "reference", "--n", "0")):
        done = run_knowbench(*args)
        assert done.returncode == 2, args
        assert "Traceback" not in done.stderr and "Error" in done.stderr
