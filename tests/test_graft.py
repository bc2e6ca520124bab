"""`knowbench_graft`: the program's target takes the original's place in the installed module
it was cut from. Run end to end (mined task, sandbox, both isolations) in
test_builders_mine.py; here each rule on a real package imported from a temporary directory."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowbench.execution.engine import RUNNER_DIR

sys.path.insert(0, str(Path(RUNNER_DIR)))
import knowbench_graft

PACKAGE = {
    "__init__.py": "from .core import Bag, shout\nfrom .util import loud_pair\n",
    "core.py": '''
        class Base:
            def put(self, key, value):
                self.items[key] = value


        class Bag(Base):
            __marker = object()

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


        class CountingBag(Bag):
            def add(self, key, value):
                super().add(key, value)
                self.count = getattr(self, "count", 0) + 1


        def shout(text):
            return text.upper()
    ''',
    "util.py": '''
        from .core import shout


        def loud_pair(a, b):
            return shout(a) + shout(b)
    ''',
}

# The program: a cut of core.py, with the candidate's versions of the targets.
PROGRAM = '''
from graftpkg.core import Base


class Bag(Base):
    __marker = object()

    def __init__(self):
        self.items = {}

    def add(self, key, value):
        super().put(key, self.items.get(key, 0) + 2 * value)

    def pop(self, key, default=__marker):
        if key in self.items:
            return self.items.pop(key)
        if default is self.__marker:
            raise KeyError(key)
        return default


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
        knowbench_graft.GRAFTED.clear()


def _program() -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "solution"}
    exec(compile(PROGRAM, "solution.py", "exec"), namespace)
    return namespace


def test_a_function_is_replaced_wherever_the_library_binds_it(package: None) -> None:
    import graftpkg

    assert graftpkg.loud_pair("a", "b") == "AB"
    assert knowbench_graft.graft(_program(), "shout", "graftpkg.core") == 3  # core, util, the package
    assert graftpkg.loud_pair("a", "b") == "A!B!"
    assert graftpkg.shout("c") == "C!"


def test_a_method_runs_for_the_librarys_own_subclass_with_its_super_and_defaults(package: None) -> None:
    from graftpkg.core import CountingBag

    namespace = _program()
    assert knowbench_graft.graft(namespace, "Bag.add", "graftpkg.core") == 1
    bag = CountingBag()  # made by the library's class, not the program's
    bag.add("x", 1)  # super().add -> the program's add, whose own super() looks past Bag
    assert bag.items == {"x": 2} and bag.count == 1
    assert knowbench_graft.GRAFTED["Bag.add"] is vars(sys.modules["graftpkg.core"].Bag)["add"]

    # `default=__marker` was the program's class's marker: grafted, it is the installed class's,
    # which `self.__marker` reads on the library's objects
    assert knowbench_graft.graft(namespace, "Bag.pop", "graftpkg.core") == 1
    with pytest.raises(KeyError):
        bag.pop("missing")
    assert bag.pop("missing", None) is None and bag.pop("x") == 2


def test_nothing_is_grafted_where_the_installed_module_has_no_such_target(package: None) -> None:
    namespace = _program()
    namespace["whisper"] = lambda text: text.lower()
    assert knowbench_graft.graft(namespace, "whisper", "graftpkg.core") == 0
    assert knowbench_graft.graft(namespace, "Bag.nothing", "graftpkg.core") == 0
    with pytest.raises(ModuleNotFoundError):
        knowbench_graft.graft(namespace, "shout", "graftpkg.missing")
