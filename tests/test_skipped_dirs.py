"""One list of skipped directories: mining a repository and chunking a corpus both skip
exactly the directories `knowbench.paths` names, and read everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowbench.builders.repository import Repository
from knowbench.knowledge.ingest import chunk_tree
from knowbench.paths import SKIPPED_DIRS, skipped_dir

SKIPPED = [*sorted(SKIPPED_DIRS), ".git", ".venv", "widgets.egg-info", "widgets-1.0.dist-info"]
READ = ["widgets", "docs", "builder", "environment", "distributions"]


def tree_with(directory: str, root: Path) -> Path:
    """A package whose one module also has a copy under `directory`."""
    for relative in ("widgets/__init__.py", f"{directory}/widgets/core.py", "widgets/core.py"):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def parse(text):\n    return text.split()\n")
    return root


@pytest.mark.parametrize("directory", SKIPPED)
def test_the_list_names_the_directory(directory: str) -> None:
    assert skipped_dir(directory)


@pytest.mark.parametrize("directory", READ)
def test_the_list_leaves_project_directories_alone(directory: str) -> None:
    assert not skipped_dir(directory)


@pytest.mark.parametrize("directory", SKIPPED)
def test_mining_skips_the_listed_directories(directory: str, tmp_path: Path) -> None:
    repository = Repository(tree_with(directory, tmp_path))
    assert {repository.relpath(module) for module in repository.modules} == {
        "widgets/__init__.py", "widgets/core.py"}


@pytest.mark.parametrize("directory", SKIPPED)
def test_corpus_chunking_skips_the_listed_directories(directory: str, tmp_path: Path) -> None:
    tree = chunk_tree(tree_with(directory, tmp_path), tmp_path)
    assert {chunk.path for chunk in tree.chunks} == {"widgets/__init__.py", "widgets/core.py"}


@pytest.mark.parametrize("directory", READ)
def test_both_read_other_directories(directory: str, tmp_path: Path) -> None:
    root = tree_with(directory, tmp_path)
    copy = f"{directory}/widgets/core.py"
    assert copy in {Repository(root).relpath(module) for module in Repository(root).modules}
    assert copy in {chunk.path for chunk in chunk_tree(root, tmp_path).chunks}
