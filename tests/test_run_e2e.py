"""End to end: `knowbench run` against a real OpenAI-compatible server on 127.0.0.1.

The server (tests/openai_server.py) answers scripted replies: the gold code for some tasks,
wrong code for the others, so the expected score of every task is known in advance.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import knowbench_command, run_knowbench
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask, TestSpec
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SampleResult, SamplingParams
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
    # The endpoint is recorded, but it is no part of the run's identity (settings).
    assert run_json["settings"]["model"] == {"backend": "openai", "model": "scripted"}
    assert run_json["connection"]["base_url"] == server.base_url
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


@dataclass(frozen=True)
class RunState:
    """What a run directory holds, read while the run is alive or after it died: the stored
    records per task (the example takes one sample per task) and how far samples.jsonl got."""

    isolation: dict[str, str]
    calibration: dict[str, str]
    generations: dict[str, str]
    results: dict[str, str]
    sample_lines: int  # complete lines in samples.jsonl (0 while it is not a plain file)


_TABLES = ("isolation", "calibration", "generations", "results")


def _read_table(db: sqlite3.Connection, table: str) -> dict[str, str]:
    try:
        rows = db.execute(f"SELECT * FROM {table}").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    return {row[0]: json.dumps(row[1:]) for row in rows}


def _state(run_dir: Path) -> RunState:
    store, samples = run_dir / "run.sqlite", run_dir / "samples.jsonl"
    tables: dict[str, dict[str, str]] = {}
    if store.exists():
        with closing(sqlite3.connect(store, timeout=30)) as db:
            tables = {name: _read_table(db, name) for name in _TABLES}
    lines = samples.read_text().count("\n") if samples.is_file() else 0
    return RunState(*(tables.get(name, {}) for name in _TABLES), sample_lines=lines)


def _integrity(run_dir: Path) -> str:
    with closing(sqlite3.connect(run_dir / "run.sqlite")) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


# The resume benchmark: examples/basic with one solved task moved last and given a test that
# sleeps. Its reference check (the last before generation starts) and its sample's execution
# (the last sample) each hold the run for SLOW_S seconds: long enough for a kill to land there
# every time.
SLOW_TASK, SLOW_S = "text/slugify", 2.0
FUNCTIONS = sum(isinstance(task, FunctionTask) for task in BENCH.tasks)
TOTAL = len(BENCH.tasks)
assert SLOW_TASK in SOLVED


@pytest.fixture(scope="module")
def slow_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    slow = BENCH.task(SLOW_TASK)
    waits = TestSpec(name="waits", code=f"import time\n\n\ndef test_takes_its_time():\n"
                                        f"    time.sleep({SLOW_S})\n")
    tasks = [task for task in BENCH.tasks if task.task_id != SLOW_TASK]
    tasks.append(slow.model_copy(update={"tests": [*slow.tests, waits]}))
    return write_benchmark(tmp_path_factory.mktemp("bench") / "slow", BENCH.manifest, tasks).path


def _run_command(bench: Path, url: str, run_dir: Path) -> list[str]:
    # --recalibrate: reference checks shared from earlier runs would skip the checking stage.
    return knowbench_command("run", str(bench), "--model", "scripted", "--base-url", url, "--out",
                             str(run_dir), "--concurrency", "1", "--workers", "2", "--no-cache",
                             "--recalibrate")


@pytest.fixture(scope="module")
def uninterrupted(slow_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """summary.json of the resume benchmark run once without interruption."""
    base = tmp_path_factory.mktemp("uninterrupted")
    server, url, _ = _start_server(base, delay=0.0)
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(base / "cache")}
    try:
        done = subprocess.run(_run_command(slow_bench, url, base / "run"), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        server.terminate()
        server.wait()
    assert done.returncode == 0, done.stderr
    assert _passed_tasks(base / "run") == SOLVED
    return json.loads((base / "run" / "summary.json").read_text())


@dataclass(frozen=True)
class KillPoint:
    """Where a run is killed. `reached` says, from what the run directory holds, that the run
    is there; `server_delay` paces the model; `fifo` names an output file replaced by a named
    pipe, whose open() for writing blocks the run right there until it is killed."""

    reached: Callable[[RunState], bool]
    server_delay: float = 0.0
    fifo: str | None = None


KILL_POINTS = {
    # Every other reference checked and stored; the slow task's reference still running.
    "checking-references": KillPoint(
        lambda s: len(s.isolation) == FUNCTIONS - 1 and SLOW_TASK not in s.isolation
        and not s.generations),
    # One request at a time, each held 0.3 s by the server: one is in flight.
    "generating": KillPoint(lambda s: 4 <= len(s.generations) <= TOTAL - 2, server_delay=0.3),
    # The slow task's completion stored, its sample sleeping in the sandbox.
    "executing": KillPoint(lambda s: SLOW_TASK in s.generations and SLOW_TASK not in s.results),
    # Every result stored; the run scores them and blocks opening samples.jsonl.
    "scoring": KillPoint(lambda s: len(s.results) == TOTAL, fifo="samples.jsonl"),
    # samples.jsonl written in full; the run blocks opening summary.json.
    "writing-summary": KillPoint(lambda s: s.sample_lines == TOTAL, fifo="summary.json"),
}


def _kill_when(victim: subprocess.Popen[bytes], run_dir: Path, point: KillPoint) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and victim.poll() is None:
        if point.fifo and (run_dir / "run.json").is_file() and not (run_dir / point.fifo).exists():
            os.mkfifo(run_dir / point.fifo)  # run.json is written long before any output
        if point.reached(_state(run_dir)):
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"the run ended (exit code {victim.poll()}) or stalled before the kill point")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()


@pytest.mark.slow
@pytest.mark.parametrize("where", list(KILL_POINTS))
def test_a_run_killed_with_sigkill_resumes_without_redoing_finished_work(
        where: str, slow_bench: Path, uninterrupted: dict[str, object], tmp_path: Path) -> None:
    point = KILL_POINTS[where]
    server, url, log = _start_server(tmp_path, delay=point.server_delay)
    run_dir = tmp_path / "run"
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    command = _run_command(slow_bench, url, run_dir)
    victim = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _kill_when(victim, run_dir, point)
        if point.fifo:  # the test's pipe, not something a killed run leaves behind
            (run_dir / point.fifo).unlink()
        assert _integrity(run_dir) == "ok"
        killed = _state(run_dir)
        assert point.reached(killed), f"the kill did not land while {where}"
        assert not (run_dir / "summary.json").exists()

        resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        if killed.results:
            assert f"resuming: {len(killed.results)} of {TOTAL}" in resumed.stderr
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()
        server.terminate()
        server.wait()
    assert _integrity(run_dir) == "ok"
    after = _state(run_dir)
    assert set(after.results) == {task.task_id for task in BENCH.tasks}
    for before, now in ((killed.isolation, after.isolation), (killed.calibration, after.calibration),
                        (killed.generations, after.generations), (killed.results, after.results)):
        assert {task_id: now[task_id] for task_id in before} == before, "finished work was redone"
    requested = _requested_tasks(log)
    for task_id in killed.generations:
        assert requested.count(task_id) == 1, f"{task_id} was requested again after resuming"
    assert _passed_tasks(run_dir) == SOLVED
    assert json.loads((run_dir / "summary.json").read_text()) == uninterrupted


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

    # Other replies in the same file are another run, not a resume of this one.
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    rows[0]["completion"] = "I do not know."
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
    changed = run_knowbench("run", str(EXAMPLE), "--model", f"replay:{samples}", "--out",
                            str(tmp_path / "r"))
    assert changed.returncode == 2 and "different settings" in changed.stderr, changed.stderr


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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_closed_port_fails_after_two_attempts_saying_so_at_once(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    done = run_knowbench("run", str(EXAMPLE), "--model", "m", "--base-url", url, "--out",
                         str(tmp_path / "run"), "--no-cache")  # the default: 6 retries
    assert done.returncode == 1, done.stderr
    # Said before the reference checks, which on a large benchmark take minutes.
    probe = f"warning: nothing answers at {url} (connection refused)"
    assert probe in done.stderr
    assert done.stderr.index(probe) < done.stderr.index("samples: 16 to do")
    notices = [line for line in done.stderr.splitlines() if "a model request failed" in line]
    assert len(notices) == 1, done.stderr  # reported once, not once per request
    assert f"cannot reach {url}/chat/completions: connection refused" in notices[0]
    assert "retrying once more" in notices[0]
    assert f"gave up after 2 attempts: no request to {url} has succeeded yet" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_endpoint_answering_500_is_reported_with_the_retry_plan(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as server:
        server.fail_next(500, times=1000)
        done = run_knowbench("run", str(EXAMPLE), "--model", "m", "--base-url", server.base_url,
                             "--out", str(tmp_path / "run"), "--no-cache", "--concurrency", "1",
                             "--max-retries", "2")
    assert done.returncode == 1, done.stderr
    notices = [line for line in done.stderr.splitlines() if "a model request failed" in line]
    assert len(notices) == 1, done.stderr
    assert "answered 500: scripted failure with status 500" in notices[0]
    assert "retrying 2 more times over ~3 s" in notices[0]
    assert "gave up after 3 attempts" in done.stderr
    assert "run the same command again to resume" in done.stderr


def test_the_terminal_progress_bar_shows_the_time_left() -> None:
    from io import StringIO

    from rich.console import Console

    from knowbench.commands._progress import RunProgress

    screen = StringIO()
    with RunProgress(Console(file=screen, force_terminal=True, width=150)) as progress:
        progress.on_start(TOTAL, 0)
        for task in BENCH.tasks[:4]:
            progress.on_result(SampleResult(task_id=task.task_id, sample_idx=0, kind=task.kind,
                                            domain=task.domain, completion="", passed=True,
                                            status="pass"))
    assert "ETA" in screen.getvalue() and f"4/{TOTAL}" in screen.getvalue()
    assert progress.stored == 4


def test_usage_errors_exit_2_without_a_traceback() -> None:
    for args in (("run",), ("run", str(EXAMPLE), "--model", "reference", "--n", "0")):
        done = run_knowbench(*args)
        assert done.returncode == 2, args
        assert "Traceback" not in done.stderr and "Error" in done.stderr


# Safety: one run per directory, resuming after the endpoint moved, interrupting, progress.

def _wait_for(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_second_run_in_the_same_directory_is_refused_at_once(tmp_path: Path) -> None:
    # Each reply held 2 s, one at a time: the first run is still working when the second starts.
    server, url, log = _start_server(tmp_path, delay=2.0)
    run_dir = tmp_path / "run"
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    command = _run_command(EXAMPLE, url, run_dir)
    first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: len(_state(run_dir).generations) >= 1, "the first run's requests")
        requests_before = len(log.read_text().splitlines())
        second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 2, second.stderr
        assert first.poll() is None, "the first run ended before the second started"
        assert f"in use by another knowbench run (pid {first.pid})" in second.stderr
        assert "run the same command to resume" in second.stderr and "--out" in second.stderr
        assert "Traceback" not in second.stderr
        # The refused run sent nothing: every request in the log is the first run's.
        assert len(set(_requested_tasks(log))) == len(_requested_tasks(log))
        assert requests_before <= len(log.read_text().splitlines()) <= TOTAL

        os.killpg(first.pid, signal.SIGKILL)  # its lock goes with it
        first.wait()
        killed = _state(run_dir)
        done = killed.results
        server.terminate()
        server.wait()
        server, url, log = _start_server(tmp_path, delay=0.0)  # the same log, no delay
        resumed = subprocess.run(_run_command(EXAMPLE, url, run_dir), cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=300)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        server.terminate()
        server.wait()
    assert resumed.returncode == 0, resumed.stderr
    if done:
        assert f"resuming: {len(done)} of {TOTAL}" in resumed.stderr
    assert _passed_tasks(run_dir) == SOLVED
    requested = _requested_tasks(log)
    for task_id in killed.generations:  # one answered request each, whichever run sent it
        assert requested.count(task_id) == 1, f"{task_id} was requested twice"


def test_a_run_resumes_after_the_endpoint_moved(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    picked = ["text/slugify", "text/re-match-vs-search"]
    selection = [arg for task_id in picked for arg in ("--task", task_id)]
    server, url, _ = _start_server(tmp_path, delay=0.0)
    try:
        first = run_knowbench(*_run_command(EXAMPLE, url, run_dir)[3:], *selection, env=env)
    finally:
        server.terminate()
        server.wait()
    assert first.returncode == 0, first.stderr
    moved_dir = tmp_path / "moved"
    moved_dir.mkdir()
    server, moved, moved_log = _start_server(moved_dir, delay=0.0)
    try:
        assert moved != url
        again = run_knowbench(*_run_command(EXAMPLE, moved, run_dir)[3:], *selection,
                              "--request-timeout", "30", "--concurrency", "4", env=env)
        assert again.returncode == 0, again.stderr
        assert f"resuming: {len(picked)} of {len(picked)}" in again.stderr
        # A run directory written by an older knowbench kept the address in "model".
        document = json.loads((run_dir / "run.json").read_text())
        assert document["connection"]["base_url"] == moved
        assert document["connection"]["concurrency"] == 4
        document["settings"]["model"]["base_url"] = url
        del document["connection"]
        (run_dir / "run.json").write_text(json.dumps(document))
        old = run_knowbench(*_run_command(EXAMPLE, moved, run_dir)[3:], *selection, env=env)
        assert old.returncode == 0, old.stderr
        assert f"resuming: {len(picked)} of {len(picked)}" in old.stderr
        # Another model is another run.
        other = run_knowbench(*_run_command(EXAMPLE, moved, run_dir)[3:], *selection,
                              "--model", "other", env=env)
        assert other.returncode == 2 and "different settings" in other.stderr
    finally:
        server.terminate()
        server.wait()
    assert not moved_log.exists() or moved_log.read_text() == ""


def test_ctrl_c_exits_130_saying_what_is_stored_and_the_rerun_resumes(tmp_path: Path) -> None:
    server, url, _ = _start_server(tmp_path, delay=0.5)
    run_dir = tmp_path / "run"
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    command = _run_command(EXAMPLE, url, run_dir)
    victim = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(lambda: len(_state(run_dir).results) >= 3, "three stored samples")
        victim.send_signal(signal.SIGINT)
        _, stderr = victim.communicate(timeout=120)
        stored = len(_state(run_dir).results)
        resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=300)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()
        server.terminate()
        server.wait()
    assert victim.returncode == 130, stderr
    assert f"interrupted; {stored} samples stored in {run_dir}; rerun the same command" in stderr
    assert "Traceback" not in stderr
    assert 3 <= stored < TOTAL
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {stored} of {TOTAL}" in resumed.stderr
    assert _passed_tasks(run_dir) == SOLVED


def test_progress_lines_are_printed_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    server, url, _ = _start_server(tmp_path, delay=0.2)
    env = {**os.environ, "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    try:
        done = run_knowbench(*_run_command(EXAMPLE, url, tmp_path / "run")[3:],
                             "--progress-every", "0.5", "--recalibrate", env=env)
    finally:
        server.terminate()
        server.wait()
    assert done.returncode == 0, done.stderr
    assert f"checking {FUNCTIONS} reference solution(s)" in done.stderr
    assert f"samples: {TOTAL} to do of {TOTAL}" in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("progress: samples ")]
    assert lines, done.stderr
    assert all(f"/{TOTAL}" in line and "pass " in line and "ETA " in line for line in lines)


def _replay_file(path: Path, task_ids: list[str], extra: list[str] | None = None) -> Path:
    with path.open("w") as handle:
        for task_id in [*task_ids, *(extra or [])]:
            handle.write(json.dumps({"task_id": task_id, "sample_idx": 0, "completion": ""}) + "\n")
    return path


def test_replay_missing_tasks_are_all_named_before_any_work(tmp_path: Path) -> None:
    ids = [task.task_id for task in BENCH.tasks]
    samples = _replay_file(tmp_path / "samples.jsonl", ids[:10], extra=["nowhere/x"])
    done = run_knowbench("run", str(EXAMPLE), "--model", f"replay:{samples}", "--out",
                         str(tmp_path / "r"))
    assert done.returncode == 2, done.stderr
    assert f"lacks completions for {len(ids) - 10} of the {len(ids)} selected tasks" in done.stderr
    for task_id in ids[10:]:
        assert task_id in done.stderr
    assert "--task" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists(), "work started before the check"


def test_replay_ids_the_benchmark_does_not_have_are_warned_about(tmp_path: Path) -> None:
    ids = [task.task_id for task in BENCH.tasks]
    samples = _replay_file(tmp_path / "samples.jsonl", ids, extra=["nowhere/x", "nowhere/y"])
    done = run_knowbench("run", str(EXAMPLE), "--model", f"replay:{samples}", "--out",
                         str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert "2 task id(s) the benchmark does not have are ignored: nowhere/x, nowhere/y" in done.stderr


def test_options_that_do_nothing_are_warned_about(tmp_path: Path) -> None:
    done = run_knowbench("run", str(EXAMPLE), "--model", "reference", "--out", str(tmp_path / "r"),
                         "--method", "none", "--corpus", "somecorpus", "--top-k", "3",
                         "--base-url", "http://127.0.0.1:9/v1", "--temperature", "0.5",
                         "--ray-address", "auto", "--k", "1", "--k", "5")
    assert done.returncode == 0, done.stderr
    for option, why in (("--corpus", "--method none does not use it"), ("--top-k", "rag-*"),
                        ("--base-url", "--model reference calls no model"),
                        ("--temperature", "calls no model"), ("--ray-address", "--engine ray")):
        assert f"warning: {option} is ignored: " in done.stderr, option
        assert why in done.stderr
    assert "pass@5 is left out: it needs n >= 5 samples per task" in done.stderr
    plain = run_knowbench("run", str(EXAMPLE), "--model", "reference", "--out", str(tmp_path / "p"))
    assert "warning" not in plain.stderr, plain.stderr


def test_score_says_why_a_requested_pass_at_k_is_missing(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    assert run_knowbench("run", str(EXAMPLE), "--model", "reference", "--n", "2", "--out",
                         str(run_dir)).returncode == 0
    done = run_knowbench("score", str(run_dir), "--k", "1", "--k", "2", "--k", "10")
    assert done.returncode == 0, done.stderr
    assert "pass@10 is left out: it needs n >= 10 samples per task" in done.stderr
    assert "pass@1 " not in done.stderr and "pass@2 " not in done.stderr


def test_oracle_on_tasks_without_bundles_is_refused(tmp_path: Path) -> None:
    done = run_knowbench("run", str(EXAMPLE), "--model", "reference", "--method", "oracle:S+E",
                         "--out", str(tmp_path / "r"))
    assert done.returncode == 2, done.stderr
    assert f"none of the {TOTAL} selected tasks carries a knowledge bundle" in done.stderr
    assert "--method none" in done.stderr


def test_replay_check_names_the_first_twenty_missing_and_counts_the_rest(tmp_path: Path) -> None:
    from knowbench.errors import UserError
    from knowbench.models.offline import ReplayBackend

    wanted = [f"t{number:02d}" for number in range(40)]
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as handle:
        for task_id in wanted[:8]:  # t00..t07 present; t07 lacks its sample 1
            for idx in ((0, 2) if task_id == "t07" else (0, 1)):
                handle.write(json.dumps({"task_id": task_id, "sample_idx": idx,
                                         "completion": "x"}) + "\n")
    with pytest.raises(UserError) as caught:
        ReplayBackend(samples).check_tasks(wanted, wanted)
    message = str(caught.value)
    assert "lacks completions for 33 of the 40 selected tasks" in message
    assert "t07 (sample 1)" in message
    named = [task_id for task_id in wanted[8:] if task_id in message]
    assert named == wanted[8:27] and "(13 more)" in message
    assert "run only the 7 task(s) it covers with --task" in message


def test_score_refuses_while_a_run_holds_the_directory(tmp_path: Path) -> None:
    """`score` rewrites samples.jsonl and summary.json, as the run in the directory will."""
    from knowbench.store import RunDirectory

    run_dir = tmp_path / "run"
    assert run_knowbench("run", str(EXAMPLE), "--model", "reference", "--task", "text/slugify",
                         "--out", str(run_dir)).returncode == 0
    holder = RunDirectory(run_dir)
    holder.lock()
    try:
        refused = run_knowbench("score", str(run_dir))
    finally:
        holder.release()
    assert refused.returncode == 2, refused.stderr
    assert f"in use by another knowbench run (pid {os.getpid()})" in " ".join(refused.stderr.split())
    assert run_knowbench("score", str(run_dir)).returncode == 0
