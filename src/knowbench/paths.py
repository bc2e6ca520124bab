"""Where knowbench keeps what it reuses, and which directories of a source tree it never reads.

`knowbench_home()` holds what outlives one command: benchmark environments (`envs/`), knowledge
corpora (`corpora/`) and reference checks shared between runs (`calibration.sqlite`).

Mining a repository (`knowbench.builders.repository`) and building a knowledge corpus
(`knowbench.knowledge.chunking`) both walk someone else's tree; both skip the same
directories: version control and tool caches, virtual environments and installed packages,
build and documentation output. What is in them is a copy, a by-product or not the project's.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "KNOWBENCH_HOME"


def knowbench_home() -> Path:
    """`$KNOWBENCH_HOME`, or `~/.cache/knowbench`."""
    return Path(os.environ.get(HOME_ENV) or "~/.cache/knowbench").expanduser()


SKIPPED_DIRS = frozenset({
    "__pycache__", "__pypackages__", "_build", "build", "dist", "env", "htmlcov", "node_modules",
    "site-packages", "venv",
})
_SKIPPED_SUFFIXES = (".egg-info", ".dist-info")


def skipped_dir(name: str) -> bool:
    """Whether a directory called `name` is skipped: hidden (`.git`, `.tox`, `.venv`, caches),
    in `SKIPPED_DIRS`, or package metadata (`*.egg-info`, `*.dist-info`)."""
    return name.startswith(".") or name in SKIPPED_DIRS or name.endswith(_SKIPPED_SUFFIXES)


def check_output(path: Path, option: str, directory: bool = False) -> None:
    """Refuse, before any work, an output the command could not write at the end: a file
    (`directory`: a directory) whose place is taken by the other kind, or lies under a file,
    or in a directory this process may not write. `option` names it in the message (UserError).
    What only writing shows (a read-only mount, an immutable directory) is still reported, as
    a message, when the write fails (`knowbench.cli.main`)."""
    from knowbench.errors import UserError

    kind, other = ("directory", "file") if directory else ("file", "directory")
    if path.exists() and path.is_dir() != directory:
        raise UserError(f"{option} {path} is a {other}; give a {kind}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{option} {path}: {parent} is a file, so nothing can be written under it; give another path")
    writable = path if path.exists() else parent
    if not os.access(writable, os.W_OK | (os.X_OK if writable.is_dir() else 0)):
        raise UserError(f"{option} {path}: {writable} is not writable by this user; give another path")
