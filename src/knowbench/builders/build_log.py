"""`build_report.json`: what happened to every candidate of a build, and the counts per stage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TaskRecord(BaseModel):
    """One candidate target: published, or dropped with the reason and the detail."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    target: str
    source: str
    domain: str
    status: Literal["candidate", "published", "dropped"] = "candidate"
    reason: str | None = None
    detail: str = ""
    file: str | None = None
    line: int | None = None
    body_lines: int | None = None
    tests_traced: int = 0
    tests_kept: int = 0
    dropped_tests: list[dict[str, str]] = Field(default_factory=list)
    repaired: list[str] = Field(default_factory=list, description="Names the context repair loop added.")
    certification: dict[str, Any] | None = None
    mutation_score: float | None = None
    instruction_source: str | None = None

    def drop(self, reason: str, detail: str = "") -> None:
        """Mark the candidate dropped (returns None so callers can `return record.drop(...)`)."""
        self.status = "dropped"
        self.reason = reason
        self.detail = detail[:500]

    def drop_test(self, test_id: str, reason: str, detail: str = "") -> None:
        entry = {"test": test_id, "reason": reason}
        if detail:
            entry["detail"] = detail[:300]
        self.dropped_tests.append(entry)


class SourceReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: str
    kind: str
    name: str
    version: str
    sha256: str
    requirement: str
    archive: str | None = None
    domain: str
    library_packages: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)


class BuildReport(BaseModel):
    """The whole build: sources, environment, per-stage counts and every candidate's fate."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    created: str
    benchmark: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    sources: list[SourceReport] = Field(default_factory=list)
    requirements: list[str] = Field(default_factory=list)
    uninstallable: list[dict[str, str]] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    sandbox: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    dropped_tasks: dict[str, int] = Field(default_factory=dict)
    dropped_tests: dict[str, int] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)
    tasks: list[TaskRecord] = Field(default_factory=list)
