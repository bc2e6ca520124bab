"""Shared fixtures. Keep this small: helpers live in tests/helpers.py."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knowbench.errors import UserError
from knowbench.execution.engine import SubprocessEngine, default_workers
from knowbench.execution.sandbox import Sandbox, resolve_sandbox


@pytest.fixture(scope="module")
def best_sandbox() -> Sandbox:
    """The best sandbox this machine has; the tests that need one skip without it."""
    try:
        return resolve_sandbox("auto")
    except UserError as error:
        pytest.skip(f"no sandbox on this machine: {error}")


@pytest.fixture(scope="module")
def engine(best_sandbox: Sandbox) -> Iterator[SubprocessEngine]:
    """A SubprocessEngine on the best sandbox this machine has, closed after the module."""
    subprocess_engine = SubprocessEngine(best_sandbox, workers=max(2, default_workers()))
    yield subprocess_engine
    subprocess_engine.close()


# Real data shared between checkouts (released benchmark data, "anchors") lives in shared/
# beside the repository, never inside it.
# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so
# would every process it starts (an ignored signal stays ignored across exec): Ctrl-C tests and
# samples that interrupt their own main thread would then test nothing. Python's own handler
# here makes the processes the tests start get the default disposition again.
signal.signal(signal.SIGINT, signal.default_int_handler)

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(relative: str, *, root: Path = SHARED) -> Path:
    """`root / relative` when it exists. When it does not, the calling test fails if the
    environment variable CI is "true" (a CI run must not pass by skipping its real-data
    tests), and is skipped with the path it looked for otherwise."""
    path = root / relative
    if path.exists():
        return path
    missing = f"shared data not found: {path} (expected {relative} under {root})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{missing}; CI=true, so missing data is a failure, not a skip", pytrace=False)
    pytest.skip(missing)


@pytest.fixture(scope="session")
def shared_data() -> Callable[..., Path]:
    """`shared_data("anchors/domaineval")`: a path in ../shared, or fail/skip (see shared_path)."""
    return shared_path
