"""Every producer of test outcomes says why a test did not pass (`TestOutcome.reason`).

Real samples run through the real subprocess and fork-server engines, one per reason the
runner or the engine gives; the engine's reading of result records is checked against
records the runner would never write. The diagnosis side of the contract (every reason has
a rule) is in test_taxonomy.py.
"""

from __future__ import annotations

import json
import textwrap
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import in_children, make_request, runner_module
from knowbench.execution.engine import (
    Collected,
    Engine,
    ExecutionRequest,
    SubprocessEngine,
    build_execution,
    infrastructure_execution,
)
from knowbench.execution.forkserver import ForkServerEngine, _Server, _ServerGone
from knowbench.execution.sandbox import Sandbox
from knowbench.records import Reason, SampleResult
from knowbench.scoring.taxonomy import classify

ADD = "def add(a, b):\n    return a + b\n"
TWO_TESTS = "def test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert add(2, 2) == 4\n"


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@pytest.fixture(scope="module")
def forkserver(best_sandbox: Sandbox) -> Iterator[ForkServerEngine]:
    engine = ForkServerEngine(best_sandbox, workers=2, preload=["unittest"])
    yield engine
    engine.close()


@pytest.fixture(params=["subprocess", "forkserver"])
def any_engine(request: pytest.FixtureRequest) -> Engine:
    """Each test below runs on both local engines (the ray engine hosts fork servers)."""
    return request.getfixturevalue("engine" if request.param == "subprocess" else "forkserver")


# name: (program, tests, limits, the reason of each item in order)
CASES: dict[str, tuple[str, str, dict[str, Any], list[Reason | None]]] = {
    "pass-assertion-exception": (ADD, code("""
        def test_ok():
            assert add(1, 2) == 3

        def test_wrong():
            assert add(1, 2) == 4

        def test_raises():
            raise ValueError("boom")
    """), {}, [None, "assertion", "exception"]),
    "unittest": (ADD, code("""
        import unittest

        class TestAdd(unittest.TestCase):
            def test_equal(self):
                self.assertEqual(add(1, 1), 3)

            @unittest.skip("needs a network")
            def test_skipped(self):
                pass

            def test_skips_itself(self):
                self.skipTest("no GPU")
    """), {}, ["assertion", "skipped", "skipped"]),
    "pytest-skip": (ADD, code("""
        import pytest

        def test_skips_itself():
            pytest.skip("no GPU")
    """), {}, ["skipped"]),
    "program-fails-to-load": ("raise ValueError('cannot load')\n" + ADD, TWO_TESTS, {},
                              ["program-failed-to-load", "program-failed-to-load"]),
    "program-syntax-error": ("def add(a, b)\n    return a + b\n", TWO_TESTS, {},
                             ["program-failed-to-load", "program-failed-to-load"]),
    "unsupported-fixture": (ADD, "def test_a(benchmark):\n    assert add(1, 2) == 3\n", {},
                            ["unsupported-fixture"]),
    "test-code-fails": (ADD, "import knowbench_no_such_module\n\n" + TWO_TESTS, {},
                        ["exception", "test-code-failed"]),
    "os-exit-in-target": ("import os\n\ndef add(a, b):\n    os._exit(0)\n", TWO_TESTS, {},
                          ["exited-early", "not-run"]),
    "killed-in-target": ("import os, signal\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
                         TWO_TESTS, {}, ["exited-early", "not-run"]),
    "process-limit": (code("""
        import os, time

        def add(a, b):
            for _ in range(8):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
            time.sleep(30)
    """), TWO_TESTS, {"processes": 4, "wall_s": 20}, ["process-limit", "not-run"]),
    "wall-clock": ("import time\n\ndef add(a, b):\n    time.sleep(60)\n", TWO_TESTS, {"wall_s": 1.5},
                   ["timeout", "not-run"]),
    "cpu-time": ("def add(a, b):\n    while True:\n        pass\n", TWO_TESTS,
                 {"wall_s": 20, "cpu_s": 1}, ["cpu-time", "not-run"]),
    "memory": ("def add(a, b):\n    return len(bytearray(10**10))\n", TWO_TESTS, {"memory_mb": 128},
               ["memory", "memory"]),
    "memory-while-loading": ("_big = bytearray(10**10)\n" + ADD, TWO_TESTS, {"memory_mb": 128},
                             ["memory", "memory"]),
    "tampering": (ADD, code("""
        import unittest

        def test_a():
            unittest.TestCase.assertEqual = lambda *args: None

        def test_b():
            assert add(2, 2) == 4
    """), {}, ["tampering", "not-run"]),
    "tampering-while-loading": ("import unittest\nunittest.TestCase.assertEqual = print\n" + ADD,
                                TWO_TESTS, {}, ["tampering", "tampering"]),
    # Records without the execution's key on every descriptor the sample holds (the result
    # pipe keeps the engine's descriptor number, which may be any).
    "forged-record": (code("""
        import json, os

        def add(a, b):
            line = json.dumps({"item": "t::test_a", "status": "pass", "message": ""}) + "\\n"
            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    os.write(fd, line.encode())
                except OSError:
                    pass
            return a + b
    """), TWO_TESTS, {}, ["forged-record", "forged-record"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_real_samples_carry_the_reason_of_each_outcome(any_engine: Engine, case: str) -> None:
    program, tests, limits, expected = CASES[case]
    execution = any_engine.execute(make_request(program, tests, "add", **limits))
    got = [test.reason for test in execution.tests]
    assert got == expected, [(test.status, test.reason, test.message[-200:]) for test in execution.tests]
    for test in execution.tests:
        assert (test.status == "pass") == (test.reason is None), test


# Limits a program passes while it loads, before any test runs (its module-level code; split,
# in the candidate's process): (program, limits, every item's status).
WHILE_LOADING = {
    "cpu-time": ("while True:\n    pass\n" + ADD, {"wall_s": 20, "cpu_s": 1}, "timeout"),
    "memory": (in_children("""
        block = bytearray(60 << 20)
        block[::4096] = b"x" * len(block[::4096])
        time.sleep(1)
    """) + ADD, {"memory_mb": 96}, "memory"),
}


@pytest.mark.parametrize("isolation", ["in-process", "split"])
@pytest.mark.parametrize("limit", list(WHILE_LOADING))
def test_a_limit_passed_while_the_program_loads_gives_every_item_its_status(
        any_engine: Engine, limit: str, isolation: str) -> None:
    program, limits, status = WHILE_LOADING[limit]
    execution = any_engine.execute(make_request(program, TWO_TESTS, "add", isolation=isolation, **limits))
    assert [test.status for test in execution.tests] == [status, status], [
        (test.status, test.reason, test.message[-200:]) for test in execution.tests]


def _diagnose(request: ExecutionRequest, engine: Engine) -> tuple[str, str]:
    execution = engine.execute(request)
    result = SampleResult(task_id="t", sample_idx=0, kind="function", domain="d",
                          completion=request.program, code=request.program, program=request.program,
                          passed=False, status=execution.status, execution=execution)
    diagnosis = classify(result)
    assert diagnosis is not None
    return diagnosis.label, diagnosis.evidence.rule


def test_an_exit_and_a_kill_get_different_diagnoses(any_engine: Engine) -> None:
    """exited-early is one reason; the exit code the engine stored tells the two apart."""
    exits = make_request(CASES["os-exit-in-target"][0], TWO_TESTS, "add")
    kills = make_request(CASES["killed-in-target"][0], TWO_TESTS, "add")
    assert _diagnose(exits, any_engine) == ("WrongLogic", "process-exit")
    assert _diagnose(kills, any_engine) == ("Resource", "process-killed")


def test_the_runners_reasons_are_reasons() -> None:
    """The runner cannot import knowbench, so it keeps its own copy of the reasons it gives."""
    assert set(typing.get_args(Reason)) >= runner_module("knowbench_runner")._REASONS


# ------------------------------------------------------------------ reading result records

NONCE = "n" * 32


def _read(records: list[dict[str, Any]], exit_code: int | None = 0, timed_out: bool = False,
          items: int = 2) -> list[tuple[str, Reason | None]]:
    """The (status, reason) of each item after the engine reads these runner records."""
    request = make_request(ADD, "\n".join(f"def test_{i}():\n    pass\n" for i in range(items)))
    lines = [json.dumps({**record, "nonce": NONCE}) for record in records]
    collected = Collected(results="\n".join(lines).encode(), timed_out=timed_out, exit_code=exit_code)
    execution = build_execution(request, NONCE, collected, 0.0, "none", "test")
    return [(test.status, test.reason) for test in execution.tests]


FORGED = [("error", "forged-record")] * 2


@pytest.mark.parametrize("record", [
    {"item": "t::test_0", "status": "fail", "message": "", "reason": "no-such-reason"},
    {"item": "t::test_0", "status": "fail", "message": "", "reason": 7},
    {"item": "t::test_0", "status": "fail", "message": ""},  # a failure without a reason
    {"item": "t::test_0", "status": "pass", "message": "", "reason": "assertion"},
    {"item": "t::test_0", "status": "no-such-status", "message": "", "reason": "assertion"},
    {"item": ["t::test_0"], "status": "pass", "message": ""},
    {"item": "t::test_0", "status": "pass", "message": "", "extra": 1},
], ids=["unknown-reason", "reason-not-a-string", "missing-reason", "reason-on-a-pass",
        "unknown-status", "unhashable-item", "unknown-field"])
def test_a_record_the_runner_would_not_write_counts_as_forged(record: dict[str, Any]) -> None:
    assert _read([{"start": "t::test_0"}, record, {"done": True}]) == FORGED


def test_the_engine_names_the_limit_or_death_that_stopped_the_running_test() -> None:
    started = [{"item": "t::test_0", "status": "pass", "message": "", "duration_s": 0.1},
               {"start": "t::test_1"}]
    assert _read(started, exit_code=0) == [("pass", None), ("error", "exited-early")]
    assert _read(started, exit_code=-9) == [("pass", None), ("error", "exited-early")]
    assert _read(started, exit_code=-24) == [("pass", None), ("timeout", "cpu-time")]
    assert _read(started, exit_code=128 + 24) == [("pass", None), ("timeout", "cpu-time")]
    assert _read(started, exit_code=-25) == [("pass", None), ("error", "output-limit")]
    assert _read(started, exit_code=-9, timed_out=True) == [("pass", None), ("timeout", "timeout")]
    assert _read([], exit_code=1) == [("error", "not-run")] * 2
    assert _read([], exit_code=-9, timed_out=True) == [("timeout", "not-run")] * 2


def test_infrastructure_failures_say_so(engine: SubprocessEngine) -> None:
    request = make_request(ADD, TWO_TESTS)
    execution = infrastructure_execution(request, engine, "could not start the sample")
    assert [(t.status, t.reason) for t in execution.tests] == [("infrastructure", "infrastructure")] * 2


@pytest.mark.parametrize("hung, expected", [(True, ("timeout", "not-run")), (False, ("error", "not-run"))])
def test_a_fork_server_that_hangs_or_dies_says_which(forkserver: ForkServerEngine,
                                                      monkeypatch: pytest.MonkeyPatch, hung: bool,
                                                      expected: tuple[str, str]) -> None:
    def gone(self: _Server, config: dict[str, Any], wall_s: float) -> dict[str, Any]:
        raise _ServerGone("the fork server went away", hung=hung)

    monkeypatch.setattr(_Server, "run", gone)
    execution = forkserver.execute(make_request(ADD, TWO_TESTS, "add"))
    assert [(test.status, test.reason) for test in execution.tests] == [expected] * 2
