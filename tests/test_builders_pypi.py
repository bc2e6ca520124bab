"""Mining real libraries downloaded from PyPI (network): marked slow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark, sha256_file
from knowbench.builders.mine import MineOptions, SourceRequest, mine
from knowbench.builders.source import fetch_source
from knowbench.errors import UserError

pytestmark = pytest.mark.slow


def test_a_requirement_downloads_its_sdist_with_the_tests(tmp_path: Path) -> None:
    source = fetch_source("inflection==0.5.1", tmp_path)
    assert (source.kind, source.name, source.version) == ("pypi", "inflection", "0.5.1")
    assert source.archive == "inflection-0.5.1.tar.gz"
    assert source.requirement == "inflection==0.5.1"
    assert (source.root / "test_inflection.py").is_file()
    assert source.sha256 == sha256_file(tmp_path / "downloads" / "inflection-0.5.1.tar.gz")


def test_mining_a_pypi_library_publishes_certified_tasks(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = run_knowbench("mine", "inflection==0.5.1", "--domain", "text", "--out", str(out), "--mutants", "3")
    assert done.returncode == 0, done.stderr
    bench = load_benchmark(out)
    assert bench.manifest.requirements == ["inflection==0.5.1"]
    assert bench.manifest.provenance.versions["inflection"] == "0.5.1"
    assert len(bench.tasks) >= 6
    report = json.loads((out / "build_report.json").read_text())
    # ordinalize, and transliterate, which the tests reach only through parameterize
    assert report["dropped_tasks"]["too-short"] == 2
    # tableize is `return pluralize(underscore(word))`: both helpers come with the context
    assert report["dropped_tasks"]["trivial-context-delegation"] == 1
    certified = run_knowbench("certify", str(out), "--report", str(tmp_path / "certify.json"))
    assert certified.returncode == 0, certified.stdout + certified.stderr


def test_two_sources_with_their_domains_make_one_benchmark(tmp_path: Path) -> None:
    report = mine([SourceRequest("inflection==0.5.1", "text"), SourceRequest("isodate==0.7.2", "time")],
                  tmp_path / "bench", MineOptions(max_tasks=3))
    bench = load_benchmark(tmp_path / "bench")
    assert bench.manifest.domains == ["text", "time"]
    assert bench.manifest.requirements == ["inflection==0.5.1", "isodate==0.7.2"]
    assert {task.domain for task in bench.tasks} == {"text", "time"}
    assert [s.name for s in report.sources] == ["inflection", "isodate"]


def test_a_wheel_has_no_tests_to_mine(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    "-d", str(tmp_path / "dl"), "inflection==0.5.1"], check=True)
    wheel_path = next((tmp_path / "dl").glob("*.whl"))
    with pytest.raises(UserError, match="no candidate task"):
        mine([SourceRequest(str(wheel_path), "text")], tmp_path / "bench", MineOptions())
