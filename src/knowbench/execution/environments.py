"""Benchmark environments: a cached virtual environment per set of requirements.

Samples run in their benchmark's environment, not in knowbench's own. An environment is
keyed by a hash of the normalised requirements and the interpreter's version (and, for a
local archive or directory, `name @ file:///...`, what is there now: an edited repository
mined again gets an environment of its edited code), built with
`uv` when available (else venv + pip), and published atomically: a half-built environment
is never used. The package index is whatever pip is configured with (pip.conf, PIP_* env),
so builds work offline against a local mirror.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from knowbench.benchmark.load import sha256_file
from knowbench.errors import UserError
from knowbench.paths import knowbench_home

ENV_FILE = "knowbench-env.json"
# The in-sandbox runner needs only the standard library; pytest is there because test code
# written for pytest (pytest.raises, pytest.approx) is the norm in mined benchmarks.
BASE_REQUIREMENTS = ("pytest",)


@dataclass(frozen=True)
class BenchEnv:
    """A built environment: where it is and what is in it."""

    key: str
    path: Path
    requirements: tuple[str, ...]

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def info(self) -> dict[str, object]:
        return json.loads((self.path / ENV_FILE).read_text())


def envs_root() -> Path:
    return knowbench_home() / "envs"


@functools.cache
def bytecode_magic(python: str) -> str | None:
    """The magic number of the bytecode `python` makes (hex), this one's without starting it;
    None where it cannot be asked. Interpreters with the same magic load each other's
    marshalled code."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.MAGIC_NUMBER.hex()
    try:
        return subprocess.run([python, "-I", "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def python_version(python: str) -> str:
    """The version of the interpreter `python` (X.Y.Z), this one's without starting it."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return ".".join(map(str, sys.version_info[:3]))
    return subprocess.run([python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def normalise(requirements: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Requirements as a sorted, de-duplicated tuple, always holding BASE_REQUIREMENTS."""
    cleaned = {" ".join(line.split()) for line in (*requirements, *BASE_REQUIREMENTS) if line.strip()}
    return tuple(sorted(cleaned, key=str.lower))


def env_key(requirements: tuple[str, ...], python_version: str) -> str:
    payload = json.dumps({"requirements": list(requirements), "python": python_version,
                          "local": [_local_state(r) for r in requirements if _local_path(r) is not None]})
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _local_path(requirement: str) -> Path | None:
    """The file or directory a `name @ file:///...` requirement installs, else None."""
    _, at, url = requirement.partition(" @ ")
    if not at or not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


def _local_state(requirement: str) -> str:
    """What a local requirement's file or directory holds now: an archive's content hash, a
    directory's files by path and content (its `.git`, caches and build output left out; a
    file a build writes again with the same content, a version file, changes nothing, and a
    fresh clone of the same code has the same key)."""
    path = _local_path(requirement)
    assert path is not None
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for directory, subdirs, files in os.walk(path):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in ("__pycache__", "build", "dist")
                                and not d.endswith(".egg-info"))  # (what building it writes there)
            for name in sorted(files):
                file = Path(directory, name)
                digest.update(file.relative_to(path).as_posix().encode() + b"\0")
                with contextlib.suppress(OSError):  # (unreadable: its name still counts)
                    digest.update(sha256_file(file).encode())
                digest.update(b"\0")
    return digest.hexdigest()


def ensure_env(requirements: list[str] | tuple[str, ...], python: str | None = None,
               root: Path | None = None) -> BenchEnv:
    """The environment for `requirements`, building it on first use.

    Raises `UserError` naming the requirement that could not be installed, with the
    installer's own message.
    """
    python = python or sys.executable
    wanted = normalise(requirements)
    version = python_version(python)
    key = env_key(wanted, version)
    root = root or envs_root()
    target = root / key
    if (target / ENV_FILE).is_file():
        return BenchEnv(key, target, wanted)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{key}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _build(staging, python, wanted)
        installed = _freeze(staging)
        (staging / ENV_FILE).write_text(json.dumps({
            "key": key, "requirements": list(wanted), "python": version,
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "installed": installed,
        }, indent=2) + "\n")
        _make_readable(staging)
        try:
            staging.rename(target)
        except OSError:  # another process published the same environment first
            if not (target / ENV_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BenchEnv(key, target, wanted)


def _build(path: Path, python: str, requirements: tuple[str, ...]) -> None:
    uv = shutil.which("uv") or _uv_next_to_python()
    if uv:
        _run([uv, "venv", "--quiet", "--python", python, str(path)], "create the environment")
        _run([uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(path / "bin" / "python"),
              *_uv_index_args(), *requirements], "install " + " ".join(requirements))
    else:
        _run([python, "-m", "venv", str(path)], "create the environment")
        _run([str(path / "bin" / "python"), "-m", "pip", "install", "--quiet",
              "--disable-pip-version-check", *requirements], "install " + " ".join(requirements))


def _uv_next_to_python() -> str | None:
    candidate = Path(sys.executable).parent / "uv"
    return str(candidate) if candidate.is_file() else None


def _uv_index_args() -> list[str]:
    """pip's configured indexes and find-links, passed on to uv (which ignores pip.conf)."""
    config: dict[str, str] = {}
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                                 text=True, check=True).stdout
        for line in listing.splitlines():
            name, _, value = line.partition("=")
            config[name.split(".")[-1]] = value.strip().strip("'\"")
    # pip considers every index for every package; uv must too, or a partial mirror
    # listed first would hide versions that a later index has.
    args: list[str] = ["--index-strategy", "unsafe-best-match"]
    if config.get("index-url"):
        args += ["--index-url", config["index-url"]]
    for url in config.get("extra-index-url", "").split():
        if not url.startswith("file://") or Path(url.removeprefix("file://")).exists():
            args += ["--extra-index-url", url]
    for place in config.get("find-links", "").split():
        if "://" in place or Path(place).exists():
            args += ["--find-links", place]
    return args


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-12:])
        raise UserError(f"could not {what}:\n{tail}\n  fix: check the benchmark's 'requirements' in "
                        "benchmark.json and that pip's package index is reachable")


def _freeze(path: Path) -> dict[str, str]:
    listing = subprocess.run(
        [str(path / "bin" / "python"), "-c",
         "import importlib.metadata as m, json; "
         "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"],
        capture_output=True, text=True, check=True).stdout
    return dict(sorted(json.loads(listing).items(), key=lambda kv: kv[0].lower()))


def _make_readable(path: Path) -> None:
    """Sandboxed samples run under an unprivileged uid: they must read and traverse it all."""
    for directory, _, files in os.walk(path):
        os.chmod(directory, os.stat(directory).st_mode | 0o755)
        for name in files:
            file = Path(directory) / name
            if not file.is_symlink():
                os.chmod(file, os.stat(file).st_mode | 0o444)


def list_envs(root: Path | None = None) -> list[BenchEnv]:
    root = root or envs_root()
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        if (path / ENV_FILE).is_file():
            info = json.loads((path / ENV_FILE).read_text())
            found.append(BenchEnv(path.name, path, tuple(info["requirements"])))
    return found


def prune_envs(keep: set[str], root: Path | None = None) -> list[BenchEnv]:
    """Delete every environment whose key is not in `keep` (and stale half-built ones)."""
    root = root or envs_root()
    removed = [env for env in list_envs(root) if env.key not in keep]
    for env in removed:
        shutil.rmtree(env.path)
    if root.is_dir():
        for stale in root.glob(".*.building-*"):
            shutil.rmtree(stale, ignore_errors=True)
    return removed
