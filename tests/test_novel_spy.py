"""The runner's target-API spy: calls through every kind of alias are counted, whether their
arguments bind is recorded, a sample cannot claim a call it did not make, and `require` makes
the call a precondition of a pass."""

from __future__ import annotations

import contextlib
import inspect
import sys
from pathlib import Path

import pytest

from helpers import make_request
from knowbench.execution.engine import Engine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.run import api_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src/knowbench/execution/sandboxed"))
import knowbench_spy  # the runner's own module, stdlib only

TEST = "from solution import solution\n\ndef test_it():\n    assert solution() == {expected!r}\n"


def run(engine: Engine, program: str, expected: object, api: str, required: bool = True):
    request = make_request(program, TEST.format(expected=expected), "solution")
    request = request.model_copy(update={"spy": api, "spy_required": required})
    execution = engine.execute(request)
    assert len(execution.tests) == 1, execution
    return execution.tests[0]


@pytest.fixture(scope="module", params=["subprocess", "forkserver"])
def any_engine(request: pytest.FixtureRequest, engine: Engine, best_sandbox) -> Engine:
    if request.param == "subprocess":
        yield engine
        return
    server = ForkServerEngine(best_sandbox, workers=1)
    yield server
    server.close()


ALIASED = {
    "from-import-as": ("from colorsys import rgb_to_hsv as conv\n\n"
                       "def solution():\n    return conv(1.0, 0.0, 0.0)\n"),
    "import-module-as": ("import email.utils as m\n\n"
                         "def solution():\n    return m.parseaddr('A <a@b.c>')\n"),
    "module-level-alias": ("import statistics\n_middle = statistics.median\n\n"
                           "def solution():\n    return _middle([3, 1, 2])\n"),
    "class-with-init": ("from argparse import ArgumentParser as AP\nimport argparse\n\n"
                        "def solution():\n    parser = AP(prog='x')\n"
                        "    return (parser.prog, isinstance(parser, argparse.ArgumentParser))\n"),
    "class-with-new-only": ("import fractions as fr\n\ndef solution():\n    return str(fr.Fraction(3, 6))\n"),
}
APIS = {"class-with-init": ("argparse.ArgumentParser", ("x", True)),
        "class-with-new-only": ("fractions.Fraction", "1/2"),
        "from-import-as": ("colorsys.rgb_to_hsv", (0.0, 1.0, 1.0)),
        "import-module-as": ("email.utils.parseaddr", ("A", "a@b.c")),
        "module-level-alias": ("statistics.median", 2)}


@pytest.mark.parametrize("alias", sorted(ALIASED))
def test_a_call_through_an_alias_is_counted_and_binds(any_engine: Engine, alias: str) -> None:
    api, expected = APIS[alias]
    outcome = run(any_engine, ALIASED[alias], expected, api)
    assert outcome.status == "pass", outcome.message
    assert (outcome.api_calls, outcome.api_bound) == (1, 1)
    assert api_metrics([outcome]) == {"api_called": True, "params_correct": True}


def test_require_fails_a_pass_that_did_not_call_the_api(engine: Engine) -> None:
    program = "def solution():\n    return (0.0, 1.0, 1.0)\n"  # the right value, computed by hand
    outcome = run(engine, program, (0.0, 1.0, 1.0), "colorsys.rgb_to_hsv")
    assert (outcome.status, outcome.reason, outcome.api_calls) == ("fail", "assertion", 0)
    assert "colorsys.rgb_to_hsv was not called" in outcome.message
    recorded = run(engine, program, (0.0, 1.0, 1.0), "colorsys.rgb_to_hsv", required=False)
    assert (recorded.status, recorded.api_calls) == ("pass", 0)
    assert api_metrics([recorded]) == {"api_called": False, "params_correct": False}


def test_arguments_that_do_not_bind_are_recorded(engine: Engine) -> None:
    program = ("import colorsys\n\ndef solution():\n    try:\n        colorsys.rgb_to_hsv(1.0, 0.0)\n"
               "    except TypeError:\n        pass\n    return colorsys.rgb_to_hsv(r=1.0, g=0.0, b=0.0)\n")
    outcome = run(engine, program, (0.0, 1.0, 1.0), "colorsys.rgb_to_hsv")
    assert (outcome.status, outcome.api_calls, outcome.api_bound) == ("pass", 2, 1)
    assert api_metrics([outcome]) == {"api_called": True, "params_correct": False}


FORGERIES = {
    "audit-event": "import sys\n\ndef solution():\n    sys.audit('knowbench.target_api.call')\n    return 2\n",
    "spy-code-with-a-fake-original": (
        "import statistics, types\n\ndef solution():\n    spy = statistics.median\n"
        "    cells = [types.CellType(c.cell_contents) for c in spy.__closure__]\n"
        "    names = spy.__code__.co_freevars\n"
        "    cells[names.index('original')] = types.CellType(lambda *a, **k: 2)\n"
        "    fake = types.FunctionType(spy.__code__, {}, 'fake', None, tuple(cells))\n"
        "    return fake([3, 1, 2])\n"),
    "counter-names-of-the-release": (
        "def solution():\n    global _target_api_call_count, _target_api_spy_installed\n"
        "    _target_api_call_count = [1]\n    _target_api_spy_installed = True\n    return 2\n"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_sample_cannot_claim_a_call_it_did_not_make(engine: Engine, forgery: str) -> None:
    outcome = run(engine, FORGERIES[forgery], 2, "statistics.median")
    assert outcome.api_calls == 0, outcome
    assert outcome.status != "pass"


def test_calls_at_load_time_do_not_count(engine: Engine) -> None:
    program = "import statistics\nVALUE = statistics.median([1, 2, 3])\n\ndef solution():\n    return VALUE\n"
    outcome = run(engine, program, 2, "statistics.median")
    assert (outcome.status, outcome.api_calls) == ("fail", 0)


def test_an_api_that_does_not_exist_fails_every_test_with_a_clear_message(engine: Engine) -> None:
    outcome = run(engine, "def solution():\n    return 1\n", 1, "statistics.no_such_function")
    assert (outcome.status, outcome.reason) == ("error", "test-code-failed")
    assert "statistics.no_such_function could not be found" in outcome.message


def _examples() -> list:
    def f1(a, b, /, c, *, d, e=1): ...
    def f2(a, *args, b=2, **kwargs): ...
    def f3(a, b=1): ...
    return [f1, f2, f3]


CALLS = [((1, 2, 3), {"d": 4}), ((1, 2), {"c": 3, "d": 4}), ((1,), {"b": 2}), ((1, 2, 3), {}),
         ((), {"a": 1}), ((1,), {"a": 1}), ((1, 2, 3, 4), {"d": 1}), ((1,), {"x": 1}), ((1,), {}),
         ((1, 2), {"b": 3}), ((), {})]


@pytest.mark.parametrize("function", _examples(), ids=lambda f: f.__name__)
def test_the_spy_binds_as_inspect_signature_bind_does(function) -> None:
    hook, take, accepted = knowbench_spy.recorder(knowbench_spy.parameters(function))
    spy, _ = knowbench_spy.make_spy(function, accepted)
    sys.addaudithook(hook)  # stays for the test process; it answers only the spy's own frames
    for args, kwargs in CALLS:
        try:
            inspect.signature(function).bind(*args, **kwargs)
            expected = 1
        except TypeError:
            expected = 0
        take()
        with contextlib.suppress(TypeError):
            spy(*args, **kwargs)
        assert take() == (1, expected), (function.__name__, args, kwargs)


def test_a_copy_of_a_class_spy_with_a_fake_constructor_counts_nothing(engine: Engine) -> None:
    program = ("import argparse, types\n\ndef solution():\n    spy = argparse.ArgumentParser.__init__\n"
               "    cells = [types.CellType(c.cell_contents) for c in spy.__closure__]\n"
               "    cells[spy.__code__.co_freevars.index('init')] = types.CellType(lambda *a, **k: None)\n"
               "    fake = types.FunctionType(spy.__code__, {}, 'fake', None, tuple(cells))\n"
               "    fake(object.__new__(argparse.ArgumentParser), prog='x')\n    return 'x'\n")
    outcome = run(engine, program, "x", "argparse.ArgumentParser")
    assert (outcome.status, outcome.api_calls) == ("fail", 0), outcome


def test_api_acc_and_param_corr_average_per_task_over_spied_tasks_only() -> None:
    from knowbench.records import SampleResult
    from knowbench.scoring.metrics import score

    def sample(task: str, index: int, called: bool | None, params: bool | None) -> SampleResult:
        return SampleResult(task_id=task, sample_idx=index, kind="function", domain="d", completion="",
                            passed=bool(called), status="pass" if called else "fail",
                            api_called=called, params_correct=params)

    results = [sample("a", 0, True, True), sample("a", 1, False, False),       # API 1/2, params 1/2
               sample("b", 0, True, None), sample("b", 1, True, True),         # API 2/2, params 1/1
               sample("c", 0, None, None)]                                     # no spy: left out
    overall = score(results, ks=(1,)).overall
    assert (overall.api_acc, overall.param_corr, overall.api_tasks) == (0.75, 0.75, 2)
