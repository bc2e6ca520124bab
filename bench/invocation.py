"""What a fresh process per test item costs: `invocation="direct"` against `"framework"`.

A direct task runs each item in its own fork of the process that loaded the program (as
DomainEval ran each test as its own script); a framework task runs all items in that one
process. Both are measured here in the same run, on the same samples and engines, for a
light task and for tasks whose program imports numpy / pandas (preloaded by the fork
server), each with ITEMS test items. Prints the median ms per sample (the two styles run
alternately), the ratio direct/framework and the extra cost per item.

    python bench/invocation.py [--samples 30] [--items 5] [--sandbox auto]
"""

from __future__ import annotations

import argparse
import statistics
import time

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import Engine, ExecutionRequest, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.program import stubbed_program
from knowbench.records import Limits
from options import count

TASKS = {
    "light": ("def add(a, b):\n    return a + b\n", "assert add({n}, 1) == {n} + 1", "add", []),
    "numpy": ("import numpy as np\n\ndef norm(v):\n    return float(np.sqrt(np.dot(v, v)))\n",
              "assert abs(norm([3.0, {n}.0]) - ({n} ** 2 + 9) ** 0.5) < 1e-9", "norm", ["numpy"]),
    "pandas": ("import pandas as pd\n\ndef total(rows):\n    return int(pd.DataFrame(rows)['x'].sum())\n",
               "assert total([{{'x': 1}}, {{'x': {n}}}]) == {n} + 1", "total", ["pandas"]),
}


def request(task: str, items: int, invocation: str, isolation: str) -> ExecutionRequest:
    program, check, entry_point, _ = TASKS[task]
    tests = "\n\n".join(f"def test_{n}():\n    {check.format(n=n)}\n" for n in range(items))
    trusted = stubbed_program("", program, entry_point) if isolation == "split" else None
    return ExecutionRequest(program=program, tests=[TestSpec(name="t", code=tests)], entry_point=entry_point,
                            limits=Limits(wall_s=60, memory_mb=2048), isolation=isolation,  # type: ignore[arg-type]
                            trusted_program=trusted, invocation=invocation)  # type: ignore[arg-type]


def paired(engine: Engine, framework: ExecutionRequest, direct: ExecutionRequest,
           samples: int) -> tuple[float, float]:
    """Median ms per sample of each request, run alternately (so a change in the machine's
    load hits both alike), after one warm-up each; every sample must pass."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for round_ in range(samples + 1):
        for index, made in enumerate((framework, direct)):
            started = time.perf_counter()
            execution = engine.execute(made)
            if round_:
                times[index].append(time.perf_counter() - started)
            assert execution.status == "pass", execution.tests
    return statistics.median(times[0]) * 1000, statistics.median(times[1]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=count(1), default=30)
    parser.add_argument("--items", type=count(1), default=5)
    parser.add_argument("--sandbox", default="auto")
    options = parser.parse_args()
    sandbox = resolve_sandbox(options.sandbox)
    print(f"sandbox {sandbox.kind}, {options.items} items per sample, {options.samples} samples per row")
    print(f"{'engine':<12} {'task':<7} {'isolation':<11} {'framework ms':>12} {'direct ms':>10} "
          f"{'ratio':>6} {'+ms/item':>9}")
    for task, (_, _, _, preload) in TASKS.items():
        engines: list[tuple[str, Engine]] = [
            ("forkserver", ForkServerEngine(sandbox, workers=1, preload=["unittest", *preload])),
            ("subprocess", SubprocessEngine(sandbox, workers=1))]
        for name, engine in engines:
            for isolation in ("in-process", "split"):
                framework, direct = paired(engine, request(task, options.items, "framework", isolation),
                                           request(task, options.items, "direct", isolation), options.samples)
                print(f"{name:<12} {task:<7} {isolation:<11} {framework:>12.1f} {direct:>10.1f} "
                      f"{direct / framework:>6.2f} {(direct - framework) / options.items:>9.2f}", flush=True)
            engine.close()


if __name__ == "__main__":
    main()
