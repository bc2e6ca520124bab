"""`knowbench corpus build` on a KOCO-Bench framework's knowledge-corpus folder, as released:
`metadata.json` (framework name and description) beside the framework's upstream tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.errors import UserError
from knowbench.knowledge.corpus import open_corpus
from knowbench.knowledge.ingest import build_corpus, koco_corpus_metadata


def test_a_koco_corpus_folder_keeps_its_framework_name_description_and_version(
        shared_data: Callable[..., Path], tmp_path: Path) -> None:
    folder = shared_data("anchors/koco-projects") / "raganything" / "knowledge_corpus"
    corpus = build_corpus(str(folder), "", directory=tmp_path / "c")
    manifest = corpus.manifest
    assert manifest.name == "RAGAnything"  # metadata.json's framework_name
    assert manifest.framework == "RAGAnything"
    assert manifest.description.startswith("RAGAnything is a comprehensive multimodal")
    assert manifest.version == "1.2.8"  # pyproject: version = {attr = "raganything.__version__"}
    chunks = corpus.chunks
    # the upstream tree below the corpus folder: its modules named as the package imports them
    assert any(c.kind == "function" and c.module.startswith("raganything.") for c in chunks)
    assert any(c.kind == "doc" and c.path.startswith("RAG-Anything/docs/") for c in chunks)
    assert not any(c.path.endswith("metadata.json") for c in chunks)


@pytest.mark.parametrize(("files", "version"), [
    ({"proj/pyproject.toml": '[project]\nname = "p"\nversion = "2.0.1"\n'}, "2.0.1"),
    ({"proj/pyproject.toml": '[project]\ndynamic = ["version"]\n[tool.setuptools.dynamic]\n'
                             'version = {file = "p/version/version"}\n',
      "proj/p/version/version": "0.5.0.dev\n"}, "0.5.0.dev"),
    ({"proj/setup.py": "from setuptools import setup\nsetup(name='p')\n",
      "proj/src/p/__init__.py": '__version__ = "3.1"\n'}, "3.1"),
    ({"proj/README.md": "# p\n"}, None),
])
def test_the_version_comes_from_the_framework_tree(tmp_path: Path, files: dict[str, str],
                                                   version: str | None) -> None:
    (tmp_path / "metadata.json").write_text(json.dumps({"framework_name": "p",
                                                        "framework_description": "P does things."}))
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    metadata = koco_corpus_metadata(tmp_path)
    assert metadata is not None and metadata.version == version


def test_a_folder_without_metadata_is_an_ordinary_directory_and_bad_metadata_is_refused(
        tmp_path: Path) -> None:
    assert koco_corpus_metadata(tmp_path) is None
    (tmp_path / "metadata.json").write_text("{\"framework_name\": 3}")
    with pytest.raises(UserError, match=r"metadata.json: 'framework_name' must be a non-empty string"):
        koco_corpus_metadata(tmp_path)


def test_cli_builds_a_koco_corpus_without_a_name(shared_data: Callable[..., Path], tmp_path: Path) -> None:
    folder = shared_data("anchors/koco-projects") / "raganything" / "knowledge_corpus"
    built = run_knowbench("corpus", "build", str(folder), "--dir", str(tmp_path / "c"))
    assert built.returncode == 0, built.stderr
    assert "RAGAnything" in built.stdout and "1.2.8" in built.stdout
    assert open_corpus(tmp_path / "c").manifest.framework == "RAGAnything"
