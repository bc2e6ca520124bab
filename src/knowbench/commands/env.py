"""`knowbench env`: build, list and prune benchmark environments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from knowbench.benchmark.load import load_benchmark
from knowbench.execution.environments import ensure_env, list_envs, prune_envs

env_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                      help="Benchmark environments: one cached virtualenv per set of requirements.")
out = Console()


@env_app.command("build")
def build(benchmark: Annotated[Path, typer.Argument(help="Benchmark directory.")]) -> None:
    """Build (or find) the environment a benchmark's tests run in."""
    bench = load_benchmark(benchmark)
    env = ensure_env(bench.manifest.requirements)
    info = env.info()
    out.print(f"{bench.name}: environment {env.key} at {env.path}")
    out.print(f"python {info['python']} · {len(info['installed'])} packages · requirements: "
              f"{', '.join(env.requirements)}")


@env_app.command("list")
def list_() -> None:
    """List built environments."""
    table = Table(title_justify="left")
    for header in ("key", "python", "requirements", "built", "path"):
        table.add_column(header)
    for env in list_envs():
        info = env.info()
        table.add_row(env.key, str(info["python"]), ", ".join(env.requirements), str(info["built"]),
                      str(env.path))
    out.print(table)


@env_app.command("prune")
def prune(keep: Annotated[list[Path] | None, typer.Option(
        "--keep", help="Keep the environment of this benchmark (repeatable).")] = None) -> None:
    """Delete every environment not needed by the --keep benchmarks (default: delete all)."""
    keys = {ensure_env(load_benchmark(path).manifest.requirements).key for path in keep or []}
    removed = prune_envs(keys)
    out.print(f"removed {len(removed)} environment(s)" +
              (": " + ", ".join(env.key for env in removed) if removed else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
