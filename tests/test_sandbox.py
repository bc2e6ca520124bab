"""What a bubblewrap sandbox shows a sample: an allow-list, checked from inside real sandboxes.

Every test here runs real bwrap and, as root, real unprivileged sandbox uids; without bwrap
they skip. The library-level test at the end calls `run_benchmark` the way a Python user would,
with an engine the test builds, and checks that a sample cannot read the references.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent

import pytest

from helpers import make_request
from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.schema import FunctionTask, Manifest, Provenance, TestSpec
from knowbench.errors import UserError
from knowbench.execution.engine import Engine, SubprocessEngine
from knowbench.execution.environments import envs_root
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import ETC_ALLOWED, RUNNER_DIR, Sandbox, _views, resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReplayBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark

REPO = Path(__file__).resolve().parents[1]
HONEST_ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def bwrap() -> Sandbox:
    try:
        return resolve_sandbox("bwrap")
    except UserError as error:
        pytest.skip(f"bubblewrap does not work here: {error}")


@pytest.fixture(scope="module")
def tmp_venv(bwrap: Sandbox) -> Iterator[Path]:
    """A venv whose interpreter lives under the host's /tmp (which the sandbox replaces)."""
    root = Path(tempfile.mkdtemp(prefix="knowbench-venv-test-", dir="/tmp"))
    root.chmod(0o755)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    yield venv
    shutil.rmtree(root, ignore_errors=True)


def _run_both(sandbox: Sandbox, request_code: str, python: str | None = None,
              **limits: float) -> list[tuple[str, str, str]]:
    """Run `request_code` as the test of an honest sample on both engines: (engine, status, message)."""
    request = make_request(HONEST_ADD, request_code, "add", **limits)
    outcomes = []
    engines: list[Engine] = [SubprocessEngine(sandbox, workers=1, python=python),
                             ForkServerEngine(sandbox, workers=1, python=python)]
    for engine in engines:
        try:
            execution = engine.execute(request)
        finally:
            engine.close()
        outcomes.append((engine.name, execution.status, execution.tests[0].message + execution.note))
    return outcomes


def _assert_all_pass(outcomes: list[tuple[str, str, str]]) -> None:
    for name, status, message in outcomes:
        assert status == "pass", f"{name}: {message}"


@pytest.fixture
def canaries() -> Iterator[list[Path]]:
    """Readable files in places a sample must not see: /srv, /opt, /home, the home directory,
    the environment cache."""
    token = secrets.token_hex(6)
    envs = envs_root()
    made_envs = not envs.exists()
    envs.mkdir(parents=True, exist_ok=True)
    paths = [Path(base) / f"knowbench-canary-{token}"
             for base in ("/srv", "/opt", "/home", str(Path.home()), str(envs))]
    written = []
    try:
        for path in paths:
            if path.parent.is_dir():
                path.write_text("secret")
                path.chmod(0o644)
                written.append(path)
        yield written
    finally:
        for path in written:
            path.unlink(missing_ok=True)
        if made_envs:
            shutil.rmtree(envs, ignore_errors=True)


def test_a_sample_sees_only_the_allow_list(bwrap: Sandbox, canaries: list[Path]) -> None:
    host_users = [entry.pw_name for entry in pwd.getpwall() if entry.pw_uid not in (0, 65534)]
    allowed_etc = {name.split("/")[0] for name in ETC_ALLOWED} | {"passwd", "group"}
    probe = dedent(f"""
        import os, ssl, sqlite3, decimal, zoneinfo, json
        problems = []
        for path in {[str(path) for path in canaries]!r} + [
                {str(REPO / "README.md")!r}, {str(REPO / "tests")!r}, {str(envs_root())!r},
                "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/srv", "/opt", "/home", "/var",
                "/run", "/mnt", "/boot", "/root/.cache", "/root/.ssh", "/root/.bash_history"]:
            if os.path.lexists(path):
                problems.append("visible: " + path)
        extra = set(os.listdir("/etc")) - set({sorted(allowed_etc)!r})
        if extra:
            problems.append("/etc holds " + ", ".join(sorted(extra)))
        with open("/etc/passwd") as handle:
            users = {{line.split(":")[0] for line in handle}}
        leaked = users & set({host_users!r})
        if leaked:
            problems.append("host users in /etc/passwd: " + ", ".join(sorted(leaked)))
        for path in ("/", "/etc", "/usr", "/dev/sample-file"):
            try:
                open(os.path.join(path, "written-by-sample"), "w").close()
                problems.append("writable: " + path)
            except OSError:
                pass
        ssl.create_default_context()  # reads the certificates under /etc/ssl
        zoneinfo.ZoneInfo("Europe/Paris")
        sqlite3.connect(":memory:").execute("select 1")
        assert not problems, problems
        assert add(2, 3) == 5
    """)
    _assert_all_pass(_run_both(bwrap, probe))


def test_tmp_holds_only_the_work_directory(bwrap: Sandbox) -> None:
    # ... and, when the interpreter or knowbench itself lives under /tmp (a clone there), the
    # directories leading to them, which the sandbox must show.
    shown = {Path(destination).relative_to("/tmp").parts[0]
             for _, destination in _views(sys.executable)
             if destination.startswith("/tmp/")}
    expected = sorted({"sample", *shown})
    probe = f"import os\nassert sorted(os.listdir('/tmp')) == {expected!r}, os.listdir('/tmp')\n"
    engine = SubprocessEngine(bwrap, workers=1)
    try:
        execution = engine.execute(make_request(HONEST_ADD, probe, "add"))
    finally:
        engine.close()
    assert execution.status == "pass", execution.tests[0].message


def test_an_interpreter_inside_tmp_runs_and_shows_nothing_beside_it(tmp_venv: Path) -> None:
    """/tmp is a private tmpfs inside bwrap; a venv under /tmp must still run, without
    re-exposing what lies next to it."""
    sibling = tmp_venv.parent / "sibling.txt"
    sibling.write_text("next to the venv")
    sibling.chmod(0o644)
    python = str(tmp_venv / "bin" / "python")
    sandbox = resolve_sandbox("bwrap", python=python)
    probe = dedent(f"""
        import decimal, json, os, sys
        assert sys.prefix == {str(tmp_venv)!r}, sys.prefix
        assert not os.path.exists({str(sibling)!r})
        assert os.listdir({str(tmp_venv.parent)!r}) == ["venv"]
        assert add(2, 3) == 5
    """)
    _assert_all_pass(_run_both(sandbox, probe, python))


def test_a_hidden_path_inside_an_exposed_one_stays_hidden(tmp_venv: Path) -> None:
    python = str(tmp_venv / "bin" / "python")
    secret_dir = tmp_venv / "share" / "bench"
    secret_dir.mkdir(parents=True, exist_ok=True)
    (secret_dir / "tasks.jsonl").write_text("the reference solutions")
    secret_file = tmp_venv / "share" / "gold.txt"
    secret_file.write_text("gold")
    try:
        sandbox = resolve_sandbox("bwrap", hidden=[secret_dir, secret_file], python=python)
        assert Sandbox("bwrap").shows(secret_dir, python)  # the test is about an exposed place
        assert not sandbox.shows(secret_dir, python)
        probe = dedent(f"""
            import os
            assert os.listdir({str(secret_dir)!r}) == []
            assert open({str(secret_file)!r}).read() == ""
            assert os.path.exists({str(tmp_venv / "pyvenv.cfg")!r})
        """)
        _assert_all_pass(_run_both(sandbox, probe, python))
    finally:
        shutil.rmtree(secret_dir.parent)


def test_tmp_is_capped_and_emptied_between_samples(bwrap: Sandbox) -> None:
    cap = 8 * 1024 * 1024
    sandbox = resolve_sandbox("bwrap", tmp_bytes=cap)
    assert sandbox.tmp_cap == cap, "this bwrap cannot cap a tmpfs (--size)"
    fill = dedent("""
        import errno, os
        for where in ("/tmp", "/dev/shm"):
            written, error = 0, None
            try:
                for index in range(64):  # 1 MiB files: under the file-size limit, over the cap
                    with open(os.path.join(where, f"fill-{index}"), "wb") as handle:
                        handle.write(b"x" * (1 << 20))
                    written += 1
            except OSError as caught:
                error = caught.errno
            assert error == errno.ENOSPC, (where, error)
            assert 4 <= written < 9, (where, written)
            if where == "/dev/shm":
                for index in range(written + 1):
                    if os.path.exists(f"/dev/shm/fill-{index}"):
                        os.unlink(f"/dev/shm/fill-{index}")
    """)
    request = make_request(HONEST_ADD, fill, "add")
    engines: list[Engine] = [SubprocessEngine(sandbox, workers=1), ForkServerEngine(sandbox, workers=1)]
    for engine in engines:
        try:
            assert engine.describe()["tmp_bytes"] == cap
            # Twice on the same fork server: the second sample finds /tmp emptied again.
            for _ in range(2):
                execution = engine.execute(request)
                assert execution.status == "pass", (engine.name, execution.tests[0].message)
        finally:
            engine.close()


def test_the_default_tmp_cap_is_recorded(bwrap: Sandbox) -> None:
    engine = SubprocessEngine(bwrap, workers=1)
    try:
        assert engine.describe()["tmp_bytes"] == 256 * 1024 * 1024
        assert engine.describe()["mount_isolation"] is True
    finally:
        engine.close()


def test_clean_tmp_removes_files_but_never_enters_mount_points_or_follows_links(
        bwrap: Sandbox, tmp_path: Path) -> None:
    """The fork server's /tmp cleaning, run inside a real mount namespace: a writable bind
    mount under /tmp must come out untouched (a walk into it would delete its files)."""
    tmp_path.chmod(0o755)
    mounted, deep, target = tmp_path / "mounted", tmp_path / "deep", tmp_path / "target"
    for directory in (mounted / "sub", deep, target):
        directory.mkdir(parents=True)
    for path in (mounted / "a", mounted / "sub" / "b", deep / "c", target / "d"):
        path.write_text("keep me")
    program = dedent("""
        import os, sys
        sys.path.insert(0, "/tmp/runner")
        import knowbench_runner
        os.makedirs("/tmp/junk/x/y")
        open("/tmp/junk/x/y/z", "w").close()
        open("/tmp/file", "w").close()
        os.mkdir("/tmp/keep")
        open("/tmp/keep/kept", "w").close()
        os.symlink("/tmp/mounted", "/tmp/link-to-mount")
        os.symlink("/mnt", "/tmp/link-out")
        os.symlink("/mnt", "/tmp/junk/link-out")
        knowbench_runner._clean_tmp(keep="/tmp/keep")
        print(sorted(os.listdir("/tmp")), sorted(os.listdir("/tmp/parent")))
    """)
    command = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
               "--bind", str(mounted), "/tmp/mounted", "--bind", str(deep), "/tmp/parent/deep",
               "--bind", str(target), "/mnt", "--ro-bind", str(RUNNER_DIR), "/tmp/runner",
               "--unshare-pid", "--die-with-parent",
               # The base interpreter: a venv's may live under /tmp, which this sandbox replaces.
               getattr(sys, "_base_executable", sys.executable), "-I", "-c", program]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listing = done.stdout.strip()
    # Left: the kept path, the mount points, and the directory bwrap made to hold one.
    assert listing == "['keep', 'mounted', 'parent', 'runner'] ['deep']", listing
    for path in (mounted / "a", mounted / "sub" / "b", deep / "c", target / "d"):
        assert path.read_text() == "keep me", path


def test_a_file_put_beside_an_interpreter_under_tmp_is_gone_for_the_next_sample(tmp_venv: Path) -> None:
    """bwrap makes the directories that lead to an interpreter under the host's /tmp on the
    sandbox's private /tmp, and the fork server's walk cannot remove them (they hold the
    mount). As root, a sample under a uid of its own cannot write there; run by another user
    it can (`tests/test_unprivileged.py`), and the walk empties them. Either way the next
    sample finds nothing of it."""
    python = str(tmp_venv / "bin" / "python")
    sandbox = resolve_sandbox("bwrap", python=python)
    beside = tmp_venv.parent
    put = dedent(f"""
        import os
        try:
            open({str(beside / "planted")!r}, "w").close()
            os.mkdir({str(beside / "planted-dir")!r})
        except PermissionError:
            assert os.geteuid() != 0 and {os.geteuid()} == 0  # a sample uid, under a root server
        assert add(2, 3) == 5
    """)
    look = f"import os\nassert os.listdir({str(beside)!r}) == ['venv'], os.listdir({str(beside)!r})\n"
    engine = ForkServerEngine(sandbox, workers=1, python=python)
    try:
        outcomes = [engine.execute(make_request(HONEST_ADD, code, "add")) for code in (put, look, put, look)]
    finally:
        engine.close()
    assert [outcome.status for outcome in outcomes] == ["pass"] * 4, [
        outcome.tests[0].message + outcome.note for outcome in outcomes]


# -- the library: run_benchmark hides the benchmark and the run directory by itself -------------


def _leaky_benchmark(root: Path, token: str) -> Path:
    """A one-task benchmark at `root`: `secret()` must return a token found only in the
    benchmark's reference solution."""
    task = FunctionTask(
        task_id="leak/secret", domain="leak", instruction="Return the secret.",
        prompt_code='def secret() -> str:\n    """The secret."""\n    ...',
        entry_point="secret", reference=f"def secret() -> str:\n    return {token!r}\n",
        tests=[TestSpec(name="t", code=f"assert secret() == {token!r}\n")],
    )
    manifest = Manifest(name="leaky", provenance=Provenance(source="tests/test_sandbox.py"))
    write_benchmark(root, manifest, [task])
    return root


def _reading_completion(bench: Path) -> str:
    """A sample that answers by executing the reference it reads from the benchmark."""
    return dedent(f"""
        ```python
        def secret() -> str:
            import json
            with open({str(bench / "tasks.jsonl")!r}) as handle:
                task = json.loads(handle.readline())
            namespace = {{}}
            exec(task["reference"], namespace)
            return namespace["secret"]()
        ```
    """)


def test_run_benchmark_hides_the_references_from_samples_by_itself(tmp_venv: Path) -> None:
    """No `hidden=` anywhere: the benchmark sits inside a directory the sandbox exposes (the
    interpreter's prefix), the engine is built by the caller, and still no sample reads it."""
    python = str(tmp_venv / "bin" / "python")
    share = tmp_venv / "share"
    token = f"kb-gold-{secrets.token_hex(6)}"
    bench_dir = _leaky_benchmark(share / "leaky-bench", token)
    samples = share / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "leak/secret", "sample_idx": 0,
                                   "completion": _reading_completion(bench_dir)}) + "\n")
    from knowbench.benchmark.load import load_benchmark

    bench = load_benchmark(bench_dir)
    try:
        # The control: without mount isolation the sample does read the reference.
        control = SubprocessEngine(Sandbox("none"), workers=1, python=python)
        try:
            summary = run_benchmark(bench, ReplayBackend(samples), get_method("none"), control,
                                    share / "runs" / "control", SamplingParams(), Limits())
        finally:
            control.close()
        assert summary.results[0].passed, summary.results[0].execution

        sandbox = resolve_sandbox("bwrap", python=python)
        assert sandbox.shows(bench_dir, python) and not sandbox.hidden
        engines: list[Engine] = [SubprocessEngine(sandbox, workers=1, python=python),
                                 ForkServerEngine(sandbox, workers=1, python=python)]
        for engine in engines:
            run_dir = share / "runs" / engine.name
            try:
                summary = run_benchmark(bench, ReplayBackend(samples), get_method("none"), engine,
                                        run_dir, SamplingParams(), Limits())
            finally:
                engine.close()
            result = summary.results[0]
            assert not result.passed, f"{engine.name}: the sample read the reference"
            assert result.execution is not None
            assert "No such file or directory" in result.execution.tests[0].message, result.execution
    finally:
        shutil.rmtree(share, ignore_errors=True)


def test_run_benchmark_hides_the_run_directory(tmp_venv: Path) -> None:
    """The run directory (every stored completion, and the references under --model
    reference) is masked too when it lies inside an exposed path."""
    python = str(tmp_venv / "bin" / "python")
    share = tmp_venv / "share"
    token = f"kb-gold-{secrets.token_hex(6)}"
    bench_dir = _leaky_benchmark(Path(tempfile.mkdtemp(prefix="knowbench-bench-")), token)
    run_dir = share / "runs" / "r"
    samples = share / "samples.jsonl"
    share.mkdir(parents=True, exist_ok=True)
    completion = dedent(f"""
        ```python
        def secret() -> str:
            import os
            return "{token}" if os.path.exists({str(run_dir / "run.json")!r}) else "blind"
        ```
    """)
    samples.write_text(json.dumps({"task_id": "leak/secret", "sample_idx": 0,
                                   "completion": completion}) + "\n")
    from knowbench.benchmark.load import load_benchmark

    bench = load_benchmark(bench_dir)
    engine = ForkServerEngine(resolve_sandbox("bwrap", python=python), workers=1, python=python)
    try:
        summary = run_benchmark(bench, ReplayBackend(samples), get_method("none"), engine, run_dir,
                                SamplingParams(), Limits())
        assert not summary.results[0].passed, "the sample saw the run directory"
        assert engine.sandbox.hidden == (str(run_dir.resolve()),)
    finally:
        engine.close()
        shutil.rmtree(share, ignore_errors=True)
        shutil.rmtree(bench_dir, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the probe runs only as root")
def test_unshare_as_root_is_refused_for_an_interpreter_the_sample_uid_cannot_run(tmp_path: Path) -> None:
    """Under unshare the file system is the host's, so as root a sample must move to an
    unprivileged uid: an interpreter that uid cannot reach refuses unshare, with the reason."""
    from knowbench.execution.sandbox import _unprivileged_can_run

    system_python = Path("/usr/bin/python3")
    if system_python.exists():  # reachable by every uid, as Debian installs it
        assert _unprivileged_can_run(str(system_python))
    # Root can run this one; the sample's uid cannot enter the directory.
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    python = private / "python"
    python.symlink_to(system_python if system_python.exists() else sys.executable)
    assert subprocess.run([str(python), "-c", "pass"]).returncode == 0
    assert not _unprivileged_can_run(str(python))
    # Whether unshare works here, asked with an interpreter the sample's uid can run (the
    # default, this one, may itself be out of its reach, and then unshare is refused for it).
    if not system_python.exists():
        return
    try:
        resolve_sandbox("unshare", python=str(system_python))
    except UserError:
        return  # no working unshare here: nothing to refuse
    with pytest.raises(UserError, match="unshare was refused"):
        resolve_sandbox("unshare", python=str(python))
