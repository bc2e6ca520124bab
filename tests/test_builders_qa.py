"""`knowbench build qa`: questions generated from a corpus by a model on the scripted
OpenAI-compatible server, checked for grounding, deduplicated, and filtered by weak models."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask
from knowbench.builders.qa import QAOptions, build_qa, select_chunks
from knowbench.knowledge.ingest import build_corpus
from knowbench.models.openai import OpenAIBackend
from openai_server import ScriptedOpenAIServer, last_user_message

FILES = {
    "flow/retry.py": 'def backoff_delay(attempt, base=0.5, cap=30.0):\n'
                     '    """Delay before retry number `attempt`: base * 2 ** attempt seconds, never more '
                     'than cap."""\n    return min(cap, base * 2 ** attempt)\n',
    "flow/queue.py": 'def drain(queue, limit=64):\n'
                     '    """Pop at most `limit` items per call and return them oldest first."""\n'
                     '    return [queue.popleft() for _ in range(min(limit, len(queue)))]\n',
    "flow/lock.py": 'def acquire(lock, worker):\n'
                    '    """Take `lock` for `worker`; a worker that holds it already waits like any '
                    'other."""\n    lock.wait_for(worker)\n',
    "flow/pool.py": 'def resize(pool, size):\n'
                    '    """Grow or shrink `pool` to `size` workers, stopping idle ones first."""\n'
                    '    pool.target = size\n',
    "docs/retry.md": "# Retries\n\nThe delay before each retry doubles: base * 2 ** attempt seconds, "
                     "and never more than the cap.\n",
}

RETRY_QUESTION = {"question": "How long does flow wait before retry number n?",
                  "options": {"A": "base * 2 ** n seconds, capped", "B": "base * n seconds",
                              "C": "a random delay", "D": "no delay"},
                  "answer": ["A"], "multiple": False, "knowledge_point": "retry backoff schedule"}
DRAIN_QUESTION = {"question": "Which statements about flow's drain hold?",
                  "options": {"A": "it pops at most limit items", "B": "it returns oldest first",
                              "C": "it blocks when empty", "D": "it sorts by priority"},
                  "answer": ["A", "B"], "multiple": True, "knowledge_point": "drain batching",
                  "evidence": "Pop at most `limit` items per call and return them oldest first"}
LOCK_QUESTION = {"question": "Are flow's locks re-entrant?",
                 "options": {"A": "yes", "B": "no", "C": "only for readers", "D": "only on Linux"},
                 "answer": ["A"], "multiple": False, "knowledge_point": "lock re-entrancy",
                 "evidence": "locks are re-entrant for the worker that holds them"}


def _generator(message: str) -> str:
    chunk = re.search(r"\[chunk ([0-9a-f]+)\]", message).group(1)  # type: ignore[union-attr]
    if "def resize" in message:
        return "Here is a fine question about pools, in prose."
    if "def backoff_delay" in message:
        reply = {**RETRY_QUESTION, "evidence": "base * 2 ** attempt seconds, never more than cap"}
    elif "# Retries" in message:
        reply = {**RETRY_QUESTION, "question": "How long does flow wait before retry number n ?",
                 "evidence": "The delay before each retry doubles"}
    elif "def drain" in message:
        reply = DRAIN_QUESTION
    else:
        reply = LOCK_QUESTION
    return "```json\n" + json.dumps({**reply, "cited_chunks": [chunk]}) + "\n```"


def _weak(model: str, message: str) -> str:
    if "drain" in message:
        return "Answer: A, B"  # both weak models know it: trivial
    if "retry number" in message:
        return "Answer: A" if model == "weak-1" else "Answer: B"
    return "Answer: A"


def _respond(body: dict[str, Any]) -> str:
    message = last_user_message(body)
    return _generator(message) if body["model"] == "gen" else _weak(body["model"], message)


@pytest.fixture
def corpus(tmp_path: Path) -> Any:
    root = tmp_path / "flow-src"
    for relative, text in FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    (root / "flow" / "__init__.py").write_text("")
    return build_corpus(str(root), "flow", directory=tmp_path / "corpus")


def test_questions_are_grounded_deduplicated_and_trivial_ones_dropped(corpus: Any, tmp_path: Path) -> None:
    out = tmp_path / "qa"
    with ScriptedOpenAIServer(responder=_respond) as server:
        def backend(model: str) -> OpenAIBackend:
            return OpenAIBackend(model=model, base_url=server.base_url, max_retries=0)
        options = QAOptions(questions=10, min_chars=40,
                            filter_models=[backend("weak-1"), backend("weak-2")])
        report = build_qa(corpus, backend("gen"), out, options)
    reasons = {row["path"]: row["reason"] for row in report["candidates"]}
    assert report["chunks_asked"] == 5
    assert reasons["flow/pool.py"].startswith("invalid: the reply holds no JSON object")
    assert reasons["flow/lock.py"] == "invalid: not grounded: its evidence is not a passage of the cited chunk"
    assert reasons["flow/queue.py"] == "trivial: all 2 filter models answer it right"
    # the two retry questions differ by a space: one is kept, the other is its duplicate
    retry = sorted([reasons["flow/retry.py"], reasons["docs/retry.md"]])
    assert retry[0] == "" and retry[1].startswith("duplicate of qa/flow/")
    assert report["counts"] == {"published": 1, "invalid": 2, "duplicate": 1, "trivial": 1,
                                "single": 1, "multiple": 0}
    bench = load_benchmark(out)
    [task] = bench.tasks
    assert isinstance(task, ChoiceTask) and task.answer == ["A"] and not task.multiple
    assert task.framework == task.domain == "flow"
    cited = task.metadata["cited_chunks"][0]
    assert cited["path"] in ("flow/retry.py", "docs/retry.md")
    assert cited["id"] in {c.id for c in corpus.chunks}
    assert task.metadata["knowledge_point"] == "retry backoff schedule"
    assert task.metadata["filter"] == {"weak-1": {"chose": ["A"], "right": True},
                                       "weak-2": {"chose": ["B"], "right": False}}


def test_without_filter_models_the_filter_is_reported_as_not_applied(corpus: Any, tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=_respond) as server:
        report = build_qa(corpus, OpenAIBackend(model="gen", base_url=server.base_url, max_retries=0),
                          tmp_path / "qa", QAOptions(questions=10, min_chars=40))
    assert report["filter_applied"] is False
    assert report["counts"]["trivial"] == 0 and report["counts"]["published"] == 2
    assert report["counts"]["multiple"] == 1


def test_chunks_are_spread_over_files_before_a_file_gives_a_second(corpus: Any) -> None:
    chosen = select_chunks(corpus.chunks, 3, seed=0, min_chars=40)
    assert len({chunk.path for chunk in chosen}) == 3
    assert select_chunks(corpus.chunks, 3, seed=0, min_chars=10_000) == []


def test_cli_build_qa(corpus: Any, tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=_respond) as server:
        done = run_knowbench("build", "qa", "--corpus", str(corpus.directory), "--llm", "gen",
                             "--filter-model", "weak-1", "--filter-model", "weak-2",
                             "--base-url", server.base_url, "--out", str(tmp_path / "qa"),
                             "--min-chars", "40", "--no-cache")
    assert done.returncode == 0, done.stderr
    assert "published 1" in done.stdout and "trivial 1" in done.stdout
    missing = run_knowbench("build", "qa", "--corpus", str(tmp_path / "nope"), "--llm", "gen",
                            "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"no knowledge corpus '{tmp_path / 'nope'}'" in missing.stderr


def test_options_given_as_a_list_and_an_answer_as_a_string_are_read(corpus: Any) -> None:
    from knowbench.builders.qa import candidate_task

    chunk = next(c for c in corpus.chunks if "def drain" in c.text)
    reply = json.dumps({**DRAIN_QUESTION, "options": ["(A) it pops at most limit items",
                                                      "B. it returns oldest first",
                                                      "it blocks when empty", "D) it sorts"],
                        "answer": "A, B", "cited_chunks": [chunk.id]})
    task = candidate_task(reply, chunk, "qa/flow", "flow", "flow", "gen")
    assert task.options == {"A": "it pops at most limit items", "B": "it returns oldest first",
                            "C": "it blocks when empty", "D": "it sorts"}
    assert task.answer == ["A", "B"] and task.multiple
