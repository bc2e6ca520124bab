"""The runner's integrity check reads dict version tags (PEP 509) where the interpreter keeps
them: one field per watched namespace instead of every value in it. These tests run the
runner's own functions in a fresh interpreter (so that patching builtins and unittest there
cannot disturb the test process) and check that the shortcut never hides a change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import knowbench.execution.forkserver as forkserver_module

RUNNER_DIR = Path(forkserver_module.__file__).parent / "sandboxed"
TAGGED = sys.implementation.name == "cpython" and sys.version_info < (3, 14)


def run_script(body: str) -> dict:
    script = f"import sys, json\nsys.path.insert(0, {str(RUNNER_DIR)!r})\nimport knowbench_runner as r\n{body}"
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not TAGGED, reason="dict version tags exist on CPython 3.6 to 3.13 only")
def test_this_interpreter_uses_version_tags() -> None:
    found = run_script(
        "import unittest\n"
        "snap = r._snapshot()\n"
        "ident = r._runner_identity(vars(r))\n"
        "print(json.dumps({'probe': r._probe_versions(), 'watched': len(snap[5][1]) if snap[5] else 0,"
        " 'scopes': len(snap[1]), 'runner': ident[3] is not None}))\n")
    assert found["probe"] is True
    assert found["watched"] == found["scopes"] > 10  # every watched namespace has its tag
    assert found["runner"] is True


CHANGES = {
    "a builtin rebound": ("import builtins; saved = builtins.len; builtins.len = lambda x: 0",
                          "builtins.len = saved", "builtins.len was replaced"),
    "a method set on a class": ("import unittest; saved = unittest.TestCase.assertEqual; "
                                "unittest.TestCase.assertEqual = lambda *a, **k: None",
                                "unittest.TestCase.assertEqual = saved",
                                "unittest.case.TestCase.assertEqual was replaced"),
    "a name deleted": ("import unittest.case as c; saved = c.TestCase.assertTrue; del c.TestCase.assertTrue",
                       "c.TestCase.assertTrue = saved", "unittest.case.TestCase.assertTrue was deleted"),
    "a module attribute rebound": ("import unittest.case as c; saved = c.SkipTest; c.SkipTest = Exception",
                                   "c.SkipTest = saved", "unittest.case.SkipTest was replaced"),
    "a name added to a class": ("import unittest; unittest.TestCase.__getattribute__ = lambda self, name: None",
                                "del unittest.TestCase.__getattribute__",
                                "unittest.case.TestCase.__getattribute__ was added"),
    "a builtin hidden in a module": ("import unittest.case as c; c.isinstance = lambda obj, kind: True",
                                     "del c.isinstance", "unittest.case.isinstance was added"),
    "what a function wraps": ("import unittest; cell = unittest.TestCase.subTest.__closure__[0]; "
                              "saved = cell.cell_contents; cell.cell_contents = lambda *a, **k: None",
                              "cell.cell_contents = saved",
                              "what unittest.case.TestCase.subTest wraps (its closure) was replaced"),
    "a value class patched with it": (
        "import ctypes, unittest; saved = unittest.TestCase.assertEqual; "
        "unittest.TestCase.assertEqual = lambda *a, **k: None; "
        "ctypes.c_uint64.value = property(lambda self: 0)",
        "unittest.TestCase.assertEqual = saved", "unittest.case.TestCase.assertEqual was replaced"),
}


@pytest.mark.parametrize("tags", [True, False], ids=["tags", "no-tags"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_to_a_watched_namespace_is_seen(change: str, tags: bool) -> None:
    """Through the version tags and fields read by view, and through the comparison of
    values that interpreters without them get."""
    tamper, restore, expected = CHANGES[change]
    found = run_script(
        ("" if tags else "r._PROBED[0] = False\n") +
        "import unittest, unittest.case\n"
        "snap = r._snapshot()\n"
        "before = r._changed(snap, sys.modules)\n"
        f"{tamper}\n"
        "during = r._changed(snap, sys.modules)\n"
        f"{restore}\n"
        "print(json.dumps({'before': before, 'during': during}))\n")
    assert found == {"before": None, "during": expected}


@pytest.mark.skipif(not TAGGED, reason="dict version tags exist on CPython 3.6 to 3.13 only")
def test_unchanged_tags_mean_no_value_is_compared_and_changed_ones_mean_every_value_is() -> None:
    """With the tags unchanged the check does not look at a single value (a poisoned table of
    values is never read); a change to a watched dict that leaves every watched name bound to
    the same object (the interpreter's warnings registry) goes through the full comparison
    and is not tampering."""
    found = run_script(
        "import unittest, unittest.case as c\n"
        "snap = r._snapshot()\n"
        "class Poison:\n"
        "    def get(self, *a):\n"
        "        raise AssertionError('a value was compared')\n"
        "poisoned = snap[:3] + (tuple((Poison().get,) + kind[1:] for kind in snap[3]),) + snap[4:]\n"
        "fast = r._changed(poisoned, sys.modules)\n"
        "c.__warningregistry__ = {}\n"
        "try:\n"
        "    r._changed(poisoned, sys.modules)\n"
        "    slow = 'not compared'\n"
        "except AssertionError as error:\n"
        "    slow = str(error)\n"
        "volatile = r._changed(snap, sys.modules)\n"
        "print(json.dumps({'fast': fast, 'slow': slow, 'volatile': volatile}))\n")
    assert found == {"fast": None, "slow": "a value was compared", "volatile": None}
