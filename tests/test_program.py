"""Tests for knowbench.program: extracting code from replies and splicing it by AST."""

from __future__ import annotations

import ast
import decimal
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowbench.benchmark.schema import find_definition
from knowbench.program import SpliceError, assemble, extract_code, splice

PROMPT = textwrap.dedent('''
    import math


    def area(r: float) -> float:
        """Area of a circle of radius r."""
        ...


    def other() -> int:
        return 1
''')

CLASS_PROMPT = textwrap.dedent('''
    class Shape:
        def __init__(self, side: float) -> None:
            self.side = side

        @property
        def area(self) -> float:
            """The area."""
            ...

        def name(self) -> str:
            return "shape"
''')


def run(program: str, call: str) -> Any:
    """Execute `program` and evaluate `call` in its namespace."""
    namespace: dict[str, Any] = {}
    exec(compile(program, "<program>", "exec"), namespace)
    return eval(call, namespace)


def target(program: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = find_definition(ast.parse(program), qualname)
    assert found is not None
    return found


def top_level_names(program: str) -> list[str]:
    names = []
    for node in ast.parse(program).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


# ---------------------------------------------------------------- extract_code


def test_extract_empty_reply_gives_empty_code() -> None:
    assert extract_code("", "f") == ""
    assert extract_code("  \n\t\n", "f") == ""


def test_extract_python_fence() -> None:
    reply = "Here it is:\n```python\ndef f():\n    return 1\n```\nDone."
    assert extract_code(reply, "f") == "def f():\n    return 1"


def test_extract_py_untagged_and_tilde_fences() -> None:
    for opening, closing in [("```py", "```"), ("```", "```"), ("~~~", "~~~"), ("~~~python", "~~~")]:
        reply = f"Text\n{opening}\nx = 1\n{closing}\n"
        assert extract_code(reply, "f") == "x = 1", opening


def test_extract_prefers_block_defining_entry_point() -> None:
    reply = (
        "```python\nimport numpy as np\nprint(np.zeros(3))\nprint('a much longer usage block')\n```\n"
        "```python\ndef f():\n    return 2\n```\n"
        "```python\nassert f() == 2\n```"
    )
    assert extract_code(reply, "f") == "def f():\n    return 2"


def test_extract_method_entry_point_matches_last_name_component() -> None:
    reply = "```python\nx = 1\n```\n```python\nclass Shape:\n    def area(self):\n        return 4\n```"
    assert "def area" in extract_code(reply, "Shape.area")


def test_extract_largest_parsing_block_when_none_defines_target() -> None:
    reply = "```python\nx = 1\n```\n```python\nresult = compute()\nreturn result\n```\n```python\ny = (\n```"
    assert extract_code(reply, "f") == "result = compute()\nreturn result"


def test_extract_first_block_when_none_parses() -> None:
    reply = "```python\ndef f(:\n```\n```python\nclass (\n```"
    assert extract_code(reply, "f") == "def f(:"


def test_extract_ignores_non_python_fences_when_python_present() -> None:
    reply = "```bash\npip install thing and a lot of other words here\n```\n```python\nx = 1\n```"
    assert extract_code(reply, "f") == "x = 1"


def test_extract_unterminated_fence_keeps_content() -> None:
    reply = "Sure:\n```python\ndef f():\n    a = 1\n    return a"
    assert extract_code(reply, "f") == "def f():\n    a = 1\n    return a"


def test_extract_bare_code_reply_is_returned_as_is() -> None:
    reply = "import math\n\ndef f(x):\n    return math.sqrt(x)"
    assert extract_code(reply, "f") == reply


def test_extract_indented_body_is_dedented() -> None:
    reply = "    total = a + b\n    return total\n"
    assert extract_code(reply, "f") == "total = a + b\nreturn total"


def test_extract_drops_prose_around_bare_code() -> None:
    reply = "Here is the implementation you asked for:\n\ndef f(x):\n    return x * 2\n\nThis doubles x."
    assert extract_code(reply, "f") == "def f(x):\n    return x * 2"


def test_extract_does_not_cut_broken_code_to_make_it_parse() -> None:
    reply = "def f(x):\n    if x:\n        y = (x for\n    return y"
    assert extract_code(reply, "f") == reply


def test_extract_keeps_a_docstring_that_holds_a_fenced_example() -> None:
    """A reply copying a docstring with a ```pycon example: the fence inside the string
    does not end the block."""
    reply = (
        "Here is the completed function:\n\n```python\n"
        "def fetch_json(url):\n"
        '    """Fetch `url` and decode its JSON body.\n\n'
        "    ```pycon\n"
        "    >>> fetch_json('https://example.org/data.json')\n"
        "    {'ok': True}\n"
        "    ```\n"
        '    """\n'
        "    return {'url': url}\n"
        "```\n\nThis uses the standard library only."
    )
    code = extract_code(reply, "fetch_json")
    assert code.endswith("return {'url': url}")
    assert run(code, "fetch_json('u')") == {"url": "u"}


@pytest.mark.parametrize("fence", ["```pycon", "```", "~~~python"])
def test_an_unfenced_reply_whose_docstring_holds_a_fenced_example_is_the_code(fence: str) -> None:
    """A bare reply (a mined reference is one) whose docstring holds a fenced example: the
    reply parses, so its fence lines are its strings', not blocks of the reply."""
    reply = (
        "def double(x):\n"
        '    """Twice `x`.\n\n'
        f"    {fence}\n"
        "    >>> double(2)\n"
        "    4\n"
        f"    {fence[:3]}\n"
        '    """\n'
        "    result = x\n"
        "    result += x\n"
        "    return result\n"
    )
    assert extract_code(reply, "double") == reply.strip("\n")
    program = assemble("", 'def double(x):\n    """Twice."""\n    ...\n', "double", reply).program
    assert run(program, "double(3)") == 6


def test_extract_ends_a_block_at_a_fence_outside_strings() -> None:
    reply = 'Code:\n```python\nX = """a\n```\nb"""\n```\nAnd then:\n```\nnot code\n```'
    assert extract_code(reply, "f") == 'X = """a\n```\nb"""'


def test_extract_skips_a_reasoning_block_with_its_own_fence() -> None:
    for draft in ("```python\ndef f(x):\n    return x\n```\n", "```python\ndef f(x):\n    return x\n"):
        reply = (
            f"<think>\nThe user wants f. A first idea:\n{draft}"
            "That is wrong: it must double x.\n</think>\n\n"
            "```python\ndef f(x):\n    return 2 * x\n```"
        )
        assert extract_code(reply, "f") == "def f(x):\n    return 2 * x", draft


def test_extract_reasoning_with_no_answer_after_it_is_no_code() -> None:
    reply = "<think>\nLet me write f.\n```python\ndef f(x):\n    return 2 * x\n"
    assert extract_code(reply, "f") == ""


@pytest.mark.parametrize("reply", [
    "Sure",
    "I cannot do that.",
    "Sorry, but I can't help with that request.",
    "I'm not able to access the library's source code, so I cannot complete this function.\n\n"
    "Please provide more details.",
    "```\nI cannot do that\n```",
])
def test_extract_prose_only_reply_is_no_code(reply: str) -> None:
    assert extract_code(reply, "f") == ""


def test_assemble_prose_only_reply_is_an_empty_reply() -> None:
    """No code is not parsed as Python (`Sure` would be a NameError): the masked body stays,
    as for an empty reply, and the empty `code` is what diagnosis reads as no code."""
    assembly = assemble("", PROMPT, "area", "Sure")
    assert assembly == assemble("", PROMPT, "area", "")
    assert assembly.code == "" and assembly.program == PROMPT


def test_extract_keeps_helpers_from_another_fenced_block() -> None:
    reply = (
        "First a helper:\n\n```python\nimport math\n\n\ndef _norm(v):\n    return math.hypot(*v)\n```\n\n"
        "Then the function:\n\n```python\ndef f(v):\n    return _norm(v) * 2\n```\n\n"
        "Usage:\n\n```python\nprint(f((3, 4)))\n```"
    )
    code = extract_code(reply, "f")
    assert "def _norm" in code and "print" not in code
    assert run(splice(PROMPT, "area", code.replace("def f", "def area")), "area((3, 4))") == 10.0


# ---------------------------------------------------------------------- splice


def test_splice_empty_code_returns_prompt_unchanged() -> None:
    assert splice(PROMPT, "area", "") == PROMPT
    assert splice(PROMPT, "area", "   \n") == PROMPT


def test_splice_whole_function_replaces_target() -> None:
    code = "def area(r: float) -> float:\n    return math.pi * r * r"
    program = splice(PROMPT, "area", code)
    assert run(program, "area(1.0)") == pytest.approx(3.14159, rel=1e-5)
    assert run(program, "other()") == 1


def test_splice_body_only_keeps_prompt_docstring() -> None:
    program = splice(PROMPT, "area", "return math.pi * r ** 2")
    assert ast.get_docstring(target(program, "area")) == "Area of a circle of radius r."
    assert run(program, "area(2.0)") == pytest.approx(4 * 3.14159, rel=1e-5)


def test_splice_body_with_own_docstring_replaces_prompt_docstring() -> None:
    program = splice(PROMPT, "area", '"""Mine."""\nreturn 0.0')
    assert ast.get_docstring(target(program, "area")) == "Mine."


def test_splice_indented_body_is_dedented() -> None:
    program = splice(PROMPT, "area", "        x = r * r\n        return math.pi * x\n")
    assert run(program, "area(1.0)") == pytest.approx(3.14159, rel=1e-5)


def test_splice_body_whose_first_line_lost_its_indent() -> None:
    program = splice(PROMPT, "area", "x = r * r\n        return math.pi * x\n")
    assert run(program, "area(1.0)") == pytest.approx(3.14159, rel=1e-5)


def test_splice_whole_file_reply_keeps_prompt_for_other_definitions() -> None:
    code = PROMPT.replace("...", "return 2.0").replace("return 1", "return 999")
    program = splice(PROMPT, "area", code)
    assert run(program, "area(1.0)") == 2.0
    assert run(program, "other()") == 1


def test_splice_carries_new_helper_function() -> None:
    code = "def _square(x):\n    return x * x\n\ndef area(r):\n    return math.pi * _square(r)"
    program = splice(PROMPT, "area", code)
    assert top_level_names(program).index("_square") < top_level_names(program).index("area")
    assert run(program, "area(2.0)") == pytest.approx(4 * 3.14159, rel=1e-5)


def test_splice_carries_new_helper_class_and_constant() -> None:
    code = "SCALE = 2\n\nclass Box:\n    k = 3\n\ndef area(r):\n    return SCALE * Box.k * r"
    assert run(splice(PROMPT, "area", code), "area(1.0)") == 6.0


def test_splice_does_not_carry_usage_code() -> None:
    code = "def area(r):\n    return 1.0\n\nprint(area(2))\nif __name__ == '__main__':\n    area(3)"
    program = splice(PROMPT, "area", code)
    assert "print" not in program and "__main__" not in program


def test_splice_carries_import_to_module_top() -> None:
    code = "from fractions import Fraction\n\ndef area(r):\n    return Fraction(r) * 3"
    program = splice(PROMPT, "area", code)
    assert top_level_names(program) == ["Fraction", "math", "area", "other"]
    assert run(program, "area(2)") == 6


def test_splice_does_not_duplicate_existing_import() -> None:
    code = "import math\n\ndef area(r):\n    return math.pi"
    assert splice(PROMPT, "area", code).count("import math") == 1


def test_splice_future_import_stays_first() -> None:
    prompt = '"""Doc."""\nfrom __future__ import annotations\nimport os\n\ndef f():\n    ...\n'
    code = "from __future__ import division\nimport sys\n\ndef f():\n    return sys.maxsize > 0"
    program = splice(prompt, "f", code)
    body = ast.parse(program).body
    assert [type(node).__name__ for node in body[:5]] == ["Expr", "ImportFrom", "ImportFrom", "Import", "Import"]
    assert run(program, "f()") is True


def test_splice_keeps_prompt_decorators_when_candidate_has_none() -> None:
    prompt = "import functools\n\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n    ...\n"
    code = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)"
    program = splice(prompt, "fib", code)
    assert len(target(program, "fib").decorator_list) == 1
    assert run(program, "fib(80)") == 23416728348467685


def test_splice_uses_candidate_decorators_when_it_has_some() -> None:
    prompt = "@staticmethod\ndef f():\n    ...\n"
    code = "import functools\n\n@functools.cache\ndef f():\n    return 3"
    decorators = target(splice(prompt, "f", code), "f").decorator_list
    assert [ast.unparse(d) for d in decorators] == ["functools.cache"]


def test_splice_method_from_class_in_candidate() -> None:
    code = "class Shape:\n    def area(self):\n        return self.side ** 2"
    program = splice(CLASS_PROMPT, "Shape.area", code)
    assert run(program, "Shape(3).area") == 9  # the prompt's @property kept
    assert run(program, "Shape(3).name()") == "shape"


def test_splice_method_from_bare_def() -> None:
    code = "def area(self) -> float:\n    return self.side * 2"
    program = splice(CLASS_PROMPT, "Shape.area", code)
    assert run(program, "Shape(3).area") == 6
    assert "area" not in top_level_names(program)


def test_splice_method_body_only() -> None:
    program = splice(CLASS_PROMPT, "Shape.area", "return self.side + 1")
    assert run(program, "Shape(3).area") == 4
    assert ast.get_docstring(target(program, "Shape.area")) == "The area."


def test_splice_method_carries_new_class_member_helper() -> None:
    code = (
        "class Shape:\n    FACTOR = 10\n\n    def _scaled(self):\n        return self.side * self.FACTOR\n\n"
        "    def area(self):\n        return self._scaled()\n\n    def name(self):\n        return 'ignored'"
    )
    program = splice(CLASS_PROMPT, "Shape.area", code)
    assert run(program, "Shape(2).area") == 20
    assert run(program, "Shape(2).name()") == "shape"


def test_splice_method_carries_top_level_helper_before_class() -> None:
    code = "def double(x):\n    return 2 * x\n\nclass Shape:\n    def area(self):\n        return double(self.side)"
    program = splice(CLASS_PROMPT, "Shape.area", code)
    assert top_level_names(program) == ["double", "Shape"]
    assert run(program, "Shape(5).area") == 10


def test_splice_async_function() -> None:
    prompt = "import asyncio\n\nasync def f(x):\n    ...\n"
    program = splice(prompt, "f", "await asyncio.sleep(0)\nreturn x + 1")
    assert run(program, "asyncio.run(f(1))") == 2


def test_splice_unparsable_code_raises() -> None:
    with pytest.raises(SpliceError, match="does not parse"):
        splice(PROMPT, "area", "def area(r:\n    return")


def test_splice_missing_target_raises() -> None:
    with pytest.raises(SpliceError, match="no function 'volume'"):
        splice(PROMPT, "volume", "return 1")


def test_splice_error_is_a_value_error() -> None:
    assert issubclass(SpliceError, ValueError)


# -------------------------------------------------------------------- assemble


def test_assemble_fenced_reply_runs_with_context() -> None:
    context = "OFFSET = 10"
    reply = "Use this:\n```python\ndef area(r):\n    return OFFSET + r\n```"
    assembly = assemble(context, PROMPT, "area", reply)
    assert assembly.error is None and assembly.program is not None
    assert assembly.program.startswith("OFFSET = 10\n\n")
    assert run(assembly.program, "area(1)") == 11


def test_assemble_unparsable_reply_sets_error() -> None:
    assembly = assemble("", PROMPT, "area", "```python\ndef area(r):\n    return (r\n```")
    assert assembly.code == "def area(r):\n    return (r"
    assert assembly.program is None
    assert assembly.error is not None and "does not parse" in assembly.error


def test_assemble_null_completion_leaves_masked_body() -> None:
    assembly = assemble("", PROMPT, "area", "")
    assert assembly.code == "" and assembly.program == PROMPT
    assert run(assembly.program, "area(1.0)") is None


def test_assemble_hoists_future_imports_above_context() -> None:
    prompt = "from __future__ import annotations\n\ndef f() -> Later:\n    ...\n"
    assembly = assemble("import os", prompt, "f", "return os.sep")
    assert assembly.program is not None
    assert assembly.program.startswith("from __future__ import annotations")
    assert run(assembly.program, "f()") in {"/", "\\"}


def test_assemble_bad_context_needing_future_hoist_sets_error() -> None:
    prompt = "from __future__ import annotations\n\ndef f():\n    ...\n"
    assembly = assemble("def broken(:", prompt, "f", "return 1")
    assert assembly.program is None
    assert assembly.error is not None and "context does not parse" in assembly.error


FENCE = "`" * 3
F_PROMPT = 'def f(x):\n    """Return x + 1."""\n    ...\n'


@pytest.mark.parametrize("reply", [
    f"{FENCE}python\ndef f(x):\n    return x + 1\n\nif __name__ == '__main__':\n    print(f(",  # cut off
    "def f(x):\n    return x + 1\n\nprint(f(1)",  # unfenced, a broken usage line
    f"{FENCE}python\ndef f(x):\n    return x + 1\n\nfor n in range(3):\n    print(f(n)\n{FENCE}",
])
def test_a_broken_demo_after_a_complete_answer_is_dropped(reply: str) -> None:
    """A reply cut off by the token limit (or ending in a broken line) in the demo after its
    complete answer: the answer runs, without the demo."""
    program = assemble("", F_PROMPT, "f", reply)
    assert program.error is None and run(program.program, "f(1)") == 2


@pytest.mark.parametrize("reply", [
    f"{FENCE}python\ndef f(x):\n    return x + (1\n{FENCE}",
    f"{FENCE}python\ndef f(x):\n    if x:\n        return x + 1\n    return (\n",
])
def test_a_broken_answer_is_never_cut_into_a_valid_one(reply: str) -> None:
    assert assemble("", F_PROMPT, "f", reply).error is not None


@pytest.mark.parametrize("reply", [
    f"Here is the code: {FENCE}python\ndef f(x):\n    return x + 1\n{FENCE}\nThis adds one.",
    f"{FENCE}python\ndef f(x):\n    return x + 1\n{FENCE}<|im_end|>",
    f"{FENCE}python\ndef f(x):\n    return x + 1\n{FENCE}</s>",
    "def f(x):\n    return x + 1<|eot_id|>",
])
def test_a_fence_after_prose_and_an_end_token_after_the_code(reply: str) -> None:
    """A fence opened at the end of a prose line (small models write it so), and an
    end-of-turn token a server left after the closing fence or the code."""
    assert extract_code(reply, "f") == "def f(x):\n    return x + 1"


def test_the_new_rules_leave_what_worked_before() -> None:
    """Cases an outside review found the rules above to break, each passing before them:
    a no-op `...` in an `except` of the final answer (no excerpt), a prose line ending in a
    fence right before a fence of its own, a cut-off later version of the answer (never
    dropped to let the earlier one run), and a `self`-first helper called as a function."""
    final = (f"First attempt:\n{FENCE}python\ndef f(x):\n    return x + 2\n{FENCE}\nOops, fixed:\n"
             f"{FENCE}python\ndef f(x):\n    try:\n        return x + 1\n    except TypeError:\n        ...\n{FENCE}")
    assert run(assemble("", F_PROMPT, "f", final).program, "f(1)") == 2
    fences = f"Here is the code:{FENCE}\n{FENCE}python\ndef f(x):\n    return x + 1\n{FENCE}"
    assert run(assemble("", F_PROMPT, "f", fences).program, "f(1)") == 2
    redone = "def f(x):\n    return x - 1\n\n# Wait, fixed:\ndef f(x):\n    return (x +"
    assert assemble("", F_PROMPT, "f", redone).error is not None
    prompt = "class Counter:\n    def __init__(self):\n        self.items = [1, 2]\n\n    def total(self):\n        ...\n"
    reply = "def _sum(self):\n    return sum(self.items)\n\ndef total(self):\n    return 2 * _sum(self)\n"
    assert run(assemble("", prompt, "Counter.total", reply).program, "Counter().total()") == 6


def test_module_level_settings_the_code_relies_on_are_kept_and_usage_is_not() -> None:
    """`sys.setrecursionlimit` and `getcontext().prec = 50` set the interpreter up for the
    answer (a deep recursion, a precision); `print(f(3))` is example usage."""
    reply = ("import sys\nfrom decimal import Decimal, getcontext\nsys.setrecursionlimit(100000)\n"
             "getcontext().prec = 50\n\ndef f(x):\n    return 1 if x <= 0 else f(x - 1) + 1\n\nprint(f(3))\n")
    program = assemble("", F_PROMPT, "f", reply).program
    limit, context = sys.getrecursionlimit(), decimal.getcontext().copy()
    try:  # (the program sets this process's limit and decimal context)
        assert "print(" not in program and run(program, "f(8000)") == 8001
        assert run(program, "str(Decimal(1) / 3)") == "0." + "3" * 50
    finally:
        sys.setrecursionlimit(limit)
        decimal.setcontext(context)


def test_an_excerpt_shown_after_the_answer_is_not_the_answer() -> None:
    """The whole function, then "the key step" with `...` standing for the lines left out:
    the whole one runs."""
    reply = (f"{FENCE}python\ndef f(x):\n    y = x\n    y += 1\n    return y\n{FENCE}\nThe key step:\n"
             f"{FENCE}python\ndef f(x):\n    ...\n    y += 1\n    ...\n{FENCE}\n")
    assert run(assemble("", F_PROMPT, "f", reply).program, "f(1)") == 2


@pytest.mark.parametrize("reply", [
    "    def _add(self, x):\n        return x + self.v\n\n    def method(self, x):\n        return self._add(x)",
    "def _add(self, x):\n    return x + self.v\n\n@staticmethod\ndef _one():\n    return 0\n\n"
    "def method(self, x):\n    return self._add(x) + self._one()\n",
])
def test_methods_written_as_bare_defs_beside_the_target_join_its_class(reply: str) -> None:
    """A method target answered with bare (or indented) defs and no class line: the other
    defs shaped as methods (`self` first, or a static/class method) are methods of its class;
    a plain helper stays a module function."""
    prompt = "class Cls:\n    def __init__(self):\n        self.v = 1\n\n    def method(self, x):\n        \"\"\"Add v.\"\"\"\n        ...\n"
    program = assemble("", prompt, "Cls.method", reply).program
    assert run(program, "Cls().method(1)") == 2 and program.count("def _add") == 1
    helper = "def helper(x):\n    return x + 1\n\ndef method(self, x):\n    return helper(x)\n"
    program = assemble("", prompt, "Cls.method", helper).program
    assert run(program, "Cls().method(1)") == 2 and run(program, "callable(helper)")


POSED_CONTEXT = (
    "class Bag(dict):\n"  # the installed class, which the posed one subclasses
    "    def __setitem__(self, key, value):\n        raise TypeError('use add()')\n"
    "    def add(self, key, value):\n        raise AssertionError('the installed add ran')\n"
    "_kb_base_Bag = Bag\n"
)
POSED_PROMPT = "class Bag(_kb_base_Bag):\n    def add(self, key, value):\n        \"\"\"Add to key's count.\"\"\"\n        ...\n"


@pytest.mark.parametrize("call", ["super(Bag, self)", "super()"])
def test_super_in_a_posed_class_looks_past_the_installed_class(call: str) -> None:
    """A method posed in a subclass of the installed class (`class Bag(_kb_base_Bag)`): its
    `super()` means what it meant in the library, the class after the installed one, not the
    installed class's own override."""
    reply = f"def add(self, key, value):\n    {call}.__setitem__(key, self.get(key, 0) + value)\n"
    program = assemble(POSED_CONTEXT, POSED_PROMPT, "Bag.add", reply).program
    assert "super(_kb_base_Bag, self)" in program
    assert run(program, "(lambda b: (b.add('a', 2), b.add('a', 3), b['a'])[-1])(Bag())") == 5
    nested = ("def add(self, key, value):\n    class Inner(dict):\n        def get(self, k, d=None):\n"
              "            return super().get(k, d)\n    dict.__setitem__(self, key, Inner().get(key, value))\n")
    assert "super().get(k, d)" in assemble(POSED_CONTEXT, POSED_PROMPT, "Bag.add", nested).program


def test_assemble_is_frozen() -> None:
    assembly = assemble("", PROMPT, "area", "return 1.0")
    with pytest.raises(AttributeError):
        assembly.code = "x"  # type: ignore[misc]


# ------------------------------------------------------------------- real data


def _domaineval_rows(responses: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(responses.glob("*/*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def _domaineval_entry_point(tree: ast.Module, full_method_name: str) -> str | None:
    """DomainEval's name of the target; a few rows name a test fixture 'fixture.method'."""
    parts = full_method_name.split(".")
    for name in (full_method_name, parts[0], parts[-1]):
        if find_definition(tree, name) is not None:
            return name
    return None


def test_domaineval_whole_file_responses_splice(shared_data: Callable[..., Path]) -> None:
    rows = _domaineval_rows(shared_data("anchors/domaineval/gpt-4o-mini-pass1-responses"))
    assert len(rows) > 100
    spliced = 0
    failures: list[str] = []
    for row in rows:
        prompt = re.sub(r"\[\s*MASK\s*\]", "...", row["method_code_mask"])
        entry_point = _domaineval_entry_point(ast.parse(prompt), row["full_method_name"])
        assert entry_point is not None, row["full_method_name"]
        try:
            program = splice(prompt, entry_point, extract_code(row["response"], entry_point))
            ast.parse(program)
        except SpliceError as error:
            failures.append(f"{row['full_method_name']}: {error}")
            continue
        spliced += 1
    rate = spliced / len(rows)
    print(f"\nDomainEval splice success: {spliced}/{len(rows)} = {rate:.1%}; failures: {failures}")
    assert rate >= 0.95


# ------------------------------------------------------------ splice: program order


def test_splice_keeps_a_constant_after_the_prompt_helper_it_calls() -> None:
    """The candidate repeats the prompt's helper (dropped: the prompt's own stays) and adds a
    constant computed from it: the constant must come after the helper, not before the target."""
    prompt = "def area(r):\n    ...\n\n\ndef scale(k):\n    return k * 10\n"
    code = ("def scale(k):\n    return k * 10\n\n\nUNIT = scale(3)\n\n\n"
            "def area(r):\n    return UNIT * r\n")
    program = splice(prompt, "area", code)
    assert run(program, "area(2)") == 60


def test_splice_keeps_a_registration_after_the_helper_it_registers() -> None:
    prompt = "HANDLERS = {}\n\n\ndef handle(kind):\n    ...\n"
    code = ("HANDLERS = {}\n\n\ndef handle(kind):\n    return HANDLERS[kind]()\n\n\n"
            "def _ping():\n    return 'pong'\n\n\nHANDLERS['ping'] = _ping\n")
    program = splice(prompt, "handle", code)
    assert run(program, "handle('ping')") == "pong"


def test_splice_keeps_a_registration_call_that_passes_a_new_helper() -> None:
    prompt = "import atexit\n\n\ndef flush():\n    ...\n"
    code = ("import atexit\n\nPENDING = []\n\n\ndef flush():\n    PENDING.clear()\n    return len(PENDING)\n\n\n"
            "def _on_exit():\n    flush()\n\n\natexit.register(_on_exit)\n")
    program = splice(prompt, "flush", code)
    body = [ast.unparse(node) for node in ast.parse(program).body]
    assert body.index("atexit.register(_on_exit)") > body.index(next(s for s in body if s.startswith("def _on_exit")))
    assert run(program, "flush()") == 0


def test_splice_drops_example_usage_that_calls_the_target_at_import() -> None:
    """A whole-file reply ending with `result = f(...)`: running it before (or instead of)
    the tests is not part of the candidate's program (DomainEval's folium get_bounds)."""
    code = ("def area(r):\n    return 3 * r * r\n\n# Example usage\nradii = [1, 2]\n"
            "areas = [area(r) for r in radii]\nprint(areas)\n")
    program = splice(PROMPT, "area", code)
    assert "radii" not in program and "areas" not in program
    assert run(program, "area(1)") == 3


def test_splice_keeps_an_import_fallback_the_target_reads() -> None:
    prompt = "def powmod(a, b, c):\n    ...\n"
    code = ("try:\n    import gmpy2_not_installed as gmpy2\n    HAVE_GMP = True\nexcept ImportError:\n"
            "    HAVE_GMP = False\n\n\ndef powmod(a, b, c):\n    return -1 if HAVE_GMP else pow(a, b, c)\n")
    assert run(splice(prompt, "powmod", code), "powmod(2, 10, 1000)") == 24


def test_splice_carries_a_decorator_helper_before_the_target_it_decorates() -> None:
    code = ("CALLS = []\n\n\ndef traced(function):\n    CALLS.append(function.__name__)\n    return function\n\n\n"
            "@traced\ndef area(r):\n    return 2.0\n")
    program = splice(PROMPT, "area", code)
    assert run(program, "(area(1), CALLS)") == (2.0, ["area"])


def test_splice_target_defined_twice_binds_the_last_definition() -> None:
    code = "def area(r):\n    return 1\n\n\ndef area(r):\n    return 2\n"
    assert run(splice(PROMPT, "area", code), "area(0)") == 2


def test_splice_is_idempotent() -> None:
    code = ("def scale(k):\n    return k * 10\n\n\nUNIT = scale(3)\n\n\n"
            "def area(r):\n    return UNIT * r\n")
    once = splice(PROMPT, "area", code)
    assert splice(once, "area", code) == once


def test_splice_carries_an_import_the_reply_repeats_once() -> None:
    code = ("from fractions import Fraction\n\n\ndef _half(x):\n    return Fraction(x, 2)\n\n\n"
            "from fractions import Fraction\n\n\ndef area(r):\n    return _half(r) * 2\n")
    program = splice(PROMPT, "area", code)
    assert program.count("from fractions import Fraction") == 1
    assert run(program, "area(3)") == 3


def test_splice_keeps_a_constant_the_prompt_reads_but_lacks() -> None:
    """The prompt's own helper reads `logger`, which the prompt never binds; the whole-file
    reply binds it: that statement is not example usage."""
    prompt = ("import logging\n\n\ndef check(value):\n    logger.warning('checked')\n    return value\n\n\n"
              "def make(x):\n    ...\n")
    code = ("import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"
            "def check(value):\n    logger.warning('checked')\n    return value\n\n\n"
            "def make(x):\n    return check(x)\n")
    assert run(splice(prompt, "make", code), "make(4)") == 4


def test_splice_method_carries_a_new_annotated_class_attribute() -> None:
    prompt = ("import dataclasses\n\n\n@dataclasses.dataclass\nclass Point:\n    x: int\n\n"
              "    def norm(self) -> int:\n        ...\n")
    code = ("@dataclasses.dataclass\nclass Point:\n    x: int\n    z: int\n    y: int = 0\n\n"
            "    def norm(self) -> int:\n        return abs(self.x) + abs(self.y) + abs(self.z)\n")
    program = splice(prompt, "Point.norm", code)
    assert run(program, "Point(1, -2, y=3).norm()") == 6


def test_extract_answer_after_a_closing_tag_whose_opening_was_in_the_prompt() -> None:
    reply = "Okay, f doubles.\n```python\ndef f(x):\n    return x\n```\n</think>\n\ndef f(x):\n    return 2 * x\n"
    assert extract_code(reply, "f") == "def f(x):\n    return 2 * x"


REWARD_PROMPT = textwrap.dedent('''
    import re


    def format_reward(text: str) -> float:
        """1.0 when `text` is '<think>...</think><answer>...</answer>', else 0.0."""
        ...
''')


@pytest.mark.parametrize("pattern", [
    r'r"^<think>.*?</think>\s*<answer>.*?</answer>$"',
    r"'<reasoning>(.*?)</reasoning>'",
    r'"</THINK>"',
])
def test_extract_keeps_code_whose_strings_hold_reasoning_tags(pattern: str) -> None:
    code = ("import re\n\n\ndef format_reward(text: str) -> float:\n"
            f"    pattern = {pattern}\n"
            "    return 1.0 if re.match(pattern, text, re.DOTALL) else 0.0")
    reply = (f"Here is the implementation:\n\n```python\n{code}\n```\n\n"
             "It checks for a `<think>` block followed by an `<answer>` block.")
    assert extract_code(reply, "format_reward") == code
    assert assemble("", REWARD_PROMPT, "format_reward", reply).error is None


def test_extract_skips_every_leading_reasoning_tag_in_any_case() -> None:
    for tag in ("think", "THINK", "Thinking", "reasoning"):
        reply = f"<{tag}>\n```python\ndef f(x):\n    return x\n```\n</{tag}>\n```python\ndef f(x):\n    return 2 * x\n```"
        assert extract_code(reply, "f") == "def f(x):\n    return 2 * x", tag


@pytest.mark.parametrize("stub", [
    "def area(r: float) -> float:\n    ...",
    "def area(r: float) -> float:\n    pass",
    'def area(r: float) -> float:\n    """Area of a circle of radius r."""\n    ...',
    'def area(r: float) -> float:\n    """Area of a circle of radius r."""',
    "def area(r: float) -> float:\n    raise NotImplementedError",
])
def test_extract_prefers_a_real_definition_to_a_later_stub(stub: str) -> None:
    good = "def area(r: float) -> float:\n    return 3.0 * r * r"
    reply = f"```python\n{good}\n```\n\nThe signature is unchanged:\n```python\n{stub}\n```"
    assert extract_code(reply, "area") == good
    assert extract_code(f"```python\n{stub}\n```\n\n```python\n{good}\n```", "area") == good
    assert extract_code(f"```python\n{stub}\n```", "area") == stub


STUB_CONTEXT = "def unit():\n    return 1.0\n\n\nSCALE = 10\n"


@pytest.mark.parametrize("helper", [
    "def unit():\n    pass",
    "def unit():\n    ...  # provided by the library",
    'def unit():\n    """Defined elsewhere."""',
])
def test_splice_drops_a_stub_of_a_context_helper(helper: str) -> None:
    reply = f"```python\n{helper}\n\n\ndef area(r: float) -> float:\n    return 3.0 * r * r * unit()\n```"
    program = assemble(STUB_CONTEXT, PROMPT, "area", reply).program
    assert program is not None
    assert run(program, "area(2)") == 12.0


def test_splice_keeps_a_real_redefinition_of_a_context_helper() -> None:
    reply = "```python\ndef unit():\n    return 2.0\n\n\ndef area(r: float) -> float:\n    return 3.0 * r * r * unit()\n```"
    program = assemble(STUB_CONTEXT, PROMPT, "area", reply).program
    assert program is not None
    assert run(program, "area(2)") == 24.0


@pytest.mark.parametrize("reply", [
    "<think>\nThe completion must begin with `<think>`; I'll check startswith.\n</think>\n\n"
    "```python\ndef f(s):\n    return s.startswith('<' + 'think>')\n```",
    "<think>\nSpec: strip the leading <think> block.\n</think>\n"
    "```python\ndef f(s):\n    end = s.find('</' + 'think>')\n    return s[end + 8:] if end >= 0 else s\n```",
    "<think>\nThe reward checks that the completion starts with <think>. So I need a regex.\n</think>\n\n"
    "```python\nimport re\ndef f(s):\n    return 1.0 if re.match(r'^<think>.*?</think>', s, re.S) else 0.0\n```",
])
def test_extract_reads_past_a_block_that_mentions_its_own_opening_tag(reply: str) -> None:
    assert extract_code(reply, "f").startswith(("def f", "import re"))


@pytest.mark.parametrize("context", ["log = None\n", "from logging import info as log\n"])
def test_splice_keeps_a_no_op_that_replaces_a_context_value(context: str) -> None:
    reply = ("```python\ndef log(*args):\n    pass\n\n\n"
             "def area(r: float) -> float:\n    log('area')\n    return 3.0 * r * r\n```")
    program = assemble(context, PROMPT, "area", reply).program
    assert program is not None
    assert "def log(*args):" in program
    assert run(program, "area(2)") == 12.0
