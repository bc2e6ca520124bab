"""How long the `knowbench` command takes to start, against a bare interpreter.

Each row is a fresh process, timed from outside (wall clock), the rows interleaved round by
round so that a drift of the machine's speed reaches them all alike:
  interpreter     `python -I -c pass`: the floor every command pays
  --help, plain   `knowbench --help` through `knowbench.cli.main`, the CLI imported as any
                  module is (the collector on): the entry point before `knowbench.__main__`
  --help          `python -m knowbench --help`: the console script's path (the CLI imported
                  with the garbage collector paused and what it built frozen)
  run basic       `python -m knowbench run examples/basic -m reference` into a fresh directory,
                  its references' checks reused from the first, untimed run

Prints the median and range of each and its ratio to the interpreter's median, and the ratio
of the two `--help` rows round by round, all from this one run.

    python bench/startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from options import count

ROOT = Path(__file__).resolve().parents[1]


def rows(scratch: Path) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "interpreter": [python, "-I", "-c", "pass"],
        "--help, plain": [python, "-c", "import sys; sys.argv = ['knowbench', '--help']; "
                          "from knowbench.cli import main; main()"],
        "--help": [python, "-m", "knowbench", "--help"],
        "run basic": [python, "-m", "knowbench", "run", str(ROOT / "examples" / "basic"), "-m",
                      "reference", "-o", str(scratch / "run-{n}")],
    }


def timed(argv: list[str], n: int) -> float:
    argv = [part.replace("{n}", str(n)) for part in argv]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=count(1), default=7, help="timed rounds (default 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="knowbench-startup-") as scratch:
        commands = rows(Path(scratch))
        for argv in commands.values():  # warm-up: page cache, byte code, reference checks
            timed(argv, -1)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for n in range(args.repeat):
            for name, argv in commands.items():
                times[name].append(timed(argv, n))
            print(f"round {n + 1}/{args.repeat}", file=sys.stderr, flush=True)
    floor = statistics.median(times["interpreter"])
    print(f"python {sys.version.split()[0]} ({sys.executable}), {args.repeat} rounds")
    print("| command | median s | range s | × interpreter |")
    print("|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {min(values):.3f}–{max(values):.3f} | {median / floor:.1f}× |")
    ratios = [entry / plain for entry, plain in zip(times["--help"], times["--help, plain"], strict=True)]
    print(f"--help / --help, plain, round by round: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
