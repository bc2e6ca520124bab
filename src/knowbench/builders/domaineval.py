"""DomainEval in knowbench's format: its subjects as a benchmark, its released responses as
replay samples, and a comparison of knowbench's verdicts with the ones it recorded.

A subject (`subjects/<Domain>/<repo>.jsonl`, one JSON object per line) becomes a function
task: `prompt_code` is its `method_code_mask` with `[MASK]` written as `...` (DomainEval
shows the model no docstring), `reference` is the target's definition cut from
`method_code`, and each `test_code_list` entry is a test spec. DomainEval's harness runs
`code_start + response + test_code` as one script, and every test code ends with a call
that runs its one test (`PrimeTest().test_is_prime()`); knowbench runs the test items
itself, so that call is dropped when it calls a test the runner will find (it is kept
otherwise, and the spec stays one plain block, exactly as DomainEval ran it). The tests
are otherwise imported as released: a test that rebinds the target by importing the
library's own function is *not* repaired, so that `knowbench certify` can show it.

The libraries the subjects import were not versioned by the release. Their versions are
chosen by `knowbench.builders.versions` (an override file, else the source's recorded pins
where they install on this Python, else the last release before the dataset's date, 2024-07-11,
that installs on it); a library counts as available only when it really imports in the built
environment. Every decision is in `import_report.json` and the manifest's provenance.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import load_benchmark, sha256_bytes, write_benchmark
from knowbench.benchmark.schema import (
    FunctionTask,
    Manifest,
    Provenance,
    TestSpec,
    find_definition,
    source_metadata,
)
from knowbench.builders.apis import code_apis
from knowbench.builders.requirements import imported_modules, third_party
from knowbench.builders.versions import (
    DEFAULT_DATE,
    Resolution,
    Resolver,
    choose_versions,
    read_pins,
)
from knowbench.errors import UserError
from knowbench.execution.environments import BenchEnv, ensure_env
from knowbench.jsonl import load_json, read_objects
from knowbench.parsing import parse_python
from knowbench.paths import check_output

DATASET_VERSION = "domaineval_20240711"
MASK = re.compile(r"\[\s*M\s*A\s*S\s*K\s*\]")  # DomainEval's formatter wrapped it anywhere: "[\n    MASK]", "[MA\nSK]"
IMPORT_REPORT = "import_report.json"
TIME_LIMIT_S = 30.0  # xarray-level imports take seconds on a slow core; DomainEval recorded none

Progress = Callable[[str], None]


# ------------------------------------------------------------------------------ subjects


def subject_files(path: Path) -> list[Path]:
    """The `<Domain>/<repo>.jsonl` files at `path` (a file, or a directory searched deeply)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.rglob("*.jsonl"))
        if files:
            return files
        raise UserError(f"{path}: holds no .jsonl files\n  fix: pass DomainEval's subjects/ directory "
                        "or one subjects/<Domain>/<repo>.jsonl file")
    raise UserError(f"{path}: no such file or directory")


def _rows(file: Path) -> list[dict[str, Any]]:
    return [row for _, row in read_objects(file)]


def subject_key(domain: str, repository: str, full_method_name: str, masked: str) -> str:
    """What identifies a subject across DomainEval's files (subjects, responses, results).

    Two subjects may share it (the same method and mask in two modules): the n-th of them in
    file order gets `@n` appended (`_unique`), in the subjects and in the files joined to them."""
    digest = hashlib.sha256(masked.encode()).hexdigest()[:16]
    return f"{domain}/{repository}/{full_method_name}/{digest}"


def _identifier(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:/@+-]", "_", text)


def subject_to_task(row: dict[str, Any], domain: str, repository: str, task_id: str,
                    unshadow: bool = False) -> FunctionTask:
    """One DomainEval subject as a function task. Raises ValueError when it cannot be one.

    With `unshadow`, test code that rebinds the target's name (importing the library's own
    function) or reaches it through its module (`rsa.common.byte_size(...)`) is rewritten
    to call the candidate (see `unshadow_test`).

    DomainEval ran each test code as its own script ending in `Cls().test_x()`: the task
    records that invocation (`direct`: no set-up, a fresh process per test)."""
    for required in ("full_method_name", "method_code", "method_code_mask", "test_code_list", "instruction"):
        if required not in row:
            raise ValueError(f"field '{required}' is missing")
    masked: str = row["method_code_mask"]
    if len(MASK.findall(masked)) != 1:
        raise ValueError("method_code_mask must hold exactly one [MASK]")
    prompt_code = MASK.sub("...", masked)
    entry_point = row["full_method_name"]
    anomalies = []
    method_tree = parse_python(row["method_code"])
    if find_definition(method_tree, entry_point) is None and \
            find_definition(method_tree, row.get("method_name", "")) is not None:
        anomalies.append(f"full_method_name {entry_point!r} names no definition; method_name "
                         f"{row['method_name']!r} does (DomainEval traced an attribute of a fixture)")
        entry_point = row["method_name"]
    node = find_definition(method_tree, entry_point)
    if node is None:
        raise ValueError(f"method_code defines no {entry_point!r}")
    lines = row["method_code"].splitlines()
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    reference = textwrap.dedent("\n".join(lines[start - 1: node.end_lineno]))
    tests, stripped, rewired = [], 0, 0
    futures = set()
    target_module = _module_of(row.get("method_path", ""), repository)
    for index, entry in enumerate(row["test_code_list"], start=1):
        code, removed = strip_trailing_call(entry["test_code"])
        stripped += removed
        if unshadow:
            code, changes = unshadow_test(code, entry_point.split(".")[0], target_module)
            rewired += changes
        futures.add(entry.get("code_start", "").strip())
        tests.append(TestSpec(name=f"test{index}-{Path(entry.get('test_path', 'test.py')).name}", code=code))
    context = "\n".join(sorted(f for f in futures if f))
    source_path = _repository_path(row.get("method_path", ""), repository)
    metadata = {
        **source_metadata(source_path, module=target_module),
        "dataset": DATASET_VERSION, "repository": repository, "method_name": row.get("method_name"),
        "full_method_name": row["full_method_name"],
        "method_path": _srcdata_path(row.get("method_path", "")),
        "test_paths": [_srcdata_path(e.get("test_path", "")) for e in row["test_code_list"]],
        "trailing_calls_removed": stripped, "anomalies": anomalies, "unshadowed_references": rewired,
        "key": subject_key(domain, repository, row["full_method_name"], masked),
    }
    apis = code_apis(row["method_code"], entry_point, target_module or None,
                     source_path.endswith("/__init__.py") or source_path == "__init__.py", node)
    return FunctionTask(task_id=task_id, domain=domain, framework=repository, instruction=row["instruction"],
                        prompt_code=prompt_code, entry_point=entry_point, context=context, reference=reference,
                        tests=tests, metadata=metadata, invocation="direct", knowledge_apis=apis)


def _repository_path(method_path: str, repository: str) -> str:
    """`.../srcdata/Cryptography/python-rsa/rsa/common.py` -> `rsa/common.py`: the path inside
    the subject's repository, where a corpus built from that repository has it."""
    relative = _srcdata_path(method_path)
    marker = f"/{repository}/"
    if marker in f"/{relative}":
        relative = f"/{relative}".split(marker, 1)[1]
    return relative


def _module_of(method_path: str, repository: str) -> str:
    """`.../srcdata/Cryptography/python-rsa/rsa/common.py` -> `rsa.common` (src/ and lib/
    layouts, and packages' `__init__.py`, included)."""
    parts = _repository_path(method_path, repository).removesuffix(".py").split("/")
    if parts and parts[-1] == "__init__":
        parts.pop()
    if parts and parts[0] in ("src", "lib"):
        parts.pop(0)
    return ".".join(parts)


def unshadow_test(code: str, top: str, target_module: str) -> tuple[str, int]:
    """Rewire a test to the candidate: drop imports binding the target's name `top` and turn
    `<target_module>.<top>` references (through any import alias) into the bare name.
    Returns (code, changes); the code is unchanged when nothing needed it."""
    tree = parse_python(code)
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    changes = 0

    class Rewire(ast.NodeTransformer):
        def visit_Import(self, node: ast.Import) -> ast.AST | None:
            return self._prune(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
            return self._prune(node)

        def _prune(self, node: ast.Import | ast.ImportFrom) -> ast.AST | None:
            nonlocal changes
            kept = [a for a in node.names if (a.asname or a.name.split(".")[0]) != top]
            changes += len(node.names) - len(kept)
            if not kept:
                return ast.Pass()
            node.names = kept
            return node

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            nonlocal changes
            if node.attr == top and isinstance(node.ctx, ast.Load) and _dotted(node.value, modules) == target_module:
                changes += 1
                return ast.copy_location(ast.Name(top, ast.Load()), node)
            self.generic_visit(node)
            return node

    if not target_module:
        return code, 0
    rewired = Rewire().visit(tree)
    return (ast.unparse(ast.fix_missing_locations(rewired)) + "\n", changes) if changes else (code, 0)


def _dotted(expr: ast.expr, modules: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.insert(0, expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name) or expr.id not in modules:
        return None
    return ".".join([modules[expr.id], *parts])


def _srcdata_path(path: str) -> str:
    """`.../srcdata/Cryptography/python-rsa/rsa/prime.py` -> `Cryptography/python-rsa/rsa/prime.py`."""
    return path.split("srcdata/", 1)[-1]


def strip_trailing_call(code: str) -> tuple[str, int]:
    """Make the test run exactly what DomainEval ran: the test its trailing call names.

    Every other `test*` function or method is removed (DomainEval never ran them, and they
    often use names that were not copied in). Then the call itself (`Cls().test_x()` /
    `test_x()`) is dropped when the knowbench runner finds that test as an item; otherwise
    it stays, and the code runs as one plain block, as DomainEval ran it.
    Returns (code, 1 when the call was dropped else 0).
    """
    tree = parse_python(code)
    calls = [s for s in tree.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
    called = _called_test(calls[-1].value) if calls else None
    if called is None:
        return code, 0

    def other_test(node: ast.stmt, cls: str | None) -> bool:
        return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test") \
            and (cls, node.name) != called

    body = []
    for statement in tree.body:
        if other_test(statement, None):
            continue
        if isinstance(statement, ast.ClassDef):
            statement.body = [m for m in statement.body if not other_test(m, statement.name)] or [ast.Pass()]
        body.append(statement)
    last = calls[-1]
    without_call = ast.unparse(ast.Module(body=[s for s in body if s is not last], type_ignores=[]))
    try:
        items = TestSpec(name="probe", code=without_call).items()
    except ValidationError:
        return code, 0
    if [(item.cls, item.function) for item in items] == [called]:
        return without_call + "\n", 1
    with_call = ast.unparse(ast.Module(body=body, type_ignores=[]))
    if TestSpec(name="probe", code=with_call).items()[0].kind == "block":
        return with_call + "\n", 0
    return code, 0


def _called_test(call: ast.Call) -> tuple[str | None, str] | None:
    """(class, function) for `test_x()` and `Cls().test_x()` calls, else None."""
    func = call.func
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and \
            isinstance(func.value.func, ast.Name):
        return func.value.func.id, func.attr
    return None


def import_subjects(path: Path, out: Path, name: str = "domaineval", check_env: bool = True,
                    unshadow: bool = False, progress: Progress | None = None, versions: Path | None = None,
                    recorded_requirements: Path | None = None, date: str = DEFAULT_DATE) -> dict[str, Any]:
    """Convert DomainEval subject files under `path` into a benchmark at `out`.

    Library versions are chosen for the running Python (`knowbench.builders.versions`):
    `versions` is a file of `import_name_or_distribution==version` overrides,
    `recorded_requirements` the source's own pins (used where they install here), `date` the
    cut-off of the date rule. With `check_env`, the benchmark's environment is built and
    every imported module is really imported in it (in a subprocess, with a time limit);
    subjects needing a module that has no installable distribution or does not import are
    left out. Every left-out subject is listed with its reason in the returned report (also
    written to `out/import_report.json`), with every version decision.
    """
    say = progress or (lambda message: None)
    files = subject_files(path)
    check_output(out, "--out", directory=True)
    overrides = read_pins(versions, "--versions") if versions else {}
    recorded = read_pins(recorded_requirements, "--recorded-requirements") if recorded_requirements else {}
    tasks: list[FunctionTask] = []
    modules_of: dict[str, set[str]] = {}
    left_out: list[dict[str, str]] = []
    hashes: dict[str, str] = {}
    seen: Counter[str] = Counter()
    keys: Counter[str] = Counter()
    subjects = 0
    for file in files:
        domain, repository = file.parent.name, file.stem
        hashes[f"{domain}/{file.name}"] = sha256_bytes(file.read_bytes())
        for row in _rows(file):
            subjects += 1
            task_id = _unique(_identifier(f"{domain}/{repository}/{row.get('full_method_name', 'unknown')}"), seen)
            try:
                task = subject_to_task(row, domain, repository, task_id, unshadow)
            except (ValueError, SyntaxError, ValidationError) as error:
                left_out.append({"task_id": task_id, "reason": f"not convertible: {error}"[:300]})
                continue
            task.metadata["key"] = _unique(task.metadata["key"], keys)
            tasks.append(task)
            names: set[str] = set()
            for code in (task.context, task.prompt_code, task.reference, *(s.code for s in task.tests)):
                names |= imported_modules(code, required_only=True)
            roots = third_party({n.split(".")[0] for n in names})
            modules_of[task_id] = {n for n in names if n.split(".")[0] in roots}
    wanted: dict[str, set[str]] = {}
    for names in modules_of.values():
        for module in names:
            wanted.setdefault(module.split(".")[0], set()).add(module)
    resolver = Resolver(date=date)
    say(f"choosing versions for {len(wanted)} libraries (Python {resolver.python}, releases before {date}) …")
    resolution = choose_versions(wanted, overrides=overrides, recorded=recorded, resolver=resolver, say=say)
    unavailable: dict[str, str] = {m: why for m, why in resolution.refused.items()}
    environment: dict[str, Any] = {}
    import_failures: dict[str, str] = {}
    if check_env and tasks:
        env, resolution = _build_env(resolution, wanted, overrides, recorded, resolver, say)
        unavailable = dict(resolution.refused)
        say(f"importing {sum(map(len, wanted.values()))} modules in the environment …")
        import_failures = not_importable(env, {m: n for m, n in wanted.items() if m not in unavailable and
                                               resolution.choices[m].how != "interpreter"})
        environment = {"key": env.key, "installed": env.info()["installed"]}
    kept = []
    for task in tasks:
        names = modules_of[task.task_id]
        refused = sorted({n.split(".")[0] for n in names} & set(unavailable))
        broken = sorted(n for n in names if n in import_failures)
        if refused:
            left_out.append({"task_id": task.task_id, "reason": "; ".join(
                f"imports {m}: {unavailable[m]}" for m in refused)[:2000]})
        elif broken:
            left_out.append({"task_id": task.task_id, "reason": "; ".join(
                f"cannot import {n} in the environment: {import_failures[n]}" for n in broken)[:2000]})
        else:
            kept.append(task)
    if not kept:
        raise UserError(f"no DomainEval subject could be imported from {path}"
                        + (f" ({left_out[0]['task_id']}: {left_out[0]['reason'][:300]})" if left_out else ""))
    requirements = resolution.lock
    domains = list(dict.fromkeys(t.domain for t in kept))
    provenance_versions = {"domaineval": DATASET_VERSION, "knowbench": __version__,
                           "version-rule": resolution.report()["rule"]}
    provenance_versions.update({r.split("==")[0]: r.split("==")[1] for r in requirements if "==" in r})
    provenance_versions.update({f"import:{m}": _describe(c) for m, c in sorted(resolution.choices.items())})
    manifest = Manifest(
        name=name, description=f"DomainEval ({DATASET_VERSION}) subjects of {', '.join(domains)}, imported by "
                               f"knowbench {__version__}; tests "
                               + ("rewired to call the candidate" if unshadow else "as released")
                               + " (see import_report.json).",
        domains=domains, requirements=requirements, time_limit_s=TIME_LIMIT_S,
        provenance=Provenance(source=str(path), tool=f"knowbench {__version__} import domaineval",
                              versions=provenance_versions, hashes=hashes),
    )
    write_benchmark(out, manifest, kept)
    per_domain = dict(Counter(t.domain for t in kept))
    report = {"subjects": subjects, "imported": len(kept), "per_domain": per_domain,
              "left_out": left_out, "requirements": requirements, "environment": environment,
              "versions": resolution.report(), "not_importable": import_failures,
              "anomalies": {t.task_id: t.metadata["anomalies"] for t in kept if t.metadata["anomalies"]},
              "trailing_calls_removed": sum(t.metadata["trailing_calls_removed"] for t in kept),
              "unshadowed": {t.task_id: t.metadata["unshadowed_references"] for t in kept
                             if t.metadata["unshadowed_references"]}}
    (out / IMPORT_REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _unique(base: str, seen: Counter[str]) -> str:
    """`base` the first time, then `base@2`, `base@3` …: unique by construction, in file order."""
    seen[base] += 1
    return base if seen[base] == 1 else f"{base}@{seen[base]}"


def _describe(choice: Any) -> str:
    if choice.how == "interpreter":
        return "provided by the interpreter"
    if choice.distribution is None:
        return f"none ({choice.note[:200]})"
    return f"{choice.requirement} (distribution by {choice.how}; version by {choice.source})"


def _build_env(resolution: Resolution, wanted: dict[str, set[str]], overrides: dict[str, str | None],
               recorded: dict[str, str | None], resolver: Resolver, say: Progress) -> tuple[BenchEnv, Resolution]:
    """The environment of `resolution.lock`. A distribution that fails to install (a source
    build that breaks) is taken from wheels only, or, being chosen directly, left out with
    the installer's message; then the versions are chosen again."""
    for _ in range(8):
        say(f"building the environment ({len(resolution.lock)} pinned distributions) …")
        try:
            return ensure_env(resolution.lock), resolution
        except UserError as error:
            message = str(error)
            failing = _failing_distributions(message)
            if not failing:
                raise
            say(f"  {', '.join(sorted(failing))} did not install; choosing again …")
            refused = dict(resolution.refused)
            for module, choice in resolution.choices.items():
                if not choice.distribution or _norm(choice.distribution) not in failing:
                    continue
                if choice.source in ("recorded", "recorded series"):  # the recorded pin yields to the date rule
                    recorded = {k: v for k, v in recorded.items() if _norm(k) != _norm(choice.distribution)}
                else:
                    wanted = {m: n for m, n in wanted.items() if m != module}
                    refused[module] = f"{choice.requirement} does not install:\n{message[-1500:]}"
            resolver.binary_only |= failing  # dependencies that failed to build: wheels only
            resolution = choose_versions(wanted, overrides=overrides, recorded=recorded, resolver=resolver, say=say)
            resolution.refused.update(refused)
    raise UserError("the environment could not be built after 8 attempts; see the messages above")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _failing_distributions(message: str) -> set[str]:
    """Distribution names that an installer's message says failed to build or install."""
    found = set()
    for match in re.finditer(r"(?:build|install|download|prepare)[^`\n]*`([A-Za-z0-9._-]+)(?:==|`| @)", message,
                             re.IGNORECASE):
        found.add(_norm(match.group(1)))
    return found


IMPORT_TIMEOUT_S = 180.0


def not_importable(env: BenchEnv, modules: dict[str, set[str]]) -> dict[str, str]:
    """Dotted module names (of `modules`: top-level name -> dotted names) that do not import
    in `env`, each with the last line of its error. Each top-level name is imported in its
    own subprocess, with a time limit; a module whose import hangs counts as not importable."""
    probe = ("import importlib, json, sys, traceback\nfailed = {}\n"
             "for name in json.loads(sys.argv[1]):\n"
             "    try:\n        importlib.import_module(name)\n"
             "    except BaseException as error:\n"
             "        failed[name] = (type(error).__name__ + ': ' + str(error)).splitlines()[0][:300] "
             "if str(error) else type(error).__name__\n"
             "print('\\n' + json.dumps(failed))\n")

    def check(item: tuple[str, set[str]]) -> dict[str, str]:
        _, names = item
        ordered = sorted(names, key=lambda n: (n.count("."), n))
        with tempfile.TemporaryDirectory(prefix="knowbench-import-") as home:
            variables = {**os.environ, "HOME": home, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"}
            try:
                done = subprocess.run([env.python, "-c", probe, json.dumps(ordered)], capture_output=True, text=True,
                                      timeout=IMPORT_TIMEOUT_S, cwd=home, env=variables, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                return {n: f"importing took more than {IMPORT_TIMEOUT_S:.0f} s" for n in ordered}
        try:
            return dict(load_json(done.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            tail = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            return {n: f"the interpreter died importing it (exit {done.returncode}): {tail[-1] if tail else ''}"[:300]
                    for n in ordered}

    failures: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        for result in pool.map(check, sorted(modules.items())):
            failures.update(result)
    return failures


# ------------------------------------------------------------------------ replay samples


def _tasks_by_key(benchmark: Path) -> dict[str, str]:
    bench = load_benchmark(benchmark)
    found = {}
    for task in bench.tasks:
        key = task.metadata.get("key") if isinstance(task, FunctionTask) else None
        if key:
            found[key] = task.task_id
    if not found:
        raise UserError(f"{benchmark}: no task carries a DomainEval key; build it with "
                        "`knowbench import domaineval`")
    return found


def convert_responses(path: Path, benchmark: Path, out_file: Path) -> dict[str, Any]:
    """Write DomainEval's released responses as replay samples for `benchmark`'s tasks.

    Each response is a whole file that replaced the masked file; knowbench splices the
    target (and any helper it adds) out of it, as it does for every completion.
    """
    by_key = _tasks_by_key(benchmark)
    written, unmatched = 0, []
    seen: Counter[str] = Counter()
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with out_file.open("w") as handle:
        for file in subject_files(path):
            domain = file.parent.name
            for row in _rows(file):
                for required in ("repository", "full_method_name", "method_code_mask", "response"):
                    if required not in row:
                        raise UserError(f"{file}: a row lacks '{required}'; is this a responses file?")
                key = _unique(subject_key(domain, row["repository"], row["full_method_name"],
                                          row["method_code_mask"]), seen)
                task_id = by_key.get(key)
                if task_id is None:
                    unmatched.append(f"{domain}/{row['repository']}/{row['full_method_name']}")
                    continue
                handle.write(json.dumps({"task_id": task_id, "completion": row["response"], "sample_idx": 0}) + "\n")
                written += 1
    return {"written": written, "unmatched": unmatched}


# -------------------------------------------------------------------------- comparison


def compare_with_recorded(run_dir: Path, results_path: Path, certify_report: Path | None = None) -> dict[str, Any]:
    """knowbench's verdict per subject (from a replay run) against DomainEval's `result`.

    Disagreements are grouped by cause, using the certification of the same benchmark when
    given: subjects whose tests never run the candidate (shadowed), whose reference fails in
    this environment, or whose response could not be spliced; the rest by direction.
    """
    samples_file = run_dir / "samples.jsonl"
    if not samples_file.is_file():
        raise UserError(f"{run_dir}: no samples.jsonl; run `knowbench run BENCH --model replay:FILE` first")
    samples = {}
    for line in samples_file.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            samples[row["task_id"]] = row
    run_config = json.loads((run_dir / "run.json").read_text())
    benchmark = Path(run_config["settings"]["benchmark"]["path"])
    by_key = _tasks_by_key(benchmark)
    checks = {}
    if certify_report is not None:
        report = json.loads(certify_report.read_text())
        checks = {task["task_id"]: task for task in report["tasks"]}
    matrix = Counter()
    rows = []
    disagreements: dict[str, list[dict[str, Any]]] = {}
    seen: Counter[str] = Counter()
    for file in subject_files(results_path):
        domain = file.parent.name
        for row in _rows(file):
            key = _unique(subject_key(domain, row["repository"], row["full_method_name"], row["method_code_mask"]),
                          seen)
            task_id = by_key.get(key)
            sample = samples.get(task_id) if task_id else None
            if sample is None:
                continue
            theirs = row.get("result") == "passed"
            ours = bool(sample["passed"])
            cell = {(True, True): "both_pass", (False, False): "both_fail", (True, False): "knowbench_only",
                    (False, True): "domaineval_only"}[(ours, theirs)]
            matrix[cell] += 1
            entry = {"task_id": task_id, "knowbench": "passed" if ours else sample["status"],
                     "domaineval": row.get("result", "")[:200], "knowbench_error": _sample_error(sample)}
            rows.append(entry)
            if ours != theirs:
                check = checks.get(task_id)
                if check is not None and any(i.get("status") != "pass" for i in check.get("reference", [])):
                    failing = next(i for i in check["reference"] if i.get("status") != "pass")
                    lines = [line for line in failing.get("message", "").splitlines() if line.strip()]
                    entry["reference_error"] = (lines[-1].strip() if lines else failing.get("status", ""))[:200]
                elif check is not None and check.get("note"):
                    entry["reference_error"] = check["note"][:200]
                cause = _cause(entry, check, sample, ours)
                entry["cause"] = cause
                disagreements.setdefault(cause, []).append(entry)
    for cell in ("both_pass", "both_fail", "knowbench_only", "domaineval_only"):
        matrix.setdefault(cell, 0)
    agree = matrix["both_pass"] + matrix["both_fail"]
    result = {"subjects": len(rows), "agreement": round(agree / len(rows), 4) if rows else None,
              "matrix": dict(matrix), "disagreements": disagreements, "rows": rows}
    if checks:
        passed = [row for row in rows if row["domaineval"] == "passed" and row["task_id"] in checks]
        result["domaineval_passes"] = len(passed)
        result["domaineval_passes_never_running_the_response"] = sum(
            bool(checks[row["task_id"]].get("not_called")) for row in passed)
        result["domaineval_passes_whose_suite_passes_on_a_stub"] = sum(
            not all(checks[row["task_id"]].get("stub_suite_fails", {}).values()) for row in passed)
    return result


def _sample_error(sample: dict[str, Any]) -> str:
    """The line that says why the sample failed; when the process died before reporting,
    with the last line it wrote to stderr (`can't start new thread` …)."""
    execution = sample.get("execution") or {}
    for test in execution.get("tests", []):
        if test.get("status") != "pass":
            lines = [line for line in test.get("message", "").splitlines() if line.strip()]
            said = lines[-1].strip()[:200] if lines else test.get("status", "")
            stderr = [line for line in str(execution.get("stderr") or "").splitlines() if line.strip()]
            if said.startswith("not run") and stderr:
                said = f"{said}; stderr: {stderr[-1].strip()[:200]}"
            return said
    extra = sample.get("extra") or {}
    return str(extra.get("assembly_error", ""))[:200]


# Each disagreement is attributed to one of these (the part before ":" is the family).
SHADOWED = "benchmark defect: tests never run the candidate (shadowed)"
INCOMPLETE = "benchmark defect: incomplete reference (its context lacks a name it uses)"
DATED = "benchmark defect: date-dependent (the test or the reference reads the clock)"
VERSION = "environment: library version (an API that changed between the two environments)"
MACHINE = ("environment: the machine (the sandbox gives no network, display, devices or extra fonts, "
           "and caps memory; DomainEval's machine had them)")
DOMAINEVAL_HARNESS = "DomainEval's harness"
KNOWBENCH_HARNESS = "knowbench's harness"
CAUSES = (SHADOWED, INCOMPLETE, DATED, VERSION, MACHINE, DOMAINEVAL_HARNESS, KNOWBENCH_HARNESS)

_DATED = re.compile(r"\b(20[12]\d|19\d\d)-\d\d|\bdatetime\.date\(20|\b(today|now|utcnow|expired?|not yet valid|"
                    r"year|weekday|holiday|timezone|tzinfo|clock)\b", re.IGNORECASE)
_HARNESS = re.compile(r"^not run: the sample process ended|can't start new thread|tampering detected|"
                      r"Permission denied: '/tmp/sample", re.IGNORECASE)
_MACHINE = re.compile(r"name resolution|urlopen error|Unable to download|Network is unreachable|"
                      r"Connection refused|not import any of the backends|cannot connect to (X|display)|"
                      r"no disks or NICs|cannot open resource|MemoryError|Could not find '\w+' line|"
                      r"No such file or directory: '(sysctl|free|lsblk|ifconfig|ip)'", re.IGNORECASE)
_VERSIONED = re.compile(r"has no attribute|cannot import name|No module named|unexpected keyword argument|"
                        r"got an unexpected|takes \d+ positional|missing \d+ required positional|"
                        r"DeprecationWarning|FutureWarning|is deprecated|was removed|no longer|"
                        r"not supported between instances|object is not subscriptable|"
                        r"binary incompatib|compiled (against|using)", re.IGNORECASE)


def _cause(entry: dict[str, Any], check: dict[str, Any] | None, sample: dict[str, Any], ours: bool) -> str:
    """Which of `CAUSES` explains a disagreement (`ours`: knowbench passed it).

    The certification of the subject decides first: tests that never run the candidate,
    a reference that fails here (a NameError: incomplete; a clock-reading failure:
    date-dependent; an API change: the environment; anything else: knowbench's harness,
    as DomainEval ran the same reference). Then DomainEval's own failures that no response
    can cause (a time-out, a missing module) are its harness's; a response that fails here
    only fails by the clock, by an API change, or by knowbench's harness (splicing,
    time-outs, the sandbox), which is also blamed when knowbench passes what DomainEval
    failed for no reason of its own."""
    if not ours and (sample.get("extra") or {}).get("assembly_error"):
        return KNOWBENCH_HARNESS  # the response could not be spliced into the prompt
    if not ours and _HARNESS.search(entry.get("knowbench_error", "")):
        return KNOWBENCH_HARNESS  # the sample never ran to the end: whatever the tests are, the harness failed
    domaineval = entry["domaineval"]
    if check is not None:
        failed = check.get("failed_checks", [])
        if "reference-fails" in failed or "program-error" in failed:
            messages = " ".join(item.get("message", "") for item in check.get("reference", []) if
                                item.get("status") != "pass") + " " + check.get("note", "")
            if not _HARNESS.search(messages.strip()):  # a reference that never ran tells nothing: go on
                return INCOMPLETE if "NameError" in messages else _cause_named_by(messages)
        elif check.get("not_called"):
            return SHADOWED
    if ours:
        if "timed out" in domaineval or "No module named" in domaineval:
            return DOMAINEVAL_HARNESS
        return _cause_named_by(domaineval)
    error = entry.get("knowbench_error", "")
    if "timeout" in sample.get("status", "") or "timed out" in error.lower():
        return KNOWBENCH_HARNESS
    return _cause_named_by(error)


def _cause_named_by(message: str) -> str:
    """The cause an error message names (the clock, an API change, the machine), else
    knowbench's harness, so that nothing unexplained is blamed on the benchmark."""
    for pattern, cause in ((_DATED, DATED), (_VERSIONED, VERSION), (_MACHINE, MACHINE)):
        if pattern.search(message):
            return cause
    return KNOWBENCH_HARNESS
