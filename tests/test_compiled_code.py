"""The tests' code compiled once by the engine, and loaded by every sample's runner.

A task's tests (and, split, the benchmark's own program the judge loads) are the same for each
of its samples: the engine compiles them once (`compiled_code`) and sends the code with each
request, for a runner whose interpreter makes the same bytecode to load instead of compiling
the source again. The runner runs that code, so these tests give it code compiled from another
source than the one sent: the verdict shows which one ran.
"""

from __future__ import annotations

import base64
import dis
import marshal
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from helpers import make_request
from knowbench.execution import engine as engine_module
from knowbench.execution.engine import Engine, SubprocessEngine, compiled_code, runner_config
from knowbench.execution.environments import bytecode_magic
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox

ADD = "def add(a, b):\n    return a + b\n"
PASSES = "def test_add():\n    assert add(2, 3) == 5\n"
FAILS = "def test_add():\n    assert add(2, 3) == 6\n"


@pytest.fixture(scope="module", params=["forkserver", "subprocess"])
def any_engine(request: pytest.FixtureRequest, best_sandbox: Sandbox) -> Iterator[Engine]:
    engine: Engine = (ForkServerEngine(best_sandbox, workers=1) if request.param == "forkserver"
                               else SubprocessEngine(best_sandbox, workers=1))
    yield engine
    engine.close()


def _compiled_from(replacements: dict[str, str]):
    """`compiled_code` that compiles `replacements[filename]` where it has one, the source otherwise."""
    real = compiled_code.__wrapped__

    def compile_instead(source: str, filename: str) -> str | None:
        return real(replacements.get(filename, source), filename)
    return compile_instead


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_runner_runs_the_tests_code_the_engine_compiled(any_engine: Engine, isolation: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    request = make_request(ADD, FAILS, "add", isolation=isolation)
    assert any_engine.execute(request).status == "fail"
    monkeypatch.setattr(engine_module, "compiled_code", _compiled_from({"test:t": PASSES}))
    execution = any_engine.execute(request)
    assert execution.status == "pass", execution.tests[0].message


def test_split_the_judge_runs_the_benchmarks_program_the_engine_compiled(
        any_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's program (the benchmark's own, the target stubbed) is compiled once too. Its
    helper `OFFSET` is what the tests compare with; the target is the candidate's."""
    trusted = "OFFSET = 1\n\ndef add(a, b):\n    raise NotImplementedError\n"
    tests = "def test_add():\n    assert add(2, 3) == 4 + OFFSET\n"
    request = make_request(ADD, tests, "add", isolation="split", trusted_program=trusted)
    assert any_engine.execute(request).status == "pass"
    monkeypatch.setattr(engine_module, "compiled_code",
                        _compiled_from({"solution.py": trusted.replace("OFFSET = 1", "OFFSET = 2")}))
    execution = any_engine.execute(request)
    assert execution.status == "fail" and execution.isolation == "split", execution.tests[0].message


def test_a_source_is_sent_compiled_from_its_second_request_on() -> None:
    """Compiled for one sample only, the code would cost more to send than to compile there."""
    compiled_code.cache_clear()
    engine_module._sightings.cache_clear()
    request = make_request(ADD, PASSES, "add")
    assert "compiled" not in runner_config(request, None, sys.executable)
    sent = [runner_config(request, None, sys.executable)["compiled"]["tests"]["t"] for _ in range(2)]
    assert sent[0] is sent[1] and compiled_code.cache_info().misses == 1


def test_the_engines_code_is_the_runners_compile_of_the_source() -> None:
    code = marshal.loads(base64.b64decode(compiled_code(PASSES, "test:t") or ""))
    assert code.co_filename == "test:t"
    assert code.co_consts[0].co_code == compile(PASSES, "test:t", "exec").co_consts[0].co_code
    # Asserts are kept, however the engine's own interpreter runs.
    assert "LOAD_ASSERTION_ERROR" in {op.opname for op in dis.get_instructions(code.co_consts[0])}


@pytest.mark.parametrize("source", ["def test_a():\n    pass\nreturn 1\n",  # parses, does not compile
                                    "def test_a():\n    assert '\\d'\n",  # warns: invalid escape
                                    "def test_a():\n    assert (1, 'x')\n"],  # warns: an assert of a tuple
                         ids=["syntax-error", "invalid-escape", "assert-tuple"])
def test_source_whose_compile_fails_or_warns_is_left_to_the_runner(source: str) -> None:
    """The runner compiles under the tests' warning filters (pytest's, a benchmark's own
    `filterwarnings = error`), where such a warning may be an error: that stays the runner's."""
    assert compiled_code(source, "test:t") is None


def test_a_spec_that_does_not_compile_fails_as_before(any_engine: Engine) -> None:
    execution = any_engine.execute(make_request(ADD, "def test_a():\n    pass\nreturn 1\n", "add"))
    assert execution.status == "error" and "'return' outside function" in execution.tests[0].message, \
        execution.tests[0].message


def test_nothing_is_compiled_for_another_interpreters_bytecode(tmp_path) -> None:
    request = make_request(ADD, PASSES, "add")
    for _ in range(2):
        compiled = runner_config(request, None, sys.executable).get("compiled")
    assert compiled is not None and compiled["tests"]["t"]
    elsewhere = tmp_path / "python"
    elsewhere.write_text("#!/bin/sh\necho 0d0a0d0a\n")
    elsewhere.chmod(0o755)
    assert bytecode_magic(str(elsewhere)) == "0d0a0d0a"
    assert "compiled" not in runner_config(request, None, str(elsewhere))
    assert "compiled" not in runner_config(request, None, str(tmp_path / "missing"))
    assert "compiled" not in runner_config(request, None)
    # Direct invocation runs each spec appended to the program, as one script.
    direct = make_request(ADD, PASSES, "add", invocation="direct")
    assert all("compiled" not in runner_config(direct, None, sys.executable) for _ in range(2))


def test_the_runner_compiles_code_sent_for_other_bytecode_itself() -> None:
    """In the runner's own interpreter (its import has effects this one must not take)."""
    script = f"""
import json, sys
sys.path.insert(0, {str(RUNNER_DIR)!r})
import knowbench_runner as runner
sent = {{"magic": "0d0a0d0a", "tests": {{"t": {compiled_code(PASSES, "test:t")!r}}}}}
assert runner._precompiled(sent) == ({{}}, None)
codes, program = runner._precompiled({{**sent, "magic": {engine_module._BYTECODE_MAGIC!r}}})
assert codes["t"].co_filename == "test:t" and program is None
assert runner._compile("x = 1", "test:t", codes["t"]) is codes["t"]
# Code made for another name is not taken for this one.
assert runner._compile("x = 1", "test:u", codes["t"]).co_filename == "test:u"
print("ok")
"""
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]


XFAILS = "import pytest\n\ndef test_add():\n    if add(2, 3) == 5:\n        pytest.xfail('known')\n"


def _in_knowbench(script: str, *options: str, env: dict[str, str] | None = None) -> str:
    """What `script` prints, run by this interpreter with `options` and `env` added, as a
    process running knowbench started so would."""
    done = subprocess.run([sys.executable, *options, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.parametrize("options, env", [((), {}), (("-X", "no_debug_ranges"), {}),
                                          ((), {"PYTHONNODEBUGRANGES": "1"}),
                                          (("-X", "int_max_str_digits=0"), {}),
                                          ((), {"PYTHONINTMAXSTRDIGITS": "100000"})],
                         ids=["defaults", "X-no-debug-ranges", "PYTHONNODEBUGRANGES", "X-int-max-str-digits",
                              "PYTHONINTMAXSTRDIGITS"])
def test_an_engine_started_with_other_compile_settings_sends_no_code(options: tuple[str, ...],
                                                                      env: dict[str, str]) -> None:
    """The runner starts with `-I` (no PYTHON* variables, no `-X`): code compiled where column
    positions are dropped, or where an int literal may have more digits than the runner
    allows, is not the runner's compile, and is not sent."""
    script = f"""
from knowbench.execution.engine import compiled_code
print(compiled_code({PASSES!r}, "test:t") is not None)
"""
    assert _in_knowbench(script, *options, env=env) == str(not options and not env)


@pytest.mark.slow
def test_a_tests_own_xfail_is_recognised_however_knowbench_was_started(best_sandbox: Sandbox) -> None:
    """The runner recognises a test's own `pytest.xfail()` by the code's column positions:
    under `-X no_debug_ranges` (knowbench's process, never the runner's), the code the engine
    compiled would have none, and the xfail would read as a failure from the second sample on."""
    script = f"""
import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
from helpers import make_request
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox
engine = ForkServerEngine(resolve_sandbox({best_sandbox.kind!r}), workers=1)
try:
    request = make_request({ADD!r}, {XFAILS!r}, "add")
    print(" ".join(engine.execute(request).status for _ in range(3)))
finally:
    engine.close()
"""
    assert _in_knowbench(script, "-X", "no_debug_ranges") == "pass pass pass"
