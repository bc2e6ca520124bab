"""The demo's steps on the shipped files (examples/demo), as `make demo` runs them after the
install: mine cachetools from PyPI, build its corpus, run reference / null / the replayed
replies with and without retrieval, diagnose, compare, report."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import knowbench_command

ROOT = Path(__file__).resolve().parents[1]


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("knowbench_demo", ROOT / "examples" / "demo" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_demo_builds_runs_diagnoses_and_reports(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    demo = _demo()
    result = demo.run_demo(tmp_path / "demo", knowbench_command())
    shown = capsys.readouterr().out
    assert "$ knowbench mine cachetools==8.0.1" in shown
    assert "      fetching cachetools==8.0.1" in shown  # mining's progress, as it comes

    assert result["self_check"] == {"reference": 1.0, "null": 0.0}, result
    assert result["tasks"] >= 8, result  # most replied tasks are certified on any machine
    scores = result["pass@1"]
    for method in demo.METHODS:
        reference, null, replay = (scores[f"{model}-{method}"] for model in ("reference", "null", "replay"))
        assert reference == 1.0 and null == 0.0, scores
        assert null < replay < reference, scores
    assert scores["replay-rag-bm25"] > scores["replay-none"], scores

    # The replies fail in the ways they were written to, and diagnosis says so.
    diagnoses = [json.loads(line) for line in
                 (Path(result["runs"]["replay-none"]) / "diagnoses.jsonl").read_text().splitlines()]
    labels = {row["label"] for row in diagnoses}
    assert {"Truncated", "NoCode", "WrongSyntax", "WrongAPISelection", "WrongParam"} <= labels, labels

    report = Path(result["report"])
    html = report.read_text()
    assert all(Path(run).name in html for run in result["runs"].values())
    external = re.findall(r"""(?:src|href)\s*=\s*["'](?:https?:)?//|url\(\s*["']?(?:https?:)?//""", html)
    assert not external, external[:3]

    # A second demo resumes everything: nothing is mined, built or generated again.
    again = demo.run_demo(tmp_path / "demo", knowbench_command(), echo=False)
    assert again["pass@1"] == scores
    logs = tmp_path / "demo" / "logs"
    assert "resuming" in (logs / "run-replay-none.log").read_text()
