"""Small real corpora for the knowledge tests, written into tmp directories."""

from __future__ import annotations

import bisect
import shutil
import string
import textwrap
from pathlib import Path

from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.ingest import build_corpus

TOPICS = {
    "geometry/shapes.py": '''\
        """Shapes and their areas."""


        def circle_area(radius):
            """Area of a circle."""
            return 3.14159 * radius * radius


        def rectangle_perimeter(width, height):
            return 2 * (width + height)
        ''',
    "network/http.py": '''\
        class HttpClient:
            """Sends HTTP requests with retries."""

            def send_request(self, url, retries=3):
                for attempt in range(retries):
                    response = self.transport.get(url)
                    if response.ok:
                        return response
                raise ConnectionError(url)
        ''',
    "docs/cooking.md": """\
        # Cooking

        ## Boiling pasta

        Salt the water generously and stir the spaghetti.
        """,
}


def write_files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def topics_corpus(tmp_path: Path, extra: dict[str, str] | None = None) -> Corpus:
    source = write_files(tmp_path / "topics", {**TOPICS, **(extra or {})})
    return build_corpus(str(source), "topics", directory=tmp_path / "topics-corpus")


def stdlib_corpus(root: Path) -> Corpus:
    """textwrap, string and bisect from this Python's standard library, plus a page of notes:
    the knowledge examples/basic's tasks are about."""
    source = root / "stdlib"
    source.mkdir(parents=True, exist_ok=True)
    for module in (textwrap, string, bisect):
        assert module.__file__ is not None
        shutil.copy(module.__file__, source / Path(module.__file__).name)
    write_files(source, {"docs/notes.md": """\
        # Standard library notes

        ## Regular expressions

        `re.sub(pattern, repl, string)` replaces every match of `pattern`; use `[^a-z0-9]+`
        to collapse runs of other characters into one separator.

        ## JSON

        `json.dumps(obj, sort_keys=True)` serialises; dictionary keys become strings.
        """})
    return build_corpus(str(source), "stdlib", directory=root / "stdlib-corpus")
