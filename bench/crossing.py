"""What one call of the target costs when it crosses to the candidate's process (split).

A split sample's tests run in the judge's process and every call of the target crosses to the
candidate's: the arguments are encoded, sent, decoded and checked, the call runs there with its
output and warnings captured, and what it returned, printed or changed in its arguments comes
back the same way. A test that calls the target thousands of times (a library's own tests do:
Faker's checksum tests call it 300 times each) spends most of its time crossing.

Runs one sample whose test calls the target once, and one whose test calls it `--calls` times,
on the fork-server engine (one worker, the sandbox `--sandbox` picks), in-process and split,
`--repeat` times each, interleaved, and prints the median duration of each and the slope: what
one more call costs, in microseconds. The in-process slope, measured in the same run, is the
baseline: the call itself, without a crossing. To compare two checkouts, run this file from
each with the other's `src` on `PYTHONPATH` (see docs/execution.md, *Performance*).

    python bench/crossing.py [--calls 2000] [--repeat 5] [--arguments list|scalars|object]
                             [--sandbox auto]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from options import count

# The target and what each kind of arguments looks like: plain data the call could change in
# place (a list), values nothing can change (a str and ints), and an object of the tests'.
PROGRAM = "def weight(s, w):\n    return sum(ord(c) * int(k) for c, k in zip(s, w))\n"
ARGUMENTS = {
    "list": ("'ABCDEFGH', [8, 7, 6, 5, 4, 3, 2, 10]", ""),
    "scalars": ("'ABCDEFGH', (8, 7, 6, 5, 4, 3, 2, 10)", ""),
    "object": ("'ABCDEFGH', Weights()",
               "class Weights:\n    def __iter__(self):\n        return iter([8, 7, 6, 5, 4, 3, 2, 10])\n\n\n"),
}
EXPECTED = sum(ord(c) * k for c, k in zip("ABCDEFGH", [8, 7, 6, 5, 4, 3, 2, 10], strict=True))


def tests(calls: int, arguments: str) -> str:
    call, prelude = ARGUMENTS[arguments]
    return (f"{prelude}def test_calls():\n    for _ in range({calls}):\n"
            f"        assert weight({call}) == {EXPECTED}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=count(2), default=2000, help="calls in the long sample (default 2000)")
    parser.add_argument("--repeat", type=count(1), default=5, help="runs of each sample (default 5)")
    parser.add_argument("--arguments", choices=sorted(ARGUMENTS), default="list",
                        help="what the target is called with (default: a str and a list)")
    parser.add_argument("--sandbox", default="auto", help="auto, bwrap or unshare (default auto)")
    args = parser.parse_args()

    from knowbench.benchmark.schema import TestSpec
    from knowbench.errors import UserError
    from knowbench.execution.engine import ExecutionRequest
    from knowbench.execution.forkserver import ForkServerEngine
    from knowbench.execution.sandbox import resolve_sandbox
    from knowbench.program import stubbed_program
    from knowbench.records import Limits

    try:
        sandbox = resolve_sandbox(args.sandbox)
        engine = ForkServerEngine(sandbox, workers=1, preload=[])
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    engine.start(split=True)
    trusted = stubbed_program("", PROGRAM, "weight")
    specs = {calls: [TestSpec(name="tests", code=tests(calls, args.arguments))] for calls in (1, args.calls)}
    durations: dict[tuple[str, int], list[float]] = {}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, sandbox {sandbox.kind}, "
          f"arguments: {args.arguments}; {args.repeat} runs of each sample, interleaved", flush=True)
    try:
        for _ in range(args.repeat + 1):  # (the first round warms the servers up: not counted)
            for isolation in ("in-process", "split"):
                for calls in (1, args.calls):
                    request = ExecutionRequest(program=PROGRAM, tests=specs[calls], entry_point="weight",
                                               limits=Limits(wall_s=120.0), isolation=isolation,  # type: ignore[arg-type]
                                               trusted_program=trusted if isolation == "split" else None)
                    start = time.perf_counter()
                    execution = engine.execute(request)
                    elapsed = time.perf_counter() - start
                    if execution.status != "pass" or execution.isolation != isolation:
                        messages = [test.message[-300:] for test in execution.tests if test.status != "pass"]
                        raise SystemExit(f"the {isolation} sample of {calls} calls did not pass "
                                         f"({execution.status}, {execution.isolation}): {messages}")
                    durations.setdefault((isolation, calls), []).append(elapsed)
    finally:
        engine.close()

    print("\n| isolation | 1 call, ms (median) | "
          f"{args.calls} calls, ms (median, range) | one more call, µs | × in-process |")
    print("|---|---:|---:|---:|---:|")
    slopes = {}
    for isolation in ("in-process", "split"):
        one = statistics.median(durations[(isolation, 1)][1:])
        runs = durations[(isolation, args.calls)][1:]
        many = statistics.median(runs)
        slopes[isolation] = (many - one) / (args.calls - 1) * 1e6
        ratio = slopes[isolation] / slopes["in-process"] if slopes["in-process"] > 0 else float("nan")
        print(f"| {isolation} | {one * 1000:.1f} | {many * 1000:.1f} ({min(runs) * 1000:.1f}–{max(runs) * 1000:.1f}) "
              f"| {slopes[isolation]:.1f} | {ratio:.1f}× |")
    print(f"\na call that crosses costs {slopes['split'] - slopes['in-process']:.1f} µs more than one in-process")


if __name__ == "__main__":
    main()
