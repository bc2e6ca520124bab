"""Novel-API tasks from knowledge bundles (stage 3 of `knowbench novel`).

A *draft* is a task without its harness: a description that does not name the API, setup
code (`context`), the signature of `solution(...)`, a reference definition that calls the
target API, and *scenarios* (argument tuples, as Python source). Drafts come from

- a bundle's executed examples, offline: the first top-level statement of the example that
  calls the API (through any alias the example binds) is masked; the statements before it are
  the context (minus the import that names the API, which moves into the reference); the
  reference runs the masked statement and returns what it assigned (or the expression's
  value); the one scenario is `()`;
- a model (`--llm`): three drafts per bundle, easy (a direct call), medium (one step of a
  small pipeline) and hard (a feature built around the API), each with scenarios including
  edge cases.

The harness is made by *execute-then-assert*: every scenario runs against the reference in
the sandbox and its output is recorded (type, length, shape, dtype, keys, value when it is a
literal); assertions are generated in code from those records, one test each: structure,
value, the exception an edge case raises, and comparisons between the outputs of different
scenarios. Each assertion then runs against the reference with the target API replaced
everywhere by a null stub (returning None): an assertion that still passes says nothing about
the API and is dropped. The kept tests run under the runner's target-API spy with
`api_check="require"`: a test that passes without a real call of the API fails.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowbench import __version__
from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.schema import FunctionTask, KnowledgeBundle, Manifest, Provenance, TestSpec
from knowbench.errors import UserError
from knowbench.execution.engine import Engine, ExecutionRequest
from knowbench.jsonl import load_json
from knowbench.models.base import ModelBackend
from knowbench.parsing import parse_python
from knowbench.program import assemble
from knowbench.records import Execution, Limits, SamplingParams

ENTRY = "solution"
RECORD_MARK = "KNOWBENCH-NOVEL-RECORD "
DIFFICULTIES = ("easy", "medium", "hard")
MAX_PAIRS = 6  # comparisons between scenarios, per task


@dataclass
class Scenario:
    args: str  # a Python tuple expression, e.g. "([1, 2], 3)"
    edge: bool = False


@dataclass
class Draft:
    task_id: str
    api: str
    description: str
    context: str
    signature: str  # "def solution(a, b):"
    reference: str  # the whole definition of solution
    scenarios: list[Scenario]
    difficulty: str | None = None
    origin: str = "example"  # "example" (masked from an executed example) or "llm"
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dropped:
    api: str
    reason: str
    where: str = ""


# ------------------------------------------------------------------------------ offline drafts


def api_bindings(tree: ast.Module) -> dict[str, str]:
    """Names the module binds at top level to dotted library paths: `import a.b` (a -> a),
    `import a.b as m` (m -> a.b), `from a.b import f as g` (g -> a.b.f), `x = a.b.f` (x -> a.b.f)."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            dotted = dotted_name(node.value, names)
            if dotted is not None:
                names[node.targets[0].id] = dotted
    return names


def dotted_name(node: ast.expr, names: dict[str, str]) -> str | None:
    """`np.fft.fftfreq` as 'numpy.fft.fftfreq' through `names`; None when not a name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def calls_api(node: ast.AST, api: str, names: dict[str, str]) -> bool:
    """Whether `node` holds a call of `api`: by its dotted path (or a re-export of it in the
    same top-level package with the same last part), or a method call `.leaf(...)` when the
    API is a method of a class (`pkg.Cls.leaf`). The runtime spy checks it really is called."""
    parts = api.split(".")
    method = len(parts) >= 2 and parts[-2][:1].isupper()
    for inner in ast.walk(node):
        if not isinstance(inner, ast.Call):
            continue
        dotted = dotted_name(inner.func, names)
        if dotted == api or (dotted and dotted.split(".")[0] == parts[0] and dotted.split(".")[-1] == parts[-1]):
            return True
        if method and isinstance(inner.func, ast.Attribute) and inner.func.attr == parts[-1]:
            return True
    return False


def draft_from_example(api: str, code: str, index: int) -> Draft | Dropped:
    """The offline draft of one executed example (module docstring)."""
    where = f"example {index}"
    try:
        tree = parse_python(code)
    except SyntaxError as error:
        return Dropped(api, f"does not parse: {error.msg}", where)
    names = api_bindings(tree)
    position = next((i for i, node in enumerate(tree.body) if calls_api(node, api, names)), None)
    if position is None:
        return Dropped(api, "no top-level statement calls the API", where)
    statement = tree.body[position]
    returned: str
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
            and isinstance(statement.targets[0], ast.Name | ast.Tuple):
        masked, returned = [statement], ast.unparse(statement.targets[0])
        what = f"the value of `{returned}` that the missing step computes"
    elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
        masked, returned = [statement], statement.target.id
        what = f"the value of `{returned}` that the missing step computes"
    elif isinstance(statement, ast.Expr):
        value = statement.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print" \
                and len(value.args) == 1 and not value.keywords:
            value = value.args[0]
        masked, returned = [], ast.unparse(value)
        what = "the value the missing step computes"
    else:
        return Dropped(api, f"the API is called inside a {type(statement).__name__} statement, "
                       "which cannot be masked as one step", where)
    context_nodes, moved = _without_api_imports(tree.body[:position], api)
    context = "\n".join(ast.unparse(node) for node in context_nodes)
    uses = sorted({n.id for n in ast.walk(statement) if isinstance(n, ast.Name)
                   and any(_binds(node, n.id) for node in context_nodes)} - set(names))
    body = [*moved, *(ast.unparse(node) for node in masked), f"return {returned}"]
    reference = f"def {ENTRY}():\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    description = (f"The code that runs before yours stops before its key step. Write `{ENTRY}()` so that it performs "
                   f"that step{' on ' + ', '.join(f'`{u}`' for u in uses) if uses else ''} and returns "
                   f"{what}.")
    digest = hashlib.sha256(f"{api}\0{code}".encode()).hexdigest()[:12]
    return Draft(task_id=f"ex_{digest}", api=api, description=description, context=context,
                 signature=f"def {ENTRY}():", reference=reference, scenarios=[Scenario("()")],
                 origin="example", notes={"example": index})


def _binds(node: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(node)) \
        or any(isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name for n in ast.walk(node))


def _without_api_imports(nodes: list[ast.stmt], api: str) -> tuple[list[ast.stmt], list[str]]:
    """The context without the names an import binds to the API itself (they would name it),
    and those imports, to move into the reference."""
    leaf = api.rsplit(".", 1)[-1]
    kept: list[ast.stmt] = []
    moved: list[str] = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == leaf for a in node.names):
            naming = [a for a in node.names if a.name == leaf]
            rest = [a for a in node.names if a.name != leaf]
            moved.append(ast.unparse(ast.ImportFrom(module=node.module, names=naming, level=node.level)))
            if rest:
                kept.append(ast.ImportFrom(module=node.module, names=rest, level=node.level))
            continue
        kept.append(node)
    return kept, moved


def drafts_from_bundle(api: str, bundle: KnowledgeBundle) -> tuple[list[Draft], list[Dropped]]:
    """Offline drafts of every executed example of `bundle` (one per distinct masked step)."""
    drafts: list[Draft] = []
    dropped: list[Dropped] = []
    for index, example in enumerate(bundle.examples):
        if example.status != "passed":
            dropped.append(Dropped(api, f"example not executed ({example.status})", f"example {index}"))
            continue
        made = draft_from_example(api, example.code, index)
        if isinstance(made, Dropped):
            dropped.append(made)
        elif any(d.reference == made.reference and d.context == made.context for d in drafts):
            dropped.append(Dropped(api, "same masked step as an earlier example", f"example {index}"))
        else:
            drafts.append(made)
    return drafts, dropped


# ------------------------------------------------------------------------------ drafts by a model

LLM_PROMPT = """You write programming tasks that test whether a programmer knows one library API.

{knowledge}

Write three tasks that each need `{api}`, one per difficulty:
- easy: a direct call of the API;
- medium: the API is one step of a small pipeline;
- hard: a small feature built around the API.

Rules: a task's description must not name the API (neither `{leaf}` nor its module path); it says
what to compute. The solution is a function `solution(...)` with plain arguments. Give 3 to 5
scenarios per task: argument tuples as Python literals (e.g. "([1, 2, 3], 2)"), at least one an
edge case ("edge": true). Imports go inside the reference.

Reply with one JSON object in a ```json block:
{{"tasks": [{{"difficulty": "easy", "description": "...", "signature": "def solution(x, n):",
  "reference": "def solution(x, n):\\n    import ...\\n    return ...",
  "scenarios": [{{"args": "([1, 2], 3)", "edge": false}}]}}, ...]}}
"""


def llm_prompt(api: str, knowledge: str) -> str:
    return LLM_PROMPT.format(api=api, leaf=api.rsplit(".", 1)[-1], knowledge=knowledge)


def names_api(text: str, api: str) -> bool:
    """Whether `text` names the API: its last part as a word, or its dotted path."""
    leaf = api.rsplit(".", 1)[-1]
    return api.lower() in text.lower() or re.search(rf"(?<![\w.]){re.escape(leaf)}(?!\w)", text) is not None


def drafts_from_reply(api: str, reply: str) -> tuple[list[Draft], list[Dropped]]:
    """The drafts in a model's reply (LLM_PROMPT's JSON); each unusable one with its reason."""
    document = _json_in(reply)
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), list):
        return [], [Dropped(api, "the reply holds no JSON object with a 'tasks' list", "reply")]
    drafts: list[Draft] = []
    dropped: list[Dropped] = []
    for index, item in enumerate(document["tasks"]):
        where = f"task {index}"
        if not isinstance(item, dict):
            dropped.append(Dropped(api, "not a JSON object", where))
            continue
        difficulty, description = item.get("difficulty"), item.get("description")
        reference, raw = item.get("reference"), item.get("scenarios")
        if difficulty not in DIFFICULTIES:
            dropped.append(Dropped(api, f"difficulty {difficulty!r} is none of {', '.join(DIFFICULTIES)}", where))
            continue
        if not isinstance(description, str) or not description.strip():
            dropped.append(Dropped(api, "no description", where))
            continue
        if names_api(description, api):
            dropped.append(Dropped(api, "the description names the API", where))
            continue
        if not isinstance(reference, str):
            dropped.append(Dropped(api, "no reference", where))
            continue
        try:
            tree = parse_python(textwrap.dedent(reference))
        except SyntaxError as error:
            dropped.append(Dropped(api, f"the reference does not parse: {error.msg}", where))
            continue
        function = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == ENTRY), None)
        if function is None:
            dropped.append(Dropped(api, f"the reference defines no {ENTRY}()", where))
            continue
        scenarios = [Scenario(s["args"], bool(s.get("edge"))) for s in raw or []
                     if isinstance(s, dict) and isinstance(s.get("args"), str) and _is_tuple_literal(s["args"])]
        if not scenarios:
            dropped.append(Dropped(api, "no scenario is a literal argument tuple", where))
            continue
        helpers = [node for node in tree.body if node is not function]
        signature = f"def {ENTRY}({ast.unparse(function.args)}):"
        digest = hashlib.sha256(f"{api}\0{difficulty}\0{description}".encode()).hexdigest()[:12]
        drafts.append(Draft(task_id=f"llm_{digest}", api=api, description=description.strip(),
                            context="\n".join(ast.unparse(node) for node in helpers), signature=signature,
                            reference=ast.unparse(function) + "\n", scenarios=scenarios,
                            difficulty=difficulty, origin="llm"))
    return drafts, dropped


def _is_tuple_literal(text: str) -> bool:
    try:
        return isinstance(ast.literal_eval(parse_python(text, mode="eval")), tuple)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _json_in(reply: str) -> Any:
    """The JSON value in a model's reply (its first fenced block that parses, else the whole
    reply), None when there is none; strings valid Unicode, since they end up in the tasks."""
    for block in [*re.findall(r"```(?:json)?\s*\n(.*?)```", reply, re.S), reply]:
        try:
            return load_json(block)
        except ValueError:
            continue
    return None


# ------------------------------------------------------------------------------ the harness

_RECORDER = '''\
import ast as _kb_ast
import json as _kb_json
from solution import solution

_KB_SCENARIOS = {scenarios!r}


def _kb_literal(value):
    try:
        text = repr(value)
        if len(text) > 4000:
            return None
        again = _kb_ast.literal_eval(text)
        return text if type(again) is type(value) and again == value else None
    except Exception:
        return None


def _kb_describe(value):
    kind = type(value)
    facts = {{"type": kind.__module__ + "." + kind.__qualname__, "literal": _kb_literal(value)}}
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        facts["shape"] = list(shape)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not callable(dtype):
        facts["dtype"] = str(dtype)
    if isinstance(value, dict):
        facts["keys"] = sorted(repr(key) for key in value)[:50]
    if not isinstance(value, (str, bytes)) and hasattr(type(value), "__len__") and shape is None:
        try:
            facts["len"] = len(value)
        except Exception:
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and facts["literal"] is None:
        try:
            listed = tolist()
            facts["listed"] = _kb_literal(listed)
        except Exception:
            pass
    return facts


def test_record():
    out = []
    for args in _KB_SCENARIOS:
        try:
            value = solution(*_kb_ast.literal_eval(args))
        except Exception as error:
            out.append({{"raised": type(error).__name__}})
            continue
        out.append(_kb_describe(value))
    print({mark!r} + _kb_json.dumps(out))
'''

_HELPERS = '''\
import ast as _kb_ast
import math as _kb_math
from solution import solution


def _kb_type(value):
    return type(value).__module__ + "." + type(value).__qualname__


def _kb_close(actual, expected):
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return actual == expected or (_kb_math.isnan(expected) and _kb_math.isnan(actual)) \\
            or _kb_math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and type(actual) is type(expected) \\
            and all(_kb_close(a, e) for a, e in zip(actual, expected))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(_kb_close(actual[k], expected[k]) for k in expected)
    return type(actual) is type(expected) and actual == expected


def _kb_plain(value):
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, (list, tuple, dict, str)) else value


def _kb_run(args):
    return solution(*_kb_ast.literal_eval(args))
'''


def record_spec(scenarios: list[Scenario]) -> TestSpec:
    return TestSpec(name="record", code=_RECORDER.format(scenarios=[s.args for s in scenarios], mark=RECORD_MARK))


def read_records(execution: Execution) -> list[dict[str, Any]] | None:
    """The recorded outputs in a recording run's stdout (None when absent), their strings
    valid Unicode: the drafted code printed them, escaping what it liked."""
    for line in execution.stdout.splitlines():
        if line.startswith(RECORD_MARK):
            try:
                records = load_json(line[len(RECORD_MARK):])
            except ValueError:
                return None
            return records if isinstance(records, list) else None
    return None


def assertions(scenarios: list[Scenario], records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(test name, test function source) for every assertion the records support."""
    tests: list[tuple[str, str]] = []

    def add(name: str, body: str) -> None:
        tests.append((name, f"def test_{name}():\n" + textwrap.indent(body, "    ") + "\n"))

    values: dict[int, str] = {}
    for index, (scenario, record) in enumerate(zip(scenarios, records, strict=True)):
        args = repr(scenario.args)
        tag = f"s{index}{'_edge' if scenario.edge else ''}"
        if "raised" in record:
            add(f"{tag}_raises", f"try:\n    _kb_run({args})\nexcept Exception as error:\n"
                f"    assert type(error).__name__ == {record['raised']!r}, type(error).__name__\n"
                f"else:\n    raise AssertionError('expected {record['raised']} to be raised')")
            continue
        add(f"{tag}_type", f"assert _kb_type(_kb_run({args})) == {record['type']!r}")
        for fact in ("len", "shape", "dtype"):
            if fact in record:
                getter = {"len": "len(value)", "shape": "list(value.shape)", "dtype": "str(value.dtype)"}[fact]
                add(f"{tag}_{fact}", f"value = _kb_run({args})\nassert {getter} == {record[fact]!r}")
        if "keys" in record:
            add(f"{tag}_keys", f"assert sorted(repr(k) for k in _kb_run({args}))[:50] == {record['keys']!r}")
        if record.get("literal") is not None:
            values[index] = record["literal"]
            add(f"{tag}_value", f"assert _kb_close(_kb_run({args}), {record['literal']})")
        elif record.get("listed") is not None:
            values[index] = record["listed"]
            add(f"{tag}_value", f"assert _kb_close(_kb_plain(_kb_run({args})), {record['listed']})")
    indices = sorted(values)
    pairs = [(a, b) for position, a in enumerate(indices) for b in indices[position + 1:]][:MAX_PAIRS]
    for a, b in pairs:
        same = _same_literal(values[a], values[b])
        relation = "==" if same else "!="
        add(f"s{a}_{'same_as' if same else 'differs_from'}_s{b}",
            f"first, second = _kb_plain(_kb_run({scenarios[a].args!r})), _kb_plain(_kb_run({scenarios[b].args!r}))\n"
            f"assert {'' if same else 'not '}_kb_close(first, second), 'expected outputs {relation}'")
    return tests


def _same_literal(first: str, second: str) -> bool:
    try:
        return ast.literal_eval(parse_python(first, mode="eval")) == ast.literal_eval(parse_python(second, mode="eval"))
    except (ValueError, SyntaxError):
        return first == second


def harness_spec(tests: Iterable[tuple[str, str]]) -> TestSpec:
    return TestSpec(name="harness", code=_HELPERS + "\n\n" + "\n\n".join(source for _, source in tests))


NULL_STUB = '''

def _kb_null_stub(api):
    import importlib, sys
    parts = api.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    chain = [owner]
    for name in parts[cut:]:
        chain.append(getattr(chain[-1], name))
    original = chain[-1]

    def null(*args, **kwargs):
        return None

    if isinstance(chain[-2], type):
        setattr(chain[-2], parts[-1], null)
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None)
        if not isinstance(space, dict):
            continue
        for key, value in list(space.items()):
            if value is original:
                space[key] = null


_kb_null_stub({api!r})
'''


# ------------------------------------------------------------------------------ building tasks


@dataclass
class Built:
    tasks: list[FunctionTask]
    dropped: list[Dropped]
    counts: dict[str, int]


def _task(draft: Draft, bundle: KnowledgeBundle | None, tests: list[TestSpec]) -> FunctionTask:
    instruction = draft.description
    if draft.origin == "example" and bundle is not None:
        # the example the task was masked from would hand the answer to oracle cells with E
        source = draft.notes.get("example")
        bundle = bundle.model_copy(update={"examples": [e for i, e in enumerate(bundle.examples) if i != source]})
    location: dict[str, Any] = {}
    if draft.origin == "example":
        instruction += "\n\nThe context's names are module-level names your function can use."
        # where a bundle corpus (builders.novel_corpus) keeps that example: retrieval's leakage
        # control withholds it, as the oracle's bundle leaves it out
        location = {"source_path": f"bundles/{draft.api}/example_{draft.notes.get('example')}.py",
                    "source_span": [1, 1]}
    return FunctionTask(
        task_id=draft.task_id, domain=draft.api.split(".")[0], framework=draft.api.split(".")[0],
        difficulty=draft.difficulty, instruction=instruction,
        prompt_code=f"{draft.signature}\n    ...\n", entry_point=ENTRY, context=draft.context,
        reference=draft.reference, tests=tests, target_api=draft.api, knowledge_apis=[draft.api],
        bundle=bundle, isolation="in-process", api_check="require",
        metadata={"novel": {"origin": draft.origin, "scenarios": [s.__dict__ for s in draft.scenarios],
                            **draft.notes}, **location})


def _execute(engine: Engine, task: FunctionTask, program: str, spy: bool, limits: Limits) -> Execution:
    return engine.execute(ExecutionRequest(
        program=program, tests=task.tests, entry_point=ENTRY, limits=limits, isolation="in-process",
        spy=task.target_api if spy else None, spy_required=spy))


def build_harness(draft: Draft, bundle: KnowledgeBundle | None, engine: Engine,
                  limits: Limits) -> FunctionTask | Dropped:
    """The task of `draft` with its execute-then-assert harness, or why none could be made."""
    probe = _task(draft, bundle, [record_spec(draft.scenarios)])
    program = assemble(probe.context, probe.prompt_code, ENTRY, probe.reference).program
    if program is None:
        return Dropped(draft.api, "the reference cannot be assembled", draft.task_id)
    recorded = _execute(engine, probe, program, True, limits)
    outcome = recorded.tests[0]
    if outcome.status != "pass":
        reason = "the reference does not call the API" if outcome.api_calls == 0 and outcome.reason == "assertion" \
            else f"the reference's recording run failed ({outcome.reason})"
        return Dropped(draft.api, reason, draft.task_id)
    records = read_records(recorded)
    if records is None or len(records) != len(draft.scenarios):
        return Dropped(draft.api, "the reference's outputs could not be recorded", draft.task_id)
    raised = next(((scenario, record["raised"]) for scenario, record in zip(draft.scenarios, records, strict=True)
                   if "raised" in record and not scenario.edge), None)
    if raised is not None:  # only an edge case may raise; elsewhere it is a broken step (no network, ...)
        return Dropped(draft.api, f"the reference raised {raised[1]} on a scenario that is not an edge case",
                       draft.task_id)
    candidates = assertions(draft.scenarios, records)
    if not candidates:
        return Dropped(draft.api, "no assertion could be generated from the outputs", draft.task_id)
    full = _task(draft, bundle, [harness_spec(candidates)])
    stubbed = _execute(engine, full, program + NULL_STUB.format(api=draft.api), False, limits)
    survived = {test.id.rsplit("::", 1)[-1].removeprefix("test_") for test in stubbed.tests if test.status == "pass"}
    kept = [(name, source) for name, source in candidates if name not in survived]
    if not kept:
        return Dropped(draft.api, "every assertion also passes with the API replaced by a null stub", draft.task_id)
    task = _task(draft, bundle, [harness_spec(kept)])
    task.metadata["novel"]["assertions"] = {"generated": len(candidates), "dropped_by_null_stub": len(survived),
                                            "kept": [name for name, _ in kept]}
    return task


def build_tasks(drafts: list[Draft], bundles: dict[str, KnowledgeBundle], engine: Engine,
                limits: Limits) -> Built:
    tasks: list[FunctionTask] = []
    dropped: list[Dropped] = []
    for draft in drafts:
        made = build_harness(draft, bundles.get(draft.api), engine, limits)
        (dropped if isinstance(made, Dropped) else tasks).append(made)  # type: ignore[arg-type]
    return Built(tasks, dropped, {"drafts": len(drafts), "tasks": len(tasks), "dropped": len(dropped)})


# ------------------------------------------------------------------------------ the stage


def llm_drafts(pool: dict[str, KnowledgeBundle], backend: ModelBackend,
               max_tokens: int = 4096) -> tuple[list[Draft], list[Dropped]]:
    """Three drafts per bundle from `backend` (greedy, one request per bundle)."""
    import asyncio

    from knowbench.knowledge.bundles import render_cell
    from knowbench.models.base import Message

    params = SamplingParams(n=1, temperature=0.0, max_tokens=max_tokens, seed=0)
    apis = sorted(pool)

    async def ask() -> list[str]:
        try:
            replies = await asyncio.gather(*(backend.generate(
                _placeholder(api), [Message(role="user", content=llm_prompt(api, render_cell(pool[api], "Full")[0]))],
                params, 0) for api in apis))
        finally:
            await backend.aclose()
        return [reply.text for reply in replies]

    drafts: list[Draft] = []
    dropped: list[Dropped] = []
    for api, text in zip(apis, asyncio.run(ask()), strict=True):
        made, bad = drafts_from_reply(api, text)
        drafts.extend(made)
        dropped.extend(bad)
    return drafts, dropped


def _placeholder(api: str) -> FunctionTask:
    """Backends take the task being answered; here the question is about a bundle."""
    return FunctionTask(task_id=f"novel-tasks:{api}", domain="novel", instruction="Write tasks.",
                        prompt_code=f"def {ENTRY}():\n    ...\n", entry_point=ENTRY,
                        reference=f"def {ENTRY}():\n    ...\n", tests=[TestSpec(name="none", code="pass")])


def build_benchmark(pool: dict[str, KnowledgeBundle], out: Path, engine: Engine, limits: Limits, *,
                    llm: ModelBackend | None = None, name: str = "novel", requirements: list[str] | None = None,
                    source: str = "") -> dict[str, Any]:
    """Drafts (offline from examples, or from `llm`), harnesses, and the benchmark under `out`
    with `tasks_report.json` (every dropped draft or task with its reason). `UserError` when
    no task survives."""
    if llm is None:
        drafts: list[Draft] = []
        dropped: list[Dropped] = []
        for api in sorted(pool):
            made, bad = drafts_from_bundle(api, pool[api])
            drafts.extend(made)
            dropped.extend(bad)
    else:
        drafts, dropped = llm_drafts(pool, llm)
    built = build_tasks(drafts, pool, engine, limits)
    dropped.extend(built.dropped)
    report = {"bundles": len(pool), "drafts": len(drafts), "tasks": len(built.tasks),
              "mode": "llm" if llm is not None else "examples",
              "dropped_by_reason": dict(Counter(d.reason for d in dropped).most_common()),
              "dropped": [d.__dict__ for d in dropped],
              "per_api": dict(Counter(task.target_api or "" for task in built.tasks))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "tasks_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if not built.tasks:
        first = dropped[0] if dropped else None
        raise UserError(f"no task could be built from {len(pool)} bundles ({len(drafts)} drafts)"
                        + (f"; first reason: {first.api} {first.where}: {first.reason}" if first else "")
                        + f"\n  see {out / 'tasks_report.json'}")
    manifest = Manifest(name=name, description=f"novel-API tasks built by knowbench from {source or 'bundles'}",
                        domains=sorted({task.domain for task in built.tasks}), requirements=requirements or [],
                        time_limit_s=limits.wall_s,
                        provenance=Provenance(source=source or "bundles", tool=f"knowbench {__version__}"))
    write_benchmark(out, manifest, built.tasks)
    return report
