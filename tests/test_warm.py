"""A fork server warms up the libraries it preloaded (`knowbench_warm`) before forking: the
warm-ups must run on the releases installed, keep none of their objects, change no option
and import no package the server had not imported, and a sample must find nothing of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from textwrap import dedent

import pytest

from helpers import make_request
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox

# What a benchmark's imports make a server preload, per warm-up (`WARM_UPS`' keys).
LIBRARIES = {"pandas": "pandas", "sympy": "sympy", "matplotlib.figure": "matplotlib.pyplot"}

# Run in a fresh interpreter with the library imported: everything a warm-up could leave
# behind, before and after it (`MARK` labels every object a warm-up makes).
PROBE = dedent('''
    import gc, importlib, json, sys, warnings
    import knowbench_warm

    library, preload, strict = sys.argv[1], sys.argv[2], sys.argv[3] == "strict"
    importlib.import_module(preload)
    MARK = knowbench_warm._MARK

    def marked(obj):
        """An object a warm-up made: a pandas object, sympy expression or matplotlib artist
        that carries the warm-up's mark."""
        module = type(obj).__module__
        package = module.partition(".")[0] if isinstance(module, str) else ""  # (pandas' classes say "pandas")
        try:
            if package == "pandas":
                labels = []
                for name in ("columns", "index"):
                    labels += [str(v) for v in getattr(obj, name, [])][:50]
                labels.append(str(getattr(obj, "name", "")))
                return any(MARK in label for label in labels)
            if package == "sympy":
                return MARK in str(obj)
            if package == "matplotlib":
                if type(obj).__name__ == "Figure":
                    return True  # nothing in this process made a figure
                return any(MARK in str(getattr(obj, attr, lambda: "")())
                           for attr in ("get_label", "get_text"))
        except Exception:
            return False
        return False

    def state():
        out = {"filters": repr(warnings.filters)}
        if "pandas" in sys.modules:
            import pandas
            options = pandas._config.config._registered_options
            with warnings.catch_warnings():  # (reading a deprecated option warns)
                warnings.simplefilter("ignore")
                out["pandas"] = repr({key: pandas.get_option(key) for key in sorted(options)})
        if "matplotlib" in sys.modules:
            import matplotlib
            out["rc"] = repr(sorted(matplotlib.rcParams.items()))
        if "numpy" in sys.modules:
            import numpy
            out["random"] = repr(numpy.random.get_state(legacy=False))
            out["errstate"] = repr(numpy.geterr())
        if "matplotlib.pyplot" in sys.modules:
            out["figures"] = repr(sys.modules["matplotlib.pyplot"].get_fignums())
        return out

    gc.collect()
    before, packages = state(), {name.partition(".")[0] for name in sys.modules}
    warmed = knowbench_warm.warm_up(strict=strict)
    new_packages = sorted({name.partition(".")[0] for name in sys.modules} - packages)
    gc.collect()
    after = state()
    kept = [repr(obj)[:80] for obj in gc.get_objects() if marked(obj)]

    # Objects without the mark: run it again, and look for objects of the library (or numpy)
    # alive after it that were not before it. The first run legitimately left the modules it
    # imported and the caches it filled; a second run finds them made, and must leave nothing.
    # (Mappings aside: sympy computes an existing number's assumptions again into a new one.)
    def library_objects():
        gc.collect()
        return {id(obj): obj for obj in gc.get_objects()
                if isinstance(type(obj).__module__, str) and not isinstance(obj, dict)
                and type(obj).__module__.partition(".")[0] in (library.partition(".")[0], "numpy")}

    alive = library_objects()  # (held here, so that no id is reused by a new object)
    knowbench_warm.warm_up(strict=strict)
    again = [repr(obj)[:80] for key, obj in library_objects().items() if key not in alive]
    print(json.dumps({
        "warmed": warmed,
        "changed": [key for key in before if before[key] != after[key]],
        "kept": kept + again,
        "new_packages": new_packages,
    }))
''')


def _probe(library: str, strict: bool = True) -> dict:
    pytest.importorskip(LIBRARIES[library])
    done = subprocess.run([sys.executable, "-c", PROBE, library, LIBRARIES[library], "strict" if strict else "lax"],
                          capture_output=True, text=True, cwd=RUNNER_DIR, timeout=300,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_a_warm_up_runs_on_the_installed_release_and_leaves_nothing_behind(library: str) -> None:
    """Strict: every step runs (a renamed call in a new release fails here, not only quietly
    in the server). Nothing the warm-up made stays alive, no option or global state moved, and
    it imported submodules of packages already loaded, no new package."""
    result = _probe(library)
    assert result["warmed"] == [library]
    assert result["kept"] == []
    assert result["changed"] == []
    assert result["new_packages"] == []


def test_a_warm_up_runs_only_for_a_library_the_server_imported() -> None:
    probe = "import sys, knowbench_warm\nprint(knowbench_warm.warm_up(strict=True), sorted(knowbench_warm.WARM_UPS))\n" \
            "print([name for name in knowbench_warm.WARM_UPS if name in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=RUNNER_DIR, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    warmed, loaded = done.stdout.strip().splitlines()
    assert warmed == f"[] {sorted(LIBRARIES)}" and loaded == "[]"


def test_a_warm_up_starts_no_step_once_its_time_is_spent() -> None:
    """A release that makes the steps slow delays a server's start by about the budget: the
    library whose warm-up was cut short is not reported warmed, and none after it runs."""
    probe = dedent("""
        import json, sys, time
        import knowbench_warm

        ran = []

        def slow(module):
            for _ in range(10):
                yield lambda: (ran.append(module.__name__), time.sleep(0.05))

        knowbench_warm.WARM_UPS = {"json": slow, "sys": slow}
        print(knowbench_warm.warm_up(strict=True, budget_s=0.12), len(ran))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=RUNNER_DIR, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    warmed, ran = done.stdout.rsplit(maxsplit=1)
    assert warmed == "[]" and 1 <= int(ran) <= 3, done.stdout


@pytest.fixture(scope="module")
def pandas_server(best_sandbox: Sandbox) -> Iterator[ForkServerEngine]:
    pytest.importorskip("pandas")
    engine = ForkServerEngine(best_sandbox, workers=1, preload=["pandas", "unittest"])
    yield engine
    engine.close()


@pytest.mark.slow
def test_a_fork_server_warms_up_what_it_preloaded_and_a_sample_finds_none_of_it(
        pandas_server: ForkServerEngine, best_sandbox: Sandbox) -> None:
    """The servers that preload pandas warm it up; one that does not warms up nothing. A
    sample's processes, copies of their servers, find no object of the warm-up (everything the
    server froze included) and pandas' options as a fresh import has them. Split, since an
    in-process sample may not list the objects of its process."""
    program = dedent('''
        import gc
        import pandas as pd

        gc.unfreeze()  # what the server froze before forking: all of its objects
        KEPT = [type(obj).__name__ for obj in gc.get_objects()
                if isinstance(obj, (pd.DataFrame, pd.Series, pd.Index))
                and any("knowbench_warm" in str(label)
                        for label in [getattr(obj, "name", "")] + list(getattr(obj, "columns", [])))]


        def totals(rows):
            assert not KEPT, KEPT[:5]
            assert pd.get_option("display.max_rows") == 60
            frame = pd.DataFrame(rows)
            return {key: int(value) for key, value in frame.groupby("key")["value"].sum().items()}
    ''')
    tests = dedent('''
        import pandas as pd


        def test_totals():
            assert pd.get_option("display.max_rows") == 60
            assert totals([{"key": "a", "value": 1}, {"key": "b", "value": 2}, {"key": "a", "value": 3}]) == {"a": 4, "b": 2}
    ''')
    execution = pandas_server.execute(make_request(program, tests, "totals", isolation="split"))
    assert execution.status == "pass", execution.tests[0].message
    assert execution.isolation == "split"
    assert [server.warmed for server in (*pandas_server._servers, *pandas_server._candidates)] == [("pandas",)] * 2
    wrong = pandas_server.execute(make_request(program.replace(".sum()", ".max()"), tests, "totals", isolation="split"))
    assert wrong.status == "fail" and "totals(" in wrong.tests[0].message

    bare = ForkServerEngine(best_sandbox, workers=1, preload=["json"])
    try:
        assert bare.execute(make_request("def add(a, b):\n    return a + b\n",
                                         "def test_add():\n    assert add(2, 3) == 5\n", "add")).status == "pass"
        assert bare._servers[0].warmed == ()
    finally:
        bare.close()
