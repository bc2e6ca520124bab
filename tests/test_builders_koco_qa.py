"""KOCO-Bench's knowledge Q&A: its problem files imported as choice tasks, its released replies
replayed through knowbench's parser, and the verdicts set beside the ones KOCO recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask
from knowbench.builders import IMPORTERS
from knowbench.builders.koco_qa import compare_replay, split_stem
from knowbench.execution.engine import SubprocessEngine
from knowbench.methods import get_method
from knowbench.models.offline import ReplayBackend
from knowbench.records import Limits, SamplingParams
from knowbench.report.html import build_report
from knowbench.report.runs import load_views
from knowbench.run import run_benchmark


@pytest.fixture(scope="module")
def koco(shared_data: Callable[..., Path]) -> Path:
    return shared_data("anchors/koco-qa")


@pytest.fixture(scope="module")
def imported(koco: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("koco") / "bench"
    IMPORTERS.get("koco-qa")(koco, out)
    IMPORTERS.get("koco-qa-replies")(koco, out / "replies", benchmark=out)
    return out


def test_every_released_problem_becomes_a_choice_task(koco: Path, imported: Path) -> None:
    bench = load_benchmark(imported)
    report = json.loads((imported / "import_report.json").read_text())
    assert report["left_out"] == []
    assert report["per_framework"] == {"VSLAM-LAB": 16, "cosmos-rl": 14, "trackerLab": 17}
    tasks = {task.task_id: task for task in bench.tasks}
    assert all(isinstance(task, ChoiceTask) for task in tasks.values())
    gspo = tasks["cosmos-rl/3"]
    assert isinstance(gspo, ChoiceTask)
    assert gspo.question.startswith("In the GRPO loss computation, how does the GSPO variant")
    assert list(gspo.options) == ["A", "B", "C", "D", "E"]
    assert gspo.options["C"].startswith("GSPO applies three-way clipping")
    assert gspo.answer == ["A", "B", "E"] and gspo.multiple
    assert gspo.framework == gspo.domain == "cosmos-rl"
    assert "compute_loss" in gspo.metadata["explanation"]
    # the release says how many of each kind it holds: the instruction decides, not the answer
    for path in (koco / "problems").glob("*.json"):
        meta = json.loads(path.read_text())["meta"]
        mine = [t for t in tasks.values() if t.framework == meta["repository"]]
        assert sum(not t.multiple for t in mine) == meta["single_answer_count"]


def test_a_stem_is_split_into_question_and_options_with_continuation_lines() -> None:
    question, options = split_stem("What holds?\n\n- (A) one\n  more of one\n- (B) two\n\n(C) three")
    assert question == "What holds?"
    assert options == {"A": "one more of one", "B": "two", "C": "three"}
    with pytest.raises(ValueError, match="no option line"):
        split_stem("What holds? Nothing.")
    with pytest.raises(ValueError, match=r"option \(A\) appears twice"):
        split_stem("Q?\n- (A) x\n- (A) y")


def test_a_bad_problem_is_left_out_with_its_file_index_and_reason(tmp_path: Path) -> None:
    good = {"id": 1, "instruction": "choose ONE option", "stem": "Q?\n\n- (A) x\n- (B) y", "gt": ["B"]}
    bad_letter = {**good, "id": 2, "gt": ["E"]}
    no_options = {**good, "id": 3, "stem": "Q without options"}
    two_for_one = {**good, "id": 4, "gt": ["A", "B"]}
    path = tmp_path / "problems_fw_EN.json"
    path.write_text(json.dumps({"meta": {}, "problems": [good, bad_letter, no_options, two_for_one, good]}))
    report = IMPORTERS.get("koco-qa")(path, tmp_path / "bench")
    reasons = {row["index"]: row["reason"] for row in report["left_out"]}
    assert report["imported"] == 1
    assert "'E'" in reasons[1] and "not among the options" in reasons[1]
    assert "no option line" in reasons[2]
    assert "exactly one answer letter" in reasons[3]
    assert "repeats" in reasons[4]
    assert all(row["file"] == "problems_fw_EN.json" for row in report["left_out"])


def test_bad_input_exits_2_with_a_message(tmp_path: Path) -> None:
    done = run_knowbench("import", "koco-qa", str(tmp_path / "nowhere"), "--out", str(tmp_path / "b"))
    assert done.returncode == 2 and "no such file or directory" in done.stderr
    (tmp_path / "problems_x_EN.json").write_text("{not json")
    done = run_knowbench("import", "koco-qa", str(tmp_path), "--out", str(tmp_path / "b"))
    assert done.returncode == 2 and "problems_x_EN.json: not readable JSON" in done.stderr
    assert "Traceback" not in done.stderr


def test_replayed_replies_reproduce_kocos_recorded_accuracy_where_the_parsers_agree(
        koco: Path, imported: Path, engine: SubprocessEngine, tmp_path: Path) -> None:
    """The released gemini-2.5-pro replies, replayed: KOCO's recorded per-framework accuracy is
    recomputed from the replies file, and every difference from knowbench's accuracy is a reply
    whose letters the two parsers read differently, each with a reason."""
    samples = imported / "replies" / "gemini-2.5-pro.jsonl"
    bench = load_benchmark(imported)
    run_benchmark(bench, ReplayBackend(samples), get_method("none"), engine, tmp_path / "run",
                  SamplingParams(), Limits(), ks=(1,))
    comparison = compare_replay(tmp_path / "run", samples)
    recorded = json.loads((imported / "replies" / "recorded.json").read_text())["gemini-2.5-pro"]
    for framework, entry in comparison["frameworks"].items():
        assert round(100 * entry["koco_accuracy"], 2) == recorded[framework]["accuracy_percent"]
    disagreements = comparison["disagreements"]
    assert disagreements and all(row["reason"] for row in disagreements)
    # accuracy differs only through replies read differently
    flips = sum(row["knowbench_right"] - row["koco_right"] for row in disagreements)
    overall = comparison["overall"]
    assert round(overall["accuracy"] * overall["tasks"]) - round(overall["koco_accuracy"] * overall["tasks"]) \
        == flips
    # a reply cut off before answering: knowbench reads nothing, KOCO letters from the reasoning
    cut = next(row for row in disagreements if row["task_id"] == "cosmos-rl/3")
    assert cut["knowbench"] == [] and cut["koco"] == ["A"]
    assert "states no answer" in cut["reason"]
    assert overall["unanswered"] > 0 and 0 < overall["jaccard"] < 1
    page = build_report(load_views([tmp_path / "run"]))
    section = page.split('<section id="choice">')[1].split("</section>")[0]
    assert "Multiple choice by framework and domain" in section
    for framework in ("VSLAM-LAB", "cosmos-rl", "trackerLab"):
        assert f"<td class=text>{framework}</td>" in section
    assert "unanswered" in section and "Jaccard" in section


def test_disagreement_reasons_name_kocos_misreadings() -> None:
    from knowbench.builders.koco_qa import disagreement_reason

    boxed = "The option that holds is A.\n\n\\boxed{\\text{A}}"
    assert "LaTeX command" in disagreement_reason(boxed, ["A"], ["A", "E", "T", "X"], list("ABCD"))
    cut = "1. **Evaluate Option (A):** The flag is"
    assert "states no answer" in disagreement_reason(cut, [], ["A"], list("ABCD"))
    assert "not options" in disagreement_reason("Answer: B", ["B"], ["B", "Q"], list("ABCD"))


def test_imported_questions_check_themselves_with_reference_and_null(
        imported: Path, engine: SubprocessEngine, tmp_path: Path) -> None:
    from knowbench.models.offline import NullBackend, ReferenceBackend

    bench = load_benchmark(imported)
    for backend, passing in ((ReferenceBackend(), True), (NullBackend(), False)):
        summary = run_benchmark(bench, backend, get_method("none"), engine, tmp_path / backend.name,
                                SamplingParams(), Limits(), ks=(1,))
        assert summary.self_check["ok"]
        assert {result.passed for result in summary.results} == {passing}
        assert summary.scores.overall.unanswered == (0.0 if passing else 1.0)
