"""Mining yield and throughput: one row per library (and engine) mined end to end.

Mines each PyPI requirement (default `arrow==1.3.0`, a date/time library whose sdist ships
~650 tests) into a throw-away directory, one library at a time, and prints one table: test
units, traced targets, candidates, tasks certified, the targets dropped by reason, the mean
mutation score of the certified tasks (with `--mutants`), the wall time of the whole build
(download and environment included; the environment is cached by knowbench, so the first run
of a requirement also pays for installing it: run twice for the steady state), certified tasks
per minute and per 100 test units. `--json FILE` also writes the rows (with every drop reason
of tasks and tests) for later comparison. This is a report, not a test: nothing is asserted.

    .venv/bin/python bench/mine.py                          # arrow==1.3.0, fork-server engine
    .venv/bin/python bench/mine.py isodate==0.7.2 --engine forkserver --engine subprocess
    .venv/bin/python bench/mine.py humanize==4.17.0=text parse==1.22.4=text --mutants 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from statistics import mean

from knowbench.builders.mine import MineOptions, SourceRequest, mine
from knowbench.errors import UserError
from options import count


def _row(requirement: str, engine: str, report: dict, wall: float) -> dict:
    counts = report.get("counts", {})
    scores = [t["mutation_score"] for t in report.get("tasks", [])
              if t.get("status") == "published" and t.get("mutation_score") is not None]
    units = counts.get("test_units", 0)
    certified = counts.get("published", 0)
    return {"requirement": requirement, "engine": engine, "test_units": units,
            "targets_traced": counts.get("targets_traced", 0), "candidates": counts.get("candidates", 0),
            "certified": certified, "dropped_tasks": report.get("dropped_tasks", {}),
            "dropped_tests": report.get("dropped_tests", {}),
            "mean_mutation_score": round(mean(scores), 2) if scores else None,
            "wall_s": round(wall, 1), "seconds": report.get("seconds", {}),
            "per_minute": round(60 * certified / wall, 1) if wall else 0.0,
            "per_100_units": round(100 * certified / units, 1) if units else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("requirement", nargs="*", default=["arrow==1.3.0"],
                        help="REQUIREMENT or REQUIREMENT=DOMAIN (domain default: --domain)")
    parser.add_argument("--domain", default="time")
    parser.add_argument("--engine", action="append", choices=["forkserver", "subprocess"],
                        help="repeatable; default: forkserver")
    parser.add_argument("--mutants", type=count(0), default=0)
    parser.add_argument("--workers", type=count(1), default=os.cpu_count() or 2)
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args()
    engines = args.engine or ["forkserver"]
    rows = []
    for spec in args.requirement:
        requirement, _, domain = spec.partition("=") if "==" not in spec else _split(spec)
        for engine in engines:
            with tempfile.TemporaryDirectory(prefix="knowbench-bench-mine-") as scratch:
                options = MineOptions(engine=engine, mutants=args.mutants, workers=args.workers)
                started = time.monotonic()
                try:
                    mine([SourceRequest(requirement, domain or args.domain)], Path(scratch) / "bench", options)
                except UserError as error:  # no task at all: the report says why
                    print(f"{requirement}: {str(error).splitlines()[0]}")
                wall = time.monotonic() - started
                path = Path(scratch) / "bench" / "build_report.json"
                report = json.loads(path.read_text()) if path.is_file() else {}
            rows.append(_row(requirement, engine, report, wall))
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{os.cpu_count()} cores · {platform.processor() or platform.machine()} · {args.workers} workers"
          f" · mutants {args.mutants}")
    header = (f"{'library':<22} {'engine':<11} {'units':>6} {'traced':>6} {'cand.':>6} {'cert.':>6} "
              f"{'mut.':>5} {'wall s':>7} {'/min':>6} {'/100u':>6}  dropped targets")
    print(header)
    print("-" * len(header))
    for row in rows:
        score = "-" if row["mean_mutation_score"] is None else f"{row['mean_mutation_score']:.2f}"
        reasons = ", ".join(f"{k} {v}" for k, v in row["dropped_tasks"].items())
        print(f"{row['requirement']:<22} {row['engine']:<11} {row['test_units']:>6} {row['targets_traced']:>6} "
              f"{row['candidates']:>6} {row['certified']:>6} {score:>5} {row['wall_s']:>7.1f} "
              f"{row['per_minute']:>6.1f} {row['per_100_units']:>6.1f}  {reasons}")


def _split(spec: str) -> tuple[str, str, str]:
    """`name==1.0=domain` -> (`name==1.0`, `=`, `domain`); `name==1.0` has no domain."""
    head, sep, tail = spec.rpartition("=")
    if head.endswith("=") or "==" not in head:
        return spec, "", ""
    return head, sep, tail


if __name__ == "__main__":
    main()
