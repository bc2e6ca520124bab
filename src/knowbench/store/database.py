"""The run database: one SQLite file per run directory (`run.sqlite`).

Every generation and every scored sample is committed as soon as it exists (WAL mode),
so a run killed at any moment, even by SIGKILL, resumes without redoing finished work.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from knowbench.errors import UserError
from knowbench.records import Generation, SampleResult

STORE_FILE = "run.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    task_id TEXT NOT NULL, sample_idx INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (task_id, sample_idx));
CREATE TABLE IF NOT EXISTS calibration (
    task_id TEXT PRIMARY KEY, reference_s REAL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS isolation (
    task_id TEXT PRIMARY KEY, mode TEXT NOT NULL, why TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reference_imports (
    task_id TEXT PRIMARY KEY, modules TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidate_imports (
    task_id TEXT PRIMARY KEY, modules TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    task_id TEXT NOT NULL, sample_idx INTEGER NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (task_id, sample_idx));
"""


class RunStore:
    """Generations and results of one run, keyed by (task_id, sample_idx). Thread-safe."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / STORE_FILE
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path}: cannot open the run store ({error})\n  fix: restore it, or start "
                            "the run over (`knowbench run ... --overwrite` on this directory)") from None
        self._lock = threading.Lock()

    def put_generation(self, generation: Generation) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO generations VALUES (?, ?, ?)",
                             (generation.task_id, generation.sample_idx, generation.model_dump_json()))

    def put_result(self, result: SampleResult) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                             (result.task_id, result.sample_idx, result.status, result.model_dump_json()))

    def put_calibration(self, task_id: str, reference_s: float | None, status: str) -> None:
        """The reference's measured runtime for a task (None when it did not pass)."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO calibration VALUES (?, ?, ?)",
                             (task_id, reference_s, status))

    def calibration(self) -> dict[str, tuple[float | None, str]]:
        with self._lock:
            rows = self._db.execute("SELECT task_id, reference_s, status FROM calibration").fetchall()
        return {task_id: (seconds, status) for task_id, seconds, status in rows}

    def put_isolation(self, task_id: str, mode: str, why: str) -> None:
        """How a task's samples are judged (split or in-process), and why not split."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO isolation VALUES (?, ?, ?)", (task_id, mode, why))

    def isolation(self) -> dict[str, tuple[str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT task_id, mode, why FROM isolation").fetchall()
        return {task_id: (mode, why) for task_id, mode, why in rows}

    def put_reference_imports(self, task_id: str, modules: Iterable[str], candidate: Iterable[str] = ()) -> None:
        """The library modules a task's reference imported as it ran (`Engine.warm`), and
        those of them its program imported in a split candidate's process."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO reference_imports VALUES (?, ?)",
                             (task_id, " ".join(modules)))
            self._db.execute("INSERT OR REPLACE INTO candidate_imports VALUES (?, ?)",
                             (task_id, " ".join(candidate)))

    def reference_imports(self, candidate: bool = False) -> dict[str, list[str]]:
        """{task id: the modules its reference imported}; with `candidate`, those its program
        imported in a split candidate's process."""
        table = "candidate_imports" if candidate else "reference_imports"
        with self._lock:
            rows = self._db.execute(f"SELECT task_id, modules FROM {table}").fetchall()
        return {task_id: modules.split() for task_id, modules in rows}

    def generations(self) -> dict[tuple[str, int], Generation]:
        with self._lock:
            rows = self._db.execute("SELECT record FROM generations").fetchall()
        return {(g.task_id, g.sample_idx): g for g in (Generation.model_validate_json(r[0]) for r in rows)}

    def results(self) -> dict[tuple[str, int], SampleResult]:
        with self._lock:
            rows = self._db.execute("SELECT record FROM results").fetchall()
        return {(s.task_id, s.sample_idx): s for s in (SampleResult.model_validate_json(r[0]) for r in rows)}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
