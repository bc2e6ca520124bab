"""Bad input to `knowbench mine`, `certify` and `import`: exit code 2, a message, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import ROOT, run_knowbench


@pytest.mark.parametrize(("args", "message"), [
    (["mine", "somewhere", "--out", "OUT"], "--domain"),
    (["mine", "--domain", "x", "--out", "OUT"], "--domain labels the positional SOURCE"),
    (["mine", "--source", "no-domain-here", "--out", "OUT"], "expected SPEC=DOMAIN"),
    (["mine", "./no/such/dir", "--domain", "x", "--out", "OUT"], "no such file or directory"),
    (["mine", "not a requirement!", "--domain", "x", "--out", "OUT"], "is not a directory, an archive or a pip"),
    (["mine", "README.md", "--domain", "x", "--out", "OUT"], "not an sdist or wheel"),
    (["mine", "rsa==4.9", "--domain", "x"], "--out is required"),
    (["mine", "rsa==4.9", "--domain", "x", "--out", "README.md"], "is a file"),
    (["mine", "rsa==4.9", "--domain", "x", "--out", "OUT", "--sandbox", "none"], "needs a sandbox"),
    (["certify", "no/such/benchmark"], "not a benchmark directory"),
    (["certify", "examples/basic", "--task", "nope"], "unknown task ids: nope"),
    (["import", "domaineval", "no/such/path", "--out", "OUT"], "no such file or directory"),
    (["import", "domaineval-responses", "no/such/path", "--benchmark", "examples/basic", "--out", "S"],
     "carries a DomainEval key"),
])
def test_bad_input_exits_2_with_a_message(args: list[str], message: str, tmp_path: Path) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else str(tmp_path / "s.jsonl") if a == "S" else a for a in args]
    done = run_knowbench(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_an_existing_directory_that_is_not_a_benchmark_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    done = run_knowbench("mine", "rsa==4.9", "--domain", "crypto", "--out", str(tmp_path))
    assert done.returncode == 2 and "is not a benchmark directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_versions_file_is_refused_with_its_line(tmp_path: Path) -> None:
    subjects = ROOT / "examples"  # never read: the versions file is checked first
    pins = tmp_path / "versions.txt"
    pins.write_text("numpy==1.26.4\nnumpy >= 1\n")
    done = run_knowbench("import", "domaineval", str(subjects), "--out", str(tmp_path / "out"), "--versions", str(pins))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "versions.txt:2" in done.stderr + done.stdout and "Traceback" not in done.stderr
    done = run_knowbench("import", "domaineval", str(subjects), "--out", str(tmp_path / "out"), "--date", "July 2024")
    assert done.returncode == 2 and "expected YYYY-MM-DD" in done.stderr + done.stdout
