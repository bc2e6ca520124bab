"""Shared fixtures. Keep this small: helpers live in tests/helpers.py."""

from __future__ import annotations

from collections.abc import Iterator

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
