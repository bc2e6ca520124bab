"""Build a corpus from a source: a directory, an sdist or wheel file, a PyPI requirement, or an
installed package.

A PyPI requirement is fetched with `pip download --no-deps --no-binary :all:` (the sdist,
which usually carries docs and examples), falling back to a wheel when there is no sdist.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Literal

from knowbench import __version__
from knowbench.archives import single_root, unpack
from knowbench.benchmark.load import sha256_file
from knowbench.errors import UserError
from knowbench.jsonl import load_json
from knowbench.knowledge.chunking import chunk_file, wanted_file
from knowbench.knowledge.corpus import (
    CHUNK_KINDS,
    Chunk,
    Corpus,
    CorpusManifest,
    content_hash,
    default_corpus_dir,
    write_corpus,
)

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip", ".whl")
_IMPORTABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
PIP_TIMEOUT_S = 300


@dataclass(frozen=True)
class ResolvedSource:
    """Files to ingest: everything under `root`, with paths relative to `base`."""

    kind: Literal["directory", "archive", "pypi", "installed"]
    label: str
    root: Path
    base: Path
    version: str | None
    sha256: str | None  # None: hash the ingested file tree


@dataclass(frozen=True)
class TreeChunks:
    chunks: list[Chunk]
    files: int
    skipped: list[str]
    tree_sha256: str


@dataclass(frozen=True)
class KocoCorpus:
    """What a KOCO-Bench knowledge-corpus folder says about itself."""

    framework: str
    description: str
    version: str | None


def koco_corpus_metadata(folder: Path) -> KocoCorpus | None:
    """The framework of a KOCO-Bench knowledge-corpus folder (`<framework>/knowledge_corpus/`:
    `metadata.json` with `framework_name` and `framework_description`, beside the framework's
    upstream tree), or None when `folder` has no `metadata.json`.

    The version is read from the upstream tree, the first one found of: a static `version` in
    a `pyproject.toml`, a `version = {file = "..."}` it names, or a literal `__version__ =
    "..."` in a package's `__init__.py` (at the tree's top or under `src/`)."""
    path = folder / "metadata.json"
    if not path.is_file():
        return None
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected an object with 'framework_name'")
    name = data.get("framework_name")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{path}: 'framework_name' must be a non-empty string\n  fix: name the "
                        "framework, e.g. {\"framework_name\": \"verl\", \"framework_description\": \"...\"}")
    description = data.get("framework_description")
    return KocoCorpus(name.strip(), description.strip() if isinstance(description, str) else "",
                      _tree_version(folder))


_STATIC_VERSION = re.compile(r'^version\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)
_FILE_VERSION = re.compile(r'^version\s*=\s*\{\s*file\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)
_DUNDER_VERSION = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)


def _tree_version(folder: Path) -> str | None:
    projects = [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]
    for project in projects:
        pyproject = project / "pyproject.toml"
        text = pyproject.read_text(errors="replace") if pyproject.is_file() else ""
        if match := _STATIC_VERSION.search(text):
            return match.group(1)
        if (match := _FILE_VERSION.search(text)) and (project / match.group(1)).is_file():
            return (project / match.group(1)).read_text(errors="replace").strip() or None
    for project in projects:
        for init in sorted([*project.glob("*/__init__.py"), *project.glob("src/*/__init__.py")]):
            if match := _DUNDER_VERSION.search(init.read_text(errors="replace")):
                return match.group(1)
    return None


def build_corpus(source: str | None, name: str, *, directory: Path | None = None,
                 installed: str | None = None, pypi: bool = False,
                 include_tests: bool = False) -> Corpus:
    """Ingest `source` (or the installed package `installed`) into the corpus `name`.

    `source` may be a directory, an sdist/wheel file, a PyPI requirement ('click==8.1.7'), or
    an importable name (taken as the installed package unless `pypi` is set). The corpus goes
    to `directory`, default `$KNOWBENCH_HOME/corpora/NAME/`, replacing any corpus there.
    A KOCO-Bench knowledge-corpus folder (`koco_corpus_metadata`) is ingested as it is, with
    its framework's name (the corpus name when `name` is empty), description and version.
    Raises `UserError` when the source cannot be found, downloaded or read.
    """
    koco = None
    if source and not installed and Path(source).expanduser().is_dir():
        koco = koco_corpus_metadata(Path(source).expanduser())
    if not name and koco is not None:
        name = re.sub(r"[^A-Za-z0-9_.+-]+", "-", koco.framework).strip("-")
    if not re.match(r"^[A-Za-z0-9_.+-]+$", name):
        raise UserError(f"corpus name '{name}' may hold letters, digits and _ . + - only")
    with tempfile.TemporaryDirectory(prefix="knowbench-ingest-") as work:
        resolved = resolve_source(source, installed=installed, pypi=pypi, workdir=Path(work))
        if koco is not None and resolved.version is None:
            resolved = replace(resolved, version=koco.version)
        tree = chunk_tree(resolved.root, resolved.base, include_tests=include_tests)
    if not tree.chunks:
        raise UserError(f"{resolved.label}: no Python, Markdown, reStructuredText or notebook "
                        "content found to ingest")
    counts = Counter(chunk.kind for chunk in tree.chunks)
    manifest = CorpusManifest(
        name=name, source=resolved.label, source_kind=resolved.kind, version=resolved.version,
        sha256=resolved.sha256 or tree.tree_sha256, content_hash=content_hash(tree.chunks),
        chunks=len(tree.chunks), counts={kind: counts.get(kind, 0) for kind in CHUNK_KINDS},
        files=tree.files, skipped=tree.skipped, include_tests=include_tests,
        framework=koco.framework if koco else None, description=koco.description if koco else "",
        created=datetime.now(UTC).isoformat(timespec="seconds"), knowbench=__version__,
    )
    return write_corpus(directory or default_corpus_dir(name), manifest, tree.chunks)


def resolve_source(source: str | None, *, installed: str | None = None, pypi: bool = False,
                   workdir: Path) -> ResolvedSource:
    """Find (download, extract) the files behind `source` into `workdir` when needed."""
    if installed and source:
        raise UserError(f"give SOURCE ({source}) or --installed ({installed}), not both")
    if installed:
        return installed_source(installed)
    if not source:
        raise UserError("give a SOURCE (directory, sdist/wheel file, PyPI requirement or "
                        "package name) or --installed PACKAGE")
    path = Path(source).expanduser()
    if path.is_dir():
        return ResolvedSource("directory", str(path.resolve()), path, path, _pkg_info_version(path),
                              None)
    if path.is_file():
        if not source.lower().endswith(ARCHIVE_SUFFIXES):
            raise UserError(f"{source}: not a directory or an sdist/wheel archive "
                            f"({', '.join(ARCHIVE_SUFFIXES)})")
        root = extract_archive(path, workdir / "src")
        return ResolvedSource("archive", str(path.resolve()), root, root,
                              _pkg_info_version(root) or _version_from_filename(path.name),
                              sha256_file(path))
    if not pypi and _IMPORTABLE.match(source) and _find_spec(source) is not None:
        return installed_source(source)
    if "://" not in source and (os.sep in source or source.startswith((".", "~"))):
        # (a requirement names no path: this is a directory or archive that is not there)
        raise UserError(f"{source}: no such directory or file\n  fix: check the path, or give a PyPI "
                        "requirement or an installed package's name")
    archive = pip_download(source, workdir / "download")
    root = extract_archive(archive, workdir / "src")
    return ResolvedSource("pypi", f"{source} ({archive.name})", root, root,
                          _pkg_info_version(root) or _version_from_filename(archive.name),
                          sha256_file(archive))


def installed_source(package: str) -> ResolvedSource:
    """The installed package `package` (an import name): its directory or single module file."""
    spec = _find_spec(package)
    if spec is None:
        raise UserError(f"package '{package}' is not importable in this environment "
                        f"({sys.executable})\n  fix: install it, or pass a directory, an sdist or "
                        "a PyPI requirement instead")
    locations = list(spec.submodule_search_locations or [])
    if locations:
        root = Path(locations[0])
        base = root.parent
        for _ in package.split(".")[1:]:
            base = base.parent
    elif spec.origin and spec.origin.endswith(".py"):
        root = Path(spec.origin)
        base = root.parent
    else:
        raise UserError(f"package '{package}' has no Python source to ingest ({spec.origin})")
    return ResolvedSource("installed", f"installed:{package}", root, base,
                          _installed_version(package), None)


def pip_download(requirement: str, destination: Path) -> Path:
    """Download `requirement` from the package index: its sdist, else a wheel."""
    destination.mkdir(parents=True, exist_ok=True)
    attempts = (["--no-binary", ":all:"], ["--only-binary", ":all:"])
    errors = []
    for flags in attempts:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "--quiet", *flags, "--dest", str(destination), requirement]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            errors.append(f"pip download {' '.join(flags)} timed out after {PIP_TIMEOUT_S} s")
            continue
        files = sorted(p for p in destination.iterdir() if p.name.lower().endswith(ARCHIVE_SUFFIXES))
        if done.returncode == 0 and files:
            return files[0]
        errors.append(f"pip download {' '.join(flags)}: {_tail(done.stderr or done.stdout)}")
    raise UserError(f"could not download '{requirement}' from the package index\n  "
                    + "\n  ".join(errors)
                    + "\n  fix: check the requirement and the network, or pass a local directory "
                      "or archive")


def extract_archive(archive: Path, destination: Path) -> Path:
    """Extract an sdist/wheel into `destination`; the root is its single top folder if any."""
    unpack(archive, destination)
    return single_root(destination)


def chunk_tree(root: Path, base: Path, *, include_tests: bool = False) -> TreeChunks:
    """Chunk every wanted file under `root` (a directory or one file), paths relative to `base`."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    chunks: list[Chunk] = []
    seen: set[str] = set()
    skipped: list[str] = []
    tree = hashlib.sha256()
    used = 0
    for file in files:
        relative = file.relative_to(base).as_posix()
        if not wanted_file(tuple(relative.split("/")), include_tests):
            continue
        data = file.read_bytes()
        tree.update(relative.encode() + b"\0" + hashlib.sha256(data).digest())
        try:
            text = data.decode("utf-8")
            found = chunk_file(text, relative, module_name(file, base))
        except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            skipped.append(relative)
            continue
        fresh = [chunk for chunk in found if chunk.id not in seen]
        seen.update(chunk.id for chunk in fresh)
        chunks.extend(fresh)
        used += bool(fresh)
    return TreeChunks(chunks, used, skipped, "sha256:" + tree.hexdigest())


def module_name(file: Path, base: Path) -> str:
    """The dotted module of a .py file: its package folders (those with __init__.py) + stem."""
    if file.suffix != ".py":
        return ""
    parts = [] if file.stem == "__init__" else [file.stem]
    folder = file.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        if folder == base or base not in folder.parents:
            break
        folder = folder.parent
    return ".".join(parts) or file.parent.name


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _installed_version(package: str) -> str | None:
    top = package.split(".")[0]
    for distribution in metadata.packages_distributions().get(top, []):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    module = sys.modules.get(top)
    return getattr(module, "__version__", None) if module else None


def _pkg_info_version(root: Path) -> str | None:
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        match = re.search(r"^Version:\s*(\S+)", pkg_info.read_text(errors="replace"), re.M)
        if match:
            return match.group(1)
    return None


def _version_from_filename(filename: str) -> str | None:
    if filename.lower().endswith(".whl"):
        parts = filename.split("-")
        return parts[1] if len(parts) >= 3 else None
    stem = filename
    for suffix in ARCHIVE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    name, _, version = stem.rpartition("-")
    return version if name and version and version[0].isdigit() else None




def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "(no output)"
