"""Reference checks shared between runs (`$KNOWBENCH_HOME/calibration.sqlite`).

Before its samples, a run executes every function task's reference once: whether it passes
split decides how the task is judged, and its runtime calibrates the time limit. The outcome
is a function of the task, the benchmark's limits, the engine (sandbox, interpreter, the
packages of its environment), the isolation policy, knowbench's own code and the host, so
it is kept under a key made of all of them (`CalibrationKey`): a later run with the same key
reuses it instead of executing every reference again; anything else measures afresh. Each
run still stores the checks it used in its own database. Concurrent runs may share the file
(SQLite, WAL mode); a failed write only costs a later measurement.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CALIBRATION_FILE = "calibration.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    key TEXT NOT NULL, task_id TEXT NOT NULL, reference_s REAL, status TEXT NOT NULL,
    mode TEXT NOT NULL, why TEXT NOT NULL, PRIMARY KEY (key, task_id));
CREATE TABLE IF NOT EXISTS imports (
    key TEXT NOT NULL, task_id TEXT NOT NULL, modules TEXT NOT NULL, PRIMARY KEY (key, task_id));
CREATE TABLE IF NOT EXISTS candidate_imports (
    key TEXT NOT NULL, task_id TEXT NOT NULL, modules TEXT NOT NULL, PRIMARY KEY (key, task_id));
"""


@dataclass(frozen=True)
class ReferenceCheck:
    """One task's reference check: its runtime when it passed (else None), its status, the
    isolation its samples get (with why not split), the library modules it imported as it
    ran (`Engine.warm`), and those its program imported in a split candidate's process."""

    reference_s: float | None
    status: str
    mode: str
    why: str
    imports: tuple[str, ...] = ()
    candidate_imports: tuple[str, ...] = ()


def calibration_key(parts: Mapping[str, Any]) -> str:
    """The key of reference checks made under `parts` (JSON-ready: benchmark hash, engine,
    environment, limits, isolation policy), with knowbench's code and the host added."""
    document = {**parts, "knowbench_code": source_digest(), "host": host_fingerprint()}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


@cache
def source_digest() -> str:
    """A digest of knowbench's own source files: a changed runner invalidates old checks."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@cache
def host_fingerprint() -> dict[str, Any]:
    """What of the host changes runtimes: processor model and count, memory, kernel."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    return {"machine": platform.machine(), "cpu": model, "cpus": os.cpu_count(),
            "memory_gib": round(memory / 2**30), "kernel": platform.release()}


class CalibrationCache:
    """The reference checks stored under `key` in `directory`/calibration.sqlite; with
    `reuse` False none is read (they are measured again) but new ones are still stored."""

    def __init__(self, directory: Path, key: str, *, reuse: bool = True) -> None:
        self.path = Path(directory) / CALIBRATION_FILE
        self.key = key
        self.reuse = reuse

    def get(self, task_ids: Iterable[str]) -> dict[str, ReferenceCheck]:
        """The stored checks of `task_ids` (tasks without one are left out)."""
        wanted = set(task_ids)
        if not self.reuse or not self.path.is_file() or not wanted:
            return {}
        try:
            with closing(self._connect()) as db:
                rows = db.execute("SELECT c.task_id, reference_s, status, mode, why, i.modules, p.modules "
                                  "FROM checks c "
                                  "LEFT JOIN imports i ON i.key = c.key AND i.task_id = c.task_id "
                                  "LEFT JOIN candidate_imports p ON p.key = c.key AND p.task_id = c.task_id "
                                  "WHERE c.key = ?", (self.key,)).fetchall()
        except sqlite3.Error:
            return {}  # unreadable: measure again
        return {task_id: ReferenceCheck(seconds, status, mode, why, tuple((modules or "").split()),
                                        tuple((candidate or "").split()))
                for task_id, seconds, status, mode, why, modules, candidate in rows if task_id in wanted}

    def put(self, task_id: str, check: ReferenceCheck) -> None:
        try:
            with closing(self._connect()) as db, db:
                db.execute("INSERT OR REPLACE INTO checks VALUES (?, ?, ?, ?, ?, ?)",
                           (self.key, task_id, check.reference_s, check.status, check.mode, check.why))
                db.execute("INSERT OR REPLACE INTO imports VALUES (?, ?, ?)",
                           (self.key, task_id, " ".join(check.imports)))
                db.execute("INSERT OR REPLACE INTO candidate_imports VALUES (?, ?, ?)",
                           (self.key, task_id, " ".join(check.candidate_imports)))
        except sqlite3.Error:
            pass  # a cache: the run keeps its own copy

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_SCHEMA)
        return db
