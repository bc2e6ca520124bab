"""knowbench: build, run and diagnose knowledge-grounded code-generation benchmarks."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("knowbench")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
