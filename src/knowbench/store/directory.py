"""A run directory and every file in it.

    run.json          settings (what determines the results), the endpoint and other details
                      that do not, versions, engine, environment
    run.lock          held (flock) by the process running in the directory; holds its pid
    run.sqlite        generations, scored samples, calibration and isolation decisions, the
                      library modules each reference imported
                      (`RunStore`), committed as they happen
    samples.jsonl     one scored sample per line, written from the database at the end
    summary.json      scores, status counts, isolation share and the self-check verdict
    diagnoses.jsonl   one failure diagnosis per failed function sample (`knowbench diagnose`)

`RunDirectory` is the only code that knows these names and formats: `knowbench run` writes
through it, and diagnosis, reports, comparisons and leaderboards read through it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.records import SampleResult
from knowbench.scoring.taxonomy import Diagnosis
from knowbench.store.database import STORE_FILE, RunStore

RUN_FILE = "run.json"
SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
DIAGNOSES_FILE = "diagnoses.jsonl"
LOCK_FILE = "run.lock"
_RUN_FILES = (RUN_FILE, RUN_FILE + ".partial", SAMPLES_FILE, SUMMARY_FILE, DIAGNOSES_FILE,
              STORE_FILE, STORE_FILE + "-wal", STORE_FILE + "-shm")


class RunDirectory:
    """The files of one run in `path`.

    `RunDirectory(path)` names a directory without checking it; `open` is for a run that
    must already exist and `prepare` for a run about to start or resume.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock: int | None = None  # the locked file's descriptor, while this object holds it

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    # ------------------------------------------------------------------ life cycle

    @classmethod
    def open(cls, path: Path) -> RunDirectory:
        """An existing run. Raises `UserError` naming `path` when it holds no run."""
        run = cls(path)
        if not run.run_file.is_file() or not run.store_file.is_file():
            raise UserError(f"{run.path}: not a knowbench run directory (no {RUN_FILE} / {STORE_FILE})")
        return run

    @classmethod
    def prepare(cls, path: Path, settings: Mapping[str, Any], *, overwrite: bool = False,
                not_identity: Mapping[str, Collection[str]] | None = None,
                added: Mapping[str, Any] | None = None) -> RunDirectory:
        """A directory ready for a run with `settings` (JSON-ready, as `run.json` stores them),
        locked for this process until `release()` (see `lock`).

        A new or empty directory is created; one holding a run with the same settings is kept
        as it is, so the run resumes; `overwrite` first deletes every run file in it. Raises
        `UserError` when another process holds the directory, when it holds a run with other
        settings, or files that are not a run's, and `overwrite` is false. `not_identity` maps
        a settings key to fields that older versions stored inside it but that no longer
        decide whether a run resumes (e.g. {"model": ["base_url"]}); they are left out of the
        comparison. `added` maps a settings key that older versions did not store to the value
        their runs had (e.g. {"learn": True}): a run without the key resumes under that value.
        """
        run = cls(path)
        if run.path.exists() and not run.run_file.is_file():
            # `overwrite` starts a run over, and may clear what a run killed before its run.json
            # left; never someone else's files (a benchmark's, a model's replies).
            kept = (LOCK_FILE, RUN_FILE + ".partial") if not overwrite else (LOCK_FILE, *_RUN_FILES)
            foreign = sorted(entry.name for entry in run.path.iterdir() if entry.name not in kept)
            if foreign:
                raise UserError(f"{run.path} exists and is not a knowbench run directory (it holds "
                                f"{', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''})\n"
                                "  fix: choose an empty or new --out directory")
        run.path.mkdir(parents=True, exist_ok=True)
        run.lock()
        try:
            if overwrite:
                for name in _RUN_FILES:
                    (run.path / name).unlink(missing_ok=True)
            if run.run_file.is_file():
                previous = {**(added or {}), **run.settings()}
                for key, fields in (not_identity or {}).items():
                    if isinstance(previous.get(key), dict):
                        previous[key] = {name: value for name, value in previous[key].items()
                                         if name not in fields}
                differences = [key for key in settings if previous.get(key) != settings[key]]
                if differences:
                    detail = "; ".join(f"{key}: {previous.get(key)} -> {settings[key]}"
                                       for key in differences)
                    raise UserError(f"{run.path} holds a run with different settings ({detail})\n"
                                    "  fix: pass --overwrite to start over, or choose another --out")
        except BaseException:
            run.release()
            raise
        return run

    def lock(self) -> None:
        """Take the directory for this process (an exclusive flock on `run.lock`, holding the
        pid), so that two runs never work in one directory at once. Raises `UserError` at once,
        naming the holder's pid, when another process holds it. The kernel drops the lock when
        its holder exits, however it exits, so a killed run never blocks the next one."""
        if self._lock is not None:
            return
        descriptor = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 64).decode(errors="replace").strip() or "unknown"
            os.close(descriptor)
            raise UserError(f"{self.path} is in use by another knowbench run (pid {holder})\n"
                            "  fix: wait for it to finish (or stop it, e.g. `kill "
                            f"{holder}`), then run the same command to resume; to run "
                            "something else now, choose another --out") from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        self._lock = descriptor

    def release(self) -> None:
        """Give up the lock taken by `lock` (or `prepare`); nothing when not held."""
        if self._lock is not None:
            os.close(self._lock)  # closing the last descriptor drops the flock
            self._lock = None

    # ------------------------------------------------------------------ files

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def store_file(self) -> Path:
        return self.path / STORE_FILE

    @property
    def samples_file(self) -> Path:
        return self.path / SAMPLES_FILE

    @property
    def summary_file(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def diagnoses_file(self) -> Path:
        return self.path / DIAGNOSES_FILE

    # ------------------------------------------------------------------ settings

    def document(self) -> dict[str, Any]:
        """Everything `run.json` holds: "settings", versions, engine, environment. `UserError`
        naming the file and the place where it is not a run's (damaged, or edited by hand)."""
        try:
            document = json.loads(self.run_file.read_text())
        except json.JSONDecodeError as error:
            raise UserError(f"{self.run_file}:{error.lineno}:{error.colno}: not JSON ({error.msg}); "
                            f"restore it, or run again into a new directory") from None
        except UnicodeDecodeError:
            raise UserError(f"{self.run_file}: not UTF-8 text; restore it, or run again into a new directory") from None
        if not isinstance(document, dict) or not isinstance(document.get("settings", {}), dict):
            raise UserError(f"{self.run_file}: not a run's run.json (an object with \"settings\"); restore it, "
                            f"or run again into a new directory")
        return document

    def settings(self) -> dict[str, Any]:
        """The settings that determine the run's results (`run.json` "settings")."""
        return self.document().get("settings", {})

    def write_document(self, document: Mapping[str, Any]) -> None:
        # Whole or not at all: a run killed while it writes keeps the file it had.
        partial = self.run_file.with_name(self.run_file.name + ".partial")
        try:
            partial.write_text(json.dumps(document, indent=2) + "\n")
            partial.replace(self.run_file)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------------ the run database

    def store(self) -> RunStore:
        """The run database, created when missing; the caller closes it (or uses `with`)."""
        return RunStore(self.path)

    def results(self) -> list[SampleResult]:
        """Every scored sample in the database, by task id and sample index."""
        with self.store() as store:
            return sorted(store.results().values(), key=lambda r: (r.task_id, r.sample_idx))

    def calibration(self) -> dict[str, tuple[float | None, str]]:
        """task id -> (the reference's runtime on this host or None, the reference's status)."""
        with self.store() as store:
            return store.calibration()

    def isolation(self) -> dict[str, tuple[str, str]]:
        """task id -> (how its samples were judged, why not split)."""
        with self.store() as store:
            return store.isolation()

    # ------------------------------------------------------------------ outputs

    def write_samples(self, results: Iterable[SampleResult]) -> None:
        with self.samples_file.open("w") as handle:
            for result in results:
                handle.write(result.model_dump_json() + "\n")

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        self.summary_file.write_text(json.dumps(summary, indent=2) + "\n")

    def summary(self) -> dict[str, Any]:
        """`summary.json`; raises `UserError` when the run has not written one yet."""
        if not self.summary_file.is_file():
            raise UserError(f"{self.path}: no {SUMMARY_FILE} yet\n"
                            f"  fix: finish the run, or run `knowbench score {self.path}`")
        return json.loads(self.summary_file.read_text())

    # ------------------------------------------------------------------ diagnoses

    def diagnoses(self) -> list[Diagnosis]:
        """The stored diagnoses; lines that are not a valid diagnosis are skipped."""
        if not self.diagnoses_file.is_file():
            return []
        found = []
        for line in self.diagnoses_file.read_text().splitlines():
            try:
                found.append(Diagnosis.model_validate_json(line))
            except (ValidationError, json.JSONDecodeError):
                continue
        return found

    def write_diagnoses(self, diagnoses: Iterable[Diagnosis]) -> Path:
        """Replace the stored diagnoses; returns the file written."""
        with self.diagnoses_file.open("w") as handle:
            for diagnosis in diagnoses:
                handle.write(diagnosis.model_dump_json() + "\n")
        return self.diagnoses_file

    # ------------------------------------------------------------------ the benchmark

    def tasks(self) -> dict[str, FunctionTask | ChoiceTask]:
        """The tasks of the benchmark the run used, when its directory still exists and its
        content hash still matches; {} otherwise (reports then omit instructions and
        reference diffs)."""
        benchmark = self.settings().get("benchmark", {})
        path = benchmark.get("path")
        if not path or not Path(path).is_dir():
            return {}
        try:
            loaded = load_benchmark(Path(path))
        except UserError:
            return {}
        if benchmark.get("content_hash") and loaded.content_hash != benchmark["content_hash"]:
            return {}
        return {task.task_id: task for task in loaded.tasks}
