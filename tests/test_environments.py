"""Benchmark environments are keyed by what they install: for a local archive or directory,
by what is there now, so that an edited repository mined again is not served a stale build."""

from __future__ import annotations

import time
from pathlib import Path

from knowbench.execution.environments import env_key


def test_a_local_requirements_key_follows_its_files_not_its_build_output(tmp_path: Path) -> None:
    repository = tmp_path / "lib"
    (repository / "src" / "lib").mkdir(parents=True)
    module = repository / "src" / "lib" / "__init__.py"
    module.write_text("def double(x):\n    return 2 * x\n")
    requirement = (f"lib @ {repository.as_uri()}", "pytest")
    first = env_key(requirement, "3.11.7")
    assert env_key(requirement, "3.11.7") == first
    (repository / "src" / "lib.egg-info").mkdir()  # what building it writes into it
    (repository / "src" / "lib.egg-info" / "PKG-INFO").write_text("Name: lib\n")
    (repository / "build").mkdir()
    (repository / ".git").mkdir()
    (repository / ".git" / "index").write_text("x")
    assert env_key(requirement, "3.11.7") == first
    time.sleep(0.01)
    module.write_text(module.read_text())  # written again as it was (a build's version file)
    assert env_key(requirement, "3.11.7") == first
    module.write_text("def double(x):\n    return x + x\n")
    assert env_key(requirement, "3.11.7") != first
    (repository / "src" / "lib" / "units.txt").write_text("m=1\n")  # package data counts too
    edited = env_key(requirement, "3.11.7")
    (repository / "src" / "lib" / "units.txt").unlink()
    assert edited != env_key(requirement, "3.11.7")


def test_a_local_archives_key_follows_its_bytes(tmp_path: Path) -> None:
    archive = tmp_path / "lib-1.0.tar.gz"
    archive.write_bytes(b"one")
    requirement = (f"lib @ {archive.as_uri()}",)
    first = env_key(requirement, "3.11.7")
    archive.write_bytes(b"two")
    assert env_key(requirement, "3.11.7") != first
    assert env_key(("lib==1.0",), "3.11.7") == env_key(("lib==1.0",), "3.11.7")
