"""The `mini-swe-agent` method: the mini-swe-agent framework plays each sample's episode.

mini-swe-agent (`pip install 'knowbench[mini-swe-agent]'`) is an agent that acts only
through bash commands. Its loop (`DefaultAgent.run`) runs here, in knowbench's process; its
model classes parse the replies, and the calls are made by the run's backend (`BackendCall`:
the generation cache, the backend's retries, the episode's deadline), so the endpoint is the
loop's only network route and a local model plays text mode too. Every command it issues runs through `SandboxEnvironment`, an
environment of mini-swe-agent's interface that runs `bash -c COMMAND` in the run's sandbox
(`knowbench.execution.shell.SandboxedShell`): the task's workspace is the only writable
host directory, there is no network, the benchmark, the run directory and the corpus are
masked, and the task's limits (wall clock, CPU, memory, processes, file size, output) hold
for each command. A command that hits a limit is killed and the observation says which.

The workspace holds `solution.py` (the task's context and prompt code; the agent completes
the definition in place) or, for a multiple-choice task, `answer.txt`, and with `--corpus`
the folder `corpus/`: every corpus file that leakage control lets the task see, as the
chunks the agent method's `read` shows (`CorpusFiles`), never the target. The tests are
never there. The completion is the final `solution.py` (for a function task; the submitted
text instead when it is code defining the entry point) or the submitted text (`answer.txt`
when nothing was submitted) for a choice task. An episode that did not submit has an
empty completion.

Variants: `mini-swe-agent` (the model replies with text holding one fenced command, as in
mini-swe-agent's `mini_textbased.yaml`; any chat model) and `mini-swe-agent:toolcall` (one
`bash` tool call per reply, its `mini.yaml`; the server must parse tool calls). The
templates are mini-swe-agent's own, from the installed package.
"""

from __future__ import annotations

import ast
import asyncio
import os
import platform
import posixpath
import shutil
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.jsonl import valid_text
from knowbench.knowledge.corpus import Corpus, open_corpus
from knowbench.knowledge.leakage import LeakageGuard, SourceNormaliser
from knowbench.methods.agent import CorpusFiles
from knowbench.methods.base import Method, Prompt, SampleContext
from knowbench.models.base import Message, ModelBackend
from knowbench.parsing import parse_python
from knowbench.records import CallUsage, Generation, Usage

if TYPE_CHECKING:
    from knowbench.execution.shell import SandboxedShell

MODES = {"text": ("mini_textbased.yaml", "LitellmTextbasedModel", "litellm_textbased_model"),
         "toolcall": ("mini.yaml", "LitellmModel", "litellm_model")}
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SOLUTION, ANSWER, CORPUS_DIR = "solution.py", "answer.txt", "corpus"
_ENDS = {"Submitted": "submitted", "LimitsExceeded": "max-turns", "TokenLimit": "token-limit",
         "TimeExceeded": "timeout", "RepeatedFormatError": "format-errors"}
FILE_CAP = 1024 * 1024
"""The most of the final solution file that is read back."""
INSTALL_HINT = "pip install 'knowbench[mini-swe-agent]'"


def load_framework() -> Any:
    """Import mini-swe-agent, quietly and without network at import (LiteLLM's price table
    from the package, not from GitHub), or say how to install it."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import minisweagent
    except ImportError as error:
        raise UserError(f"--method mini-swe-agent needs the mini-swe-agent package ({error})\n"
                        f"  fix: {INSTALL_HINT}") from error
    return minisweagent


class MiniSweAgentMethod(Method):
    name = "mini-swe-agent"
    variant_option = "mode"

    def __init__(self, corpus: str | None = None, exclude_file: bool = False, mode: str = "text",
                 max_turns: int = 20, episode_tokens: int = 200_000,
                 episode_timeout: float = 600.0, **options: Any) -> None:
        del options  # options of other methods
        if mode not in MODES:
            raise UserError(f"unknown mini-swe-agent mode '{mode}'; choose one of "
                            f"{', '.join(MODES)} (--method mini-swe-agent:toolcall)")
        if max_turns < 1 or episode_tokens < 1 or episode_timeout <= 0:
            raise UserError("mini-swe-agent: max_turns and episode_tokens must be >= 1 and "
                            "episode_timeout > 0")
        self.framework = load_framework()
        self.mode = mode
        self.corpus: Corpus | None = open_corpus(corpus) if corpus else None
        self.files = CorpusFiles(self.corpus) if self.corpus is not None else None
        self.exclude_file = exclude_file
        self.max_turns, self.episode_tokens = max_turns, episode_tokens
        self.episode_timeout = episode_timeout
        self.normaliser = SourceNormaliser()
        self.config = self._config()
        self._running: tuple[asyncio.AbstractEventLoop, ThreadPoolExecutor] | None = None

    def _config(self) -> dict[str, Any]:
        import yaml

        path = Path(self.framework.package_dir) / "config" / MODES[self.mode][0]
        return yaml.safe_load(path.read_text())

    # --- the method interface -----------------------------------------------------------

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        trace: dict[str, Any] = {"method": self.describe()["method"],
                                 "framework": f"mini-swe-agent {self.framework.__version__}",
                                 "workspace": [SOLUTION if isinstance(task, FunctionTask) else ANSWER]}
        if self.corpus is not None:
            trace.update({"corpus": self.corpus.name, "corpus_hash": self.corpus.content_hash,
                          "leakage": self._guard(task).describe()})
            trace["workspace"].append(f"{CORPUS_DIR}/")
        return Prompt(messages=[Message(role="system", content=self.config["agent"]["system_template"]),
                                Message(role="user", content=self.task_text(task))], trace=trace)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "method": "mini-swe-agent" if self.mode == "text" else f"mini-swe-agent:{self.mode}",
            "framework_version": self.framework.__version__, "max_turns": self.max_turns,
            "episode_tokens": self.episode_tokens, "episode_timeout": self.episode_timeout}
        if self.corpus is not None:
            described.update({"corpus": self.corpus.name, "corpus_hash": self.corpus.content_hash,
                              "exclude_file": self.exclude_file})
        return described

    def hidden_paths(self) -> list[str]:
        return [str(self.corpus.directory)] if self.corpus is not None else []

    def attach(self, backend: ModelBackend) -> None:
        """Refuses, before any work, a backend that holds no conversation (toolcall mode:
        that makes no tool calls)."""
        if self.mode == "toolcall" and not backend.supports_tools:
            raise UserError(f"--method mini-swe-agent:toolcall needs a model that makes tool "
                            f"calls, served through an OpenAI-compatible endpoint; --model "
                            f"{backend.name} makes none\n"
                            "  fix: pass the model's name and --base-url, or use --method "
                            "mini-swe-agent (text mode; see docs/agents.md)")
        if not backend.converses:
            raise UserError(f"--method mini-swe-agent holds a conversation with a model; --model "
                            f"{backend.name} answers each sample alike whatever it is sent\n"
                            "  fix: pass the model's name and --base-url, or a local model "
                            "(--model hf:PATH; see docs/agents.md)")

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        if self.corpus is None:
            return ["--method mini-swe-agent without --corpus: the workspace holds only the "
                    "task's file (no corpus/ folder)"]
        return []

    # --- the workspace ----------------------------------------------------------------------

    def task_text(self, task: FunctionTask | ChoiceTask) -> str:
        """The task as mini-swe-agent's instance template gets it (`{{task}}`)."""
        corpus = ""
        if self.corpus is not None:
            corpus = (f"\n\nThe folder {CORPUS_DIR}/ holds the source and documentation of "
                      f"{self.corpus.name}, each file as the chunks a knowledge corpus keeps "
                      "(functions, class outlines, documentation sections, headed by their "
                      "lines): read and search it with ls, grep, sed and cat.")
        if isinstance(task, ChoiceTask):
            options = "\n".join(f"({letter}) {text}" for letter, text in task.options.items())
            how_many = "Choose ALL correct options." if task.multiple else "Choose exactly ONE option."
            head = f"{task.instruction.strip()}\n\n" if task.instruction.strip() else ""
            return (f"{head}{task.question.strip()}\n\n{options}\n\n{how_many} Write your answer "
                    f"into {ANSWER} as a line 'Answer: X' (letters separated by commas); that "
                    f"file's final content is your answer.{corpus}")
        name = task.entry_point.split(".")[-1]
        return (f"Complete the function `{task.entry_point}` in the file {SOLUTION} of the "
                f"current directory (its body is `...`).\n\n{task.instruction.strip()}\n\n"
                f"Edit {SOLUTION} so that it holds the complete definition of `{name}` with the "
                f"imports it needs; the file's final content is your answer. Commands run in a "
                f"sandbox without network, with limited time and memory.{corpus}")

    def _guard(self, task: FunctionTask | ChoiceTask) -> LeakageGuard:
        return LeakageGuard(task, exclude_file=self.exclude_file, normaliser=self.normaliser)

    def workspace(self, task: FunctionTask | ChoiceTask, directory: Path) -> dict[str, Any]:
        """Lay out the task's workspace in `directory`; what it holds."""
        if isinstance(task, FunctionTask):
            code = task.prompt_code.strip() + "\n"
            if task.context.strip():
                code = f"{task.context.strip()}\n\n\n{code}"
            (directory / SOLUTION).write_text(code)
        else:
            (directory / ANSWER).write_text("")
        record: dict[str, Any] = {"files": 1}
        if self.files is not None:
            guard = self._guard(task)
            written = withheld = 0
            for path in sorted(self.files.files):
                clean = posixpath.normpath(path.replace("\\", "/")).lstrip("/")
                if clean in (".", "") or clean.startswith("../"):
                    continue
                shown, hidden = self.files.visible(guard, path)
                withheld += hidden
                if not shown:
                    continue  # every chunk withheld: the file is not there
                text, _ = self.files.read(guard, path)
                target = directory / CORPUS_DIR / clean
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text + "\n")
                written += 1
            record.update({"corpus_files": written, "withheld_chunks": withheld})
        return record

    # --- the episode ------------------------------------------------------------------------

    async def generate(self, task: FunctionTask | ChoiceTask, prompt: Prompt,
                       context: SampleContext) -> Generation:
        """One episode in a thread of the method's own pool, as wide as the backend keeps
        requests in flight: at most that many episodes run at once, and an episode's clock
        starts when it does. Its model calls come back to this loop, the backend's."""
        loop = asyncio.get_running_loop()
        if self._running is None or self._running[0] is not loop:
            width = int(context.backend.connection().get("concurrency") or 8)
            # threads of their own: episodes never wait on (or hold up) the run's other work
            self._running = (loop, ThreadPoolExecutor(width, thread_name_prefix="mini-swe-agent"))
        return await loop.run_in_executor(self._running[1], self._episode, task, context, loop)

    def _model(self, task: FunctionTask | ChoiceTask, context: SampleContext, deadline: float,
               loop: asyncio.AbstractEventLoop) -> Any:
        """mini-swe-agent's own model class for the mode (its parsing of actions, its
        observation templates), its requests made by the run's backend (`BackendCall`)."""
        settings = {key: value for key, value in self.config["model"].items()
                    if key in ("observation_template", "format_error_template")}
        call = BackendCall(task, context, deadline, loop, tools=self.mode == "toolcall")
        return _model_class(self.mode)(model_name=call.model_name, cost_tracking="ignore_errors",
                                       call=call, **settings)

    def _episode(self, task: FunctionTask | ChoiceTask, context: SampleContext,
                 loop: asyncio.AbstractEventLoop) -> Generation:
        from knowbench.execution.shell import SandboxedShell

        started = time.monotonic()
        deadline = started + self.episode_timeout
        directory = Path(tempfile.mkdtemp(prefix="knowbench-workspace-"))
        agent = None
        error = ""
        try:
            workspace = self.workspace(task, directory)
            with SandboxedShell(context.engine, directory, context.limits) as shell:
                environment = SandboxEnvironment(shell, deadline, self.episode_timeout)
                agent = _agent_class()(
                    self._model(task, context, deadline, loop), environment,
                    system_template=self.config["agent"]["system_template"],
                    instance_template=self.config["agent"]["instance_template"],
                    step_limit=self.max_turns, cost_limit=0.0,
                    episode_tokens=self.episode_tokens, deadline=deadline)
                try:
                    agent.run(self.task_text(task))
                except Exception as failure:  # the backend failed past its retries
                    error = f"{type(failure).__name__}: {failure}"
            # mini-swe-agent decodes the model's tool calls with json.loads, which can make a
            # lone surrogate of an escape: the stored trajectory must be valid Unicode.
            messages = valid_text(list(agent.messages))
            cached = list(agent.model.call.cached)
            final = _final_file(directory, task)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return self._generation(task, context, messages, cached, final, workspace, error,
                                time.monotonic() - started)

    def _generation(self, task: FunctionTask | ChoiceTask, context: SampleContext,
                    messages: list[dict[str, Any]], cached: list[bool], final: str,
                    workspace: dict[str, Any], error: str, duration: float) -> Generation:
        """The episode as a sample. `cached`: whether each model call, in order, was answered
        from the generation cache."""
        last = messages[-1] if messages else {}
        extra = last.get("extra") or {}
        status = str(extra.get("exit_status") or "")
        end = "error" if error else _ENDS.get(status, status or "error")
        detail = error or str(last.get("content") or status)[:300]
        submission = str(extra.get("submission") or "") if end == "submitted" else ""
        if end != "submitted":
            completion = ""
        elif isinstance(task, FunctionTask):
            completion = submission if _defines(submission, task.entry_point) else final
        else:
            completion = submission.strip() or final
        calls: list[CallUsage] = []
        steps: list[dict[str, Any]] = []
        finish_reason: str | None = None
        turn = 0
        for message in messages[2:]:
            message_extra = message.get("extra") or {}
            response = message_extra.get("response")
            usage = response.get("usage") if isinstance(response, dict) else None
            if isinstance(usage, dict):
                calls.append(CallUsage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                                       completion_tokens=int(usage.get("completion_tokens") or 0)))
                choices = response.get("choices") or [{}]
                finish_reason = choices[0].get("finish_reason")
            role = message.get("role")
            if role == "assistant" or isinstance(usage, dict):
                turn += 1
                steps.append({
                    "turn": turn, "role": "assistant",
                    "content": str(message.get("content") or message_extra.get("model_response") or ""),
                    "tool_calls": message.get("tool_calls") or [],
                    "usage": calls[-1].model_dump() if isinstance(usage, dict) else {},
                    "finish_reason": finish_reason,
                    "cached": bool(calls) and len(calls) <= len(cached) and cached[len(calls) - 1],
                    "latency_s": message_extra.get("latency_s")})
            if role in ("user", "tool"):
                steps.append({"turn": turn, "role": "tool",
                              "name": "format-error" if message_extra.get("interrupt_type") else "bash",
                              "content": _text(message.get("content")),
                              "record": {key: message_extra.get(key)
                                         for key in ("returncode", "limit", "truncated")
                                         if key in message_extra},
                              "duration_s": message_extra.get("duration_s")})
        total = Usage.of_calls(calls)
        trajectory = {
            "framework": f"mini-swe-agent {self.framework.__version__}", "mode": self.mode,
            "end": end, "detail": detail, "exit_status": status, "turns": len(calls),
            "tool_calls": sum(step["role"] == "tool" and step["name"] == "bash" for step in steps),
            "usage": {"prompt_tokens": total.prompt_tokens,
                      "completion_tokens": total.completion_tokens},
            "duration_s": round(duration, 4), "workspace": workspace,
            "limits": {"max_turns": self.max_turns, "episode_tokens": self.episode_tokens,
                       "episode_timeout": self.episode_timeout,
                       "command": context.limits.model_dump()},
            "messages": [_stored(message) for message in messages],
            "steps": steps,
        }
        if end != "submitted":
            finish_reason = f"agent:{end}" if finish_reason != "length" else "length"
        return Generation(task_id=task.task_id, sample_idx=context.sample_idx,
                          completion=completion, usage=total, finish_reason=finish_reason,
                          cached=bool(cached) and all(cached), latency_s=trajectory["duration_s"],
                          trajectory=trajectory)


class SandboxEnvironment:
    """mini-swe-agent's environment interface (`execute`, `get_template_vars`, `serialize`)
    over a `SandboxedShell`: each action's command runs in the sample's sandbox under the
    task's limits, cut short at the episode's deadline. An output whose first line is
    `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (exit code 0) ends the episode with the rest of
    the output as the submission, as in mini-swe-agent's own environments."""

    def __init__(self, shell: SandboxedShell, deadline: float, episode_timeout: float) -> None:
        self.shell, self.deadline, self.episode_timeout = shell, deadline, episode_timeout
        self.config = {"cwd": shell.workdir, "sandbox": shell.sandbox.kind}

    def execute(self, action: dict[str, Any], cwd: str = "", *,
                timeout: float | None = None) -> dict[str, Any]:
        del cwd  # every command starts in the workspace
        from minisweagent.exceptions import Submitted

        left = self.deadline - time.monotonic()
        command = str(action.get("command") or "")
        cut = min(left, timeout or left)
        result = self.shell.run(command, timeout_s=cut)
        message = result.message
        if result.limit == "timeout" and cut < self.shell.limits.wall_s:
            message = (f"the command was killed when the episode's time ran out "
                       f"(--episode-timeout {self.episode_timeout:g} s)")
        output: dict[str, Any] = {
            "output": result.output,
            "returncode": result.exit_code if result.exit_code is not None else -1,
            "exception_info": f"knowbench sandbox: {message}" if result.limit else "",
            "extra": {"limit": result.limit, "truncated": result.truncated,
                      "duration_s": result.duration_s}}
        lines = result.output.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT and result.exit_code == 0 and not result.limit:
            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**platform.uname()._asdict(), **self.config, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": self.shell.describe(),
                                    "environment_type": f"{__name__}.{type(self).__name__}"}}}


class BackendCall:
    """One episode's model calls, made by the run's backend: `generate` (text mode) or
    `generate_with_tools` with mini-swe-agent's bash tool (toolcall mode), on the run's event
    loop, from the episode's thread. So each call goes through the generation cache under a
    key covering the conversation so far (a rerun, or a resumed run, replays the calls it
    finds there), is retried as the backend retries (`--max-retries`), and is abandoned at
    the episode's deadline, retries included. Returns what mini-swe-agent's LiteLLM models
    parse: a `litellm.ModelResponse`."""

    def __init__(self, task: FunctionTask | ChoiceTask, context: SampleContext, deadline: float,
                 loop: asyncio.AbstractEventLoop, tools: bool) -> None:
        self.task, self.context, self.deadline, self.loop = task, context, deadline, loop
        self.tools = tools
        backend = context.backend
        self.model_name = str(backend.describe().get("model") or backend.name)
        self.cached: list[bool] = []
        """Whether each call so far, in order, was answered from the cache."""

    def __call__(self, messages: list[dict[str, Any]]) -> Any:
        import litellm
        from minisweagent.exceptions import TimeExceeded
        from minisweagent.models.utils.actions_toolcall import BASH_TOOL

        backend, context = self.context.backend, self.context
        conversation = [_message(message) for message in messages]
        if self.tools:
            pending = backend.generate_with_tools(self.task, conversation, context.params,
                                                  context.sample_idx, [BASH_TOOL])
        else:
            pending = backend.generate(self.task, conversation, context.params, context.sample_idx)
        future = asyncio.run_coroutine_threadsafe(pending, self.loop)
        try:
            reply = future.result(timeout=max(0.0, self.deadline - time.monotonic()))
        except FutureTimeout:
            future.cancel()
            raise TimeExceeded({"role": "exit", "content": "the episode's time ran out during a model call",
                                "extra": {"exit_status": "TimeExceeded", "submission": ""}}) from None
        self.cached.append(reply.cached)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        usage = reply.usage
        return litellm.ModelResponse(
            id=f"knowbench-{context.sample_idx}-{len(self.cached)}",
            model=self.model_name,
            choices=[{"index": 0, "message": message,
                      "finish_reason": reply.finish_reason or "stop"}],
            usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                   "total_tokens": usage.prompt_tokens + usage.completion_tokens})


def _message(message: dict[str, Any]) -> Message:
    """A message of mini-swe-agent's conversation as knowbench's backends take it."""
    calls = message.get("tool_calls")
    return Message(
        role=str(message.get("role") or "user"), content=_text(message.get("content")),
        tool_calls=[{"id": str(call.get("id") or ""), "type": "function",
                     "function": {"name": str((call.get("function") or {}).get("name") or ""),
                                  "arguments": str((call.get("function") or {}).get("arguments") or "{}")}}
                    for call in calls] if calls else None,
        tool_call_id=message.get("tool_call_id"))


_MODEL_CLASSES: dict[str, Any] = {}


def _model_class(mode: str) -> Any:
    """mini-swe-agent's LiteLLM model class for `mode`, its request made by a `BackendCall`
    instead of `litellm.completion`. Nothing is retried here (the backend retried already),
    and nothing is priced (knowbench prices tokens with `--price`)."""
    if mode in _MODEL_CLASSES:
        return _MODEL_CLASSES[mode]
    module = __import__(f"minisweagent.models.{MODES[mode][2]}", fromlist=[MODES[mode][1]])
    base = getattr(module, MODES[mode][1])

    class KnowbenchModel(base):  # type: ignore[misc, valid-type]
        abort_exceptions: ClassVar = [BaseException]  # mini-swe-agent's retry loop: no second attempt

        def __init__(self, *, call: BackendCall, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.call = call

        def _query(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            del kwargs
            return self.call(messages)

        def _calculate_cost(self, response: Any) -> dict[str, float]:
            del response
            return {"cost": 0.0}

    _MODEL_CLASSES[mode] = KnowbenchModel
    return KnowbenchModel


_AGENT_CLASS: Any = None


def _agent_class() -> Any:
    """mini-swe-agent's `DefaultAgent` with knowbench's token and wall-clock limits, checked
    before each model call (its own step limit is `--max-turns`)."""
    global _AGENT_CLASS
    if _AGENT_CLASS is not None:
        return _AGENT_CLASS
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import LimitsExceeded, TimeExceeded

    class KnowbenchAgent(DefaultAgent):  # type: ignore[misc, valid-type]
        def __init__(self, model: Any, env: Any, *, episode_tokens: int, deadline: float,
                     **kwargs: Any) -> None:
            super().__init__(model, env, **kwargs)
            self.episode_tokens, self.deadline = episode_tokens, deadline

        def query(self) -> dict[str, Any]:
            used = sum(_tokens(message) for message in self.messages)
            if used >= self.episode_tokens:
                raise LimitsExceeded({"role": "exit", "content": f"{used} tokens used, limit "
                                      f"{self.episode_tokens}", "extra": {
                                          "exit_status": "TokenLimit", "submission": ""}})
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeExceeded({"role": "exit", "content": "the episode's time is up",
                                    "extra": {"exit_status": "TimeExceeded", "submission": ""}})
            called = time.monotonic()
            message = super().query()
            message.setdefault("extra", {})["latency_s"] = round(time.monotonic() - called, 4)
            return message

    _AGENT_CLASS = KnowbenchAgent
    return KnowbenchAgent


def _tokens(message: dict[str, Any]) -> int:
    response = (message.get("extra") or {}).get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return 0
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)


def _stored(message: dict[str, Any]) -> dict[str, Any]:
    """A message as stored: the raw API response cut down to its id, finish reason and usage."""
    extra = dict(message.get("extra") or {})
    response = extra.get("response")
    if isinstance(response, dict):
        choices = response.get("choices") or [{}]
        extra["response"] = {"id": response.get("id"), "model": response.get("model"),
                             "finish_reason": choices[0].get("finish_reason"),
                             "usage": response.get("usage")}
    return {**message, "extra": extra}


def _text(content: object) -> str:
    if isinstance(content, list):  # multimodal parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _final_file(directory: Path, task: FunctionTask | ChoiceTask) -> str:
    path = directory / (SOLUTION if isinstance(task, FunctionTask) else ANSWER)
    try:
        if path.is_symlink() or not path.is_file():
            return ""
        with path.open("rb") as handle:
            return handle.read(FILE_CAP).decode(errors="replace")
    except OSError:
        return ""


def _defines(code: str, entry_point: str) -> bool:
    """Whether `code` parses as Python and defines the entry point's function."""
    if not code.strip():
        return False
    try:
        tree = parse_python(code)
    except SyntaxError:
        return False
    name = entry_point.split(".")[-1]
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
               for node in ast.walk(tree))
