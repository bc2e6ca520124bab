"""A leaderboard file that accumulates runs: one entry per run identity, in JSON or CSV.

A run's identity is what makes two runs comparable results of the same experiment: the
benchmark's content hash, the model (backend and model name; not the endpoint URL, which
only says where it was served), the method with its options, the sampling parameters and
the task selection. Adding a run whose identity is already on the board replaces that
entry (a rerun updates its row); any other run is appended. The file format follows the
file name: `.json` (an object with `entries`) or `.csv` (one row per entry).

Ranking. Scores are comparable only between runs of the same benchmark (content hash) and
task count, sampled alike: the same n (samples per task, as the run holds them) and
temperature. On each benchmark the board ranks the runs of one such group, the one with the
most runs (ties: the larger n, then the lower temperature), by pass@1 and then accuracy,
best first; every other run of that benchmark is listed after them without a rank, its
`unranked` field saying why. Each entry carries its label (`knowbench run --label`) and the
95% bootstrap intervals of pass@1 and accuracy (knowbench.scoring.metrics).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from knowbench.errors import UserError, first_problem
from knowbench.records import SampleResult
from knowbench.scoring.metrics import score
from knowbench.store import run_label

BOARD_FORMAT = "knowbench-leaderboard"
BOARD_VERSION = 1


class BoardEntry(BaseModel):
    """One run on the board. Scores are fractions in [0, 1] (None when undefined)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    benchmark: str
    benchmark_version: str
    benchmark_hash: str
    backend: str
    model: str
    method: str
    method_options: str
    n: int
    temperature: float
    tasks: int
    samples: int
    pass_at_1: float | None
    pass_at_5: float | None
    pass_at_10: float | None
    apr: float | None
    pass_any: float | None
    accuracy: float | None
    macro_pass_at_1: float | None
    macro_pass_at_1_std: float | None
    run_dir: str
    knowbench: str
    label: str = ""
    pass_at_1_ci_low: float | None = None
    pass_at_1_ci_high: float | None = None
    accuracy_ci_low: float | None = None
    accuracy_ci_high: float | None = None
    rank: int | None = None
    unranked: str = ""

    @property
    def sampling(self) -> str:
        return f"n={self.n}, T={self.temperature:g}"

    @property
    def group(self) -> tuple[str, int, float, int]:
        """What must match for two entries to be ranked against each other."""
        return (self.benchmark_hash, self.n, self.temperature, self.tasks)


def run_identity(settings: Mapping[str, Any]) -> str:
    """A short hash of what identifies a run (see the module docstring)."""
    model = {key: value for key, value in settings.get("model", {}).items()
             if key not in ("base_url", "path")}
    identity = {
        "benchmark": settings.get("benchmark", {}).get("content_hash"),
        "model": model,
        "method": settings.get("method", {}),
        "params": settings.get("params", {}),
        "tasks": settings.get("tasks"),
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_for(run_json: Mapping[str, Any], results: Iterable[SampleResult], run_dir: str) -> BoardEntry:
    """The board entry of one stored run."""
    settings = run_json.get("settings", {})
    results = list(results)
    scores = score(results, (1, 5, 10))
    overall, macro = scores.overall, scores.macro.get("pass@1")
    model = settings.get("model", {})
    method = dict(settings.get("method", {}))
    method_name = str(method.pop("method", "?"))
    benchmark = settings.get("benchmark", {})
    params = settings.get("params", {})
    per_task = Counter(result.task_id for result in results).values()
    pass_ci, accuracy_ci = scores.ci.get("pass@1"), scores.ci.get("accuracy")
    return BoardEntry(
        run_id=run_identity(settings), benchmark=str(benchmark.get("name", "?")),
        benchmark_version=str(benchmark.get("version", "")),
        benchmark_hash=str(benchmark.get("content_hash", "")),
        backend=str(model.get("backend", "?")), model=str(model.get("model", model.get("backend", "?"))),
        method=method_name, method_options=json.dumps(method, sort_keys=True) if method else "",
        n=min(per_task) if per_task else int(params.get("n", 1)),
        temperature=float(params.get("temperature", 0.0)),
        tasks=overall.tasks, samples=overall.samples, pass_at_1=overall.pass_at.get(1),
        pass_at_5=overall.pass_at.get(5), pass_at_10=overall.pass_at.get(10), apr=overall.apr,
        pass_any=overall.pass_any, accuracy=overall.accuracy,
        macro_pass_at_1=macro.mean if macro else None, macro_pass_at_1_std=macro.std if macro else None,
        run_dir=run_dir, knowbench=str(run_json.get("knowbench", "")), label=run_label(run_json),
        pass_at_1_ci_low=pass_ci.low if pass_ci else None, pass_at_1_ci_high=pass_ci.high if pass_ci else None,
        accuracy_ci_low=accuracy_ci.low if accuracy_ci else None,
        accuracy_ci_high=accuracy_ci.high if accuracy_ci else None)



def read_board(path: Path) -> list[BoardEntry]:
    """The entries of an existing board file ([] when it does not exist)."""
    if not path.exists():
        return []
    try:
        if _format(path) == "json":
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != BOARD_FORMAT:
                raise UserError(f"{path} is not a knowbench leaderboard (no \"format\": "
                                f"\"{BOARD_FORMAT}\")\n  fix: choose another --out file")
            return [BoardEntry.model_validate(entry) for entry in data.get("entries", [])]
        with path.open(newline="") as handle:
            return [BoardEntry.model_validate(_from_csv(row)) for row in csv.DictReader(handle)]
    except (ValueError, KeyError) as error:
        raise UserError(f"{path}: cannot read the leaderboard ({first_problem(error)})\n"
                        "  fix: repair or remove the file, or choose another --out") from None


def rank(entries: Iterable[BoardEntry]) -> list[BoardEntry]:
    """The entries ranked as the module docstring says: per benchmark, the ranked group by
    score, then the others unranked (with why); benchmarks by name."""
    by_benchmark: dict[tuple[str, str], list[BoardEntry]] = {}
    for entry in entries:
        by_benchmark.setdefault((entry.benchmark, entry.benchmark_hash), []).append(entry)
    ordered: list[BoardEntry] = []
    for (name, _), members in sorted(by_benchmark.items()):
        groups = Counter(entry.group for entry in members)
        chosen = max(groups, key=lambda g: (groups[g], g[1], -g[2], g[3]))
        ranked = sorted((e for e in members if e.group == chosen), key=_by_score)
        ordered += [e.model_copy(update={"rank": index, "unranked": ""})
                    for index, e in enumerate(ranked, 1)]
        ranked_as = f"n={chosen[1]}, T={chosen[2]:g} on {chosen[3]} tasks"
        for entry in sorted((e for e in members if e.group != chosen), key=_by_score):
            why = f"sampled with {entry.sampling} on {entry.tasks} tasks; the ranked runs of {name} use {ranked_as}"
            ordered.append(entry.model_copy(update={"rank": None, "unranked": why}))
    return ordered


def _by_score(entry: BoardEntry) -> tuple[float, float, str, str, str]:
    return (-(entry.pass_at_1 if entry.pass_at_1 is not None else -1),
            -(entry.accuracy if entry.accuracy is not None else -1), entry.label or entry.model,
            entry.method, entry.run_id)


def update_board(path: Path, entries: Iterable[BoardEntry]) -> list[BoardEntry]:
    """Add `entries` to the board at `path` (replacing those with the same run_id), rank it
    (`rank`), write it back and return it."""
    board = {entry.run_id: entry for entry in read_board(path)}
    for entry in entries:
        board[entry.run_id] = entry
    ordered = rank(board.values())
    path.parent.mkdir(parents=True, exist_ok=True)
    if _format(path) == "json":
        document = {"format": BOARD_FORMAT, "version": BOARD_VERSION,
                    "entries": [entry.model_dump(mode="json") for entry in ordered]}
        path.write_text(json.dumps(document, indent=2) + "\n")
    else:
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(BoardEntry.model_fields))
            writer.writeheader()
            for entry in ordered:
                writer.writerow({key: "" if value is None else value
                                 for key, value in entry.model_dump(mode="json").items()})
    return ordered


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".csv"):
        raise UserError(f"{path}: a leaderboard is a .json or .csv file\n"
                        "  fix: pass --out board.json or --out board.csv")
    return suffix[1:]


def _from_csv(row: Mapping[str, str]) -> dict[str, Any]:
    return {key: (None if value == "" and key not in ("method_options", "benchmark_version",
                                                       "benchmark_hash", "knowbench", "label",
                                                       "unranked") else value)
            for key, value in row.items()}
