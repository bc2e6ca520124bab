"""Which directories of a source tree knowbench never reads.

Mining a repository (`knowbench.builders.repository`) and building a knowledge corpus
(`knowbench.knowledge.chunking`) both walk someone else's tree; both skip the same
directories: version control and tool caches, virtual environments and installed packages,
build and documentation output. What is in them is a copy, a by-product or not the project's.
"""

from __future__ import annotations

SKIPPED_DIRS = frozenset({
    "__pycache__", "__pypackages__", "_build", "build", "dist", "env", "htmlcov", "node_modules",
    "site-packages", "venv",
})
_SKIPPED_SUFFIXES = (".egg-info", ".dist-info")


def skipped_dir(name: str) -> bool:
    """Whether a directory called `name` is skipped: hidden (`.git`, `.tox`, `.venv`, caches),
    in `SKIPPED_DIRS`, or package metadata (`*.egg-info`, `*.dist-info`)."""
    return name.startswith(".") or name in SKIPPED_DIRS or name.endswith(_SKIPPED_SUFFIXES)
