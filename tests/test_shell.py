"""Shell commands in a sample's sandbox (`knowbench.execution.shell.SandboxedShell`), the
ground agent frameworks act on: the real sandbox, the task's limits, each limit reported."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import Sandbox
from knowbench.execution.shell import SandboxedShell
from knowbench.records import Limits


@pytest.fixture()
def shell(best_sandbox: Sandbox, tmp_path: Path) -> Iterator[SandboxedShell]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "solution.py").write_text("def f():\n    ...\n")
    engine = SubprocessEngine(best_sandbox.hiding([tmp_path / "secret"]), workers=1)
    try:
        with SandboxedShell(engine, workspace, Limits(wall_s=3.0, cpu_s=2, processes=5,
                                                      output_bytes=4096)) as opened:
            yield opened
    finally:
        engine.close()


def test_commands_share_the_workspace_and_nothing_else(shell: SandboxedShell, tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("hidden")
    written = shell.run(f"printf 'def f():\\n    return 1\\n' > solution.py; echo x > {tmp_path}/out; "
                        f"echo rc=$?; echo y > /tmp/scratch; cat {tmp_path}/secret/key")
    assert written.exit_code != 0 and written.limit is None and "rc=1" in written.output
    assert "hidden" not in written.output and not (tmp_path / "out").exists()
    ran = shell.run("python -c 'import solution; print(solution.f())'; ls /tmp")
    assert ran.output.split()[0] == "1" and "scratch" not in ran.output  # /tmp is per command
    assert (shell.workspace / "solution.py").read_text().endswith("return 1\n")


def test_each_limit_ends_the_command_and_says_which(shell: SandboxedShell) -> None:
    many = shell.run("for i in $(seq 20); do sleep 5 & done; wait")
    assert many.limit == "process-limit" and "more than 5 processes" in many.message
    slow = shell.run("sleep 30 & sleep 30")
    assert slow.limit == "timeout" and "wall-clock limit (3 s)" in slow.message
    loud = shell.run("yes | head -c 100000")
    assert loud.truncated and len(loud.output) < 4200 and "output cut at 4096 bytes" in loud.output
    cut = shell.run("sleep 30", timeout_s=0.5)
    assert cut.limit == "timeout" and "(0.5 s)" in cut.message
    assert shell.run("echo fine").output == "fine\n"  # the shell goes on after every limit


def test_files_a_command_writes_in_the_workspace_count_against_its_memory_budget(
        best_sandbox: Sandbox, tmp_path: Path) -> None:
    # The workspace is a host directory: the file-size limit bounds each file, not how many.
    engine = SubprocessEngine(best_sandbox, workers=1)
    try:
        with SandboxedShell(engine, tmp_path, Limits(wall_s=20.0, memory_mb=128)) as shell:
            filled = shell.run("for i in $(seq 64); do head -c 8M /dev/zero > fill$i || exit 3; done")
            assert filled.limit == "memory" and "files it wrote" in filled.message, filled
            assert sum(path.stat().st_size for path in tmp_path.glob("fill*")) < 256 << 20
            # What the killed command left holds the workspace over the budget: a command that
            # only cleans up is not stopped, however long it takes.
            cleaned = shell.run("sleep 0.3; rm fill*; head -c 8M /dev/zero > kept; echo done")
            assert cleaned.output == "done\n", cleaned
            # The bound holds for the episode, not for each command: what earlier commands left
            # counts in every later one.
            for _ in range(20):
                added = shell.run("n=$(ls | wc -l); for i in 1 2 3 4 5 6; do head -c 8M /dev/zero > add$n-$i; done")
                if added.limit is not None:
                    break
            assert added.limit == "memory", added
            assert sum(path.stat().st_size for path in tmp_path.iterdir()) < 256 << 20
        # A burst that may end before the first poll is counted as the command ends.
        (tmp_path / "burst").mkdir()
        with SandboxedShell(engine, tmp_path / "burst", Limits(wall_s=20.0, memory_mb=128)) as shell:
            burst = shell.run("for i in $(seq 12); do fallocate -l 15M burst$i; done")
            assert burst.limit == "memory", burst
    finally:
        engine.close()


@pytest.mark.parametrize("code", [1, 75, 76, 77])
def test_a_commands_exit_code_is_its_own(shell: SandboxedShell, code: int) -> None:
    """Whatever code a command exits with is its own: none of them names a limit (the test
    runner's own exit codes mean something to the engine; a shell command's do not)."""
    ended = shell.run(f"exit {code}")
    assert ended.exit_code == code and ended.limit is None and ended.message == ""


def test_a_command_starts_with_no_signal_blocked_or_ignored(shell: SandboxedShell) -> None:
    """As from a terminal, whatever the engine's process inherited (a shell's background job
    ignores SIGINT; Ray's workers block it): `cat` of its own status, in the command's bash."""
    ignored = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGPIPE)
    before = {number: signal.getsignal(number) for number in ignored}
    try:
        for number in ignored:
            signal.signal(number, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        ran = shell.run("grep -E '^Sig(Blk|Ign)' /proc/$$/status")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        for number, handler in before.items():
            signal.signal(number, handler)
    # Every signal a program can use (the C library keeps two real-time ones for itself).
    usable = sum(1 << (number - 1) for number in signal.valid_signals())
    fields = ran.output.split()
    assert ran.exit_code == 0 and fields[0::2] == ["SigBlk:", "SigIgn:"], ran.output
    assert [int(mask, 16) & usable for mask in fields[1::2]] == [0, 0], ran.output


def test_a_command_gets_the_samples_seccomp_filter(shell: SandboxedShell) -> None:
    """No user namespace of its own (where it could mount a tmpfs its budget does not see)."""
    ran = shell.run("unshare --user true; echo rc=$?")
    assert "rc=0" not in ran.output and "rc=" in ran.output, ran.output
