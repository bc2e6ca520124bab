"""Candidate tasks from one source: discover, static filters, assemble (stages 2 to 4 of
`knowbench mine`).

Each library function that tests call becomes a `Draft` unless a static filter drops it:
not trivial, a body of `min_lines`..`max_lines` lines, no banned keyword in the reference or
its context, a prompt of at most `max_prompt_lines`; tests holding a banned keyword leave the
suite. A draft carries the task cut from the function (`knowbench.builders.context`), its
suite rewritten into self-contained specs (`knowbench.builders.harness`), and what later
stages need to rebuild them.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from pydantic import ValidationError

from knowbench.benchmark.schema import FunctionTask, TestSpec, source_metadata
from knowbench.builders.apis import repository_apis
from knowbench.builders.build_log import BuildReport, SourceReport, TaskRecord
from knowbench.builders.context import ContextError, TargetCode, cut_target
from knowbench.builders.discover import TestUnit, discover_units, test_modules
from knowbench.builders.filters import banned_keywords, size_reason, triviality_reason
from knowbench.builders.harness import SpecBuilder
from knowbench.builders.options import MineOptions
from knowbench.builders.repository import (
    Module,
    Repository,
    Resolver,
    Symbol,
    bound_names,
    find_node,
    top_level_statements,
)
from knowbench.builders.requirements import requirement_name
from knowbench.builders.source import Source
from knowbench.errors import first_problem
from knowbench.parsing import parse_python


@dataclass
class Draft:
    """A candidate task on its way through the pipeline."""

    task: FunctionTask
    target: TargetCode
    module: Module
    repository: Repository
    resolver: Resolver
    source: Source
    domain: str
    record: TaskRecord
    units: dict[str, TestUnit]  # unit id -> unit
    item_of_unit: dict[str, str]
    repairs: list[str] = field(default_factory=list)
    resumed: int = 0  # runs again without a test that stopped the whole run (`selection._resume`)


def find_candidates(source: Source, domain: str, options: MineOptions, source_report: SourceReport,
                    report: BuildReport) -> list[Draft]:
    """The candidate tasks of one fetched source: its test units traced to library functions,
    each traced function filtered statically and, when it passes, cut into prompt, reference
    and context with its tests rewritten into specs. Counts go to `source_report`, one
    `TaskRecord` per traced function (kept or dropped, and why) to `report`."""
    repository = Repository(source.root)
    resolver = Resolver(repository)
    counts = source_report.counts
    counts["test_files"] = len(test_modules(repository))
    units = discover_units(repository, resolver)
    counts["test_units"] = len(units)
    counts["test_units_traced"] = sum(1 for unit in units if unit.targets)
    suites: dict[Symbol, list[TestUnit]] = {}
    called_by_a_test: set[Symbol] = set()
    for unit in units:
        for symbol in unit.targets:
            suites.setdefault(symbol, []).append(unit)
        called_by_a_test |= unit.targets - unit.through_library
    counts["targets_traced"] = len(suites)
    source_report.library_packages = sorted(repository.library_tops)
    drafts: list[Draft] = []
    # targets a test calls itself first, then those the tests reach only through the library
    # (what --max-tasks keeps), each in name order
    for symbol in sorted(suites, key=lambda s: (s not in called_by_a_test, s.dotted)):
        record = TaskRecord(task_id=_task_id(source, symbol), target=symbol.dotted, source=source.name,
                            domain=domain)
        report.tasks.append(record)
        draft = _draft(symbol, suites[symbol], repository, resolver, source, domain, options, record)
        if draft is not None:
            drafts.append(draft)
            if options.max_tasks is not None and len(drafts) >= options.max_tasks:
                break
    counts["candidates"] = len(drafts)
    return drafts


def _spread(units: list[TestUnit], count: int) -> list[TestUnit]:
    """At most `count` of `units`, spread evenly over them (they are sorted by id)."""
    if len(units) <= count:
        return list(units)
    if count <= 0:
        return []
    step = len(units) / count
    return [units[int(index * step)] for index in range(count)]


def _context_names(target: TargetCode) -> set[str]:
    """Names the context binds at its top level: imports, copies, imports from the library."""
    try:
        tree = parse_python(target.context)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    return {n for s in top_level_statements(tree) for n in bound_names(s)} | set(target.copied) | set(target.imported)


def _task_id(source: Source, symbol: Symbol) -> str:
    return f"{requirement_name(source.name)}/{symbol.dotted}"


def _draft(symbol: Symbol, units: list[TestUnit], repository: Repository, resolver: Resolver,
           source: Source, domain: str, options: MineOptions, record: TaskRecord) -> Draft | None:
    module = repository.module(symbol.module)
    node = find_node(module.tree, symbol.qualname) if module is not None else None
    if module is None or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return record.drop("not-a-function")
    record.file = repository.relpath(module)
    record.line = node.lineno
    first_line = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    reason = triviality_reason(node)
    if reason:
        return record.drop(reason)
    try:
        target = cut_target(module, symbol, options.max_prompt_lines)
    except ContextError as error:
        return record.drop("cut-failed", str(error))
    supplied = _context_names(target)
    if triviality_reason(node, supplied):
        used = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & supplied)
        return record.drop("trivial-context-delegation",
                           "the body only calls what the context supplies: " + ", ".join(used))
    record.body_lines = target.body_lines
    reason = size_reason(target.body_lines, options.min_lines, options.max_lines)
    if reason:
        return record.drop(reason, f"{target.body_lines} lines")
    found = banned_keywords(target.reference, options.banned) + banned_keywords(target.context, options.banned)
    if found:
        return record.drop("banned-keyword", ", ".join(sorted(set(found))))
    if target.prompt_code.count("\n") + 1 > options.max_prompt_lines:
        return record.drop("prompt-too-long", f"{target.prompt_code.count(chr(10)) + 1} lines")
    usable: list[TestUnit] = []
    for unit in sorted(units, key=lambda u: u.id):
        # padded and dedented, so that a method parses and is matched by its AST
        text = textwrap.dedent(ast.get_source_segment(unit.source_module.source, unit.node(), padded=True) or "")
        hits = banned_keywords(text, options.banned)
        if hits:
            record.drop_test(unit.id, "banned-keyword", ", ".join(hits))
        else:
            usable.append(unit)
    if len(usable) > options.max_tests:
        # the tests that call the target themselves first, then those reaching it through the library
        direct = [unit for unit in usable if symbol not in unit.through_library]
        chosen = _spread(direct, options.max_tests)
        chosen += _spread([unit for unit in usable if symbol in unit.through_library],
                          options.max_tests - len(chosen))
        kept = {id(unit) for unit in chosen}
        for unit in usable:
            if id(unit) not in kept:
                record.drop_test(unit.id, "over-max-tests")
        usable = chosen
    if not usable:
        return record.drop("no-usable-tests")
    specs, item_of_unit = build_specs(repository, resolver, target, usable, record)
    if not specs:
        return record.drop("no-usable-tests", "no test module could be rewritten")
    try:
        task = FunctionTask(
            task_id=record.task_id, domain=domain, framework=source.name, instruction="(pending)",
            prompt_code=target.prompt_code, entry_point=target.entry_point, context=target.context,
            reference=target.reference, tests=specs, installed_module=module.name,
            knowledge_apis=repository_apis(repository, resolver, module, symbol, node),
            metadata=source_metadata(record.file, (first_line, node.end_lineno or node.lineno), module.name),
        )
    except ValidationError as error:
        return record.drop("invalid-task", first_problem(error))
    record.tests_traced = len(usable)
    return Draft(task=task, target=target, module=module, repository=repository, resolver=resolver,
                  source=source, domain=domain, record=record,
                  units={unit.id: unit for unit in usable}, item_of_unit=item_of_unit)


def build_specs(repository: Repository, resolver: Resolver, target: TargetCode, units: list[TestUnit],
                record: TaskRecord | None) -> tuple[list[TestSpec], dict[str, str]]:
    """One spec per test module of `units`, and the runner item of each unit; units whose
    module cannot be rewritten are dropped (recorded in `record`, when given)."""
    by_module: dict[str, list[TestUnit]] = {}
    for unit in units:
        by_module.setdefault(unit.relpath, []).append(unit)
    specs: list[TestSpec] = []
    item_of_unit: dict[str, str] = {}
    for relpath in sorted(by_module):
        group = by_module[relpath]
        try:
            built = SpecBuilder(repository, resolver, target).build(group[0].module, group)
            specs.append(TestSpec(name=built.name, code=built.code))
        except (ValidationError, ValueError, RecursionError) as error:
            if record is not None:
                for unit in group:
                    record.drop_test(unit.id, "rewrite-failed", str(error)[:200])
            continue
        item_of_unit.update(built.item_of_unit)
    return specs, item_of_unit
