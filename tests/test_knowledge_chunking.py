"""Chunking: every kind of chunk, from small files written into tmp directories."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from knowbench.knowledge.chunking import (
    MAX_EXAMPLE_LINES,
    MAX_SECTION_CHARS,
    chunk_file,
    chunk_markdown,
    chunk_notebook,
    chunk_python,
    chunk_rst,
)
from knowbench.knowledge.ingest import chunk_tree, module_name

PYTHON = textwrap.dedent('''\
    """Tools for parsing widgets."""

    import functools


    @functools.cache
    def parse(text: str, strict: bool = False) -> list[str]:
        """Split `text` into widget names."""
        return [part for part in text.split(",") if part or strict]


    class WidgetParser(Base, metaclass=Meta):
        """Parses widgets incrementally."""

        default_sep = ","

        def __init__(self, sep: str = ",") -> None:
            self.sep = sep

        @property
        def separator(self) -> str:
            return self.sep

        async def feed(self, chunk: bytes) -> int:
            """Feed bytes; return how many were used."""
            secret_body_marker = len(chunk)
            return secret_body_marker

        class Options:
            verbose = False

            def toggle(self):
                self.verbose = not self.verbose
    ''')


def _by_name(chunks):
    return {chunk.qualname: chunk for chunk in chunks}


def test_python_module_docstring_is_its_own_chunk() -> None:
    chunks = chunk_python(PYTHON, "pkg/widgets.py", "pkg.widgets")
    module = [chunk for chunk in chunks if chunk.kind == "module"]
    assert len(module) == 1
    assert module[0].text == "Tools for parsing widgets."
    assert module[0].full_name == "pkg.widgets"
    assert (module[0].start_line, module[0].end_line) == (1, 1)


def test_python_functions_keep_decorators_and_exact_line_spans() -> None:
    chunks = _by_name(chunk_python(PYTHON, "pkg/widgets.py", "pkg.widgets"))
    parse = chunks["parse"]
    assert parse.kind == "function"
    assert parse.text.startswith("@functools.cache\ndef parse(text: str, strict: bool = False)")
    assert (parse.start_line, parse.end_line) == (6, 9)
    assert parse.full_name == "pkg.widgets.parse"
    assert parse.location == "pkg/widgets.py:6-9"


def test_methods_are_chunks_named_class_dot_method_with_dedented_source() -> None:
    chunks = _by_name(chunk_python(PYTHON, "pkg/widgets.py", "pkg.widgets"))
    for name in ("WidgetParser.__init__", "WidgetParser.separator", "WidgetParser.feed",
                 "WidgetParser.Options.toggle"):
        assert chunks[name].kind == "function", name
    feed = chunks["WidgetParser.feed"]
    assert feed.text.startswith("async def feed(self, chunk: bytes) -> int:")
    assert "secret_body_marker = len(chunk)" in feed.text
    assert chunks["WidgetParser.separator"].text.startswith("@property\ndef separator")


def test_class_chunk_holds_header_docstring_attributes_and_signatures_not_bodies() -> None:
    chunks = _by_name(chunk_python(PYTHON, "pkg/widgets.py", "pkg.widgets"))
    outline = chunks["WidgetParser"]
    assert outline.kind == "class"
    text = outline.text
    assert text.startswith("class WidgetParser(Base, metaclass=Meta):")
    assert '"""Parses widgets incrementally."""' in text
    assert 'default_sep = ","' in text
    assert "def __init__(self, sep: str=',') -> None: ..." in text
    assert "@property\n    def separator(self) -> str: ..." in text
    assert "async def feed(self, chunk: bytes) -> int: ..." in text
    assert "class Options: ..." in text
    assert "secret_body_marker" not in text and "self.sep = sep" not in text
    assert outline.end_line == len(PYTHON.splitlines())
    assert chunks["WidgetParser.Options"].kind == "class"


def test_definitions_inside_module_level_if_and_try_are_found() -> None:
    source = "try:\n    import fast\nexcept ImportError:\n    def speed():\n        return 1\n" \
             "if True:\n    class Compat:\n        pass\n"
    names = {chunk.qualname for chunk in chunk_python(source, "m.py", "m")}
    assert {"speed", "Compat"} <= names


def test_overload_stubs_are_not_chunks_but_the_implementation_is() -> None:
    source = ("import typing as t\n\n\n@t.overload\ndef get(key: int) -> int: ...\n\n\n"
              "@overload\ndef get(key: str) -> str: ...\n\n\ndef get(key):\n    return key\n")
    chunks = chunk_python(source, "m.py", "m")
    assert [(chunk.qualname, chunk.start_line) for chunk in chunks] == [("get", 12)]


def test_markdown_splits_at_headings_with_trails_and_ignores_hashes_in_fences() -> None:
    text = textwrap.dedent("""\
        ---
        title: front matter
        ---
        Intro paragraph.

        # Guide

        Welcome.

        ## Install

        ```bash
        # not a heading
        pip install widgets
        ```

        Setext Section
        --------------

        Body under setext.
        """)
    chunks = chunk_markdown(text, "docs/guide.md")
    assert [chunk.qualname for chunk in chunks] == ["guide", "Guide", "Guide > Install",
                                                    "Guide > Setext Section"]
    assert all(chunk.kind == "doc" for chunk in chunks)
    install = chunks[2]
    assert "# not a heading" in install.text and install.text.startswith("## Install")
    assert (install.start_line, install.end_line) == (10, 16)
    assert "front matter" not in chunks[0].text


def test_markdown_heading_without_body_is_not_a_chunk_and_long_sections_split() -> None:
    paragraph = "word " * 60 + "\n\n"
    text = "# Title\n## Empty parent\n### Child\n" + paragraph * (MAX_SECTION_CHARS // len(paragraph) * 2)
    chunks = chunk_markdown(text, "docs/long.md")
    names = [chunk.qualname for chunk in chunks]
    assert "Title" not in names and "Title > Empty parent" not in names
    assert len(chunks) >= 2 and names[0] == "Title > Empty parent > Child (part 1)"
    assert all(len(chunk.text) <= MAX_SECTION_CHARS + 400 for chunk in chunks)


def test_rst_sections_follow_adornment_styles_in_order_of_appearance() -> None:
    text = textwrap.dedent("""\
        ==========
        User Guide
        ==========

        Opening words.

        Options
        =======

        Use options.

        Flags
        -----

        Flags are booleans.

        Arguments
        =========

        ::

            literal block
            -------------
        """)
    chunks = chunk_rst(text, "docs/guide.rst")
    assert [chunk.qualname for chunk in chunks] == [
        "User Guide", "User Guide > Options", "User Guide > Options > Flags",
        "User Guide > Arguments"]
    assert chunks[0].start_line == 1
    assert "literal block" in chunks[-1].text


def test_notebook_code_cells_become_chunks_numbered_by_cell() -> None:
    notebook = {"nbformat": 4, "cells": [
        {"cell_type": "markdown", "source": ["# Title"]},
        {"cell_type": "code", "source": ["import widgets\n", "widgets.parse('a,b')"]},
        {"cell_type": "code", "source": "   \n"},
        {"cell_type": "code", "source": "print(1)"},
    ]}
    chunks = chunk_notebook(json.dumps(notebook), "nb/demo.ipynb")
    assert [(chunk.kind, chunk.qualname, chunk.start_line) for chunk in chunks] == [
        ("notebook", "cell 2", 2), ("notebook", "cell 4", 4)]
    assert chunks[0].text == "import widgets\nwidgets.parse('a,b')"
    assert chunks[0].location == "nb/demo.ipynb:cell 2"


def test_example_folders_are_recognised_and_scripts_kept_whole() -> None:
    script = "import widgets\n\nprint(widgets.parse('a'))\n"
    for path in ("examples/basic.py", "example/basic.py", "docs/examples/basic.py",
                 "demo_app/basic.py", "demos/basic.py"):
        chunks = chunk_file(script, path)
        assert [(chunk.kind, chunk.qualname) for chunk in chunks] == [("example", "basic")], path
        assert chunks[0].text == script.strip()
    assert chunk_file(script, "src/widgets/basic.py", "widgets.basic") == []  # no defs, no docstring
    doc = chunk_file("Example\n=======\n\nRun it.\n", "docs/examples/index.rst")
    assert [chunk.kind for chunk in doc] == ["example"]


def test_long_example_scripts_are_split_at_top_level_statements() -> None:
    body = "".join(f"def step_{i}():\n" + "    x = 1\n" * 20 + "\n" for i in range(20))
    chunks = chunk_file(body, "examples/long.py")
    assert len(chunks) > 1
    assert all(chunk.kind == "example" for chunk in chunks)
    assert all(chunk.end_line - chunk.start_line < MAX_EXAMPLE_LINES + 25 for chunk in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(body.splitlines())
    assert all(chunk.text.startswith("def step_") for chunk in chunks)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_tree_walk_skips_tests_hidden_and_build_dirs_and_names_modules(tmp_path: Path) -> None:
    _write(tmp_path, {
        "src/widgets/__init__.py": '"""Widgets."""\n',
        "src/widgets/core.py": "def parse():\n    return 1\n",
        "tests/test_core.py": "def test_parse():\n    assert True\n",
        "src/widgets/test_inline.py": "def test_x():\n    pass\n",
        ".hidden/secret.py": "def secret():\n    pass\n",
        "build/lib/widgets/core.py": "def parse():\n    return 1\n",
        "docs/index.md": "# Widgets\n\nText.\n",
        "broken.py": "def broken(:\n",
        "notes.txt": "ignored",
    })
    tree = chunk_tree(tmp_path, tmp_path)
    paths = {chunk.path for chunk in tree.chunks}
    assert paths == {"src/widgets/__init__.py", "src/widgets/core.py", "docs/index.md"}
    assert tree.skipped == ["broken.py"]
    parse = next(chunk for chunk in tree.chunks if chunk.qualname == "parse")
    assert parse.module == "widgets.core" and parse.full_name == "widgets.core.parse"
    with_tests = chunk_tree(tmp_path, tmp_path, include_tests=True)
    assert {"tests/test_core.py", "src/widgets/test_inline.py"} <= {c.path for c in with_tests.chunks}


def test_module_names_follow_package_folders(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/mod.py": "",
                      "scripts/tool.py": ""})
    assert module_name(tmp_path / "pkg/sub/mod.py", tmp_path) == "pkg.sub.mod"
    assert module_name(tmp_path / "pkg/sub/__init__.py", tmp_path) == "pkg.sub"
    assert module_name(tmp_path / "scripts/tool.py", tmp_path) == "tool"
    # Ingesting a package folder itself keeps the package name.
    assert module_name(tmp_path / "pkg/sub/mod.py", tmp_path / "pkg") == "pkg.sub.mod"
