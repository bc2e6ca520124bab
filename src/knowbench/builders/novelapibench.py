"""NovelAPIBench in knowbench's format: its tasks as function tasks carrying their knowledge
bundles, its model-conditional filters (C1/C2/C3, exclusions) as task metadata and instance
lists, and its bundle records both ways.

The release's layout (`data/benchmark/...`, `envs/locks/<library>.txt`) is read as published:

    data/benchmark/tasks.jsonl                   the tasks (may be absent: then none are built)
    data/benchmark/bundles.jsonl                 one knowledge bundle per api_name
    data/benchmark/filters/c1.jsonl              reference validity, shared by all models
    data/benchmark/filters/c2/<model>.jsonl      novelty for one backbone
    data/benchmark/filters/c3/<model>.jsonl      solvability with the full bundle
    data/benchmark/excluded_tasks.tsv            task_id<TAB>reason, shared by all models
    data/benchmark/instances/<model>.txt         the release's own instance lists
    data/benchmark/expected_calls.jsonl          reference call records (recorded, not checked)
    data/benchmark/manifest.json                 library versions (package name, new_version)

How a task runs. The release runs one flat script: an import of the target's module, its
target-call monitor (`test_harness.setup_code`), `context_code`, a binding of the target's bare
name, a reset of the call counter, the completion of the masked region, and `execution_test`
(which asserts the monitor installed and counted a call, then the scenario assertions). Here:

- `context` = `import <module of api_name>` + `context_code` + the bare-name binding;
- `prompt_code` = `def solution():` with a `...` body, `entry_point` = `solution`: the model
  writes the missing lines (as the body, or as a whole `def solution():`);
- `reference` = `def solution():` around `masked_region`;
- one test spec, `execution_test`, a plain block that installs knowbench's own target monitor
  (same behaviour and the same names `_target_api_call_count` / `_target_api_spy_installed`
  that the release's `execution_test` reads, so that text runs unchanged), then runs the
  completion with the release's flat-script semantics: it calls `solution()` and makes the
  names its body assigned module-level names of the test; when the body assigns a name the
  program already defines (`df = df.dropna()` after a context that made `df`) or declares a
  name global, a call would differ (UnboundLocalError), so the body runs as module-level code
  instead. Then it asserts the target was called and runs `execution_test` verbatim, after the
  release's two rewrites (a `test_execution()` defined but never called is called; a top-level
  `try` whose handlers only assert gets an `else` that fails).

The monitor is installed after the context has run (the release installs it before): it
therefore also replaces the target where the program's own namespace bound it (`from pkg import
f` in the context), and calls made by the context never count, as after the release's reset.
`setup_code` is not executed (it is the release's generated monitor, keyed by `api_name`); it is
kept in metadata with the other harness layers (`shape_type_test`, `mock_test`), which the
release's evaluator does not run either. Tasks are judged in-process, as the release judges
them (one script): the monitor and the completion's module-level names must share a process.
The release's call-record check (`expected_calls.jsonl`) is not applied: a knowbench pass is a
release pass without that check; each task's metadata says whether a usable record exists.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.schema import (
    BundleExample,
    BundleParameter,
    BundleSignature,
    FunctionTask,
    KnowledgeBundle,
    Manifest,
    Provenance,
    TestSpec,
)
from knowbench.errors import UserError, first_problem
from knowbench.jsonl import load_json, read_objects
from knowbench.parsing import compiles, parse_python

BENCHMARK_DIR = Path("data/benchmark")
IMPORT_REPORT = "import_report.json"
ENTRY_POINT = "solution"
TIME_LIMIT_S = 60.0  # the release's per-library wall timeouts; scipy/pandas imports are slow
_TASK_FIELDS = ("task_id", "api_name", "library", "domain", "description", "context_code", "masked_region",
                "test_harness")

# ------------------------------------------------------------------------------ the release


@dataclass
class Release:
    """The files found under a release directory (`root`, holding `data/benchmark`)."""

    root: Path
    benchmark: Path
    found: dict[str, Path] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def path(self, relative: str) -> Path:
        return self.benchmark / relative


def locate(source: Path) -> Release:
    """The release at `source`: a directory holding `data/benchmark/` (or that folder itself)."""
    source = Path(source)
    if not source.exists():
        raise UserError(f"{source}: no such directory\n  fix: pass the NovelAPIBench release's root "
                        "(the folder holding data/benchmark/)")
    if (source / BENCHMARK_DIR).is_dir():
        root, benchmark = source, source / BENCHMARK_DIR
    elif source.is_dir() and source.name == "benchmark" and source.parent.name == "data":
        root, benchmark = source.parent.parent, source
    else:
        raise UserError(f"{source}: holds no data/benchmark/ folder\n  fix: pass the NovelAPIBench release's "
                        "root, laid out as published (data/benchmark/filters/c1.jsonl, ...)")
    release = Release(root=root, benchmark=benchmark)
    for relative in ("tasks.jsonl", "bundles.jsonl", "filters/c1.jsonl", "excluded_tasks.tsv",
                     "expected_calls.jsonl", "manifest.json"):
        if release.path(relative).is_file():
            release.found[relative] = release.path(relative)
        else:
            release.missing.append(f"data/benchmark/{relative}")
    return release


def filter_models(release: Release) -> list[str]:
    """Every backbone with a C2 record file, sorted."""
    folder = release.path("filters/c2")
    return sorted(p.name.removesuffix(".jsonl") for p in folder.glob("*.jsonl")
                  if not p.name.endswith(".completions.jsonl")) if folder.is_dir() else []


def _records(path: Path, required: tuple[str, ...], unique: bool = True) -> dict[str, dict[str, Any]]:
    """Records by task_id, in file order; `UserError` naming the line of a bad one (and of a
    repeated task_id when `unique`; otherwise the last record wins)."""
    rows: dict[str, dict[str, Any]] = {}
    for number, row in read_objects(path):
        absent = [name for name in required if name not in row]
        if absent:
            raise UserError(f"{path}:{number}: field '{absent[0]}' is missing\n  fix: each record needs "
                            + ", ".join(required))
        if unique and row["task_id"] in rows:
            raise UserError(f"{path}:{number}: task_id {row['task_id']!r} appears twice")
        rows[row["task_id"]] = row
    return rows


def read_exclusions(path: Path) -> dict[str, str]:
    """`excluded_tasks.tsv`: task_id -> reason (header `task_id<TAB>reason`)."""
    lines = path.read_text().splitlines()
    if not lines or lines[0].split("\t")[:2] != ["task_id", "reason"]:
        raise UserError(f"{path}:1: expected the header 'task_id<TAB>reason'")
    excluded: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip():
            raise UserError(f"{path}:{number}: expected 'task_id<TAB>reason'")
        excluded[parts[0].strip()] = parts[1].strip()
    return excluded


@dataclass
class Filters:
    """One backbone's filter records: C1 (shared), C2 and C3 (its own), exclusions (shared)."""

    model: str
    c1: dict[str, dict[str, Any]]
    c2: dict[str, dict[str, Any]]
    c3: dict[str, dict[str, Any]]
    excluded: dict[str, str]

    def outcome(self, task_id: str) -> dict[str, Any]:
        """What each filter said about `task_id` (None: the task never reached that filter)."""
        c1, c2, c3 = self.c1.get(task_id), self.c2.get(task_id), self.c3.get(task_id)
        return {
            "c1_passed": None if c1 is None else bool(c1.get("passed")),
            "c2_novel": None if c2 is None else bool(c2.get("novel")),
            "c2_fail_count": None if c2 is None else c2.get("fail_count"),
            "c3_passed": None if c3 is None else bool(c3.get("passed")),
            "excluded": self.excluded.get(task_id),
            "instance": task_id in self.instance_set(),
        }

    def instance(self) -> list[str]:
        """instance(model) = {C1 passed} ∩ {C2 novel} ∩ {C3 passed} minus the exclusions, in C1 order."""
        return [task_id for task_id, row in self.c1.items()
                if row.get("passed") is True
                and self.c2.get(task_id, {}).get("novel") is True
                and self.c3.get(task_id, {}).get("passed") is True
                and task_id not in self.excluded]

    @functools.cached_property
    def _instance_set(self) -> frozenset[str]:
        return frozenset(self.instance())

    def instance_set(self) -> frozenset[str]:
        return self._instance_set


def read_filters(release: Release, model: str) -> Filters:
    """The filter records of backbone `model`; `UserError` when its C2/C3 files are absent."""
    c1_path = release.path("filters/c1.jsonl")
    c2_path, c3_path = release.path(f"filters/c2/{model}.jsonl"), release.path(f"filters/c3/{model}.jsonl")
    for needed in (c1_path, c2_path, c3_path):
        if not needed.is_file():
            known = ", ".join(filter_models(release)) or "none"
            raise UserError(f"{needed}: missing, so the filters of {model!r} cannot be read\n"
                            f"  fix: pass --model with one of the release's backbones ({known})")
    excluded_path = release.path("excluded_tasks.tsv")
    return Filters(
        model=model,
        c1=_records(c1_path, ("task_id", "passed")),
        c2=_records(c2_path, ("task_id", "novel")),
        c3=_records(c3_path, ("task_id", "passed")),
        excluded=read_exclusions(excluded_path) if excluded_path.is_file() else {},
    )


def released_instance(release: Release, model: str) -> list[str] | None:
    """The release's own `instances/<model>.txt` (ids in file order), or None when absent."""
    path = release.path(f"instances/{model}.txt")
    if not path.is_file():
        return None
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------ bundles

# Release bundle keys, in the release's order; knowbench maps s_name/s_param/return_type to S,
# examples to E, mechanism.text to M and implementation to C, and keeps the rest in `extra`.
BUNDLE_KEYS = ("api_name", "library", "domain", "s_name", "s_param", "return_type", "examples", "mechanism",
               "implementation", "is_modified", "old_signature", "old_parameters", "requires_file_io")
_STATUS_IN = {"executed": "passed", "static": "not_run", "failed": "failed"}
_STATUS_OUT = {value: key for key, value in _STATUS_IN.items()}
_MECHANISM_KEYS = ("text", "grounding", "references", "source_summary", "changelog_notes")


def bundle_from_record(record: dict[str, Any]) -> KnowledgeBundle:
    """A release `bundles.jsonl` record as a `KnowledgeBundle`. Raises ValueError when it cannot be
    one (a missing `s_name`, an unknown example status, a field of the wrong type).

    Fields knowbench does not interpret (library, domain, the mechanism's grounding, references,
    source summary and changelog notes, is_modified, old_signature, old_parameters,
    requires_file_io, any key the release adds) are kept in `extra` so `bundle_to_record`
    gives the record back."""
    if not isinstance(record.get("s_name"), str):
        raise ValueError("field 's_name' is missing or not a string")
    try:
        parameters = [BundleParameter(name=p["name"], type=p.get("type"), default=p.get("default"),
                                      description=p.get("description") or "", constraints=p.get("constraints"))
                      for p in record.get("s_param") or []]
        examples = []
        for example in record.get("examples") or []:
            status = example.get("status")
            if status not in _STATUS_IN:
                raise ValueError(f"example status {status!r} is none of {sorted(_STATUS_IN)}")
            examples.append(BundleExample(code=example["code"], status=_STATUS_IN[status],
                                          note=example.get("reason")))
        mechanism = record.get("mechanism")
        mechanism = mechanism if isinstance(mechanism, dict) else {"text": mechanism or ""}
        extra: dict[str, Any] = {key: value for key, value in record.items()
                                 if key not in ("s_name", "s_param", "return_type", "examples", "mechanism",
                                                "implementation")}
        extra["mechanism"] = {key: value for key, value in mechanism.items() if key != "text"}
        for key in ("s_param", "examples"):
            if key in record and record[key] is None:
                extra[f"{key}_null"] = True
        if "mechanism" not in record:
            extra["mechanism_absent"] = True
        return KnowledgeBundle(
            signature=BundleSignature(qualified_name=record["s_name"], parameters=parameters,
                                      returns=record.get("return_type")),
            examples=examples, mechanism=mechanism.get("text") or "",
            source=record.get("implementation") or "", extra=extra)
    except (KeyError, TypeError) as error:
        raise ValueError(f"malformed bundle record: {error!r}") from None
    except ValidationError as error:
        raise ValueError(first_problem(error)) from None


def bundle_to_record(bundle: KnowledgeBundle, api_name: str | None = None) -> dict[str, Any]:
    """A `KnowledgeBundle` as a release `bundles.jsonl` record (keys in the release's order).

    A bundle imported from the release gives its record back field for field. One made by
    knowbench has no library/domain/old-signature facts: those come out as the release's
    empty values (library = first component of the name, is_modified false, nulls)."""
    extra = dict(bundle.extra)
    name = api_name or extra.get("api_name") or bundle.signature.qualified_name
    mechanism_extra = dict(extra.pop("mechanism", {}) or {})
    s_param_null, examples_null = extra.pop("s_param_null", False), extra.pop("examples_null", False)
    mechanism_absent = extra.pop("mechanism_absent", False)
    mechanism = {"text": bundle.mechanism}
    for key in _MECHANISM_KEYS[1:]:
        mechanism[key] = mechanism_extra.pop(key, [] if key == "references" else None)
    mechanism.update(mechanism_extra)
    values: dict[str, Any] = {
        "api_name": name,
        "library": extra.pop("library", name.split(".")[0]),
        "domain": extra.pop("domain", None),
        "s_name": bundle.signature.qualified_name,
        "s_param": None if s_param_null else [
            {"name": p.name, "type": p.type, "default": p.default, "description": p.description,
             "constraints": p.constraints} for p in bundle.signature.parameters],
        "return_type": bundle.signature.returns,
        "examples": None if examples_null else [
            {"code": e.code, "status": _STATUS_OUT[e.status], "reason": e.note} for e in bundle.examples],
        "mechanism": mechanism,
        "implementation": bundle.source,
        "is_modified": extra.pop("is_modified", False),
        "old_signature": extra.pop("old_signature", None),
        "old_parameters": extra.pop("old_parameters", None),
        "requires_file_io": extra.pop("requires_file_io", False),
    }
    extra.pop("api_name", None)
    record = {key: values[key] for key in BUNDLE_KEYS}
    if mechanism_absent:
        del record["mechanism"]
    record.update(extra)  # keys the release added that knowbench does not know, last
    return record


def read_bundles(path: Path) -> tuple[dict[str, KnowledgeBundle], list[dict[str, Any]]]:
    """`bundles.jsonl`: api_name -> bundle, and the records that could not be read (line, reason)."""
    bundles: dict[str, KnowledgeBundle] = {}
    bad: list[dict[str, Any]] = []
    for number, record in read_objects(path):
        api = record.get("api_name") or record.get("s_name")
        try:
            if not isinstance(api, str):
                raise ValueError("field 'api_name' is missing")
            bundles[api] = bundle_from_record(record)
        except ValueError as error:
            bad.append({"line": number, "api_name": api, "reason": str(error)})
    return bundles, bad


def export_bundles(benchmark: Path, out: Path) -> dict[str, Any]:
    """Write the bundles of `benchmark`'s tasks as release records (`bundles.jsonl`), one per
    target API (the first task's bundle when several tasks share an API)."""
    from knowbench.benchmark.load import load_benchmark

    bench = load_benchmark(benchmark)
    seen: dict[str, KnowledgeBundle] = {}
    without = 0
    for task in bench.tasks:
        if not isinstance(task, FunctionTask) or task.bundle is None:
            without += 1
            continue
        api = task.target_api or task.bundle.signature.qualified_name
        seen.setdefault(api, task.bundle)
    if not seen:
        raise UserError(f"{benchmark}: no task carries a knowledge bundle, so there is nothing to export")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as handle:
        for api, bundle in seen.items():
            handle.write(json.dumps(bundle_to_record(bundle, api), ensure_ascii=False) + "\n")
    return {"written": len(seen), "tasks_without_bundle": without, "out": str(out)}


# ------------------------------------------------------------------------------ tasks


def requirement_for(release: Release, library: str) -> str | None:
    """The pip requirement of `library` pinned as the release ran it: its own line in
    `envs/locks/<library>.txt`, else (a lock that only says the library runs in the main
    environment) the `pkg==version` it names or the manifest's `new_version`."""
    package, version = library, None
    manifest = release.path("manifest.json")
    if manifest.is_file():
        entry = (load_json(manifest.read_text()).get("libraries") or {}).get(library) or {}
        package, version = entry.get("package") or library, entry.get("new_version")
    lock = release.root / "envs" / "locks" / f"{library}.txt"
    wanted = {_norm(package), _norm(library)}
    if lock.is_file():
        for line in lock.read_text().splitlines():
            text = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==(\S+)", text)
            if match and _norm(match.group(1)) in wanted:
                return text
        for match in re.finditer(r"([A-Za-z0-9_.\-]+)==([0-9][^\s,;)]*)", lock.read_text()):
            if _norm(match.group(1)) in wanted:
                return f"{match.group(1)}=={match.group(2).rstrip('.')}"
    return f"{package}=={version}" if version else None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_import(api_name: str) -> str:
    module = api_name.rpartition(".")[0]
    return f"import {module}" if module else ""


def _leaf_binding(api_name: str) -> str:
    module, _, leaf = api_name.rpartition(".")
    if not module or not leaf.isidentifier():
        return ""
    return (f"try:\n    {leaf}\nexcept NameError:\n    try:\n        from {module} import {leaf}\n"
            f"    except Exception:\n        pass")


def release_test_rewrites(code: str) -> str:
    """The release evaluator's two rewrites of an `execution_test`, as its code applies them
    (its README summarises the second more narrowly):

    - `def test_execution(` defined, and no top-level statement calls `test_execution()`
      (a call inside `if __name__ == "__main__":` does not count): the call is appended;
    - a top-level `try` with a typed `except` (a bare `except:` does not count), an `assert`
      anywhere in the statement and no `else`: an `else` that fails is added (the exception
      it expected was not raised). Not added to a `try` that has a `finally`."""
    tree = parse_python(code)
    changed = False
    for node in tree.body:
        if isinstance(node, ast.Try) and not node.orelse and not node.finalbody \
                and any(handler.type is not None for handler in node.handlers) \
                and any(isinstance(inner, ast.Assert) for inner in ast.walk(node)):
            node.orelse = parse_python("raise AssertionError('the expected exception was not raised')").body
            changed = True
    defined = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "test_execution"
                  for n in ast.walk(tree))
    called = any(isinstance(top, ast.Expr) and isinstance(top.value, ast.Call) and not top.value.args
                 and not top.value.keywords and isinstance(top.value.func, ast.Name)
                 and top.value.func.id == "test_execution" for top in tree.body)
    if defined and not called:
        tree.body.append(parse_python("test_execution()").body[0])
        changed = True
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if changed else code


def cli_argv(code: str) -> list[str] | None:
    """The command-line arguments the release gives a task's script: the first literal list of
    strings passed to a `parse_args(...)` / `parse_args_into_dataclasses(...)` call (positionally
    or as `args=`) in its `execution_test`; None when there is none."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in ("parse_args", "parse_args_into_dataclasses"):
            continue
        for value in [*node.args[:1], *(k.value for k in node.keywords if k.arg == "args")]:
            if isinstance(value, ast.List | ast.Tuple) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
                return [e.value for e in value.elts]
    return None


# The test block: knowbench's own target monitor, the completion run as module-level code, the
# call check, then the release's execution_test. Written for knowbench; the names
# `_target_api_call_count` / `_target_api_spy_installed` are the interface the release's
# execution_test reads.
_RUNNER = '''\
import ast as _kb_ast
import importlib as _kb_importlib
import inspect as _kb_inspect
import symtable as _kb_symtable
import sys as _kb_sys
import textwrap as _kb_textwrap

_kb_api = {api!r}
_target_api_call_count = [0]
_target_api_spy_installed = False


def _kb_install_monitor(api, program):
    parts = api.split(".")
    module, split = None, 0
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module, split = _kb_importlib.import_module(".".join(parts[:cut])), cut
            break
        except ImportError:
            continue
    if module is None:
        return False
    owner = module
    for name in parts[split:-1]:
        owner = getattr(owner, name)
    original = getattr(owner, parts[-1])
    if isinstance(original, type):
        class spy(original):
            def __init__(self, *args, **kwargs):
                _target_api_call_count[0] += 1
                super().__init__(*args, **kwargs)

            def __init_subclass__(cls, **kwargs):
                _target_api_call_count[0] += 1
                super().__init_subclass__(**kwargs)
        spy.__name__, spy.__qualname__ = original.__name__, original.__qualname__
        spy.__module__ = getattr(original, "__module__", spy.__module__)
    else:
        def spy(*args, **kwargs):
            _target_api_call_count[0] += 1
            return original(*args, **kwargs)
        try:
            spy.__wrapped__ = original
        except Exception:
            pass
    tops = {{parts[0], (getattr(original, "__module__", None) or parts[0]).split(".")[0]}}
    for name, loaded in list(_kb_sys.modules.items()):
        if loaded is None or name.split(".")[0] not in tops:
            continue
        try:
            attributes = list(vars(loaded))
        except TypeError:
            continue
        for attribute in attributes:
            try:
                if getattr(loaded, attribute, None) is original:
                    setattr(loaded, attribute, spy)
            except Exception:
                continue
    for namespace in (program, globals()):
        for key, value in list(namespace.items()):
            if value is original:
                namespace[key] = spy
    return True


try:
    _target_api_spy_installed = _kb_install_monitor(_kb_api, {entry}.__globals__)
except Exception:
    _target_api_spy_installed = False
assert _target_api_spy_installed, "target-API monitor failed to install for " + _kb_api

# the release runs its script as a file: `__name__` is "__main__" for the completion and the test
_kb_program = {entry}.__globals__
_kb_names_before = (_kb_program.get("__name__"), globals().get("__name__"))
_kb_program["__name__"] = globals()["__name__"] = "__main__"
_kb_argv_before = list(_kb_sys.argv)
_kb_sys.argv = ["solution.py", *{argv!r}]
_kb_source = _kb_textwrap.dedent(_kb_inspect.getsource({entry}))
_kb_function = _kb_symtable.symtable(_kb_source, "<completion>", "exec").get_children()[0]
_kb_shadowing = any(symbol.is_declared_global() or (symbol.is_local() and symbol.get_name() in globals())
                    for symbol in _kb_function.get_symbols())
if _kb_shadowing:
    # it rebinds a name the program defined (or declares one global): run the body as
    # module-level code, as the release's flat script does (a call would raise UnboundLocalError)
    _kb_body = list(_kb_ast.parse(_kb_source).body[0].body)
    if _kb_body and isinstance(_kb_body[-1], _kb_ast.Return):
        _kb_body[-1] = _kb_ast.Expr(_kb_body[-1].value or _kb_ast.Constant(None))
    _kb_module = _kb_ast.fix_missing_locations(_kb_ast.Module(body=_kb_body, type_ignores=[]))
    exec(compile(_kb_module, "<completion>", "exec"), globals())
else:
    # call it, and make the names it assigned module-level names, as the flat script has them
    _kb_names = {{}}
    _kb_code = {entry}.__code__

    def _kb_keep(frame, event, arg):
        if event == "return" and frame.f_code is _kb_code:
            _kb_names.update(frame.f_locals)

    _kb_sys.setprofile(_kb_keep)
    try:
        {entry}()
    finally:
        _kb_sys.setprofile(None)
    globals().update(_kb_names)
    globals()["__name__"] = "__main__"

assert _target_api_call_count[0] > 0, "the completion did not call the target API " + _kb_api
try:
    exec(compile({test!r}, "<execution_test>", "exec"), globals())
finally:
    _kb_program["__name__"], globals()["__name__"] = _kb_names_before
    _kb_sys.argv = _kb_argv_before
'''


def test_block(api_name: str, execution_test: str) -> str:
    """The code of a task's one test spec (see the module docstring)."""
    return _RUNNER.format(api=api_name, entry=ENTRY_POINT, test=release_test_rewrites(execution_test),
                          argv=cli_argv(execution_test) or [])


def task_from_row(row: dict[str, Any], bundle: KnowledgeBundle | None = None) -> FunctionTask:
    """One `tasks.jsonl` row as a function task. Raises ValueError when it cannot be one."""
    for required in _TASK_FIELDS:
        if required not in row:
            raise ValueError(f"field '{required}' is missing")
    wrong = [key for key in ("task_id", "api_name", "library", "domain", "description", "masked_region")
             if not isinstance(row[key], str)]
    if wrong or not isinstance(row["context_code"], str | None):
        raise ValueError(f"field '{(wrong or ['context_code'])[0]}' must be a string")
    harness = row["test_harness"]
    if not isinstance(harness, dict) or not isinstance(harness.get("execution_test"), str) \
            or not harness["execution_test"].strip():
        raise ValueError("field 'test_harness.execution_test' is missing or empty")
    api = row["api_name"]
    target = harness.get("target_api") or api
    if target != api:
        raise ValueError(f"test_harness.target_api {target!r} differs from api_name {api!r}")
    try:
        parse_python(harness["execution_test"])
    except SyntaxError as error:
        raise ValueError(f"test_harness.execution_test does not parse: {error.msg} (line {error.lineno})") from None
    masked = textwrap.dedent(row["masked_region"]).strip("\n")
    body = textwrap.indent(masked, "    ") if masked.strip() else "    pass"
    reference = f"def {ENTRY_POINT}():\n{body}\n"
    try:
        compiles(reference, "<masked_region>")
    except SyntaxError as error:
        raise ValueError(f"masked_region is not a valid block: {error.msg} (line {error.lineno})") from None
    context = "\n\n".join(part for part in (_module_import(api), (row["context_code"] or "").strip("\n"),
                                            _leaf_binding(api)) if part)
    instruction = (row["description"].strip() + "\n\nWrite the missing lines as the body of `solution()`; "
                   "they run as top-level code after the context, and the names they assign are what the "
                   "tests check.")
    metadata = {
        "dataset": "NovelAPIBench", "api_name": api, "library": row["library"],
        "reference_solution": row.get("reference_solution"),
        "harness": {key: value for key, value in harness.items() if key not in ("execution_test",)},
    }
    return FunctionTask(
        task_id=row["task_id"], domain=row["domain"], framework=row["library"], difficulty=row.get("difficulty"),
        instruction=instruction, prompt_code=f"def {ENTRY_POINT}():\n    ...\n", entry_point=ENTRY_POINT,
        context=context, reference=reference,
        tests=[TestSpec(name="execution_test", code=test_block(api, harness["execution_test"]))],
        target_api=api, knowledge_apis=[api], bundle=bundle, isolation="in-process", metadata=metadata)


# ------------------------------------------------------------------------------ the importer


def import_release(source: Path, out: Path, *, model: str | None = None, instance: bool = False,
                   name: str = "novelapibench") -> dict[str, Any]:
    """Import the NovelAPIBench release at `source` into `out`.

    Writes a benchmark (`benchmark.json`, `tasks.jsonl`) when `tasks.jsonl` is there, and always
    `import_report.json` (what was read, left out and missing), `filters.jsonl` (per task and
    backbone, what C1/C2/C3 and the exclusions said), `instances/<model>.txt` (each backbone's
    instance rebuilt from the filter records, in C1 order) and `bundles.jsonl` (the release's
    bundles, as knowbench `KnowledgeBundle` records keyed by api_name). `model` restricts the filters to
    one backbone (default: every backbone with C2 records); `instance` keeps only the tasks of
    that backbone's instance. Raises `UserError` when the release holds nothing usable."""
    release = locate(source)
    models = filter_models(release)
    if model is not None:
        models = [model]
    elif instance:
        raise UserError("--instance keeps the tasks of one backbone's instance: name it with --model "
                        f"(backbones with filter records: {', '.join(filter_models(release)) or 'none'})")
    filters = {m: read_filters(release, m) for m in models} if "filters/c1.jsonl" in release.found else {}
    if model is not None and not filters:
        raise UserError(f"{release.path('filters/c1.jsonl')}: missing, so the filters of {model!r} cannot be read")
    bundles, bad_bundles = read_bundles(release.found["bundles.jsonl"]) if "bundles.jsonl" in release.found \
        else ({}, [])
    calls = _records(release.found["expected_calls.jsonl"], ("task_id",), unique=False) \
        if "expected_calls.jsonl" in release.found else {}
    if not filters and not bundles and "tasks.jsonl" not in release.found:
        raise UserError(f"{release.root}: nothing usable: no tasks.jsonl, no bundles.jsonl, no filter records\n"
                        f"  missing: {', '.join(release.missing)}")
    out.mkdir(parents=True, exist_ok=True)

    instances: dict[str, Any] = {}
    for m, chosen in filters.items():
        rebuilt, released = chosen.instance(), released_instance(release, m)
        (out / "instances").mkdir(exist_ok=True)
        (out / "instances" / f"{m}.txt").write_text("".join(f"{task_id}\n" for task_id in rebuilt))
        instances[m] = {
            "c1_passed": sum(r.get("passed") is True for r in chosen.c1.values()),
            "c2_novel": sum(r.get("novel") is True for t, r in chosen.c2.items()
                            if chosen.c1.get(t, {}).get("passed") is True),
            "c3_passed": sum(r.get("passed") is True for r in chosen.c3.values()),
            "excluded_among_c3_passed": sum(t in chosen.excluded for t, r in chosen.c3.items()
                                            if r.get("passed") is True),
            "rebuilt": len(rebuilt),
            "released": None if released is None else len(released),
            "equal_to_released": None if released is None else set(rebuilt) == set(released),
        }
        if released is not None and set(rebuilt) != set(released):
            instances[m]["only_rebuilt"] = sorted(set(rebuilt) - set(released))
            instances[m]["only_released"] = sorted(set(released) - set(rebuilt))
    filter_ids = list(dict.fromkeys(t for chosen in filters.values() for t in chosen.c1))
    with (out / "filters.jsonl").open("w") as handle:
        for task_id in filter_ids:
            handle.write(json.dumps({"task_id": task_id,
                                     "api_name": next(c.c1[task_id].get("api_name") for c in filters.values()),
                                     "filters": {m: c.outcome(task_id) for m, c in filters.items()}}) + "\n")
    with (out / "bundles.jsonl").open("w") as handle:
        for api, bundle in bundles.items():
            handle.write(json.dumps({"api_name": api, "bundle": bundle.model_dump(mode="json")},
                                    ensure_ascii=False) + "\n")

    report: dict[str, Any] = {
        "source": str(release.root), "found": sorted(f"data/benchmark/{k}" for k in release.found),
        "missing": release.missing, "models": models, "instances": instances,
        "bundles": len(bundles), "bundles_left_out": bad_bundles, "filter_records": len(filter_ids),
        "expected_calls": len(calls), "tasks": None, "imported": 0, "left_out": [],
    }
    if "tasks.jsonl" in release.found:
        report.update(_import_tasks(release, out, name, filters, bundles, calls, model if instance else None))
    else:
        report["note"] = ("data/benchmark/tasks.jsonl is absent: no benchmark was written (bundles, filter "
                          "outcomes and instances only)")
    (out / IMPORT_REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _import_tasks(release: Release, out: Path, name: str, filters: dict[str, Filters],
                  bundles: dict[str, KnowledgeBundle], calls: dict[str, dict[str, Any]],
                  instance_of: str | None) -> dict[str, Any]:
    path = release.found["tasks.jsonl"]
    kept: list[FunctionTask] = []
    left_out: list[dict[str, Any]] = []
    requirements: dict[str, str | None] = {}
    rows = read_objects(path)
    keep = filters[instance_of].instance_set() if instance_of else None
    seen: Counter[str] = Counter()
    for number, row in rows:
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            left_out.append({"line": number, "task_id": None, "reason": "field 'task_id' is missing"})
            continue
        seen[task_id] += 1
        if seen[task_id] > 1:
            left_out.append({"line": number, "task_id": task_id, "reason": "task_id repeats an earlier line"})
            continue
        if keep is not None and task_id not in keep:
            continue
        try:
            task = task_from_row(row, bundles.get(row.get("api_name", "")))
        except (ValueError, ValidationError) as error:
            reason = first_problem(error)
            left_out.append({"line": number, "task_id": task_id, "reason": reason})
            continue
        record = calls.get(task_id)
        extra = {"filters": {m: c.outcome(task_id) for m, c in filters.items()},
                 "call_record": None if record is None else record.get("status")}
        task = task.model_copy(update={"metadata": {**task.metadata, **extra}})
        library = row["library"]
        if library not in requirements:
            requirements[library] = requirement_for(release, library)
        kept.append(task)
    if not kept:
        raise UserError(f"{path}: no task could be imported ({len(left_out)} left out"
                        + (f"; first: line {left_out[0]['line']}: {left_out[0]['reason']}" if left_out else "")
                        + (f"; --instance kept only the {len(keep)} instance ids of {instance_of}" if keep else "")
                        + ")")
    pins = sorted({pin for pin in requirements.values() if pin})
    versions = {pin.split("==")[0]: pin.split("==")[1] for pin in pins}
    hashes = {"tasks.jsonl (release)": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()}
    for library in requirements:
        lock = release.root / "envs" / "locks" / f"{library}.txt"
        if lock.is_file():
            hashes[f"envs/locks/{library}.txt"] = "sha256:" + hashlib.sha256(lock.read_bytes()).hexdigest()
    domains = list(dict.fromkeys(task.domain for task in kept))
    manifest = Manifest(
        name=name, description="NovelAPIBench tasks imported by knowbench (see import_report.json)",
        domains=domains, requirements=pins, time_limit_s=TIME_LIMIT_S,
        provenance=Provenance(source=str(release.root), tool=f"knowbench {__version__}", versions=versions,
                              hashes=hashes))
    write_benchmark(out, manifest, kept)
    return {"tasks": len(rows), "imported": len(kept), "left_out": left_out, "requirements": pins,
            "unpinned_libraries": sorted(lib for lib, pin in requirements.items() if not pin),
            "per_library": dict(Counter(task.framework or "" for task in kept)),
            "instance_of": instance_of}
