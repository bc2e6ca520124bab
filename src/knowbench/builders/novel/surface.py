"""A library's API surface read statically from its unpacked distribution with griffe.

Nothing is imported or installed: griffe parses the `.py` files (and `.pyi` stubs where a
compiled module has no Python source). The surface holds every function, class and method
the distribution *defines* (its canonical path, `pkg._api.put`), each with the paths through
which it is *exposed* (`pkg.put`, through `pkg/__init__.py` re-exporting it). An exposure is
public when no component of its path starts with an underscore and each module on the way
exports the name (`__all__` when the module has one; else any name it defines or
wildcard-imports, not what it merely imports; except that a package's `__init__` whose
`__all__` cannot be read statically re-exports what it imports from its own package).

Test suites inside the package (`tests/`, `test_*.py`, `conftest.py`) are not parsed at all
(`Surface.skipped_modules` lists them): they are not API, and in numpy they are half of the
source. Dunder methods are left out (they are reached through syntax, not called by name); a class's
signature is its constructor's (`__init__` or the dataclass fields), `self`/`cls` dropped.
"""

from __future__ import annotations

import ast
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import griffe

from knowbench.errors import UserError
from knowbench.parsing import parse_python

_NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                 "bench", "tools", "scripts", "build", "dist", "setup", "conftest", "noxfile",
                 "tasks", "site", "src"}
logging.getLogger("griffe").setLevel(logging.ERROR)


@dataclass
class ApiObject:
    """One function, class or method a distribution defines."""

    canonical: str
    kind: str  # function | class | method
    name: str
    module: str
    parameters: list[dict[str, Any]]
    returns: str | None
    docstring: str
    filepath: str | None
    lineno: int | None
    endlineno: int | None
    decorators: list[str]
    stub_only: bool
    exposures: set[str] = field(default_factory=set)
    public_exposures: set[str] = field(default_factory=set)
    returns_canonical: str | None = None  # where a bare-name return annotation resolves to

    @property
    def public_path(self) -> str:
        """The shortest public path, else the canonical one."""
        if self.public_exposures:
            return min(self.public_exposures, key=lambda p: (p.count("."), len(p), p))
        return self.canonical

    def signature_text(self) -> str:
        parts: list[str] = []
        star = False
        slash_pending = False
        for p in self.parameters:
            if p["kind"] == "positional-only":
                slash_pending = True
            elif slash_pending:
                parts.append("/")
                slash_pending = False
            if p["kind"] == "keyword-only" and not star:
                parts.append("*")
                star = True
            prefix = {"variadic positional": "*", "variadic keyword": "**"}.get(p["kind"], "")
            if p["kind"] == "variadic positional":
                star = True
            text = prefix + p["name"]
            if p["annotation"]:
                text += f": {p['annotation']}"
            if p["default"] is not None:
                text += f" = {p['default']}" if p["annotation"] else f"={p['default']}"
            parts.append(text)
        if slash_pending:
            parts.append("/")
        text = f"({', '.join(parts)})"
        return f"{text} -> {self.returns}" if self.returns else text

    def describe(self) -> dict[str, Any]:
        return {"canonical": self.canonical, "kind": self.kind, "module": self.module,
                "signature": self.signature_text(), "parameters": self.parameters,
                "returns": self.returns, "file": self.filepath, "lines": [self.lineno, self.endlineno],
                "exposures": sorted(self.public_exposures)}


@dataclass
class Surface:
    """What one release defines, keyed by canonical path."""

    packages: list[str]
    root: Path
    objects: dict[str, ApiObject]
    modules: dict[str, str]  # module path -> file path (for reading sources later)
    load_errors: list[str] = field(default_factory=list)
    skipped_modules: list[str] = field(default_factory=list)  # test suites, not read


def _test_part(part: str) -> bool:
    """A module name that holds a test suite (`tests`, `test`, `conftest`, `test_*`, `*_test`);
    `testing` is not one: it is often public API (`numpy.testing`), left to the filters."""
    return part in ("tests", "test", "conftest") or part.startswith("test_") or part.endswith("_test")


def find_packages(root: Path, name: str) -> list[str]:
    """The import packages an unpacked sdist or wheel holds (top-level directories with an
    `__init__.py(i)`, or top-level modules), the ones named like the distribution first."""
    base = root / "src" if (root / "src").is_dir() else root
    found: list[str] = []
    for entry in sorted(base.iterdir()):
        if entry.name.startswith((".", "_")) and not entry.name.startswith("_"):
            continue
        if entry.is_dir() and ((entry / "__init__.py").is_file() or (entry / "__init__.pyi").is_file()):
            if entry.name.lower() not in _NOT_PACKAGES and not entry.name.endswith((".dist-info", ".egg-info")):
                found.append(entry.name)
        elif entry.suffix == ".py" and entry.stem.lower() not in _NOT_PACKAGES and not entry.stem.startswith("_"):
            found.append(entry.stem)
    wanted = name.lower().replace("-", "_")
    named = [p for p in found if p.lower() == wanted or wanted.startswith(p.lower())]
    return named or [p for p in found if not p.startswith("_")]


def search_root(root: Path) -> Path:
    return root / "src" if (root / "src").is_dir() else root


def load_surface(root: Path, packages: list[str]) -> Surface:
    """Load `packages` from `root` statically and collect what they define and expose.

    Raises `UserError` when none of the packages can be loaded.
    """
    base = search_root(root)
    loader = griffe.GriffeLoader(search_paths=[str(base)], allow_inspection=False,
                                 docstring_parser=None)
    skipped: list[str] = []
    find_submodules = loader.finder.submodules

    def submodules(module: Any) -> list[Any]:  # test suites are not API: never parsed
        found = []
        for parts, path in find_submodules(module):
            if any(_test_part(part) for part in parts):  # parts are relative to `module`
                skipped.append(".".join((module.path, *parts)))
            else:
                found.append((parts, path))
        return found

    loader.finder.submodules = submodules  # type: ignore[method-assign]
    loaded: list[Any] = []
    errors: list[str] = []
    for package in packages:
        try:
            loaded.append(loader.load(package))
        except (ImportError, griffe.LoadingError, OSError, SyntaxError) as error:
            errors.append(f"{package}: {error}")
    if not loaded:
        raise UserError(f"{root}: no package could be loaded ({'; '.join(errors) or 'none found'})\n"
                        "  fix: name the import package with --package")
    with contextlib.suppress(Exception):
        loader.resolve_aliases(implicit=False, external=False)
    surface = Surface(packages=[p.name for p in loaded], root=root, objects={}, modules={},
                      load_errors=errors, skipped_modules=sorted(set(skipped)))
    tops = {p.name for p in loaded}
    for package in loaded:
        _walk_module(package, surface, tops, public=not package.name.startswith("_"), seen=set())
    return surface


def _in_ours(path: str, tops: set[str]) -> bool:
    return path.split(".")[0] in tops


def _walk_module(module: Any, surface: Surface, tops: set[str], public: bool, seen: set[str]) -> None:
    if module.path in seen:
        return
    seen.add(module.path)
    if module.filepath is not None and not isinstance(module.filepath, list):
        surface.modules[module.path] = str(module.filepath)
    # A package's `__init__` whose `__all__` cannot be read statically (built at import time,
    # as numpy's is) re-exports what it imports from its own package.
    reexports = not module.exports and str(module.filepath or "").endswith(("__init__.py", "__init__.pyi"))
    for name, member in list(module.members.items()):
        try:
            target = member.final_target if member.is_alias else member
        except (griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError, AttributeError):
            continue
        if target is None or not _in_ours(target.path, tops):
            continue
        exposed = f"{module.path}.{name}"
        try:
            member_public = public and not name.startswith("_") and (
                bool(member.is_public) or (member.is_alias and reexports))
        except Exception:
            member_public = public and not name.startswith("_")
        kind = target.kind.value
        if kind == "module":
            if not member.is_alias:
                _walk_module(target, surface, tops, member_public, seen)
            continue
        if kind not in ("function", "class"):
            continue
        entry = _record(target, surface, "method" if target.parent is not None
                        and target.parent.kind.value == "class" else kind)
        if entry is None:
            continue
        entry.exposures.add(exposed)
        if member_public:
            entry.public_exposures.add(exposed)
        if kind == "class":
            _walk_class(target, exposed, member_public, surface, tops, seen)


def _walk_class(cls: Any, exposed: str, public: bool, surface: Surface, tops: set[str], seen: set[str]) -> None:
    key = f"{cls.path}@{exposed}"
    if key in seen:
        return
    seen.add(key)
    for name, member in list(cls.members.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if member.is_alias:
            continue
        kind = member.kind.value
        if kind != "function":
            continue
        entry = _record(member, surface, "method")
        if entry is None:
            continue
        path = f"{exposed}.{name}"
        entry.exposures.add(path)
        if public and not name.startswith("_"):
            entry.public_exposures.add(path)


def _text(expr: Any) -> str | None:
    if expr is None:
        return None
    text = str(expr)
    return text or None


def _record(obj: Any, surface: Surface, kind: str) -> ApiObject | None:
    existing = surface.objects.get(obj.path)
    if existing is not None:
        return existing
    try:
        params = list(obj.parameters) if kind != "class" else _class_parameters(obj)
    except Exception:
        params = []
    labels = set(getattr(obj, "labels", set()) or set())
    if kind == "method" and params and params[0].name in ("self", "cls") and "staticmethod" not in labels:
        params = params[1:]
    if kind == "class" and params and params[0].name in ("self", "cls"):
        params = params[1:]
    parameters = [{"name": p.name, "kind": p.kind.value if p.kind is not None else "positional or keyword",
                   "annotation": _text(p.annotation), "default": _text(p.default)} for p in params]
    for parameter, p in zip(parameters, params, strict=True):
        value = _constant_value(obj, p.default)
        if value is not None:
            parameter["default_value"] = value
    for p in parameters:
        p["kind"] = p["kind"].replace(" ", "-") if p["kind"] in ("positional only", "keyword only") else p["kind"]
    filepath = obj.filepath if not isinstance(obj.filepath, list) else (obj.filepath[0] if obj.filepath else None)
    stub_only = filepath is None or (str(filepath).endswith(".pyi") and not Path(str(filepath)[:-1]).is_file())
    returns = _text(obj.returns) if kind != "class" and hasattr(obj, "returns") else None
    returns_canonical = None
    if returns and type(obj.returns).__name__ == "ExprName":
        with contextlib.suppress(Exception):
            returns_canonical = obj.returns.canonical_path
    decorators = [str(d.value) for d in getattr(obj, "decorators", []) or []]
    docstring = obj.docstring.value if obj.docstring is not None else ""
    if kind == "class" and not docstring.strip():
        init = obj.members.get("__init__")
        if init is not None and not init.is_alias and init.docstring is not None:
            docstring = init.docstring.value
    entry = ApiObject(canonical=obj.path, kind=kind, name=obj.name, module=obj.module.path,
                      parameters=parameters, returns=returns, docstring=docstring,
                      filepath=str(filepath) if filepath else None, lineno=obj.lineno,
                      endlineno=obj.endlineno, decorators=decorators, stub_only=bool(stub_only),
                      returns_canonical=returns_canonical)
    surface.objects[obj.path] = entry
    return entry


def _constant_value(obj: Any, default: Any) -> str | None:
    """The value expression of a module constant used as a default (`DEFAULT_TIMEOUT_CONFIG`
    -> `Timeout(timeout=5.0)`), when the name resolves to an attribute of the package with a
    literal or call value; None otherwise."""
    if default is None or type(default).__name__ not in ("ExprName", "ExprAttribute"):
        return None
    try:
        target = obj.modules_collection.get_member(default.canonical_path)
    except Exception:
        return None
    if target is None or getattr(target, "kind", None) is None or target.kind.value != "attribute":
        return None
    value = _text(getattr(target, "value", None))
    return value if value and len(value) <= 80 else None


def _class_parameters(cls: Any) -> list[Any]:
    init = cls.members.get("__init__")
    if init is not None and not init.is_alias and init.kind.value == "function":
        return list(init.parameters)
    with contextlib.suppress(Exception):
        return list(cls.parameters)
    return []


def object_source(entry: ApiObject) -> str | None:
    """The source text of `entry` (its `def`/`class` block with decorators), or None."""
    if entry.filepath is None or entry.lineno is None or entry.stub_only:
        return None
    path = Path(entry.filepath)
    if path.suffix == ".pyi":
        path = path.with_suffix(".py")
        if not path.is_file():
            return None
        return _source_by_name(path, entry)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    end = entry.endlineno or entry.lineno
    return "\n".join(lines[entry.lineno - 1:end])


def _source_by_name(path: Path, entry: ApiObject) -> str | None:
    text = path.read_text(errors="replace")
    with contextlib.suppress(SyntaxError):
        for node in ast.walk(parse_python(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == entry.name:
                return ast.get_source_segment(text, node)
    return None
