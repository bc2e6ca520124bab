"""The `agent` method: tool-using episodes against the scripted OpenAI-compatible server.

A small real corpus holds the task's target (and a copy of it in the docs); the scripted
model searches, lists, reads, runs snippets in the real sandbox and submits. Checked: the
episode and its stored trajectory, the target never coming back from any tool, loop
detection, the turn and token limits, a hostile snippet contained like any sample, and a
run killed with SIGKILL resuming with its finished episodes kept.
"""

from __future__ import annotations

import html
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import knowbench_command
from knowbench.benchmark.load import Benchmark, load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.errors import UserError
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import Sandbox
from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.ingest import build_corpus
from knowbench.methods import get_method
from knowbench.methods.agent import AgentMethod
from knowbench.models.offline import ReferenceBackend
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SamplingParams
from knowbench.report.html import write_report
from knowbench.run import RunSummary, TimePolicy, run_benchmark
from knowledge_fixtures import write_files
from openai_server import (
    ScriptedOpenAIServer,
    ToolTurn,
    assistant_turns,
    call,
    tool_script_responder,
)

ROOT = Path(__file__).resolve().parents[1]
MARKER = "squeezed_title_parts"  # a name only the target's body uses
TARGET = f'''def normalize_title(text, sep="-"):
    """Turn a title into a slug."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    {MARKER} = re.sub(r"[^a-z0-9]+", sep, ascii_text.lower())
    return {MARKER}.strip(sep)
'''
FILES = {
    "pkg/__init__.py": '"""Text helpers."""\n',
    "pkg/textutil.py": '"""Titles and slugs."""\nimport re\nimport unicodedata\n\n\n' + TARGET + '''

def title_words(text):
    """Split a title into its words, dropping punctuation."""
    return re.findall(r"[A-Za-z0-9]+", text)
''',
    "docs/guide.md": f'''# Guide

## Slugs

Titles become slugs with accents stripped (NFKD) and the separator between words:

```python
{TARGET}```

## Words

`title_words(text)` splits a title into its words and drops punctuation.
''',
}
SNIPPET = "import unicodedata\nprint(unicodedata.normalize('NFKD', 'café').encode('ascii', 'ignore'))"


def make_task() -> FunctionTask:
    return FunctionTask(
        task_id="text/normalize_title", domain="text",
        metadata={"source_path": "pkg/textutil.py", "source_span": [6, 10]},
        instruction="Turn a title into an ASCII slug: strip accents with NFKD, lower-case, "
                    "collapse other characters into the separator, trim separators.",
        prompt_code='def normalize_title(text, sep="-"):\n    """Turn a title into a slug."""\n    ...\n',
        entry_point="normalize_title", context="import re\nimport unicodedata", reference=TARGET,
        tests=[TestSpec(name="t", code="assert normalize_title('Café au Lait!') == 'cafe-au-lait'")])


def corpus_of_files(root: Path, name: str) -> Corpus:
    """A corpus of FILES (the target's module and a guide quoting it), built under `root`."""
    return build_corpus(str(write_files(root / "src", FILES)), name, directory=root / "corpus")


def bench_of_task(root: Path) -> Benchmark:
    """A benchmark of the one task `make_task`, written under `root`."""
    basic = load_benchmark(ROOT / "examples" / "basic")
    return write_benchmark(root / "bench", basic.manifest, [make_task()])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return corpus_of_files(tmp_path_factory.mktemp("agent"), "agent-test")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    return bench_of_task(tmp_path_factory.mktemp("bench"))


def _run(bench: Benchmark, method: AgentMethod, sandbox: Sandbox, run_dir: Path,
         responder: Any, n: int = 1, limits: Limits | None = None,
         concurrency: int = 8) -> tuple[RunSummary, list[dict[str, Any]]]:
    with ScriptedOpenAIServer(responder=responder) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url, max_retries=0,
                                concurrency=concurrency)
        engine = SubprocessEngine(sandbox, workers=1)
        try:
            summary = run_benchmark(bench, backend, method, engine, run_dir,
                                    SamplingParams(n=n, max_tokens=512), limits or Limits(wall_s=5.0),
                                    time_policy=TimePolicy(mode="fixed", fixed_s=(limits or Limits(wall_s=5.0)).wall_s))
        finally:
            engine.close()
        return summary, [request.body for request in server.requests]


def _tool_messages(bodies: list[dict[str, Any]]) -> list[str]:
    return [str(message.get("content")) for body in bodies for message in body["messages"]
            if message.get("role") == "tool"]


def _agent(corpus: Corpus, **options: Any) -> AgentMethod:
    method = get_method("agent", corpus=str(corpus.directory), top_k=3, **options)
    assert isinstance(method, AgentMethod)
    return method


def test_an_episode_searches_reads_runs_a_snippet_and_submits(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script: list[str | ToolTurn] = [
        call("search", query="slug title accents separator"),
        call("list", path=""),
        call("read", path="pkg/textutil.py", start=1, end=40),
        call("python", code=SNIPPET),
        call("submit", code=f"```python\nimport re, unicodedata\n{TARGET}```"),
    ]
    summary, bodies = _run(bench, _agent(corpus), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    assert result.passed and result.status == "pass"
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "submitted" and trajectory["turns"] == 5
    assert [step["name"] for step in trajectory["steps"] if step["role"] == "tool"] == \
        ["search", "list", "read", "python"]
    tools = {step["name"]: step for step in trajectory["steps"] if step["role"] == "tool"}
    assert "title_words" in tools["search"]["content"]
    assert tools["list"]["content"].split() == ["docs/", "pkg/"]
    assert "def title_words" in tools["read"]["content"]
    assert "b'cafe'" in tools["python"]["content"]
    assert tools["python"]["record"]["sandbox"] == best_sandbox.kind
    # what the model was sent is what the trajectory says it was sent
    assert len(bodies) == 5 and all(body["tools"] for body in bodies)
    assert [m["content"] for m in bodies[-1]["messages"] if m["role"] == "tool"] == \
        [tools[name]["content"] for name in ("search", "list", "read", "python")]
    # token counts: the sample's usage sums every call's, as the server reported them
    per_call = [step["usage"] for step in trajectory["steps"] if step["role"] == "assistant"]
    assert result.usage.prompt_tokens == sum(u["prompt_tokens"] for u in per_call) > 0
    assert result.usage.completion_tokens == sum(u["completion_tokens"] for u in per_call) > 0
    assert trajectory["usage"] == {"prompt_tokens": result.usage.prompt_tokens,
                                   "completion_tokens": result.usage.completion_tokens}
    # and lists each call, as cost accounting reads it
    assert [call.model_dump() for call in result.usage.calls] == per_call
    assert result.usage.requests == 5
    stored = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert stored[0]["extra"]["trajectory"]["steps"] == trajectory["steps"]
    # the report's drill-down shows the episode: every call and what each tool returned
    page = write_report([tmp_path / "run"], tmp_path / "report.html").read_text()
    assert "agent episode: submitted" in page and "→ python(" in page
    assert html.escape("b'cafe'") in page and "def title_words" in page


@pytest.mark.parametrize("exclude_file", [False, True])
def test_the_target_is_withheld_from_every_tool(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path,
        exclude_file: bool) -> None:
    snoop = (f"import os\nprint('corpus visible:', os.path.exists({str(corpus.directory)!r}))\n"
             f"print('bench visible:', os.path.exists({str(bench.path)!r}))")
    script: list[str | ToolTurn] = [
        call("search", query="normalize_title NFKD ascii re.sub strip sep"),
        call("read", path="pkg/textutil.py", start=1, end=100),
        call("read", path="docs/guide.md"),
        call("list", path="pkg"),
        call("python", code=snoop),
        call("submit", code="def normalize_title(text, sep='-'):\n    return text\n"),
    ]
    summary, bodies = _run(bench, _agent(corpus, exclude_file=exclude_file), best_sandbox,
                           tmp_path / "run", tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    outputs = _tool_messages(bodies)
    assert len(outputs) == 15  # 5 tool results, sent again with every later turn
    assert all(MARKER not in text for text in outputs)
    search, source, guide, listing, python = outputs[-5:]
    assert "title_words" in search  # the corpus is searched, only the target is gone
    assert "withheld" in guide and "## Words" in guide  # the doc's copy of the target is withheld
    if exclude_file:
        assert source.startswith("no file") and listing.split() == ["__init__.py"]
    else:
        assert "def title_words" in source and "withheld" in source
        assert listing.split() == ["__init__.py", "textutil.py"]
    assert "corpus visible: False" in python and "bench visible: False" in python
    assert result.extra["knowledge"]["leakage"]["rules"][-1] == "target source"


def test_repeating_the_same_tool_call_ends_the_episode(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script: list[str | ToolTurn] = [call("list", path=""), call("search", query="slug")]
    summary, bodies = _run(bench, _agent(corpus, loop_limit=3), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "loop" and "search called 3 times" in trajectory["detail"]
    assert len(bodies) == 4  # list, then search three times; the third is not run
    assert [step.get("name") for step in trajectory["steps"] if step["role"] == "tool"] == \
        ["list", "search", "search"]
    assert result.completion == "" and result.status == "no-code"
    assert result.finish_reason == "agent:loop"


def _busy(body: dict[str, Any]) -> ToolTurn:
    """A model that never submits: a different call every turn."""
    return call("read", path="pkg/textutil.py", start=assistant_turns(body))


def test_the_turn_limit_ends_an_episode(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    summary, bodies = _run(bench, _agent(corpus, max_turns=3), best_sandbox, tmp_path / "run", _busy)
    [result] = summary.results
    assert len(bodies) == 3 and result.extra["trajectory"]["end"] == "max-turns"
    assert result.finish_reason == "agent:max-turns" and not result.passed


def test_the_token_limit_ends_an_episode(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    method = _agent(corpus, max_turns=50, episode_tokens=400)
    summary, bodies = _run(bench, method, best_sandbox, tmp_path / "run", _busy)
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    assert trajectory["end"] == "token-limit" and result.finish_reason == "agent:token-limit"
    used = result.usage.prompt_tokens + result.usage.completion_tokens
    assert used >= 400 and len(bodies) == trajectory["turns"] < 50
    before_last = used - sum(trajectory["steps"][-2]["usage"].values())
    assert before_last < 400  # it stopped at the first call that reached the limit


def test_n_samples_are_independent_episodes(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script: list[str | ToolTurn] = [call("search", query="slug"), call("submit", code=TARGET)]
    summary, bodies = _run(bench, _agent(corpus), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}), n=2,
                           concurrency=1)
    assert [r.sample_idx for r in summary.results] == [0, 1] and all(r.passed for r in summary.results)
    # each episode starts from the task alone; with one request in flight at a time, one
    # episode runs at a time, so neither waits on the other's calls against its own clock
    assert [assistant_turns(body) for body in bodies] == [0, 1, 0, 1]


def test_a_python_call_that_attacks_the_host_is_contained(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    attack = "\n".join([
        "import os, socket",
        f"try:\n    open({str(canary)!r}, 'w').write('owned')\nexcept OSError as e:\n    print('write:', type(e).__name__)",
        "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    print('net: open')\n"
        "except OSError as e:\n    print('net:', type(e).__name__)",
        "print('home:', os.path.exists(os.path.expanduser('~root/.ssh')), os.listdir('/home') if os.path.isdir('/home') else None)",
        "x = bytearray(8 * 1024 ** 3)",
    ])
    script: list[str | ToolTurn] = [call("python", code=attack),
                                    call("python", code="while True: pass"),
                                    call("submit", code=TARGET)]
    summary, _ = _run(bench, _agent(corpus), best_sandbox, tmp_path / "run",
                      tool_script_responder({"normalize_title": script}),
                      limits=Limits(wall_s=2.0, cpu_s=2))
    [result] = summary.results
    assert not canary.exists()
    first, second = [step for step in result.extra["trajectory"]["steps"] if step["role"] == "tool"]
    assert "net: open" not in first["content"] and "net:" in first["content"]
    assert first["record"]["status"] == "memory"
    assert second["record"]["status"] == "timeout"
    assert result.passed  # the episode went on after both and was judged as usual


def test_backends_without_tool_calls_are_refused_before_the_run(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    engine = SubprocessEngine(best_sandbox, workers=1)
    try:
        with pytest.raises(UserError, match="needs a model that makes tool calls"):
            run_benchmark(bench, ReferenceBackend(), _agent(corpus), engine, tmp_path / "run",
                          SamplingParams(), Limits())
    finally:
        engine.close()
    assert not (tmp_path / "run" / "run.sqlite").exists()


# --- a run killed with SIGKILL resumes: finished episodes kept, unfinished ones redone ------

def _generations(run_dir: Path) -> dict[int, str]:
    database = run_dir / "run.sqlite"
    if not database.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT sample_idx, record FROM generations").fetchall()
    except sqlite3.OperationalError:
        return {}
    return dict(rows)


@pytest.mark.slow
def test_a_killed_agent_run_resumes_keeping_finished_episodes(
        corpus: Corpus, bench: Benchmark, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"normalize_title": [
        {"calls": [["list", {"path": ""}]]},
        {"calls": [["search", {"query": "slug"}]]},
        {"calls": [["submit", {"code": TARGET}]]}]}))
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def serve(log: Path) -> tuple[subprocess.Popen[str], list[str]]:
        server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"),
                                   "--tool-script", str(script), "--delay", "0.4", "--log", str(log)],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        return server, knowbench_command(
            "run", str(bench.path), "--model", "scripted", "--base-url", f"http://127.0.0.1:{port}/v1",
            "--method", "agent", "--corpus", str(corpus.directory), "--n", "3", "--seed", "0",
            "--temperature", "0.5", "--concurrency", "1", "--no-cache", "--out", str(run_dir),
            "--workers", "1", "--engine", "subprocess", "--env", "self", "--progress-every", "0")

    # Each run gets its own server and log, so nothing the killed run had in flight (a request
    # half sent when it died) can land among the resumed run's requests.
    server, command = serve(tmp_path / "killed.jsonl")
    try:
        victim = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 90
        while not _generations(run_dir) and victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
    finally:
        server.terminate()
        server.wait()
    kept = _generations(run_dir)
    assert 1 <= len(kept) < 3, "the kill did not land between the first and the last episode"
    log = tmp_path / "resumed.jsonl"
    server, command = serve(log)  # another port: the run resumes all the same
    try:
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        server.terminate()
        server.wait()
    after = _generations(run_dir)
    assert sorted(after) == [0, 1, 2]
    for idx, record in kept.items():
        assert after[idx] == record  # finished episodes were kept as they were
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    redone = {body["seed"] for body in requests}  # seed = --seed + sample index
    assert redone == {0, 1, 2} - set(kept)
    # every unfinished episode was played again from its first turn
    assert sorted(assistant_turns(body) for body in requests) == sorted(
        [0, 1, 2] * (3 - len(kept)))
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(row["passed"] and row["extra"]["trajectory"]["end"] == "submitted" for row in samples)


def test_a_choice_task_without_a_corpus_gets_python_and_submit(
        best_sandbox: Sandbox, tmp_path: Path) -> None:
    basic = load_benchmark(ROOT / "examples" / "basic")
    task = basic.task("text/re-match-vs-search")
    script: list[str | ToolTurn] = [
        call("python", code="import re\nprint(re.match('b', 'ab'), re.search('b', 'ab'))"),
        call("submit", answer=f"Answer: {', '.join(task.answer)}")]
    method = get_method("agent")
    assert isinstance(method, AgentMethod)
    with ScriptedOpenAIServer(responder=tool_script_responder({"re.match(pattern, s)": script})) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url, max_retries=0)
        engine = SubprocessEngine(best_sandbox, workers=1)
        try:
            with pytest.warns(UserWarning, match="only the python and submit tools"):
                summary = run_benchmark(basic, backend, method, engine, tmp_path / "run",
                                        SamplingParams(), Limits(), task_ids=[task.task_id])
        finally:
            engine.close()
        bodies = [request.body for request in server.requests]
    [result] = summary.results
    assert result.passed and result.chosen == sorted(task.answer)
    offered = {tool["function"]["name"]: tool["function"]["parameters"]["required"]
               for tool in bodies[0]["tools"]}
    assert offered == {"python": ["code"], "submit": ["answer"]}
    assert "None <re.Match object" in result.extra["trajectory"]["steps"][1]["content"]


# --- a reply cut off at --max-tokens in the middle of a tool call ------------------------

LONG_SNIPPET = "print('the cut-off call ran')\n" + "x = 1\n" * 300  # 900 words: past max_tokens


def _echoed_arguments(bodies: list[dict[str, Any]]) -> list[str]:
    return [call["function"]["arguments"] for body in bodies for message in body["messages"]
            if message.get("role") == "assistant" for call in message.get("tool_calls") or []]


def test_a_tool_call_cut_off_at_max_tokens_is_not_run_and_the_model_is_told(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script: list[str | ToolTurn] = [
        call("python", code=LONG_SNIPPET),
        call("submit", code=TARGET + "\n" + "# padding\n" * 600),  # a cut-off submit too
        call("submit", code=TARGET),
    ]
    summary, bodies = _run(bench, _agent(corpus), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    calls = [step for step in trajectory["steps"] if step["role"] == "assistant"]
    assert [step["finish_reason"] for step in calls] == ["length", "length", "tool_calls"]
    python, submit = [step for step in trajectory["steps"] if step["role"] == "tool"]
    for step, tool in ((python, "python"), (submit, "submit")):
        assert step["record"] == {"cut_off": True}  # not run: no sandbox, no judging
        assert "cut off at the token limit (512 tokens" in step["content"] and "not run" in step["content"]
        assert tool in step["content"] and step["arguments"].startswith('{"code": ')
    assert all("the cut-off call ran" not in text for text in _tool_messages(bodies))
    # the conversation sent back holds only JSON arguments (servers parse earlier calls)
    assert all(isinstance(json.loads(text), dict) for text in _echoed_arguments(bodies))
    assert trajectory["end"] == "submitted" and result.passed and result.finish_reason == "tool_calls"


def test_tool_call_arguments_holding_a_lone_surrogate_are_stored_written_out(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    """JSON arguments may escape a lone surrogate, which no record can hold: the call runs
    with it written as its escape (in a string literal, the same character again), and the
    episode is stored."""
    script: list[str | ToolTurn] = [call("python", code="print(len('\ud800'))"),
                                    call("submit", code=TARGET + "# \ud800\n")]
    summary, _ = _run(bench, _agent(corpus), best_sandbox, tmp_path / "run",
                      tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    [python] = [step for step in result.extra["trajectory"]["steps"] if step["role"] == "tool"]
    assert python["arguments"] == {"code": "print(len('\\ud800'))"}
    assert python["content"] == "stdout:\n1\n"
    assert result.passed and result.completion.endswith("# \\ud800\n")


def test_a_model_cut_off_every_time_ends_truncated(
        corpus: Corpus, bench: Benchmark, best_sandbox: Sandbox, tmp_path: Path) -> None:
    script: list[str | ToolTurn] = [call("submit", code=TARGET + "\n" + "# padding\n" * 600)]
    summary, bodies = _run(bench, _agent(corpus, max_turns=4), best_sandbox, tmp_path / "run",
                           tool_script_responder({"normalize_title": script}))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    # the same cut-off call the third time: the loop rule ends it; its last reply was cut off
    assert trajectory["end"] == "loop" and len(bodies) == 3
    assert result.completion == "" and result.finish_reason == "length"
    assert result.status == "truncated" and not result.passed


# --- a project task: list and read the project's tree, the target and the tests withheld --

AREA_MARKER = "squared_radius_marker"  # only the target's body (and its copies) use it
TEST_MARKER = "TEST_MARKER_42"  # only the task's test file (and its copies) hold it
PROJECT_FILES = {
    "geometry/__init__.py": "",
    "geometry/shapes.py": f'''"""Shapes."""
import math


class Circle:
    def __init__(self, r):
        self.r = r

    @staticmethod
    def unit() -> "Circle":
        return Circle(1)

    def area(self) -> float:
        """The area."""
        {AREA_MARKER} = self.r ** 2
        return math.pi * {AREA_MARKER}


def scale(values, factor=2):
    return [v * factor for v in values]
''',
    # the same function under other names: withheld by the source rule
    "geometry/legacy.py": "import math\n\n\ndef old_area(circle) -> float:\n    sq = circle.r ** 2\n"
                          "    return math.pi * sq\n",
    "docs/notes.md": f"# Notes\n\nHow the area is computed:\n\n```python\n    def area(self):\n"
                     f"        {AREA_MARKER} = self.r ** 2\n        return math.pi * {AREA_MARKER}\n```\n",
    "tests/test_area.py": f'''# {TEST_MARKER}
from geometry.shapes import Circle


def test_unit():
    assert abs(Circle.unit().area() - 3.14159) < 1e-4


def test_two():
    assert abs(Circle(2).area() - 12.56637) < 1e-4
''',
    "tests/test_scale.py": "from geometry.shapes import scale\n\n\ndef test_scale():\n"
                           "    assert scale([1]) == [2]\n",
}


def _project_bench(root: Path) -> Benchmark:
    code = write_files(root / "projects" / "geo" / "code", PROJECT_FILES)
    (code / "tests" / "copy_of_test_area.py").write_text(PROJECT_FILES["tests/test_area.py"])
    (code / "tests" / "__pycache__").mkdir()
    (code / "tests" / "__pycache__" / "test_area.cpython-312.pyc").write_bytes(
        b"\0\0compiled " + TEST_MARKER.encode())
    (code / "link_to_test.py").symlink_to("tests/test_area.py")
    (code / "link_out").symlink_to("/etc/hostname")
    (root / "benchmark.json").write_text(json.dumps({
        "format_version": 1, "name": "geo", "domains": ["geo"], "requirements": [],
        "provenance": {"source": "test"}}))
    task = {"task_id": "geo/area", "domain": "geo", "kind": "project",
            "instruction": "Compute the circle's area.",
            "prompt_code": 'class Circle:\n    def area(self) -> float:\n        """The area."""\n        ...\n',
            "entry_point": "Circle.area",
            "reference": f"class Circle:\n    def area(self) -> float:\n        {AREA_MARKER} = self.r ** 2\n"
                         f"        return math.pi * {AREA_MARKER}\n",
            "tests": [{"name": "tests/test_area.py", "code": PROJECT_FILES["tests/test_area.py"]}],
            "metadata": {"source_path": "code/geometry/shapes.py", "source_span": [13, 16]},
            "project": {"path": "projects/geo", "workdir": "code",
                        "targets": [{"file": "geometry/shapes.py", "qualname": "Circle.area"}],
                        "tests": ["tests/test_area.py"]}}
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return load_benchmark(root)


SNOOP_PROJECT = """import os
print('cwd:', os.path.relpath(os.getcwd(), os.path.join(os.getcwd(), '..', '..')))
for folder, _, names in os.walk('..'):
    for name in sorted(names):
        path = os.path.join(folder, name)
        print('==', path)
        try:
            print(open(path, errors='replace').read())
        except OSError as error:
            print('unreadable', type(error).__name__)
from geometry.shapes import Circle, scale
print('scale:', scale([3]))
try:
    Circle(1).area()
except NotImplementedError as error:
    print('area:', error)
"""


@pytest.mark.parametrize("exclude_file", [False, True])
def test_a_project_task_lists_and_reads_its_tree_without_the_target_or_the_tests(
        corpus: Corpus, best_sandbox: Sandbox, tmp_path: Path, exclude_file: bool) -> None:
    bench = _project_bench(tmp_path / "bench")
    before = {path: path.read_bytes() for path in (tmp_path / "bench").rglob("*")
              if path.is_file() and not path.is_symlink()}
    reference = bench.tasks[0].reference
    script: list[str | ToolTurn] = [
        call("list", path=""),
        call("list", path="project"),
        call("list", path="project/code"),
        call("list", path="project/code/tests"),
        call("list", path="project/code/tests/__pycache__"),
        call("read", path="project/code/geometry/shapes.py"),
        call("read", path="project/code/tests/test_area.py"),
        call("read", path="project/code/tests/copy_of_test_area.py"),
        call("read", path="project/code/link_to_test.py"),
        call("read", path="project/code/geometry/../tests/./test_area.py"),
        call("read", path="project/code/tests/__pycache__/test_area.cpython-312.pyc"),
        call("read", path="project/code/geometry/legacy.py"),
        call("read", path="project/code/docs/notes.md"),
        call("read", path="project/code/link_out"),
        call("read", path="project/code/tests/test_scale.py", start=4, end=5),
        call("read", path="corpus/pkg/textutil.py", start=1, end=40),
        call("search", query="title words"),
        call("python", code=SNOOP_PROJECT),
        call("submit", code=f"```python\n{reference}```"),
    ]
    summary, bodies = _run(bench, _agent(corpus, exclude_file=exclude_file, max_turns=30),
                           best_sandbox, tmp_path / "run",
                           tool_script_responder({"circle's area": script}),
                           limits=Limits(wall_s=30.0))
    [result] = summary.results
    trajectory = result.extra["trajectory"]
    steps = [step for step in trajectory["steps"] if step["role"] == "tool"]
    assert len(steps) == len(script) - 1
    # what the model received, every tool result of every request: never the target's code
    # (its body, its renamed copy, the docs' copy) nor the task's tests (or a copy of them)
    for text in _tool_messages(bodies):
        assert AREA_MARKER not in text and "def old_area" not in text and "sq = circle.r" not in text
        assert TEST_MARKER not in text and "test_two" not in text
    out = {index: step["content"] for index, step in enumerate(steps)}
    assert out[0].split() == ["corpus/", "project/"]
    assert out[1].split() == ["code/"]
    assert out[2].split() == ["docs/", "geometry/", "tests/"]  # no links to tests or outside
    assert out[3].split() == ["test_scale.py"]
    assert out[4].startswith("no folder")
    if exclude_file:
        assert out[5].startswith("no such file")
    else:
        assert "withheld: Circle.area is what the task asks for" in out[5]
        assert "def unit()" in out[5] and "def scale(values" in out[5]
    for index in (6, 7, 8, 9, 10, 11, 12, 13):
        assert out[index].startswith("no such file"), (index, out[index])
    assert "def test_scale" in out[14] and out[14].startswith(
        "--- project/code/tests/test_scale.py:4-5 of 5 lines")
    assert "def title_words" in out[15] and "--- corpus/pkg/textutil.py:13-15" in out[15]
    assert "corpus/pkg/textutil.py:" in out[16]
    python = out[17]
    assert "cwd: geo/code" in python and "scale: [6]" in python
    assert "area: withheld: Circle.area is what the task asks for" in python
    assert "test_scale.py" in python and "test_area.py" not in python
    assert steps[17]["record"]["status"] == "pass"
    # submitted, then judged as any project sample: the project's own tests on the project
    assert trajectory["end"] == "submitted"
    assert result.passed and result.tests_passed == result.tests_total == 2
    after = {path: path.read_bytes() for path in (tmp_path / "bench").rglob("*")
             if path.is_file() and not path.is_symlink()}
    assert after == before
    offered = [tool["function"]["name"] for tool in bodies[0]["tools"]]
    assert offered == ["search", "list", "read", "python", "submit"]
    assert "under project/" in bodies[0]["messages"][1]["content"]


def _body_texts(reference: str) -> list[str]:
    """The bodies (from the first statement, docstring included) of every function defined in
    `reference`, squashed: what must never come back from the project's tree."""
    import ast
    import textwrap

    from knowbench.knowledge.leakage import squash

    lines = textwrap.dedent(reference).splitlines(keepends=True)
    found = []
    for node in ast.walk(ast.parse(textwrap.dedent(reference))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = squash("".join(lines[node.body[0].lineno - 1:node.end_lineno]))
            if len(body) >= 24:
                found.append(body)
    return found


@pytest.mark.slow
def test_the_project_view_of_real_koco_projects_shows_neither_targets_nor_tests(
        shared_data: Any, tmp_path: Path) -> None:
    """Every file `list` and `read` can reach in KOCO's ToolBrain (with its smolagents corpus)
    and PACS, for every task: no target's body, no test file of the task."""
    from knowbench.builders.koco_projects import import_koco_project
    from knowbench.knowledge.leakage import LeakageGuard, squash
    from knowbench.methods.project_view import Normalised, ProjectView

    koco = shared_data("anchors/koco-projects")
    checked = 0
    for relative in ("smolagents/test_examples/ToolBrain", "verl/test_examples/PACS"):
        bench = import_koco_project(koco / relative, tmp_path / relative.rsplit("/", 1)[-1],
                                    requirements=[])
        normalised = Normalised()
        for task in bench.tasks:
            view = ProjectView(task, LeakageGuard(task), normalised=normalised)
            bodies, tests = _body_texts(task.reference), [squash(spec.code) for spec in task.tests]
            target_files = {view.tree / path for path in view.masked}
            assert bodies and tests
            # the bodies are there in the project's own files: what the view must withhold
            assert all(any(body in squash(path.read_text()) for path in target_files) for body in bodies)
            folders, seen = [""], 0
            while folders:
                folder = folders.pop()
                listed = view.list(folder)
                assert listed is not None, folder
                for entry in listed.split("\n") if listed else []:
                    path = f"{folder}/{entry}".strip("/") if folder else entry
                    if entry.endswith("/"):
                        folders.append(path.rstrip("/"))
                        continue
                    text, _ = view.read(path)
                    if text is None:
                        continue
                    seen += 1
                    flat = squash(text)
                    assert not any(body in flat for body in bodies), (task.task_id, path)
                    assert flat not in tests, (task.task_id, path)
            for path in task.tests:
                assert view.read(f"{task.project.workdir}/{path.name}")[0] is None
            assert seen > 50
            checked += 1
    assert checked == 14 + 4


# --- an agent run on a benchmark mined from a real PyPI library, through the CLI ------------

@pytest.mark.slow
def test_an_agent_run_on_a_mined_pypi_benchmark_through_the_cli(tmp_path: Path) -> None:
    """`knowbench mine inflection==0.5.1`, `knowbench corpus build` of the same release, then
    `knowbench run --method agent --corpus inflection` against the scripted model, which
    searches for each target by its name and description, lists, reads the target's own file,
    runs a snippet and submits the reference. No tool result holds a target; the run's
    results, summary and report are written."""
    from helpers import run_knowbench
    from knowbench.knowledge.corpus import open_corpus
    from knowbench.knowledge.leakage import squash
    from knowbench.knowledge.retrieval import open_retriever
    from knowbench.paths import knowbench_home

    home = tmp_path / "home"  # the corpus lands here; the environments are the shared ones
    home.mkdir()
    (knowbench_home() / "envs").mkdir(parents=True, exist_ok=True)
    (home / "envs").symlink_to(knowbench_home() / "envs")
    env = {**os.environ, "KNOWBENCH_HOME": str(home)}
    out = tmp_path / "bench"
    mined = run_knowbench("mine", "inflection==0.5.1", "--domain", "text", "--out", str(out),
                          "--max-tasks", "4", env=env)
    assert mined.returncode == 0, mined.stderr
    built = run_knowbench("corpus", "build", "inflection==0.5.1", "--pypi", "--name", "inflection",
                          env=env)
    assert built.returncode == 0, built.stderr
    bench = load_benchmark(out)
    corpus = open_corpus(home / "corpora" / "inflection")
    tasks = [task for task in bench.tasks if isinstance(task, FunctionTask)]
    assert len(tasks) >= 3

    def query(task: FunctionTask) -> str:
        return f"{task.entry_point} {task.instruction.splitlines()[0]}"

    scripts: dict[str, list[str | ToolTurn]] = {
        f"function `{task.entry_point}`": [
            call("search", query=query(task)),
            call("list", path=""),
            call("read", path=task.metadata["source_path"]),
            call("python", code=f"import inflection\nprint(callable(inflection.{task.entry_point}))"),
            call("submit", code=f"```python\n{task.reference}```"),
        ] for task in tasks}
    bodies = {task.task_id: _body_texts(task.reference) for task in tasks}
    # without leakage control the same search finds the target: the run must not
    retriever = open_retriever("bm25", corpus)
    found = sum(any(body in squash(hit.chunk.text) for hit in retriever.search(query(task), 5)[0]
                    for body in bodies[task.task_id]) for task in tasks)
    assert found == len(tasks)
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(responder=tool_script_responder(scripts)) as server:
        done = run_knowbench(
            "run", str(out), "--model", "scripted", "--base-url", server.base_url,
            "--method", "agent", "--corpus", "inflection", "--out", str(run_dir), "--no-cache",
            "--price", "0.15,0.60", "--progress-every", "0", env=env)
        requests = len(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == len(tasks) and all(row["passed"] for row in samples)
    by_id = {chunk.id: chunk for chunk in corpus.chunks}
    for row in samples:
        steps = row["extra"]["trajectory"]["steps"]
        assert row["extra"]["trajectory"]["end"] == "submitted"
        tools = [step for step in steps if step["role"] == "tool"]
        assert [step["name"] for step in tools] == ["search", "list", "read", "python"]
        assert tools[3]["content"].strip() == "stdout:\nTrue"
        returned = [by_id[chunk] for step in tools
                    for chunk in step["record"].get("hits", []) + step["record"].get("chunks", [])]
        assert returned and tools[0]["record"]["withheld"] >= 1
        for step in tools:
            assert not any(body in squash(step["content"]) for body in bodies[row["task_id"]])
        for chunk in returned:
            assert not any(body in squash(chunk.text) for body in bodies[row["task_id"]]), chunk.id
    method = json.loads((run_dir / "run.json").read_text())["settings"]["method"]
    assert method["method"] == "agent" and method["corpus"] == "inflection"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["scores"]["overall"]["pass_at"]["1"] == 1.0
    assert summary["cost"]["requests"] == requests == 5 * len(tasks)
    assert summary["cost"]["prompt_tokens"] == sum(row["usage"]["prompt_tokens"] for row in samples) > 0
    report = run_knowbench("report", str(run_dir), "--out", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report.html").read_text()
    assert page.count("agent episode: submitted") == len(tasks)
