"""KOCO-Bench's released multiple-choice replies joined to their problems (for the choice
parser's tests and bench/choice.py): ../shared/anchors/koco-qa, or a full release laid out the
same way (`problems/problems_<framework>_EN.json`, `results/<model>/results_<framework>.json`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def koco_replies(koco: Path) -> list[dict[str, Any]]:
    """Every released result, with `model`, `framework`, the problem's option letters
    (`options`) and whether it asks for several (`multiple`), in file order."""
    problems: dict[tuple[str, int], dict[str, Any]] = {}
    for path in koco.glob("problems/problems_*_EN.json"):
        framework = path.name.removeprefix("problems_").removesuffix("_EN.json")
        for problem in json.loads(path.read_text())["problems"]:
            problems[(framework, problem["id"])] = problem
    rows = []
    for path in sorted(koco.glob("results/*/results_*.json")):
        framework = path.stem.removeprefix("results_")
        for result in json.loads(path.read_text())["results"]:
            problem = problems[(framework, result["id"])]
            assert problem["stem"] == result["stem"] and problem["gt"] == result["gt_letters"]
            rows.append({**result, "model": path.parent.name, "framework": framework,
                         "options": re.findall(r"^- \(([A-Z])\)", problem["stem"], re.MULTILINE),
                         "multiple": "MULTIPLE" in problem["instruction"]})
    return rows
