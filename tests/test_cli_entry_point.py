"""The `knowbench` console script: the entry point pyproject.toml declares offers every command.

The command tests elsewhere run this same entry point (helpers.run_knowbench) and register
nothing themselves, so a command dropped from the CLI fails them as well as this list.
"""

from __future__ import annotations

from helpers import run_knowbench

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

