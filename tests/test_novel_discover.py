"""`knowbench novel discover` / `bundles` (stages 1 and 2): surfaces read with griffe from two
real package trees written here, diffed and filtered; bundles' parts; real releases from PyPI
(marked slow: they download small distributions, cached under KNOWBENCH_HOME)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.builders.novel.discover import DiscoverOptions, diff_surfaces, filter_candidates
from knowbench.builders.novel.extract import (
    docstring_examples,
    docstring_mechanism,
    implementation,
    parse_docstring,
    with_imports,
)
from knowbench.builders.novel.pypi import resolve_versions
from knowbench.builders.novel.surface import find_packages, load_surface

OLD = {
    "pkg/__init__.py": '''
        from pkg._impl import scale, moved, rename_me
        from pkg.extras import deprecated_thing
        __all__ = ["scale", "moved", "rename_me", "deprecated_thing"]
    ''',
    "pkg/_impl.py": '''
        def scale(values, factor=1):
            """Multiply every value by a factor and return the new list of values."""
            return [v * factor for v in values]

        def moved(x):
            """Return the value x unchanged, for use as a default callback in pipelines."""
            return x

        def rename_me(values, key):
            """Sort the values by the given key function and return them as a list."""
            return sorted(values, key=key)
    ''',
    "pkg/extras.py": '''
        def deprecated_thing(a):
            """Compute something old that nobody should still be calling today."""
            return a
    ''',
}

NEW = {
    "pkg/__init__.py": '''
        from pkg._impl import scale, rename_me, blend, _hidden, terse, undocumented
        from pkg._impl import copied_one, copied_two, copied_three
        from pkg.helpers import moved
        from pkg.extras import deprecated_thing, old_api
        from pkg.vendor.lib import vendored_func
        __all__ = ["scale", "moved", "rename_me", "blend", "terse", "undocumented", "deprecated_thing",
                   "old_api", "vendored_func", "copied_one", "copied_two", "copied_three"]
    ''',
    "pkg/_impl.py": '''
        import warnings

        def _weights(n):
            return [1 / n] * n

        def scale(values, offset, factor=2):
            """Multiply every value by a factor, add an offset, and return the new list."""
            return [v * factor + offset for v in values]

        def rename_me(values, by):
            """Sort the values by the given key function and return them as a list."""
            return sorted(values, key=by)

        def blend(first, second, *, ratio=0.5):
            """Blend two sequences element by element.

            Args:
                first: The values weighted by ``ratio``.
                second (list[float]): The values weighted by ``1 - ratio``.
                ratio: Weight of ``first``, between 0 and 1.

            Returns:
                list[float]: The blended values.

            Examples:
                >>> blend([0, 10], [10, 0])
                [5.0, 5.0]
            """
            w = _weights(2)
            return [ratio * a + (1 - ratio) * b + 0 * w[0] for a, b in zip(first, second)]

        def _hidden():
            """A private helper that is documented with more than enough words here."""

        def terse(x):
            """Does x."""
            return x

        def undocumented(x):
            return x

        def copied_one(x):
            """Apply the operation described in the module documentation to x."""

        def copied_two(x):
            """Apply the operation described in the module documentation to x."""

        def copied_three(x):
            """Apply the operation described in the module documentation to x."""
    ''',
    "pkg/helpers.py": '''
        def moved(x):
            """Return the value x unchanged, for use as a default callback in pipelines."""
            return x
    ''',
    "pkg/extras.py": '''
        import warnings

        def deprecated_thing(a, b=None):
            """Compute something old that nobody should still be calling today."""
            warnings.warn("use blend", DeprecationWarning)
            return a

        def old_api(a):
            """Compute something. .. deprecated:: 2.0 use blend instead of this function."""
            return a
    ''',
    "pkg/sub/__init__.py": '''
        from pkg.sub._core import widen
        __all__ = [name for name in dir() if not name.startswith("_")]  # only known at import time
    ''',
    "pkg/sub/_core.py": '''
        def widen(values, by=1):
            """Return the values with every interval widened by the given amount on each side."""
            return values
    ''',
    "pkg/vendor/__init__.py": "",
    "pkg/vendor/lib.py": '''
        def vendored_func(a):
            """A function copied from another project, with a long enough docstring."""
            return a
    ''',
    "pkg/testing.py": '''
        def check_close(a, b):
            """Assert that two sequences of numbers are equal within a small tolerance."""
    ''',
    "pkg/tests/__init__.py": "",
    "pkg/tests/test_pkg.py": '''
        def test_blend():
            """Check that blend mixes two sequences element by element as documented."""
    ''',
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    old = _write(tmp_path_factory.mktemp("old"), OLD)
    new = _write(tmp_path_factory.mktemp("new"), NEW)
    return load_surface(old, find_packages(old, "pkg")), load_surface(new, find_packages(new, "pkg"))


def _by_api(records: list[dict]) -> dict[str, dict]:
    return {r["api"]: r for r in records}


def test_the_diff_sorts_added_modified_and_relocated_apis(surfaces: tuple) -> None:
    old, new = surfaces
    diff = diff_surfaces(old, new)
    records = _by_api(diff["candidates"])
    assert records["pkg.blend"]["change"] == "added"
    scale = records["pkg.scale"]
    assert scale["change"] == "modified"
    assert {"change": "added", "parameter": "offset", "required": True} in scale["changes"]
    assert {"change": "default", "parameter": "factor", "old": "1", "new": "2"} in scale["changes"]
    assert records["pkg.rename_me"]["changes"][0] == {"change": "renamed", "old": "key", "new": "by"}
    # defined elsewhere now, still exported as pkg.moved: a relocation, not a new API
    assert "pkg.moved" not in records
    assert {"api": "pkg.moved", "kind": "moved", "old": "pkg._impl.moved", "new": "pkg.helpers.moved"} \
        in diff["relocated"]
    assert diff["removed"] == []


def test_every_dropped_api_has_the_reason_of_the_first_failing_filter(surfaces: tuple) -> None:
    old, new = surfaces
    records = _by_api(filter_candidates(diff_surfaces(old, new)["candidates"], new, DiscoverOptions()))
    dropped = {api: r["dropped_by"] for api, r in records.items()}
    assert dropped["pkg._impl._hidden"] == "private"
    assert dropped["pkg._impl._weights"] == "private"
    assert dropped["pkg.deprecated_thing"] == "deprecated"   # warns DeprecationWarning
    assert dropped["pkg.old_api"] == "deprecated"            # `.. deprecated::` in the docstring
    assert dropped["pkg.vendored_func"] == "vendored-module"
    assert dropped["pkg.testing.check_close"] == "test-module"
    # a test suite is not API: never parsed, so never a candidate
    assert "pkg.tests.test_pkg.test_blend" not in records
    assert new.skipped_modules == ["pkg.tests", "pkg.tests.test_pkg"]
    assert dropped["pkg.undocumented"] == "no-docstring"
    assert dropped["pkg.terse"] == "thin-docstring"
    assert {dropped[f"pkg.copied_{n}"] for n in ("one", "two", "three")} == {"boilerplate-docstring"}
    # pkg/sub/__init__.py's __all__ is built at import time: what it imports is re-exported
    assert sorted(api for api, reason in dropped.items() if reason is None) == \
        ["pkg.blend", "pkg.rename_me", "pkg.scale", "pkg.sub.widen"]
    private = records["pkg._impl._hidden"]["stages"]
    assert private[0] == {"stage": "diff", "result": "added", "detail": "new in this release"}
    assert private[1]["check"] == "private" and private[1]["passed"] is False


def test_the_cap_keeps_added_apis_before_modified_ones(surfaces: tuple) -> None:
    old, new = surfaces
    records = filter_candidates(diff_surfaces(old, new)["candidates"], new, DiscoverOptions(max_apis=1))
    assert [r["api"] for r in records if r["kept"]] == ["pkg.blend"]
    capped = _by_api(records)["pkg.scale"]
    assert capped["dropped_by"] == "cap"
    assert capped["stages"][-1]["reason"] == "rank 4 beyond --max-apis 1"


def test_bundle_parts_come_from_the_docstring_and_the_source(surfaces: tuple) -> None:
    _, new = surfaces
    blend = new.objects["pkg._impl.blend"]
    parsed = parse_docstring(blend.docstring)
    assert parsed.params["second"] == {"description": "The values weighted by ``1 - ratio``.",
                                       "type": "list[float]"}
    assert parsed.returns == ("list[float]", "The blended values.")
    assert parsed.examples == [">>> blend([0, 10], [10, 0])\n[5.0, 5.0]"]
    # shown on its own, a doctest needs the import its module's namespace gave it
    assert with_imports("blend([0, 10], [10, 0])", blend, "pkg.blend", new) == \
        "from pkg import blend\n\nblend([0, 10], [10, 0])"
    source, helpers = implementation(blend, new)
    assert '"""' not in source and "Blend two sequences" not in source
    assert helpers == ["pkg._impl._weights"]
    assert source.endswith("# --- helper: pkg._impl._weights ---\ndef _weights(n):\n    return [1 / n] * n")
    alone, none = implementation(blend, new, limit=200)  # room for the definition, not its helper
    assert alone.startswith("def blend(") and "helper" not in alone and none == []
    cut, none = implementation(blend, new, limit=80)
    assert cut == "def blend(first, second, *, ratio=0.5):\n    w = _weights(2)\n# ... (cut at the size cap)"


def test_the_docstring_mechanism_is_prose_then_what_changed(surfaces: tuple) -> None:
    _, new = surfaces
    parsed = parse_docstring("Join mappings by key.\n\n    >>> join({'a': 1})\n    {'a': {'x': 1}}\n\n"
                             "Values of later mappings win.\n\n* **first** - the first mapping\n")
    record = {"change": "modified", "library": "pkg", "new_version": "2", "old_version": "1",
              "changes": [{"change": "renamed", "old": "key", "new": "by"}]}
    assert docstring_mechanism(new.objects["pkg._impl.blend"], parsed, record) == (
        "Join mappings by key.\n\nValues of later mappings win.\n\n"
        "Changed in pkg 2 (since 1): parameter `key` renamed to `by`.")


def test_a_docstrings_doctest_blocks_make_one_example_as_doctest_runs_them() -> None:
    parsed = parse_docstring("Fit.\n\nExamples\n--------\n>>> x = [1, 2]\n\nThen use it:\n\n>>> len(x)\n2\n")
    assert docstring_examples(parsed) == ["x = [1, 2]\nlen(x)"]


def test_bullet_parameter_lists_and_continuation_lines_are_read() -> None:
    parsed = parse_docstring("Sends a request.\n\n**Parameters:**\n\n* **method** - HTTP method for the new\n"
                             "  `Request` object.\n* **url** - URL for the request.\n")
    assert parsed.params["method"]["description"] == "HTTP method for the new `Request` object."
    assert parsed.params["url"]["description"] == "URL for the request."


# ----------------------------------------------------------------- real releases (network)

@pytest.mark.slow
def test_a_cutoff_resolves_the_releases_around_it_from_upload_times(tmp_path: Path, shared_data) -> None:
    manifest = json.loads((shared_data("anchors/novelapibench") / "data/benchmark/manifest.json").read_text())
    httpx = manifest["libraries"]["httpx"]
    boundary = manifest["release_boundary"]
    # The old release is the release's own for the same boundary; the new one is the newest
    # uploaded since, which moves as the library publishes (the release took the newest then).
    resolved = resolve_versions("httpx", None, None, boundary)
    assert resolved["old"] == httpx["old_version"]
    assert _numbers(resolved["new"]) >= _numbers(httpx["new_version"]) and resolved["uploaded"]["new"] >= boundary
    # Compared with the release's own new version, the APIs it names are found as it found them.
    done = run_knowbench("novel", "discover", "httpx", "--cutoff", boundary, "--new", httpx["new_version"],
                         "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "discover_report.json").read_text())
    assert (report["versions"]["old"], report["versions"]["new"]) == (httpx["old_version"], httpx["new_version"])
    records = {json.loads(line)["api"]: json.loads(line)
               for line in (tmp_path / "candidates.jsonl").read_text().splitlines()}
    for api in ("httpx.put", "httpx.request"):  # the release's two httpx bundles: modified APIs
        assert records[api]["change"] == "modified" and records[api]["kept"], records[api]
        assert {"change": "renamed", "old": "proxies", "new": "proxy"} in records[api]["changes"]
    assert sum(report["dropped"].values()) + report["counts"]["kept"] == \
        report["counts"]["added"] + report["counts"]["modified"]


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.slow
def test_unknown_versions_and_dates_are_user_errors(tmp_path: Path) -> None:
    done = run_knowbench("novel", "discover", "httpx", "--old", "0.0.0", "--new", "0.28.1", "--out", str(tmp_path))
    assert done.returncode == 2 and "has no release '0.0.0'" in done.stderr and "Traceback" not in done.stderr
    done = run_knowbench("novel", "discover", "httpx", "--cutoff", "last year", "--out", str(tmp_path))
    assert done.returncode == 2 and "is not a date" in done.stderr


@pytest.mark.slow
def test_bundles_execute_examples_and_a_model_writes_the_mechanism(tmp_path: Path) -> None:
    from openai_server import ScriptedOpenAIServer, last_user_message

    done = run_knowbench("novel", "discover", "more-itertools", "--old", "10.2.0", "--new", "10.3.0",
                         "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    kept = [json.loads(line)["api"] for line in (tmp_path / "candidates.jsonl").read_text().splitlines()
            if json.loads(line)["kept"]]
    assert "more_itertools.join_mappings" in kept
    reply = "It groups the values of several mappings by key."
    with ScriptedOpenAIServer(responder=lambda body: reply if "join_mappings" in last_user_message(body)
                              else "Other.") as server:
        done = run_knowbench("novel", "bundles", str(tmp_path), "--api", "more_itertools.join_mappings",
                             "--llm", "m", "--base-url", server.base_url)
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "bundles.jsonl").read_text().splitlines()]
    assert record["mechanism"]["text"] == reply and record["mechanism"]["grounding"] == "source"
    assert record["examples"][0]["status"] == "executed", record["examples"]
    assert "from more_itertools import join_mappings" in record["examples"][0]["code"]
    assert [(p["name"], p["default"]) for p in record["s_param"]] == [("**field_to_map", None)]

    # the release's reader takes knowbench's records as they are
    from knowbench.builders.novelapibench import read_bundles
    bundles, bad = read_bundles(tmp_path / "bundles.jsonl")
    assert bad == [] and bundles["more_itertools.join_mappings"].examples[0].status == "passed"


@pytest.mark.slow
def test_httpx_bundles_match_the_releases_field_by_field(tmp_path: Path, shared_data) -> None:
    from knowbench.builders.novel.bundles import BundleOptions, build_bundles
    from knowbench.builders.novel.discover import discover

    release = shared_data("anchors/novelapibench") / "data/benchmark"
    theirs = {json.loads(line)["api_name"]: json.loads(line)
              for line in (release / "bundles.jsonl").read_text().splitlines()}
    boundary = json.loads((release / "manifest.json").read_text())["release_boundary"]
    discover("httpx", tmp_path, DiscoverOptions(cutoff=boundary))
    build_bundles(tmp_path, tmp_path, BundleOptions(apis=sorted(theirs), keep_without_examples=True))
    ours = {json.loads(line)["api_name"]: json.loads(line)
            for line in (tmp_path / "bundles.jsonl").read_text().splitlines()}
    for api, record in theirs.items():
        mine = ours[api]
        for key in ("s_name", "return_type", "is_modified", "implementation"):
            assert mine[key] == record[key], (api, key)
        for field in ("name", "type", "default"):  # defaults resolved from constants: Timeout(timeout=5.0)
            assert [p[field] for p in mine["s_param"]] == [p[field] for p in record["s_param"]], (api, field)
        assert all(p["description"] for p in mine["s_param"])  # httpx.put's lent from httpx.request
        assert [p["name"] for p in mine["old_parameters"]] == [p["name"] for p in record["old_parameters"]]
    assert ours["httpx.put"]["provenance"]["descriptions_from"] == ["httpx.request"]
    # the README's httpx.request example calls httpbin.org: the sandbox has no network, so it
    # is static (unverifiable here), not failed; a test taking the `server` fixture is not run
    (readme,) = ours["httpx.request"]["examples"]
    assert "httpbin.org" in readme["code"]
    assert (readme["status"], readme["reason"]) == ("static", "needs the network, which the sandbox does not have")
    assert [(e["status"], e["reason"]) for e in ours["httpx.put"]["examples"]] == \
        [("static", "a test that needs pytest fixtures")]
