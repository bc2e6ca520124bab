"""What the Ray engine adds around its fork servers: actors that die, paths to hide, an
interpreter of the caller's choice, and more workers than the local instance can place.
(The samples themselves run as on the fork server: tests/test_executor.py and
tests/test_hostile.py run their cases on Ray too.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from helpers import make_request
from knowbench.errors import UserError
from knowbench.execution import create_engine
from knowbench.execution.sandbox import Sandbox

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")

from knowbench.execution.ray_engine import RayEngine  # noqa: E402

ADD = "def add(a, b):\n    return a + b\n"
CHECK_ADD = "def test_add():\n    assert add(2, 3) == 5\n"
SLOW_ADD = "import time\n\n\ndef add(a, b):\n    time.sleep(3)\n    return a + b\n"


def test_an_actor_that_dies_is_replaced_and_its_sample_runs_again(best_sandbox: Sandbox) -> None:
    """The OOM killer, Ray's memory monitor or a lost node may end an actor: its sample runs
    again on a fresh one, later samples find a live one, and close() still ends everything."""
    engine = RayEngine(best_sandbox.kind, workers=1)
    try:
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        dying = engine._actors[0]
        killer = threading.Timer(1.0, ray.kill, [dying])
        killer.start()
        started = time.monotonic()
        during = engine.execute(make_request(SLOW_ADD, CHECK_ADD, "add"))
        killer.join()
        assert during.status == "pass", during.note
        assert time.monotonic() - started > 4  # run twice: killed a second in, then 3 s again
        assert engine._actors[0] is not dying
        ray.kill(engine._actors[0])  # dead while idle: found dead at the next sample
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    finally:
        engine.close()
    assert not ray.is_initialized()


def test_the_factory_gives_the_actors_the_sandboxs_hidden_paths(best_sandbox: Sandbox) -> None:
    """A path the sandbox would show (here Ray's own package, in the interpreter's
    site-packages) is an empty directory to samples once the caller's sandbox hides it."""
    if best_sandbox.kind != "bwrap":
        pytest.skip("only bwrap hides paths")
    secret = Path(ray.__file__).parent
    program = f"import os\n\n\ndef add(a, b):\n    return [len(os.listdir({str(secret)!r})), a + b]\n"
    tests = "def test_add():\n    assert add(2, 3) == [0, 5]\n"
    engine = create_engine("ray", best_sandbox.hiding([secret]), workers=1)
    try:
        execution = engine.execute(make_request(program, tests, "add"))
        assert execution.status == "pass", execution.tests[0].message
    finally:
        engine.close()


def test_more_workers_than_the_local_instance_can_place_is_an_error(best_sandbox: Sandbox) -> None:
    with pytest.raises(UserError, match="Ray workers need"):
        RayEngine(best_sandbox.kind, workers=1000)
    assert not ray.is_initialized()


def test_the_engine_describes_its_fork_servers_and_runs_any_text(best_sandbox: Sandbox) -> None:
    """run.json's record of the engine holds what the fork server's does, and a request whose
    program holds a lone surrogate (an API caller's: knowbench's own escape them) gets the
    verdict it gets there, which cannot compile it, instead of an exception."""
    engine = RayEngine(best_sandbox.kind, workers=1, preload=["json"])
    try:
        described = engine.describe()
        assert described["engine"] == "ray" and described["workers"] == 1
        assert described["sandbox"] == best_sandbox.kind and described["preload"] == ["json"]
        assert "memory_budget" in described and "python" in described
        program = 'TEXT = "\ud800"\n\n\ndef add(a, b):\n    return a + b\n'
        execution = engine.execute(make_request(program, CHECK_ADD, "add"))
        assert execution.status == "error" and "surrogates not allowed" in execution.tests[0].message
    finally:
        engine.close()


def test_what_the_engine_learns_reaches_every_actor_a_replacement_too(best_sandbox: Sandbox) -> None:
    """`warm`: each actor's fork server loads the modules after its next sample; an actor
    started in a dead one's place loads them as its server starts; `warm([])` has every
    server that loaded them replaced."""
    tests = ("import sys\n\n\ndef test_loaded():\n"
             "    assert 'xml.dom.minidom' in sys.modules\n")
    request = make_request(ADD, tests, "add")
    engine = RayEngine(best_sandbox.kind, workers=1)
    try:
        assert engine.execute(request).status == "fail"
        engine.warm(["xml", "xml.dom", "xml.dom.minidom"])
        assert [engine.execute(request).status for _ in range(2)] == ["fail", "pass"]
        ray.kill(engine._actors[0])
        assert engine.execute(request).status == "pass"
        assert engine.learns and engine.unlearned is None
        engine.warm([])
        assert engine.execute(request).status == "fail"
    finally:
        engine.close()
