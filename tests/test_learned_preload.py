"""What a run's references import as they run, its warm servers load once (`Engine.warm`).

A reference's run lists the modules of the environment's libraries it imported (lazily, inside
a library or a test: `ExecutionRequest.report_imports`); the run stores them with its
calibration and tells the engine; each fork server imports them after its next sample, and
every later sample finds them loaded, as a test finds what an earlier one imported in one
pytest session. Only modules the environment's libraries hold are ever loaded."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from textwrap import dedent

import pytest

from helpers import make_request, run_knowbench
from knowbench.benchmark.load import Benchmark, load_benchmark, write_benchmark
from knowbench.benchmark.preload import learned_modules
from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.execution.engine import Engine, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine, _Replies, _Server
from knowbench.execution.sandbox import Sandbox, resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReferenceBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "def f():\n    return 1\n"
# The module's name is built at run time: the engine finds no import of it in the test code
# (whose imports every sample makes before it runs), as it finds none inside a library.
LAZY = dedent("""
    import importlib
    import os
    import sys

    def test_lazy():
        loaded = "xml.dom.minidom" in sys.modules
        minidom = importlib.import_module("xml.dom." + "minidom")
        assert minidom.parseString("<a/>").documentElement.tagName == "a"
        with open("lazy_local.py", "w") as handle:  # a module of the sample's own: never learned
            handle.write("X = 1\\n")
        sys.path.insert(0, os.getcwd())
        assert importlib.import_module("lazy_local").X == 1
        assert loaded, "not loaded before the test"
""")
MINIDOM = ["xml", "xml.dom", "xml.dom.minidom", "xml.dom.expatbuilder", "pyexpat"]


def _statuses(engine: Engine, request) -> list[str]:
    return [outcome.status for outcome in engine.execute(request).tests]


@pytest.fixture
def forkserver(best_sandbox: Sandbox) -> Iterator[ForkServerEngine]:
    engine = ForkServerEngine(best_sandbox, workers=1)
    yield engine
    engine.close()


@pytest.mark.parametrize(("kind", "isolation"), [("forkserver", "in-process"), ("forkserver", "split"),
                                                 ("subprocess", "in-process")])
def test_a_references_run_lists_the_library_modules_it_imported(best_sandbox: Sandbox, kind: str,
                                                                  isolation: str) -> None:
    engine = (ForkServerEngine(best_sandbox, workers=1) if kind == "forkserver"
              else SubprocessEngine(best_sandbox, workers=1))
    request = make_request(PROGRAM, LAZY, "f", isolation=isolation)
    try:
        execution = engine.execute(request.model_copy(update={"report_imports": True}))
        plain = engine.execute(request)
    finally:
        engine.close()
    assert execution.isolation == isolation
    assert [outcome.status for outcome in execution.tests] == ["fail"]  # (nothing loaded it before)
    assert set(MINIDOM) <= set(execution.imported), execution.imported
    assert execution.imported.index("xml.dom") < execution.imported.index("xml.dom.minidom")
    assert not {"lazy_local", "solution", "importlib"} & set(execution.imported)
    assert plain.imported == []  # a sample's run lists nothing


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_server_loads_what_it_learned_once_its_next_sample_has_replied(
        forkserver: ForkServerEngine, isolation: str) -> None:
    """The first sample after `warm` runs as before (the server loads the modules after its
    reply, and the engine waits for that before the next); every later one finds them loaded.
    The server's growth is its own memory, not its samples'. Split, the judge's server loads
    them; the candidate's is sent only what it was taught
    (`test_a_split_references_program_teaches_the_candidates_server`)."""
    request = make_request(PROGRAM, LAZY, "f", isolation=isolation)
    assert _statuses(forkserver, request) == ["fail"]
    server = forkserver._servers[0]
    baseline = server.baseline
    forkserver.warm(MINIDOM)
    assert _statuses(forkserver, request) == ["fail"]
    for _ in range(2):
        assert _statuses(forkserver, request) == ["pass"]
    assert server.cgroup is None or server.baseline > baseline
    assert forkserver._candidates[0].taught == ()


# The program imports lazily, as a library does inside a call: split, in the candidate's process.
LAZY_PROGRAM = dedent("""
    import importlib
    import sys

    def f():
        loaded = "xml.dom.minidom" in sys.modules
        importlib.import_module("xml.dom." + "minidom").parseString("<a/>")
        return loaded
""")


def test_a_split_references_program_teaches_the_candidates_server(forkserver: ForkServerEngine) -> None:
    """Split, a reference's program runs in the candidate's process: what it imports there is
    reported with the candidate's end, listed with the judge's and apart; once the engine is
    told, the candidate's server loads it, and the program finds it loaded. What only the
    tests imported the candidate's server is never sent."""
    tests = dedent("""
        import importlib

        def test_f():
            importlib.import_module("email.mime." + "text")
            assert f() is True
    """)
    request = make_request(LAZY_PROGRAM, tests, "f", isolation="split")
    reference = forkserver.execute(request.model_copy(update={"report_imports": True}))
    assert [outcome.status for outcome in reference.tests] == ["fail"]
    assert set(MINIDOM) <= set(reference.candidate_imported) <= set(reference.imported), reference
    assert "email.mime.text" in reference.imported and "email.mime.text" not in reference.candidate_imported
    assert "importlib" not in reference.imported and "solution" not in reference.imported
    plain = forkserver.execute(request)
    assert plain.imported == plain.candidate_imported == []
    forkserver.warm(reference.imported, reference.candidate_imported)
    statuses = [_statuses(forkserver, request) for _ in range(3)]
    assert statuses[1:] == [["pass"], ["pass"]], statuses
    assert forkserver._candidates[0].taught == tuple(reference.candidate_imported)


def test_a_server_holding_modules_no_longer_listed_is_started_anew(forkserver: ForkServerEngine) -> None:
    """`warm` says what the servers are to hold beyond the preload from now on. A server that
    loaded a module no longer listed is started anew before its next sample, so a reference
    checked after `warm([])` runs as on a fresh engine and reports what it imports (an engine
    used for a second run: otherwise its references are timed warm, and what they import is
    missing from their stored, shared check). A list that only grows restarts nothing."""
    request = make_request(PROGRAM, LAZY, "f")
    assert _statuses(forkserver, request) == ["fail"]
    forkserver.warm(MINIDOM[:3])
    assert [_statuses(forkserver, request) for _ in range(2)] == [["fail"], ["pass"]]
    forkserver.warm(MINIDOM)
    assert _statuses(forkserver, request) == ["pass"]
    assert forkserver._servers[0].restarts == 0
    forkserver.warm([])
    reference = forkserver.execute(request.model_copy(update={"report_imports": True}))
    assert [outcome.status for outcome in reference.tests] == ["fail"]  # (not loaded before the test)
    assert set(MINIDOM) <= set(reference.imported), reference.imported
    assert forkserver._servers[0].restarts == 1


def test_a_list_dropped_while_a_sample_is_handed_over_restarts_the_server_before_the_next(
        forkserver: ForkServerEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another worker's `unlearn` can land after a server was made ready and before it is
    sent its sample: that sample runs on the server as it is, and the server is started anew
    before the next one, which finds what a fresh server holds."""
    check = "import sys\n\ndef test_t():\n    assert 'xml.dom.minidom' not in sys.modules\n"
    request = make_request(PROGRAM, check, "f")
    assert _statuses(forkserver, request) == ["pass"]
    forkserver.warm(MINIDOM[:3])
    assert _statuses(forkserver, request) == ["pass"]  # (loaded after its reply)
    ready = _Server.ready

    def ready_then_unlearn(server: _Server) -> None:
        ready(server)
        forkserver.unlearn("another worker's server died loading them")
    monkeypatch.setattr(_Server, "ready", ready_then_unlearn)
    assert _statuses(forkserver, request) == ["fail"]  # (it started before the list changed)
    monkeypatch.setattr(_Server, "ready", ready)
    assert [_statuses(forkserver, request) for _ in range(2)] == [["pass"], ["pass"]]
    assert forkserver._servers[0].restarts == 1


def test_a_new_list_neither_waits_for_the_last_ones_modules_nor_inherits_why_it_was_dropped(
        library_env: tuple[str, str]) -> None:
    """`warm` starts over: a server still loading what the last list named is started anew
    without waiting (a module of that list that kills it is no reason to stop learning the new
    list), and a reason an earlier list was dropped for goes with that list."""
    engine = _engine(library_env)
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f")
    try:
        assert engine.execute(request).status == "pass"
        engine.warm(["kb_slow_import", "kb_dies_on_import"])
        assert engine.execute(request).status == "pass"  # (sent the list with it)
        engine.warm([])
        assert engine.execute(request).status == "pass"
        assert engine.unlearned is None and engine._servers[0].restarts == 1
        engine.warm(["kb_dies_on_import"])
        assert [engine.execute(request).status for _ in range(2)] == ["pass"] * 2
        assert engine.unlearned is not None and engine.learned == ()
        engine.warm(["xml"])
        assert engine.unlearned is None and engine.learned == ("xml",)
    finally:
        engine.close()


def test_a_reused_engine_checks_a_later_runs_references_as_a_fresh_one_would(
        best_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine, two runs (as `knowbench novel filter` runs its filters): the second run's
    references are checked on servers that hold none of what the first run learned, so their
    stored imports are whole, and a second run under `learn=False` leaves its samples to import
    for themselves."""
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))
    learning = _benchmark(tmp_path / "a", {"algorithms/lazy": (PROGRAM, [LAZY.replace(
        'assert loaded, "not loaded before the test"', "")])})
    fresh = _benchmark(tmp_path / "b", {"algorithms/fresh": (PROGRAM, [FRESH])})
    engine = ForkServerEngine(best_sandbox, workers=1)
    try:
        first = run_benchmark(learning, ReferenceBackend(), get_method("none"), engine, tmp_path / "first",
                              SamplingParams(), Limits())
        assert first.learned >= len(MINIDOM) and all(result.passed for result in first.results)
        second = run_benchmark(fresh, ReferenceBackend(), get_method("none"), engine, tmp_path / "second",
                               SamplingParams(), Limits(), learn=False)
    finally:
        engine.close()
    assert second.learned == 0
    assert all(result.passed for result in second.results), [r.execution for r in second.results]
    with closing(sqlite3.connect(tmp_path / "second" / "run.sqlite")) as db:
        stored = dict(db.execute("SELECT task_id, modules FROM reference_imports").fetchall())
    assert set(MINIDOM) <= set(stored["algorithms/fresh"].split()), stored


def test_a_line_that_came_with_the_last_reply_is_read_at_once() -> None:
    """A server writes its `warmed` line right after a sample's reply when it had little to
    load: one read of the engine may bring both. The engine's next wait finds the line it
    already holds instead of waiting on the descriptor for one that will never come (the
    engine waited for `_START_TIMEOUT_S`, then gave up what it had learned)."""
    read, write = os.pipe()
    replies = _Replies(read)
    try:
        os.write(write, b'{"reply": 1, "payload_bytes": [["stdout", 3]]}\nabc{"warmed": true}\n{"par')
        assert replies.line(5.0) == b'{"reply": 1, "payload_bytes": [["stdout", 3]]}\n'
        assert replies.read(3) == b"abc"
        assert replies.line(0.2) == b'{"warmed": true}\n'
        with pytest.raises(TimeoutError):
            replies.line(0.2)  # (half a line: not a line)
        os.write(write, b't": 1}\n')
        assert replies.line(5.0) == b'{"part": 1}\n'
        os.close(write)
        assert replies.line(5.0) == b""
    finally:
        replies.close()


def test_a_module_named_before_its_package_is_loaded_all_the_same(forkserver: ForkServerEngine) -> None:
    """Lists joined from several references may name a module before its package: it is
    loaded once the package is."""
    request = make_request(PROGRAM, "import sys\n\ndef test_loaded():\n    assert 'xml.dom.minidom' in sys.modules\n",
                           "f")
    forkserver.warm(["xml.dom.minidom", "xml.dom.expatbuilder", "xml.dom", "xml"])
    assert [_statuses(forkserver, request) for _ in range(2)][-1] == ["pass"]


def test_a_server_that_starts_after_warm_loads_the_modules_as_it_starts(best_sandbox: Sandbox) -> None:
    engine = ForkServerEngine(best_sandbox, workers=1)
    try:
        engine.warm(MINIDOM)
        assert _statuses(engine, make_request(PROGRAM, LAZY, "f")) == ["pass"]
    finally:
        engine.close()


def test_only_modules_the_environments_libraries_hold_are_loaded(forkserver: ForkServerEngine) -> None:
    """A name that resolves outside the environment's prefixes (the runner's own directory is
    on the server's path), one whose package is not loaded, and one that does not exist are
    passed over; the others are loaded."""
    tests = dedent("""
        import sys

        def test_loaded():
            assert "xml.dom.minidom" in sys.modules
            assert "knowbench_shell" not in sys.modules
            assert "email.mime.text" not in sys.modules and "email.mime" not in sys.modules
    """)
    request = make_request(PROGRAM, tests, "f")
    forkserver.warm(["knowbench_shell", "email.mime.text", "no_such_module", "xml.no_such", *MINIDOM])
    engine_ran = [_statuses(forkserver, request) for _ in range(2)]
    assert engine_ran[-1] == ["pass"], forkserver.execute(request).tests[0].message


def test_tampering_with_a_watched_module_it_loaded_is_still_caught(forkserver: ForkServerEngine) -> None:
    """`unittest.mock` is watched: loaded by a warm server, it is part of the server's snapshot,
    so a clean sample passes and one that replaces one of its names is caught."""
    tests = dedent("""
        def test_f():
            assert f() == 1
    """)
    forkserver.warm(["unittest.mock"])
    clean = make_request(PROGRAM, tests, "f")
    for _ in range(2):
        assert _statuses(forkserver, clean) == ["pass"]
    patching = make_request("import unittest.mock\nunittest.mock.patch = None\n" + PROGRAM, tests, "f")
    result = forkserver.execute(patching)
    assert [outcome.reason for outcome in result.tests] == ["tampering"], result.tests[0].message
    assert _statuses(forkserver, clean) == ["pass"]


def test_learned_modules_keep_the_tasks_order_and_never_a_projects_own_package() -> None:
    basic = load_benchmark(ROOT / "examples" / "basic")
    tasks = [task for task in basic.tasks if isinstance(task, FunctionTask)][:2]
    first, second = (task.task_id for task in tasks)
    imports = {second: ["b", "a", "b.c"], first: ["a", "c"], "unknown/task": ["z"]}
    assert learned_modules(tasks, imports) == ["a", "c", "b", "b.c"]


def _benchmark(directory: Path, tasks: dict[str, tuple[str, list[str]]]) -> Benchmark:
    """A benchmark of tasks of `f` ({task id: (reference, each test spec's code)}), with the
    manifest of examples/basic."""
    basic = load_benchmark(ROOT / "examples" / "basic")
    return write_benchmark(directory, basic.manifest, [
        FunctionTask(task_id=task_id, domain="algorithms", instruction="Return.", entry_point="f",
                     prompt_code="def f():\n    ...\n", reference=reference,
                     tests=[TestSpec(name="tuvw"[index], code=code) for index, code in enumerate(tests)])
        for task_id, (reference, tests) in tasks.items()])


def test_a_run_warms_its_servers_with_what_its_references_imported(
        best_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run stores what each reference imported with its check, here and in the shared
    calibration file, and tells the engine; a later run that reuses the checks warms its
    servers the same way; what a split reference's program imported is kept apart, for the
    candidates' servers. Every sample passes: each finds the module loaded, as its tests
    assert, except where its server had not loaded it yet."""
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))
    bench = _benchmark(tmp_path / "bench", {
        "algorithms/lazy": (PROGRAM, [LAZY.replace('assert loaded, "not loaded before the test"', ""),
                                      "def test_f():\n    assert f() == 1\n"]),
        "algorithms/lazy_program": (LAZY_PROGRAM, ["def test_f():\n    assert f() in (True, False)\n"])})
    runtimes = []
    for run in ("a", "b"):
        engine = ForkServerEngine(best_sandbox, workers=1)
        try:
            summary = run_benchmark(bench, ReferenceBackend(), get_method("none"), engine, tmp_path / run,
                                    SamplingParams(), Limits())
            assert all(result.passed for result in summary.results)
            assert set(MINIDOM) <= set(engine.learned), (run, engine.learned)
            assert set(MINIDOM) <= set(engine.candidate_learned), (run, engine.candidate_learned)
            assert summary.isolation["split"] == 2
        finally:
            engine.close()
        with closing(sqlite3.connect(tmp_path / run / "run.sqlite")) as db:
            stored = dict(db.execute("SELECT task_id, modules FROM reference_imports").fetchall())
            programs = dict(db.execute("SELECT task_id, modules FROM candidate_imports").fetchall())
            runtimes.append(db.execute("SELECT reference_s FROM calibration ORDER BY task_id").fetchall())
        assert set(MINIDOM) <= set(stored["algorithms/lazy"].split())
        assert programs["algorithms/lazy"] == ""  # (its tests imported it, in the judge's process)
        assert set(MINIDOM) <= set(programs["algorithms/lazy_program"].split())
    assert runtimes[0] == runtimes[1]  # the second run reused the first one's check
    with closing(sqlite3.connect(tmp_path / "home" / "calibration.sqlite")) as db:
        assert db.execute("SELECT COUNT(*) FROM imports").fetchone()[0] == 2
        assert db.execute("SELECT COUNT(*) FROM candidate_imports WHERE modules != ''").fetchone()[0] == 1


# Passes only where nothing loaded the module before the test: the reference's check (which
# runs before anything is learned), and a sample under --no-learn.
FRESH = dedent("""
    import importlib
    import sys

    def test_fresh():
        assert "xml.dom.minidom" not in sys.modules, "loaded before the test"
        importlib.import_module("xml.dom." + "minidom").parseString("<a/>")
""")


def test_no_learn_leaves_every_sample_to_import_for_itself(tmp_path: Path) -> None:
    """`knowbench run --no-learn`: the engine is told nothing, so a sample finds the module
    unloaded, as a fresh interpreter would; it is a setting, so resuming under the other
    value is refused. With learning the same sample finds it loaded (and fails here), and the
    command and run.json say how many modules were learned. A run.json made before the option
    (no `learn`) resumes as a learning run."""
    bench = _benchmark(tmp_path / "bench", {"algorithms/fresh": (PROGRAM, [FRESH])})
    env = {**os.environ, "KNOWBENCH_HOME": str(tmp_path / "home")}

    def run(out: str, *options: str) -> subprocess.CompletedProcess[str]:
        return run_knowbench("run", str(bench.path), "--model", "reference", "--engine", "forkserver",
                             "--workers", "1", "--out", str(tmp_path / out), *options, env=env, timeout=300)

    fresh = run("fresh", "--no-learn")
    assert fresh.returncode == 0, fresh.stderr
    assert "self-check passed" in fresh.stdout and "learned:" not in fresh.stdout
    document = json.loads((tmp_path / "fresh" / "run.json").read_text())
    assert document["settings"]["learn"] is False and document["learned"] == {"modules": 0}
    refused = run("fresh")
    assert refused.returncode == 2 and "learn: False -> True" in refused.stderr, refused.stderr

    learning = run("learning")
    assert learning.returncode == 0, learning.stderr
    assert "SELF-CHECK FAILED" in learning.stdout + learning.stderr  # (the sample found the module loaded)
    document = json.loads((tmp_path / "learning" / "run.json").read_text())
    assert document["settings"]["learn"] is True and document["learned"]["modules"] >= len(MINIDOM)
    assert f"learned: {document['learned']['modules']} library modules the references" in learning.stdout
    del document["settings"]["learn"]
    (tmp_path / "learning" / "run.json").write_text(json.dumps(document))
    assert run("learning").returncode == 0
    assert run("learning", "--no-learn").returncode == 2

    # An engine that keeps no process learns nothing, and says nothing of it.
    once = run("once", "--engine", "subprocess")
    assert once.returncode == 0 and "learned:" not in once.stdout, once.stderr
    assert json.loads((tmp_path / "once" / "run.json").read_text())["learned"] == {"modules": 0}


def test_a_run_json_left_half_written_keeps_no_directory_from_a_run(tmp_path: Path) -> None:
    """run.json is written whole or not at all (a `.partial` file, then a rename); a
    `.partial` left by a run killed in between is no reason to refuse the directory."""
    from knowbench.store.directory import RunDirectory

    (tmp_path / "run.json.partial").write_text('{"settings": {"lear')
    run = RunDirectory.prepare(tmp_path, {"learn": True})
    try:
        run.write_document({"settings": {"learn": True}})
        assert run.settings() == {"learn": True} and not (tmp_path / "run.json.partial").exists()
    finally:
        run.release()


# Library modules of an environment made for these tests: one slow to import, one that ends
# the process importing it, one that patches `unittest` and then fails.
LIBRARY = {
    "kb_slow_import": "import time\ntime.sleep(3)\nX = 1\n",
    "kb_dies_on_import": "import os\nos._exit(3)\n",
    "kb_patches_then_fails": "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
                             "raise ImportError('an optional dependency is missing')\n",
    "pytest_kb_plugin": "X = 1\n",  # (a testing framework's module, by its name)
}


@pytest.fixture(scope="module")
def library_env() -> Iterator[tuple[str, str]]:
    """(a venv's interpreter, with `LIBRARY` in its site-packages; the sandbox kind)."""
    root = Path(tempfile.mkdtemp(prefix="knowbench-learned-", dir="/tmp"))
    root.chmod(0o755)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
        python = str(root / "venv" / "bin" / "python")
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        for name, code in LIBRARY.items():
            Path(site, f"{name}.py").write_text(code)
        yield python, resolve_sandbox("auto", python=python).kind
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _engine(library_env: tuple[str, str]) -> ForkServerEngine:
    python, kind = library_env
    return ForkServerEngine(resolve_sandbox(kind, python=python), workers=1, python=python)


@pytest.mark.parametrize("server", ["judge", "candidate"])
def test_what_the_servers_load_is_never_on_a_split_samples_clock(library_env: tuple[str, str], server: str) -> None:
    """Split, each server loads what it learned after a sample; the next sample waits for
    them before either of its processes gets it: with a module that takes 3 s to import and a
    limit of 2 s, every sample passes in well under its limit."""
    engine = _engine(library_env)
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f", isolation="split", wall_s=2.0)
    try:
        assert engine.execute(request).status == "pass"
        engine.warm(*((["kb_slow_import"], []) if server == "judge" else ([], ["kb_slow_import"])))
        for _ in range(3):
            execution = engine.execute(request)
            assert execution.status == "pass" and execution.duration_s < 2.0, execution
    finally:
        engine.close()


def _starts_and_sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The servers' starts and sends from now on, in order: (what, the server's role)."""
    events: list[tuple[str, str]] = []
    start, send = _Server.start, _Server.send

    def logged_start(server: _Server) -> None:
        events.append(("start", server.role))
        start(server)

    def logged_send(server: _Server, *args: object, **kwargs: object) -> None:
        events.append(("send", server.role))
        send(server, *args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(_Server, "start", logged_start)
    monkeypatch.setattr(_Server, "send", logged_send)
    return events


def test_a_split_samples_servers_are_both_current_before_either_gets_it(
        library_env: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate's server dies loading what it learned: the engine unlearns, and the
    judge's server, which loaded its own list, is started anew too. Both restarts come before
    either server is sent the sample, never on its clock after the candidate has it."""
    engine = _engine(library_env)
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f", isolation="split")
    events = _starts_and_sends(monkeypatch)
    try:
        assert engine.execute(request).status == "pass"
        engine.warm(["xml"], ["kb_dies_on_import"])
        assert engine.execute(request).status == "pass"  # (each server sent its list with it)
        events.clear()
        assert engine.execute(request).status == "pass"
        assert engine.unlearned is not None
        assert events == [("start", "candidate"), ("start", "judge"), ("send", "candidate"),
                          ("send", "judge")], events
    finally:
        engine.close()


def test_a_split_samples_judge_whose_cgroup_cannot_be_limited_is_started_anew_before_the_clock(
        best_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a server's memory cgroup cannot be limited to the sample's budget (it holds more
    than that), the server is started anew; split, that happens before either server is sent
    the sample, never after the candidate has it."""
    from knowbench.execution.cgroup import MemoryCgroup

    engine = ForkServerEngine(best_sandbox, workers=1)
    if not engine.cgroups:
        engine.close()
        pytest.skip("no writable memory cgroup here: no server has a limit to set")
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f", isolation="split")
    set_limit = MemoryCgroup.set_limit
    refused: list[MemoryCgroup] = []

    def refused_once(cgroup: MemoryCgroup, limit: int) -> None:
        if cgroup is engine._servers[0].cgroup and not refused:
            refused.append(cgroup)
            raise OSError(16, "Device or resource busy")
        set_limit(cgroup, limit)
    try:
        assert engine.execute(request).status == "pass"
        events = _starts_and_sends(monkeypatch)
        monkeypatch.setattr(MemoryCgroup, "set_limit", refused_once)
        assert engine.execute(request).status == "pass"
        assert refused and events == [("start", "judge"), ("send", "candidate"), ("send", "judge")], events
    finally:
        engine.close()


def test_a_candidates_server_never_loads_a_testing_frameworks_module(library_env: tuple[str, str]) -> None:
    """A split candidate's server leaves out what its preload leaves out (a testing
    framework's modules); the judge's loads it."""
    engine = _engine(library_env)
    program = "import sys\n\ndef f():\n    return 'pytest_kb_plugin' in sys.modules\n"
    tests = "import sys\n\ndef test_f():\n    assert f() is False\n    assert 'pytest_kb_plugin' in sys.modules\n"
    request = make_request(program, tests, "f", isolation="split")
    try:
        engine.warm(["pytest_kb_plugin"], ["pytest_kb_plugin"])
        assert [engine.execute(request).status for _ in range(2)] == ["pass"] * 2
        assert engine._candidates[0].taught == ("pytest_kb_plugin",)  # (it was sent, and passed over)
    finally:
        engine.close()


@pytest.mark.parametrize("when", ["while it runs", "before it starts"])
def test_a_module_that_kills_the_server_is_learned_no_more(library_env: tuple[str, str], when: str) -> None:
    """A server that dies loading what the engine learned, after a sample or as it starts,
    is started anew without it, and the engine sends it no more: every sample still runs."""
    engine = _engine(library_env)
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f")
    try:
        if when == "while it runs":
            assert engine.execute(request).status == "pass"
        engine.warm(["kb_dies_on_import"])
        assert [engine.execute(request).status for _ in range(3)] == ["pass"] * 3
        assert engine.learned == () and "kb_dies_on_import" not in str(engine.unlearned) \
            and "fork server" in str(engine.unlearned)
    finally:
        engine.close()


@pytest.mark.slow
def test_under_ray_an_actor_in_a_dead_ones_place_is_told_nothing_once_a_module_killed_a_server(
        library_env: tuple[str, str]) -> None:
    """An actor's sample says why its engine stopped learning; the driver then sends an actor
    started in a dead one's place nothing, instead of the module that kills its server."""
    ray = pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")
    from knowbench.execution.ray_engine import RayEngine

    python, kind = library_env
    engine = RayEngine(kind, workers=1, python=python)
    request = make_request(PROGRAM, "def test_f():\n    assert f() == 1\n", "f")
    try:
        assert engine.execute(request).status == "pass"
        engine.warm(["kb_dies_on_import"])
        assert [engine.execute(request).status for _ in range(2)] == ["pass"] * 2
        assert engine._unlearned and "fork server" in engine._unlearned  # (from the sample, not asked)
        ray.kill(engine._actors[0])
        assert [engine.execute(request).status for _ in range(2)] == ["pass"] * 2
        assert ray.get(engine._actors[0].unlearned.remote()) is None  # (it was sent nothing)
        assert engine.unlearned and "fork server" in engine.unlearned
        engine.warm(["xml"])  # (a new list starts over, on every actor)
        assert engine.unlearned is None
        assert engine.execute(request).status == "pass" and engine.unlearned is None
    finally:
        engine.close()


def test_a_module_that_fails_to_load_leaves_the_same_verdicts_whenever_it_was_loaded(
        library_env: tuple[str, str]) -> None:
    """The server takes its snapshot again after any module's code ran, loaded or not, so a
    module that changed what is watched and then failed is part of the baseline whether the
    server loaded it as it started or after a sample: the same verdicts either way."""
    tests = ("import unittest\n\n\nclass T(unittest.TestCase):\n    def test_f(self):\n"
             "        self.assertEqual(f(), 1)\n")
    wrong = make_request("def f():\n    return 2\n", tests, "f")
    verdicts = []
    for warm_first in (False, True):
        engine = _engine(library_env)
        try:
            if not warm_first:
                engine.execute(make_request(PROGRAM, tests, "f"))
            engine.warm(["kb_patches_then_fails"])
            engine.execute(make_request(PROGRAM, tests, "f"))
            verdicts.append([(outcome.status, outcome.reason) for outcome in engine.execute(wrong).tests])
        finally:
            engine.close()
    assert verdicts[0] == verdicts[1], verdicts
