"""Where mined code comes from: a local repository, an sdist or wheel file, or a PyPI
requirement downloaded with pip (the sdist first, because it usually carries the tests).

`fetch_source` unpacks what it is given into a work directory and says what it is: the
distribution's name and version, a content hash, and the requirement that installs the very
same code into a benchmark environment.
"""

from __future__ import annotations

import configparser
import email.parser
import hashlib
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from knowbench.archives import single_root, unpack
from knowbench.benchmark.load import sha256_file
from knowbench.errors import UserError

SourceKind = Literal["pypi", "sdist", "wheel", "directory"]
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip", ".whl")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?\s*"
                          r"((==|>=|<=|~=|!=|>|<|===)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$")


@dataclass(frozen=True)
class Source:
    """One unpacked source of mined code."""

    spec: str
    kind: SourceKind
    root: Path
    name: str
    version: str
    sha256: str
    requirement: str
    archive: str | None = None

    def describe(self) -> dict[str, str | None]:
        return {"spec": self.spec, "kind": self.kind, "name": self.name, "version": self.version,
                "sha256": self.sha256, "requirement": self.requirement, "archive": self.archive}


def fetch_source(spec: str, workdir: Path) -> Source:
    """Unpack `spec` (a directory, an sdist / wheel path, or a PyPI requirement) under `workdir`.

    Raises `UserError` when the spec is none of these, when pip cannot find the requirement,
    or when the archive cannot be read.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return _directory_source(spec, path.resolve())
    if path.is_file():
        if not spec.endswith(_ARCHIVE_SUFFIXES):
            raise UserError(f"{spec}: not an sdist or wheel (expected one of {', '.join(_ARCHIVE_SUFFIXES)})\n"
                            "  fix: pass a repository directory, an archive, or a requirement such as rsa==4.9")
        return _archive_source(spec, path.resolve(), workdir, "wheel" if spec.endswith(".whl") else "sdist")
    if os.sep in spec or spec.endswith(_ARCHIVE_SUFFIXES) or spec.startswith("."):
        raise UserError(f"{spec}: no such file or directory")
    if not _REQUIREMENT.match(spec.strip()):
        raise UserError(f"{spec!r} is not a directory, an archive or a pip requirement\n"
                        "  fix: pass e.g. ./my-repo, dist/pkg-1.0.tar.gz or 'rsa==4.9'")
    archive = download(spec.strip(), workdir / "downloads")
    kind: SourceKind = "wheel" if archive.name.endswith(".whl") else "sdist"
    source = _archive_source(spec, archive, workdir, kind)
    return Source(spec=spec, kind="pypi", root=source.root, name=source.name, version=source.version,
                  sha256=source.sha256, requirement=f"{source.name}=={source.version}",
                  archive=archive.name)


def download(requirement: str, directory: Path) -> Path:
    """Download `requirement` with pip: its sdist if there is one, else a wheel."""
    directory.mkdir(parents=True, exist_ok=True)
    attempts = (["--no-binary", ":all:"], ["--only-binary", ":all:"])
    errors = []
    for flags in attempts:
        before = set(directory.iterdir())
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--disable-pip-version-check", *flags, "-d", str(directory), requirement],
                              capture_output=True, text=True)
        new = sorted(set(directory.iterdir()) - before) or sorted(
            p for p in directory.iterdir() if p.name.endswith(_ARCHIVE_SUFFIXES))
        if done.returncode == 0 and new:
            return new[-1]
        errors.append((done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"])
    raise UserError(f"pip could not download {requirement!r}: {errors[-1][0]}\n"
                    "  fix: check the name and version on PyPI and that pip's index is reachable")




def sha256_tree(root: Path) -> str:
    """A hash of every Python file and packaging file under `root` (paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and (path.suffix in (".py", ".toml", ".cfg", ".txt") or path.name == "PKG-INFO") \
                and not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def _archive_source(spec: str, archive: Path, workdir: Path, kind: SourceKind) -> Source:
    target = workdir / "sources" / archive.name
    unpack(archive, target)
    root = single_root(target) if kind == "sdist" else target
    name, version = _name_and_version(root, archive.name)
    requirement = f"{name} @ {archive.as_uri()}"
    return Source(spec=spec, kind=kind, root=root, name=name, version=version, sha256=sha256_file(archive),
                  requirement=requirement, archive=archive.name)


def _directory_source(spec: str, root: Path) -> Source:
    name, version = _name_and_version(root, root.name)
    return Source(spec=spec, kind="directory", root=root, name=name, version=version,
                  sha256=sha256_tree(root), requirement=f"{name} @ {root.as_uri()}")


def _name_and_version(root: Path, fallback: str) -> tuple[str, str]:
    """The distribution's name and version from PKG-INFO / METADATA, pyproject.toml,
    setup.cfg or setup.py, in that order; the archive's file name as a last resort."""
    for metadata in [root / "PKG-INFO", *sorted(root.glob("*.dist-info/METADATA"))]:
        if metadata.is_file():
            message = email.parser.Parser().parsestr(metadata.read_text(errors="replace"))
            if message.get("Name") and message.get("Version"):
                return str(message["Name"]), str(message["Version"])
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
        except tomllib.TOMLDecodeError:
            project = {}
        if project.get("name"):
            return str(project["name"]), str(project.get("version", "0+unknown"))
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser()
        try:
            parser.read(setup_cfg)
            if parser.has_option("metadata", "name"):
                return parser.get("metadata", "name"), parser.get("metadata", "version", fallback="0+unknown")
        except configparser.Error:
            pass
    setup_py = root / "setup.py"
    if setup_py.is_file():
        text = setup_py.read_text(errors="replace")
        name = re.search(r"name\s*=\s*['\"]([^'\"]+)['\"]", text)
        version = re.search(r"version\s*=\s*['\"]([^'\"]+)['\"]", text)
        if name:
            return name.group(1), version.group(1) if version else "0+unknown"
    stem = re.sub(r"(\.tar\.gz|\.tgz|\.tar\.bz2|\.tar\.xz|\.zip|\.whl)$", "", fallback)
    match = re.match(r"^(?P<name>.+?)-(?P<version>\d[^-]*)", stem)
    if match:
        return match["name"], match["version"]
    return stem, "0+unknown"
