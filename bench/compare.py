"""knowbench's engines in this checkout against an earlier commit, on the same samples, interleaved.

    python bench/compare.py --against REF [--harnesses forkserver,fs-split] [--workloads light,heavy]
                            [--workers 1] [--pairs 4] [--rounds 4]

Checks a commit out into a temporary git worktree beside this checkout (removed at the end) and runs
`bench/peers.py`'s knowbench cells (`--cell`: a fresh interpreter per cell, the engine, the
generated light and heavy samples) from both trees in turn, each with its own `src` and its own
`bench/peers.py`, on one workload file made here: every pair of runs goes this checkout then the
commit, or the commit then this checkout, alternately, so drift in the machine's speed falls on
both alike. Prints, per cell, the median samples/s of each (with its range), the CPU the
machine spent per sample (as `bench/peers.py` counts it: every core, so run it on an otherwise
idle machine) and the ratio of this checkout to the commit. A ratio below 1 is a regression. A
cell counts only where every verdict of both trees agrees with the samples' labels; a
disagreement is printed.

Why: a sample's cost grows by small steps (a check here, a lookup there) that no single run
shows against this machine's noise; only the two trees side by side, several times, do. The
regression measured in docs/execution.md (*Where the fork server's time goes*, item 23) was
found this way (`--against eb568b9`).

`--rounds N` runs each cell's samples N times over in one loop (default 4: a light cell of 96
samples takes half a second, too short to measure alone). The commit's `bench/peers.py` must
have `--cell` (every commit since `bench/peers.py` was written has).

    python bench/compare.py --against REF --benchmark DIR [--n 1] [--workers 2] [--pairs 3] [--isolation auto]

`--benchmark DIR` compares whole runs instead: `knowbench run DIR --model reference --n N` from each
tree in turn (its own `src`, a fresh run directory each time, one run of each first to build the
benchmark's environment and its calibration, not counted), on a real benchmark such as a mined
one. Prints, per tree, the median wall time of the whole command, the CPU the machine spent in
it, the median of the samples' own durations (`execution.duration_s`: from the request to
the verdict) and their sum (where a few long samples got faster, the median hides it), with
the ratio of the commit's to this checkout's (above 1: this checkout is
faster). A run whose reference does not pass its self-check counts as a disagreement.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import peers  # noqa: E402  (the workloads' generator, and the cells both trees run)
from options import count, counts, names  # noqa: E402

HARNESSES = ("forkserver", "fs-split", "fs-asserts")


def run_cell(tree: Path, harness: str, workload: Path, kind: str, workers: int) -> dict:
    """One cell in a fresh interpreter, with `tree`'s own knowbench and `bench/peers.py`."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run([sys.executable, str(tree / "bench" / "peers.py"), "--cell", harness, str(workload),
                           kind, str(workers)], capture_output=True, text=True, cwd=tree, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{harness} {kind} x{workers} failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_benchmark(tree: Path, benchmark: Path, out: Path, workers: int, isolation: str, n: int) -> dict:
    """`knowbench run BENCHMARK --model reference` with `tree`'s knowbench, in a fresh process:
    its wall and machine CPU seconds, its samples' durations, and whether it passed its self-check."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cpu_before, _, _ = peers.machine_counters()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "knowbench", "run", str(benchmark), "--model", "reference",
                           "--out", str(out), "--workers", str(workers), "--isolation", isolation, "--n", str(n)],
                          capture_output=True, text=True, cwd=tree, env=env)
    wall = time.perf_counter() - started
    cpu_after, _, _ = peers.machine_counters()
    durations = []
    if (out / "samples.jsonl").exists():
        for line in (out / "samples.jsonl").read_text().splitlines():
            execution = json.loads(line).get("execution") or {}
            if execution.get("duration_s") is not None:
                durations.append(execution["duration_s"])
    return {"wall_s": wall, "cpu_s": cpu_after - cpu_before, "durations": durations,
            "passed": done.returncode == 0, "tail": (done.stdout + done.stderr)[-1500:]}


def compare_benchmark(args: argparse.Namespace, trees: dict[str, Path], tmp: Path, ref: str) -> None:
    """`--benchmark`: whole `knowbench run`s of both trees, alternately (see the module's help)."""
    benchmark = Path(args.benchmark).resolve()
    if not (benchmark / "benchmark.json").is_file():
        print(f"--benchmark {args.benchmark}: no benchmark.json there", file=sys.stderr)
        raise SystemExit(2)
    workers = int(args.workers.split(",")[0])
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    failures = []
    for pair in range(-1, args.pairs):  # pair -1: each tree's first run, not counted
        order = list(trees) if pair % 2 == 0 else list(reversed(trees))
        for name in order:
            run = run_benchmark(trees[name], benchmark, tmp / f"run-{name}-{pair + 1}", workers, args.isolation,
                                args.n)
            if not run["passed"]:
                failures.append(f"{name} run {pair + 1}: the reference did not pass its self-check:\n{run['tail']}")
            elif pair >= 0:
                runs[name].append(run)
            print(f"  pair {pair + 1} {name:8} {run['wall_s']:7.1f} s wall, {run['cpu_s']:7.1f} s CPU"
                  + ("" if pair >= 0 else " (not counted)"), file=sys.stderr)
    if all(runs.values()):
        print(f"\n{benchmark.name}, --n {args.n}, --workers {workers}, --isolation {args.isolation}, "
              f"{len(runs['this'][0]['durations'])} samples\n")
        print("| tree | wall s (median, range) | CPU s (median) | sample duration ms (median of medians) "
              "| samples' durations summed, s (median) |\n|" + "---|" * 5)
        summary = {}
        for name, cells in runs.items():
            walls = [c["wall_s"] for c in cells]
            summary[name] = (statistics.median(walls), statistics.median(c["cpu_s"] for c in cells),
                             statistics.median(statistics.median(c["durations"]) * 1000 for c in cells),
                             statistics.median(sum(c["durations"]) for c in cells))
            print(f"| {name} | {summary[name][0]:.1f} ({min(walls):.1f}–{max(walls):.1f}) | {summary[name][1]:.1f} "
                  f"| {summary[name][2]:.1f} | {summary[name][3]:.1f} |")
        then, this = summary[ref], summary["this"]
        print(f"| {ref} / this | " + " | ".join(f"{old / new:.2f}×" for old, new in zip(then, this, strict=True)) + " |")
    if failures:
        print(f"\n{len(failures)} runs failed:")
        for line in failures:
            print("  " + line)
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the commit to compare with (any git revision)")
    parser.add_argument("--harnesses", type=names(HARNESSES), default="forkserver,fs-split",
                        help=f"knowbench cells of bench/peers.py, from {', '.join(HARNESSES)} "
                             "(default forkserver,fs-split)")
    parser.add_argument("--workloads", type=names(("light", "heavy")), default="light,heavy",
                        help="light, heavy or both (default both)")
    parser.add_argument("--workers", type=counts(1), default="1", help="worker counts (default 1)")
    parser.add_argument("--pairs", type=count(1), default=4, help="runs of each tree per cell (default 4)")
    parser.add_argument("--rounds", type=count(1), default=4, help="times each cell runs its samples (default 4)")
    parser.add_argument("--light", type=count(0), default=96, help="light samples (default 96)")
    parser.add_argument("--heavy", type=count(0), default=48, help="heavy samples (default 48)")
    parser.add_argument("--benchmark", help="compare whole `knowbench run DIR --model reference` runs of this "
                        "benchmark directory instead of bench/peers.py's cells (--workers: the first count)")
    parser.add_argument("--isolation", default="auto", help="--benchmark: knowbench run's --isolation (default auto)")
    parser.add_argument("--n", type=count(1), default=1, help="--benchmark: samples per task (knowbench run's --n, "
                        "default 1; each is the reference)")
    args = parser.parse_args()
    harnesses, kinds = args.harnesses, args.workloads
    empty = [kind for kind in kinds if getattr(args, kind) == 0]
    if empty and not args.benchmark:
        parser.error(f"--workloads {','.join(kinds)} with --{empty[0]} 0: that workload has no samples")
    worker_counts = args.workers
    revision = subprocess.run(["git", "rev-parse", "--short", args.against + "^{commit}"], cwd=ROOT,
                              capture_output=True, text=True)
    if revision.returncode != 0:
        print(f"--against {args.against}: no such commit in {ROOT} ({revision.stderr.strip()})", file=sys.stderr)
        raise SystemExit(2)
    ref = revision.stdout.strip()
    workloads = {"light": peers.generate(peers.LIGHT, args.light), "heavy": peers.generate(peers.HEAVY, args.heavy)}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; this checkout against {ref}, "
          + (f"{args.pairs} pairs of runs of knowbench run on {args.benchmark}" if args.benchmark else
             f"{args.pairs} pairs of runs per cell, each cell's samples {args.rounds} times over"))
    # Beside this checkout, not under /tmp unless it is there too: a tree under /tmp costs each
    # fork-server sample more (bwrap makes the directories that lead to it on the sandbox's own
    # /tmp), so two trees in different places would not compare their code alone.
    beside = ROOT.parent if os.access(ROOT.parent, os.W_OK) else None
    if beside is None:
        print(f"{ROOT.parent} is not writable: the commit is checked out under {tempfile.gettempdir()}, "
              "where its samples may cost more than this checkout's for that alone", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=".knowbench-compare-", dir=beside) as tmp:
        other = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(other), ref], cwd=ROOT, check=True)
        try:
            trees = {"this": ROOT, ref: other}
            if args.benchmark:
                compare_benchmark(args, trees, Path(tmp), ref)
                return
            files = {}
            for kind in kinds:
                files[kind] = Path(tmp) / f"{kind}.json"
                files[kind].write_text(json.dumps(workloads[kind] * args.rounds))
            results: dict[tuple, dict[str, list[dict]]] = {}
            disagreements = []
            started = time.perf_counter()
            for pair in range(args.pairs):
                for kind in kinds:
                    for workers in worker_counts:
                        for harness in harnesses:
                            if harness == "fs-asserts" and kind == "light":
                                continue  # light tests are asserts already
                            order = list(trees) if pair % 2 == 0 else list(reversed(trees))
                            for name in order:
                                cell = run_cell(trees[name], harness, files[kind], kind, workers)
                                results.setdefault((kind, workers, harness), {}).setdefault(name, []).append(cell)
                                labels = [sample["correct"] for sample in workloads[kind]] * args.rounds
                                wrong = sum(v != label for v, label in zip(cell["verdicts"], labels, strict=True))
                                if wrong:
                                    disagreements.append(f"{name} {harness} {kind} x{workers} pair {pair + 1}: "
                                                         f"{wrong} verdicts disagree with the labels")
                                print(f"  pair {pair + 1} {kind:5} x{workers} {harness:10} {name:8} "
                                      f"{len(cell['verdicts']) / cell['loop_s']:7.1f} samples/s", file=sys.stderr)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    print(f"\n| workload | workers | harness | this: samples/s (median, range) | CPU ms/sample | page faults/sample | "
          f"{ref}: samples/s | CPU ms/sample | page faults/sample | this / {ref} |\n|" + "---|" * 10)
    for (kind, workers, harness), by_tree in results.items():
        rates, cpus, faults = {}, {}, {}
        for name, cells in by_tree.items():
            rates[name] = [len(c["verdicts"]) / c["loop_s"] for c in cells]
            cpus[name] = [c["cpu_s"] * 1000 / len(c["verdicts"]) for c in cells]
            # (a tree whose peers.py predates the count has none)
            counted = [c["faults"] / len(c["verdicts"]) for c in cells if "faults" in c]
            faults[name] = f"{statistics.median(counted):.0f}" if counted else "–"
        this, then = statistics.median(rates["this"]), statistics.median(rates[ref])
        print(f"| {kind} | {workers} | {harness} | {this:.1f} ({min(rates['this']):.1f}–{max(rates['this']):.1f}) | "
              f"{statistics.median(cpus['this']):.2f} | {faults['this']} | "
              f"{then:.1f} ({min(rates[ref]):.1f}–{max(rates[ref]):.1f}) | "
              f"{statistics.median(cpus[ref]):.2f} | {faults[ref]} | {this / then:.2f}× |")
    print(f"\nwhole run {time.perf_counter() - started:.0f} s; load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if disagreements:
        print(f"\n{len(disagreements)} cells disagree with the labels:")
        for line in disagreements:
            print("  " + line)
        raise SystemExit(1)
    print("every verdict of both trees agrees with the labels")


if __name__ == "__main__":
    main()
