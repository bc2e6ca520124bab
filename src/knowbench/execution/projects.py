"""Project samples: a copy of a real project with the candidate's code in place.

A project task (`ProjectTask`, docs/format.md) names a project tree shipped with the
benchmark and the functions a candidate writes in it. For each sample this module works out,
on the host, the new text of every target file (`patch_targets`: each target's body replaced
by the candidate's, on the syntax tree, never by line numbers), and the engine copies the
tree into the sample's own work directory with those files written over (`prepare_project`). The
benchmark's tree is never written to. The in-sandbox runner then runs the project's tests
there with pytest (`sandboxed/knowbench_project.py`).
"""

from __future__ import annotations

import ast
import os
import shutil
import textwrap
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from knowbench.benchmark.schema import PARSE_LOCK, ProjectTarget, ProjectTask
from knowbench.parsing import parse_python

PROJECT_DIR = "project"
"""Where the copy lies inside the sample's work directory."""

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_MISSING = "raise NotImplementedError({message!r})"


class ProjectRun(BaseModel):
    """What an engine needs to lay out and run one project sample."""

    model_config = ConfigDict(extra="forbid")

    tree: str = Field(description="The project's directory on the host (copied, never written).")
    workdir: str = Field(default=".", description="Relative to the tree: where the tests run.")
    python_path: list[str] = Field(default_factory=lambda: ["."])
    files: dict[str, str] = Field(
        default_factory=dict, description="New text of files, by path relative to workdir.")
    tests: list[str] = Field(description="Test files or node ids, relative to workdir. Empty: "
                             "no project tests; the request's own program and tests run in "
                             "the copy (cwd: workdir, python_path first on sys.path).")
    omit: list[str] = Field(default_factory=list, description="Files left out of the copy, "
                            "by path relative to the tree (not to workdir).")

    def runner_view(self) -> dict[str, object]:
        """The part the in-sandbox runner reads: paths relative to the sample's work dir."""
        base = f"{PROJECT_DIR}/{Path(self.tree).name}"
        return {"dir": base if self.workdir == "." else f"{base}/{self.workdir}",
                "python_path": self.python_path, "tests": self.tests}


def prepare_project(run: ProjectRun, sample_dir: Path, uid: int | None = None, gid: int | None = None) -> None:
    """Copy the project into `sample_dir/project/<its directory's name>` (tests that look for
    their project's siblings by name find them), write the candidate's files over it, and
    hand it all to the sample's uid (tests write into their project). Symlinks are copied as
    links; `__pycache__` directories are left out."""
    (sample_dir / PROJECT_DIR).mkdir()
    if uid is not None:
        os.chown(sample_dir / PROJECT_DIR, uid, gid if gid is not None else uid)
    target = sample_dir / PROJECT_DIR / Path(run.tree).name
    shutil.copytree(run.tree, target, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for relative in run.omit:
        path = Path(os.path.normpath(target / relative))
        if not path.is_relative_to(target):
            raise ValueError(f"omitted file {relative!r} lies outside the project")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    base = (target / run.workdir).resolve()
    for relative, text in run.files.items():
        path = (base / relative).resolve()
        if not path.is_relative_to(target.resolve()):
            raise ValueError(f"target file {relative!r} lies outside the project")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text)
    for directory, directories, files in os.walk(target):
        for name in (*directories, *files):
            entry = os.path.join(directory, name)
            if uid is not None:
                os.lchown(entry, uid, gid if gid is not None else uid)
            if not os.path.islink(entry):
                os.chmod(entry, os.stat(entry).st_mode | 0o600 | (0o100 if name in directories else 0))
    if uid is not None:
        os.chown(target, uid, gid if gid is not None else uid)


class TargetError(ValueError):
    """A target the project's file does not define (a benchmark defect, not a sample's)."""


def patch_targets(tree: Path, workdir: str, targets: list[ProjectTarget], code: str,
                  missing: str = "the reply defines no {qualname}") -> dict[str, str]:
    """The new text of each target file: every target's body replaced by the body of the
    candidate's definition of the same name in `code`.

    The definition is found in `code` by qualified name (`Cls.f` inside `class Cls`), else by
    its last name (a method written at top level, or a function inside a class). The
    original header stays (decorators, signature with `self`), so a reply that writes only
    what the requirement's signature shows still fits. The reply's module-level imports go
    at the start of the new body; its other top-level functions and classes (helpers) go
    before the target's top-level statement, when the file does not define that name
    already and it is not (the class of) another target. A target the reply does not define gets a body that raises
    NotImplementedError(`missing`, `{qualname}` filled in). Raises `TargetError` when a
    target file lacks a target.
    """
    candidate = parse_candidate(code)
    # Names of every target and of the classes holding them: the reply's definitions of other
    # targets (and their class wrappers) are never helpers of this file.
    reserved = {part for target in targets for part in
                (target.qualname.split(".")[0], target.qualname.rsplit(".", 1)[-1])}
    by_file: dict[str, list[ProjectTarget]] = {}
    for target in targets:
        by_file.setdefault(target.file, []).append(target)
    files = {}
    for relative, own in by_file.items():
        source = (tree / workdir / relative).read_text()
        files[relative] = patch_source(source, own, candidate, relative, reserved, missing)
    return files


WITHHELD = "withheld: {qualname} is what the task asks for"
"""The message of the body that stands for a withheld target (`withheld_targets`)."""


def withheld_targets(tree: Path, workdir: str, targets: list[ProjectTarget]) -> dict[str, str]:
    """The text of each target file with every target's body withheld: replaced by
    `raise NotImplementedError("withheld: ... is what the task asks for")`, the header (and
    so the signature) kept. What a tool-using method may see of the target files."""
    return patch_targets(tree, workdir, targets, "", missing=WITHHELD)


def patch_source(source: str, targets: list[ProjectTarget], candidate: ast.Module,
                 name: str = "<file>", reserved: set[str] | frozenset[str] = frozenset(),
                 missing: str = "the reply defines no {qualname}") -> str:
    """`source` with each target's body replaced (see `patch_targets`)."""
    with PARSE_LOCK:
        tree = parse_python(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # (first line index, end index, new lines)
    found_all: list[ast.AST] = []
    tops: list[ast.stmt] = []
    for target in targets:
        node, top = _find(tree, target.qualname)
        if node is None or top is None:
            raise TargetError(f"{name} defines no function {target.qualname}")
        found = _find_candidate(candidate, target.qualname)
        edits.append(_body_edit(lines, node, found, candidate, target.qualname, missing))
        tops.append(top)
        if found is not None:
            found_all.append(found)
    module_names = _defined(tree.body)
    helpers = [statement for statement in candidate.body
               if isinstance(statement, _Function | ast.ClassDef)
               and statement.name not in module_names and statement.name not in reserved
               and not any(_holds(statement, found) for found in found_all)]
    if helpers:
        first = min(min([top.lineno, *(d.lineno for d in getattr(top, "decorator_list", []))])
                    for top in tops) - 1
        text = "".join(_segment(code_lines(candidate), helper) + "\n\n" for helper in helpers)
        edits.append((first, first, [text]))
    for start, end, new in sorted(edits, key=lambda edit: (edit[0], edit[1]), reverse=True):
        lines[start:end] = new
    return "".join(lines)


def code_lines(module: ast.Module) -> list[str]:
    return getattr(module, "_knowbench_lines", [])


def _defined(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, _Function | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _holds(statement: ast.stmt, definition: ast.AST) -> bool:
    return any(child is definition for child in ast.walk(statement))


def _find(tree: ast.Module, qualname: str) -> tuple[_Function | None, ast.stmt | None]:
    """The definition named `qualname` (through nested classes) and its top-level statement."""
    *owners, last = qualname.split(".")
    body: list[ast.stmt] = tree.body
    top: ast.stmt | None = None
    for owner in owners:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if cls is None:
            return None, None
        top = top or cls
        body = cls.body
    found = None
    for node in body:
        if isinstance(node, _Function) and node.name == last:
            found = node
    return found, (top or found)


def _find_candidate(candidate: ast.Module, qualname: str) -> _Function | None:
    exact, _ = _find(candidate, qualname)
    if exact is not None:
        return exact
    last = qualname.rsplit(".", 1)[-1]
    for node in candidate.body:
        if isinstance(node, _Function) and node.name == last:
            return node
    for node in candidate.body:
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, _Function) and member.name == last:
                    return member
    return None


def _body_edit(lines: list[str], node: _Function, found: _Function | None, candidate: ast.Module,
               qualname: str, missing: str) -> tuple[int, int, list[str]]:
    """Replace the lines of `node`'s body (from its first statement to its end)."""
    first = node.body[0]
    own_line = first.lineno > _header_end(node)
    indent = " " * (first.col_offset if own_line else node.col_offset + 4)
    if found is None:
        body = [_MISSING.format(message=missing.format(qualname=qualname))]
    else:
        imports = [_segment(code_lines(candidate), statement) for statement in candidate.body
                   if isinstance(statement, ast.Import | ast.ImportFrom)
                   and not _is_future(statement)]
        body = _body_text(code_lines(candidate), found)
        if imports:
            docstring = _has_docstring(found)
            split = _statement_lines(code_lines(candidate), found, 1) if docstring else 0
            body = body[:split] + [line for text in imports for line in text.splitlines()] + body[split:]
    new = [(line[1:] if line.startswith("\0") else indent + line if line.strip() else "") + "\n"
           for line in body]
    start = first.lineno - 1
    end = node.end_lineno or first.lineno
    if not own_line:  # `def f(): return x`: keep the header, put the body on lines of its own
        header = lines[start][:first.col_offset].rstrip() + "\n"
        return start, end, [header, *new]
    return start, end, new


def _header_end(node: _Function) -> int:
    """The last line of the `def` header (the line of the colon before the body)."""
    ends = [node.lineno]
    for part in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs, *node.args.defaults,
                 *node.args.kw_defaults, node.args.vararg, node.args.kwarg, node.returns):
        if part is not None and getattr(part, "end_lineno", None):
            ends.append(part.end_lineno)  # type: ignore[arg-type]
    return max(ends)


def _has_docstring(node: _Function) -> bool:
    first = node.body[0]
    return (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and len(node.body) > 1)


def _statement_lines(lines: list[str], node: _Function, count: int) -> int:
    """How many lines of `_body_text(node)` the first `count` statements take."""
    return (node.body[count - 1].end_lineno or 0) - node.body[0].lineno + 1


def _body_text(lines: list[str], node: _Function) -> list[str]:
    """The lines of `node`'s body, dedented to column 0. Lines inside a multi-line string
    are marked (a leading NUL) so that they are neither dedented nor indented: the string's
    value stays what the reply wrote."""
    first = node.body[0]
    end = node.end_lineno or first.lineno
    inside = _string_lines(node)
    column = first.col_offset
    out = []
    for number in range(first.lineno, end + 1):
        text = lines[number - 1].rstrip("\n").rstrip("\r")
        if number == first.lineno:
            text = " " * column + text[column:]
        if number in inside:
            out.append("\0" + text)
            continue
        lead = len(text) - len(text.lstrip(" \t"))
        out.append(text[column:] if lead >= column else text.strip())
    return out


def _string_lines(node: ast.AST) -> set[int]:
    """Lines that continue a string literal begun on an earlier line."""
    inside: set[int] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Constant | ast.JoinedStr) and child.end_lineno and \
                child.end_lineno > child.lineno:
            inside.update(range(child.lineno + 1, child.end_lineno + 1))
    return inside


def _segment(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return textwrap.dedent("".join(lines[start - 1:node.end_lineno]))


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def parse_candidate(code: str) -> ast.Module:
    """`code` parsed, with its lines kept for slicing (an empty module when it does not parse)."""
    for text in (code, textwrap.dedent(code)):
        try:
            with PARSE_LOCK:
                module = parse_python(text)
        except SyntaxError:
            continue
        module._knowbench_lines = text.splitlines(keepends=True)  # type: ignore[attr-defined]
        return module
    empty = ast.Module(body=[], type_ignores=[])
    empty._knowbench_lines = []  # type: ignore[attr-defined]
    return empty


def candidate_code(reply: str, targets: list[ProjectTarget]) -> str:
    """The code of a reply to a project task. One target: as for a function task
    (`program.extract_code`). Several: every Python block of the reply that parses, in
    order (one block per function is the usual answer), else `extract_code`'s choice."""
    from knowbench.program import (
        _PYTHON_TAGS,
        _all_fenced_blocks,
        _answer,
        _parse_code,
        extract_code,
    )

    if len(targets) > 1:
        with PARSE_LOCK:
            blocks = [content for tag, content in _all_fenced_blocks(_answer(reply))
                      if tag.lower() in _PYTHON_TAGS and _parse_code(content) is not None]
        if blocks:
            return "\n\n".join(blocks)
    with PARSE_LOCK:
        return extract_code(reply, targets[0].qualname)


def project_run(task: ProjectTask, reply: str) -> tuple[str, ProjectRun]:
    """(the reply's code, what the engine lays out for it). Raises `TargetError` when a
    target file lacks its target (the benchmark's defect) and ValueError for a task that
    was not loaded from a benchmark directory."""
    if task.root is None:
        raise ValueError(f"project task {task.task_id} is not bound to its benchmark directory")
    tree = Path(task.root) / task.project.path
    code = candidate_code(reply, task.project.targets)
    files = patch_targets(tree, task.project.workdir, task.project.targets, code)
    return code, ProjectRun(tree=str(tree), workdir=task.project.workdir,
                            python_path=task.project.python_path, files=files,
                            tests=task.project.tests)
