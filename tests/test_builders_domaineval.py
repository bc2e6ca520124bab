"""Importing DomainEval's released data (the real anchors), replaying its responses, and
certifying it: tests that never run the candidate are exposed."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from builders_helpers import benchmark_engine
from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.builders.certify import CertifyReport, certify_benchmark
from knowbench.builders.domaineval import (
    CAUSES,
    DATED,
    DOMAINEVAL_HARNESS,
    INCOMPLETE,
    KNOWBENCH_HARNESS,
    MACHINE,
    SHADOWED,
    VERSION,
    _cause,
    compare_with_recorded,
    convert_responses,
    import_subjects,
    strip_trailing_call,
    subject_to_task,
    unshadow_test,
)
from knowbench.execution.engine import Engine, ExecutionRequest

SHADOWED_RSA = {"bit_size", "_markers", "byte_size", "inverse", "int2bytes"}


@pytest.fixture(scope="module")
def anchors(shared_data: Callable[..., Path]) -> Path:
    """DomainEval's released data: subjects, responses and results."""
    return shared_data("anchors/domaineval")


@pytest.fixture(scope="module")
def rsa(anchors: Path) -> Path:
    return anchors / "subjects" / "Cryptography" / "python-rsa.jsonl"


@pytest.fixture(scope="module")
def everything(anchors: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("domaineval") / "bench"
    import_subjects(anchors / "subjects", out, check_env=False)
    return out


def test_both_domains_import_completely(everything: Path) -> None:
    bench = load_benchmark(everything)
    assert bench.manifest.domains == ["Basic", "Cryptography"]
    per_domain = {d: sum(t.domain == d for t in bench.tasks) for d in bench.manifest.domains}
    assert per_domain == {"Basic": 107, "Cryptography": 100}
    report = json.loads((everything / "import_report.json").read_text())
    assert report["left_out"] == []
    assert set(report["anomalies"]) == {"Basic/prettytable/row_prettytable.__str__", "Basic/xarray/da.interpolate_na"}


def test_domain_and_repository_come_from_the_path(everything: Path) -> None:
    task = load_benchmark(everything).task("Cryptography/python-rsa/is_prime")
    assert isinstance(task, FunctionTask)
    assert task.domain == "Cryptography" and task.framework == "python-rsa"
    assert task.metadata["method_path"] == "Cryptography/python-rsa/rsa/prime.py"
    assert task.prompt_code.rstrip().endswith("def is_prime(number: int) ->bool: ...")
    assert task.reference.startswith("def is_prime(number: int) ->bool:")
    assert task.instruction.startswith("Functionality:")


def test_imported_tasks_call_each_test_as_domaineval_s_script_did(everything: Path) -> None:
    assert {task.invocation for task in load_benchmark(everything).tasks} == {"direct"}


def test_a_subject_whose_set_up_domaineval_never_ran_passes_on_its_reference(engine: Engine) -> None:
    """DomainEval's script calls `PrimeTest().test_is_prime()`: setUp never runs, so a test
    that would fail after it (here: setUp breaks the target) passes there, and must here."""
    test_code = ("import unittest\n\nclass PrimeTest(unittest.TestCase):\n    def setUp(self):\n"
                 "        raise unittest.SkipTest('needs a fixture file')\n\n"
                 "    def test_is_prime(self):\n        self.assertTrue(is_prime(7))\n\n"
                 "PrimeTest().test_is_prime()\n")
    row = {"full_method_name": "is_prime", "method_name": "is_prime", "instruction": "Is it prime?",
           "method_code": "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n",
           "method_code_mask": "def is_prime(n):\n    [MASK]\n",
           "test_code_list": [{"code_start": "", "test_code": test_code, "test_path": "tests/test_prime.py"}]}
    task = subject_to_task(row, "Basic", "primes", "Basic/primes/is_prime")
    request = ExecutionRequest(program=task.reference, tests=task.tests, entry_point=task.entry_point,
                               invocation=task.invocation)
    execution = engine.execute(request)
    assert [(test.status, test.called) for test in execution.tests] == [("pass", True)], execution.tests


def test_wrapped_masks_are_understood(anchors: Path) -> None:
    subject = anchors / "subjects" / "Cryptography" / "paranoid_crypto.jsonl"
    rows = [json.loads(line) for line in subject.read_text().splitlines()]
    row = next(r for r in rows if r["full_method_name"] == "solve_right")
    assert "[\n    MASK]" in row["method_code_mask"]
    task = subject_to_task(row, "Cryptography", "paranoid_crypto", "t")
    assert "MASK" not in task.prompt_code


def test_the_trailing_call_is_dropped_and_only_the_called_test_kept() -> None:
    code = ("import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertTrue(f())\n\n"
            "    def test_b(self):\n        self.assertTrue(util.g())\n\n    def helper(self):\n        pass\n\n"
            "T().test_a()\n")
    stripped, removed = strip_trailing_call(code)
    assert removed == 1
    tree = ast.parse(stripped)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert [m.name for m in cls.body] == ["test_a", "helper"]
    assert not [n for n in tree.body if isinstance(n, ast.Expr)]


def test_a_call_the_runner_would_not_find_is_kept() -> None:
    code = "class Checks:\n    def run(self):\n        assert f()\n\n    def test_other(self):\n        pass\n\nChecks().run()\n"
    kept, removed = strip_trailing_call(code)
    assert removed == 0
    assert kept.rstrip().endswith("Checks().run()")  # a plain block, run as DomainEval ran it
    assert "test_other" not in kept


def test_unshadow_rewires_imports_and_module_references() -> None:
    code = ("import rsa.common\nfrom rsa.common import byte_size, bit_size\n\n"
            "def test_x():\n    assert byte_size(1) == 1 and rsa.common.byte_size(2) == 1 and bit_size(1) == 1\n")
    fixed, changes = unshadow_test(code, "byte_size", "rsa.common")
    assert changes == 2
    assert "from rsa.common import bit_size" in fixed
    assert "rsa.common.byte_size" not in fixed and "byte_size(2)" in fixed


def test_released_responses_become_replay_samples(anchors: Path, everything: Path,
                                                  tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    result = convert_responses(anchors / "gpt-4o-mini-pass1-responses", everything, samples)
    assert result == {"written": 207, "unmatched": []}
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert {row["sample_idx"] for row in rows} == {0}
    assert len({row["task_id"] for row in rows}) == 207


@pytest.fixture(scope="module")
def rsa_certified(rsa: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CertifyReport]:
    out = tmp_path_factory.mktemp("rsa") / "bench"
    import_subjects(rsa, out)
    bench = load_benchmark(out)
    assert bench.manifest.requirements == ["pyasn1==0.6.0", "rsa==4.9"]
    engine = benchmark_engine(out)
    try:
        return out, certify_benchmark(bench, engine)
    finally:
        engine.close()


def test_certify_lists_the_subjects_whose_tests_never_run_the_candidate(
        rsa_certified: tuple[Path, CertifyReport]) -> None:
    _, report = rsa_certified
    shadowed = {c.task_id.rsplit("/", 1)[-1] for c in report.tasks if c.not_called}
    assert shadowed == SHADOWED_RSA
    for check in report.tasks:
        if check.task_id.endswith("/inverse"):
            # `from rsa.common import inverse` in the test: a body that raises still passes
            assert {"not-called", "passes-on-stub-raise", "passes-on-stub-none"} <= set(check.failed_checks)
    assert not any(c.not_called for c in report.tasks if c.task_id.rsplit("/", 1)[-1] not in SHADOWED_RSA)


def test_unshadowed_import_runs_the_candidate_everywhere(rsa: Path, tmp_path: Path) -> None:
    out = tmp_path / "fixed"
    report = import_subjects(rsa, out, unshadow=True)
    assert set(name.rsplit("/", 1)[-1] for name in report["unshadowed"]) == SHADOWED_RSA
    bench = load_benchmark(out)
    engine = benchmark_engine(out)
    try:
        result = certify_benchmark(bench, engine)
    finally:
        engine.close()
    assert result.summary["shadowed_or_not_called"] == 0
    # once the tests run the reference, two references prove incomplete: DomainEval's context
    # lacks their helpers, which the re-imported library function had hidden
    broken = {c.task_id.rsplit("/", 1)[-1]: c for c in result.tasks if not c.certified}
    assert set(broken) == {"byte_size", "inverse"}
    assert "NameError: name 'ceil_div' is not defined" in broken["byte_size"].reference[0].message
    assert result.summary["certified"] == 9


def test_replay_agrees_with_domaineval_on_python_rsa(anchors: Path,
                                                     rsa_certified: tuple[Path, CertifyReport],
                                                     tmp_path: Path) -> None:
    bench, report = rsa_certified
    samples, run_dir = tmp_path / "samples.jsonl", tmp_path / "run"
    certify_file = tmp_path / "certify.json"
    certify_file.write_text(report.model_dump_json())
    assert run_knowbench("import", "domaineval-responses", str(anchors / "gpt-4o-mini-pass1-responses" /
                                                                "Cryptography" / "python-rsa.jsonl"),
                         "--benchmark", str(bench), "--out", str(samples)).returncode == 0
    # A fixed, generous limit: bit_size generates primes, and a loaded machine must not turn
    # a correct response into a timeout that DomainEval never saw.
    done = run_knowbench("run", str(bench), "--model", f"replay:{samples}", "--out", str(run_dir),
                         "--workers", "1", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    compare = tmp_path / "compare.json"
    done = run_knowbench("import", "domaineval-compare", str(run_dir),
                         str(anchors / "gpt-4o-mini-pass1-results" / "Cryptography" / "python-rsa.jsonl"),
                         "--certify", str(certify_file), "--report", str(compare))
    assert done.returncode == 0, done.stderr
    comparison = json.loads(compare.read_text())
    assert comparison["subjects"] == 11
    assert comparison["agreement"] == 1.0


@pytest.mark.parametrize("mask", ["[MASK]", "[ MASK ]", "[\n    MASK]", "[M\n    ASK]", "[MA\nSK]", "[MASK\n]"])
def test_a_mask_is_found_however_the_formatter_wrapped_it(mask: str) -> None:
    row = _subject("def double(x):\n    return 2 * x\n", "double",
                   "def test_double():\n    assert double(2) == 4\n\ntest_double()\n")
    row["method_code_mask"] = f"def double(x):\n    {mask}\n"
    task = subject_to_task(row, "Basic", "toy", "t")
    assert task.prompt_code.rstrip().endswith("...") and "M" not in task.prompt_code.replace("def", "")


def _subject(code: str, name: str, test: str) -> dict[str, object]:
    return {"full_method_name": name, "method_name": name, "method_path": f"srcdata/Basic/toy/{name}.py",
            "method_code": code, "method_code_mask": code.split("\n    ", 1)[0] + "\n    [MASK]\n",
            "instruction": f"Functionality: {name}", "test_code_list": [
                {"test_code": test, "code_start": "", "test_path": "srcdata/Basic/toy/test_toy.py"}]}


def test_identical_subjects_get_distinct_ids_and_keep_their_own_verdicts(tmp_path: Path) -> None:
    # DomainEval's files hold subjects with the same method name and the same mask (one method
    # defined in two modules, each with its own tests); each must stay a task of its own, and
    # responses and recorded results must join to the right one, in file order.
    first = _subject("def double(x):\n    return 2 * x\n", "double",
                     "def test_double():\n    assert double(2) == 4\n\ntest_double()\n")
    second = _subject("def double(x):\n    return 2 * x\n", "double",
                      "def test_double():\n    assert double(3) == 6\n\ntest_double()\n")
    subjects = tmp_path / "subjects" / "Basic"
    subjects.mkdir(parents=True)
    (subjects / "toy.jsonl").write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    bench = tmp_path / "bench"
    import_subjects(tmp_path / "subjects", bench)
    tasks = load_benchmark(bench).tasks
    assert [t.task_id for t in tasks] == ["Basic/toy/double", "Basic/toy/double@2"]
    assert len({t.metadata["key"] for t in tasks if isinstance(t, FunctionTask)}) == 2
    # the first response is right, the second wrong; DomainEval recorded exactly that
    replies = [("def double(x):\n    return x + x\n", "passed"), ("def double(x):\n    return 5\n", "failed: x")]
    for kind in ("responses", "results"):
        folder = tmp_path / kind / "Basic"
        folder.mkdir(parents=True)
        folder.joinpath("toy.jsonl").write_text("".join(
            json.dumps({"repository": "toy", "full_method_name": "double", "method_code_mask": row["method_code_mask"],
                        "response": response, "result": result}) + "\n"
            for row, (response, result) in zip((first, second), replies, strict=True)))
    samples = tmp_path / "samples.jsonl"
    assert convert_responses(tmp_path / "responses", bench, samples) == {"written": 2, "unmatched": []}
    run_dir = tmp_path / "run"
    done = run_knowbench("run", str(bench), "--model", f"replay:{samples}", "--out", str(run_dir), "--workers", "1")
    assert done.returncode == 0, done.stderr
    comparison = compare_with_recorded(run_dir, tmp_path / "results")
    assert comparison["subjects"] == 2 and comparison["agreement"] == 1.0
    assert comparison["matrix"]["both_pass"] == 1 and comparison["matrix"]["both_fail"] == 1


def _reference_failing(message: str) -> dict[str, object]:
    return {"failed_checks": ["reference-fails"], "reference": [{"status": "fail", "message": message}]}


@pytest.mark.parametrize(("check", "sample", "domaineval", "ours", "cause"), [
    ({"failed_checks": ["not-called"], "not_called": ["t"]}, {"status": "fail"}, "passed", False, SHADOWED),
    (_reference_failing("NameError: name 'ceil_div' is not defined"), {"status": "fail"}, "passed", False,
     INCOMPLETE),
    (_reference_failing("AssertionError: no data for 2025-01-01 (today)"), {"status": "fail"}, "passed", False,
     DATED),
    (_reference_failing("AttributeError: module 'numpy' has no attribute 'float'"), {"status": "fail"}, "passed",
     False, VERSION),
    (_reference_failing("PermissionError: [Errno 13] Permission denied: '/home'"), {"status": "fail"}, "passed",
     False, KNOWBENCH_HARNESS),
    (_reference_failing("skipped: Unable to download data/bw_text.png"), {"status": "fail"}, "passed", False,
     MACHINE),
    ({}, {"status": "fail"}, "passed", False, KNOWBENCH_HARNESS),
    ({}, {"status": "pass"}, "failed: Could not find 'Swap' line in the output", True, MACHINE),
    (None, {"status": "fail", "extra": {"assembly_error": "no definition of f"}}, "passed", False, KNOWBENCH_HARNESS),
    ({}, {"status": "pass"}, "timed out", True, DOMAINEVAL_HARNESS),
    ({}, {"status": "pass"}, "failed: No module named 'mpmath.libmpf'", True, DOMAINEVAL_HARNESS),
    ({}, {"status": "timeout"}, "passed", False, KNOWBENCH_HARNESS),
    ({}, {"status": "fail"}, "passed", False, KNOWBENCH_HARNESS),
    ({"failed_checks": ["not-called"], "not_called": ["t"]}, {"status": "error"}, "passed", False, KNOWBENCH_HARNESS),
])
def test_every_disagreement_is_attributed_to_one_cause(check, sample, domaineval: str, ours: bool,
                                                       cause: str) -> None:
    died = sample["status"] == "error"  # the sample process died before the tests ran
    entry = {"domaineval": domaineval,
             "knowbench_error": "not run: the sample process ended early (exit code 70)" if died else ""}
    assert _cause(entry, check, sample, ours) == cause
    assert cause in CAUSES
