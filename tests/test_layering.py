"""The package's layering: imports follow the pipeline, scoring is pure, and only the store
knows a run directory's files.

    benchmark ← run → execution → scoring → diagnosis → report
                 └──────── store ─────────────┘

Every module of src/knowbench is parsed (not imported), so an import inside a function
counts as much as one at the top of a file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "knowbench"
# The files of a run (knowbench.store.directory names them); outside the store no code may
# spell them, so a reader cannot bypass RunDirectory by joining a path.
RUN_FILES = ("run.json", "run.sqlite", "samples.jsonl", "summary.json", "diagnoses.jsonl")
FILE_CALLS = ("open", "read_text", "write_text", "read_bytes", "write_bytes", "unlink", "mkdir")


@dataclass(frozen=True)
class Rule:
    """Modules under `scope` must not import any module under `forbidden`."""

    scope: str
    forbidden: tuple[str, ...]
    why: str


RULES = (
    Rule("knowbench.scoring",
         ("knowbench.run", "knowbench.models", "knowbench.report", "knowbench.diagnosis",
          "knowbench.store", "knowbench.methods", "knowbench.knowledge", "knowbench.builders",
          "knowbench.commands", "knowbench.cli", "asyncio", "sqlite3", "pathlib", "shutil",
          "tempfile", "socket", "httpx", "urllib"),
         "scoring is pure functions over records: no orchestration, models, files or network"),
    Rule("knowbench.diagnosis",
         ("knowbench.run", "knowbench.report", "knowbench.builders", "knowbench.commands",
          "knowbench.cli", "knowbench.store.database", "sqlite3"),
         "diagnosis reads a stored run through RunDirectory and feeds reports, never the reverse"),
    Rule("knowbench.report",
         ("knowbench.run", "knowbench.models", "knowbench.execution", "knowbench.builders",
          "knowbench.commands", "knowbench.cli", "knowbench.store.database", "sqlite3"),
         "reports read stored runs through RunDirectory; they never run, call models or execute"),
    Rule("knowbench.store",
         ("knowbench.run", "knowbench.report", "knowbench.diagnosis", "knowbench.models",
          "knowbench.builders", "knowbench.commands", "knowbench.cli"),
         "the store keeps records; it knows nothing of who writes or reads them"),
    Rule("knowbench.run",
         ("knowbench.report", "knowbench.diagnosis", "knowbench.builders", "knowbench.commands",
          "knowbench.cli", "sqlite3"),
         "a run writes through the store and is upstream of diagnosis and reports"),
    Rule("knowbench.execution",
         ("knowbench.run", "knowbench.scoring", "knowbench.diagnosis", "knowbench.report",
          "knowbench.store", "knowbench.builders", "knowbench.commands", "knowbench.cli"),
         "execution runs programs; it is called by the run and knows nothing downstream"),
    Rule("knowbench.benchmark",
         ("knowbench.run", "knowbench.execution", "knowbench.scoring", "knowbench.diagnosis",
          "knowbench.report", "knowbench.store", "knowbench.builders", "knowbench.commands",
          "knowbench.cli"),
         "the benchmark format is the shared input; builders write it and runs read it"),
)
# Where run files may not be named: everything that writes or reads runs except the store.
NO_RUN_FILE_NAMES = ("knowbench.run", "knowbench.cli", "knowbench.commands", "knowbench.scoring",
                     "knowbench.diagnosis", "knowbench.report")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): ast.parse(path.read_text(), filename=str(path))
           for path in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {_module_name(path) for path in PACKAGE.rglob("__init__.py")}


def imports_of(module: str, tree: ast.Module) -> set[str]:
    """Every module `module` imports, absolute; `from a import b` counts as `a` and `a.b`."""
    package = module if module in PACKAGES else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(modules: dict[str, ast.Module], rule: Rule) -> list[str]:
    return sorted(f"{module} imports {name}" for module, tree in modules.items()
                  if _within(module, rule.scope)
                  for name in imports_of(module, tree)
                  if any(_within(name, forbidden) for forbidden in rule.forbidden))


@pytest.mark.parametrize("rule", RULES, ids=[rule.scope for rule in RULES])
def test_imports_follow_the_pipeline(rule: Rule) -> None:
    assert any(_within(module, rule.scope) for module in MODULES), f"no module under {rule.scope}"
    assert violations(MODULES, rule) == [], rule.why


def test_scoring_reads_and_writes_no_files() -> None:
    calls = sorted(f"{module}:{node.lineno} calls {_called_name(node.func)}"
                   for module, tree in MODULES.items() if _within(module, "knowbench.scoring")
                   for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and _called_name(node.func) in FILE_CALLS)
    assert calls == [], "scoring takes records and returns records; diagnosis does the I/O"


def test_only_the_store_names_the_files_of_a_run() -> None:
    named = sorted(f"{module}:{node.lineno} names {node.value}"
                   for module, tree in MODULES.items()
                   if any(_within(module, scope) for scope in NO_RUN_FILE_NAMES)
                   for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and node.value in RUN_FILES)
    assert named == [], "open runs with knowbench.store.RunDirectory instead"


def test_the_store_is_where_the_run_files_are_named() -> None:
    # Guards the test above against passing because the names moved or were spelled anew.
    tree = MODULES["knowbench.store.directory"]
    names = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    database = {node.value for node in ast.walk(MODULES["knowbench.store.database"])
                if isinstance(node, ast.Constant)}
    assert set(RUN_FILES) <= names | database


def test_the_rules_see_function_level_and_relative_imports() -> None:
    snippet = {
        "knowbench.scoring.fake": ast.parse(
            "def f():\n    from knowbench.run import load\n"
            "from .. import models\nfrom . import metrics\n"),
        "knowbench.report.fake": ast.parse("import knowbench.run as r\n"),
    }
    scoring = next(rule for rule in RULES if rule.scope == "knowbench.scoring")
    report = next(rule for rule in RULES if rule.scope == "knowbench.report")
    assert violations(snippet, scoring) == ["knowbench.scoring.fake imports knowbench.models",
                                            "knowbench.scoring.fake imports knowbench.run",
                                            "knowbench.scoring.fake imports knowbench.run.load"]
    assert violations(snippet, report) == ["knowbench.report.fake imports knowbench.run"]


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
