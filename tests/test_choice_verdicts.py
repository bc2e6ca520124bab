"""The choice parser against a careful reader's verdicts on KOCO-Bench's released replies.

tests/fixtures/koco_choice_verdicts.jsonl lists, by identity only (model, framework, problem
id), every released reply where knowbench's letters and KOCO's own `pred_letters` differ,
every reply cut off before it answers, and the replies that answer and then run on into
invented text, each with the letters a careful reader finds the reply answering (`verdict`,
[] for none) and why. The replies themselves stay in ../shared; the anchors hold a part of
the release, and every verdict for a reply they hold is checked here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowbench.choice import parse_choice
from koco_replies import koco_replies

VERDICTS = Path(__file__).parent / "fixtures" / "koco_choice_verdicts.jsonl"
Key = tuple[str, str, int]


def _verdicts() -> dict[Key, dict[str, Any]]:
    entries = [json.loads(line) for line in VERDICTS.read_text().splitlines() if line.strip()]
    return {(entry["model"], entry["framework"], entry["id"]): entry for entry in entries}


@pytest.fixture(scope="module")
def anchor_rows(shared_data: Callable[..., Path]) -> dict[Key, dict[str, Any]]:
    """Every released reply the anchors hold, with its options and mode, by identity."""
    return {(row["model"], row["framework"], row["id"]): row
            for row in koco_replies(shared_data("anchors/koco-qa"))}


def _ours(row: dict[str, Any]) -> list[str]:
    return parse_choice(row["pred_raw"], row["options"], row["multiple"])


def test_fixture_is_well_formed() -> None:
    verdicts = _verdicts()
    assert len(verdicts) == len(VERDICTS.read_text().splitlines())  # no identity twice
    for key, entry in verdicts.items():
        assert entry["kind"] in {"cut_off", "echo", "run_on", "answer"}, key
        assert entry["verdict"] == sorted(set(entry["verdict"])), key
        assert entry["why"].strip(), key
        assert entry["kind"] != "cut_off" or entry["verdict"] == [], key
        assert "pred_raw" not in entry, key


def test_every_disagreement_with_koco_in_the_anchors_has_a_verdict(
        anchor_rows: dict[Key, dict[str, Any]]) -> None:
    verdicts = _verdicts()
    differ = {key for key, row in anchor_rows.items() if _ours(row) != sorted(row["pred_letters"])}
    unboxed = {key for key, row in anchor_rows.items() if "\\boxed{" not in row["pred_raw"]}
    assert differ, "the anchors hold replies where KOCO's parser is wrong"
    assert not (differ | unboxed) - set(verdicts)


def test_parser_agrees_with_every_verdict_the_anchors_can_check(
        anchor_rows: dict[Key, dict[str, Any]]) -> None:
    checked, wrong = 0, []
    for key, entry in _verdicts().items():
        row = anchor_rows.get(key)
        if row is None:  # a reply of the release that the anchors do not hold
            continue
        assert sorted(row["pred_letters"]) == entry["koco_letters"], key
        checked += 1
        if "limitation" not in entry and _ours(row) != entry["verdict"]:
            wrong.append((key, _ours(row), entry["verdict"], entry["why"]))
    assert checked >= 14
    assert not wrong


def test_no_spurious_letters_on_cut_off_replies(anchor_rows: dict[Key, dict[str, Any]]) -> None:
    cut_off = [anchor_rows[key] for key, entry in _verdicts().items()
               if entry["kind"] == "cut_off" and key in anchor_rows]
    assert len(cut_off) >= 14
    assert sum(len(_ours(row)) for row in cut_off) == 0
    # KOCO's own parser guesses letters on nearly all of them
    assert sum(len(row["pred_letters"]) for row in cut_off) > len(cut_off)
