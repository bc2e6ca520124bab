"""An optional LLM judge for the failures the deterministic rules find ambiguous.

Only diagnoses with `ambiguous=True` are sent, one request each, with a fixed prompt
(`JUDGE_PROMPT_VERSION` changes whenever the prompt does): the label definitions, the task
instruction, the candidate code, its calls (from the syntax tree), the deterministic label
and the failing test's traceback. The model answers with JSON `{"label": ..., "reason":
...}`. Requests are greedy and go through the backend's `GenerationCache`, so asking again
costs nothing and gives the same answers. An answer that is not valid JSON with a known
label keeps the deterministic label (NovelAPIBench's "deterministic fallback").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.jsonl import load_json
from knowbench.models.base import Message, ModelBackend
from knowbench.records import SampleResult, SamplingParams
from knowbench.scoring.taxonomy import (
    LABELS,
    REPLY_LABELS,
    Diagnosis,
    Label,
    TaskInfo,
    code_facts,
)

JUDGE_PROMPT_VERSION = 1
JUDGE_PARAMS = SamplingParams(n=1, temperature=0.0, max_tokens=300, seed=0)

_SYSTEM = (
    "You classify why a generated Python function failed its unit tests. Answer with one "
    "JSON object and nothing else: {\"label\": \"<label>\", \"reason\": \"<one sentence>\"}."
)
_DEFINITIONS = """Labels (choose exactly one):
- WrongSyntax: the code is not valid Python.
- WrongAPISelection: the code calls an API that does not exist (hallucinated), or never calls the API the task is about and uses a sibling or its own code instead.
- WrongImport: the right API is used but imported from the wrong module, or not imported.
- WrongParam: the right API is called with wrong arguments (names, number, order), so the call is malformed.
- WrongShapeDtype: the right API is called correctly but a value breaks its contract (type, shape, range, format) inside it.
- WrongLogic: the API calls are right; the surrounding program logic or its result is wrong.
- Timeout, Resource: a time or memory limit was hit.
- Infrastructure: the evaluation is broken (a missing test dependency, task code that cannot run), not the candidate."""
_LIMITS = {"instruction": 1500, "code": 4000, "traceback": 2500, "calls": 60}


def judge_messages(diagnosis: Diagnosis, result: SampleResult, task: TaskInfo | None) -> list[Message]:
    """The fixed judging prompt for one diagnosis."""
    code = result.code if result.code is not None else result.completion
    facts = code_facts(code, task.entry_point if task else "")
    calls = ", ".join(sorted(facts.calls)[: _LIMITS["calls"]]) or "(none)"
    failing = next((test for test in (result.execution.tests if result.execution else [])
                    if test.id == diagnosis.evidence.test_id), None)
    traceback = failing.message if failing else str(result.extra.get("assembly_error", ""))
    parts = [
        _DEFINITIONS,
        f"Task instruction:\n{_head(task.instruction if task else '', 'instruction')}",
        f"Target API of the task: {task.target_api if task and task.target_api else 'not given'}",
        f"Candidate code:\n```python\n{_head(code or '', 'code')}\n```",
        f"Calls in the candidate code: {calls}",
        f"Failing test: {diagnosis.evidence.test_id or '(none)'}\n"
        f"```\n{_tail(traceback, 'traceback')}\n```",
        f"A rule-based classifier suggests {diagnosis.label} (rule {diagnosis.evidence.rule}: "
        f"{diagnosis.evidence.detail}). Decide for yourself.",
    ]
    return [Message(role="system", content=_SYSTEM), Message(role="user", content="\n\n".join(parts))]


def parse_judgement(text: str) -> tuple[Label, str] | None:
    """(label, reason) from a judge reply, or None when it holds no known label in JSON. The
    reason is valid Unicode whatever the judge escaped (`load_json`): it is stored."""
    for match in re.finditer(r"\{[^{}]*\}", text, re.DOTALL):
        try:
            data = load_json(match.group(0))
        except ValueError:
            continue
        label = data.get("label") if isinstance(data, dict) else None
        if label in LABELS and label not in REPLY_LABELS:  # those are decided from the reply
            return label, str(data.get("reason", ""))[:500]
    return None


def judge(diagnoses: Sequence[Diagnosis], results: Mapping[tuple[str, int], SampleResult],
          tasks: Mapping[str, TaskInfo], backend: ModelBackend, model_name: str) -> list[Diagnosis]:
    """The diagnoses with every ambiguous one decided by the judge (others unchanged).

    `results` maps (task_id, sample_idx) to the stored sample. Raises the backend's
    `BackendError` when the judge cannot be reached; answers already received stay cached.
    """
    return asyncio.run(_judge_all(list(diagnoses), results, tasks, backend, model_name))


async def _judge_all(diagnoses: list[Diagnosis], results: Mapping[tuple[str, int], SampleResult],
                     tasks: Mapping[str, TaskInfo], backend: ModelBackend,
                     model_name: str) -> list[Diagnosis]:
    async def one(diagnosis: Diagnosis) -> Diagnosis:
        if not diagnosis.ambiguous:
            return diagnosis
        result = results[(diagnosis.task_id, diagnosis.sample_idx)]
        task = tasks.get(diagnosis.task_id)
        messages = judge_messages(diagnosis, result, task)
        reply = await backend.generate(_placeholder_task(result, task), messages, JUDGE_PARAMS, 0)
        parsed = parse_judgement(reply.text)
        if parsed is None:
            note = {"model": model_name, "error": "no valid label in the reply; rule label kept",
                    "prompt_version": str(JUDGE_PROMPT_VERSION)}
            return diagnosis.model_copy(update={"judge": note})
        label, reason = parsed
        koco = diagnosis.koco if label not in ("Timeout", "Resource", "Infrastructure") else None
        if label == "WrongSyntax":
            koco = "syntax error"
        note = {"model": model_name, "label": label, "reason": reason,
                "rule_label": diagnosis.label, "prompt_version": str(JUDGE_PROMPT_VERSION)}
        return diagnosis.model_copy(update={"label": label, "koco": koco, "source": "judge",
                                            "judge": note})

    try:
        return list(await asyncio.gather(*(one(diagnosis) for diagnosis in diagnoses)))
    finally:
        await backend.aclose()


def _placeholder_task(result: SampleResult, task: TaskInfo | None) -> FunctionTask:
    """Backends take the task being answered; the judge's question is about this sample."""
    name = (task.entry_point if task else "target").rsplit(".", 1)[-1]
    name = name if name.isidentifier() else "target"
    return FunctionTask(task_id="judge", domain=result.domain, instruction="Label a failure.",
                        prompt_code=f"def {name}():\n    ...", entry_point=name,
                        reference=f"def {name}():\n    ...", tests=[TestSpec(name="none", code="pass")])


def _head(text: str, kind: str) -> str:
    limit = _LIMITS[kind]
    return text if len(text) <= limit else text[:limit] + "\n... (cut)"


def _tail(text: str, kind: str) -> str:
    limit = _LIMITS[kind]
    return text if len(text) <= limit else "(cut) ...\n" + text[-limit:]
