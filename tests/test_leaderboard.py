"""Leaderboard files accumulate runs and update a run's entry by its identity."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from diagnosis_helpers import sample, settings, store_run
from knowbench.errors import UserError
from knowbench.report.leaderboard import entry_for, read_board, run_identity, update_board
from knowbench.store import RunDirectory


def _entry(run_dir: Path):
    run = RunDirectory.open(run_dir)
    return entry_for(run.document(), run.results(), str(run_dir))


def _runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    good = store_run(tmp_path / "good", [sample("a", True), sample("b", True)], settings(model="good"))
    bad = store_run(tmp_path / "bad", [sample("a", False), sample("b", True)], settings(model="bad"))
    rerun = store_run(tmp_path / "good-again", [sample("a", True), sample("b", False)],
                      settings(model="good"))
    return good, bad, rerun


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_runs_accumulate_and_a_rerun_replaces_its_entry(tmp_path: Path, suffix: str) -> None:
    good, bad, rerun = _runs(tmp_path)
    board_path = tmp_path / f"board{suffix}"
    update_board(board_path, [_entry(good)])
    board = update_board(board_path, [_entry(bad)])
    assert [e.model for e in board] == ["good", "bad"]  # best pass@1 first
    board = update_board(board_path, [_entry(rerun)])
    assert len(board) == 2
    assert {e.model: e.pass_at_1 for e in board} == {"good": 0.5, "bad": 0.5}
    assert next(e for e in board if e.model == "good").run_dir == str(rerun)
    assert read_board(board_path) == board


def test_json_and_csv_boards_hold_the_same_entries(tmp_path: Path) -> None:
    good, bad, _ = _runs(tmp_path)
    entries = [_entry(good), _entry(bad)]
    as_json = update_board(tmp_path / "b.json", entries)
    as_csv = update_board(tmp_path / "b.csv", entries)
    assert as_json == as_csv == read_board(tmp_path / "b.csv") == read_board(tmp_path / "b.json")
    document = json.loads((tmp_path / "b.json").read_text())
    assert document["format"] == "knowbench-leaderboard" and len(document["entries"]) == 2
    with (tmp_path / "b.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["pass_at_1"] == "1.0" and rows[0]["pass_at_5"] == ""


def test_identity_ignores_the_endpoint_but_not_the_method_or_sampling() -> None:
    base = settings()
    moved = settings()
    moved["model"]["base_url"] = "http://elsewhere:8000/v1"
    other_method = settings(method="rag-bm25")
    hotter = settings()
    hotter["params"]["temperature"] = 0.8
    assert run_identity(base) == run_identity(moved)
    assert len({run_identity(base), run_identity(other_method), run_identity(hotter)}) == 3


def test_a_file_that_is_not_a_board_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"something": "else"}')
    with pytest.raises(UserError, match="not a knowbench leaderboard"):
        update_board(other, [])
    with pytest.raises(UserError, match=r"\.json or \.csv"):
        update_board(tmp_path / "board.txt", [])


def test_only_runs_sampled_alike_are_ranked_and_the_others_say_why(tmp_path: Path) -> None:
    greedy = settings(model="lucky-greedy")
    sampled = settings(model="steady")
    sampled["params"].update({"n": 3, "temperature": 0.8})
    other = settings(model="other")
    other["params"].update({"n": 3, "temperature": 0.8})
    runs = [
        store_run(tmp_path / "greedy", [sample("a", True), sample("b", True)], greedy),
        store_run(tmp_path / "steady", [sample(t, i < 2, idx=i) for t in "ab" for i in range(3)], sampled),
        store_run(tmp_path / "other", [sample(t, i < 1, idx=i) for t in "ab" for i in range(3)], other),
    ]
    board = update_board(tmp_path / "board.json", [_entry(run) for run in runs])
    assert [(e.model, e.n, e.temperature, e.rank) for e in board] == [
        ("steady", 3, 0.8, 1), ("other", 3, 0.8, 2), ("lucky-greedy", 1, 0.0, None)]
    assert "sampled with n=1, T=0" in board[2].unranked and "n=3, T=0.8" in board[2].unranked
    assert read_board(tmp_path / "board.json") == board
    assert update_board(tmp_path / "board.csv", board) == board


def test_replay_runs_keep_their_labels_and_separate_identities(tmp_path: Path) -> None:
    entries = []
    for name in ("gpt-4o-mini.jsonl", "qwen-7b.jsonl"):
        replay = settings()
        replay["model"] = {"backend": "replay", "path": f"/samples/{name}", "file": name}
        entries.append(_entry(store_run(tmp_path / name, [sample("a", True)], replay)))
    board = update_board(tmp_path / "board.json", entries)
    assert sorted(e.label for e in board) == ["replay:gpt-4o-mini.jsonl · none", "replay:qwen-7b.jsonl · none"]


def test_the_leaderboard_command_shows_sampling_intervals_and_unranked_runs(tmp_path: Path) -> None:
    import os

    from helpers import run_knowbench

    sampled = settings(model="steady")
    sampled["params"].update({"n": 2, "temperature": 0.8})
    runs = [store_run(tmp_path / "greedy", [sample("a", True), sample("b", False)], settings(model="g")),
            store_run(tmp_path / "s1", [sample(t, True, idx=i) for t in "ab" for i in range(2)], sampled)]
    done = run_knowbench("leaderboard", *map(str, runs), "--out", str(tmp_path / "board.json"),
                         env={**os.environ, "COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert "n=2, T=0.8" in done.stdout and "[100.0, 100.0]" in done.stdout
    assert "not ranked: g · none" in done.stdout and "sampled with n=1, T=0" in done.stdout
