"""Mining throughput: tasks certified per minute for one mid-size library.

Mines a PyPI requirement (default `arrow==1.3.0`, a date/time library whose sdist ships
~650 tests) end to end, once per engine, into throw-away directories, and prints one table:
candidates, tasks certified, seconds per stage, and certified tasks per minute of the whole
build (download and environment included; the environment is cached by knowbench, so the
first run of a requirement also pays for installing it: run twice for the steady state).
This is a report, not a test: nothing is asserted about times.

    .venv/bin/python bench/mine.py                          # arrow==1.3.0, both engines
    .venv/bin/python bench/mine.py isodate==0.7.2 --engine forkserver --mutants 5
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from knowbench.builders.mine import MineOptions, SourceRequest, mine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("requirement", nargs="?", default="arrow==1.3.0")
    parser.add_argument("--domain", default="time")
    parser.add_argument("--engine", action="append", choices=["forkserver", "subprocess"],
                        help="repeatable; default: both")
    parser.add_argument("--mutants", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    engines = args.engine or ["forkserver", "subprocess"]
    rows = []
    for engine in engines:
        with tempfile.TemporaryDirectory(prefix="knowbench-bench-mine-") as scratch:
            options = MineOptions(engine=engine, mutants=args.mutants, workers=args.workers)
            started = time.monotonic()
            report = mine([SourceRequest(args.requirement, args.domain)], Path(scratch) / "bench", options)
            wall = time.monotonic() - started
        certified = report.counts["published"]
        rows.append((engine, report.counts["test_units"], report.counts["candidates"], certified, wall,
                     report.seconds, 60 * certified / wall))
    print(f"{args.requirement} · {args.workers} workers · {os.cpu_count()} cores · {platform.processor() or platform.machine()}"
          f" · mutants {args.mutants}")
    header = f"{'engine':<11} {'tests':>6} {'candidates':>10} {'certified':>9} {'wall s':>7} " \
             f"{'prune s':>7} {'certify s':>9} {'tasks/min':>9}"
    print(header)
    print("-" * len(header))
    for engine, tests, candidates, certified, wall, seconds, rate in rows:
        print(f"{engine:<11} {tests:>6} {candidates:>10} {certified:>9} {wall:>7.1f} "
              f"{seconds.get('prune', 0):>7.1f} {seconds.get('certify', 0):>9.1f} {rate:>9.1f}")


if __name__ == "__main__":
    main()
