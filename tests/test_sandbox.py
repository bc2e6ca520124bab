"""Where the interpreter lives must not matter: masked directories re-expose it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import make_request
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox


def test_an_interpreter_inside_tmp_runs_in_the_sandbox(tmp_path: Path) -> None:
    """/tmp is a private tmpfs inside bwrap; a checkout or venv under /tmp must still run."""
    assert str(tmp_path).startswith("/tmp")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    sandbox = resolve_sandbox("auto", hidden=[tmp_path / "hidden"], python=python)
    request = make_request("import decimal\n\ndef add(a, b):\n    return a + b\n",
                           "assert add(2, 3) == 5\n", "add")
    for engine in (SubprocessEngine(sandbox, workers=1, python=python),
                   ForkServerEngine(sandbox, workers=1, python=python)):
        try:
            execution = engine.execute(request)
        finally:
            engine.close()
        assert execution.status == "pass", (engine.name, execution.tests[0].message, execution.note)


def test_a_hidden_directory_inside_an_exposed_one_stays_hidden(tmp_path: Path) -> None:
    secret_dir = tmp_path / "bench"
    secret_dir.mkdir()
    (secret_dir / "tasks.jsonl").write_text("the reference solutions")
    sandbox = resolve_sandbox("auto", hidden=[secret_dir])
    probe = f"import os\nassert not os.path.exists({str(secret_dir / 'tasks.jsonl')!r})\n"
    engine = SubprocessEngine(sandbox, workers=1)
    try:
        execution = engine.execute(make_request("def add(a, b):\n    return a + b\n", probe, "add"))
    finally:
        engine.close()
    assert execution.status == "pass", execution.tests[0].message
