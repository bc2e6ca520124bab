"""Leakage control: keep a task's own target out of what retrieval returns.

For one task, `LeakageGuard.reason(position, chunk)` names why a chunk must be withheld, or
returns None. The rules, each applied when the task carries what it needs:

- target span: the chunk lies in the target's file (`metadata["source_path"]`) and its lines
  overlap the target's (`metadata["source_span"] = [start, end]`), except the outline of the
  class that encloses a method target (its signature, not its body);
- target name: the chunk is the entry point itself (same qualified name) in the target's module
  (same file as `source_path`, or `metadata["module"]`);
- target source: the chunk holds the target's code, compared after normalising both with `ast`
  (docstrings, comments and layout removed): a function equal to the reference's definition
  up to its name and the names of its parameters and locals, or text (code, or code blocks
  inside documentation) containing the reference's normalised body;
- target file (opt-in, `exclude_file=True`, as KOCO-Bench did): any chunk of the target's file.

The location comes from `schema.source_location` (the keys `source_path`, `source_span`,
`module`, or the names older builds wrote). A rule that cannot apply (no reference, no
location) does not fire, and `unmet()` says which requested rule could not (the target-file
rule on a task without a file): methods report that rather than do nothing silently. The
source rule needs only the task's `reference`, so it protects tasks that say nothing about
their origin.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from knowbench.benchmark.schema import (
    ChoiceTask,
    FunctionTask,
    ProjectTask,
    find_definition,
    source_location,
)
from knowbench.knowledge.corpus import Chunk
from knowbench.parsing import parse_python

# Shorter normalised bodies ('return None', 'pass') occur everywhere: match those by the whole
# definition only, not by containment.
MIN_BODY_CHARS = 24

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class NormalisedSource:
    definitions: frozenset[str]  # every function in the chunk, anonymised and squashed
    squashed: str  # the whole chunk, normalised and without whitespace


class SourceNormaliser:
    """Normalised forms of chunks, computed on demand and cached by chunk id (share one per
    corpus across tasks)."""

    def __init__(self) -> None:
        self._cache: dict[str, NormalisedSource] = {}

    def of(self, chunk: Chunk) -> NormalisedSource:
        found = self._cache.get(chunk.id)
        if found is None:
            found = self._cache[chunk.id] = normalise_text(chunk.text)
        return found


def normalise_text(text: str) -> NormalisedSource:
    """Normalise `text` as Python when it parses; otherwise as prose with code in it: the
    prose squashed (comments and `>>>` prompts removed) plus every code block in it (fenced,
    indented or doctest) that parses, normalised as Python."""
    tree = _parse(text)
    if tree is not None:
        return NormalisedSource(_definitions(tree), squash(ast.unparse(tree)))
    definitions: set[str] = set()
    prose = "\n".join(_PROMPT.sub("", _COMMENT.sub("", line)) for line in text.splitlines())
    parts = [squash(prose)]
    for region in code_regions(text):
        block = _parse(region)
        if block is not None:
            definitions |= _definitions(block)
            parts.append(squash(ast.unparse(block)))
    return NormalisedSource(frozenset(definitions), "\n".join(parts))


def code_regions(text: str) -> list[str]:
    """Candidate code inside documentation: fenced blocks, indented blocks (reST literal and
    code-block directives, directive options dropped) and doctest lines."""
    regions = [match.group(2) for match in _FENCED_BLOCK.finditer(text)]
    lines = text.splitlines()
    current: list[str] = []
    for line in [*lines, "end"]:
        if line.startswith(("    ", "\t")) or (current and not line.strip()):
            current.append(line)
            continue
        if current:
            regions.append("\n".join(entry for entry in current
                                     if not _DIRECTIVE_OPTION.match(entry)))
            current = []
    doctest = [_PROMPT.sub("", line.strip()) for line in lines if _PROMPT.match(line)]
    if doctest:
        regions.append("\n".join(doctest))
    return regions


def _parse(text: str) -> ast.Module | None:
    try:
        tree = parse_python(textwrap.dedent(text))
    except (SyntaxError, ValueError, RecursionError):
        return None
    strip_docstrings(tree)
    return tree


def _definitions(tree: ast.AST) -> frozenset[str]:
    return frozenset(anonymous_definition(node) for node in ast.walk(tree)
                     if isinstance(node, _FunctionNode))


_COMMENT = re.compile(r"(^|\s)#.*$")
_PROMPT = re.compile(r"^\s*(>>>|\.\.\.)( |$)")
_FENCED_BLOCK = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1", re.S | re.M)
_DIRECTIVE_OPTION = re.compile(r"^\s+:[\w-]+:")


def squash(code: str) -> str:
    """Whitespace removed and quotes unified, for layout-insensitive comparison."""
    return re.sub(r"\s+", "", code).replace('"', "'")


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """Remove docstrings in place from the module and every class and function in it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | _FunctionNode):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def anonymous_definition(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function in canonical form, squashed: no name, decorators or docstrings, and its
    parameters and local variables renamed by order of appearance, so a copy that renamed
    them is still the same function."""
    copied = copy.deepcopy(node)
    copied.name = "_"
    copied.decorator_list = []
    strip_docstrings(copied)
    arguments = copied.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                  *(extra for extra in (arguments.vararg, arguments.kwarg) if extra is not None)]
    renamed: dict[str, str] = {}
    for parameter in parameters:
        renamed.setdefault(parameter.arg, f"_v{len(renamed)}")
    for child in ast.walk(copied):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            renamed.setdefault(child.id, f"_v{len(renamed)}")
    for parameter in parameters:
        parameter.arg = renamed[parameter.arg]
    for child in ast.walk(copied):
        if isinstance(child, ast.Name) and child.id in renamed:
            child.id = renamed[child.id]
    return squash(ast.unparse(copied))


def reference_target(task: FunctionTask) -> _FunctionNode | None:
    """The target's definition inside the task's reference, if it can be found."""
    try:
        tree = parse_python(textwrap.dedent(task.reference))
    except SyntaxError:
        return None
    found = find_definition(tree, task.entry_point)
    if found is not None:
        return found
    name = task.entry_point.split(".")[-1]
    candidates = [node for node in ast.walk(tree) if isinstance(node, _FunctionNode)]
    named = [node for node in candidates if node.name == name]
    if named:
        return named[-1]
    return candidates[0] if len(candidates) == 1 else None


class LeakageGuard:
    """The exclusion rules for one task (see the module docstring)."""

    def __init__(self, task: FunctionTask | ChoiceTask, *, exclude_file: bool = False,
                 normaliser: SourceNormaliser | None = None, per_target: bool = True) -> None:
        location = source_location(task.metadata)
        # A project task with several targets: every target is withheld, each by its own
        # location (`metadata.targets`, in the order of `project.targets`) and definition.
        self.targets: list[LeakageGuard] = []
        if per_target and isinstance(task, ProjectTask) and len(task.project.targets) > 1:
            places = task.metadata.get("targets")
            places = places if isinstance(places, list) else []
            for index, target in enumerate(task.project.targets):
                place = places[index] if index < len(places) and isinstance(places[index], dict) else {}
                one = task.model_copy(update={"entry_point": target.qualname, "metadata": place})
                self.targets.append(LeakageGuard(one, exclude_file=exclude_file,
                                                 normaliser=normaliser, per_target=False))
        self.source_path = _clean_path(location.path)
        self.span = location.span
        self.module = location.module
        self.exclude_file = exclude_file
        self.normaliser = normaliser or SourceNormaliser()
        self.entry_point: str | None = None
        self.definition: str | None = None
        self.body: str | None = None
        if isinstance(task, FunctionTask):
            self.entry_point = task.entry_point
            target = reference_target(task)
            if target is not None:
                self.definition = anonymous_definition(target)
                stripped = strip_docstrings(copy.deepcopy(target))
                assert isinstance(stripped, _FunctionNode)
                body = squash("\n".join(ast.unparse(statement) for statement in stripped.body))
                self.body = body if len(body) >= MIN_BODY_CHARS else None

    def rules(self) -> list[str]:
        """The rules that can fire for this task, for the trace."""
        if self.targets:
            return sorted({rule for guard in self.targets for rule in guard.rules()})
        active = []
        if self.source_path and self.exclude_file:
            active.append("target file")
        if self.source_path and self.span:
            active.append("target span")
        if self.entry_point and (self.source_path or self.module):
            active.append("target name")
        if self.definition:
            active.append("target source")
        return active

    def unmet(self) -> list[str]:
        """Requested rules this task gives nothing to apply to."""
        if self.targets:
            return sorted({rule for guard in self.targets for rule in guard.unmet()})
        if self.exclude_file and not self.source_path:
            return ["target file: the task's metadata names no source file (source_path)"]
        return []

    def reason(self, position: int, chunk: Chunk) -> str | None:
        """Why `chunk` must be withheld from this task, or None to allow it."""
        for guard in self.targets:
            found = guard.reason(position, chunk)
            if found is not None:
                return found
        if self.targets:
            return None
        del position  # the rules look at the chunk itself
        same_file = bool(self.source_path) and paths_match(chunk.path, self.source_path or "")
        if same_file and self.exclude_file:
            return "target file"
        if same_file and self.span and chunk.kind != "notebook" \
                and chunk.start_line <= self.span[1] and self.span[0] <= chunk.end_line \
                and not self._encloses(chunk):
            return "target span"
        if self.entry_point and chunk.qualname == self.entry_point and chunk.kind == "function" \
                and (same_file or (self.module is not None and chunk.module == self.module)):
            return "target name"
        if self.definition and self.holds_source(self.normaliser.of(chunk)):
            return "target source"
        return None

    def holds_source(self, normalised: NormalisedSource) -> bool:
        """The target-source rule alone, on any normalised text (`normalise_text`): it holds a
        target's definition, or text containing its normalised body."""
        if self.targets:
            return any(guard.holds_source(normalised) for guard in self.targets)
        if self.definition is None:
            return False
        return self.definition in normalised.definitions or \
            bool(self.body and self.body in normalised.squashed)

    def _encloses(self, chunk: Chunk) -> bool:
        """A class chunk around the target's span: the outline of the class that owns the
        target (header, docstring, attributes, method signatures), which shows the target's
        signature, as the prompt does, and not its body (the source rule still looks)."""
        assert self.span is not None
        return chunk.kind == "class" and chunk.start_line <= self.span[0] and self.span[1] <= chunk.end_line \
            and (chunk.start_line, chunk.end_line) != self.span

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"rules": self.rules(), "source_path": self.source_path,
                                     "source_span": list(self.span) if self.span else None}
        if self.unmet():
            described["unmet"] = self.unmet()
        return described


def paths_match(chunk_path: str, target_path: str) -> bool:
    """Same file, allowing either path to be relative to a deeper root ('src/pkg/m.py' and
    'pkg/m.py' match)."""
    a, b = _clean_path(chunk_path) or "", _clean_path(target_path) or ""
    return bool(a and b) and (a == b or a.endswith("/" + b) or b.endswith("/" + a))


def _clean_path(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    path = value.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.strip("/") or None


def withheld_chunks(chunks: list[Chunk], tasks: list[FunctionTask | ChoiceTask], *,
                    exclude_file: bool = False) -> dict[str, str]:
    """The chunks that leakage control withholds from at least one of `tasks`, by chunk id,
    each with the first task and rule that withholds it ('task_id: target source').

    What trains a model or fills a datastore is seen by every task at once, so a chunk is left
    out when any task of the benchmark may not see it: the same rules as retrieval, applied to
    all tasks together."""
    normaliser = SourceNormaliser()
    guards = [(task.task_id, LeakageGuard(task, exclude_file=exclude_file, normaliser=normaliser))
              for task in tasks if isinstance(task, FunctionTask)]
    withheld: dict[str, str] = {}
    for position, chunk in enumerate(chunks):
        for task_id, guard in guards:
            reason = guard.reason(position, chunk)
            if reason is not None:
                withheld[chunk.id] = f"{task_id}: {reason}"
                break
    return withheld
