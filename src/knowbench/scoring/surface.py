"""API surfaces: which names a module exports, so a missing import, a wrong module path and
a hallucinated API can be told apart.

`stdlib_surface()` introspects common standard-library modules in this process (safe and
cheap, ~0.3 s once). `introspect_surface()` imports other packages in a separate Python
process, so their import-time side effects never touch the caller. A surface is plain data:
it can be stored next to a sample and reused.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import subprocess
import sys
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from knowbench.jsonl import load_json


class ApiSurface(BaseModel):
    """Which public names each module exports, and which attributes each class has.

    modules: module name -> exported names. classes: "module.Class" -> public attributes.
    Built by `stdlib_surface()` or `introspect_surface()`, or stored with a fixture.
    """

    model_config = ConfigDict(extra="forbid")

    modules: dict[str, list[str]] = Field(default_factory=dict)
    classes: dict[str, list[str]] = Field(default_factory=dict)
    _sets: dict[str, frozenset[str]] | None = PrivateAttr(default=None)

    def exports(self, module: str, name: str) -> bool:
        return name in self._index().get(module, frozenset())

    def defining(self, name: str) -> list[str]:
        """The modules that export `name`, sorted."""
        return sorted(module for module in self.modules if name in self._index()[module])

    def members_defining(self, name: str) -> list[str]:
        """The classes ("module.Class") that have an attribute `name`, sorted."""
        return sorted(cls for cls in self.classes if name in self._index()[cls])

    def knows(self, module: str) -> bool:
        return module in self.modules

    def merged(self, other: ApiSurface | None) -> ApiSurface:
        """A surface holding both; names of a module known to both are united."""
        if other is None or not (other.modules or other.classes):
            return self
        merged = {}
        for field in ("modules", "classes"):
            combined = {key: set(names) for key, names in getattr(self, field).items()}
            for key, names in getattr(other, field).items():
                combined.setdefault(key, set()).update(names)
            merged[field] = {key: sorted(names) for key, names in combined.items()}
        return ApiSurface(**merged)

    def project(self, names: Iterable[str]) -> ApiSurface:
        """Only what concerns `names`: a small surface to store with a sample. Entries that
        export none of them are dropped unless their own name is among `names` (so that
        `knows` still answers for the modules a sample imports)."""
        wanted = set(names)

        def keep(entries: dict[str, list[str]]) -> dict[str, list[str]]:
            return {key: sorted(set(values) & wanted) for key, values in entries.items()
                    if set(values) & wanted or key in wanted}

        return ApiSurface(modules=keep(self.modules), classes=keep(self.classes))

    def _index(self) -> dict[str, frozenset[str]]:
        if self._sets is None:
            self._sets = {key: frozenset(values)
                          for entries in (self.modules, self.classes) for key, values in entries.items()}
        return self._sets


STDLIB_SURFACE_MODULES: tuple[str, ...] = (
    "abc", "argparse", "array", "ast", "base64", "binascii", "bisect", "calendar", "cmath",
    "codecs", "collections", "collections.abc", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "glob",
    "gzip", "hashlib", "heapq", "hmac", "html", "inspect", "io", "itertools", "json", "logging",
    "math", "operator", "os", "os.path", "pathlib", "pickle", "pprint", "random", "re",
    "secrets", "shutil", "statistics", "string", "struct", "subprocess", "sys", "tempfile",
    "textwrap", "threading", "time", "types", "typing", "unicodedata", "urllib.parse", "uuid",
    "warnings", "zlib", "zoneinfo")
"""Standard-library modules whose callables and classes the default surface knows."""


@functools.lru_cache(maxsize=1)
def stdlib_surface() -> ApiSurface:
    """Callables, classes and submodules of common standard-library modules, plus the public
    attributes of their classes (as "module.Class"): enough to tell a missing import
    (`timedelta`) or a wrong path (`datetime.now`) from a hallucinated name."""
    modules: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for module_name in STDLIB_SURFACE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        names = []
        for name in dir(module):
            if name.startswith("_"):
                continue
            value = getattr(module, name, None)
            if callable(value) or inspect.ismodule(value):
                names.append(name)
            if inspect.isclass(value) and getattr(value, "__module__", "").split(".")[0] in (
                    module_name.split(".")[0], "_" + module_name.split(".")[0]):
                classes[f"{module_name}.{name}"] = sorted(
                    attr for attr in dir(value) if not attr.startswith("_"))
        modules[module_name] = sorted(names)
    return ApiSurface(modules=modules, classes=classes)


_INTROSPECT = r"""
import importlib, inspect, json, sys
modules, classes, failed = {}, {}, {}
for wanted in json.loads(sys.argv[1]):
    try:
        importlib.import_module(wanted)
    except BaseException as error:
        failed[wanted] = f"{type(error).__name__}: {error}"
        continue
    top = wanted.split(".")[0]
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == top or name.startswith(top + ".")) or name in modules:
            continue
        names = []
        for attr in dir(module):
            if attr.startswith("_"):
                continue
            names.append(attr)
            try:
                value = getattr(module, attr)
            except BaseException:
                continue
            if inspect.isclass(value) and getattr(value, "__module__", "") == name:
                classes[f"{name}.{attr}"] = sorted(a for a in dir(value) if not a.startswith("_"))
        modules[name] = sorted(names)
print(json.dumps({"modules": modules, "classes": classes, "failed": failed}))
"""


def introspect_surface(modules: Iterable[str], python: str | None = None,
                       timeout_s: float = 120.0) -> tuple[ApiSurface, dict[str, str]]:
    """Import `modules` in a fresh `python` process and record every submodule of their
    packages that importing them loaded, with its public names and classes.

    Returns the surface and, per module that could not be imported, why. Raises nothing
    for a module that fails to import; a crash or timeout of the helper process gives an
    empty surface and one entry under "*".
    """
    wanted = sorted({module for module in modules if module})
    if not wanted:
        return ApiSurface(), {}
    try:
        done = subprocess.run([python or sys.executable, "-c", _INTROSPECT, json.dumps(wanted)],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        data = load_json(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError, OSError) as error:
        return ApiSurface(), {"*": f"introspection failed: {type(error).__name__}: {error}"}
    return ApiSurface(modules=data["modules"], classes=data["classes"]), data["failed"]
