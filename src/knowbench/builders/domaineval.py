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

The libraries the subjects import were not versioned by the release; `LIBRARY_VERSIONS`
records the choice made here: for each, the last release before the dataset's date
(2024-07-11) that installs on CPython 3.11.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import load_benchmark, sha256_bytes, write_benchmark
from knowbench.benchmark.schema import FunctionTask, Manifest, Provenance, TestSpec, find_definition
from knowbench.builders.requirements import import_roots, installable_subset, resolves, third_party
from knowbench.errors import UserError
from knowbench.execution.environments import BenchEnv, ensure_env
from knowbench.jsonl import read_objects

DATASET_VERSION = "domaineval_20240711"
MASK = re.compile(r"\[\s*MASK\s*\]")  # DomainEval's formatter sometimes wrapped it: "[\n    MASK]"
IMPORT_REPORT = "import_report.json"
TIME_LIMIT_S = 30.0  # xarray-level imports take seconds on a slow core; DomainEval recorded none

LIBRARY_VERSIONS: dict[str, str] = {
    "Crypto": "pycryptodome==3.20.0", "OpenSSL": "pyOpenSSL==24.1.0", "PIL": "Pillow==10.4.0",
    "absl": "absl-py==2.1.0", "aiohttp": "aiohttp==3.9.5", "aiostream": "aiostream==0.4.5",
    "arrow": "arrow==1.3.0", "asn1crypto": "asn1crypto==1.5.1", "blake3": "blake3==0.4.1",
    "bottleneck": "Bottleneck==1.4.0", "charset_normalizer": "charset-normalizer==3.3.2",
    "chinese_calendar": "chinesecalendar==1.9.1", "click": "click==8.1.7", "colorama": "colorama==0.4.6",
    "cryptography": "cryptography==42.0.8", "cv2": "opencv-python-headless==4.10.0.84",
    "dask": "dask==2024.6.2", "dateutil": "python-dateutil==2.9.0.post0", "faker": "Faker==26.0.0",
    "flask": "Flask==3.0.3", "fsspec": "fsspec==2024.6.1", "gmpy2": "gmpy2==2.1.5",
    "holidays": "holidays==0.52", "jinja2": "Jinja2==3.1.4", "joblib": "joblib==1.4.2",
    "matplotlib": "matplotlib==3.9.1", "mpl_toolkits": "matplotlib==3.9.1", "numpy": "numpy==1.26.4",
    "opt_einsum": "opt-einsum==3.3.0", "packaging": "packaging==24.1", "pandas": "pandas==2.2.2",
    "pkg_resources": "setuptools==70.3.0", "pooch": "pooch==1.8.2", "prettytable": "prettytable==3.10.0",
    "pyarrow": "pyarrow==16.1.0", "pyasn1": "pyasn1==0.6.0", "pytz": "pytz==2024.1",
    "requests": "requests==2.32.3", "rsa": "rsa==4.9", "scipy": "scipy==1.14.0", "seaborn": "seaborn==0.13.2",
    "setuptools": "setuptools==70.3.0", "six": "six==1.16.0", "sqlalchemy": "SQLAlchemy==2.0.31",
    "typing_extensions": "typing_extensions==4.12.2", "vdirsyncer": "vdirsyncer==0.19.3",
    "xarray": "xarray==2024.6.0", "ecdsa": "ecdsa==0.19.0", "pytest": "pytest",
}
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
    """What identifies a subject across DomainEval's files (subjects, responses, results)."""
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
    method_tree = ast.parse(row["method_code"])
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
    metadata = {
        "dataset": DATASET_VERSION, "repository": repository, "method_name": row.get("method_name"),
        "full_method_name": row["full_method_name"],
        "method_path": _srcdata_path(row.get("method_path", "")),
        "test_paths": [_srcdata_path(e.get("test_path", "")) for e in row["test_code_list"]],
        "trailing_calls_removed": stripped, "anomalies": anomalies, "unshadowed_references": rewired,
        "target_module": target_module,
        "key": subject_key(domain, repository, row["full_method_name"], masked),
    }
    return FunctionTask(task_id=task_id, domain=domain, framework=repository, instruction=row["instruction"],
                        prompt_code=prompt_code, entry_point=entry_point, context=context, reference=reference,
                        tests=tests, metadata=metadata, invocation="direct")


def _module_of(method_path: str, repository: str) -> str:
    """`.../srcdata/Cryptography/python-rsa/rsa/common.py` -> `rsa.common` (src/ and lib/
    layouts, and packages' `__init__.py`, included)."""
    relative = _srcdata_path(method_path)
    marker = f"/{repository}/"
    if marker in f"/{relative}":
        relative = f"/{relative}".split(marker, 1)[1]
    parts = relative.removesuffix(".py").split("/")
    if parts and parts[-1] == "__init__":
        parts.pop()
    if parts and parts[0] in ("src", "lib"):
        parts.pop(0)
    return ".".join(parts)


def unshadow_test(code: str, top: str, target_module: str) -> tuple[str, int]:
    """Rewire a test to the candidate: drop imports binding the target's name `top` and turn
    `<target_module>.<top>` references (through any import alias) into the bare name.
    Returns (code, changes); the code is unchanged when nothing needed it."""
    tree = ast.parse(code)
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
    tree = ast.parse(code)
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
                    unshadow: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Convert DomainEval subject files under `path` into a benchmark at `out`.

    With `check_env`, the benchmark's environment is built and subjects whose libraries do
    not install or import are left out; every left-out subject is listed with its reason in
    the returned report (also written to `out/import_report.json`).
    """
    say = progress or (lambda message: None)
    files = subject_files(path)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a directory")
    tasks: list[FunctionTask] = []
    roots_of: dict[str, set[str]] = {}
    left_out: list[dict[str, str]] = []
    hashes: dict[str, str] = {}
    seen: Counter[str] = Counter()
    subjects = 0
    for file in files:
        domain, repository = file.parent.name, file.stem
        hashes[f"{domain}/{file.name}"] = sha256_bytes(file.read_bytes())
        for row in _rows(file):
            subjects += 1
            base = _identifier(f"{domain}/{repository}/{row.get('full_method_name', 'unknown')}")
            seen[base] += 1
            task_id = base if seen[base] == 1 else f"{base}@{seen[base]}"
            try:
                task = subject_to_task(row, domain, repository, task_id, unshadow)
            except (ValueError, SyntaxError, ValidationError) as error:
                left_out.append({"task_id": task_id, "reason": f"not convertible: {error}"[:300]})
                continue
            tasks.append(task)
            roots: set[str] = set()
            for code in (task.context, task.prompt_code, task.reference, *(s.code for s in task.tests)):
                roots |= import_roots(code)
            roots_of[task_id] = third_party(roots)
    unknown = {root for roots in roots_of.values() for root in roots if root not in LIBRARY_VERSIONS}
    for task_id, roots in roots_of.items():
        missing = sorted(roots & unknown)
        if missing:
            left_out.append({"task_id": task_id, "reason": f"imports {', '.join(missing)}: no known PyPI "
                                                           "distribution (add it to LIBRARY_VERSIONS)"})
    kept = [t for t in tasks if not (roots_of[t.task_id] & unknown)]
    requirements = sorted({LIBRARY_VERSIONS[r] for t in kept for r in roots_of[t.task_id]} - {"pytest"},
                          key=str.lower)
    environment: dict[str, Any] = {}
    if check_env and kept:
        say(f"building the environment for {len(requirements)} requirements …")
        env, failed = _install(requirements, say)
        requirements = [r for r in requirements if r not in failed]
        not_importable = _not_importable(env, {r for t in kept for r in roots_of[t.task_id]})
        survivors = []
        for task in kept:
            bad = sorted(root for root in roots_of[task.task_id]
                         if root in not_importable or LIBRARY_VERSIONS.get(root) in failed)
            if bad:
                left_out.append({"task_id": task.task_id,
                                 "reason": f"cannot import {', '.join(bad)} in the environment"
                                           + (f" ({', '.join(sorted(failed))} did not install)" if failed else "")})
            else:
                survivors.append(task)
        kept = survivors
        environment = {"key": env.key, "installed": env.info()["installed"], "not_installable": sorted(failed)}
    if not kept:
        raise UserError(f"no DomainEval subject could be imported from {path}")
    domains = list(dict.fromkeys(t.domain for t in kept))
    versions = {"domaineval": DATASET_VERSION, "knowbench": __version__}
    versions.update({r.split("==")[0]: r.split("==")[1] for r in requirements if "==" in r})
    manifest = Manifest(
        name=name, description=f"DomainEval ({DATASET_VERSION}) subjects of {', '.join(domains)}, imported by "
                               f"knowbench {__version__}; tests "
                               + ("rewired to call the candidate" if unshadow else "as released")
                               + " (see import_report.json).",
        domains=domains, requirements=requirements, time_limit_s=TIME_LIMIT_S,
        provenance=Provenance(source=str(path), tool=f"knowbench {__version__} import domaineval",
                              versions=versions, hashes=hashes),
    )
    write_benchmark(out, manifest, kept)
    per_domain = dict(Counter(t.domain for t in kept))
    report = {"subjects": subjects, "imported": len(kept), "per_domain": per_domain,
              "left_out": left_out, "requirements": requirements, "environment": environment,
              "library_versions": "the last release before 2024-07-11 installing on CPython 3.11",
              "anomalies": {t.task_id: t.metadata["anomalies"] for t in kept if t.metadata["anomalies"]},
              "trailing_calls_removed": sum(t.metadata["trailing_calls_removed"] for t in kept),
              "unshadowed": {t.task_id: t.metadata["unshadowed_references"] for t in kept
                             if t.metadata["unshadowed_references"]}}
    (out / IMPORT_REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _install(requirements: list[str], say: Progress) -> tuple[BenchEnv, set[str]]:
    """The environment of every requirement that installs; and the ones that do not."""
    ok, why = resolves(requirements)
    failed: set[str] = set()
    if not ok:
        say(f"the requirements do not resolve together:\n{why}\nfinding the ones that do …")
        kept, refused = installable_subset(requirements)
        for requirement, reason in refused.items():
            say(f"  left out {requirement}: {reason.splitlines()[-1] if reason else ''}")
        failed = set(refused)
        requirements = kept
    return ensure_env(requirements), failed


def _not_importable(env: BenchEnv, roots: set[str]) -> set[str]:
    probe = ("import importlib.util, json, sys; roots = json.loads(sys.argv[1]); "
             "print(json.dumps([r for r in roots if importlib.util.find_spec(r) is None]))")
    done = subprocess.run([env.python, "-c", probe, json.dumps(sorted(roots))], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        return set(roots)
    return set(json.loads(done.stdout))


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
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with out_file.open("w") as handle:
        for file in subject_files(path):
            domain = file.parent.name
            for row in _rows(file):
                for required in ("repository", "full_method_name", "method_code_mask", "response"):
                    if required not in row:
                        raise UserError(f"{file}: a row lacks '{required}'; is this a responses file?")
                key = subject_key(domain, row["repository"], row["full_method_name"], row["method_code_mask"])
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
    for file in subject_files(results_path):
        domain = file.parent.name
        for row in _rows(file):
            key = subject_key(domain, row["repository"], row["full_method_name"], row["method_code_mask"])
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
                cause = _cause(entry, checks.get(task_id), sample, ours)
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
    execution = sample.get("execution") or {}
    for test in execution.get("tests", []):
        if test.get("status") != "pass":
            lines = [line for line in test.get("message", "").splitlines() if line.strip()]
            return lines[-1].strip()[:200] if lines else test.get("status", "")
    extra = sample.get("extra") or {}
    return str(extra.get("assembly_error", ""))[:200]


def _cause(entry: dict[str, Any], check: dict[str, Any] | None, sample: dict[str, Any], ours: bool) -> str:
    if not ours and (sample.get("extra") or {}).get("assembly_error"):
        return "response cannot be spliced into the prompt"
    if check is not None:
        if "reference-fails" in check.get("failed_checks", []) or "program-error" in check.get("failed_checks", []):
            messages = " ".join(item.get("message", "") for item in check.get("reference", []))
            if "NameError" in messages:
                return "reference is incomplete: its context lacks a name it uses"
            return "reference fails in this environment (library version, clock or runner)"
        if check.get("not_called"):
            return "tests never run the candidate (shadowed)"
    domaineval = entry["domaineval"]
    if ours:
        if "timed out" in domaineval:
            return "DomainEval timed out"
        if "No module named" in domaineval:
            return "DomainEval's environment lacked a module"
        return "passes here, failed in DomainEval"
    if "timeout" in sample.get("status", ""):
        return "times out here"
    return "fails here, passed in DomainEval"
