"""A knowledge corpus: chunks of a framework's source, docs and examples in one SQLite file.

A corpus lives in a directory (default `$KNOWBENCH_HOME/corpora/NAME/`, with KNOWBENCH_HOME
defaulting to `~/.cache/knowbench`):

    corpus.sqlite   the manifest and every chunk (written once, atomically)
    index/          retrieval indexes, rebuilt whenever the corpus content hash changes
    embeddings.sqlite   dense embeddings cached by text hash (survive corpus rebuilds)

The corpus content hash covers every chunk's id, and a chunk's id covers its kind, path,
line span, names and text, so any change to what a method could retrieve changes the hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench.errors import UserError
from knowbench.paths import knowbench_home

CORPUS_FORMAT = 1
CORPUS_FILE = "corpus.sqlite"

ChunkKind = Literal["function", "class", "module", "doc", "example", "notebook"]
CHUNK_KINDS: tuple[ChunkKind, ...] = ("function", "class", "module", "doc", "example", "notebook")
KIND_LABELS: dict[str, str] = {
    "function": "source function", "class": "source class", "module": "module docstring",
    "doc": "documentation section", "example": "example script", "notebook": "notebook cell",
}

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE chunks (
    idx INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    module TEXT NOT NULL,
    qualname TEXT NOT NULL,
    text TEXT NOT NULL
);
"""


class Chunk(BaseModel):
    """One retrievable unit of a corpus.

    `path` is POSIX and relative to the source's root; `start_line`/`end_line` are 1-based and
    inclusive (for notebook cells they are cell numbers). `module` is the dotted module of a
    Python file ("" for other files); `qualname` is the name inside it ('Cls.meth'), the heading
    trail of a documentation section ('Options > Multiple Options'), 'cell N' for a notebook
    cell, or the file stem of an example script.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: ChunkKind
    path: str
    start_line: int = Field(ge=0)
    end_line: int = Field(ge=0)
    module: str = ""
    qualname: str = ""
    text: str

    @staticmethod
    def make_id(kind: str, path: str, start_line: int, end_line: int, module: str, qualname: str,
                text: str) -> str:
        """The chunk id: 16 hex digits of a hash over everything the chunk holds."""
        key = "\0".join((kind, path, str(start_line), str(end_line), module, qualname, text))
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def create(cls, kind: ChunkKind, path: str, start_line: int, end_line: int, text: str,
               module: str = "", qualname: str = "") -> Chunk:
        return cls(id=cls.make_id(kind, path, start_line, end_line, module, qualname, text),
                   kind=kind, path=path, start_line=start_line, end_line=end_line, module=module,
                   qualname=qualname, text=text)

    @property
    def full_name(self) -> str:
        """Module-qualified name for Python chunks ('click.core.Command.invoke'), else qualname."""
        if self.module and self.qualname and self.kind in ("function", "class"):
            return f"{self.module}.{self.qualname}"
        return self.module if self.kind == "module" else self.qualname

    @property
    def location(self) -> str:
        """'path:start-end' ('path:cell N' for notebooks)."""
        if self.kind == "notebook":
            return f"{self.path}:cell {self.start_line}"
        if self.start_line == self.end_line:
            return f"{self.path}:{self.start_line}"
        return f"{self.path}:{self.start_line}-{self.end_line}"

    @property
    def is_code(self) -> bool:
        """True when the text is Python code (shown in a ```python fence)."""
        if self.kind in ("function", "class", "notebook"):
            return True
        return self.kind == "example" and self.path.endswith(".py")


class CorpusManifest(BaseModel):
    """What a corpus was built from and what it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = CORPUS_FORMAT
    name: str
    source: str = Field(description="What was ingested: a path, a requirement, 'installed:pkg'.")
    source_kind: Literal["directory", "archive", "pypi", "installed", "bundles"]
    version: str | None = Field(default=None, description="Version of the ingested package.")
    framework: str | None = Field(default=None, description="The framework a KOCO-Bench knowledge-"
                                  "corpus folder names in its metadata.json ('framework_name').")
    description: str = Field(default="", description="What the framework is ('framework_"
                             "description' of a KOCO-Bench corpus; KOCO puts it in the prompt).")
    sha256: str = Field(description="'sha256:<hex>' of the source archive, or of the file tree.")
    content_hash: str = Field(description="'sha256:<hex>' over all chunk ids, in order.")
    chunks: int
    counts: dict[str, int] = Field(description="Chunks per kind.")
    files: int = Field(description="Files that produced at least one chunk.")
    skipped: list[str] = Field(default_factory=list, description="Files that could not be parsed.")
    include_tests: bool = False
    created: str | None = None
    knowbench: str


def default_corpus_dir(name: str) -> Path:
    """Where `knowbench corpus build --name NAME` puts a corpus without `--dir`."""
    return knowbench_home() / "corpora" / name


def content_hash(chunks: Iterable[Chunk]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk.id.encode("ascii") + b"\n")
    return "sha256:" + digest.hexdigest()


class Corpus:
    """A corpus on disk, loaded into memory: its manifest and its chunks in index order."""

    def __init__(self, directory: Path, manifest: CorpusManifest, chunks: list[Chunk]) -> None:
        self.directory = directory
        self.manifest = manifest
        self.chunks = chunks

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def content_hash(self) -> str:
        return self.manifest.content_hash

    @property
    def index_dir(self) -> Path:
        return self.directory / "index"

    @cached_property
    def position(self) -> dict[str, int]:
        """Chunk id -> index in `chunks`."""
        return {chunk.id: index for index, chunk in enumerate(self.chunks)}

    def __len__(self) -> int:
        return len(self.chunks)


def write_corpus(directory: Path, manifest: CorpusManifest, chunks: list[Chunk]) -> Corpus:
    """Write `corpus.sqlite` under `directory`, replacing any previous one atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / CORPUS_FILE
    partial = directory / f".{CORPUS_FILE}.{os.getpid()}.partial"
    partial.unlink(missing_ok=True)
    db = sqlite3.connect(partial)
    try:
        db.executescript(_SCHEMA)
        db.execute("INSERT INTO meta VALUES ('manifest', ?)", (manifest.model_dump_json(),))
        db.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((index, c.id, c.kind, c.path, c.start_line, c.end_line, c.module, c.qualname, c.text)
             for index, c in enumerate(chunks)))
        db.commit()
    finally:
        db.close()
    os.replace(partial, final)
    return Corpus(directory, manifest, chunks)


def resolve_corpus_dir(ref: str | Path) -> Path:
    """The directory of the corpus `ref`: a corpus directory, its corpus.sqlite, or a name."""
    path = Path(ref).expanduser()
    if path.is_file() and path.name == CORPUS_FILE:
        return path.parent
    if (path / CORPUS_FILE).is_file():
        return path
    if isinstance(ref, str) and "/" not in ref and (default_corpus_dir(ref) / CORPUS_FILE).is_file():
        return default_corpus_dir(ref)
    raise UserError(
        f"no knowledge corpus '{ref}' (looked for {path / CORPUS_FILE} and "
        f"{default_corpus_dir(str(ref)) / CORPUS_FILE})\n"
        f"  fix: build it with `knowbench corpus build SOURCE --name {Path(str(ref)).name}`, "
        "or pass the corpus directory")


def open_corpus(ref: str | Path) -> Corpus:
    """Load the corpus `ref` (a name under $KNOWBENCH_HOME/corpora, or a directory)."""
    directory = resolve_corpus_dir(ref)
    db = sqlite3.connect(f"file:{directory / CORPUS_FILE}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()
        manifest = CorpusManifest.model_validate(json.loads(row[0]))
        if manifest.format_version != CORPUS_FORMAT:
            raise UserError(f"{directory}: corpus format {manifest.format_version} is not supported "
                            f"(this knowbench reads {CORPUS_FORMAT}); rebuild it")
        chunks = [
            Chunk.model_construct(id=id_, kind=kind, path=path, start_line=start, end_line=end,
                                  module=module, qualname=qualname, text=text)
            for id_, kind, path, start, end, module, qualname, text in db.execute(
                "SELECT id, kind, path, start_line, end_line, module, qualname, text "
                "FROM chunks ORDER BY idx")
        ]
    except sqlite3.DatabaseError as error:
        raise UserError(f"{directory / CORPUS_FILE}: not a readable knowbench corpus ({error}); "
                        "rebuild it with `knowbench corpus build`") from None
    finally:
        db.close()
    return Corpus(directory, manifest, chunks)
