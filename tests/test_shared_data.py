"""The `shared_data` fixture: real data is found in ../shared beside the repository, and its
absence fails a CI run instead of silently skipping the tests that need it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


def test_present_data_is_returned(shared_data: Callable[..., Path], tmp_path: Path) -> None:
    (tmp_path / "anchors" / "x").mkdir(parents=True)
    assert shared_data("anchors/x", root=tmp_path) == tmp_path / "anchors" / "x"


def test_missing_data_fails_when_ci_is_true(shared_data: Callable[..., Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true") as failed:
        shared_data("anchors/missing", root=tmp_path)
    assert str(tmp_path / "anchors" / "missing") in str(failed.value)


def test_missing_data_skips_with_the_path_outside_ci(shared_data: Callable[..., Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for ci in (None, "false", ""):
        if ci is None:
            monkeypatch.delenv("CI", raising=False)
        else:
            monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.skip.Exception) as skipped:
            shared_data("anchors/missing", root=tmp_path)
        assert str(tmp_path / "anchors" / "missing") in str(skipped.value)


def test_the_default_root_is_shared_beside_the_repository(shared_data: Callable[..., Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    relative = "no-such-data-6c1f"
    with pytest.raises(pytest.skip.Exception) as skipped:
        shared_data(relative)
    assert str(REPOSITORY.parent / "shared" / relative) in str(skipped.value)
