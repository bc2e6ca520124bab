"""The whole job on a real library, in a few minutes: what `make demo` runs after the install.

    .venv/bin/python examples/demo/demo.py [--out runs/demo]

0. self-check the built-in example (examples/basic): `reference` must score 100%, `null` 0%;
1. mine a certified benchmark from cachetools' own tests (`knowbench mine`, pinned version)
   and build its knowledge corpus (`knowbench corpus build`);
2. run three "models" on the tasks the shipped replies answer, with `--method none` and with
   `--method rag-bm25`: `reference` (gold code), `null` (empty bodies) and a replay of
   imperfect replies shipped beside this file (`replies-<method>.jsonl`, written by
   `make_replies.py`: right answers, a wrong API, a wrong argument, a syntax slip, a reply
   cut off at the token limit, prose without code);
3. diagnose every run, compare the replay without and with retrieval, write one HTML report;
4. print the headline scores and the report's path.

Every step goes through the `knowbench` command line, printed as it runs (its output goes
to OUT/logs/). Every step is cached or resumes: a second run takes seconds. A step that
fails prints the end of its log and the demo exits with the command's exit code.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASIC = HERE.parent / "basic"
LIBRARY = "cachetools==8.0.1"
DOMAIN = "caching"
METHODS = ("none", "rag-bm25")


@dataclass(frozen=True)
class Step:
    """One knowbench command of the demo and where its output goes."""

    title: str
    args: tuple[str, ...]
    log: str


class DemoFailed(Exception):
    def __init__(self, step: Step, code: int, log_tail: str) -> None:
        super().__init__(f"{step.title} failed (exit {code})")
        self.code, self.log_tail = code, log_tail


def run_demo(out: Path, knowbench: Sequence[str], *, echo: bool = True) -> dict[str, object]:
    """Run every step into `out`; returns what the demo prints at the end (as data)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    benchmark, corpus = out / "benchmark", out / "corpus"
    started = time.monotonic()

    def step(title: str, *args: str, log: str) -> str:
        return _run(Step(title, tuple(args), log), out, knowbench, echo)

    step("validate the built-in example benchmark", "validate", str(BASIC), log="validate-basic")
    for model in ("reference", "null"):  # gold code must score 100%, empty bodies 0%
        step(f"self-check it with the {model} model", "run", str(BASIC), "--model", model,
             "--out", str(out / "runs" / f"basic-{model}"), log=f"run-basic-{model}")

    if not (benchmark / "tasks.jsonl").is_file():  # mining is the slow step: done once
        step("mine a certified benchmark from the library's own tests", "mine", LIBRARY,
             "--domain", DOMAIN, "--out", str(benchmark), log="mine")
    elif echo:
        print(f"· benchmark already mined: {benchmark}")
    if not (corpus / "corpus.sqlite").is_file():
        step("build the library's knowledge corpus", "corpus", "build", LIBRARY, "--pypi",
             "--name", "cachetools", "--dir", str(corpus), log="corpus")
    elif echo:
        print(f"· corpus already built: {corpus}")

    tasks, skipped = _answered_tasks(benchmark)
    if skipped and echo:
        print(f"· {len(skipped)} replied task(s) were not certified on this machine and are left "
              f"out: {', '.join(skipped)}")
    selection = [arg for task in tasks for arg in ("--task", task)]
    runs: dict[str, Path] = {}
    for method in METHODS:
        knowledge = ("--method", method) + (("--corpus", str(corpus)) if method != "none" else ())
        for model in ("reference", "null", f"replay:{HERE / f'replies-{method}.jsonl'}"):
            name = f"{model.split(':')[0]}-{method}"
            label = f"{'replayed model' if model.startswith('replay') else model} · {method}"
            run_dir = out / "runs" / name
            step(f"run {label}", "run", str(benchmark), "--model", model, *knowledge,
                 *selection, "--label", label, "--out", str(run_dir), log=f"run-{name}")
            runs[name] = run_dir
    for name, run_dir in runs.items():
        step(f"diagnose {name}", "diagnose", str(run_dir), log=f"diagnose-{name}")
    comparison = step("compare the replayed model without and with retrieval", "compare",
                      str(runs["replay-none"]), str(runs["replay-rag-bm25"]), "--json",
                      log="compare")
    report = out / "report.html"
    step("write the report", "report", *map(str, runs.values()), "--out", str(report),
         log="report")
    self_check = {model: _pass_at_1(out / "runs" / f"basic-{model}") for model in ("reference", "null")}
    return {"self_check": self_check, "tasks": len(tasks), "skipped": skipped,
            "runs": {n: str(p) for n, p in runs.items()},
            "pass@1": {name: _pass_at_1(run_dir) for name, run_dir in runs.items()},
            "comparison": _comparison(comparison), "report": str(report),
            "seconds": round(time.monotonic() - started, 1)}


def _run(step: Step, out: Path, knowbench: Sequence[str], echo: bool) -> str:
    command = [*knowbench, *step.args]
    if echo:
        print(f"· {step.title}\n    $ {_shown(step.args)}", flush=True)
    log = out / "logs" / f"{step.log}.log"
    began = time.monotonic()
    live = echo and step.args[0] in _LONG_STEPS
    code, stdout, stderr = _execute(command, live)
    if step.args[0] == "run" and code == 2 and "different settings" in stderr:
        # The demo owns its runs: one left by another knowbench version or other shipped
        # files is redone rather than resumed.
        if echo:
            print("    (an earlier demo's run has other settings: starting it over)", flush=True)
        command.append("--overwrite")
        code, stdout, stderr = _execute(command, live)
    log.write_text(f"$ {shlex.join(command)}\n{stdout}\n{stderr}")
    if code != 0:
        raise DemoFailed(step, code, "\n".join(log.read_text().splitlines()[-25:]))
    if echo:
        print(f"    done in {time.monotonic() - began:.0f} s (log: {log})", flush=True)
    return stdout


_LONG_STEPS = ("mine", "corpus")  # their progress lines are shown as they come


def _execute(command: list[str], live: bool) -> tuple[int, str, str]:
    """Run `command`: (exit code, stdout, stderr); with `live`, stderr's lines are also
    printed, indented, as they arrive (knowbench writes progress there)."""
    if not live:
        done = subprocess.run(command, capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None and process.stderr is not None
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(process.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line.strip():
                print(f"      {line.rstrip()}", flush=True)
        reader.join()
        return process.wait(), "".join(stdout), "".join(lines)


def _shown(args: Sequence[str]) -> str:
    """The command as a person would type it, with a long `--task` list summarised."""
    tasks = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--task"]
    kept = [arg for i, arg in enumerate(args) if arg != "--task" and (i == 0 or args[i - 1] != "--task")]
    words = ["knowbench", *(shlex.quote(arg) for arg in kept)]
    if len(tasks) > 2:
        words.append(f"--task … ({len(tasks)} tasks)")
    else:
        words += [f"--task {shlex.quote(task)}" for task in tasks]
    return " ".join(words)


def _answered_tasks(benchmark: Path) -> tuple[list[str], list[str]]:
    """The tasks the shipped replies answer that the benchmark holds, and those it lacks
    (mining certifies a task only when its tests run well here; a loaded machine may drop one)."""
    certified = {json.loads(line)["task_id"]
                 for line in (benchmark / "tasks.jsonl").read_text().splitlines() if line.strip()}
    replied: list[str] = []
    for method in METHODS:
        for line in (HERE / f"replies-{method}.jsonl").read_text().splitlines():
            task = json.loads(line)["task_id"]
            if task not in replied:
                replied.append(task)
    return ([task for task in replied if task in certified],
            [task for task in replied if task not in certified])


def _pass_at_1(run_dir: Path) -> float | None:
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary["scores"]["overall"]["pass_at"]["1"]


def _comparison(stdout: str) -> dict[str, object]:
    try:
        return json.loads(stdout)
    except ValueError:
        return {}


def _print_headline(result: dict[str, object]) -> None:
    scores = result["pass@1"]
    assert isinstance(scores, dict)
    checks = result["self_check"]
    assert isinstance(checks, dict)
    print(f"\nself-check of examples/basic: reference {100 * (checks['reference'] or 0):.1f}%, "
          f"null {100 * (checks['null'] or 0):.1f}%")
    print(f"knowbench demo: {LIBRARY}, {result['tasks']} certified tasks, "
          f"{result['seconds']} s")
    print("  pass@1       " + "  ".join(f"{method:>9}" for method in METHODS))
    for model in ("reference", "null", "replay"):
        cells = []
        for method in METHODS:
            value = scores.get(f"{model}-{method}")
            cells.append(f"{100 * value:8.1f}%" if value is not None else "        –")
        print(f"  {model:<12} " + "  ".join(cells))
    comparison = result["comparison"]
    if isinstance(comparison, dict) and comparison.get("difference") is not None:
        flipped = comparison.get("flipped") or []
        fixed = sum(1 for row in flipped if row.get("passed_b"))
        print(f"  retrieval moves the replayed model by {100 * comparison['difference']:+.1f} points "
              f"(95% CI {100 * comparison['ci_low']:+.1f} to {100 * comparison['ci_high']:+.1f}): "
              f"{fixed} tasks fixed, {len(flipped) - fixed} broken")
    print(f"\nopen the report: {result['report']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/demo"),
                        help="where the benchmark, corpus, runs and report go (default runs/demo)")
    args = parser.parse_args(argv)
    knowbench = Path(sys.executable).with_name("knowbench")
    if not knowbench.is_file():
        print(f"demo: {knowbench} not found; run it with the Python of knowbench's venv "
              "(.venv/bin/python examples/demo/demo.py)", file=sys.stderr)
        return 2
    try:
        result = run_demo(args.out, [str(knowbench)])
    except DemoFailed as failure:
        print(f"\ndemo: {failure}; the end of its log:\n{failure.log_tail}", file=sys.stderr)
        return failure.code
    _print_headline(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
