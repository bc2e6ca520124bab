"""Novel-API tasks from knowledge bundles: offline masking of executed examples, graded tasks
written by a (scripted) model, the execute-then-assert harness with its null-stub check, the
target-API spy on tasks whose reference reaches the API through aliases, C1/C2/C3 filters
against the scripted OpenAI-compatible server, API_acc / Param_corr in the runs they make,
and a retrieval corpus over the bundle pool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import BundleExample, BundleSignature, FunctionTask, KnowledgeBundle
from knowbench.builders.novel_corpus import build_bundle_corpus, read_pool
from knowbench.builders.novel_filters import run_filters
from knowbench.builders.novel_tasks import (
    build_benchmark,
    drafts_from_bundle,
    drafts_from_reply,
)
from knowbench.builders.novelapibench import locate, read_filters
from knowbench.errors import UserError
from knowbench.execution.engine import Engine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.methods.oracle import OracleMethod
from knowbench.methods.rag import RagBM25
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Generation, Limits
from knowbench.report.html import write_report
from knowbench.run import evaluate_function
from knowbench.scoring.classifier import classify
from knowbench.scoring.failure_records import TaskInfo
from openai_server import ScriptedOpenAIServer, last_user_message

API = "numpy.fft.fftfreq"
LIMITS = Limits(wall_s=30)


def fftfreq_bundle() -> KnowledgeBundle:
    return KnowledgeBundle(
        signature=BundleSignature(qualified_name=API),
        mechanism="Returns the sample frequencies of a discrete Fourier transform of length n.",
        examples=[
            BundleExample(code="import numpy as np\nn = 8\nfreq = np.fft.fftfreq(n, d=0.1)\nprint(freq)\n",
                          status="passed"),
            BundleExample(code="from numpy.fft import fftfreq as ff\nprint(ff(4))\n", status="passed"),
            BundleExample(code="import numpy as np\nfor n in (2, 4):\n    print(np.fft.fftfreq(n))\n",
                          status="passed"),
            BundleExample(code="import numpy as np\nnp.fft.fftfreq('x')\n", status="failed"),
        ])


@pytest.fixture(scope="module")
def fork_engine(best_sandbox) -> Iterator[Engine]:
    engine = ForkServerEngine(best_sandbox, workers=2, preload=["numpy"])
    yield engine
    engine.close()


def test_offline_drafts_mask_the_step_that_calls_the_api() -> None:
    drafts, dropped = drafts_from_bundle(API, fftfreq_bundle())
    assert [d.reference for d in drafts] == [
        "def solution():\n    freq = np.fft.fftfreq(n, d=0.1)\n    return freq\n",
        "def solution():\n    from numpy.fft import fftfreq as ff\n    return ff(4)\n"]
    assert drafts[0].context == "import numpy as np\nn = 8"
    assert drafts[1].context == ""  # the import that names the API moved into the reference
    assert all("fftfreq" not in d.description for d in drafts)
    assert sorted(d.reason for d in dropped) == [
        "example not executed (failed)", "the API is called inside a For statement, which cannot be masked as one step"]


def test_offline_tasks_get_a_harness_and_pass_their_reference(tmp_path: Path, fork_engine: Engine) -> None:
    report = build_benchmark({API: fftfreq_bundle()}, tmp_path / "bench", fork_engine, LIMITS)
    assert report["tasks"] == 2, report
    bench = load_benchmark(tmp_path / "bench")
    for task in bench.tasks:
        assert isinstance(task, FunctionTask) and task.api_check == "require"
        kept = task.metadata["novel"]["assertions"]["kept"]
        assert "s0_value" in kept and "s0_shape" in kept
        # the example the task came from is not in its bundle (oracle:E would hand over the answer)
        source = task.metadata["novel"]["example"]
        assert fftfreq_bundle().examples[source].code not in [e.code for e in task.bundle.examples]
        result = evaluate_function(task, Generation(task_id=task.task_id, sample_idx=0, completion=task.reference),
                                   fork_engine, LIMITS)
        assert result.passed and result.api_called and result.params_correct, result.execution
    # retrieval over the same pool withholds the example a task was masked from, as the oracle does
    corpus = build_bundle_corpus({API: fftfreq_bundle()}, "pool", tmp_path / "corpus", "test")
    rag = RagBM25(corpus=str(corpus.directory), top_k=10)
    withheld_any = False
    for task in bench.tasks:
        trace = rag.prompt(task).trace
        source = f"fftfreq example {task.metadata['novel']['example']}"
        withheld = [item["name"] for item in trace["excluded"] if item["reason"] == "target span"]
        assert withheld in ([], [source]) and source not in [hit["name"] for hit in trace["retrieved"]]
        withheld_any = withheld_any or bool(withheld)
        assert trace["hit_at_k"] is True
    assert withheld_any  # the query of the first task does reach its source example


def llm_reply() -> str:
    tasks = [
        {"difficulty": "easy", "description": "Return the sample frequencies of an n-point transform "
         "with sample spacing d, as a list; reject n < 1 with ValueError.",
         "signature": "def solution(n, d):",
         "reference": "def solution(n, d):\n    from numpy.fft import fftfreq as ff\n    if n < 1:\n"
                      "        raise ValueError('n')\n    return ff(n, d=d).tolist()\n",
         "scenarios": [{"args": "(4, 1.0)"}, {"args": "(8, 0.5)"}, {"args": "(0, 1.0)", "edge": True}]},
        {"difficulty": "medium", "description": "Count an n-point spectrum's bins and its largest "
         "absolute frequency.", "signature": "def solution(n):",
         "reference": "import numpy.fft as nf\n_freqs = nf.fftfreq\n\ndef solution(n):\n"
                      "    spectrum = _freqs(n)\n    return (len(spectrum), float(abs(spectrum).max()))\n",
         "scenarios": [{"args": "(4,)"}, {"args": "(5,)"}, {"args": "(1,)", "edge": True}]},
        {"difficulty": "hard", "description": "Report the length of an n-point frequency axis.",
         "signature": "def solution(n):",
         "reference": "def solution(n):\n    import numpy as np\n    np.fft.fftfreq(n)\n    return n\n",
         "scenarios": [{"args": "(4,)"}, {"args": "(6,)"}]},
        {"difficulty": "easy", "description": "Call fftfreq on n.", "signature": "def solution(n):",
         "reference": "def solution(n):\n    import numpy as np\n    return np.fft.fftfreq(n).tolist()\n",
         "scenarios": [{"args": "(4,)"}]},
    ]
    return "Here they are:\n```json\n" + json.dumps({"tasks": tasks}) + "\n```"


def test_model_drafts_that_name_the_api_are_dropped() -> None:
    drafts, dropped = drafts_from_reply(API, llm_reply())
    assert [d.difficulty for d in drafts] == ["easy", "medium", "hard"]
    assert [d.reason for d in dropped] == ["the description names the API"]
    assert drafts[1].context == "import numpy.fft as nf\n_freqs = nf.fftfreq"  # helpers become context


@pytest.fixture(scope="module")
def llm_bench(tmp_path_factory: pytest.TempPathFactory, fork_engine: Engine) -> Path:
    out = tmp_path_factory.mktemp("llm") / "bench"
    with ScriptedOpenAIServer(responder=lambda body: llm_reply()) as server:
        report = build_benchmark({API: fftfreq_bundle()}, out, fork_engine, LIMITS,
                                 llm=OpenAIBackend(model="writer", base_url=server.base_url))
        assert API in last_user_message(server.requests[-1].body)
    assert report["mode"] == "llm"
    return out


def test_null_stub_drops_assertions_that_do_not_need_the_api(llm_bench: Path) -> None:
    report = json.loads((llm_bench / "tasks_report.json").read_text())
    reasons = report["dropped_by_reason"]
    # hard: its output never depends on the API, so every assertion passes with a null stub
    assert reasons.get("every assertion also passes with the API replaced by a null stub") == 1, reasons
    tasks = {task.difficulty: task for task in load_benchmark(llm_bench).tasks}
    assert set(tasks) == {"easy", "medium"}
    easy = tasks["easy"].metadata["novel"]["assertions"]
    # the edge case raises ValueError before the API is reached: the null stub raises it too
    assert "s2_edge_raises" not in easy["kept"] and easy["dropped_by_null_stub"] >= 1
    assert {"s0_value", "s1_value", "s0_differs_from_s1"} <= set(easy["kept"])
    assert "fftfreq" not in tasks["easy"].instruction


def test_the_spy_sees_calls_through_aliases_and_requires_one(llm_bench: Path, fork_engine: Engine) -> None:
    medium = next(t for t in load_benchmark(llm_bench).tasks if t.difficulty == "medium")
    assert isinstance(medium, FunctionTask)

    def judge(code: str):
        return evaluate_function(medium, Generation(task_id=medium.task_id, sample_idx=0, completion=code),
                                 fork_engine, LIMITS)

    # the reference reaches the API through a module-level alias of `import numpy.fft as nf`
    reference = judge(medium.reference)
    assert reference.passed and reference.api_called, reference.execution
    # right values, computed without the API: every test fails for want of a call
    by_hand = judge("def solution(n):\n    import math\n    return (n, float(math.floor(n / 2) / n))\n")
    assert not by_hand.passed and by_hand.api_called is False
    assert all("numpy.fft.fftfreq was not called" in t.message for t in by_hand.execution.tests), by_hand.execution
    diagnosis = classify(by_hand, TaskInfo.from_task(medium))
    assert (diagnosis.label, diagnosis.evidence.rule) == ("WrongAPISelection", "target-api-not-called")
    # another alias, and arguments that do not bind, are told apart
    other = judge("def solution(n):\n    from numpy import fft as f\n    try:\n        f.fftfreq(n, 1.0, 2.0, 3)\n"
                  "    except TypeError:\n        pass\n    s = f.fftfreq(n)\n    return (len(s), float(abs(s).max()))\n")
    assert other.passed and other.api_called and other.params_correct is False


def reply_for(tasks: dict[str, FunctionTask], novel_for_model: set[str]):
    """C2 (no knowledge): right code only for tasks not in `novel_for_model`; C3 (the Full
    bundle in the prompt): the reference."""
    def respond(body: dict) -> str:
        text = last_user_message(body)
        task = next(t for t in tasks.values() if t.instruction.strip() in text)
        if "Reference material" in text or task.task_id not in novel_for_model:
            return f"```python\n{task.reference}```"
        return "```python\ndef solution(*args):\n    return None\n```"
    return respond


def test_filters_against_the_scripted_server(llm_bench: Path, tmp_path: Path, fork_engine: Engine) -> None:
    bench = load_benchmark(llm_bench)
    tasks = {task.task_id: task for task in bench.tasks if isinstance(task, FunctionTask)}
    novel = {next(t.task_id for t in tasks.values() if t.difficulty == "easy")}
    with ScriptedOpenAIServer(responder=reply_for(tasks, novel)) as server:
        backend = OpenAIBackend(model="small/model", base_url=server.base_url)
        solver = OpenAIBackend(model="strong", base_url=server.base_url)
        counts = run_filters(bench, tmp_path, fork_engine, LIMITS, model=backend, model_name="small/model",
                             solver=solver, solver_name="strong")
    assert (counts["c1_passed"], counts["c2_novel"], counts["c3_passed"], counts["instance"]) == (2, 1, 1, 1)
    filters = read_filters(locate(tmp_path), "small_model")  # the importer's reader
    assert filters.instance() == sorted(novel)
    c2 = {task_id: row for task_id, row in filters.c2.items()}
    assert [row["fail_count"] for task_id, row in sorted(c2.items(), key=lambda kv: kv[0] in novel)] == [0, 3]
    assert (tmp_path / "data/benchmark/instances/small_model.txt").read_text().split() == sorted(novel)
    # the C3 run (oracle:Full) reports API_acc and Param_corr beside pass@1, in its summary and report
    summary = json.loads((tmp_path / "runs/c3-small_model/summary.json").read_text())
    overall = summary["scores"]["overall"]
    assert (overall["pass_at"]["1"], overall["api_acc"], overall["param_corr"]) == (1.0, 1.0, 1.0)
    c2_summary = json.loads((tmp_path / "runs/c2-small_model/summary.json").read_text())
    assert c2_summary["scores"]["overall"]["api_acc"] == 0.5  # the novel task's samples never call it
    page = write_report([tmp_path / "runs/c2-small_model", tmp_path / "runs/c3-small_model"],
                        tmp_path / "report.html").read_text()
    assert "API selection and parameters" in page and "oracle:Full" in page


def test_a_corpus_over_the_release_bundles_finds_the_target(shared_data, tmp_path: Path) -> None:
    release = shared_data("anchors/novelapibench")
    pool = read_pool(release)
    assert sorted(pool) == ["httpx.put", "httpx.request"]
    corpus = build_bundle_corpus(pool, "novel-pool", tmp_path / "corpus", f"bundles:{release}")
    assert corpus.manifest.counts["function"] == 4 and corpus.manifest.counts["doc"] == 2
    task = FunctionTask(
        task_id="put-json", domain="swe", instruction="Replace a resource on a server with a JSON body, "
        "sending it with an HTTP PUT, and return the response status code.",
        prompt_code="def solution(url, data):\n    ...\n", entry_point="solution",
        reference="def solution(url, data):\n    import httpx\n    return httpx.put(url, json=data).status_code\n",
        tests=[{"name": "t", "code": "def test_t():\n    pass\n"}], target_api="httpx.put",
        knowledge_apis=["httpx.put"], bundle=pool["httpx.put"])
    trace = RagBM25(corpus=str(tmp_path / "corpus"), top_k=5).prompt(task).trace
    assert trace["hit_at_k"] is True, trace["retrieved"]
    oracle = OracleMethod(cell="Full").prompt(task)
    assert "httpx.put" in oracle.messages[-1].content


def test_offline_on_the_release_bundles_drops_steps_that_fail_in_the_sandbox(shared_data, tmp_path: Path,
                                                                            fork_engine: Engine) -> None:
    """The release's httpx examples send requests; the sandbox has no network, so each masked step
    raises, and a task that only checks that it raises would test the sandbox, not the API."""
    pool = read_pool(shared_data("anchors/novelapibench"))
    drafts = [draft for api in sorted(pool) for draft in drafts_from_bundle(api, pool[api])[0]]
    assert len(drafts) == 6
    with pytest.raises(UserError, match="no task could be built from 2 bundles"):
        build_benchmark(pool, tmp_path, fork_engine, LIMITS)
    report = json.loads((tmp_path / "tasks_report.json").read_text())
    assert report["dropped_by_reason"] == {
        "the reference raised ConnectError on a scenario that is not an edge case": 6}


@pytest.mark.parametrize(("args", "message"), [
    (["corpus", "build", "--bundles", "BAD", "--name", "x", "--dir", "DIR"], "bad.jsonl:2: neither a release bundle"),
    (["corpus", "build", "pkg", "--bundles", "BAD", "--name", "x"], "give no SOURCE or --installed"),
    (["novel", "tasks", "no/such/pool", "--out", "DIR"], "no bundles found"),
    (["novel", "filter", "examples/basic", "--model", "m", "--out", "DIR", "--n", "2", "--novel-fails", "3"],
     "--novel-fails 3 cannot exceed --n 2"),
])
def test_bad_input_to_the_novel_commands_exits_2(args: list[str], message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"api_name": "a.b", "bundle": {"signature": {"qualified_name": "a.b"}}}) + "\n"
                   + json.dumps({"what": 1}) + "\n")
    args = [str(bad) if a == "BAD" else str(tmp_path / "dir") if a == "DIR" else a for a in args]
    done = run_knowbench(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
