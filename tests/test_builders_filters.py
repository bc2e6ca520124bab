"""Static filters on mined targets: banned keywords (DomainEval's list, fixed), size, triviality;
and the AST mutants certification scores suites with."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from knowbench.builders.filters import (
    BANNED_KEYWORDS,
    DOMAINEVAL_BANNED,
    banned_keywords,
    size_reason,
    triviality_reason,
)
from knowbench.builders.mutants import mutants


def test_domaineval_list_is_kept_with_its_curly_quotes_fixed(shared_data: Callable[..., Path]) -> None:
    released = shared_data("anchors/domaineval/banned_keywords.txt").read_text().splitlines()
    curly = [entry for entry in released if "\u2019" in entry]
    assert len(curly) == 3  # the entries that can never match Python code
    fixed = [entry.replace("\u2019", "'") for entry in released]
    assert fixed == list(DOMAINEVAL_BANNED)
    assert not any("\u2019" in keyword for keyword in BANNED_KEYWORDS)


@pytest.mark.parametrize("code", [
    "subprocess.call(['rm', '-rf', path])",
    'subprocess.call([ "rm", "-rf", path])',  # normalised spacing and quotes still match
    "import os\nos.system('ls')",
    "with open(path) as handle:\n    pass",
])
def test_banned_operations_are_found(code: str) -> None:
    assert banned_keywords(code)


@pytest.mark.parametrize(("code", "expected"), [
    ("from subprocess import run\nrun(['ls'])", ["subprocess."]),  # through the import
    ("import shutil as sh\nsh.copy(a, b)", ["shutil."]),
    ("import os\nos.path.join(a, b)", ["os.path."]),
    ("from os import path\npath.exists(a)", ["os.path."]),
    ("os.execv(a, b)", ["os.exec"]),  # a prefix, as DomainEval's substring match had it
    ("handle.seek(0)", [".seek("]),
    ("data = json.load(handle)", [".load("]),
    ("proc.terminate()", ["terminate"]),
    ("import socket\nsocket.create_connection(a)", ["socket."]),
    ("import smtplib", ["smtplib"]),
])
def test_real_uses_of_banned_modules_and_calls_are_found(code: str, expected: list[str]) -> None:
    assert banned_keywords(code) == expected


@pytest.mark.parametrize("code", [
    "result = empty.copy()",  # not `pty.`
    "self.websocket.send(message)",  # not `socket.`
    "reopen(x)",  # not `open(`
    "value = self.read_only",  # not `.read(`
    "undetermined = indeterminate(x)",  # not `terminate`
    "message = 'call os.system or open(path)'",  # a string, not a call
    "def json_loads(text):\n    return parse(text)",  # not `.load(`
    "self.requests_made += 1",  # not `requests.`
])
def test_names_that_merely_contain_a_keyword_are_not_banned(code: str) -> None:
    assert banned_keywords(code) == []


def test_comments_and_docstrings_do_not_count() -> None:
    code = 'def f(path):\n    """Never calls os.system or open(path)."""\n    return path  # not os.remove\n'
    assert banned_keywords(code) == []


@pytest.mark.parametrize(("lines", "reason"), [(2, "too-short"), (3, None), (100, None), (101, "too-long")])
def test_size_limits_follow_domaineval(lines: int, reason: str | None) -> None:
    assert size_reason(lines) == reason


def _function(code: str) -> ast.FunctionDef:
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


@pytest.mark.parametrize(("code", "reason"), [
    ("def __init__(self, x):\n    self.x = x\n    self.y = 2\n    self.z = 3", "trivial-constructor"),
    ("@property\ndef size(self):\n    '''Size.'''\n    return len(self.items)", "trivial-property"),
    # a getter that computes something is a task like any method (tracing sees `obj.area`)
    ("@property\ndef area(self):\n    w = abs(self.w)\n    h = abs(self.h)\n    return w * h", None),
    ("def total(self, a, b=1):\n    '''Sum.'''\n    return self._impl.total(a, b=b)", "trivial-delegation"),
    ("def run(self):\n    raise NotImplementedError", "trivial-abstract"),
    ("def total(self, a):\n    return sum(x * 2 for x in a)", None),
    ("def pick(a):\n    if a:\n        return a[0]\n    return None", None),
])
def test_triviality(code: str, reason: str | None) -> None:
    assert triviality_reason(_function(code)) == reason


@pytest.mark.parametrize(("code", "reason"), [
    ('def check(x):\n    """Either."""\n    return helper_a(x) or helper_b(x)', "trivial-context-delegation"),
    ("def check(x, y):\n    return not helper_a(helper_b(x), y=y)", "trivial-context-delegation"),
    ("def check(x):\n    return helper_a(x) and len(x) > 2", None),  # computes something itself
    ("def check(x):\n    return other(x) or helper_b(x)", None),  # `other` is not supplied
])
def test_delegation_to_context_names(code: str, reason: str | None) -> None:
    assert triviality_reason(_function(code), context_names={"helper_a", "helper_b"}) == reason


REFERENCE = '''
def grade(score):
    """Letter grade."""
    if score >= 90:
        return "A"
    while score < 0:
        break
    return "B" if score > 50 and score != 70 else "C"
'''


def test_mutants_are_deterministic_distinct_and_parse() -> None:
    first = mutants(REFERENCE, 5)
    assert first == mutants(REFERENCE, 5)
    assert len(first) == 5
    texts = [text for _, text in first]
    assert len(set(texts)) == 5
    reference = ast.unparse(ast.parse(REFERENCE))
    for description, text in first:
        ast.parse(text)
        assert text != reference, description
        assert '"""Letter grade."""' in text or "'Letter grade.'" in text  # the docstring is never mutated


def test_no_mutants_for_code_without_a_function() -> None:
    assert mutants("x = 1", 3) == []
    assert mutants(REFERENCE, 0) == []


def test_test_methods_are_matched_by_their_ast(tmp_path: Path) -> None:
    from knowbench.builders.build_log import BuildReport, SourceReport
    from knowbench.builders.candidates import find_candidates
    from knowbench.builders.options import MineOptions
    from knowbench.builders.source import fetch_source

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text(
        "def double(x):\n    '''Twice.'''\n    y = x\n    y = y * 2\n    return y\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(
        "import subprocess\nimport unittest\nfrom lib import double\n\n\nclass DoubleTest(unittest.TestCase):\n"
        "    def test_copy_is_not_pty(self):\n        empty = []\n        self.assertEqual(double(empty.copy()), [])\n\n"
        "    def test_spawns(self):\n        subprocess.run(['true'])\n        self.assertEqual(double(1), 2)\n")
    source = fetch_source(str(tmp_path), tmp_path / "work")
    report = BuildReport(tool="knowbench", created="now")
    drafts = find_candidates(source, "text", MineOptions(), SourceReport(**source.describe(), domain="text"), report)
    assert [d.record.target for d in drafts] == ["lib.double"]
    dropped = {entry["test"].rsplit("::", 1)[-1]: entry.get("detail") for entry in drafts[0].record.dropped_tests}
    assert dropped == {"test_spawns": "subprocess."}
