"""Corpus ingest from every kind of source, the stored manifest, and the `corpus` commands."""

from __future__ import annotations

import hashlib
import sqlite3
import tarfile
import zipfile
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench import __version__
from knowbench.errors import UserError
from knowbench.knowledge.corpus import CORPUS_FILE, open_corpus
from knowbench.knowledge.ingest import build_corpus

PACKAGE = {
    "PKG-INFO": "Metadata-Version: 2.1\nName: widgets\nVersion: 1.2.3\n",
    "src/widgets/__init__.py": '"""Widgets: parse and render."""\nfrom widgets.core import parse\n',
    "src/widgets/core.py": (
        "def parse(text):\n    return text.split(',')\n\n\n"
        "class Renderer:\n    \"\"\"Renders widgets.\"\"\"\n\n    def render(self, widget):\n"
        "        return f'<{widget}>'\n"),
    "docs/index.md": "# Widgets\n\nParse comma-separated widgets.\n\n## Rendering\n\nUse Renderer.\n",
    "docs/api.rst": "API\n===\n\nThe parse function.\n",
    "examples/hello.py": "from widgets import parse\nprint(parse('a,b'))\n",
    "notebooks/tour.ipynb": '{"nbformat": 4, "cells": [{"cell_type": "code", "source": "1 + 1"}]}',
    "tests/test_core.py": "def test_parse():\n    assert True\n",
}


def write_package(root: Path, files: dict[str, str] = PACKAGE) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_directory_ingest_writes_one_sqlite_file_with_a_manifest(tmp_path: Path) -> None:
    source = write_package(tmp_path / "widgets-1.2.3")
    corpus = build_corpus(str(source), "widgets", directory=tmp_path / "corpus")
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [CORPUS_FILE]
    manifest = corpus.manifest
    assert manifest.source_kind == "directory" and manifest.version == "1.2.3"
    assert manifest.counts == {"function": 2, "class": 1, "module": 1, "doc": 3, "example": 1,
                               "notebook": 1}
    assert manifest.chunks == 9 == len(corpus.chunks)
    assert manifest.sha256.startswith("sha256:") and manifest.content_hash.startswith("sha256:")
    assert manifest.knowbench == __version__ and manifest.include_tests is False
    assert not any(chunk.path.startswith("tests/") for chunk in corpus.chunks)
    reopened = open_corpus(tmp_path / "corpus")
    assert reopened.manifest == manifest and reopened.chunks == corpus.chunks
    with sqlite3.connect(tmp_path / "corpus" / CORPUS_FILE) as db:
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 9


def test_default_location_is_under_knowbench_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   ) -> None:
    monkeypatch.setenv("KNOWBENCH_HOME", str(tmp_path / "home"))
    source = write_package(tmp_path / "src")
    build_corpus(str(source), "widgets")
    assert (tmp_path / "home" / "corpora" / "widgets" / CORPUS_FILE).is_file()
    assert open_corpus("widgets").name == "widgets"


def test_rebuilding_identical_content_keeps_the_content_hash(tmp_path: Path) -> None:
    source = write_package(tmp_path / "src")
    first = build_corpus(str(source), "w", directory=tmp_path / "c")
    second = build_corpus(str(source), "w", directory=tmp_path / "c")
    assert first.content_hash == second.content_hash
    (source / "docs" / "index.md").write_text("# Widgets\n\nChanged.\n")
    third = build_corpus(str(source), "w", directory=tmp_path / "c")
    assert third.content_hash != first.content_hash


def _sdist(tmp_path: Path) -> Path:
    source = write_package(tmp_path / "widgets-1.2.3")
    archive = tmp_path / "widgets-1.2.3.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        bundle.add(source, arcname="widgets-1.2.3")
    return archive


def test_sdist_archive_ingest_records_the_archive_hash_and_version(tmp_path: Path) -> None:
    archive = _sdist(tmp_path)
    corpus = build_corpus(str(archive), "widgets", directory=tmp_path / "c")
    assert corpus.manifest.source_kind == "archive"
    assert corpus.manifest.sha256 == "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    assert corpus.manifest.version == "1.2.3"
    assert {chunk.path for chunk in corpus.chunks} >= {"src/widgets/core.py", "docs/index.md"}


def test_wheel_ingest_reads_the_package_and_skips_dist_info(tmp_path: Path) -> None:
    wheel = tmp_path / "widgets-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as bundle:
        bundle.writestr("widgets/__init__.py", '"""Widgets."""\n')
        bundle.writestr("widgets/core.py", "def parse(text):\n    return text\n")
        bundle.writestr("widgets-2.0.dist-info/METADATA", "Name: widgets\nVersion: 2.0\n")
        bundle.writestr("widgets-2.0.dist-info/licenses/README.md", "# License\n\ntext\n")
    corpus = build_corpus(str(wheel), "widgets", directory=tmp_path / "c")
    assert corpus.manifest.version == "2.0"
    assert {chunk.full_name for chunk in corpus.chunks} == {"widgets", "widgets.core.parse"}


def test_installed_package_by_flag_and_by_importable_name(tmp_path: Path) -> None:
    by_flag = build_corpus(None, "json", installed="json", directory=tmp_path / "a")
    by_name = build_corpus("json", "json", directory=tmp_path / "b")
    assert by_flag.manifest.source_kind == by_name.manifest.source_kind == "installed"
    assert by_flag.content_hash == by_name.content_hash
    names = {chunk.full_name for chunk in by_flag.chunks}
    assert {"json.dumps", "json.decoder.JSONDecoder.decode"} <= names
    assert all(chunk.path.startswith("json/") for chunk in by_flag.chunks)


def test_installed_single_module_package(tmp_path: Path) -> None:
    corpus = build_corpus(None, "textwrap", installed="textwrap", directory=tmp_path / "c")
    assert {chunk.path for chunk in corpus.chunks} == {"textwrap.py"}
    assert "textwrap.TextWrapper.wrap" in {chunk.full_name for chunk in corpus.chunks}


def test_bad_sources_are_user_errors(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match="not a directory or an sdist"):
        build_corpus(str(tmp_path / "notes.txt"), "x", directory=tmp_path / "c")
    with pytest.raises(UserError, match="not importable"):
        build_corpus(None, "x", installed="no_such_module_knowbench", directory=tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no Python, Markdown"):
        build_corpus(str(tmp_path / "empty"), "x", directory=tmp_path / "c")
    with pytest.raises(UserError, match="corpus name"):
        build_corpus(str(tmp_path), "bad name", directory=tmp_path / "c")
    with pytest.raises(UserError, match="no knowledge corpus"):
        open_corpus(tmp_path / "missing")


@pytest.mark.slow
def test_real_sdist_from_pypi_carries_source_and_docs(tmp_path: Path) -> None:
    corpus = build_corpus("click==8.1.8", "click", directory=tmp_path / "c", pypi=True)
    manifest = corpus.manifest
    assert manifest.source_kind == "pypi" and manifest.version == "8.1.8"
    assert manifest.source.startswith("click==8.1.8 (click-8.1.8.tar.gz)")
    assert manifest.counts["function"] > 300 and manifest.counts["class"] > 50
    assert manifest.counts["doc"] > 100  # docs/*.rst shipped in the sdist
    names = {chunk.full_name for chunk in corpus.chunks}
    assert {"click.core.Command.invoke", "click.core.Group", "click.decorators.option"} <= names
    assert any(chunk.path == "docs/options.rst" for chunk in corpus.chunks)


@pytest.mark.slow
def test_a_requirement_that_does_not_exist_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="could not download"):
        build_corpus("knowbench-no-such-package-3f9a==0.0.1", "x", directory=tmp_path / "c")


def test_cli_build_stats_and_search(tmp_path: Path) -> None:
    source = write_package(tmp_path / "src")
    target = str(tmp_path / "c")
    built = run_knowbench("corpus", "build", str(source), "--name", "widgets", "--dir", target)
    assert built.returncode == 0, built.stderr
    output = built.stdout + built.stderr
    assert "documentation section" in output and "built in" in output
    stats = run_knowbench("corpus", "stats", "widgets", "--dir", target)
    assert stats.returncode == 0 and "content hash" in stats.stdout + stats.stderr
    found = run_knowbench("corpus", "search", target, "render a widget", "-k", "2")
    assert found.returncode == 0, found.stderr
    assert "1. " in found.stdout and "widgets.core.Renderer" in found.stdout


def test_cli_search_output_is_not_mangled_by_markup(tmp_path: Path) -> None:
    source = write_package(tmp_path / "src", {"m.py": "def brackets():\n    return '[bold]x[/]'\n"})
    build_corpus(str(source), "m", directory=tmp_path / "c")
    found = run_knowbench("corpus", "search", str(tmp_path / "c"), "brackets")
    assert found.returncode == 0 and "'[bold]x[/]'" in found.stdout


def test_tgz_archives_are_ingested_like_tar_gz(tmp_path: Path) -> None:
    renamed = tmp_path / "widgets-1.2.3.tgz"
    renamed.write_bytes(_sdist(tmp_path).read_bytes())
    assert build_corpus(str(renamed), "w", directory=tmp_path / "c").manifest.version == "1.2.3"
