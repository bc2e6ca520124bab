"""knowbench's accuracy on KOCO-Bench's released multiple-choice replies beside KOCO's own.

Imports the problems (`knowbench import koco-qa --replies`), replays each released model's
`pred_raw` through `knowbench run --model replay:FILE` (knowbench's parser), and prints as
markdown, per model and framework: KOCO's recorded accuracy (the results file's `summary`),
knowbench's accuracy, unanswered rate and Jaccard partial credit, and how many replies the two
parsers read differently; then every such reply with the rule-based reason and, where
tests/fixtures/koco_choice_verdicts.jsonl has one, a careful reader's note.

    python bench/koco_qa.py [--koco DIR] [--work DIR]

DIR defaults to ../shared/anchors/koco-qa (three models, three frameworks); any KOCO-Bench
domain_knowledge_understanding folder laid out the same way works.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_KOCO = ROOT.parent / "shared" / "anchors" / "koco-qa"
VERDICTS = ROOT / "tests" / "fixtures" / "koco_choice_verdicts.jsonl"

from knowbench.builders.koco_qa import compare_replay  # noqa: E402
from knowbench.scoring.metrics import percent  # noqa: E402


def knowbench(*args: str) -> None:
    done = subprocess.run([sys.executable, "-c", "from knowbench.cli import main; main()", *args],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"knowbench {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--koco", type=Path, default=DEFAULT_KOCO,
                        help="a KOCO-Bench domain_knowledge_understanding folder (problems/, results/)")
    parser.add_argument("--work", type=Path, default=None,
                        help="where the benchmark and runs go (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="koco-qa-") as scratch:
        work = args.work or Path(scratch)
        bench = work / "bench"
        knowbench("import", "koco-qa", str(args.koco), "--out", str(bench), "--replies", str(args.koco))
        recorded = json.loads((bench / "replies" / "recorded.json").read_text())
        comparisons: dict[str, dict[str, Any]] = {}
        for samples in sorted((bench / "replies").glob("*.jsonl")):
            run_dir = work / "runs" / samples.stem
            knowbench("run", str(bench), "--model", f"replay:{samples}", "--out", str(run_dir),
                      "--engine", "subprocess", "--overwrite", "--k", "1")
            comparisons[samples.stem] = compare_replay(run_dir, samples)
        print_tables(comparisons, recorded)


def print_tables(comparisons: dict[str, dict[str, Any]], recorded: dict[str, Any]) -> None:
    print("| model | framework | tasks | KOCO recorded ACC | knowbench ACC | difference | "
          "unanswered | Jaccard | letters differ |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for model, comparison in comparisons.items():
        rows = [*comparison["frameworks"].items(), ("all", comparison["overall"])]
        for framework, entry in rows:
            if framework == "all":
                total = sum(r.get("total", 0) for r in recorded[model].values())
                correct = sum(r.get("correct", 0) for r in recorded[model].values())
                theirs = correct / total if total else None
            else:
                summary = recorded[model].get(framework, {})
                theirs = summary.get("accuracy_percent") / 100 if "accuracy_percent" in summary else None
                # the summary must agree with the file's own is_correct flags
                assert theirs is None or abs(theirs - entry["koco_accuracy"]) < 5e-5, (model, framework)
            name = f"**{framework}**" if framework == "all" else framework
            diff = None if theirs is None else entry["accuracy"] - theirs
            print(f"| {model} | {name} | {entry['tasks']} | {percent(theirs)} | "
                  f"{percent(entry['accuracy'])} | {percent(diff, signed=True)} | "
                  f"{percent(entry['unanswered'])} | {percent(entry['jaccard'])} | {entry['disagree']} |")
    notes = {}
    if VERDICTS.is_file():
        for line in VERDICTS.read_text().splitlines():
            row = json.loads(line)
            notes[(row["model"], f"{row['framework']}/{row['id']}")] = row["why"]
    print("\nReplies whose letters the parsers read differently (✓ = right):\n")
    print("| model | task | answer | knowbench | KOCO | reason | reader's note |")
    print("|---|---|---|---|---|---|---|")
    for model, comparison in comparisons.items():
        for row in comparison["disagreements"]:
            def cell(letters: list[str], right: bool) -> str:
                return (",".join(letters) or "—") + (" ✓" if right else "")
            print(f"| {model} | {row['task_id']} | {','.join(row['answer'])} | "
                  f"{cell(row['knowbench'], row['knowbench_right'])} | {cell(row['koco'], row['koco_right'])} | "
                  f"{row['reason']} | {notes.get((model, row['task_id']), '')} |")


if __name__ == "__main__":
    main()
