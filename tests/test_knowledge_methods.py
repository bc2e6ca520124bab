"""Knowledge methods: rag-bm25 / rag-dense / rag-hybrid and oracle:<cell>.

Prompts for every task of examples/basic under every method, the trace each prompt carries,
budgets, method identities, and end-to-end runs against the scripted OpenAI-compatible server
checking that the retrieved knowledge reached the model and the trace reached the results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import (
    BundleExample,
    BundleParameter,
    BundleSignature,
    ChoiceTask,
    FunctionTask,
    KnowledgeBundle,
)
from knowbench.errors import UserError
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.knowledge.bundles import CELLS
from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.dense import dense_available
from knowbench.methods import METHODS, get_method
from knowbench.methods.base import Method
from knowbench.methods.oracle import OracleMethod
from knowbench.methods.rag import build_query, target_suffix
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark
from knowledge_fixtures import stdlib_corpus
from openai_server import ScriptedOpenAIServer, last_user_message

ROOT = Path(__file__).resolve().parents[1]
BENCH = load_benchmark(ROOT / "examples" / "basic")
NO_DENSE = dense_available()
DENSE = pytest.mark.skipif(NO_DENSE is not None, reason=f"dense extra not installed: {NO_DENSE}")
RAG_METHODS = ["rag-bm25", pytest.param("rag-dense", marks=DENSE),
               pytest.param("rag-hybrid", marks=DENSE)]

FILL_BUNDLE = KnowledgeBundle(
    signature=BundleSignature(
        qualified_name="textwrap.fill",
        parameters=[BundleParameter(name="text", type="str", description="The text to wrap."),
                    BundleParameter(name="width", type="int", default="70",
                                    description="Maximum line length.")],
        returns="str"),
    examples=[BundleExample(code="print(textwrap.fill('a b c d', width=3))", status="passed"),
              BundleExample(code="textwrap.fill(FAILED_EXAMPLE)", status="failed")],
    mechanism="Splits text into words and greedily packs them into lines of at most width.",
    source="def fill(text, width=70, **kwargs):\n    w = TextWrapper(width=width, **kwargs)\n"
           "    return w.fill(text)",
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return stdlib_corpus(tmp_path_factory.mktemp("stdlib"))


def _rag(name: str, corpus: Corpus, **options: Any) -> Method:
    settings = {"corpus": str(corpus.directory), "top_k": 5, "budget": 1500,
                "query": "signature+instruction", **options}
    return get_method(name, **settings)


def _key(task: FunctionTask | ChoiceTask) -> str:
    if isinstance(task, FunctionTask):
        return f"Complete the function `{task.entry_point}`."
    return task.question.strip()[:60]


# --- resolving methods ---------------------------------------------------------------------

def test_methods_are_registered_and_oracle_cells_resolve() -> None:
    assert {"none", "rag-bm25", "rag-dense", "rag-hybrid", "oracle"} <= set(METHODS)
    for cell in CELLS:
        method = get_method(f"oracle:{cell}", corpus=None, top_k=5, budget=2000,
                            query="signature")
        assert isinstance(method, OracleMethod) and method.cell == cell
        assert method.describe() == {"method": f"oracle:{cell}", "cell": cell}


@pytest.mark.parametrize(("name", "message"), [
    ("oracle", "needs a knowledge cell"),
    ("oracle:S+X", r"unknown knowledge cell 'S\+X'"),
    ("none:S", "takes no ':' variant"),
    ("retrieval", "oracle:<cell>"),
    ("rag-bm25", "needs a knowledge corpus"),
])
def test_bad_method_names_and_options_are_user_errors(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        get_method(name, corpus=None, top_k=5, budget=2000, query="signature")


def test_bad_rag_options_are_user_errors(corpus: Corpus) -> None:
    with pytest.raises(UserError, match="unknown query mode"):
        _rag("rag-bm25", corpus, query="everything")
    with pytest.raises(UserError, match="no knowledge corpus"):
        get_method("rag-bm25", corpus="no-such-corpus-knowbench", top_k=5, budget=1, query="signature")


# --- prompts for every task kind -------------------------------------------------------------

@pytest.mark.parametrize("name", RAG_METHODS)
def test_rag_methods_prompt_every_task_kind_with_retrieved_knowledge(corpus: Corpus, name: str) -> None:
    method = _rag(name, corpus)
    kinds = set()
    for task in BENCH.tasks:
        prompt = method.prompt(task)
        user = prompt.messages[-1].content
        assert _key(task) in user
        trace = prompt.trace
        assert trace["method"] == name and trace["corpus_hash"] == corpus.content_hash
        assert 1 <= len(trace["retrieved"]) <= 5
        assert [item["rank"] for item in trace["retrieved"]] == list(range(1, len(trace["retrieved"]) + 1))
        assert trace["knowledge_tokens"] <= 1500
        assert trace["prompt_tokens"] == prompt.approx_tokens
        first = corpus.chunks[corpus.position[trace["retrieved"][0]["id"]]]
        assert user.startswith("Reference material that may help:")
        assert first.text.splitlines()[0] in user
        kinds.add(task.kind)
    assert kinds == {"function", "choice"}


@pytest.mark.parametrize("cell", list(CELLS))
def test_oracle_cells_prompt_every_task_kind(cell: str) -> None:
    method = get_method(f"oracle:{cell}")
    for task in BENCH.tasks:
        prompt = method.prompt(task)
        assert _key(task) in prompt.messages[-1].content
        assert prompt.trace["bundle"] is False and prompt.trace["knowledge_tokens"] == 0
        assert "Reference material" not in prompt.messages[-1].content


def test_none_still_prompts_without_knowledge_or_trace() -> None:
    prompt = get_method("none").prompt(BENCH.tasks[0])
    assert prompt.trace == {} and "Reference material" not in prompt.messages[-1].content


# --- traces ---------------------------------------------------------------------------------

def test_trace_records_hit_at_k_and_the_targets_rank(corpus: Corpus) -> None:
    method = _rag("rag-bm25", corpus)
    grade = method.prompt(BENCH.task("algorithms/grade")).trace
    assert grade["target_api"] == "bisect.bisect_right"
    assert grade["knowledge_apis"] == ["bisect.bisect_right"]
    assert grade["hit_at_k"] is True and grade["hit_rank"] == 1 and grade["hit_in_prompt"]
    assert grade["api_ranks"] == {"bisect.bisect_right": 1}
    assert grade["retrieved"][0]["name"] == "bisect.bisect_right"
    missing = method.prompt(BENCH.task("datetime/to_utc")).trace
    assert missing["hit_at_k"] is False and missing["hit_rank"] is None
    choice = method.prompt(BENCH.task("text/re-match-vs-search")).trace
    assert "hit_at_k" not in choice and "hit_rank" not in choice
    json.dumps(grade)  # stored in SampleResult.extra: must be plain JSON


def test_target_suffix_keeps_owning_classes_and_drops_modules() -> None:
    assert target_suffix("more_itertools.chunked") == "chunked"
    assert target_suffix("click.core.Command.invoke") == "Command.invoke"
    assert target_suffix("string.Template.safe_substitute") == "Template.safe_substitute"
    assert target_suffix("attrs.Factory") == "Factory"


def test_signature_query_is_the_signature_alone(corpus: Corpus) -> None:
    task = BENCH.task("text/wrap_paragraphs")
    assert isinstance(task, FunctionTask)
    assert build_query(task, "signature") == "wrap_paragraphs(text: str, width: int=40) -> str"
    assert build_query(task, "signature+instruction").endswith(task.instruction.strip())
    method_task = BENCH.task("text/TemplateRenderer.render")
    assert build_query(method_task, "signature").startswith("TemplateRenderer.render(self")
    trace = _rag("rag-bm25", corpus, query="signature").prompt(task).trace
    assert trace["query"] == "wrap_paragraphs(text: str, width: int=40) -> str"
    assert task.target_api is not None and task.target_api not in trace["query"]


def test_the_budget_cuts_knowledge_in_rank_order(corpus: Corpus) -> None:
    task = BENCH.task("text/wrap_paragraphs")
    small = _rag("rag-bm25", corpus, budget=200).prompt(task)
    states = [item["in_prompt"] for item in small.trace["retrieved"]]
    assert small.trace["knowledge_tokens"] <= 200
    assert states == sorted(states, key=["full", "truncated", "dropped"].index)
    assert "dropped" in states
    nothing = _rag("rag-bm25", corpus, budget=0).prompt(task)
    assert nothing.trace["knowledge_tokens"] == 0
    assert {item["in_prompt"] for item in nothing.trace["retrieved"]} == {"dropped"}
    assert "Reference material" not in nothing.messages[-1].content


def test_describe_names_every_option_that_changes_prompts(corpus: Corpus) -> None:
    description = _rag("rag-bm25", corpus, top_k=3, budget=700, query="signature",
                       exclude_file=True).describe()
    assert description == {
        "method": "rag-bm25", "corpus": "stdlib", "corpus_hash": corpus.content_hash,
        "retriever": description["retriever"], "top_k": 3, "budget": 700, "query": "signature",
        "exclude_file": True}
    assert description["retriever"]["retriever"] == "bm25"


# --- knowledge bundles ----------------------------------------------------------------------

def _with_bundle(task_id: str = "text/wrap_paragraphs") -> FunctionTask:
    task = BENCH.task(task_id)
    assert isinstance(task, FunctionTask)
    return task.model_copy(update={"bundle": FILL_BUNDLE})


@pytest.mark.parametrize(("cell", "shown", "hidden"), [
    ("S_name", ["API: `textwrap.fill`"], ["Signature (S)", "Usage", "How it works", "Implementation"]),
    ("S", ["textwrap.fill(text: str, width: int = 70) -> str", "`width` (int, default 70)"],
     ["API:", "Usage", "How it works", "Implementation"]),
    ("E", ["Usage examples (E)", "textwrap.fill('a b c d', width=3)"], ["Signature", "How it works"]),
    ("M", ["How it works (M)", "greedily packs"], ["Signature", "Usage", "Implementation"]),
    ("C", ["Implementation (C)", "w = TextWrapper"], ["Signature", "Usage", "How it works"]),
    ("S+E", ["Signature (S)", "Usage examples (E)"], ["How it works", "Implementation"]),
    ("S+M+C", ["Signature (S)", "How it works (M)", "Implementation (C)"], ["Usage"]),
    ("Full", ["Signature (S)", "Usage examples (E)", "How it works (M)", "Implementation (C)"], []),
])
def test_oracle_cells_show_exactly_their_components(cell: str, shown: list[str],
                                                    hidden: list[str]) -> None:
    prompt = get_method(f"oracle:{cell}").prompt(_with_bundle())
    user = prompt.messages[-1].content
    assert user.startswith("Reference material that may help:")
    for text in shown:
        assert text in user, text
    for text in [*hidden, "FAILED_EXAMPLE"]:
        assert text not in user, text
    assert prompt.trace["bundle"] is True and prompt.trace["target_api"] == "textwrap.fill"


def test_bundles_round_trip_through_the_benchmark_format(tmp_path: Path) -> None:
    written = write_benchmark(tmp_path / "b", BENCH.manifest, [_with_bundle(), BENCH.tasks[3]])
    loaded = written.task("text/wrap_paragraphs")
    assert isinstance(loaded, FunctionTask) and loaded.bundle == FILL_BUNDLE
    line = json.loads((tmp_path / "b" / "tasks.jsonl").read_text().splitlines()[0])
    assert line["bundle"]["signature"]["qualified_name"] == "textwrap.fill"


def test_bundle_records_are_strict() -> None:
    with pytest.raises(ValidationError):
        KnowledgeBundle.model_validate({"signature": {"qualified_name": "a.b"}, "extra": 1})
    with pytest.raises(ValidationError, match="dotted Python name"):
        BundleSignature(qualified_name="not a name")
    with pytest.raises(ValidationError):
        BundleExample(code="x", status="maybe")  # type: ignore[arg-type]


# --- end to end -----------------------------------------------------------------------------

SELECTED = ["text/wrap_paragraphs", "algorithms/grade", "text/re-match-vs-search"]


def _reply(body: dict[str, Any]) -> str:
    message = last_user_message(body)
    for task in BENCH.tasks:
        if _key(task) in message:
            if isinstance(task, FunctionTask):
                return f"```python\n{task.reference}\n```"
            return f"Answer: {', '.join(task.answer)}"
    return "no idea"


def _run(bench: Any, method: Method, run_dir: Path) -> tuple[Any, list[dict[str, Any]]]:
    with ScriptedOpenAIServer(responder=_reply) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url)
        engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
        try:
            summary = run_benchmark(bench, backend, method, engine, run_dir, SamplingParams(),
                                    Limits(), task_ids=SELECTED)
        finally:
            engine.close()
        bodies = [request.body for request in server.requests]
    return summary, bodies


def _message_for(bodies: list[dict[str, Any]], task_id: str) -> str:
    key = _key(BENCH.task(task_id))
    found = [last_user_message(body) for body in bodies if key in last_user_message(body)]
    assert len(found) == 1, task_id
    return found[0]


@pytest.mark.parametrize("name", RAG_METHODS)
def test_rag_run_end_to_end_sends_retrieved_knowledge_and_stores_the_trace(
        corpus: Corpus, name: str, tmp_path: Path) -> None:
    method = _rag(name, corpus, top_k=3, budget=1200)
    summary, bodies = _run(BENCH, method, tmp_path / "run")
    assert {result.task_id for result in summary.results if result.passed} == set(SELECTED)
    for result in summary.results:
        trace = result.extra["knowledge"]
        assert trace["method"] == name and trace["retrieved"]
        message = _message_for(bodies, result.task_id)
        for item in trace["retrieved"]:
            chunk = corpus.chunks[corpus.position[item["id"]]]
            header = f"[{item['rank']}] "
            if item["in_prompt"] == "full":
                assert header in message and chunk.text.strip() in message
            elif item["in_prompt"] == "dropped":
                assert header not in message
        assert result.extra["prompt_tokens_approx"] == trace["prompt_tokens"]
    grade = next(r for r in summary.results if r.task_id == "algorithms/grade")
    assert grade.extra["knowledge"]["hit_at_k"] is True
    # The cost counts the knowledge added, inside the prompt tokens the server reported.
    added = [r.extra["knowledge"]["knowledge_tokens"] for r in summary.results]
    assert summary.cost is not None and summary.cost.knowledge_tokens_per_sample == round(
        sum(added) / len(added), 2) > 0
    assert summary.cost.prompt_tokens == sum(r.usage.prompt_tokens for r in summary.results) > 0
    stored = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(row["extra"]["knowledge"]["corpus_hash"] == corpus.content_hash for row in stored)
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert settings["method"] == method.describe()


def test_oracle_run_end_to_end_sends_the_bundle(tmp_path: Path) -> None:
    tasks = [_with_bundle() if task.task_id == "text/wrap_paragraphs" else task
             for task in BENCH.tasks]
    bench = write_benchmark(tmp_path / "bench", BENCH.manifest, tasks)
    summary, bodies = _run(bench, get_method("oracle:S+E"), tmp_path / "run")
    assert all(result.passed for result in summary.results)
    message = _message_for(bodies, "text/wrap_paragraphs")
    assert "Usage examples (E)" in message and "textwrap.fill('a b c d', width=3)" in message
    assert "FAILED_EXAMPLE" not in message and "How it works" not in message
    traces = {result.task_id: result.extra["knowledge"] for result in summary.results}
    assert traces["text/wrap_paragraphs"]["bundle"] is True
    assert traces["text/wrap_paragraphs"]["components"] == {"S": True, "E": True}
    assert traces["algorithms/grade"]["bundle"] is False
    assert "Reference material" not in _message_for(bodies, "algorithms/grade")
