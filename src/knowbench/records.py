"""Plain records that flow between the run stages and into the run store.

Generation (models) -> Execution (execution) -> SampleResult (run) -> scores (scoring).
Every record is a pydantic model serialised as JSON; nothing here lives only in memory.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["pass", "fail", "error", "timeout", "memory", "infrastructure"]
"""Outcome of one test (and, summarised, of one sample).

pass: ran and passed. fail: an assertion failed. error: any other exception, including a
sample that exits or tampers with the runner. timeout: the wall-clock or CPU limit hit.
memory: the memory limit hit. infrastructure: knowbench could not run the sample at all.
"""

SampleStatus = Literal["pass", "fail", "error", "timeout", "memory", "infrastructure",
                       "truncated", "no-code", "no-answer"]
"""Outcome of one sample: a `Status` summarising its tests, or, for a sample that did not
pass, a failure of the reply itself rather than of its code or answer:

truncated: the reply was cut off at the token limit (`finish_reason` "length"), whatever its
tests said. no-code: a function reply that holds no code (empty, prose only, or reasoning
that never closed); its program still ran, with the target's masked body. no-answer: a
multiple-choice reply that names no option.
"""


Reason = Literal[
    "assertion", "exception", "skipped", "test-code-failed", "unsupported-fixture",
    "program-failed-to-load", "exited-early", "candidate-died", "interrupted", "cannot-cross", "tampering",
    "forged-record", "timeout", "cpu-time", "memory", "output-limit", "process-limit", "not-run",
    "isolation-required", "infrastructure",
]
"""Why a test did not pass: a closed set that diagnosis, certification and mining read
(the message beside it is for people and may change wording).

assertion: an assertion in the test failed. exception: the test raised anything else.
skipped: the test skipped itself. test-code-failed: the test code itself could not run.
unsupported-fixture: the test asks for a fixture the runner does not provide.
program-failed-to-load: the candidate's program raised while being loaded. exited-early:
the sample process ended before reporting. candidate-died: (split) the candidate's
process ended during a call or while loading the program. interrupted: (split) a call of an earlier test (or of this
one, in a callback) was interrupted by the test's own signal handler (an alarm-based timeout)
before the candidate answered it, so the candidate's process could take no later call.
cannot-cross: (split) a value could not cross between the
processes by value. tampering: the testing machinery was changed. forged-record: the
result channel carried records knowbench did not write. timeout / cpu-time / memory /
output-limit / process-limit: a limit was hit. not-run: an earlier event stopped the run before this test.
isolation-required: the run requires split isolation and the task cannot run split.
infrastructure: knowbench could not run the sample at all.
"""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SamplingParams(_Record):
    """How to sample completions. Greedy decoding is n=1, temperature=0."""

    n: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=1024, ge=1)
    seed: int | None = None


class CallUsage(_Record):
    """The tokens of one model request."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Usage(_Record):
    """The tokens one sample cost, as the model's server reported them.

    `prompt_tokens` and `completion_tokens` are totals over every request the sample took.
    A sample made by one request leaves `calls` empty (the totals are that request); a
    method that makes several (a tool-using agent's turns) lists each in `calls`, built with
    `Usage.of_calls`, so a report can show both the total and how it was spent. Zero
    everywhere: nothing was reported (offline backends, servers that send no usage).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: list[CallUsage] = Field(default_factory=list)

    @classmethod
    def of_calls(cls, calls: list[CallUsage]) -> Usage:
        """The usage of a sample made by `calls`, in order; totals are their sums."""
        return cls(prompt_tokens=sum(call.prompt_tokens for call in calls),
                   completion_tokens=sum(call.completion_tokens for call in calls),
                   calls=list(calls))

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def requests(self) -> int:
        """Model requests behind the sample: the calls listed, else 1 when any token was
        reported, else 0 (unknown)."""
        return len(self.calls) or int(self.total_tokens > 0)


class Generation(_Record):
    """One model reply for one (task, sample index)."""

    task_id: str
    sample_idx: int
    completion: str
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    cached: bool = False
    latency_s: float = 0.0
    trajectory: dict[str, Any] | None = Field(
        default=None, description="For a method that generates through several model calls (the "
        "agent): the whole episode (messages, tool calls and results, tokens, timing, why it "
        "ended); `usage` then sums every call.")


class Limits(_Record):
    """Resource limits for executing one sample; all of them are written into results."""

    wall_s: float = Field(default=10.0, gt=0, description="Wall-clock limit; kills the whole sandbox.")
    cpu_s: int = Field(default=20, ge=1, description="RLIMIT_CPU seconds.")
    memory_mb: int = Field(default=1024, ge=16,
                           description="Address space allowed on top of the runner's own baseline.")
    file_size_mb: int = Field(default=16, ge=1, description="RLIMIT_FSIZE: largest file a sample may write.")
    open_files: int = Field(default=256, ge=16, description="RLIMIT_NOFILE.")
    processes: int = Field(default=64, ge=1, description="Processes a sample may add (counted in its "
                           "PID namespace every 50 ms; more, and the sample is killed).")
    threads: int = Field(default=512, ge=16, description="RLIMIT_NPROC: processes and threads "
                         "together that the sample's uid may run.")
    output_bytes: int = Field(default=65536, ge=1024, description="Captured stdout/stderr per stream.")


class TestOutcome(_Record):
    __test__ = False  # not a pytest test class

    id: str
    status: Status
    message: str = ""
    duration_s: float = 0.0
    called: bool | None = Field(
        default=None, description="Whether the target's code ran during this test (None: not checked)."
    )
    reason: Reason | None = Field(default=None, description="Why it did not pass (None: it passed).")
    api_calls: int | None = Field(
        default=None, ge=0, description="Calls of the task's target API during this test, counted by "
        "the runner's spy (None: the task names no spied API, or the sample ran split).")
    api_bound: int | None = Field(
        default=None, ge=0, description="Of `api_calls`, those whose arguments bind to the target's "
        "signature (None: no spy, or a signature inspect cannot read).")
    exit_code: int | None = Field(
        default=None, description="When the process running this test ended without reporting it: "
        "how it ended, as `Execution.exit_code` (negative or above 128: the signal; None otherwise).")


class Execution(_Record):
    """What happened when one program ran against its tests."""

    status: Status
    tests: list[TestOutcome]
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int | None = None
    sandbox: str = Field(description="Isolation actually used: 'bwrap', 'unshare' or 'none'.")
    engine: str = "subprocess"
    isolation: str = Field(default="in-process",
                           description="'split' (verdict from a process the candidate cannot reach) "
                           "or 'in-process'.")
    limits: Limits
    note: str = ""
    imported: list[str] = Field(default_factory=list, description="Only for a reference's run "
                                "(ExecutionRequest.report_imports): the library modules it imported as it ran "
                                "(split: in either process).")
    candidate_imported: list[str] = Field(
        default_factory=list, description="Split, a reference's run: those of `imported` that the "
        "candidate's process (the reference's program) imported.")

    @property
    def passed(self) -> int:
        return sum(test.status == "pass" for test in self.tests)


class SampleResult(_Record):
    """The scored result of one sample: the unit every metric is computed from."""

    task_id: str
    sample_idx: int
    kind: Literal["function", "choice"]
    domain: str
    framework: str | None = None
    difficulty: str | None = None
    completion: str
    code: str | None = Field(default=None, description="Code extracted from the completion.")
    program: str | None = Field(default=None, description="The full program that was executed.")
    chosen: list[str] | None = Field(default=None, description="Letters extracted (choice tasks).")
    jaccard: float | None = Field(default=None, description="Partial credit of a choice sample: "
                                  "|chosen ∩ answer| / |chosen ∪ answer| (0 when nothing is chosen).")
    passed: bool
    tests_passed: int = 0
    tests_total: int = 0
    status: SampleStatus
    finish_reason: str | None = Field(default=None, description="Why the model stopped: 'stop', "
                                      "'length' (cut off at max_tokens), ...; None when unknown.")
    execution: Execution | None = None
    usage: Usage = Field(default_factory=Usage)
    api_called: bool | None = Field(
        default=None, description="API selection: the target API was called in at least one test "
        "(from the runner's spy; None when the task's API was not spied on or no test reported).")
    params_correct: bool | None = Field(
        default=None, description="Parameter correctness: the target API was called and every "
        "recorded call's arguments bind to its signature (None as for api_called, or when the "
        "signature cannot be read).")
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def pass_fraction(self) -> float:
        if self.tests_total == 0:
            return 1.0 if self.passed else 0.0
        return self.tests_passed / self.tests_total
