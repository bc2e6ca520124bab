"""Leakage control: retrieval never hands a task its own target, wherever copies of it hide.

The corpus holds the target (`pkg/textutil.py`), a renamed and reformatted copy in another
file, a copy as a method of a class, a Markdown recipe and a reST page quoting its body (with
comments), an example script defining it, and unrelated code. Every copy contains the marker
"NFKD" and nothing else does, so "no returned chunk mentions NFKD" is checked independently of
how leakage control works. Searches use k = the corpus size: everything allowed comes back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.knowledge.bm25 import BM25Retriever
from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.dense import dense_available
from knowbench.knowledge.ingest import build_corpus
from knowbench.knowledge.leakage import LeakageGuard
from knowbench.knowledge.retrieval import Retriever, open_retriever
from knowbench.methods.rag import RagBM25
from knowledge_fixtures import write_files

TARGET = '''\
def normalize_title(text, sep="-"):
    """Turn a title into a slug."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", sep, ascii_text.lower())
    return slug.strip(sep)
'''

FILES = {
    "pkg/__init__.py": "",
    "pkg/textutil.py": (
        "import re\nimport unicodedata\n\n\n" + TARGET + "\n\n"
        "def count_words(text):\n    \"\"\"How many words a title has.\"\"\"\n"
        "    return len(text.split())\n"),
    "pkg/vendored.py": '''\
        import re, unicodedata

        def _title_to_slug(value, sep='-'):
            # vendored from textutil, docstring dropped
            ascii_text = unicodedata.normalize('NFKD', value).encode('ascii', 'ignore').decode('ascii')
            slug = re.sub(r'[^a-z0-9]+', sep, ascii_text.lower())   # collapse
            return slug.strip(sep)
        ''',
    "pkg/helpers.py": '''\
        class Slugger:
            """Makes slugs for titles."""

            def make(self, text, sep="-"):
                ascii_text = unicodedata.normalize(
                    "NFKD", text
                ).encode("ascii", "ignore").decode("ascii")
                slug = re.sub(r"[^a-z0-9]+", sep, ascii_text.lower())
                return slug.strip(sep)

            def lower(self, text):
                return text.lower()
        ''',
    "docs/recipes.md": '''\
        # Recipes

        ## Title slugs

        Make a slug from a title:

        ```python
        ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        # one separator per run of other characters
        slug = re.sub(r"[^a-z0-9]+", sep, ascii_text.lower())
        return slug.strip(sep)
        ```

        ## Word counts

        Split on whitespace and count the words of a title.
        ''',
    "docs/api.rst": '''\
        Slugs
        =====

        The title slug implementation:

        .. code-block:: python
           :caption: textutil

            ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
            slug = re.sub(r"[^a-z0-9]+", sep, ascii_text.lower())  # collapse runs
            return slug.strip(sep)

        Titles
        ======

        Titles are turned into slugs for URLs.
        ''',
    "examples/slugs.py": "import re, unicodedata\n\n\n" + TARGET + "\n\nprint(normalize_title('A B'))\n",
    "pkg/other.py": '''\
        def title_case(text):
            """Capitalise every word of a title."""
            return " ".join(word.capitalize() for word in text.split())


        def slug_length(slug, sep="-"):
            """How many parts a title slug has."""
            return len(slug.split(sep))
        ''',
}

TARGET_START = 5  # line of `def normalize_title` in pkg/textutil.py


def make_task(**metadata: object) -> FunctionTask:
    prompt = 'def normalize_title(text, sep="-"):\n    """Turn a title into a slug."""\n    ...\n'
    return FunctionTask(
        task_id="text/normalize_title", domain="text", metadata=dict(metadata),
        instruction="Turn a title into an ASCII slug: strip accents with NFKD, lower-case, "
                    "collapse other characters into the separator, trim separators.",
        prompt_code=prompt, entry_point="normalize_title", context="import re\nimport unicodedata",
        reference=TARGET, tests=[TestSpec(name="t", code="assert normalize_title('A b') == 'a-b'")],
    )


FULL_METADATA = {"source_path": "pkg/textutil.py", "source_span": [TARGET_START, TARGET_START + 4]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("leak")
    source = write_files(root / "src", FILES)
    return build_corpus(str(source), "leak", directory=root / "corpus")


RETRIEVERS = ["bm25", pytest.param("dense", marks=pytest.mark.skipif(
    dense_available() is not None, reason=f"dense extra not installed: {dense_available()}")),
    pytest.param("hybrid", marks=pytest.mark.skipif(
        dense_available() is not None, reason="dense extra not installed"))]


def _everything(retriever: Retriever, task: FunctionTask, **options: bool):
    guard = LeakageGuard(task, **options)
    queries = ["normalize_title(text, sep='-')\n" + task.instruction, "NFKD ascii slug",
               "unicodedata normalize encode ascii ignore re.sub strip sep"]
    results = [retriever.search(query, len(retriever.corpus), exclude=guard.reason)
               for query in queries]
    return results


def _copies(corpus: Corpus) -> set[str]:
    return {chunk.id for chunk in corpus.chunks if "NFKD" in chunk.text}


@pytest.mark.parametrize("kind", RETRIEVERS)
@pytest.mark.parametrize("metadata", [FULL_METADATA, {}], ids=["with-location", "reference-only"])
def test_no_retriever_ever_returns_the_target_or_a_copy(corpus: Corpus, kind: str,
                                                        metadata: dict[str, object]) -> None:
    retriever = open_retriever(kind, corpus)
    copies = _copies(corpus)
    assert len(copies) >= 6  # target, vendored, method, markdown, reST, example
    for hits, withheld in _everything(retriever, make_task(**metadata)):
        returned = {hit.chunk.id for hit in hits}
        assert not returned & copies
        assert not any("NFKD" in hit.chunk.text for hit in hits)
        assert {item.chunk.id for item in withheld} <= copies
    hits, _ = _everything(retriever, make_task(**metadata))[0]
    assert "pkg.textutil.count_words" in {hit.chunk.full_name for hit in hits}


def test_every_copy_is_withheld_with_its_reason(corpus: Corpus) -> None:
    guard = LeakageGuard(make_task(**FULL_METADATA))
    reasons = {(chunk.path, chunk.qualname): guard.reason(i, chunk)
               for i, chunk in enumerate(corpus.chunks) if "NFKD" in chunk.text}
    assert reasons == {
        ("pkg/textutil.py", "normalize_title"): "target span",
        ("pkg/vendored.py", "_title_to_slug"): "target source",
        ("pkg/helpers.py", "Slugger.make"): "target source",
        ("docs/recipes.md", "Recipes > Title slugs"): "target source",
        ("docs/api.rst", "Slugs"): "target source",
        ("examples/slugs.py", "slugs"): "target source",
    }


def test_unrelated_chunks_are_kept(corpus: Corpus) -> None:
    guard = LeakageGuard(make_task(**FULL_METADATA))
    kept = {chunk.full_name for i, chunk in enumerate(corpus.chunks) if guard.reason(i, chunk) is None}
    assert {"pkg.textutil.count_words", "pkg.other.title_case", "pkg.other.slug_length",
            "pkg.helpers.Slugger", "pkg.helpers.Slugger.lower", "Recipes > Word counts",
            "Titles"} <= kept


def test_exclude_file_withholds_the_whole_target_file(corpus: Corpus) -> None:
    retriever = BM25Retriever(corpus)
    task = make_task(**FULL_METADATA)
    hits, withheld = retriever.search("count the words of a title", len(corpus),
                                      exclude=LeakageGuard(task, exclude_file=True).reason)
    assert not any(hit.chunk.path == "pkg/textutil.py" for hit in hits)
    assert {item.reason for item in withheld if item.chunk.path == "pkg/textutil.py"} == {"target file"}


def test_target_name_in_its_module_is_withheld_even_when_its_code_differs(corpus: Corpus) -> None:
    # The corpus may hold another version of the target than the task's reference.
    task = make_task(module="pkg.textutil").model_copy(update={
        "reference": 'def normalize_title(text, sep="-"):\n    return text.lower().replace(" ", sep)\n'})
    guard = LeakageGuard(task)
    target = next(c for c in corpus.chunks if c.full_name == "pkg.textutil.normalize_title")
    assert guard.reason(0, target) == "target name"
    example = next(c for c in corpus.chunks if c.path == "examples/slugs.py")
    assert guard.reason(0, example) is None  # same name, other module, other code


def test_span_rule_uses_suffix_matching_paths(corpus: Corpus) -> None:
    task = make_task(source_path="project/src/pkg/textutil.py",
                     source_span=[TARGET_START + 1, TARGET_START + 2]).model_copy(update={
                         "reference": "def normalize_title(text, sep='-'):\n    return text\n"})
    guard = LeakageGuard(task)
    target = next(c for c in corpus.chunks if c.full_name == "pkg.textutil.normalize_title")
    assert guard.reason(0, target) == "target span"
    words = next(c for c in corpus.chunks if c.full_name == "pkg.textutil.count_words")
    assert guard.reason(0, words) is None


def test_a_task_without_reference_match_or_metadata_excludes_nothing(corpus: Corpus) -> None:
    task = make_task().model_copy(update={
        "reference": "def normalize_title(text, sep='-'):\n    return text\n"})
    guard = LeakageGuard(task)
    assert guard.rules() == ["target source"]
    assert all(guard.reason(i, chunk) is None for i, chunk in enumerate(corpus.chunks))


def test_method_targets_are_found_inside_a_class_reference_and_renamed_copies_too(
        tmp_path: Path) -> None:
    source = write_files(tmp_path / "src", {"shop.py": '''\
        class Cart:
            def total(self):
                subtotal = sum(item.price * item.quantity for item in self.items)
                return round(subtotal * (1 + self.tax_rate), 2)

            def count(self):
                return sum(item.quantity for item in self.items)
        ''', "copy.py": '''\
        def cart_total(cart):
            amount = sum(item.price * item.quantity for item in cart.items)
            return round(amount * (1 + cart.tax_rate), 2)


        def cart_total_untaxed(cart):
            amount = sum(item.price * item.quantity for item in cart.items)
            return round(amount, 2)
        '''})
    corpus = build_corpus(str(source), "shop", directory=tmp_path / "c")
    reference = ("class Cart:\n    def total(self):\n        \"\"\"Total with tax.\"\"\"\n"
                 "        subtotal = sum(item.price * item.quantity for item in self.items)\n"
                 "        return round(subtotal * (1 + self.tax_rate), 2)\n")
    task = FunctionTask(task_id="shop/total", domain="shop", instruction="Total with tax.",
                        prompt_code="class Cart:\n    def total(self):\n        ...\n",
                        entry_point="Cart.total", reference=reference,
                        tests=[TestSpec(name="t", code="assert True")])
    guard = LeakageGuard(task)
    withheld = {chunk.full_name for i, chunk in enumerate(corpus.chunks) if guard.reason(i, chunk)}
    # copy.cart_total is the target with its parameter and local renamed: still the target.
    assert withheld == {"shop.Cart.total", "copy.cart_total"}


def test_rag_trace_lists_what_leakage_control_withheld(corpus: Corpus) -> None:
    method = RagBM25(corpus=str(corpus.directory), top_k=3, budget=2000)
    trace = method.prompt(make_task(**FULL_METADATA)).trace
    excluded = {item["name"]: item for item in trace["excluded"]}
    assert excluded["pkg.textutil.normalize_title"]["reason"] == "target span"
    assert min(item["would_be_rank"] for item in trace["excluded"]) == 1
    assert trace["leakage"]["rules"] == ["target span", "target name", "target source"]
    assert len(trace["retrieved"]) == 3
    assert not any("NFKD" in corpus.chunks[corpus.position[item["id"]]].text
                   for item in trace["retrieved"])
