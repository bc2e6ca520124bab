"""Which libraries an imported benchmark needs, and at which versions: only imports that
execute count, versions come from overrides, recorded pins or the date rule (real uv, real
package index), and a library is available only when it really imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from knowbench.builders.domaineval import not_importable
from knowbench.builders.repository import bound_names, top_level_statements
from knowbench.builders.requirements import imported_modules
from knowbench.builders.versions import Resolver, choose_versions, read_pins
from knowbench.errors import UserError
from knowbench.execution.environments import ensure_env

DATE = "2024-07-11"


def test_imports_in_branches_that_never_run_are_not_requirements() -> None:
    code = (
        "import sys\nfrom typing import TYPE_CHECKING\nfrom compat import PY3\n"
        "ON_PY2 = sys.version_info[0] == 2\n"
        "if TYPE_CHECKING:\n    import typecheck_only\n"
        "if False:\n    import never\n"
        "if sys.version_info < (3, 0):\n    import py2_only\nelse:\n    import on_this_python\n"
        "if sys.version_info >= (3, 8):\n    import newer_than_38\n"
        "if ON_PY2:\n    import flagged_py2\n"
        "def f():\n    if PY3:\n        return 1\n    else:\n        import __builtin__\n"
        "if sys.platform == 'definitely-not-this':\n    import other_platform\n"
        "import os\nif hasattr(os, 'definitely_missing'):\n    import no_such_attribute\n"
        "try:\n    import optional\nexcept ImportError:\n    optional = None\n"
        "import always\n"
    )
    assert imported_modules(code, required_only=True) == {
        "sys", "typing", "compat", "on_this_python", "newer_than_38", "os", "always"}
    assert {"never", "py2_only", "__builtin__", "optional"} <= imported_modules(code)


def test_a_name_an_import_rebinds_is_not_a_constant_and_odd_tests_are_not_known() -> None:
    """`yaml = None` then `try: import yaml`: `if yaml:` is not known dead, so what it imports
    is a requirement and what it defines is the module's; a test Python itself refuses
    (`sys.version_info[::0]`) is not known either, and reading the module does not fail."""
    code = ("import sys\nyaml = None\ntry:\n    import yaml\nexcept ImportError:\n    pass\n"
            "if yaml:\n    import yaml_helpers\n    def load(s):\n        return yaml.safe_load(s)\n"
            "HAS_SPEEDUPS = False\nfrom ._speedups import HAS_SPEEDUPS\nif HAS_SPEEDUPS:\n    def fast():\n        pass\n"
            "if sys.version_info[::0]:\n    def odd():\n        pass\n")
    assert "yaml_helpers" in imported_modules(code, required_only=True)
    tree = ast.parse(code)
    assert {"load", "fast", "odd"} <= {name for statement in top_level_statements(tree)
                                       for name in bound_names(statement)}


def test_modules_the_code_writes_itself_are_not_requirements() -> None:
    code = (
        "import os, sys, types\n"
        "def test_reload(tmp_path):\n"
        "    (tmp_path / 'A.py').write_text('ok = True')\n"
        "    with open(os.path.join(str(tmp_path), 'B.py'), 'w') as f:\n        f.write('import A')\n"
        "    (tmp_path / 'pkg' / '__init__.py').write_text('')\n"
        "    open(os.path.join(str(tmp_path), 'other', '__init__.py'), 'w').close()\n"
        "    sys.modules['injected'] = types.ModuleType('injected')\n"
        "    sys.path.insert(0, str(tmp_path))\n"
        "    import A, B, pkg.sub, other, injected, numpy\n"
    )
    assert imported_modules(code, required_only=True) == {"os", "sys", "types", "numpy"}


def test_a_pin_file_with_a_bad_line_is_refused_with_its_line(tmp_path: Path) -> None:
    pins = tmp_path / "versions.txt"
    pins.write_text("# overrides\nyaml==6.0\nnumpy\nthis is not a pin\n")
    with pytest.raises(UserError, match=r"versions.txt:4: 'this is not a pin'"):
        read_pins(pins, "--versions")
    pins.write_text("yaml==6.0\n  Pandas == 2.0.3  \nnumpy\n-r other.txt\n")
    assert read_pins(pins, "--versions") == {"yaml": "6.0", "pandas": "2.0.3", "numpy": None}
    with pytest.raises(UserError, match="no such file"):
        read_pins(tmp_path / "absent.txt", "--versions")


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver(python="3.11", date=DATE)


def test_the_date_rule_takes_the_last_release_before_the_date(resolver: Resolver) -> None:
    # PyYAML 6.0.2 came out on 2024-08-06, after the date: 6.0.1 is the last before it
    result = choose_versions({"yaml": {"yaml"}}, resolver=resolver)
    choice = result.choices["yaml"]
    assert (choice.distribution, choice.how, choice.source, choice.version) == ("PyYAML", "table", "date rule",
                                                                                 "6.0.1")
    assert "pyyaml==6.0.1" in [line.lower() for line in result.lock]


def test_an_unknown_import_name_is_looked_up_not_dropped(resolver: Resolver) -> None:
    result = choose_versions({"wordninja": {"wordninja"}, "no_such_module_kb": {"no_such_module_kb"}},
                             resolver=resolver)
    assert result.choices["wordninja"].distribution == "wordninja"
    assert result.choices["wordninja"].how == "import name"
    assert "no_such_module_kb" in result.refused
    assert "python-no-such-module-kb" in result.refused["no_such_module_kb"] or \
        "python-no_such_module_kb" in result.refused["no_such_module_kb"]


def test_recorded_pins_are_used_where_they_install_and_their_series_where_not(resolver: Resolver) -> None:
    recorded = {"rsa": "4.8", "numpy": "1.21.5"}  # numpy 1.21.5 has no wheel for Python 3.11
    result = choose_versions({"rsa": {"rsa"}, "numpy": {"numpy"}}, recorded=recorded, resolver=resolver)
    assert (result.choices["rsa"].source, result.choices["rsa"].version) == ("recorded", "4.8")
    numpy = result.choices["numpy"]
    assert numpy.source == "recorded series" and numpy.version == "1.26.4"
    assert "numpy==1.21.5 does not install" in numpy.note


def test_overrides_win_by_import_name_or_distribution(resolver: Resolver) -> None:
    result = choose_versions({"yaml": {"yaml"}, "rsa": {"rsa"}},
                             overrides={"yaml": "6.0", "rsa": "4.7.2", "pyasn1": "0.5.1", "not-imported": None},
                             recorded={"rsa": "4.8"}, resolver=resolver)
    assert result.unused_overrides == ["not-imported"]
    assert result.extra_pins == ["pyasn1==0.5.1"] and "pyasn1==0.5.1" in result.lock  # rsa's dependency
    assert (result.choices["yaml"].distribution, result.choices["yaml"].version) == ("PyYAML", "6.0")
    assert (result.choices["rsa"].source, result.choices["rsa"].version) == ("override", "4.7.2")


def test_a_conflict_names_both_sides(resolver: Resolver) -> None:
    # requests 2.31.0 needs urllib3>=1.21.1: the override of urllib3 cannot hold beside it
    result = choose_versions({"requests": {"requests"}, "urllib3": {"urllib3"}},
                             overrides={"requests": "2.31.0", "urllib3": "1.20"}, resolver=resolver)
    assert result.conflicts
    why = result.refused["urllib3"]
    assert "urllib3==1.20" in why and "requests==2.31.0" in why
    assert "requests==2.31.0" in result.lock


def test_a_library_is_available_only_when_it_imports() -> None:
    env = ensure_env(["rsa==4.9"])
    failures = not_importable(env, {"rsa": {"rsa", "rsa.no_such_part"}, "absent_kb": {"absent_kb"},
                                    "json": {"json"}})
    assert set(failures) == {"rsa.no_such_part", "absent_kb"}
    assert "ModuleNotFoundError" in failures["absent_kb"]
