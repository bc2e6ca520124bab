"""`knowbench_graft`: the program's target takes the original's place in the installed module
it was cut from. Run end to end (mined task, sandbox, both isolations) in
test_builders_mine.py; here each rule on a real package imported from a temporary directory."""

from __future__ import annotations

import sys
import textwrap
import types
import unittest.mock
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import make_request
from knowbench.execution.engine import RUNNER_DIR, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import Sandbox

sys.path.insert(0, str(Path(RUNNER_DIR)))
import knowbench_graft
import knowbench_split

PACKAGE = {
    "__init__.py": "from .core import Bag, shout\nfrom .util import loud_pair\n",
    "core.py": '''
        import functools


        def logged(method):
            @functools.wraps(method)
            def wrapper(self, *args):
                self.calls = getattr(self, "calls", 0) + 1
                return method(self, *args)
            return wrapper


        class Base:
            def put(self, key, value):
                self.items[key] = value

            def describe(self):
                return "base"


        class Bag(Base):
            __marker = object()
            registry = {"filled": "at import"}  # class-level state the library keeps

            def __init__(self):
                self.items = {}

            def add(self, key, value):
                super().put(key, self.items.get(key, 0) + value)

            def pop(self, key, default=__marker):
                if key in self.items:
                    return self.items.pop(key)
                if default is self.__marker:
                    raise KeyError(key)
                return default

            @logged
            def describe(self):
                return "bag of " + super().describe()

            def __add__(self, other):
                merged = Bag()
                merged.items = {**self.items, **other.items}
                return merged

            __radd__ = __add__

            @property
            def __name__(self):  # the class's own __name__ is the metaclass's
                return "a bag"

            class Stats:
                def size(self, bag):
                    return len(bag.items)


        class CountingBag(Bag):
            def add(self, key, value):
                super().add(key, value)
                self.count = getattr(self, "count", 0) + 1


        class FastBag(Bag):
            def add(self, key, value, bag_add=Bag.add):  # the original, held in a default
                bag_add(self, key, value)
                self.fast = True


        def make_bag():
            return Bag()


        def shout(text):
            return text.upper()


        # what else holds the original function: a default, a closure, registries
        def shout_all(texts, say=shout):
            return [say(text) for text in texts]


        def _caller():
            say = shout

            def call(text):
                return say(text)
            return call


        shout_later = _caller()
        SAYERS = {"shout": shout, "lower": str.lower}
        PIPELINE = [str.strip, shout]


        def murmur(text):
            return text.lower()


        # a wrapper that finds itself through a default of its own (as networkx's `argmap`),
        # and what keeps the original when the graft is done: a partial, a bound method
        def finds_itself(function):
            def wrapper(*args, _self=None):
                return _self.inner(*args)
            wrapper.__kwdefaults__ = {"_self": wrapper}
            wrapper.inner = function
            return wrapper


        @finds_itself
        def hush(text):
            return text.lower()


        class Loud:
            @finds_itself
            def say(self, text):
                return text.upper()


        HELD = functools.partial(hush)
        SAY = Loud().say
    ''',
    "util.py": '''
        from .core import shout


        def loud_pair(a, b):
            return shout(a) + shout(b)
    ''',
}

# The program: a cut of core.py, with the candidate's versions of the targets. The candidate
# wrote its own way: two-argument super(), the class by name, a helper method of its own.
PROGRAM = '''
from graftpkg.core import Base, logged


class Bag(Base):
    __marker = object()
    registry = {}

    def __init__(self):
        self.items = {}

    def add(self, key, value):
        super(Bag, self).put(key, self._grown(key, value))

    def _grown(self, key, value):
        return self.items.get(key, 0) + 2 * value

    def pop(self, key, default=__marker):
        if key in self.items:
            return self.items.pop(key)
        if default is self.__marker:
            raise KeyError(key)
        return default

    @logged
    def describe(self):
        return "candidate's bag of " + super().describe()

    def __add__(self, other):
        merged = Bag()
        merged.items = {**other.items, **self.items}
        return merged

    __radd__ = __add__

    @property
    def __name__(self):
        return "the candidate's bag"

    class Stats:
        def size(self, bag):
            return -len(bag.items)


def shout(text):
    return text.upper() + "!"
'''


@pytest.fixture
def package(tmp_path: Path) -> Iterator[None]:
    root = tmp_path / "graftpkg"
    root.mkdir()
    for name, text in PACKAGE.items():
        (root / name).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.partition(".")[0] == "graftpkg"]:
            del sys.modules[name]


@pytest.fixture(params=["walked", "indexed"])
def grafting(request: pytest.FixtureRequest, package: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The package loaded; "indexed": indexed first, as a warm server does before it forks the
    samples that graft into it, and then never walked (the graft must find every place the
    walk would through the index alone)."""
    if request.param == "indexed":
        import graftpkg  # noqa: F401 (with its modules core and util)
        assert knowbench_graft.index("graftpkg")

        def no_walk(top: str, wanted: object) -> None:
            raise AssertionError(f"{top} was walked, not looked up in its index")
        monkeypatch.setattr(knowbench_graft, "_places", no_walk)
    try:
        yield request.param
    finally:
        knowbench_graft._INDEXES.clear()


def _program() -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "solution"}
    exec(compile(PROGRAM, "solution.py", "exec"), namespace)
    return namespace


def test_a_function_is_replaced_wherever_the_library_binds_it(grafting: str) -> None:
    import graftpkg
    from graftpkg import core

    assert graftpkg.loud_pair("a", "b") == "AB"
    # core, util and the package bind it; a default, a closure, a dict and a list hold it
    assert knowbench_graft.graft(_program(), "shout", "graftpkg.core") == 7
    assert graftpkg.loud_pair("a", "b") == "A!B!"
    assert graftpkg.shout("c") == "C!"
    assert core.shout_all(["d"]) == ["D!"] and core.shout_later("e") == "E!"
    assert core.SAYERS["shout"]("f") == "F!" and core.PIPELINE[1]("g") == "G!"
    assert core.SAYERS["lower"] is str.lower and core.PIPELINE[0] is str.strip


def test_the_programs_class_becomes_the_installed_class(grafting: str) -> None:
    from graftpkg import core

    installed = core.Bag
    namespace = _program()
    assert knowbench_graft.graft(namespace, "Bag.add", "graftpkg.core") == 1
    assert namespace["Bag"] is installed  # `Bag(...)`, `isinstance(x, Bag)`, `super(Bag, self)` mean it
    # what the candidate's process (split) calls for the target: the method the installed class runs
    solution = types.ModuleType("solution")
    vars(solution).update(namespace)
    assert knowbench_split._target(solution, "Bag.add") is vars(installed)["add"]
    bag = core.CountingBag()  # made by the library's class, not the program's
    bag.add("x", 1)  # CountingBag's super().add -> the candidate's add, its helper method, its super(Bag, ...)
    assert bag.items == {"x": 2} and bag.count == 1
    fast = core.FastBag()  # `bag_add=Bag.add`: the default holds the candidate's add now
    fast.add("x", 1)
    assert fast.items == {"x": 2} and fast.fast
    assert isinstance(core.make_bag(), namespace["Bag"])
    # a decorated method's zero-argument super() looks past the installed class
    assert bag.describe() == "candidate's bag of base" and bag.calls == 1
    # `default=__marker` was the program's class's marker: grafted, it is the installed
    # class's, which `self.__marker` reads
    with pytest.raises(KeyError):
        bag.pop("missing")
    assert bag.pop("missing", None) is None and bag.pop("x") == 2
    # an alias of a replaced method follows it; a nested class's methods are the program's
    other = core.Bag()
    other.items = {"x": 5}
    assert vars(installed)["__radd__"] is vars(installed)["__add__"]
    assert (bag + other).items == {"x": 5}
    assert core.Bag.Stats().size(other) == 1  # the nested class was not on the way to the target
    # class-level state stays the library's, and so does what the metaclass holds
    assert installed.registry == {"filled": "at import"}
    assert installed.__name__ == "Bag" and bag.__name__ == "a bag"


def test_a_nested_class_on_the_way_to_the_target_is_grafted_too(grafting: str) -> None:
    from graftpkg import core

    assert knowbench_graft.graft(_program(), "Bag.Stats.size", "graftpkg.core") == 1
    assert core.Bag.Stats().size(core.make_bag()) == 0
    bag = core.make_bag()
    bag.items = {"a": 1}
    assert core.Bag.Stats().size(bag) == -1


def test_the_original_keeps_its_own_defaults_and_cells_for_what_still_holds_it(grafting: str) -> None:
    """What the graft leaves holding the original (a `functools.partial`, a bound method) still
    runs it, with what it holds of itself: the graft never looks into an original."""
    from graftpkg import core

    namespace: dict[str, object] = {"__name__": "solution"}
    exec("def hush(text):\n    return 'candidate'\n\n\nclass Loud:\n"
         "    def say(self, text):\n        return 'candidate'\n", namespace)
    assert knowbench_graft.graft(namespace, "hush", "graftpkg.core") == 1
    assert core.hush("A") == "candidate" and core.HELD("A") == "a"
    assert knowbench_graft.graft(namespace, "Loud.say", "graftpkg.core") == 1
    assert core.Loud().say("a") == "candidate" and core.SAY("a") == "A"


def test_a_target_rebound_before_the_graft_is_grafted_where_it_is_bound(grafting: str) -> None:
    """The installed module's own name for the target gets the candidate, whatever it held
    when the package was indexed."""
    from graftpkg import core

    core.shout = core.murmur  # (a library that rebinds a name as it runs)
    assert knowbench_graft.graft(_program(), "shout", "graftpkg.core") == 2
    assert core.shout("a") == "A!" and core.murmur("b") == "B!"


def test_a_module_loaded_after_the_index_makes_the_graft_walk(package: None, tmp_path: Path) -> None:
    """The index holds while the package's loaded modules are those it was made with: a module
    imported since (by the tests, by the program) may hold the original, and may have put it
    in a registry of a module indexed before."""
    import graftpkg
    from graftpkg import core

    assert knowbench_graft.index("graftpkg") and not knowbench_graft.index("graftpkg")  # once
    (tmp_path / "graftpkg" / "late.py").write_text(
        "from .core import SAYERS, shout\n\nLATE = [shout]\nSAYERS['late'] = shout\n")
    try:
        from graftpkg import late
        assert knowbench_graft.graft(_program(), "shout", "graftpkg.core") == 10
        assert late.LATE[0]("a") == "A!" and late.shout("b") == "B!" and core.SAYERS["late"]("c") == "C!"
        assert graftpkg.loud_pair("a", "b") == "A!B!"
    finally:
        knowbench_graft._INDEXES.clear()


def test_a_package_not_loaded_is_not_indexed() -> None:
    assert not knowbench_graft.index("graftpkg_nowhere")
    assert knowbench_graft._INDEXES.pop("graftpkg_nowhere") is None


def test_nothing_is_grafted_where_the_installed_module_has_no_such_target(package: None) -> None:
    namespace = _program()
    namespace["whisper"] = lambda text: text.lower()
    assert knowbench_graft.graft(namespace, "whisper", "graftpkg.core") == 0
    assert knowbench_graft.graft(namespace, "Bag.nothing", "graftpkg.core") == 0
    with pytest.raises(knowbench_graft.GraftFailed, match=r"graftpkg\.missing"):
        knowbench_graft.graft(namespace, "shout", "graftpkg.missing")


def test_what_is_set_on_the_installed_module_is_set_on_the_programs_names_too(package: None) -> None:
    """A test patches the module its target came from (`monkeypatch.setattr(core, ...)`,
    `mock.patch`, `cli.open = fake`): the program's functions read the program's globals, so
    the run makes each such write the program's too, and its undoing gives the program its
    own name back."""
    from graftpkg import core

    namespace = _program()
    exec("def shout_each(texts):\n    return [shout(text) for text in texts]\n", namespace)
    exec("def make_bag():\n    return 'the program own'\n", namespace)
    own_make_bag, own_base = namespace["make_bag"], namespace["Base"]
    assert knowbench_graft.graft(namespace, "shout", "graftpkg.core")
    assert knowbench_graft.follow_writes(namespace, "graftpkg.core")
    with unittest.mock.patch.object(core, "shout", lambda text: "patched"):
        assert namespace["shout_each"](["a"]) == ["patched"]
    assert namespace["shout_each"](["a"]) == ["A!"]
    # set back to what the module held: the program's own name again, not the module's value
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(core, "make_bag", None)
    monkeypatch.setattr(core, "Base", None)
    assert namespace["make_bag"] is None and namespace["Base"] is None
    monkeypatch.undo()
    assert namespace["make_bag"] is own_make_bag and core.make_bag is not own_make_bag
    assert namespace["Base"] is own_base
    # a name neither held (a builtin the target calls), set, then deleted
    core.len = lambda value: 0
    assert namespace["len"] is core.len
    del core.len
    assert "len" not in namespace
    with unittest.mock.patch("graftpkg.core.functools", "patched"):  # the program never imported it
        assert namespace["functools"] == "patched"
    assert "functools" not in namespace
    # another module of the package is not followed, nor is a write straight into the dict
    from graftpkg import util

    util.shout = None
    vars(core)["Base"] = None
    assert namespace["shout"] is not None and namespace["Base"] is own_base
    assert type(core).__name__ == "module" and isinstance(core, types.ModuleType)


def test_nothing_follows_a_module_that_is_not_loaded_or_is_the_programs_own() -> None:
    namespace = {"__name__": "solution"}
    assert not knowbench_graft.follow_writes(namespace, "graftpkg_not_loaded")
    assert not knowbench_graft.follow_writes(vars(knowbench_graft), "knowbench_graft")


SHLEX_CUT = '''\
import re

_find_unsafe = re.compile(r'[^\\w@%+=:,./-]', re.ASCII).search


def quote(s):
    if not s:
        return "''"
    if _find_unsafe(s) is None:
        return s
    return "'" + s.replace("'", "'\\"'\\"'") + "'"
'''
SHLEX_TESTS = '''\
import shlex
from unittest import mock


def test_what_the_module_finds_unsafe_decides(monkeypatch):
    monkeypatch.setattr(shlex, "_find_unsafe", lambda text: None)
    assert shlex.quote("two words") == "two words"


def test_a_space_is_quoted_once_the_patch_is_undone():
    assert shlex.quote("two words") == "'two words'"


def test_a_patch_of_a_name_the_module_lacks():
    with mock.patch("shlex.len", create=True):
        assert shlex.quote("") == "''"
'''


def test_a_run_makes_a_tests_patch_of_the_installed_module_the_programs(engine: SubprocessEngine) -> None:
    """In-process, end to end: the target, cut from `shlex`, reads the program's
    `_find_unsafe`, and the test patches `shlex._find_unsafe`. As under pytest with the
    library's own source, the patch decides; a program that ignores it fails."""
    request = make_request(SHLEX_CUT, SHLEX_TESTS, "quote").model_copy(update={"graft": "shlex"})
    result = engine.execute(request)
    assert result.status == "pass" and {o.called for o in result.tests} == {True}, result
    wrong = SHLEX_CUT.replace("if _find_unsafe(s) is None:", "if False:")
    result = engine.execute(request.model_copy(update={"program": wrong}))
    assert [o.status for o in result.tests] == ["fail", "pass", "pass"], result


# A cut of `shlex` whose target says whether its process found the package indexed, so that
# both processes of a split sample can be seen to have one.
SHLEX_QUOTE_CUT = SHLEX_CUT.replace("import re\n", "import re\nimport sys\n").replace(
    "def quote(s):\n",
    "def quote(s):\n"
    "    if not (sys.modules['knowbench_graft']._INDEXES or {}).get('shlex'):\n"
    "        return '(walked)'\n")
SHLEX_JOIN_TESTS = '''\
import shlex
import sys


def test_the_library_calls_the_grafted_target():
    assert shlex.join(["two words", "x"]) == "'two words' x"


def test_the_judges_package_is_indexed():
    assert (sys.modules["knowbench_graft"]._INDEXES or {}).get("shlex")
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_warm_server_indexes_the_grafted_package_after_its_first_sample(best_sandbox: Sandbox,
                                                                        isolation: str) -> None:
    """The fork server (each of split's two) indexes the installed module's package once its
    first grafted sample has replied, and the samples it forks after that graft through the
    index: the library's `shlex.join` calls the candidate's `quote`, right or wrong. The
    index is the server's own memory, which its cgroup's baseline takes in."""
    request = make_request(SHLEX_QUOTE_CUT, SHLEX_JOIN_TESTS, "quote", isolation=isolation) \
        .model_copy(update={"graft": "shlex"})
    engine = ForkServerEngine(best_sandbox, workers=1, preload=["shlex"])
    try:
        first = engine.execute(request)
        assert [o.status for o in first.tests] == ["fail", "fail"], first
        server = engine._servers[0]
        baseline = server.baseline
        for _ in range(2):
            result = engine.execute(request)
            assert result.isolation == isolation and [o.status for o in result.tests] == ["pass", "pass"], result
        assert server.cgroup is None or server.baseline > baseline
        wrong = request.model_copy(update={"program": SHLEX_QUOTE_CUT.replace('return s\n', 'return s + "?"\n')})
        assert [o.status for o in engine.execute(wrong).tests] == ["fail", "pass"]
    finally:
        engine.close()
