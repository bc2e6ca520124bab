"""Reference checks are measured once per benchmark, engine, environment, limits and host,
and reused by later runs (`$KNOWBENCH_HOME/calibration.sqlite`); `--recalibrate` measures
again. A reused check carries the very runtime measured before; a new measurement does not."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReferenceBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark
from knowbench.store import RunDirectory

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"
BENCH = load_benchmark(EXAMPLE)
TASKS = [task.task_id for task in BENCH.tasks if task.kind == "function"][:4]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def engine() -> Iterator[SubprocessEngine]:
    engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
    yield engine
    engine.close()


def _run(engine: SubprocessEngine, out: Path, limits: Limits | None = None,
         recalibrate: bool = False) -> dict[str, float | None]:
    summary = run_benchmark(BENCH, ReferenceBackend(), get_method("none"), engine, out,
                            SamplingParams(), limits or Limits(), task_ids=TASKS,
                            recalibrate=recalibrate)
    assert all(result.passed for result in summary.results)
    return {task: seconds for task, (seconds, _) in RunDirectory(out).calibration().items()}


def test_a_second_run_reuses_the_reference_checks_of_the_first(
        home: Path, engine: SubprocessEngine, tmp_path: Path) -> None:
    first = _run(engine, tmp_path / "a")
    assert sorted(first) == sorted(TASKS) and all(seconds for seconds in first.values())
    with closing(sqlite3.connect(home / "calibration.sqlite")) as db:
        assert db.execute("SELECT COUNT(*) FROM checks").fetchone()[0] == len(TASKS)

    assert _run(engine, tmp_path / "b") == first  # the same measurements, not new ones

    again = _run(engine, tmp_path / "c", recalibrate=True)
    assert sorted(again) == sorted(TASKS) and again != first
    assert _run(engine, tmp_path / "d") == again  # --recalibrate replaced what is stored


def test_other_limits_are_other_conditions(home: Path, engine: SubprocessEngine,
                                           tmp_path: Path) -> None:
    first = _run(engine, tmp_path / "a")
    other = _run(engine, tmp_path / "b", limits=Limits(memory_mb=512))
    assert other != first
    with closing(sqlite3.connect(home / "calibration.sqlite")) as db:
        assert db.execute("SELECT COUNT(DISTINCT key) FROM checks").fetchone()[0] == 2


def test_the_cli_takes_recalibrate(home: Path, tmp_path: Path) -> None:
    args = ["run", str(EXAMPLE), "--model", "reference", *(a for t in TASKS for a in ("--task", t))]
    assert run_knowbench(*args, "--out", str(tmp_path / "a"),
                         env={**_env(), "KNOWBENCH_HOME": str(home)}).returncode == 0
    done = run_knowbench(*args, "--out", str(tmp_path / "b"), "--recalibrate",
                         env={**_env(), "KNOWBENCH_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    first, second = (RunDirectory(tmp_path / name).calibration() for name in "ab")
    assert first.keys() == second.keys() and first != second


def _env() -> dict[str, str]:
    return dict(os.environ)


def test_a_failing_reference_is_checked_again_by_every_run(home: Path, engine: SubprocessEngine,
                                                           tmp_path: Path) -> None:
    """A reference that fails may have failed because of the moment (a busy host): it is not
    a fact to reuse."""
    from knowbench.benchmark.load import write_benchmark
    from knowbench.benchmark.schema import FunctionTask, TestSpec

    broken = FunctionTask(task_id="broken", domain="text", instruction="Return 2.",
                          prompt_code="def two():\n    ...", entry_point="two",
                          reference="def two():\n    return 3",
                          tests=[TestSpec(name="t", code="def test_two():\n    assert two() == 2")])
    manifest = BENCH.manifest.model_copy(update={"name": "broken"})
    bench = write_benchmark(tmp_path / "bench", manifest, [broken])
    run_benchmark(bench, ReferenceBackend(), get_method("none"), engine, tmp_path / "a",
                  SamplingParams(), Limits())
    assert RunDirectory(tmp_path / "a").calibration()["broken"][1] != "pass"
    shared = home / "calibration.sqlite"
    if shared.exists():
        with closing(sqlite3.connect(shared)) as db:
            assert db.execute("SELECT COUNT(*) FROM checks").fetchone()[0] == 0
