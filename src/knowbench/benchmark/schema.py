"""The benchmark format: the contract between building a benchmark and running it.

A benchmark is a directory holding `benchmark.json` (a `Manifest`) and `tasks.jsonl`
(one `Task` per line). `docs/format.md` documents every field; this module is the
machine-checked version of that document.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
import threading
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from knowbench.benchmark.collect import collect as collect_tests
from knowbench.parsing import parse_python

FORMAT_VERSION = 1

_TASK_ID = re.compile(r"^[A-Za-z0-9_.:/@+-]+$")
_QUALNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_LETTER = re.compile(r"^[A-Z]$")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provenance(_Record):
    """Where a benchmark came from, precisely enough to rebuild or audit it."""

    source: str = Field(description="What the benchmark was built from: a URL, a path, a requirement.")
    created: str | None = Field(default=None, description="ISO-8601 time of the build.")
    tool: str | None = Field(default=None, description="What built it, e.g. 'knowbench 0.1.0'.")
    versions: dict[str, str] = Field(default_factory=dict, description="Versions of the sources.")
    hashes: dict[str, str] = Field(default_factory=dict, description="Content hashes, 'sha256:<hex>'.")


class Manifest(_Record):
    """`benchmark.json`: what a benchmark is and what its tests need."""

    format_version: int = FORMAT_VERSION
    name: str = Field(min_length=1)
    version: str = "1"
    description: str = ""
    domains: list[str] = Field(default_factory=list)
    requirements: list[str] = Field(
        default_factory=list, description="pip requirements the tests import, e.g. 'numpy>=1.24'."
    )
    time_limit_s: float = Field(default=10.0, gt=0, description="Default wall-clock limit per sample.")
    preload: list[str] = Field(
        default_factory=list,
        description="Modules the fork server imports once, before any sample (e.g. 'numpy'); "
                    "modules the tasks import at top level are added automatically.",
    )
    provenance: Provenance

    @field_validator("format_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != FORMAT_VERSION:
            raise ValueError(
                f"format_version {value} is not supported by this knowbench "
                f"(it reads version {FORMAT_VERSION})"
            )
        return value


class TestItem(_Record):
    """One runnable test found inside a `TestSpec`: the unit that passes or fails."""

    __test__ = False  # not a pytest test class

    id: str
    spec: str = Field(description="Name of the TestSpec the item belongs to.")
    kind: Literal["function", "unittest", "class", "block"]
    function: str | None = None
    cls: str | None = None


class TestSpec(_Record):
    """A named piece of test code.

    `code` may define pytest-style functions (`def test*`, optionally taking the fixtures
    `tmp_path`, `monkeypatch`, `capsys`), pytest-style classes (`class Test*` on bases the spec defines,
    methods `test*`), `unittest.TestCase` subclasses, or none of these; in the last case the
    code itself is one test (a plain block of asserts). It runs in a namespace that already
    holds everything the program defines, so it can call the target by its bare name.
    """

    __test__ = False  # not a pytest test class

    name: str = Field(min_length=1)
    code: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if "::" in name or name != name.strip():
            raise ValueError("a test name may not contain '::' or surrounding spaces")
        return name

    @field_validator("code")
    @classmethod
    def _parses(cls, code: str) -> str:
        try:
            _spec_tree(code)
        except SyntaxError as error:
            raise ValueError(f"test code does not parse: {error.msg} (line {error.lineno})") from None
        return code

    def items(self) -> list[TestItem]:
        """The tests this spec holds, found statically so every sample has the same list."""
        return list(_spec_items(self.name, self.code))

    def imports(self) -> list[tuple[str, tuple[str, ...]]]:
        """What the code imports, anywhere in it: (module, names from it), absolute imports
        only. The runner imports these before any sample code runs (see docs/execution.md)."""
        return list(_spec_imports(self.code))

    def rebinds(self) -> list[tuple[str, tuple[str, ...]]]:
        """What the code rebinds by hand, anywhere in it: `os.remove = fake`, `np.random.seed =
        ...`, `setattr(os, "remove", fake)`, `Session.get = fake` after `from requests import
        Session`, as (module, attribute path): `("os", ("remove",))`. A name no import binds is
        looked up in the program's globals (module ""); `setattr` with a computed name watches
        all of the owner's ("*"). A split judge watches these (docs/execution.md, *Patches stay
        in the tests' process*)."""
        return list(_spec_rebinds(self.code))


# CPython before 3.11.8 / 3.12.1 can raise "SystemError: AST constructor recursion depth
# mismatch" when threads parse at the same time (cpython#106905). Evaluation, certification and
# engines run on threads, so all code they parse is parsed under this one lock, and each test
# spec once. Parsing takes microseconds; executions take the time. Reentrant: code holding it
# (assembling a program) goes on to find a spec's items, which takes it again.
PARSE_LOCK = threading.RLock()


@functools.lru_cache(maxsize=4)
def _spec_tree(code: str) -> ast.Module:
    """A spec's syntax tree, parsed once for its items, imports and rebindings (read, never
    changed, by each)."""
    with PARSE_LOCK:
        return parse_python(code)


@functools.lru_cache(maxsize=65536)
def _spec_items(spec: str, code: str) -> tuple[TestItem, ...]:
    tree = _spec_tree(code)
    found = [TestItem(id="::".join(part for part in (spec, cls, function) if part), spec=spec, kind=kind,
                      cls=cls, function=function)
             for cls, function, kind in collect_tests(tree)]
    return tuple(found) or (TestItem(id=spec, spec=spec, kind="block"),)


@functools.lru_cache(maxsize=65536)
def _spec_imports(code: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # An import statement spells the ASCII keyword `import`: code without it has none.
    if "import" not in code:
        return ()
    tree = _spec_tree(code)
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, tuple(alias.name for alias in node.names if alias.name != "*")))
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=65536)
def _spec_rebinds(code: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if "." not in code and "setattr" not in code and "delattr" not in code:  # no `a.b = ...`, no setattr
        return ()
    tree = _spec_tree(code)
    # local name -> every (module, path in it) it may stand for: what an import binds it to, or
    # an assignment of one (`fs = os`, `join = os.path`), anywhere in the code
    aliases: dict[str, list[tuple[str, tuple[str, ...]]]] = {"__builtins__": [("builtins", ())]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases.setdefault(alias.asname or top, []).append((alias.name if alias.asname else top, ()))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases.setdefault(alias.asname or alias.name, []).append((node.module, (alias.name,)))
    assigned = [pair for node in ast.walk(tree) for pair in _bound_pairs(node)]
    for _ in range(2):  # (an alias of an alias)
        for name, chain in assigned:
            for module, path in _resolve_chain(chain, aliases) if chain and chain[0] != name else ():
                if (module, path) not in aliases.setdefault(name, []):
                    aliases[name].append((module, path))
    chains: list[list[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = [leaf for target in node.targets for leaf in _assigned(target)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            targets = []
        chains.extend(chain for chain in map(_attribute_chain, targets) if len(chain) > 1)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                and len(node.args) >= 2):
            owner = _attribute_chain(node.args[0])
            name = node.args[1]
            if owner:  # a name computed at run time: any of the owner's ("*")
                chains.append([*owner, name.value if isinstance(name, ast.Constant)
                               and isinstance(name.value, str) else "*"])
    found = []
    for chain in chains:
        if chain[0] not in ("self", "cls"):
            found.extend(_resolve_chain(chain, aliases))
    return tuple(dict.fromkeys(found))


def _bound_pairs(node: ast.AST) -> list[tuple[str, list[str]]]:
    """(name, the attribute chain bound to it) of what `node` binds: `fs = os`, `fs, n = os, 1`,
    `fs: T = os`, `(fs := os)`, a parameter's default (`def test(fs=os)`)."""
    pairs: list[tuple[ast.expr, ast.expr | None]] = []
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(node.value.elts):
                pairs += list(zip(target.elts, node.value.elts))  # noqa: B905 (lengths checked)
            else:
                pairs.append((target, node.value))
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
        pairs.append((node.target, node.value))
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        positional = [*node.args.posonlyargs, *node.args.args]
        pairs += [(ast.Name(id=argument.arg), default) for argument, default
                  in zip(positional[len(positional) - len(node.args.defaults):], node.args.defaults)]  # noqa: B905
        pairs += [(ast.Name(id=argument.arg), default) for argument, default
                  in zip(node.args.kwonlyargs, node.args.kw_defaults) if default is not None]  # noqa: B905
    return [(target.id, _attribute_chain(value)) for target, value in pairs
            if isinstance(target, ast.Name) and value is not None]


def _resolve_chain(chain: list[str], aliases: dict[str, list[tuple[str, tuple[str, ...]]]]) -> list[
        tuple[str, tuple[str, ...]]]:
    """What `chain` may reach, as (module, path): through every module its first name may stand
    for; a name no import binds is one the tests hold from the program's globals (`os` the
    program imported), looked up there (module "")."""
    if chain[0].startswith("<import>"):
        return [(chain[0][len("<import>"):], tuple(chain[1:]))]
    return [(module, (*path, *chain[1:])) for module, path in aliases.get(chain[0], [("", (chain[0],))])]


def _assigned(target: ast.expr) -> list[ast.expr]:
    """The single targets of an assignment's target (`a, os.remove = ...` has two)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for element in target.elts for leaf in _assigned(element)]
    if isinstance(target, ast.Starred):
        return _assigned(target.value)
    return [target]


def _attribute_chain(node: ast.expr) -> list[str]:
    """`os.path.join` as ["os", "path", "join"], `importlib.import_module("os").remove` (or
    `__import__("os")`) as ["<import>os", "remove"]; [] for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (_attribute_chain(node.func)[-1:] == ["import_module"]
                 or (isinstance(node.func, ast.Name) and node.func.id == "__import__"))):
        return ["<import>" + node.args[0].value, *reversed(parts)]
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


Invocation = Literal["framework", "direct"]
"""How a test item is called; see `FunctionTask.invocation`."""


# Where a task's target lives, in a task's free-form `metadata`: one vocabulary, written by
# every builder (`source_metadata`) and read by leakage control (`source_location`). See
# docs/format.md ("Where a target lives").
SOURCE_PATH = "source_path"  # file defining the target, relative to the source's root
SOURCE_SPAN = "source_span"  # [first, last] line (1-based, inclusive) of its definition
SOURCE_MODULE = "module"  # dotted module defining it
# Names older builds wrote, still read: `knowbench mine` wrote `file` and `line` (the `def`
# line only), DomainEval imports `method_path` (DomainEval's path, under srcdata/).
_LEGACY_PATHS = ("file", "method_path")
_LEGACY_MODULES = ("target_module",)


class SourceLocation(BaseModel):
    """Where a task's target is defined, as far as its metadata says."""

    model_config = ConfigDict(frozen=True)

    path: str | None = None
    span: tuple[int, int] | None = None
    module: str | None = None

    @property
    def known(self) -> bool:
        return bool(self.path or self.module)


def source_metadata(path: str | None, span: tuple[int, int] | None = None,
                    module: str | None = None) -> dict[str, Any]:
    """The metadata entries that locate a target (only those known)."""
    entries: dict[str, Any] = {}
    if path:
        entries[SOURCE_PATH] = path
    if span:
        entries[SOURCE_SPAN] = [min(span), max(span)]
    if module:
        entries[SOURCE_MODULE] = module
    return entries


def source_location(metadata: dict[str, Any]) -> SourceLocation:
    """The target's location from a task's metadata: `source_path` / `source_span` / `module`,
    falling back to the names older builds wrote (`file` + `line`, `method_path`,
    `target_module`)."""

    def text(*keys: str) -> str | None:
        for key in keys:
            value = metadata.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

    span = None
    value = metadata.get(SOURCE_SPAN)
    if isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int for v in value):
        span = (min(value), max(value))
    elif SOURCE_PATH not in metadata and type(metadata.get("line")) is int and metadata.get("file"):
        span = (metadata["line"], metadata["line"])  # old mined tasks: the `def` line only
    return SourceLocation(path=text(SOURCE_PATH, *_LEGACY_PATHS), span=span,
                          module=text(SOURCE_MODULE, *_LEGACY_MODULES))


class _TaskBase(_Record):
    task_id: str = Field(min_length=1)
    domain: str = Field(min_length=1)
    framework: str | None = None
    difficulty: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("task_id")
    @classmethod
    def _id_chars(cls, value: str) -> str:
        if not _TASK_ID.match(value):
            raise ValueError("task_id may hold letters, digits and _ . : / @ + - only")
        return value


class BundleParameter(_Record):
    """One parameter of a knowledge bundle's signature (part of S)."""

    name: str = Field(min_length=1)
    type: str | None = Field(default=None, description="The annotation as source text, e.g. 'int | None'.")
    default: str | None = Field(
        default=None, description="The default as source text (e.g. 'None'); null when required.")
    description: str = ""
    constraints: Any = Field(
        default=None, description="Constraints on the value, as the bundle's source recorded them "
        "(NovelAPIBench's `constraints`); not shown in prompts.")


class BundleSignature(_Record):
    """S: the API's fully qualified name, parameters and return type."""

    qualified_name: str = Field(description="Fully qualified name, e.g. 'more_itertools.chunked'.")
    parameters: list[BundleParameter] = Field(default_factory=list)
    returns: str | None = Field(default=None, description="The return annotation as source text.")

    @field_validator("qualified_name")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if not _QUALNAME.match(value):
            raise ValueError("qualified_name must be a dotted Python name such as 'pkg.mod.func'")
        return value


class BundleExample(_Record):
    """E: one usage example and whether it ran."""

    code: str = Field(min_length=1)
    status: Literal["passed", "failed", "not_run"] = Field(
        default="not_run", description="Outcome of executing the example; 'failed' ones are never shown.")
    source: str | None = Field(default=None, description="Where the example came from (URL, path).")
    note: str | None = Field(default=None, description="Why it has its status (NovelAPIBench's `reason`, "
                             "e.g. 'runs cleanly').")


class KnowledgeBundle(_Record):
    """NovelAPIBench's decomposed knowledge about a task's target API: S, E, M and C."""

    signature: BundleSignature = Field(description="S: qualified name, parameters, return type.")
    examples: list[BundleExample] = Field(default_factory=list, description="E: usage examples.")
    mechanism: str = Field(default="", description="M: how the API works, in prose.")
    source: str = Field(default="", description="C: the API's implementation, docstrings stripped.")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Fields of the bundle's source record that knowbench does not "
        "interpret (NovelAPIBench: library, domain, the mechanism's grounding/references/changelog notes, "
        "is_modified, old_signature, ...), kept so that exporting gives the record back.")


class FunctionTask(_TaskBase):
    """Write the body of one function or method so that its tests pass."""

    kind: Literal["function"] = "function"
    instruction: str = Field(min_length=1, description="What the target must do, in words.")
    prompt_code: str = Field(description="The code the model sees; the target's body is masked.")
    entry_point: str = Field(description="Qualified name of the target in prompt_code: 'f' or 'Cls.f'.")
    context: str = Field(default="", description="Code that runs before prompt_code (imports, helpers).")
    reference: str = Field(description="Gold code: the target's full definition (or prompt_code filled in).")
    tests: list[TestSpec] = Field(min_length=1)
    target_api: str | None = Field(
        default=None, description="The library API the task is about: one whose knowledge helps "
        "write the target (never the target itself), e.g. 're.sub'.")
    knowledge_apis: list[str] = Field(
        default_factory=list, description="Qualified names of every library API whose knowledge "
        "helps write the target (never the target itself); builders record what the reference "
        "calls. Retrieval diagnostics (hit@k) look for these, else for target_api.")
    bundle: KnowledgeBundle | None = Field(
        default=None, description="Knowledge about target_api for oracle methods (S/E/M/C).")
    time_limit_s: float | None = Field(default=None, gt=0)
    isolation: Literal["split", "in-process"] | None = Field(
        default=None, description="How samples are judged: split (tests in a process the "
        "candidate cannot reach), in-process, or None to decide by running the reference split.")
    invocation: Invocation = Field(
        default="framework", description="How each test item is called: 'framework' (as pytest "
        "or unittest runs it: fixtures, set-up and tear-down, items of a task in one process) or "
        "'direct' (as a script that calls it: `Cls().test_x()` or `test_x()`, nothing else, "
        "each item in a fresh copy of the process that loaded the program).")
    installed_module: str | None = Field(
        default=None, description="The installed module the target was cut from (mined tasks): "
        "each run puts the program's target in the original's place there as well, so the "
        "library's own calls of it (a subclass, a module function, an object the library makes) "
        "run the candidate's. None: the program stands beside the library, which keeps its own.")
    api_check: Literal["record", "require"] | None = Field(
        default=None, description="Spy on target_api in every test (judged in-process): 'record' "
        "counts its calls and whether their arguments bind (API_acc, Param_corr); 'require' also "
        "fails a test that passed without calling it. None: no spy.")

    @field_validator("entry_point")
    @classmethod
    def _qualname(cls, value: str) -> str:
        if not _QUALNAME.match(value):
            raise ValueError("entry_point must be a dotted Python name such as 'parse' or 'Parser.parse'")
        return value

    @field_validator("installed_module")
    @classmethod
    def _module_name(cls, value: str | None) -> str | None:
        if value is not None and not _QUALNAME.match(value):
            raise ValueError(f"installed_module must be a dotted module name such as 'pkg.core', not {value!r}")
        return value

    @field_validator("knowledge_apis")
    @classmethod
    def _api_names(cls, values: list[str]) -> list[str]:
        bad = [value for value in values if not _QUALNAME.match(value)]
        if bad:
            raise ValueError(f"knowledge_apis must hold dotted Python names such as 're.sub', not {bad[0]!r}")
        return values

    @field_validator("prompt_code", "context", "reference")
    @classmethod
    def _code_parses(cls, code: str) -> str:
        try:
            parse_python(textwrap.dedent(code))  # a method's reference may keep its indentation
        except SyntaxError as error:
            raise ValueError(f"does not parse: {error.msg} (line {error.lineno})") from None
        return code

    @model_validator(mode="after")
    def _consistent(self) -> FunctionTask:
        if find_definition(parse_python(self.prompt_code), self.entry_point) is None:
            raise ValueError(f"prompt_code defines no function '{self.entry_point}' (entry_point)")
        names = [test.name for test in self.tests]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"test names must be unique; repeated: {', '.join(duplicates)}")
        if self.api_check is not None and not self.target_api:
            raise ValueError("api_check needs target_api: the API whose calls are checked")
        if self.api_check is not None and self.isolation == "split":
            raise ValueError("api_check spies in the sample's process: isolation must be 'in-process' "
                             "(or null, which then means in-process)")
        return self

    def test_items(self) -> list[TestItem]:
        """Every test of this task, in order: the denominator of AvgPassRate."""
        return [item for spec in self.tests for item in spec.items()]


def _relative_path(value: str, what: str) -> str:
    """A '/'-separated path inside a project, without '..', '\\' or a leading '/'."""
    parts = value.split("/")
    if (not value or value.startswith("/") or "\\" in value
            or any(part in ("", "..") for part in parts[:-1] + ([parts[-1]] if parts[-1] else []))):
        raise ValueError(f"{what} must be a relative '/'-separated path inside the project "
                         f"without '..', got {value!r}")
    return value


class ProjectTarget(_Record):
    """One function or method of a project that a candidate writes."""

    file: str = Field(description="The file defining it, relative to the project's workdir.")
    qualname: str = Field(description="Its qualified name in that file: 'f' or 'Cls.f'.")

    @field_validator("file")
    @classmethod
    def _file(cls, value: str) -> str:
        return _relative_path(value, "file")

    @field_validator("qualname")
    @classmethod
    def _qualname(cls, value: str) -> str:
        if not _QUALNAME.match(value):
            raise ValueError("qualname must be a dotted Python name such as 'f' or 'Cls.f'")
        return value


class ProjectDocument(_Record):
    """A requirement document shown with a project task (overview, module division, ...)."""

    name: str = Field(min_length=1)
    text: str = ""


class ProjectRef(_Record):
    """Where a project task's project is and how its tests run."""

    path: str = Field(description="The project's directory, relative to the benchmark directory; "
                      "copied whole into each sample's work directory.")
    workdir: str = Field(default=".", description="Relative to `path`: where the tests run "
                         "(pytest's rootdir); target files and test ids are relative to it.")
    python_path: list[str] = Field(
        default_factory=lambda: ["."], description="Directories put first on sys.path, "
        "relative to `workdir` ('..' allowed, staying inside `path`).")
    targets: list[ProjectTarget] = Field(min_length=1)
    tests: list[str] = Field(
        min_length=1, description="Test files or pytest node ids ('file::Cls::test') run for "
        "the task, relative to `workdir`.")
    documents: list[ProjectDocument] = Field(default_factory=list)

    @field_validator("path", "workdir")
    @classmethod
    def _inside(cls, value: str) -> str:
        return "." if value in (".", "") else _relative_path(value, "path")

    @field_validator("tests")
    @classmethod
    def _test_paths(cls, values: list[str]) -> list[str]:
        for value in values:
            _relative_path(value.split("::")[0], "a test")
        return values


def select_items(items: list[TestItem], tests: list[str]) -> list[TestItem]:
    """The items that `tests` (files, or pytest node ids `file::Cls::test`) select, in order."""
    return [item for item in items
            if any(item.spec == test or item.id == test or item.id.startswith(test + "::")
                   for test in tests)]


class ProjectTask(FunctionTask):
    """Write one or several functions of a real project so that the project's own tests pass.

    The project tree ships with the benchmark (`project.path`). For each sample the engine
    copies it into the sample's work directory, replaces each target's body with the
    candidate's by syntax tree (the benchmark's tree is never touched), and runs the listed
    tests with pytest inside the sandbox. `prompt_code` shows the targets with masked
    bodies (a method inside its class), `entry_point` is the first target, `reference` holds
    the project's own definitions, and `tests` holds the test files (name: the path relative
    to the workdir, code: the file's text), from which the items are found statically.
    """

    kind: Literal["project"] = "project"  # type: ignore[assignment]
    project: ProjectRef
    isolation: Literal["split", "in-process"] | None = "in-process"
    _root: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _project_consistent(self) -> ProjectTask:
        if self.isolation != "in-process":
            raise ValueError("a project task runs in-process (its tests import the candidate's code)")
        names = {spec.name for spec in self.tests}
        for test in self.project.tests:
            if test.split("::")[0] not in names:
                raise ValueError(f"project test {test!r} names no file among the task's tests")
        if not self.test_items():
            raise ValueError("the project's tests select no test item")
        return self

    def test_items(self) -> list[TestItem]:
        """The items of the selected tests: whole files, or the node ids named."""
        return select_items([item for spec in self.tests for item in spec.items()], self.project.tests)

    @property
    def root(self) -> Any:
        """The benchmark directory the task was loaded from (None when built in memory)."""
        return self._root

    def bind(self, benchmark_dir: Any) -> ProjectTask:
        """Record the benchmark directory that `project.path` is relative to."""
        self._root = benchmark_dir
        return self


class ChoiceTask(_TaskBase):
    """A multiple-choice knowledge question with one or several correct letters."""

    kind: Literal["choice"] = "choice"
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2, description="Letter -> option text, in order.")
    answer: list[str] = Field(min_length=1, description="The correct letters.")
    multiple: bool = Field(default=False, description="True when several letters may be correct.")
    instruction: str = ""

    @field_validator("answer")
    @classmethod
    def _unique_letters(cls, answer: list[str]) -> list[str]:
        if len(set(answer)) != len(answer):
            raise ValueError(f"answer letters repeat: {answer}")
        return answer

    @model_validator(mode="after")
    def _answer_in_options(self) -> ChoiceTask:
        bad = [letter for letter in self.options if not _LETTER.match(letter)]
        if bad:
            raise ValueError(f"option keys must be single capital letters, got {bad}")
        missing = [letter for letter in self.answer if letter not in self.options]
        if missing:
            raise ValueError(f"answer letters {missing} are not among the options {list(self.options)}")
        if not self.multiple and len(self.answer) != 1:
            raise ValueError("a single-answer question needs exactly one answer letter (or set multiple)")
        return self


Task = Annotated[FunctionTask | ChoiceTask | ProjectTask, Field(discriminator="kind")]


def find_definition(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function or method definition named `qualname` ('f' or 'Cls.f') at top level of `tree`."""
    *owners, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    for owner in owners:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if cls is None:
            return None
        body = cls.body
    found = None
    for node in body:  # the last definition wins, as at run time
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return found


def imported_modules(code: str) -> set[str]:
    """Top-level package names a piece of code imports (absolute imports only)."""
    return {name.split(".")[0] for name in imported_names(code)}


def imported_names(code: str) -> set[str]:
    """The dotted names a piece of code imports (absolute imports only): `import a.b` gives
    a.b, `from a.b import c` gives a.b.c (a submodule or an attribute of a.b: whoever imports
    it decides, as `from a.b import c` does), `from a.b import *` gives a.b."""
    if "import" not in code:  # every import statement spells the keyword: nothing to parse
        return set()
    try:
        tree = parse_python(textwrap.dedent(code))
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update(node.module if alias.name == "*" else f"{node.module}.{alias.name}"
                         for alias in node.names)
    return names
