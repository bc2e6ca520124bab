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
from knowbench.knowledge.corpus import open_corpus
from knowbench.knowledge.ingest import build_corpus
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


def test_load_json_finds_a_lone_surrogate_however_it_comes() -> None:
    """Escaped in either case, raw in a str, UTF-8-encoded in bytes (which `json.loads` decodes
    with `surrogatepass`), in bytes or a bytearray, in UTF-16 or UTF-32 without a BOM (which
    `json.loads` detects): each is written out as its escape."""
    for text in ('["\\uD800"]', '["\\udBff"]', '["\\uDC00"]', f'["{LONE}"]', b'["\\ud800"]',
                 b'["\\uDBFF"]', b'["\xed\xa0\x80"]', bytearray(b'["\\udfff"]'),
                 *('["\\ud800"]'.encode(encoding)
                   for encoding in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))):
        (value,) = load_json(text)
        assert value.startswith("\\u") and len(value) == 6, (text, value)
        value.encode("utf-8")
    # An escaped backslash before "ud800" is six plain characters; other escapes decode.
    assert load_json('["\\\\ud800", "\\u00e9\\ud83d\\ude00", "\\ue000"]') == [
        "\\ud800", "\u00e9\U0001f600", "\ue000"]


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


def test_a_corpus_keeps_a_notebook_and_a_framework_name_holding_a_lone_surrogate(tmp_path: Path) -> None:
    # Third-party files (a KOCO-Bench corpus folder, a package's notebooks) are JSON knowbench
    # did not write: a lone surrogate there once skipped the whole notebook.
    folder = tmp_path / "knowledge_corpus"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    (folder / "metadata.json").write_text(json.dumps({"framework_name": f"fw{LONE}",
                                                      "framework_description": "d"}))
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": [f"x = '{LONE}'\n", "print(x)\n"]}
    (folder / "demo.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5,
                                                   "metadata": {}, "cells": [cell]}))
    corpus = build_corpus(str(folder), "", directory=tmp_path / "c")
    assert corpus.manifest.framework == f"fw{ESCAPED}"
    (notebook,) = [chunk for chunk in open_corpus(tmp_path / "c").chunks if chunk.kind == "notebook"]
    assert f"x = '{ESCAPED}'" in notebook.text
