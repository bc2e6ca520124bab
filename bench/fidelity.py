"""Fidelity of knowbench to DomainEval: import, certify, replay, compare, in one go.

Runs, in a work directory, what a user would run by hand:

    knowbench import domaineval SUBJECTS --out W/bench [--recorded-requirements R] [--versions V]
    knowbench certify W/bench --report W/certify.json
    knowbench import domaineval-responses RESPONSES --benchmark W/bench --out W/samples.jsonl
    knowbench run W/bench --model replay:W/samples.jsonl --out W/run
    knowbench import domaineval-compare W/run RESULTS --certify W/certify.json --report W/compare.json

and prints the imported share (of the subjects), the certified share (of the imported), the
agreement of the replayed verdicts with DomainEval's recorded ones, and every disagreement
with its cause (see `CAUSES` in knowbench.builders.domaineval): a benchmark defect, the
environment, DomainEval's harness, or knowbench's harness; knowbench's own are listed apart,
with their task ids and error lines. Everything is also written to W/fidelity.json.

    python bench/fidelity.py                                   # the anchors (Basic, Cryptography)
    python bench/fidelity.py --subjects /data/domaineval_20240711 \\
        --responses /data/modelresult/domaineval_20240711/gpt-4o-mini/pass_1 \\
        --results /data/executeresult/domaineval_20240711/gpt-4o-mini/pass_1 \\
        --recorded-requirements /data/setup/requirements_py39.txt \\
        --domains Computation Network System Visualization --out runs/fidelity-unseen

Run again with the same --out to resume: steps whose output is there are not repeated
(--fresh starts over). This is a report, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from options import count, seconds

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "domaineval"


def knowbench(*args: str, ok: tuple[int, ...] = (0,)) -> None:
    """Run the knowbench CLI of this checkout in a fresh interpreter, streaming its output."""
    command = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); from knowbench.cli import "
               "main; sys.argv[0] = 'knowbench'; sys.exit(main())", str(ROOT / "src"), *args]
    print("$ knowbench " + " ".join(args), flush=True)
    started = time.monotonic()
    done = subprocess.run(command)
    print(f"  ({time.monotonic() - started:.0f} s, exit {done.returncode})", flush=True)
    if done.returncode not in ok:
        raise SystemExit(f"knowbench {args[0]} failed with exit code {done.returncode}")


def select(source: Path, domains: list[str] | None, target: Path) -> Path:
    """`source` itself, or a copy of only its `domains` (each <Domain>/<repo>.jsonl)."""
    if not domains:
        return source
    if target.exists():
        shutil.rmtree(target)
    for domain in domains:
        if not (source / domain).is_dir():
            raise SystemExit(f"{source / domain}: no such domain directory")
        shutil.copytree(source / domain, target / domain)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subjects", type=Path, default=ANCHORS / "subjects")
    parser.add_argument("--responses", type=Path, default=ANCHORS / "gpt-4o-mini-pass1-responses")
    parser.add_argument("--results", type=Path, default=ANCHORS / "gpt-4o-mini-pass1-results")
    parser.add_argument("--domains", nargs="*", help="only these domains (default: every one under --subjects)")
    parser.add_argument("--recorded-requirements", type=Path, help="the source's recorded pins, passed to import")
    parser.add_argument("--versions", type=Path, help="version overrides, passed to import")
    parser.add_argument("--out", type=Path, help="work directory (default: a new temporary one, kept)")
    parser.add_argument("--workers", type=count(1), default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=seconds, default=120.0,
                        help="seconds per replayed sample (generous: a loaded machine must not turn a correct "
                             "response into a time-out that DomainEval never saw)")
    parser.add_argument("--isolation", default="auto", choices=["auto", "in-process", "require"],
                        help="how the replay judges (knowbench run --isolation); in-process is how DomainEval ran "
                             "its tests, and needs no calibration")
    parser.add_argument("--fresh", action="store_true", help="start over, even where outputs exist")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="knowbench-fidelity-"))
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    subjects = select(args.subjects, args.domains, work / "subjects")
    responses = select(args.responses, args.domains, work / "responses")
    results = select(args.results, args.domains, work / "results")
    bench = work / "bench"
    if not (bench / "import_report.json").is_file():
        extra = []
        if args.recorded_requirements:
            extra += ["--recorded-requirements", str(args.recorded_requirements)]
        if args.versions:
            extra += ["--versions", str(args.versions)]
        knowbench("import", "domaineval", str(subjects), "--out", str(bench), *extra)
    workers = ["--workers", str(args.workers)]
    if not (work / "certify.json").is_file():
        knowbench("certify", str(bench), "--report", str(work / "certify.json"), *workers, ok=(0, 1))
    if not (work / "samples.jsonl").is_file():
        knowbench("import", "domaineval-responses", str(responses), "--benchmark", str(bench),
                  "--out", str(work / "samples.jsonl"))
    judged = ["--isolation", args.isolation] + (["--no-calibrate"] if args.isolation == "in-process" else [])
    knowbench("run", str(bench), "--model", f"replay:{work / 'samples.jsonl'}", "--out", str(work / "run"),
              "--timeout", str(args.timeout), *judged, *workers)  # resumes by itself
    knowbench("import", "domaineval-compare", str(work / "run"), str(results), "--certify",
              str(work / "certify.json"), "--report", str(work / "compare.json"))
    summary = summarise(work)
    (work / "fidelity.json").write_text(json.dumps(summary, indent=2) + "\n")
    show(summary)
    print(f"\nfidelity report: {work / 'fidelity.json'}")


def summarise(work: Path) -> dict[str, object]:
    imported = json.loads((work / "bench" / "import_report.json").read_text())
    certify = json.loads((work / "certify.json").read_text())
    compare = json.loads((work / "compare.json").read_text())
    rows = [row for rows in compare["disagreements"].values() for row in rows]
    by_cause = Counter(row["cause"] for row in rows)
    left_out = Counter(row["reason"].split(":")[0][:80] for row in imported["left_out"])
    return {
        "subjects": imported["subjects"], "imported": imported["imported"],
        "imported_share": round(imported["imported"] / imported["subjects"], 4),
        "per_domain": imported["per_domain"], "left_out": dict(left_out),
        "certified": certify["summary"]["certified"], "function_tasks": certify["summary"]["function_tasks"],
        "certified_share": round(certify["summary"]["certified"] / max(1, certify["summary"]["function_tasks"]), 4),
        "failing_checks": certify["summary"]["failing"],
        "compared": compare["subjects"], "agreement": compare["agreement"], "matrix": compare["matrix"],
        "agreeing": compare["matrix"]["both_pass"] + compare["matrix"]["both_fail"],
        "disagreements_by_cause": dict(by_cause.most_common()),
        "knowbench_harness": [row for row in rows if row["cause"].startswith("knowbench")],
        "other_disagreements": [row for row in rows if not row["cause"].startswith("knowbench")],
    }


def show(summary: dict) -> None:
    print(f"\nimported   {summary['imported']} of {summary['subjects']} subjects "
          f"({summary['imported_share']:.1%}); per domain {summary['per_domain']}")
    if summary["left_out"]:
        print(f"  left out: {summary['left_out']}")
    print(f"certified  {summary['certified']} of {summary['function_tasks']} imported "
          f"({summary['certified_share']:.1%}); failing checks {summary['failing_checks']}")
    print(f"agreement  {summary['agreeing']} of {summary['compared']} replayed verdicts "
          f"({summary['agreement']:.1%}); {summary['matrix']}")
    print("disagreements by cause:")
    for cause, number in summary["disagreements_by_cause"].items():
        print(f"  {number:4d}  {cause}")
    for title, rows in (("caused by knowbench's harness", summary["knowbench_harness"]),
                        ("other disagreements", summary["other_disagreements"])):
        print(f"\n{title} ({len(rows)}):")
        for row in rows:
            print(f"  {row['task_id']}  knowbench: {row['knowbench']}  DomainEval: {row['domaineval'][:80]}")
            if not title.startswith("other"):
                print(f"      cause: {row['cause']}")
            for field in ("knowbench_error", "reference_error"):
                if row.get(field):
                    print(f"      {field.replace('_', ' ')}: {row[field]}")


if __name__ == "__main__":
    main()
