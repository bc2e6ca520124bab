"""knowbench: build, run and diagnose knowledge-grounded code-generation benchmarks.

The public Python API (docs/api.md). Everything the command line does is one of these calls:

    load a benchmark   load_benchmark, write_benchmark, Benchmark, preload_modules
    run                run_benchmark, TimePolicy, RunSummary, RunDirectory (a run on disk);
                       create_backend + BackendOptions (BACKENDS), get_method (METHODS),
                       create_engine (ENGINES), resolve_sandbox (SANDBOXES)
    build              mine, MineOptions, SourceRequest; IMPORTERS
    certify            certify_benchmark
    report             write_report
    records            SampleResult, Execution, Limits, SamplingParams
    errors, plug-ins   UserError, Registry

Names load on first use, so `import knowbench` stays cheap; the modules behind them are
internals and may move.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__: str  # looked up on first use (`__getattr__`)

_PUBLIC: dict[str, str] = {
    # load a benchmark
    "Benchmark": "knowbench.benchmark.load",
    "load_benchmark": "knowbench.benchmark.load",
    "write_benchmark": "knowbench.benchmark.load",
    "preload_modules": "knowbench.benchmark.preload",
    # run
    "run_benchmark": "knowbench.run",
    "RunSummary": "knowbench.run",
    "TimePolicy": "knowbench.run",
    "RunDirectory": "knowbench.store",
    "BACKENDS": "knowbench.models",
    "BackendOptions": "knowbench.models",
    "create_backend": "knowbench.models",
    "METHODS": "knowbench.methods",
    "get_method": "knowbench.methods",
    "ENGINES": "knowbench.execution",
    "create_engine": "knowbench.execution",
    "SANDBOXES": "knowbench.execution",
    "resolve_sandbox": "knowbench.execution",
    # build and certify
    "mine": "knowbench.builders.mine",
    "MineOptions": "knowbench.builders.mine",
    "SourceRequest": "knowbench.builders.mine",
    "IMPORTERS": "knowbench.builders",
    "certify_benchmark": "knowbench.builders.certify",
    # report
    "write_report": "knowbench.report.html",
    # cost and contamination
    "Price": "knowbench.scoring.cost",
    "summarise_cost": "knowbench.scoring.cost",
    "load_prices": "knowbench.prices",
    "check_contamination": "knowbench.diagnosis.contamination",
    "CddSettings": "knowbench.scoring.contamination",
    # records
    "SampleResult": "knowbench.records",
    "Execution": "knowbench.records",
    "Limits": "knowbench.records",
    "SamplingParams": "knowbench.records",
    "Usage": "knowbench.records",
    "CallUsage": "knowbench.records",
    # errors and plug-ins
    "UserError": "knowbench.errors",
    "Registry": "knowbench.registry",
}

__all__ = [
    "BACKENDS",
    "ENGINES",
    "IMPORTERS",
    "METHODS",
    "SANDBOXES",
    "BackendOptions",
    "Benchmark",
    "CallUsage",
    "CddSettings",
    "Execution",
    "Limits",
    "MineOptions",
    "Price",
    "Registry",
    "RunDirectory",
    "RunSummary",
    "SampleResult",
    "SamplingParams",
    "SourceRequest",
    "TimePolicy",
    "Usage",
    "UserError",
    "__version__",
    "certify_benchmark",
    "check_contamination",
    "create_backend",
    "create_engine",
    "get_method",
    "load_benchmark",
    "load_prices",
    "mine",
    "preload_modules",
    "resolve_sandbox",
    "run_benchmark",
    "summarise_cost",
    "write_benchmark",
    "write_report",
]


def _version() -> str:
    # Read on first use: importing importlib.metadata is most of `import knowbench` (30-40 ms).
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("knowbench")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'knowbench' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from knowbench.benchmark.load import Benchmark, load_benchmark, write_benchmark
    from knowbench.benchmark.preload import preload_modules
    from knowbench.builders import IMPORTERS
    from knowbench.builders.certify import certify_benchmark
    from knowbench.builders.mine import MineOptions, SourceRequest, mine
    from knowbench.diagnosis.contamination import check_contamination
    from knowbench.errors import UserError
    from knowbench.execution import ENGINES, SANDBOXES, create_engine, resolve_sandbox
    from knowbench.methods import METHODS, get_method
    from knowbench.models import BACKENDS, BackendOptions, create_backend
    from knowbench.prices import load_prices
    from knowbench.records import CallUsage, Execution, Limits, SampleResult, SamplingParams, Usage
    from knowbench.registry import Registry
    from knowbench.report.html import write_report
    from knowbench.run import RunSummary, TimePolicy, run_benchmark
    from knowbench.scoring.contamination import CddSettings
    from knowbench.scoring.cost import Price, summarise_cost
    from knowbench.store import RunDirectory
