"""Code knowbench reads is data: parsing it neither prints the compiler's warnings about it nor
fails where warnings are errors (`knowbench.parsing`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from helpers import knowbench_command
from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.builders.requirements import imported_modules
from knowbench.parsing import compiles, parse_python
from knowbench.program import assemble, extract_code

# "\d" and "\s" are invalid escape sequences: a DeprecationWarning when Python 3.11 compiles
# them, a SyntaxWarning (printed by default) from 3.12. The code is valid and runs.
PATTERN_PROGRAM = 'import re\n\ndef digits(text):\n    return re.findall("\\d+", text)\n'
PATTERN_TESTS = 'import re\n\ndef test_digits():\n    assert digits("a1 b22") == re.findall("\\d+", "a1 b22")\n'
REPLY = f"Here is the function:\n\n```python\n{PATTERN_PROGRAM}```\n\nIt splits on \\s as well."


def _task() -> dict[str, object]:
    return {"task_id": "t1", "domain": "text", "kind": "function", "instruction": "Find the digits.",
            "prompt_code": "def digits(text):\n    ...\n", "entry_point": "digits",
            "reference": PATTERN_PROGRAM, "tests": [{"name": "t", "code": PATTERN_TESTS}]}


def test_the_sample_code_really_makes_the_compiler_warn() -> None:
    # The control: without knowbench.parsing, this code fails to parse where warnings are errors.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SyntaxError):
            compile(PATTERN_PROGRAM, "<program>", "exec")


def test_code_with_invalid_escapes_is_read_alike_where_warnings_are_errors() -> None:
    readings = {}
    for action in ("default", "error"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            task = FunctionTask.model_validate(_task())
            readings[action] = (extract_code(REPLY, "digits"),
                                assemble("", task.prompt_code, "digits", REPLY).program,
                                imported_modules(PATTERN_TESTS), TestSpec(name="t", code=PATTERN_TESTS).imports())
        assert not caught, [str(warning.message) for warning in caught]
    assert readings["error"] == readings["default"]
    code, program, modules, imports = readings["error"]
    assert "re.findall" in code and "re.findall" in program
    assert modules == {"re"} and imports == [("re", ())]


def test_parse_python_raises_for_broken_code_and_leaves_the_warning_filters_as_they_were() -> None:
    before = list(warnings.filters)
    with pytest.raises(SyntaxError):
        parse_python("def broken(:\n")
    with pytest.raises(SyntaxError):
        compiles("return 1\n")  # parses, does not compile
    compiles(PATTERN_PROGRAM)
    assert parse_python("1 + 1", mode="eval").body is not None
    assert warnings.filters == before


def test_parsing_on_many_threads_at_once_leaves_the_warning_filters_as_they_were() -> None:
    # catch_warnings saves and restores one process-wide list: unserialised, two threads in it
    # at once can leave "ignore" in force for good.
    before = list(warnings.filters)
    source = PATTERN_PROGRAM * 50
    go = threading.Barrier(8)

    def parse_many() -> None:
        go.wait()
        for _ in range(100):
            parse_python(source)

    threads = [threading.Thread(target=parse_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.filters == before


def test_a_benchmark_with_invalid_escapes_validates_where_warnings_are_errors(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"name": "b", "provenance": {"source": "test"}}))
    (bench / "tasks.jsonl").write_text(json.dumps(_task()) + "\n")
    done = subprocess.run([sys.executable, "-W", "error", *knowbench_command("validate", str(bench))[1:]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stderr, done.stderr
