"""Choosing the version of every library a set of imported benchmarks needs, with no table.

A released benchmark names the modules its code imports, seldom the versions it ran with.
`choose_versions` turns import names into pinned distributions for the running Python:

1. *Which distribution.* An override (`--versions FILE`) naming the import name or the
   distribution wins; then `IMPORT_TO_DISTRIBUTION` (dotted names such as `google.auth`
   first); then a recorded requirement of the same name; then the import name itself,
   `python-<name>` and `py<name>`, the first that the package index knows. A module the
   interpreter provides by itself (`_testbuffer`) needs no distribution.
2. *Which version.* An override pin; else a recorded pin (`--recorded-requirements FILE`,
   the source benchmark's own `requirements.txt`) when it installs on this Python; else the
   *date rule*: the last release before the dataset's date that installs on this Python
   (`uv pip compile --exclude-newer DATE --python-version X.Y`). "Installs" means a wheel
   for this interpreter, or the source distribution for a distribution that publishes no
   wheel at all (nothing is compiled from source where a wheel exists for another version).
3. *Together.* The choices are resolved jointly (again before the date); when they do not
   resolve, recorded pins named in the conflict fall back to the date rule, and a conflict
   that remains leaves out the requirement that causes it, with uv's own account of the
   conflict (which requirement conflicts with which).

Every decision is kept (`Choice`) so that the import report and the manifest can show it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from knowbench.builders.requirements import IMPORT_TO_DISTRIBUTION, requirement_name
from knowbench.errors import UserError

DEFAULT_DATE = "2024-07-11"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([A-Za-z0-9.!+_-]+))?\s*$")
_NOT_FOUND = ("not found in the package registry", "was not found in the provided package locations",
              "no versions of", "not found in the package")


@dataclass
class Choice:
    """What was decided for one import name."""

    module: str
    distribution: str | None = None
    how: str = ""  # override, table, recorded, import name, fallback name, interpreter
    version: str | None = None
    source: str = ""  # override, recorded, date rule, interpreter
    note: str = ""
    candidates: list[str] = field(default_factory=list)
    constraint: str = ""  # a range the date rule keeps to (the recorded pin's major series)

    @property
    def requirement(self) -> str | None:
        if self.distribution is None:
            return None
        return f"{self.distribution}=={self.version}" if self.version else self.constraint or self.distribution


@dataclass
class Resolution:
    """The outcome of `choose_versions`."""

    choices: dict[str, Choice]
    lock: list[str]  # every distribution of the environment, pinned (dependencies included)
    refused: dict[str, str]  # module -> why it has no installable distribution
    conflicts: list[str]  # uv's accounts of the conflicts met on the way
    date: str
    python: str
    unused_overrides: list[str] = field(default_factory=list)
    extra_pins: list[str] = field(default_factory=list)  # overrides of dependencies, not of imports

    def report(self) -> dict[str, Any]:
        return {"date": self.date, "python": self.python,
                "rule": f"an override pin, else a recorded pin installing on Python {self.python} (else the last "
                        f"release of its major series that does), else the "
                        f"last release before {self.date} installing on Python {self.python}",
                "modules": {m: {k: v for k, v in asdict(c).items() if v not in (None, "", [])}
                            for m, c in sorted(self.choices.items())},
                "refused": dict(sorted(self.refused.items())), "conflicts": self.conflicts,
                "unused_overrides": self.unused_overrides, "dependency_overrides": self.extra_pins,
                "lock": self.lock}


def read_pins(path: Path, what: str) -> dict[str, str | None]:
    """`NAME==VERSION` (or bare `NAME`) lines of a requirements-like file, by lower-cased name.

    Comments, blank lines and pip options are skipped; a line naming the same thing twice
    keeps its first pin. Anything else is refused with its line number."""
    if not path.is_file():
        raise UserError(f"{what} {path}: no such file")
    pins: dict[str, str | None] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise UserError(f"{path}:{number}: {raw.strip()!r} is not NAME==VERSION or NAME\n"
                            f"  fix: write one `import_name_or_distribution==version` per line ({what})")
        pins.setdefault(match.group(1).lower(), match.group(2))
        pins.setdefault(requirement_name(match.group(1)), match.group(2))
    return pins


class Resolver:
    """`uv pip compile` for one Python version and date, with a memo of every answer."""

    def __init__(self, python: str | None = None, date: str = DEFAULT_DATE) -> None:
        self.python = python or ".".join(map(str, sys.version_info[:2]))
        self.date = date
        self.uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        if not Path(self.uv).is_file():
            raise UserError("choosing library versions needs uv (https://docs.astral.sh/uv/); install it next "
                            "to the interpreter or on PATH")
        from knowbench.execution.environments import _uv_index_args

        self.index_args = _uv_index_args()  # asks pip's configuration once (it takes seconds)
        self.binary_only: set[str] = set()  # distributions taken from wheels only, whoever needs them
        self._memo: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[bool, str]] = {}

    def compile(self, requirements: list[str], only_binary: list[str] | tuple[str, ...] = ()) -> tuple[bool, str]:
        """(True, the pinned lock) or (False, uv's message)."""
        only_binary = sorted({*only_binary, *self.binary_only})
        key = (tuple(sorted(requirements)), tuple(only_binary))
        if key in self._memo:
            return self._memo[key]
        command = [self.uv, "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate",
                   "--python-version", self.python, "--exclude-newer", self.date, *self.index_args]
        for name in only_binary:
            command += ["--only-binary", name]
        try:
            done = subprocess.run(command, input="\n".join(requirements) + "\n", capture_output=True, text=True,
                                  timeout=900)
        except subprocess.TimeoutExpired:
            self._memo[key] = (False, "uv pip compile took more than 900 s")
            return self._memo[key]
        if done.returncode == 0:
            self._memo[key] = (True, done.stdout)
        else:
            self._memo[key] = (False, _uv_message(done.stderr or done.stdout))
        return self._memo[key]

    def has_wheels(self, distribution: str) -> bool:
        return self.compile([distribution], [distribution])[0]


def _uv_message(text: str) -> str:
    """uv's explanation without its hints: the lines that say what conflicts with what."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    kept = [line for line in lines if line.strip() and not line.strip().startswith("hint:")]
    return "\n".join(kept[:40])


def lock_lines(text: str) -> list[str]:
    return sorted((line.strip() for line in text.splitlines()
                   if line.strip() and not line.lstrip().startswith(("#", "-"))), key=str.lower)


def interpreter_modules(modules: set[str], python: str = sys.executable) -> set[str]:
    """The modules that this interpreter imports with no site-packages at all (`-S -I`)."""
    provided = set()
    for module in sorted(modules):
        try:
            done = subprocess.run([python, "-I", "-S", "-c", f"import {module}"], capture_output=True,
                                  timeout=30)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            provided.add(module)
    return provided


def _candidates(module: str, dotted: set[str], recorded: dict[str, str | None]) -> tuple[list[str], str]:
    """The distributions that may provide `module` (a top-level import name), best first."""
    for name in sorted(dotted, key=lambda n: -n.count(".")):  # google.auth before google
        parts = name.split(".")
        for end in range(len(parts), 1, -1):
            prefix = ".".join(parts[:end])
            if prefix in IMPORT_TO_DISTRIBUTION:
                return [IMPORT_TO_DISTRIBUTION[prefix]], "table"
    if module in IMPORT_TO_DISTRIBUTION:
        return [IMPORT_TO_DISTRIBUTION[module]], "table"
    own = requirement_name(module)
    if own in recorded:
        return [own], "recorded"
    return list(dict.fromkeys([module, f"python-{module}", f"py{module}"])), "import name"


def choose_versions(modules: dict[str, set[str]], *, overrides: dict[str, str | None] | None = None,
                    recorded: dict[str, str | None] | None = None, resolver: Resolver | None = None,
                    say: Any = None) -> Resolution:
    """Distributions and versions for top-level import names (`modules`: name -> the dotted
    names imported under it). See the module's docstring for the rules."""
    overrides, recorded = overrides or {}, recorded or {}
    resolver = resolver or Resolver()
    say = say or (lambda message: None)
    choices: dict[str, Choice] = {}
    refused: dict[str, str] = {}
    conflicts: list[str] = []
    provided = interpreter_modules({m for m in modules if m not in overrides})

    def decide(module: str) -> Choice:
        if module in provided:
            return Choice(module, how="interpreter", source="interpreter", note="provided by the interpreter itself")
        return _choose_one(module, modules[module], overrides, recorded, resolver)

    with ThreadPoolExecutor(max_workers=8) as pool:  # uv waits on the index, not on the CPU
        for choice in pool.map(decide, sorted(modules)):
            choices[choice.module] = choice
            if choice.distribution is None and choice.how != "interpreter":
                refused[choice.module] = choice.note
    used = {key for c in choices.values() for key in (c.module.lower(), requirement_name(c.distribution or ""))}
    unused = sorted({key for key in overrides if key not in used and requirement_name(key) not in used})
    # a pinned override of a distribution no import chose constrains the environment (a dependency)
    extra = sorted({f"{requirement_name(key)}=={overrides[key]}" for key in unused if overrides[key]})
    unused = sorted({key for key in unused if not overrides[key]})
    if unused:
        say(f"overrides without a version naming no imported module nor chosen distribution (ignored): "
            f"{', '.join(unused)}")
    lock = _resolve_jointly(choices, resolver, refused, conflicts, say, extra)
    pinned = {requirement_name(line.split("==")[0]): line.split("==")[1] for line in lock if "==" in line}
    for choice in choices.values():  # what the date rule chose, as resolved
        if choice.distribution and choice.version is None and choice.module not in refused:
            choice.version = pinned.get(requirement_name(choice.distribution))
    return Resolution(choices=choices, lock=lock, refused=refused, conflicts=conflicts, date=resolver.date,
                      python=resolver.python, unused_overrides=unused, extra_pins=extra)


def _choose_one(module: str, dotted: set[str], overrides: dict[str, str | None], recorded: dict[str, str | None],
                resolver: Resolver) -> Choice:
    choice = Choice(module)
    if module.lower() in overrides:
        choice.candidates, choice.how = [module], "override"
        for name in sorted(dotted):
            mapped = IMPORT_TO_DISTRIBUTION.get(name) or IMPORT_TO_DISTRIBUTION.get(module)
            if mapped:
                choice.candidates = [mapped]
                break
    else:
        choice.candidates, choice.how = _candidates(module, dotted, recorded)
    tried = []
    for candidate in choice.candidates:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", candidate):
            tried.append(f"{candidate}: not a valid distribution name")
            continue
        ok, why = resolver.compile([candidate])
        if ok:
            choice.distribution = candidate
            break
        tried.append(f"{candidate}: {why.splitlines()[-1].strip() if why else 'does not resolve'}")
    if choice.distribution is None:
        choice.note = f"no installable distribution before {resolver.date} (" + "; ".join(tried) + ")"
        return choice
    if choice.distribution != choice.candidates[0]:
        choice.how = "fallback name"
    name = requirement_name(choice.distribution)
    pin_key = module.lower() if module.lower() in overrides else name if name in overrides else None
    if pin_key is not None:
        choice.version, choice.source = overrides[pin_key], "override"
    elif recorded.get(name):
        pin = f"{choice.distribution}=={recorded[name]}"
        binary = [choice.distribution] if resolver.has_wheels(choice.distribution) else []
        ok, why = resolver.compile([pin], binary)
        if ok:
            choice.version, choice.source = recorded[name], "recorded"
        else:
            choice.source = "date rule"
            choice.note = f"recorded {pin} does not install on Python {resolver.python}: " \
                          f"{why.splitlines()[-1].strip() if why else ''}"
            series = _same_series(choice.distribution, recorded[name] or "")
            if series and resolver.compile([series], binary)[0]:
                choice.constraint, choice.source = series, "recorded series"
                choice.note += f"; the last release of {series} instead"
    else:
        choice.source = "date rule"
    return choice


def _same_series(distribution: str, version: str) -> str:
    """`numpy>=1.21.5,<2` for a recorded `numpy==1.21.5`: its newer releases of the same major
    version (a recorded pin that no longer installs is replaced by the closest that does)."""
    match = re.match(r"(\d+)\.", version)
    if not match:
        return ""
    return f"{distribution}>={version},<{int(match.group(1)) + 1}"


def _resolve_jointly(choices: dict[str, Choice], resolver: Resolver, refused: dict[str, str],
                     conflicts: list[str], say: Any, extra: list[str] | None = None) -> list[str]:
    def active() -> dict[str, Choice]:
        return {m: c for m, c in choices.items() if c.distribution and m not in refused}

    extra = extra or []

    def wanted() -> tuple[list[str], list[str]]:
        requirements = sorted({*extra, *(c.requirement for c in active().values() if c.requirement)},
                              key=str.lower)
        binary = sorted({c.distribution for c in active().values()
                         if c.distribution and resolver.has_wheels(c.distribution)}, key=str.lower)
        return requirements, binary

    for _ in range(len(choices) + 1):
        requirements, binary = wanted()
        if not requirements:
            return []
        ok, text = resolver.compile(requirements, binary)
        if ok:
            return lock_lines(text)
        conflicts.append(text)
        say(f"the chosen versions do not resolve together:\n{text}")
        lowered = text.lower()
        named = [c for c in active().values() if c.source in ("recorded", "recorded series") and c.distribution
                 and re.search(rf"\b{re.escape(requirement_name(c.distribution))}\b", lowered.replace("_", "-"))]
        if named:  # recorded pins in the conflict yield to the date rule first
            for choice in named:
                choice.note = f"recorded {choice.requirement} conflicts with the others; date rule instead"
                choice.version, choice.source, choice.constraint = None, "date rule", ""
            continue
        break
    # Still no joint resolution: keep requirements greedily, each refused one with its conflict.
    kept: list[Choice] = []
    for module, choice in sorted(active().items()):
        trial = [*kept, choice]
        requirements = sorted({*extra, *(c.requirement for c in trial if c.requirement)}, key=str.lower)
        binary = sorted({c.distribution for c in trial if c.distribution and resolver.has_wheels(c.distribution)})
        ok, text = resolver.compile(requirements, binary)
        if ok:
            kept.append(choice)
        else:
            refused[module] = f"{choice.requirement} conflicts with the other requirements:\n{text}"
            choice.note = refused[module]
    requirements = sorted({*extra, *(c.requirement for c in kept if c.requirement)}, key=str.lower)
    binary = sorted({c.distribution for c in kept if c.distribution and resolver.has_wheels(c.distribution)})
    ok, text = resolver.compile(requirements, binary) if requirements else (True, "")
    return lock_lines(text) if ok else []
