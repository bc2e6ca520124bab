"""Import KOCO-Bench's core-function tasks (its "spec format") as project tasks.

A KOCO project folder holds `code/` (the real project, reference implementations in place,
KOCO's tests in `code/test_code/`) and `requirements/` (`01_*` project overview, `02_*`
module division, `03_*` one `# FUNCTION:` block per task). Each block names the target by a
line span (`code/<path>.py:line A-B`) and a test file. The importer turns the span into the
qualified name of the function defined there, once, by syntax tree; from then on knowbench
finds the target by name (`ProjectTask`, docs/format.md), never by line.

Certification (`certify_projects`) runs each task with the reference (the project's own code)
and with a stub (an empty reply: every target raises NotImplementedError): a task is kept
when the reference passes every test and the stub fails at least one. When the named tests
cannot tell the stub apart, the other test files of the project are run too, and the tests
that pass on the reference and fail on the stub are added to the task (`tests_added`).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowbench.benchmark.load import Benchmark, write_benchmark
from knowbench.benchmark.schema import (
    Manifest,
    ProjectDocument,
    ProjectRef,
    ProjectTarget,
    ProjectTask,
    Provenance,
    TestSpec,
    source_metadata,
)
from knowbench.errors import UserError
from knowbench.jsonl import load_json
from knowbench.parsing import parse_python

# The headings of a block, English and Chinese (KOCO-bench-ch), as the fields they fill.
_HEADINGS = {
    "function overview": "overview", "功能概述": "overview",
    "function signature": "signature", "函数签名": "signature",
    "input parameters": "parameters", "输入参数": "parameters",
    "detailed description": "description", "详细描述": "description",
    "output": "output", "输出": "output",
    "function implementation": "location", "函数实现": "location",
    "test code": "test", "测试代码": "test",
}
_LOCATION = re.compile(r"^(?P<path>[^:]+\.py):\s*line\s*(?P<first>\d+)\s*-\s*(?P<last>\d+)\s*$")
_FENCE = re.compile(r"^\s*```")


@dataclass
class SpecBlock:
    """One `# FUNCTION:` block, as written (only backticks and `\\` separators normalised)."""

    name: str
    line: int
    sections: dict[str, str] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)  # headings KOCO's parser does not know

    def text(self, key: str) -> str:
        return self.sections.get(key, "").strip()


def parse_spec(path: Path) -> list[SpecBlock]:
    """The blocks of a `03_*.md` file. Raises `UserError` naming the file and line of a block
    that lacks its implementation location or test path."""
    blocks: list[SpecBlock] = []
    current: SpecBlock | None = None
    heading: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("# FUNCTION:"):
            current = SpecBlock(name=line.removeprefix("# FUNCTION:").strip(), line=number)
            blocks.append(current)
            heading = None
            continue
        if current is None:
            continue
        if line.strip() == "---" and heading is not None:
            heading = None
            continue
        if line.startswith("## "):
            title = line[3:].strip()
            heading = _HEADINGS.get(title.lower(), title)
            if heading not in _HEADINGS.values():
                current.extra.setdefault(heading, "")
            continue
        if heading is None:
            continue
        target = current.sections if heading in _HEADINGS.values() else current.extra
        target[heading] = target.get(heading, "") + line + "\n"
    for block in blocks:
        for key, what in (("location", "## Function Implementation"), ("test", "## Test Code")):
            if not _one_path(block.text(key)):
                raise UserError(f"{path}:{block.line}: FUNCTION {block.name} has no {what} line\n"
                                "  fix: each block needs `code/<path>.py:line A-B` and "
                                "`code/test_code/<file>.py`")
    return blocks


def _one_path(text: str) -> str:
    """A location as KOCO writes it, normalised: backticks stripped, `\\` turned into `/`."""
    lines = [line.strip().strip("`").strip() for line in text.splitlines() if line.strip()]
    return lines[0].replace("\\", "/") if lines else ""


def _signature(block: SpecBlock) -> str:
    lines = [line for line in block.text("signature").splitlines() if not _FENCE.match(line)]
    return "\n".join(lines).strip()


@dataclass(frozen=True)
class Located:
    """A span resolved: the file (relative to code/), the qualified name and its definition."""

    file: str
    qualname: str
    span: tuple[int, int]  # the definition's lines in the file (decorators included), by AST
    definition: str  # the definition's source, decorators included, dedented
    masked: str  # the header with body `...`, inside its classes


def locate(code_dir: Path, location: str, name: str) -> Located:
    """The function that a KOCO location (`code/<path>.py:line A-B`) points at.

    Among the functions and methods (not nested in another function) whose `def` line lies
    in the span, the one named like the block's last name component wins, else the one that
    covers the most of the span. Raises `UserError` when the span holds none."""
    match = _LOCATION.match(_one_path(location))
    if not match:
        raise UserError(f"implementation location {location.strip()!r} is not "
                        "`code/<path>.py:line A-B`")
    relative = match["path"].removeprefix("code/")
    first, last = int(match["first"]), int(match["last"])
    file = code_dir / relative
    if not file.is_file():
        raise UserError(f"implementation location {location.strip()!r}: {file} does not exist")
    source = file.read_text(encoding="utf-8")
    tree = parse_python(source)
    candidates: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(body: list[ast.stmt], owners: list[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, [*owners, node.name])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                candidates.append((".".join([*owners, node.name]), node))

    walk(tree.body, [])
    inside = [(q, n) for q, n in candidates if first <= n.lineno <= last]
    if not inside:
        raise UserError(f"implementation location {location.strip()!r}: no function's def line "
                        f"lies in lines {first}-{last} of {relative}")
    wanted = name.rsplit(".", 1)[-1]
    named = [(q, n) for q, n in inside if n.name == wanted]

    def overlap(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        return min(last, node.end_lineno or node.lineno) - max(first, node.lineno)

    qualname, node = (named or sorted(inside, key=lambda pair: -overlap(pair[1])))[0]
    lines = source.splitlines(keepends=True)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    definition = textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
    header = textwrap.dedent("".join(lines[start - 1:node.body[0].lineno - 1]) or
                             lines[node.lineno - 1][:node.body[0].col_offset] + "\n")
    masked = header.rstrip() + "\n    ...\n"
    owners = qualname.split(".")[:-1]
    for owner in reversed(owners):
        definition = f"class {owner}:\n" + textwrap.indent(definition, "    ")
        masked = f"class {owner}:\n" + textwrap.indent(masked, "    ")
    return Located(relative, qualname, (start, node.end_lineno or node.lineno), definition, masked)


def _instruction(block: SpecBlock, framework: str, description: str, method: bool) -> str:
    parts = [f"You are a Python programmer developing with the {framework} framework. {description}".strip(),
             f"Function name: {block.name}"]
    for title, key in (("Overview", "overview"), ("Input parameters", "parameters"),
                       ("Detailed description", "description"), ("Expected output", "output")):
        if block.text(key):
            parts.append(f"{title}:\n{block.text(key)}")
    for title, text in block.extra.items():
        if text.strip():
            parts.append(f"{title}:\n{text.strip()}")
    signature = _signature(block)
    if signature:
        parts.append(f"Signature:\n```python\n{signature}\n```")
    parts.append("Write the complete function, its def line included"
                 + (" (a method: keep `self`)." if method else "."))
    return "\n\n".join(parts)


@dataclass
class ProjectSource:
    """A KOCO project folder and what surrounds it."""

    folder: Path  # .../<framework>/test_examples/<project>
    framework: str
    corpus: Path | None  # .../<framework>/knowledge_corpus

    @property
    def name(self) -> str:
        return self.folder.name


def find_project(folder: Path) -> ProjectSource:
    folder = folder.resolve()
    if not (folder / "code").is_dir() or not (folder / "requirements").is_dir():
        raise UserError(f"{folder} is not a KOCO project folder\n  fix: pass "
                        ".../<framework>/test_examples/<project>, holding code/ and requirements/")
    if not list((folder / "requirements").glob("03_*.md")):
        raise UserError(f"{folder / 'requirements'} has no 03_*.md (the core-function descriptions)")
    framework = folder.parent.parent.name if folder.parent.name == "test_examples" else folder.parent.name
    corpus = folder.parent.parent / "knowledge_corpus" if folder.parent.name == "test_examples" else None
    return ProjectSource(folder, framework, corpus if corpus and corpus.is_dir() else None)


def _metadata_of(corpus: Path | None) -> tuple[str, str]:
    if corpus is None or not (corpus / "metadata.json").is_file():
        return "", ""
    data = load_json((corpus / "metadata.json").read_text())
    return str(data.get("framework_name", "")), str(data.get("framework_description", ""))


def _test_files(code_dir: Path, named: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The project's test files, relative to code/: those under code/test_code that pytest
    would collect (`test_*.py`, `*_test.py`) and those the spec names, when they hold a
    test function or class (the release's helper runners hold none)."""
    found = []
    for path in sorted((code_dir / "test_code").rglob("*.py")):
        relative = path.relative_to(code_dir).as_posix()
        if not (path.name.startswith("test_") or path.name.endswith("_test.py") or relative in named):
            continue
        spec = TestSpec(name=relative, code=path.read_text(encoding="utf-8", errors="replace"))
        if any(item.kind != "block" for item in spec.items()):
            found.append(relative)
    return found


def _koco_runner(text: str) -> str:
    """How KOCO's scoring step runs a test file: pytest only when its text names pytest."""
    return "pytest" if re.search(r"import pytest|from pytest|@pytest\.", text) else "python FILE"


def import_koco_project(folder: Path, out_dir: Path, *, requirements: list[str] | None = None,
                        python_path: list[str] | None = None, with_corpus: bool | None = None,
                        project_level: bool = True, name: str | None = None) -> Benchmark:
    """Write a benchmark with one project task per `# FUNCTION:` block of `folder` (and, with
    `project_level`, one task asking for all of them at once, scored by every test file of
    the project). The project is copied under `projects/<framework>/test_examples/<project>`
    (with the framework's knowledge corpus beside it when the tests look for it, or
    `with_corpus`). Not certified yet: see `certify_projects`."""
    source = find_project(folder)
    code_dir = source.folder / "code"
    spec_file = sorted((source.folder / "requirements").glob("03_*.md"))[0]
    blocks = parse_spec(spec_file)
    if not blocks:  # (before anything is written to --out)
        raise UserError(f"{spec_file}: no '# FUNCTION:' block, so no core function to import\n"
                        "  fix: give each core function a '# FUNCTION: name' block with its location "
                        "and test, as KOCO-Bench's 03_*.md files do")
    framework_name, description = _metadata_of(source.corpus)
    framework_name = framework_name or source.framework
    named = tuple(_one_path(block.text("test")).removeprefix("code/") for block in blocks)
    tests_all = _test_files(code_dir, named)
    mentions_corpus = any("knowledge_corpus" in (code_dir / t).read_text(errors="replace")
                          for t in [*tests_all, "test_code/conftest.py"] if (code_dir / t).is_file())
    python_path = python_path or ["."]
    wants_corpus = with_corpus if with_corpus is not None else (
        mentions_corpus or any("knowledge_corpus" in entry for entry in python_path))
    if out_dir.exists() and any(out_dir.iterdir()):
        raise UserError(f"{out_dir} is not empty\n  fix: pass a new directory to --out")
    root = out_dir / "projects" / source.framework
    shutil.copytree(source.folder, root / "test_examples" / source.name,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    if wants_corpus and source.corpus is not None:
        shutil.copytree(source.corpus, root / "knowledge_corpus",
                        ignore=shutil.ignore_patterns("__pycache__"))
    workdir = f"test_examples/{source.name}/code"
    documents = [ProjectDocument(name=path.name, text=path.read_text(encoding="utf-8"))
                 for path in sorted((source.folder / "requirements").glob("*.md"))
                 if not path.name.startswith("03_")]
    tasks: list[ProjectTask] = []
    located_all: list[tuple[SpecBlock, Located]] = []
    for block in blocks:
        try:
            located = locate(code_dir, block.text("location"), block.name)
        except UserError as error:
            raise UserError(f"{spec_file}:{block.line}: FUNCTION {block.name}: {error}") from None
        located_all.append((block, located))
        test = _one_path(block.text("test")).removeprefix("code/")
        if not (code_dir / test).is_file():
            raise UserError(f"{spec_file}:{block.line}: FUNCTION {block.name}: test file "
                            f"{_one_path(block.text('test'))} does not exist")
        test_text = (code_dir / test).read_text(encoding="utf-8")
        tasks.append(ProjectTask(
            task_id=f"koco/{source.framework}/{source.name}/{block.name}", domain=source.framework,
            framework=framework_name,
            instruction=_instruction(block, framework_name, description, "." in located.qualname),
            prompt_code=located.masked, entry_point=located.qualname, reference=located.definition,
            tests=[TestSpec(name=test, code=test_text)],
            project=ProjectRef(path=f"projects/{source.framework}", workdir=workdir,
                               python_path=python_path,
                               targets=[ProjectTarget(file=located.file, qualname=located.qualname)],
                               tests=[test], documents=documents),
            metadata={**source_metadata(f"code/{located.file}", located.span,
                                        located.file.removesuffix(".py").replace("/", ".")),
                      "koco": {"function_name": block.name,
                               "implementation_location": block.text("location"),
                               "test_code_path": block.text("test"),
                               "runner": _koco_runner(test_text),
                               "spec_line": block.line}},
        ))
    if project_level:
        tasks.append(_project_task(source, framework_name, description, located_all, tests_all,
                                   code_dir, workdir, python_path, documents, blocks))
    manifest = Manifest(
        preload=project_preload(code_dir, [t for task in tasks for t in task.project.targets],
                                python_path),
        name=name or f"koco-{source.name.lower()}", description=f"KOCO-Bench core functions of "
        f"{source.name} ({source.framework})", domains=[source.framework],
        requirements=list(requirements or []), time_limit_s=120.0,
        provenance=Provenance(source=str(source.folder), tool="knowbench import koco-project"))
    return write_benchmark(out_dir, manifest, tasks)


def project_preload(code_dir: Path, targets: list[ProjectTarget], python_path: list[str]) -> list[str]:
    """What the target files import at top level from outside the project: the fork server
    imports these once (a library such as torch, imported by the project's code but not by
    its tests, would otherwise be imported by every sample, under the sample's memory limit)."""
    from knowbench.benchmark.schema import imported_modules

    local: set[str] = set()
    for entry in python_path:
        folder = (code_dir / entry).resolve()
        if folder.is_dir():
            local |= {child.name.removesuffix(".py") for child in folder.iterdir()}
    modules: set[str] = set()
    for file in sorted({target.file for target in targets}):
        tree = parse_python((code_dir / file).read_text(encoding="utf-8"))
        top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        modules |= imported_modules("\n".join(ast.unparse(node) for node in top))
    return sorted(modules - local - {"__future__"})


def _project_task(source: ProjectSource, framework_name: str, description: str,
                  located_all: list[tuple[SpecBlock, Located]], tests_all: list[str], code_dir: Path,
                  workdir: str, python_path: list[str], documents: list[ProjectDocument],
                  blocks: list[SpecBlock]) -> ProjectTask:
    """All core functions at once, from the requirement documents, scored by every test file
    of the project (its unit and integration tests)."""
    seen: dict[str, Located] = {}
    for _, located in located_all:
        seen.setdefault(f"{located.file}:{located.qualname}", located)
    targets = [ProjectTarget(file=loc.file, qualname=loc.qualname) for loc in seen.values()]
    sections = [f"# FUNCTION: {block.name}\n\n" + _instruction(block, framework_name, "", "." in loc.qualname)
                .split("\n\n", 1)[1] for block, loc in located_all]
    overview = "\n\n".join(doc.text for doc in documents)
    instruction = (f"You are a Python programmer developing with the {framework_name} framework. "
                   f"{description}\n\nImplement the core functions of the project {source.name} "
                   f"described below, each as a complete function in its own ```python block "
                   f"(methods with `self`).\n\n{overview}\n\n" + "\n\n".join(sections))
    return ProjectTask(
        task_id=f"koco/{source.framework}/{source.name}/project", domain=source.framework,
        framework=framework_name, instruction=instruction.strip(),
        prompt_code="\n\n".join(loc.masked for loc in seen.values()),
        entry_point=targets[0].qualname,
        reference="\n\n".join(f"# {loc.file}\n{loc.definition}" for loc in seen.values()),
        tests=[TestSpec(name=test, code=(code_dir / test).read_text(encoding="utf-8")) for test in tests_all],
        project=ProjectRef(path=f"projects/{source.framework}", workdir=workdir, python_path=python_path,
                           targets=targets, tests=tests_all, documents=documents),
        metadata={"targets": [source_metadata(f"code/{loc.file}", loc.span,
                                              loc.file.removesuffix(".py").replace("/", "."))
                              for loc in seen.values()],
                  "koco": {"granularity": "project", "functions": [b.name for b in blocks]}},
    )


# ---------------------------------------------------------------------------- certification


def certify_projects(benchmark: Benchmark, engine: Any, *, wall_s: float = 300.0,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every task with its reference and with a stub; keep the tasks that pass on the
    reference and fail on the stub, widening a task's tests from the project's other test
    files when its own cannot tell them apart. Rewrites the benchmark and returns the report
    (also written to `certification.json` in the benchmark directory)."""
    from knowbench.records import Generation, Limits
    from knowbench.run import evaluate_function

    say = progress or (lambda message: None)
    limits = Limits(wall_s=wall_s, cpu_s=int(wall_s) + 1, memory_mb=8192)
    engine.hide([benchmark.path])

    def outcome(task: ProjectTask, reply: str) -> dict[str, Any]:
        result = evaluate_function(task, Generation(task_id=task.task_id, sample_idx=0, completion=reply),
                                   engine, limits)
        tests = {t.id: (t.status, t.reason, t.message[-300:]) for t in (result.execution.tests
                                                                         if result.execution else [])}
        return {"passed": result.tests_passed, "total": result.tests_total, "tests": tests,
                "error": result.extra.get("assembly_error")}

    kept: list[ProjectTask] = []
    report: dict[str, Any] = {"tasks": {}, "left_out": []}
    for task in benchmark.tasks:
        assert isinstance(task, ProjectTask)
        reference = outcome(task, f"```python\n{task.reference}\n```")
        stub = outcome(task, "")
        row: dict[str, Any] = {"reference": _ratio(reference), "stub": _ratio(stub), "tests_added": []}
        if stub["passed"] == stub["total"] and reference["passed"] == reference["total"]:
            task, added = _widen(task, benchmark, outcome)
            if added:
                row["tests_added"] = added
                reference, stub = outcome(task, f"```python\n{task.reference}\n```"), outcome(task, "")
                row["reference"], row["stub"] = _ratio(reference), _ratio(stub)
        row["certified"] = reference["passed"] == reference["total"] > 0 and stub["passed"] < stub["total"]
        row["failing_reference"] = {k: v for k, v in reference["tests"].items() if v[0] != "pass"}
        row["passing_stub"] = sorted(k for k, v in stub["tests"].items() if v[0] == "pass")
        report["tasks"][task.task_id] = row
        say(f"{task.task_id}: reference {row['reference']}, stub {row['stub']}"
            + (f", tests added {row['tests_added']}" if row["tests_added"] else "")
            + ("" if row["certified"] else "  NOT CERTIFIED"))
        if row["certified"]:
            kept.append(task.model_copy(update={"metadata": {
                **task.metadata, "certified": {"reference": row["reference"], "stub": row["stub"],
                                               "tests_added": row["tests_added"]}}}))
        else:
            report["left_out"].append(task.task_id)
    if not kept:
        raise UserError(f"no task of {benchmark.path} passed certification; see the report above")
    write_benchmark(benchmark.path, benchmark.manifest, kept)
    (benchmark.path / "certification.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _ratio(outcome: dict[str, Any]) -> str:
    return f"{outcome['passed']}/{outcome['total']}"


def _widen(task: ProjectTask, benchmark: Benchmark,
           outcome: Callable[[ProjectTask, str], dict[str, Any]]) -> tuple[ProjectTask, list[str]]:
    """The task with the project's other tests that pass on the reference and fail on the
    stub added (none found: the task unchanged)."""
    code_dir = benchmark.path / task.project.path / task.project.workdir
    named = tuple(spec.name for spec in task.tests)
    others = [t for t in _test_files(code_dir, named) if t not in named]
    if not others:
        return task, []
    wide = task.model_copy(update={
        "tests": [*task.tests, *(TestSpec(name=t, code=(code_dir / t).read_text()) for t in others)],
        "project": task.project.model_copy(update={"tests": [*task.project.tests, *others]})})
    wide.bind(benchmark.path)
    reference = outcome(wide, f"```python\n{wide.reference}\n```")
    stub = outcome(wide, "")
    added = sorted(test for test, result in reference["tests"].items()
                   if result[0] == "pass" and stub["tests"].get(test, ("pass",))[0] != "pass"
                   and test.split("::")[0] in others)
    if not added:
        return task, []
    files = sorted({test.split("::")[0] for test in added})
    narrowed = task.model_copy(update={
        "tests": [*task.tests, *(spec for spec in wide.tests if spec.name in files)],
        "project": task.project.model_copy(update={"tests": [*task.project.tests, *added]})})
    narrowed.bind(benchmark.path)
    return narrowed, added

