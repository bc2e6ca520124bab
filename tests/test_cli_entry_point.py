"""The `knowbench` console script: the entry point pyproject.toml declares offers every command.

The command tests elsewhere run this same entry point (helpers.run_knowbench) and register
nothing themselves, so a command dropped from the CLI fails them as well as this list.
"""

from __future__ import annotations

import json
import subprocess

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
