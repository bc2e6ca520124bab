"""Cost accounting: the tokens every sample cost, their price, and pass@1 against both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.prices import choose_price, load_prices
from knowbench.records import CallUsage, SampleResult, Usage
from knowbench.scoring.cost import Price, parse_price, price_for, summarise_cost
from openai_server import ScriptedOpenAIServer, completion_json, last_user_message

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"
BENCH = load_benchmark(EXAMPLE)
# Two function tasks (one answered right) and a choice task: enough to price, quick to run.
TASKS = ("text/slugify", "text/wrap_paragraphs", "text/re-match-vs-search")


def _reply(body: dict[str, object]) -> str:
    message = last_user_message(body)
    for task in BENCH.tasks:
        if isinstance(task, FunctionTask) and f"`{task.entry_point}`" in message:
            right = task.task_id == "text/slugify"
            code = task.reference if right else "def wrap_paragraphs(text, width=40):\n    return None\n"
            return f"Here you go:\n```python\n{code}\n```"
        if isinstance(task, ChoiceTask) and task.question.strip()[:60] in message:
            return f"Answer: {', '.join(task.answer)}"
    return "no idea"


def _samples(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def _run(server: ScriptedOpenAIServer, run_dir: Path, *options: str) -> str:
    task_options = [arg for task in TASKS for arg in ("--task", task)]
    done = run_knowbench("run", str(EXAMPLE), "--model", "scripted", "--base-url", server.base_url,
                         "--out", str(run_dir), "--no-cache", *task_options, *options)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_run_records_the_reported_tokens_of_every_sample_and_prices_them(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(responder=_reply) as server:
        stdout = _run(server, run_dir, "--price", "2,8")
        # What the server answered each request with (its usage is a pure function of the body).
        answered = [completion_json(r.body, _reply(r.body))["usage"] for r in server.requests]
    samples = _samples(run_dir)
    assert len(samples) == len(TASKS) == len(answered)
    assert sorted((s["usage"]["prompt_tokens"], s["usage"]["completion_tokens"]) for s in samples) \
        == sorted((u["prompt_tokens"], u["completion_tokens"]) for u in answered)
    prompt = sum(u["prompt_tokens"] for u in answered)
    completion = sum(u["completion_tokens"] for u in answered)
    cost = json.loads((run_dir / "summary.json").read_text())["cost"]
    assert (cost["prompt_tokens"], cost["completion_tokens"]) == (prompt, completion)
    assert cost["requests"] == len(TASKS) and cost["estimated_samples"] == 0
    assert cost["price"] == {"input": 2.0, "output": 8.0, "currency": "USD"}
    assert cost["cost"] == pytest.approx((2 * prompt + 8 * completion) / 1e6)
    assert cost["pass_at_1"] == 0.5  # of the function tasks (choice tasks score ACC)
    assert "cost: " in stdout and f"{(prompt + completion) / 3:,.0f} tokens/sample" in stdout
    assert "pass@1 50.0%" in stdout
    # The price is no setting: run.json keeps it beside them, and `score` can price anew.
    assert json.loads((run_dir / "run.json").read_text())["price"]["output"] == 8.0
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"other": {"input": 9, "output": 9}, "scr*": {"input": 1, "output": 1}}))
    rescored = run_knowbench("score", str(run_dir), "--prices", str(prices))
    assert rescored.returncode == 0, rescored.stderr
    cost = json.loads((run_dir / "summary.json").read_text())["cost"]
    assert cost["cost"] == pytest.approx((prompt + completion) / 1e6)
    report = tmp_path / "report.html"
    made = run_knowbench("report", str(run_dir), "--out", str(report))
    assert made.returncode == 0, made.stderr
    page = report.read_text()
    assert 'id="chart-money"' in page and 'id="chart-cost"' in page
    assert "1 / 1 USD" in page and "no run has a price" not in page
    first = samples[0]["usage"]
    assert f"{first['prompt_tokens']:,} prompt + {first['completion_tokens']:,} completion tokens" in page


def test_a_server_that_reports_no_usage_gives_estimated_tokens(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=_reply) as server:
        server.include_usage = False
        stdout = _run(server, tmp_path / "run")
    cost = json.loads((tmp_path / "run" / "summary.json").read_text())["cost"]
    assert cost["estimated_samples"] == len(TASKS) and cost["requests"] == 0
    assert cost["prompt_tokens"] > 0 and cost["price"] is None and cost["cost"] is None
    assert f"{len(TASKS)} of {len(TASKS)} samples estimated" in stdout


def _result(usage: Usage, knowledge_tokens: int | None = None, passed: bool = True) -> SampleResult:
    extra = {} if knowledge_tokens is None else {"knowledge": {"knowledge_tokens": knowledge_tokens}}
    return SampleResult(task_id="t", sample_idx=0, kind="function", domain="d", completion="x",
                        passed=passed, status="pass" if passed else "fail", usage=usage, extra=extra)


def test_a_sample_of_several_model_calls_counts_them_all() -> None:
    turns = Usage.of_calls([CallUsage(prompt_tokens=100, completion_tokens=10),
                            CallUsage(prompt_tokens=300, completion_tokens=20)])
    assert (turns.prompt_tokens, turns.completion_tokens, turns.requests) == (400, 30, 2)
    single = Usage(prompt_tokens=50, completion_tokens=5)
    cost = summarise_cost([_result(turns, 120), _result(single, 80, passed=False)], 0.5,
                          Price(input=1, output=10))
    assert (cost.requests, cost.prompt_tokens, cost.completion_tokens) == (3, 450, 35)
    assert cost.tokens_per_sample == 242.5 and cost.knowledge_tokens_per_sample == 100
    assert cost.cost == pytest.approx((450 + 350) / 1e6)
    assert cost.cost_per_sample == pytest.approx(cost.cost / 2)
    # Records stored before per-call usage existed still read.
    assert Usage.model_validate({"prompt_tokens": 3, "completion_tokens": 4}).requests == 1


def test_a_price_file_names_models_or_patterns_and_a_bad_one_says_where(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o-mini": {"input": 0.15, "output": 0.6},
                                  "gpt-4o*": {"input": 2.5, "output": 10, "currency": "EUR"}}))
    table = load_prices(prices)
    assert price_for("gpt-4o-mini", table) == Price(input=0.15, output=0.6)
    assert price_for("gpt-4o-2024-08-06", table).currency == "EUR"
    assert price_for("qwen", table) is None
    with pytest.raises(UserError, match="has no price for model 'qwen'"):
        choose_price("qwen", prices_file=prices)
    prices.write_text('{"m": {"input": 1,\n "output": }}')
    with pytest.raises(UserError, match=r"prices.json:2: not JSON"):
        load_prices(prices)
    prices.write_text('{"m": {"input": -1, "output": 2}}')
    with pytest.raises(UserError, match=r"the price of 'm' is wrong \(input"):
        load_prices(prices)
    assert parse_price("0.15, 0.60") == Price(input=0.15, output=0.6)
    with pytest.raises(UserError, match="is not INPUT,OUTPUT"):
        parse_price("0.15")
    with pytest.raises(UserError, match="both given"):
        choose_price("m", "1,2", prices)


def test_a_price_given_to_a_backend_that_calls_no_model_is_ignored_with_a_warning(tmp_path: Path) -> None:
    done = run_knowbench("run", str(EXAMPLE), "--model", "reference", "--task", "text/slugify",
                         "--out", str(tmp_path / "run"), "--price", "1,2")
    assert done.returncode == 0, done.stderr
    assert "--price is ignored: --model reference calls no model" in done.stderr
    cost = json.loads((tmp_path / "run" / "summary.json").read_text())["cost"]
    assert cost["price"] is None and cost["estimated_samples"] == 1
    assert "price" not in json.loads((tmp_path / "run" / "run.json").read_text())
