"""The `mini-swe-agent` method: mini-swe-agent's own loop and models, its bash commands in
knowbench's sandbox, against the scripted OpenAI-compatible server.

The scripted model answers in mini-swe-agent's text format (one fenced command per reply).
Checked: an episode that lists, reads, writes the solution with a heredoc, runs it and
submits, judged as passing; the token counts equal what the server reported; commands that
attack the host are contained and the episode goes on; the target, the tests, the benchmark
and the corpus directory are out of the workspace's reach; the step and token limits; a
whole run through the command line.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import knowbench_command
from knowbench.benchmark.load import Benchmark, load_benchmark
from knowbench.errors import UserError
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import Sandbox
from knowbench.knowledge.corpus import Corpus
from knowbench.methods import get_method
from knowbench.models.cache import GenerationCache
from knowbench.models.offline import ReferenceBackend
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SamplingParams
from knowbench.report.html import write_report
from knowbench.run import RunSummary, TimePolicy, run_benchmark
from openai_server import (
    ScriptedOpenAIServer,
    ToolTurn,
    assistant_turns,
    call,
    tool_script_responder,
)
from test_agent import MARKER, TARGET, bench_of_task, corpus_of_files

if importlib.util.find_spec("minisweagent") is None:
    if os.environ.get("CI") == "true":
        pytest.fail("mini-swe-agent is not installed: CI installs the extra "
                    "(pip install -e '.[mini-swe-agent]')", pytrace=False)
    pytest.skip("mini-swe-agent is not installed (pip install 'knowbench[mini-swe-agent]')",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
CHECK = "python -c \"from solution import normalize_title; print(normalize_title('Café au Lait!'))\""


def bash(command: str, thought: str = "Next step.") -> str:
    """A reply in mini-swe-agent's text format: a thought and one fenced command."""
    return f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"


WRITE = bash(f"cat <<'EOF' > solution.py\nimport re\nimport unicodedata\n\n\n{TARGET}EOF",
             "Write the solution.")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return corpus_of_files(tmp_path_factory.mktemp("mswe"), "mswe-test")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    return bench_of_task(tmp_path_factory.mktemp("bench"))


def _run(bench: Benchmark, method: Any, sandbox: Sandbox, run_dir: Path, responder: Any,
         limits: Limits | None = None, server: ScriptedOpenAIServer | None = None,
         cache: GenerationCache | None = None) -> tuple[RunSummary, list[dict[str, Any]]]:
    """One run against `server` (default: a new one answering with `responder`); the request
    bodies the server got during the run come back with the summary."""
    if server is None:
        with ScriptedOpenAIServer(responder=responder) as started:
            return _run(bench, method, sandbox, run_dir, responder, limits, started, cache)
    limits = limits or Limits(wall_s=5.0)
    before = len(server.requests)
    backend = OpenAIBackend(model="scripted", base_url=server.base_url, max_retries=0, cache=cache)
    engine = SubprocessEngine(sandbox, workers=1)
    try:
        summary = run_benchmark(bench, backend, method, engine, run_dir,
                                SamplingParams(max_tokens=512), limits,
                                time_policy=TimePolicy(mode="fixed", fixed_s=limits.wall_s))
    finally:
        engine.close()
    return summary, [request.body for request in server.requests[before:]]


def _method(corpus: Corpus | None, **options: Any) -> Any:
    return get_method("mini-swe-agent", corpus=str(corpus.directory) if corpus else None, **options)


def _observations(result: Any) -> list[str]:
    return [step["content"] for step in result.extra["trajectory"]["steps"] if step["role"] == "tool"]


def _words(text: str) -> int:
    return len(text.split())  # how the scripted server counts tokens


def test_an_episode_reads_writes_runs_and_submits(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script = [bash("ls -R", "Look around."), bash("cat solution.py && cat corpus/pkg/textutil.py"),
              WRITE, bash(CHECK, "Try it."), bash(SUBMIT, "Done.")]
    summary, bodies = _run(bench, _method(corpus), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "submitted" and trajectory["exit_status"] == "Submitted"
    assert result.passed and TARGET.strip() in result.completion
    listing, cat, written, ran = _observations(result)
    assert "solution.py" in listing and "textutil.py" in listing and "tasks.jsonl" not in listing
    assert 'def normalize_title(text, sep="-"):' in cat and "def title_words" in cat
    assert "withheld" in cat and "<returncode>0</returncode>" in written
    assert "cafe-au-lait" in ran
    # the model got mini-swe-agent's own prompts and the observations it rendered
    assert len(bodies) == trajectory["turns"] == 5 and bodies[0]["model"] == "scripted"
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in bodies[0]["messages"][1]["content"]
    assert "solution.py" in bodies[0]["messages"][1]["content"]
    assert "cafe-au-lait" in bodies[-1]["messages"][-1]["content"]
    # tokens: the server's own counts, call by call, summed into the sample's usage
    prompts = [_words(" ".join(str(m.get("content") or "") for m in body["messages"]))
               for body in bodies]
    assert [call.prompt_tokens for call in result.usage.calls] == prompts
    assert [call.completion_tokens for call in result.usage.calls] == [_words(s) for s in script]
    assert result.usage.prompt_tokens == sum(prompts) == trajectory["usage"]["prompt_tokens"]
    assert result.usage.requests == 5
    # the stored messages are mini-swe-agent's list, ending with its exit message
    assert [m["role"] for m in trajectory["messages"]][:3] == ["system", "user", "assistant"]
    assert trajectory["messages"][-1]["extra"]["exit_status"] == "Submitted"
    page = write_report([tmp_path / "run"], tmp_path / "report.html").read_text()
    assert "agent episode: submitted" in page and html.escape("cafe-au-lait") in page


def test_the_toolcall_mode_runs_each_bash_call_in_the_sandbox(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    source = f"import re\nimport unicodedata\n\n\n{TARGET}"
    script: list[str | ToolTurn] = [
        call("bash", command=f"cat > solution.py <<'EOF'\n{source}EOF"),
        call("bash", command=CHECK), call("bash", command=SUBMIT)]
    summary, bodies = _run(bench, _method(None, mode="toolcall"), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    assert result.passed and result.extra["trajectory"]["end"] == "submitted"
    assert result.extra["trajectory"]["mode"] == "toolcall"
    assert [tool["function"]["name"] for tool in bodies[0]["tools"]] == ["bash"]
    assert not any(key.startswith("_") for key in bodies[0])  # no LiteLLM flag reaches the server
    assert any(m.get("role") == "tool" and "cafe-au-lait" in str(m.get("content"))
               for m in bodies[-1]["messages"])
    assert "cafe-au-lait" in _observations(result)[1]


def test_a_bash_call_holding_a_lone_surrogate_is_stored_written_out(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    """mini-swe-agent decodes a call's JSON arguments, which may escape a lone surrogate that
    no record can hold: the command runs, and is stored, with it written as its escape."""
    source = f"import re\nimport unicodedata\n\n\n{TARGET}"
    script: list[str | ToolTurn] = [
        call("bash", command="echo one # \ud800"),
        call("bash", command=f"cat > solution.py <<'EOF'\n{source}EOF"), call("bash", command=SUBMIT)]
    summary, _ = _run(bench, _method(None, mode="toolcall"), best_sandbox, tmp_path / "run",
                      tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    assert result.passed and result.extra["trajectory"]["end"] == "submitted"
    commands = [action["command"] for message in result.extra["trajectory"]["messages"]
                for action in (message.get("extra") or {}).get("actions") or []]
    assert commands[0] == "echo one # \\ud800"
    assert json.loads(_observations(result)[0]) == {"returncode": 0, "output": "one\n"}


def test_the_episode_timeout_cuts_a_command_short_and_ends_the_episode(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    method = _method(None, episode_timeout=2.0)
    summary, bodies = _run(bench, method, best_sandbox, tmp_path / "run",
                           lambda body: bash("sleep 30"), limits=Limits(wall_s=60.0))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "timeout" and result.finish_reason == "agent:timeout"
    assert len(bodies) == 1 and "episode's time ran out (--episode-timeout 2 s)" in _observations(result)[0]
    assert result.status == "no-code"


def test_commands_that_attack_the_host_are_contained(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    network = ("python -c \"import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), "
               "timeout=2); print('net: open')\nexcept OSError as e: print('net:', e)\"")
    hog = ("for i in 1 2 3 4; do python -c \"import time; x = b'x' * (100 * 1024 * 1024); "
           "time.sleep(20)\" & done; wait")
    script = [bash(f"echo owned > {canary}; echo written=$?"), bash(network),
              bash("python -c 'x = bytearray(8 * 1024 ** 3)'"), bash(hog), bash("sleep 600"),
              bash("while :; do :; done"), bash(":(){ :|:& };:"), WRITE, bash(SUBMIT)]
    summary, _ = _run(bench, _method(None), best_sandbox, tmp_path / "run",
                      tool_script_responder({"normalize_title": script}),
                      limits=Limits(wall_s=3.0, cpu_s=2, memory_mb=256))
    [result] = summary.results
    assert not canary.exists()
    outside, net, big, budget, sleep, spin, _, _ = _observations(result)
    assert "written=1" in outside
    assert "net: open" not in net and "net:" in net
    assert "MemoryError" in big
    assert "memory budget" in budget and "<exception>" in budget
    assert "wall-clock limit" in sleep
    records = [step["record"] for step in result.extra["trajectory"]["steps"] if step["role"] == "tool"]
    assert records[3]["limit"] == "memory" and records[4]["limit"] == "timeout"
    assert records[5]["limit"] in ("cpu-time", "timeout") and "limit" in spin
    assert result.passed and result.extra["trajectory"]["end"] == "submitted"


def test_the_target_tests_benchmark_and_corpus_stay_out_of_reach(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    # (not through the installed packages: a checkout under /tmp shows its whole venv there,
    # gigabytes with torch, which no run writes to; grepping it outlasts the limit)
    probe = (f"grep -rln --exclude-dir=site-packages {MARKER} . /tmp /etc /root /home {bench.path} "
             f"{corpus.directory} 2>/dev/null; "
             "ls corpus/pkg corpus/docs; "
             f"cat corpus/docs/guide.md; ls -A {corpus.directory} {bench.path}; "
             f"cat {bench.path}/tasks.jsonl | head -c 300")
    script = [bash(probe), bash(SUBMIT)]
    for exclude_file in (False, True):
        summary, _ = _run(bench, _method(corpus, exclude_file=exclude_file), best_sandbox,
                          tmp_path / f"run-{exclude_file}",
                          tool_script_responder({"normalize_title": script}),
                          limits=Limits(wall_s=30.0))  # the probe reads a lot on a busy machine
        [result] = summary.results
        [seen] = _observations(result)
        assert "<returncode>0</returncode>" in seen
        assert MARKER not in seen and "cafe-au-lait" not in seen
        assert "title_words" in seen  # the guide's other section is there
        assert ("textutil.py" in seen) is not exclude_file
        assert "normalize_title" not in seen.split("tasks.jsonl")[-1]
        # submitted without editing: the completion is the untouched prompt code
        assert result.completion.rstrip().endswith("...") and not result.passed
        workspace = result.extra["trajectory"]["workspace"]
        assert workspace["withheld_chunks"] >= 2


def test_the_step_limit_ends_an_episode_without_code(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    summary, bodies = _run(bench, _method(None, max_turns=3), best_sandbox, tmp_path / "run",
                           lambda body: bash(f"echo turn {assistant_turns(body)}"))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert len(bodies) == 3 and trajectory["end"] == "max-turns"
    assert trajectory["exit_status"] == "LimitsExceeded"
    assert result.finish_reason == "agent:max-turns" and result.completion == ""
    assert result.status == "no-code" and not result.passed


def test_the_token_limit_ends_an_episode(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    method = _method(None, max_turns=50, episode_tokens=2000)
    summary, bodies = _run(bench, method, best_sandbox, tmp_path / "run",
                           lambda body: bash(f"echo turn {assistant_turns(body)}"))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "token-limit" and result.finish_reason == "agent:token-limit"
    used = result.usage.prompt_tokens + result.usage.completion_tokens
    assert used >= 2000 and len(bodies) == trajectory["turns"] < 50
    last = result.usage.calls[-1]
    assert used - last.prompt_tokens - last.completion_tokens < 2000  # stopped at the first call past it


def test_a_backend_that_holds_no_conversation_is_refused_before_the_run(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    engine = SubprocessEngine(best_sandbox, workers=1)
    try:
        for mode in ("text", "toolcall"):
            with pytest.raises(UserError, match=r"--model reference answers each sample alike|"
                                                r"--model reference makes none"):
                run_benchmark(bench, ReferenceBackend(), _method(None, mode=mode), engine,
                              tmp_path / mode, SamplingParams(), Limits())
    finally:
        engine.close()
    with pytest.raises(UserError, match="unknown mini-swe-agent mode 'fast'"):
        get_method("mini-swe-agent:fast")


def test_a_rerun_replays_every_model_call_from_the_generation_cache(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script = [bash("cat solution.py"), WRITE, bash(CHECK), bash(SUBMIT)]
    with ScriptedOpenAIServer(responder=tool_script_responder({"normalize_title": script})) as server, \
            GenerationCache(tmp_path / "cache.sqlite") as cache:
        first, made = _run(bench, _method(corpus), best_sandbox, tmp_path / "first", None,
                           server=server, cache=cache)
        again, remade = _run(bench, _method(corpus), best_sandbox, tmp_path / "again", None,
                             server=server, cache=cache)
    [one], [two] = first.results, again.results
    assert len(made) == 4 and remade == []  # the rerun asked the server nothing
    assert one.passed and two.passed and two.completion == one.completion
    assert two.usage == one.usage  # the calls' token counts come back with them
    calls = [[step for step in result.extra["trajectory"]["steps"] if step["role"] == "assistant"]
             for result in (one, two)]
    assert [step["content"] for step in calls[1]] == [step["content"] for step in calls[0]] == script
    assert [step["cached"] for step in calls[0]] == [False] * 4
    assert [step["cached"] for step in calls[1]] == [True] * 4
    # the commands ran again: observations are the sandbox's, not the cache's
    assert "cafe-au-lait" in _observations(two)[2]


def test_the_episode_timeout_cuts_a_model_call_short(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=lambda body: bash("ls"), delay_s=5.0) as server:
        summary, bodies = _run(bench, _method(None, episode_timeout=0.5), best_sandbox,
                               tmp_path / "run", None, server=server)
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert len(bodies) == 1 and trajectory["turns"] == 0
    assert trajectory["end"] == "timeout" and "during a model call" in trajectory["detail"]
    assert trajectory["duration_s"] < 5.0  # not waiting for the reply
    assert result.status == "no-code"


def test_a_local_model_plays_text_mode_and_toolcall_mode_is_refused(
        bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    hf_helpers = pytest.importorskip("hf_helpers")
    from knowbench.models.hf import HFBackend

    backend = HFBackend(str(hf_helpers.tiny_model(tmp_path / "model",
                                                  chat_template=hf_helpers.CHAT_TEMPLATE)))
    engine = SubprocessEngine(best_sandbox, workers=1)
    try:
        with pytest.raises(UserError, match="--model hf makes none"):
            run_benchmark(bench, backend, _method(None, mode="toolcall"), engine,
                          tmp_path / "toolcall", SamplingParams(), Limits())
        summary = run_benchmark(bench, backend, _method(None, max_turns=4), engine, tmp_path / "run",
                                SamplingParams(max_tokens=12, seed=0), Limits(wall_s=5.0),
                                time_policy=TimePolicy(mode="fixed", fixed_s=5.0))
    finally:
        engine.close()
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    # a random model writes no fenced command: mini-swe-agent's format errors end the episode
    replies = [step for step in trajectory["steps"] if step["role"] == "assistant"]
    assert trajectory["end"] in ("format-errors", "max-turns") and trajectory["turns"] == len(replies) > 0
    assert all(0 < call.completion_tokens <= 12 and call.prompt_tokens > 0 for call in result.usage.calls)
    assert not result.completion
    assert result.status == ("truncated" if replies[-1]["finish_reason"] == "length" else "no-code")


@pytest.mark.slow
def test_a_run_through_the_command_line(corpus: Corpus, bench: Benchmark, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"normalize_title": [
        bash("ls -R corpus"), WRITE, bash(CHECK), bash(SUBMIT)]}))
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"),
                               "--tool-script", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        run_dir = tmp_path / "run"
        done = subprocess.run(knowbench_command(
            "run", str(bench.path), "--model", "scripted", "--base-url", f"http://127.0.0.1:{port}/v1",
            "--method", "mini-swe-agent", "--corpus", str(corpus.directory), "--n", "2",
            "--max-turns", "8", "--price", "0.15,0.60", "--out", str(run_dir), "--workers", "1",
            "--env", "self", "--progress-every", "0"),  # the default engine: the fork server
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True,
            timeout=300)
        assert done.returncode == 0, done.stderr
    finally:
        server.terminate()
        server.wait()
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all(row["passed"] for row in samples)
    assert all(row["extra"]["trajectory"]["end"] == "submitted" and len(row["usage"]["calls"]) == 4
               for row in samples)
    expected = sum(row["usage"]["prompt_tokens"] * 0.15 + row["usage"]["completion_tokens"] * 0.60
                   for row in samples) / 1e6
    cost = json.loads((run_dir / "summary.json").read_text())["cost"]
    assert cost["requests"] == 8 and cost["cost"] == pytest.approx(expected) and expected > 0
    assert json.loads((run_dir / "run.json").read_text())["settings"]["method"]["method"] == \
        "mini-swe-agent"


@pytest.mark.parametrize("submitted", [False, True], ids=["answer-file", "submitted-text"])
def test_a_choice_task_is_answered_in_answer_txt_or_the_submitted_text(
        best_sandbox: Sandbox, tmp_path: Path, submitted: bool) -> None:
    basic = load_benchmark(ROOT / "examples" / "basic")
    task = basic.task("text/re-match-vs-search")
    answer = f"Answer: {', '.join(task.answer)}"
    script = [bash("python -c \"import re; print(re.match('b', 'ab'), re.search('b', 'ab'))\""),
              bash(f"{SUBMIT} && echo '{answer}'") if submitted else
              bash(f"echo '{answer}' > answer.txt && {SUBMIT}")]
    with ScriptedOpenAIServer(responder=tool_script_responder({"re.match(pattern, s)": script})) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url, max_retries=0)
        engine = SubprocessEngine(best_sandbox, workers=1)
        try:
            with pytest.warns(UserWarning, match="holds only the task's file"):
                summary = run_benchmark(basic, backend, _method(None), engine, tmp_path / "run",
                                        SamplingParams(), Limits(), task_ids=[task.task_id])
        finally:
            engine.close()
        prompt = server.requests[0].body["messages"][1]["content"]
    [result] = summary.results
    assert "answer.txt" in prompt and "Answer: X" in prompt
    assert "None <re.Match object" in _observations(result)[0]
    assert result.passed and result.chosen == sorted(task.answer)
    assert result.completion.strip() == answer


def test_without_the_package_the_method_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "minisweagent", None)  # import fails as when not installed
    with pytest.raises(UserError, match=r"pip install 'knowbench\[mini-swe-agent\]'"):
        get_method("mini-swe-agent")
