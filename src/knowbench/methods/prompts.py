"""Prompt templates per task kind. Every method places knowledge the same way, through
`knowledge`, so that methods compare fairly."""

from __future__ import annotations

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, ProjectTask
from knowbench.models.base import Message

SYSTEM = (
    "You are an expert Python programmer. Follow the instructions exactly and answer "
    "with code in a single ```python fenced block unless asked otherwise."
)


def function_messages(task: FunctionTask, knowledge: str = "") -> list[Message]:
    if isinstance(task, ProjectTask) and len(task.project.targets) > 1:
        return project_messages(task, knowledge)
    parts = []
    if knowledge:
        parts.append(f"Reference material that may help:\n\n{knowledge}")
    parts.append(f"Complete the function `{task.entry_point}`.\n\n{task.instruction.strip()}")
    if task.context.strip():
        parts.append(f"This code runs before yours and is available to it:\n```python\n"
                     f"{task.context.strip()}\n```")
    parts.append(f"Code to complete (the body of `{task.entry_point}` is `...`):\n```python\n"
                 f"{task.prompt_code.strip()}\n```")
    parts.append(f"Reply with the complete definition of `{task.entry_point.split('.')[-1]}` "
                 "in one ```python block, including any imports it needs.")
    return [Message(role="system", content=SYSTEM), Message(role="user", content="\n\n".join(parts))]


def project_messages(task: ProjectTask, knowledge: str = "") -> list[Message]:
    """Several functions of a project at once: each in its own block."""
    parts = []
    if knowledge:
        parts.append(f"Reference material that may help:\n\n{knowledge}")
    names = ", ".join(f"`{target.qualname}` ({target.file})" for target in task.project.targets)
    parts.append(f"Complete the functions {names}.\n\n{task.instruction.strip()}")
    parts.append(f"Code to complete (each body is `...`):\n```python\n{task.prompt_code.strip()}\n```")
    parts.append("Reply with the complete definition of each function, each in its own ```python "
                 "block (a method inside its class, or with `self`), including any imports it needs.")
    return [Message(role="system", content=SYSTEM), Message(role="user", content="\n\n".join(parts))]


def choice_messages(task: ChoiceTask, knowledge: str = "") -> list[Message]:
    options = "\n".join(f"({letter}) {text}" for letter, text in task.options.items())
    how_many = ("Choose ALL correct options." if task.multiple else "Choose exactly ONE option.")
    parts = []
    if knowledge:
        parts.append(f"Reference material that may help:\n\n{knowledge}")
    if task.instruction.strip():
        parts.append(task.instruction.strip())
    parts.append(f"{task.question.strip()}\n\n{options}")
    parts.append(f"{how_many} End your reply with a line 'Answer: X' (letters separated by commas).")
    system = "You are an expert software engineer answering a multiple-choice question."
    return [Message(role="system", content=system), Message(role="user", content="\n\n".join(parts))]


def task_messages(task: FunctionTask | ChoiceTask, knowledge: str = "") -> list[Message]:
    if isinstance(task, ChoiceTask):
        return choice_messages(task, knowledge)
    return function_messages(task, knowledge)
