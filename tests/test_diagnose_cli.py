"""`knowbench diagnose | report | compare | leaderboard` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnosis_helpers import fixtures, sample, settings, store_run
from helpers import run_knowbench
from openai_server import ScriptedOpenAIServer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli")
    cases = [case for case in fixtures() if case.source == "domaineval"][:25]
    failing = [case.result for case in cases]
    passing = [sample(r.task_id, i % 3 != 0, domain=r.domain) for i, r in enumerate(failing)]
    return (store_run(base / "a", failing, settings(model="gpt-4o-mini")),
            store_run(base / "b", passing, settings(model="better")))


def test_diagnose_writes_one_label_per_failed_sample(runs: tuple[Path, Path]) -> None:
    done = run_knowbench("diagnose", str(runs[0]))
    assert done.returncode == 0, done.stderr
    lines = (runs[0] / "diagnoses.jsonl").read_text().splitlines()
    assert len(lines) == 25
    assert {json.loads(line)["label"] for line in lines} >= {"WrongLogic", "Infrastructure"}
    assert "diagnoses written to" in done.stdout and "KOCO categories" in done.stdout


def test_diagnose_asks_a_judge_about_ambiguous_cases_only(runs: tuple[Path, Path], tmp_path: Path) -> None:
    answer = '{"label": "WrongAPISelection", "reason": "sibling API"}'
    env = {"PATH": "/usr/bin:/bin", "KNOWBENCH_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    with ScriptedOpenAIServer(responder=lambda body: answer) as server:
        done = run_knowbench("diagnose", str(runs[0]), "--judge", "judge-model", "--base-url",
                          server.base_url, env=env)
        assert done.returncode == 0, done.stderr
        asked = len(server.requests)
    diagnoses = [json.loads(line) for line in (runs[0] / "diagnoses.jsonl").read_text().splitlines()]
    judged = [d for d in diagnoses if d["source"] == "judge"]
    assert asked == len(judged) == sum(d["ambiguous"] for d in diagnoses) > 0
    assert all(d["label"] == "WrongAPISelection" for d in judged)


def test_report_writes_html_and_prints_tables(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "nested" / "report.html"
    done = run_knowbench("report", str(runs[0]), str(runs[1]), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    as_csv = run_knowbench("report", str(runs[0]), str(runs[1]), "--format", "csv")
    assert as_csv.returncode == 0 and as_csv.stdout.startswith("run,run_dir,model,method")
    as_json = run_knowbench("report", str(runs[0]), "--out", str(tmp_path / "t.json"))
    assert as_json.returncode == 0 and json.loads((tmp_path / "t.json").read_text())["runs"]


def test_report_refuses_html_to_the_terminal_with_advice(runs: tuple[Path, Path]) -> None:
    done = run_knowbench("report", str(runs[0]))
    assert done.returncode == 2 and "--out report.html" in done.stderr
    assert "Traceback" not in done.stderr
    missing = run_knowbench("report", "/nonexistent/run", "--format", "md")
    assert missing.returncode == 2 and "not a knowbench run directory" in missing.stderr


def test_compare_prints_the_paired_statistics(runs: tuple[Path, Path]) -> None:
    done = run_knowbench("compare", str(runs[0]), str(runs[1]), "--resamples", "2000")
    assert done.returncode == 0, done.stderr
    assert "McNemar" in done.stdout and "gained by B" in done.stdout
    as_json = json.loads(run_knowbench("compare", str(runs[0]), str(runs[1]), "--json").stdout)
    assert as_json["shared_tasks"] == 25 and as_json["pass1_a"] == 0.0
    assert as_json["mcnemar"]["only_b"] == sum(1 for i in range(25) if i % 3 != 0)


def test_leaderboard_adds_and_updates_runs(runs: tuple[Path, Path], tmp_path: Path) -> None:
    board = tmp_path / "board.json"
    assert run_knowbench("leaderboard", str(runs[0]), "--out", str(board)).returncode == 0
    done = run_knowbench("leaderboard", str(runs[0]), str(runs[1]), "--out", str(board))
    assert done.returncode == 0, done.stderr
    entries = json.loads(board.read_text())["entries"]
    assert [entry["model"] for entry in entries] == ["better", "gpt-4o-mini"]
