"""The `knowbench` console script: the entry point pyproject.toml declares offers every command.

The command tests elsewhere run this same entry point (helpers.run_knowbench) and register
nothing themselves, so a command dropped from the CLI fails them as well as this list.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT, knowbench_command, run_knowbench

# Every command the README and docs tell a user to type.
COMMANDS = ("run", "validate", "score", "mine", "certify", "import", "diagnose", "report",
            "compare", "leaderboard", "env", "corpus", "contamination")


def test_the_console_script_lists_every_command() -> None:
    done = run_knowbench("--help", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: knowbench ")
    listed = {line.split()[0] for line in done.stdout.split("Commands:", 1)[1].splitlines()
              if line.strip()}
    assert set(COMMANDS) <= listed, f"missing from the CLI: {sorted(set(COMMANDS) - listed)}"


# Counts the collector's passes made while `knowbench.cli` is being imported (it is in
# sys.modules, its last line not yet run) and, at exit, prints them with the collector's state.
_WATCH_COLLECTIONS = """\
import atexit, gc, json
passes = []
def _seen(phase, info):
    cli = sys.modules.get("knowbench.cli")
    if phase == "start" and cli is not None and not hasattr(cli, "main"):
        passes.append(info["generation"])
gc.callbacks.append(_seen)
atexit.register(lambda: print(json.dumps({"passes": passes, "enabled": gc.isenabled(),
                                          "frozen": gc.get_freeze_count(),
                                          "tracked": len(gc.get_objects())})))
"""


def _collections(*args: str, prelude: str = "") -> dict:
    done = subprocess.run(knowbench_command(*args, prelude=_WATCH_COLLECTIONS + prelude),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_console_script_imports_the_cli_without_collecting_and_freezes_it() -> None:
    seen = _collections("--version")
    assert seen["passes"] == [], "the collector ran while the CLI was imported"
    assert seen["enabled"], "the console script left the collector off"
    # Frozen: what the import built (tens of thousands of objects), far more than a
    # `--version` makes after it.
    assert seen["frozen"] > 4 * seen["tracked"], seen
    # The probe sees the passes an import with the collector on makes (pydantic's schemas,
    # typer, numpy: over a hundred), so the empty list above is the entry point's doing.
    control = _collections("--version", prelude="import knowbench.cli")
    assert len(control["passes"]) > 10 and max(control["passes"]) >= 1, control


def test_the_console_script_leaves_the_collector_off_where_it_was_off() -> None:
    assert _collections("--version", prelude="import gc\ngc.disable()")["enabled"] is False


def test_starting_the_command_line_imports_no_numerical_or_model_library() -> None:
    # numpy is imported where a score's bootstrap or kNN-LM's decoding needs it, so a command
    # that needs neither (`--help`, `validate`, `env`) does not pay for it (0.09 s of wall
    # time, 0.16 s of CPU with OpenBLAS's threads).
    done = subprocess.run(knowbench_command("--version", prelude=(
        "import atexit\natexit.register(lambda: print(sorted(name for name in "
        "('numpy', 'torch', 'transformers', 'faiss') if name in sys.modules)))")),
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


def _every_name() -> list[str]:
    """Every command and command group of the whole CLI, named as its parser names them."""
    import typer.main

    from knowbench import cli

    return sorted(typer.main.get_command(cli.app).commands)  # type: ignore[attr-defined]


def _printed(capsys: pytest.CaptureFixture[str], call) -> tuple[int, str, str]:
    try:
        code = call()
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code or 0, captured.out, captured.err


@pytest.mark.parametrize("args", [["--help"], ["--bogus-option"], []], ids=["help", "usage-error", "no-arguments"])
def test_every_command_parses_as_in_the_whole_command_line(
        args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The entry point builds only the parser of the command it is asked for; what that
    # command prints for help and usage errors must be what the whole CLI prints.
    from knowbench import cli

    names = _every_name()
    assert {"run", "validate", "corpus", "env"} <= set(names)
    for name in names:
        narrowed = cli._narrowed([name, *args])
        assert len(narrowed.registered_commands) + len(narrowed.registered_groups) == 1, name
        assert cli.app.registered_commands and narrowed is not cli.app
        monkeypatch.setattr(sys, "argv", ["knowbench", name, *args])
        through_main = _printed(capsys, cli.main)

        def whole() -> int:
            # The whole CLI, with the same handling of what it raises as `main`.
            with monkeypatch.context() as whole_cli:
                whole_cli.setattr(cli, "_narrowed", lambda args: cli.app)
                return cli.main()  # type: ignore[func-returns-value]

        assert through_main == _printed(capsys, whole), name
        assert through_main[0] in (0, 2), (name, through_main)


def test_an_unknown_or_missing_command_gets_the_whole_command_line(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from knowbench import cli

    for args in ([], ["--help"], ["rn"], ["--version"], ["--help", "run"]):
        assert cli._narrowed(args) is cli.app, args
    monkeypatch.setattr(sys, "argv", ["knowbench", "rn"])
    code, _, err = _printed(capsys, cli.main)
    assert code == 2 and "No such command 'rn'" in err and "Did you mean 'run'" in err, err
