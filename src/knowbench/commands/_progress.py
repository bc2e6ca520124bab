"""What `knowbench run` shows while it works.

On a terminal: a spinner for each long step (building the environment, loading a corpus's
index, checking the reference solutions) and a progress bar with the elapsed time and an
estimate of the time left. Anywhere else (stderr sent to a file or a pipe, where a live
display prints nothing): a line when a step starts and ends, and every `every` seconds one
line saying where the run is (samples done of the total, passes so far, rate, time left).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import get_args

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from knowbench.records import SampleResult, SampleStatus

_SHOWN_STATUSES: tuple[str, ...] = get_args(SampleStatus)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class RunProgress:
    """Progress of one `knowbench run`; use as a context manager around the whole command.

    `step(message)` wraps a long step; `on_references`, `on_start` and `on_result` are the
    callbacks of `run_benchmark`; `stored` is how many samples the run directory holds.
    """

    def __init__(self, console: Console, every: float = 15.0) -> None:
        # A step may come before the `with` block: the periodic line starts with the first.
        self.console = console
        self.every = every
        self.terminal = console.is_terminal
        self.counts: Counter[str] = Counter()
        self.total: int | None = None
        self.done_before = 0  # samples stored before this process started (a resumed run)
        self.started_at: float | None = None  # when sample work began
        self.step_name: str | None = None
        self.step_since = 0.0
        self.references: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._bar: Progress | None = None
        self._samples: TaskID | None = None
        self._checks: TaskID | None = None

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> RunProgress:
        self._start_ticker()
        return self

    def _start_ticker(self) -> None:
        if not self.terminal and self.every > 0 and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, daemon=True, name="run-progress")
            self._ticker.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._bar is not None:
            self._bar.stop()

    @property
    def stored(self) -> int:
        """Samples the run directory holds: those found on resuming plus those scored since."""
        with self._lock:
            return self.done_before + sum(self.counts.values())

    # ------------------------------------------------------------------ long steps

    @contextmanager
    def step(self, message: str) -> Iterator[None]:
        """A step that may take long and shows no progress of its own."""
        started = time.monotonic()
        self._start_ticker()
        with self._lock:
            self.step_name, self.step_since = message, started
        try:
            if self.terminal and self._bar is None:
                with self.console.status(f"{message} …"):
                    yield
            else:
                self.console.print(f"{message} …", highlight=False)
                yield
                self.console.print(f"{message}: done in {_duration(time.monotonic() - started)}",
                                   highlight=False)
        finally:
            with self._lock:
                self.step_name = None

    # ------------------------------------------------------------------ run_benchmark callbacks

    def on_references(self, done: int, total: int) -> None:
        with self._lock:
            self.references = (done, total) if done < total else None
        if not self.terminal:
            if done == 0:
                self.console.print(f"checking {total} reference solution(s) (time limits and "
                                   "isolation, once per task) …", highlight=False)
            return
        bar = self._live()
        if self._checks is None:
            self._checks = bar.add_task("references", total=total, counts="")
        bar.update(self._checks, completed=done, total=total)

    def on_start(self, total: int, done: int) -> None:
        with self._lock:
            self.total, self.done_before, self.started_at = total, done, time.monotonic()
        if done:
            self.console.print(f"resuming: {done} of {total} samples already done")
        if self.terminal:
            bar = self._live()
            self._samples = bar.add_task("samples", total=total, completed=done, counts="")
        else:
            self.console.print(f"samples: {total - done} to do of {total}", highlight=False)

    def on_result(self, result: SampleResult) -> None:
        with self._lock:
            self.counts[result.status] += 1
        if self._bar is not None and self._samples is not None:
            self._bar.update(self._samples, advance=1, counts=self._shown_counts())

    # ------------------------------------------------------------------ rendering

    def _live(self) -> Progress:
        if self._bar is None:
            self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 console=self.console, transient=False)
            self._bar.start()
        return self._bar

    def _shown_counts(self) -> str:
        return " · ".join(f"{status} {self.counts[status]}" for status in _SHOWN_STATUSES
                          if self.counts[status] or status in ("pass", "fail"))

    def line(self) -> str | None:
        """Where the run is, in one line (None before anything started)."""
        with self._lock:
            now = time.monotonic()
            if self.step_name is not None:
                return f"{self.step_name} … ({_duration(now - self.step_since)} so far)"
            if self.references is not None:
                done, total = self.references
                return f"reference solutions checked: {done}/{total}"
            if self.total is None or self.started_at is None:
                return None
            new = sum(self.counts.values())
            done = self.done_before + new
            parts = [f"samples {done}/{self.total}", self._shown_counts()]
            elapsed = now - self.started_at
            if new and elapsed > 0:
                rate = new / elapsed
                parts.append(f"{rate * 60:.1f}/min")
                parts.append(f"ETA {_duration((self.total - done) / rate)}")
            else:
                parts.append("ETA unknown")
            parts.append(f"elapsed {_duration(elapsed)}")
            return " · ".join(parts)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            text = self.line()
            if text:
                self.console.print(f"progress: {text}", highlight=False)
