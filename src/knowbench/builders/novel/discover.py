"""Stage 1 of `knowbench novel`: which APIs a library gained or changed between two releases.

1. *Versions*: explicit (`--old/--new`) or by `--cutoff DATE` from PyPI's upload times
   (`knowbench.builders.novel.pypi`).
2. *Surfaces*: both distributions downloaded and read statically (`surface.load_surface`).
3. *Diff*, on object identity (the canonical path where an object is defined):
   - same canonical path in both: *modified* when its parameters changed structurally
     (a parameter added, removed or renamed, a kind or a default changed); annotation-only or
     return-annotation changes are recorded but do not make it modified; a new public path to
     it (a re-export) is a *relocation* of kind `re-exported`;
   - defined only in the new release: a *relocation* (`moved`) when the old release exposed it
     at one of the same public paths, or defined an object of the same kind and name, with the
     same parameter names, that the new release no longer defines; else *added*;
   - defined only in the old release and not moved: *removed*.
   A moved object whose parameters changed is *modified* (its record says it moved).
4. *Filter cascade* over added and modified APIs, first failing check wins, in this order:
   `private` (no public path), `deprecated` (a `deprecated` decorator, a `.. deprecated::` or
   "Deprecated" docstring note, or a DeprecationWarning/FutureWarning raised in its body),
   `test-module` / `vendored-module` (by the components of its defining module; test suites
   such as `pkg/tests/` are not even read, see `surface`, so this catches `testing` helpers) /
   `internal-module` (by those of its public path: `internal`, `impl`, `compat`, ...; a
   function defined in `pkg/_impl.py` and re-exported as `pkg.f` is public API), `no-source` (only a `.pyi` stub or a compiled module), `no-docstring`,
   `thin-docstring` (fewer than `min_docstring_words` words), `boilerplate-docstring` (an
   inherited or generic text such as "Return repr(self).", or one text shared by at least
   `boilerplate_share` APIs of the release), and `cap` (beyond `max_apis`, ranked added before
   modified, shallower public paths first, then by name).

The candidates file holds one line per added or modified API with its stage records; the
report holds versions, timings, counts per change and per filter reason, relocations and
removals.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowbench import __version__
from knowbench.builders.novel.pypi import Prefer, fetch_release, resolve_versions
from knowbench.builders.novel.surface import (
    ApiObject,
    Surface,
    find_packages,
    load_surface,
    object_source,
)
from knowbench.errors import UserError
from knowbench.jsonl import read_objects
from knowbench.parsing import parse_python

CANDIDATES = "candidates.jsonl"
REPORT = "discover_report.json"
FILTERS = ("private", "deprecated", "test-module", "internal-module", "vendored-module", "no-source",
           "no-docstring", "thin-docstring", "boilerplate-docstring", "cap")
_TEST_PARTS = {"tests", "test", "testing", "_testing", "conftest", "testutils", "test_utils"}
_INTERNAL_PARTS = {"internal", "_internal", "internals", "_internals", "impl", "_impl", "private",
                   "_private", "compat", "_compat", "_build_utils", "setup"}
_VENDORED_PARTS = {"vendor", "_vendor", "vendored", "_vendored", "externals", "_externals", "extern",
                   "_extern", "third_party", "thirdparty", "_third_party"}
_BOILERPLATE = [re.compile(p, re.IGNORECASE) for p in (
    r"^initialize self\.\s+see help\(type\(self\)\) for accurate signature\.?$",
    r"^create and return a new object\.", r"^return (repr|str|hash)\(self\)\.?$",
    r"^implement (next|iter|len|call)\(self\)", r"^return self[<>=!]+value\.?$",
    r"^(see|refer to) (the )?(docs|documentation|help)\b", r"^(alias|shortcut) (of|for) \S+\.?$",
    r"^(todo|fixme|xxx)\b", r"^(docstring|description)( here)?\.?$", r"^not implemented\.?$",
    r"^deprecated\.?$", r"^internal( use)?( only)?\.?$")]
_DEPRECATION = re.compile(r"(\.\. deprecated::|^\s*deprecated\b|\bis deprecated\b|\bdeprecated since\b|"
                          r"\bwill be removed in\b)", re.IGNORECASE | re.MULTILINE)


@dataclass
class DiscoverOptions:
    old: str | None = None
    new: str | None = None
    cutoff: str | None = None
    packages: list[str] | None = None
    prefer: Prefer = "sdist"
    min_docstring_words: int = 5
    boilerplate_share: int = 3
    max_apis: int = 50


def discover(library: str, out: Path, options: DiscoverOptions) -> dict[str, Any]:
    """Run stage 1 for `library` and write `candidates.jsonl` and `discover_report.json` in `out`.

    Returns the report. Raises `UserError` for unknown versions, unreachable index, or a
    distribution none of whose packages can be loaded.
    """
    clock = time.perf_counter()
    versions = resolve_versions(library, options.old, options.new, options.cutoff)
    resolved = time.perf_counter()
    old_release = fetch_release(versions["name"], versions["old"], options.prefer)
    new_release = fetch_release(versions["name"], versions["new"], options.prefer)
    fetched = time.perf_counter()
    packages = options.packages or find_packages(new_release.root, versions["name"])
    if not packages:
        raise UserError(f"{new_release.filename}: no import package found\n  fix: name it with --package")
    old_surface = load_surface(old_release.root, options.packages or find_packages(old_release.root,
                                                                                   versions["name"]))
    new_surface = load_surface(new_release.root, packages)
    loaded = time.perf_counter()
    diff = diff_surfaces(old_surface, new_surface)
    candidates = filter_candidates(diff["candidates"], new_surface, options)
    done = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    with (out / CANDIDATES).open("w") as handle:
        for record in candidates:
            record["library"] = versions["name"]
            record["old_version"], record["new_version"] = versions["old"], versions["new"]
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    reasons = Counter(c["dropped_by"] for c in candidates if c["dropped_by"])
    report = {
        "knowbench": __version__, "library": versions["name"], "versions": versions,
        "distributions": {"old": old_release.describe(), "new": new_release.describe()},
        "packages": {"old": old_surface.packages, "new": new_surface.packages},
        "load_errors": old_surface.load_errors + new_surface.load_errors,
        "test_modules_not_read": {"old": len(old_surface.skipped_modules),
                                  "new": len(new_surface.skipped_modules)},
        "options": {"min_docstring_words": options.min_docstring_words,
                    "boilerplate_share": options.boilerplate_share, "max_apis": options.max_apis,
                    "prefer": options.prefer},
        "counts": {
            "old_objects": len(old_surface.objects), "new_objects": len(new_surface.objects),
            "old_public": sum(1 for o in old_surface.objects.values() if o.public_exposures),
            "new_public": sum(1 for o in new_surface.objects.values() if o.public_exposures),
            "added": sum(1 for c in candidates if c["change"] == "added"),
            "modified": sum(1 for c in candidates if c["change"] == "modified"),
            "removed": len(diff["removed"]), "relocated": len(diff["relocated"]),
            "unchanged": diff["unchanged"], "annotation_only": diff["annotation_only"],
            "kept": sum(1 for c in candidates if c["kept"]),
        },
        "dropped": {reason: reasons.get(reason, 0) for reason in FILTERS},
        "seconds": {"resolve": round(resolved - clock, 3), "download": round(fetched - resolved, 3),
                    "load": round(loaded - fetched, 3), "diff_and_filter": round(done - loaded, 3),
                    "total": round(done - clock, 3)},
        "relocated": diff["relocated"], "removed": diff["removed"],
        "kept": [c["api"] for c in candidates if c["kept"]],
    }
    (out / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report


# ------------------------------------------------------------------------------------ diff

def _structural(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The parameter changes between two lists, and whether any is structural."""
    changes: list[dict[str, Any]] = []
    old_by = {p["name"]: (i, p) for i, p in enumerate(old)}
    new_by = {p["name"]: (i, p) for i, p in enumerate(new)}
    removed = [p for p in old if p["name"] not in new_by]
    added = [p for p in new if p["name"] not in old_by]
    renamed: set[str] = set()
    for p in list(added):
        position = new_by[p["name"]][0]
        match = next((q for q in removed if old_by[q["name"]][0] == position and q["kind"] == p["kind"]), None)
        if match is not None:
            changes.append({"change": "renamed", "old": match["name"], "new": p["name"]})
            renamed |= {match["name"], p["name"]}
    changes += [{"change": "removed", "parameter": p["name"]} for p in removed if p["name"] not in renamed]
    changes += [{"change": "added", "parameter": p["name"], "required": p["default"] is None
                 and not p["kind"].startswith("variadic")} for p in added if p["name"] not in renamed]
    for name, (_, p) in new_by.items():
        if name not in old_by:
            continue
        q = old_by[name][1]
        if q["kind"] != p["kind"]:
            changes.append({"change": "kind", "parameter": name, "old": q["kind"], "new": p["kind"]})
        if q["default"] != p["default"]:
            changes.append({"change": "default", "parameter": name, "old": q["default"], "new": p["default"]})
        if q["annotation"] != p["annotation"]:
            changes.append({"change": "annotation", "parameter": name, "old": q["annotation"],
                            "new": p["annotation"]})
    structural = any(c["change"] != "annotation" for c in changes)
    if not structural and [p["name"] for p in old] != [p["name"] for p in new]:
        changes.append({"change": "order", "old": [p["name"] for p in old], "new": [p["name"] for p in new]})
        structural = True
    return changes, structural


def diff_surfaces(old: Surface, new: Surface) -> dict[str, Any]:
    """Added / modified APIs (as candidate records), relocations, removals, and counts."""
    candidates: list[dict[str, Any]] = []
    relocated: list[dict[str, Any]] = []
    unchanged = annotation_only = 0
    matched_old: set[str] = set()
    old_by_exposure: dict[str, str] = {}
    for key, entry in old.objects.items():
        for path in entry.public_exposures:
            old_by_exposure[path] = key
    old_by_name: dict[tuple[str, str], list[str]] = {}
    for key, entry in old.objects.items():
        if key not in new.objects:
            old_by_name.setdefault((entry.kind, entry.name), []).append(key)
    for key, entry in sorted(new.objects.items()):
        previous: ApiObject | None = old.objects.get(key)
        moved_from = None
        if previous is None:
            shared = sorted(p for p in entry.public_exposures if p in old_by_exposure
                            and old_by_exposure[p] not in new.objects)
            if shared:
                moved_from = old_by_exposure[shared[0]]
            else:
                names = [p["name"] for p in entry.parameters]
                same = [k for k in old_by_name.get((entry.kind, entry.name), []) if k not in matched_old
                        and [p["name"] for p in old.objects[k].parameters] == names]
                moved_from = same[0] if len(same) == 1 else None
            if moved_from is not None:
                previous = old.objects[moved_from]
                matched_old.add(moved_from)
                relocated.append({"api": entry.public_path, "kind": "moved", "old": moved_from, "new": key})
        else:
            matched_old.add(key)
            for path in sorted(entry.public_exposures - previous.public_exposures):
                relocated.append({"api": path, "kind": "re-exported", "old": previous.public_path, "new": key})
        if previous is None:
            candidates.append(_candidate(entry, "added", None, []))
            continue
        changes, structural = _structural(previous.parameters, entry.parameters)
        if previous.returns != entry.returns:
            changes.append({"change": "returns", "old": previous.returns, "new": entry.returns})
        if structural:
            record = _candidate(entry, "modified", previous, changes)
            if moved_from:
                record["moved_from"] = moved_from
            candidates.append(record)
        elif changes:
            annotation_only += 1
        else:
            unchanged += 1
    removed = sorted(old.objects[k].public_path for k in old.objects
                     if k not in matched_old and k not in new.objects and old.objects[k].public_exposures)
    return {"candidates": candidates, "relocated": relocated, "removed": removed,
            "unchanged": unchanged, "annotation_only": annotation_only}


def _candidate(entry: ApiObject, change: str, previous: ApiObject | None,
               changes: list[dict[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {"api": entry.public_path, "change": change, **entry.describe(),
                              "changes": changes}
    record["old"] = None if previous is None else {
        "canonical": previous.canonical, "signature": previous.signature_text(),
        "parameters": previous.parameters, "returns": previous.returns}
    record["stages"] = [{"stage": "diff", "result": change,
                         "detail": f"{len(changes)} change(s)" if changes else "new in this release"}]
    return record


# ------------------------------------------------------------------------------ filters

def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z][A-Za-z0-9_'-]*", text))


def _summary(docstring: str) -> str:
    return " ".join(docstring.strip().split("\n\n")[0].split())


def _deprecated(entry: ApiObject, source: str | None) -> str | None:
    for decorator in entry.decorators:
        if "deprecat" in decorator.lower():
            return f"decorator @{decorator}"
    match = _DEPRECATION.search(entry.docstring or "")
    if match:
        return f"docstring says {match.group(0).strip()!r}"
    if source:
        try:
            tree = parse_python(_dedent(source))
        except SyntaxError:
            return None
        body = tree.body[0] if tree.body else None
        nodes = ast.walk(body) if isinstance(body, ast.FunctionDef | ast.AsyncFunctionDef) else \
            (n for stmt in (body.body if isinstance(body, ast.ClassDef) else [])
             if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__" for n in ast.walk(stmt))
        for node in nodes:
            if isinstance(node, ast.Call) and any(
                    isinstance(arg, ast.Name | ast.Attribute) and
                    (getattr(arg, "id", None) or getattr(arg, "attr", "")) in
                    ("DeprecationWarning", "FutureWarning", "PendingDeprecationWarning")
                    for arg in [*node.args, *(k.value for k in node.keywords)]):
                return "warns DeprecationWarning when called"
    return None


def _dedent(source: str) -> str:
    import textwrap
    return textwrap.dedent(source)


def filter_candidates(candidates: list[dict[str, Any]], surface: Surface,
                      options: DiscoverOptions) -> list[dict[str, Any]]:
    """Run the cascade over `candidates` (in place) and return them, kept ones marked."""
    summaries = Counter(_summary(o.docstring).lower() for o in surface.objects.values()
                        if o.public_exposures and o.docstring.strip())
    survivors: list[dict[str, Any]] = []
    for record in candidates:
        entry = surface.objects[record["canonical"]]
        source = object_source(entry)
        record["dropped_by"] = None
        for check in FILTERS[:-1]:
            why = _check(check, entry, source, summaries, options)
            record["stages"].append({"stage": "filter", "check": check, "passed": why is None,
                                     **({"reason": why} if why else {})})
            if why is not None:
                record["dropped_by"] = check
                break
        if record["dropped_by"] is None:
            survivors.append(record)
    ranked = sorted(survivors, key=lambda r: (r["change"] != "added", r["api"].count("."), r["api"]))
    for rank, record in enumerate(ranked):
        over = rank >= options.max_apis
        record["stages"].append({"stage": "filter", "check": "cap", "passed": not over,
                                 **({"reason": f"rank {rank + 1} beyond --max-apis {options.max_apis}"}
                                    if over else {})})
        if over:
            record["dropped_by"] = "cap"
    for record in candidates:
        record["kept"] = record["dropped_by"] is None
    return candidates


def _check(check: str, entry: ApiObject, source: str | None, summaries: Counter[str],
           options: DiscoverOptions) -> str | None:
    parts = entry.canonical.split(".")
    module_parts = [p.lower() for p in entry.module.split(".")[1:]]
    docstring = (entry.docstring or "").strip()
    if check == "private":
        return None if entry.public_exposures else f"no public path (defined as {entry.canonical})"
    if check == "deprecated":
        return _deprecated(entry, source)
    if check == "test-module":
        hit = [p for p in module_parts if p in _TEST_PARTS or p.startswith("test_") or p.endswith("_test")]
        return f"defined in test module {entry.module}" if hit or parts[-1].startswith("test_") else None
    if check == "internal-module":  # by the public path: `pkg/_impl.py` re-exported as `pkg.f` is public
        public_parts = [p.lower() for p in entry.public_path.split(".")[1:-1]]
        hit = [p for p in public_parts if p in _INTERNAL_PARTS]
        return f"only reachable through internal module {entry.public_path.rsplit('.', 1)[0]}" if hit else None
    if check == "vendored-module":
        hit = [p for p in module_parts if p in _VENDORED_PARTS]
        return f"defined in vendored module {entry.module}" if hit else None
    if check == "no-source":
        if entry.stub_only or source is None:
            return "only a type stub or a compiled module defines it"
        return None
    if check == "no-docstring":
        return None if docstring else "no docstring"
    if check == "thin-docstring":
        words = _words(docstring)
        return None if words >= options.min_docstring_words else \
            f"{words} word(s), fewer than {options.min_docstring_words}"
    if check == "boilerplate-docstring":
        summary = _summary(docstring)
        for pattern in _BOILERPLATE:
            if pattern.search(summary):
                return f"generic text: {summary[:80]!r}"
        shared = summaries.get(summary.lower(), 0)
        if shared >= options.boilerplate_share and _words(docstring) < 40:
            return f"its text is shared by {shared} APIs of the release: {summary[:80]!r}"
        return None
    raise ValueError(check)


def read_candidates(path: Path) -> list[dict[str, Any]]:
    """The records of a `candidates.jsonl` (`UserError` naming file and line when one is bad)."""
    if path.is_dir():
        path = path / CANDIDATES
    if not path.is_file():
        raise UserError(f"{path}: no such file\n  fix: run `knowbench novel discover` first")
    records = []
    for number, record in read_objects(path):
        missing = [key for key in ("api", "canonical", "library", "new_version", "kept") if key not in record]
        if missing:
            raise UserError(f"{path}:{number}: missing field(s) {', '.join(missing)}\n"
                            "  fix: use a file written by `knowbench novel discover`")
        records.append(record)
    return records
