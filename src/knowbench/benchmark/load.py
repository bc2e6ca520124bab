"""Reading and writing benchmark directories, with errors a person can act on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, Manifest, ProjectTask, Task
from knowbench.errors import BenchmarkError, validation_problem

MANIFEST_FILE = "benchmark.json"
TASKS_FILE = "tasks.jsonl"

_task_adapter: TypeAdapter[FunctionTask | ChoiceTask] = TypeAdapter(Task)


@dataclass(frozen=True)
class Benchmark:
    """A loaded, validated benchmark."""

    path: Path
    manifest: Manifest
    tasks: list[FunctionTask | ChoiceTask]
    content_hash: str
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.manifest.name

    def task(self, task_id: str) -> FunctionTask | ChoiceTask:
        for task in self.tasks:
            if task.task_id == task_id:
                return task
        raise KeyError(task_id)


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """'sha256:<hex>' of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def load_benchmark(path: str | Path) -> Benchmark:
    """Load and validate the benchmark directory at `path`.

    Raises `BenchmarkError` naming the file, line and field of the first problem found.
    """
    root = Path(path)
    if not root.is_dir():
        hint = "pass a directory holding benchmark.json and tasks.jsonl"
        if root.is_file() and root.name in (MANIFEST_FILE, TASKS_FILE):
            hint = f"pass the directory {root.parent}, not the file inside it"
        raise BenchmarkError(str(root), "not a benchmark directory", hint=hint)
    manifest_path, tasks_path = root / MANIFEST_FILE, root / TASKS_FILE
    for required in (manifest_path, tasks_path):
        if required.is_dir():
            raise BenchmarkError(str(required), "is a directory, not a file",
                                 hint="see docs/format.md for the files a benchmark holds")
        if not required.is_file():
            raise BenchmarkError(str(required), "file is missing",
                                 hint="see docs/format.md for the files a benchmark holds")
    manifest_bytes, tasks_bytes = manifest_path.read_bytes(), tasks_path.read_bytes()
    manifest = _parse_manifest(manifest_path, manifest_bytes)
    tasks = _parse_tasks(tasks_path, tasks_bytes, manifest)
    warnings = []
    recorded = manifest.provenance.hashes.get(TASKS_FILE)
    if recorded and recorded != sha256_bytes(tasks_bytes):
        warnings.append(f"{tasks_path} differs from the hash recorded in provenance "
                        "(edited after the build?); scores will carry the new content hash")
    content = manifest_bytes + b"\0" + tasks_bytes
    trees: dict[str, str] = {}
    for number, task in enumerate(tasks, start=1):
        if isinstance(task, ProjectTask):
            task.bind(root)
            if task.project.path not in trees:
                trees[task.project.path] = _tree_hash(root, task.project.path, tasks_path, number)
    for name in sorted(trees):  # a project's files decide its tasks' scores as much as the tests
        content += f"\0{name}\0{trees[name]}".encode()
    content_hash = sha256_bytes(content)
    return Benchmark(root, manifest, tasks, content_hash, warnings)


def _tree_hash(root: Path, relative: str, tasks_path: Path, number: int) -> str:
    """'sha256:<hex>' of a project tree: every file's path and bytes, in path order."""
    tree = root / relative
    if not tree.is_dir():
        raise BenchmarkError(str(tasks_path), f"project directory {relative!r} does not exist "
                             f"under {root}", line=number, field="project.path",
                             hint="ship the project tree inside the benchmark directory")
    digest = hashlib.sha256()
    for file in sorted(path for path in tree.rglob("*") if path.is_file() and not path.is_symlink()):
        if "__pycache__" in file.parts:
            continue
        digest.update(file.relative_to(tree).as_posix().encode() + b"\0")
        digest.update(sha256_file(file).encode() + b"\0")
    return "sha256:" + digest.hexdigest()


def _parse_manifest(path: Path, data: bytes) -> Manifest:
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        line = getattr(error, "lineno", None)
        raise BenchmarkError(str(path), f"invalid JSON: {_json_reason(error)}", line=line,
                             hint="fix the JSON syntax") from None
    if not isinstance(raw, dict):
        raise BenchmarkError(str(path), "must hold a JSON object")
    try:
        return Manifest.model_validate(raw)
    except ValidationError as error:
        raise _from_validation(str(path), None, error) from None


def _parse_tasks(path: Path, data: bytes, manifest: Manifest) -> list[FunctionTask | ChoiceTask]:
    tasks: list[FunctionTask | ChoiceTask] = []
    first_line: dict[str, int] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise BenchmarkError(str(path), f"is not UTF-8 text (byte {data[error.start]:#04x})", line=line,
                             hint="save the file as UTF-8") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            raise BenchmarkError(str(path), f"invalid JSON: {_json_reason(error)}", line=number,
                                 hint="each line must be one complete JSON object") from None
        if not isinstance(raw, dict):
            raise BenchmarkError(str(path), "each line must be a JSON object", line=number)
        raw.setdefault("kind", "function")
        try:
            task = _task_adapter.validate_python(raw)
        except ValidationError as error:
            raise _from_validation(str(path), number, error) from None
        if task.task_id in first_line:
            raise BenchmarkError(str(path), f"duplicate task_id '{task.task_id}' "
                                 f"(first used on line {first_line[task.task_id]})",
                                 line=number, field="task_id", hint="give every task a unique task_id")
        if manifest.domains and task.domain not in manifest.domains:
            raise BenchmarkError(str(path), f"domain '{task.domain}' is not listed in "
                                 f"{MANIFEST_FILE} domains {manifest.domains}", line=number,
                                 field="domain", hint=f"add it to 'domains' in {MANIFEST_FILE}")
        first_line[task.task_id] = number
        tasks.append(task)
    if not tasks:
        raise BenchmarkError(str(path), "holds no tasks", hint="add one JSON task per line")
    return tasks


def _json_reason(error: Exception) -> str:
    return getattr(error, "msg", None) or str(error)


def _from_validation(path: str, line: int | None, error: ValidationError) -> BenchmarkError:
    problem = validation_problem(error, skip=("function", "choice", "project"))
    assert problem is not None
    field_name = problem.field or None
    if problem.kind == "missing":
        hint = f"add the field '{field_name}'"
    elif problem.kind == "extra_forbidden":
        hint = "remove it, or move free-form data under 'metadata'"
    elif problem.kind == "union_tag_invalid":
        hint = "'kind' must be 'function', 'choice' or 'project'"
    else:
        hint = "see docs/format.md for what this field holds"
    return BenchmarkError(path, problem.message + problem.suffix("on this record"), line=line,
                          field=field_name, hint=hint)


def write_benchmark(path: str | Path, manifest: Manifest,
                    tasks: Iterable[FunctionTask | ChoiceTask]) -> Benchmark:
    """Write a benchmark directory, recording the tasks' content hash in the manifest."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    lines = [task.model_dump_json(exclude_none=True) for task in tasks]
    tasks_bytes = ("\n".join(lines) + "\n").encode()
    hashes = {**manifest.provenance.hashes, TASKS_FILE: sha256_bytes(tasks_bytes)}
    provenance = manifest.provenance.model_copy(update={"hashes": hashes})
    manifest = manifest.model_copy(update={"provenance": provenance})
    (root / TASKS_FILE).write_bytes(tasks_bytes)
    (root / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2) + "\n")
    return load_benchmark(root)
