"""The knobs of `knowbench mine`, shared by the pipeline and its stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knowbench.builders.filters import BANNED_KEYWORDS
from knowbench.models.base import ModelBackend

Progress = Callable[[str], None]  # told one line per step, for a person watching


@dataclass
class MineOptions:
    """Knobs of the pipeline; the defaults follow DomainEval where it has one."""

    mutants: int = 0
    min_mutation_score: float = 0.5  # applies when mutants are scored
    min_lines: int = 3
    max_lines: int = 100
    max_prompt_lines: int = 400
    max_tests: int = 40
    time_limit_s: float = 10.0
    max_tasks: int | None = None
    banned: tuple[str, ...] = BANNED_KEYWORDS
    sandbox: str = "auto"
    workers: int | None = None
    llm: ModelBackend | None = None
    engine: str = "forkserver"
