"""`knowbench` on the command line: the console script and `python -m knowbench`.

The command-line interface is imported with the garbage collector paused. Importing it builds
about 90,000 objects the collector tracks (pydantic's schemas, typer, numpy, the registries)
and next to no garbage, yet the collector would run over a hundred times meanwhile, once over
the whole heap: 30-35 ms of the 0.24 s the import takes. What the import built is then frozen
(`gc.freeze`), so the collections a long run makes no longer walk it again and again.
`knowbench.cli.main` stays the plain entry point for callers that import the CLI themselves.
"""

from __future__ import annotations

import gc


def main() -> None:
    """Import the CLI with collections paused, freeze what it built, and run it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from knowbench.cli import main as cli_main
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    cli_main()


if __name__ == "__main__":
    main()
