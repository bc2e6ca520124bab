"""What a tool-using method sees of a project task's tree: the project with the target withheld
and the task's tests left out.

A project task (`ProjectTask`) ships a real repository snapshot in which the target's reference
implementation is in place and the task's test files lie. `ProjectView` offers that tree to
the `list` and `read` tools, and lays out the copy that the `python` tool runs in, under these
rules (each file judged once per task, by its path relative to the project's directory):

- a target file is shown with every target's body replaced by
  `raise NotImplementedError("withheld: <qualname> is what the task asks for")` (header,
  decorators and signature kept, as the prompt shows them); with `exclude_file` it is not
  listed or readable at all (the python copy still holds the withheld version, which the
  project needs to import);
- the task's test files (`task.tests`, by path) and any file of the tree whose text is one of
  them (a copy, compared without whitespace) are neither listed nor readable, and are left out
  of the python copy;
- any other text file that holds a target's code, by the leakage control's source rule
  (`LeakageGuard.holds_source`: the reference's definition up to renaming, or text containing
  its normalised body), is neither listed nor readable and is left out of the python copy;
- `__pycache__` and `.pytest_cache` (compiled copies of anything, tests included) are never
  shown, as the samples' copies leave them out; a symlink is judged by what it points at, and
  one pointing outside the project is not followed.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from knowbench.benchmark.schema import ProjectTask
from knowbench.execution.projects import ProjectRun, withheld_targets
from knowbench.knowledge.leakage import LeakageGuard, NormalisedSource, normalise_text, squash

ROOT = "project"
"""The folder the project appears under in `list` and `read`."""
CACHES = ("__pycache__", ".pytest_cache")
TEXT_LIMIT = 2_000_000
"""Files larger than this (bytes) are listed but not read or checked: not shown."""


class Normalised:
    """Normalised texts by content hash, shared by every task's view (a project's files are the
    same for all its tasks)."""

    def __init__(self) -> None:
        self._cache: dict[str, NormalisedSource] = {}
        self._lock = threading.Lock()

    def of(self, text: str) -> NormalisedSource:
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            found = self._cache.get(key)
        if found is None:
            found = normalise_text(text)
            with self._lock:
                self._cache[key] = found
        return found


class ProjectView:
    """The project tree of one task, as the agent's tools see it (see the module docstring)."""

    def __init__(self, task: ProjectTask, guard: LeakageGuard, *, exclude_file: bool = False,
                 normalised: Normalised | None = None) -> None:
        if task.root is None:
            raise ValueError(f"project task {task.task_id} is not bound to its benchmark directory")
        self.task = task
        self.base = Path(task.root) / task.project.path  # as the samples' copies name it
        self.tree = self.base.resolve()
        self.workdir = task.project.workdir
        self.guard = guard
        self.exclude_file = exclude_file
        self.normalised = normalised or Normalised()
        self.by_workdir = withheld_targets(self.tree, self.workdir, task.project.targets)
        self.masked = {self._from_workdir(relative): text for relative, text in self.by_workdir.items()}
        self.source_rule = "target source" in guard.rules()
        self.tests = {self._from_workdir(spec.name) for spec in task.tests}
        self.test_texts = {squash(spec.code) for spec in task.tests if spec.code.strip()}
        self._reasons: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _from_workdir(self, relative: str) -> str:
        return os.path.normpath(os.path.join(self.workdir, relative)).replace(os.sep, "/")

    # --- what is withheld --------------------------------------------------------------------

    def _resolve(self, relative: str) -> Path | None:
        """The real file behind `relative` (symlinks followed), or None outside the tree."""
        try:
            real = (self.tree / relative).resolve()
        except (OSError, RuntimeError):
            return None
        return real if real == self.tree or real.is_relative_to(self.tree) else None

    def reason(self, relative: str) -> str | None:
        """Why the file at `relative` (to the tree) is not shown, or None. Cached per file."""
        with self._lock:
            if relative in self._reasons:
                return self._reasons[relative]
        found = self._reason(relative)
        with self._lock:
            self._reasons[relative] = found
        return found

    def _reason(self, relative: str) -> str | None:
        if any(part in CACHES for part in relative.split("/")):
            return "cache"
        real = self._resolve(relative)
        if real is None:
            return "outside the project"
        inside = real.relative_to(self.tree).as_posix()
        if inside != relative:  # a link: judged as what it points at
            return self.reason(inside)
        if relative in self.tests:
            return "the task's tests"
        if relative in self.masked:
            if self.exclude_file:
                return "target file"
            return "target source" if self._holds_source(self.masked[relative]) else None
        text = self._text(real)
        if text is None:
            return None
        if squash(text) in self.test_texts:
            return "a copy of the task's tests"
        if self._holds_source(text):
            return "target source"
        return None

    def _holds_source(self, text: str) -> bool:
        return self.source_rule and self.guard.holds_source(self.normalised.of(text))

    @staticmethod
    def _text(path: Path) -> str | None:
        """The file's text; None for a binary, unreadable or over-large file."""
        try:
            if not path.is_file() or path.stat().st_size > TEXT_LIMIT:
                return None
            data = path.read_bytes()
        except OSError:
            return None
        if b"\0" in data[:8192]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def files(self) -> list[str]:
        """Every file of the tree (symlinked folders not entered), relative to it, sorted."""
        found = []
        for directory, folders, names in os.walk(self.tree):
            folders[:] = sorted(name for name in folders if name not in CACHES)
            base = Path(directory).relative_to(self.tree)
            found += [(base / name).as_posix() for name in names]
        return sorted(found)

    def withheld(self) -> dict[str, str]:
        """Every file not shown, with why (what the python copy leaves out)."""
        return {relative: why for relative in self.files()
                if (why := self.reason(relative)) is not None}

    # --- the tools ------------------------------------------------------------------------------

    def list(self, folder: str) -> str | None:
        """The entries of `folder` (relative to the tree; '' for its top), folders with a '/',
        or None when there is no such folder."""
        path = self.tree / folder if folder else self.tree
        real = self._resolve(folder) if folder else self.tree
        if real is None or not path.is_dir() or any(part in CACHES for part in folder.split("/")):
            return None
        entries = []
        for entry in sorted(os.listdir(path)):
            relative = f"{folder}/{entry}" if folder else entry
            if entry in CACHES:
                continue
            target = self._resolve(relative)
            if target is not None and target.is_dir():
                entries.append(entry + "/")
            elif target is not None and self.reason(relative) is None:
                entries.append(entry)
        return "\n".join(entries)

    def read(self, relative: str) -> tuple[str | None, str]:
        """(the text shown for file `relative`, or None, why not)."""
        if not relative or self.reason(relative) is not None:
            return None, "no such file"
        real = self._resolve(relative)
        assert real is not None  # reason() refuses paths outside the tree
        if not real.is_file():
            return None, "no such file"
        inside = real.relative_to(self.tree).as_posix()
        if inside in self.masked:
            return self.masked[inside], ""
        text = self._text(real)
        if text is None:
            return None, f"not shown: a binary or over-large file ({real.stat().st_size} bytes)"
        return text, ""

    def run(self) -> ProjectRun:
        """What the engine lays out for the python tool: the project's copy with the targets
        withheld and the withheld files left out; no project tests (the snippet runs)."""
        return ProjectRun(tree=str(self.base), workdir=self.workdir,
                          python_path=self.task.project.python_path, files=self.by_workdir,
                          tests=[], omit=sorted(self.withheld()))

    def describe(self) -> dict[str, object]:
        return {"root": f"{ROOT}/", "workdir": self.workdir, "targets": sorted(self.masked)}
