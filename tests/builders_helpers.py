"""Helpers shared by the tests of `knowbench.builders` (import as `from builders_helpers import ...`)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "builders"
MINILIB = FIXTURES / "minilib"
# A fixed place, so the environment built for the sdist (keyed by its path) is reused.
SDIST_DIR = Path("/tmp/knowbench-test-fixtures")

_PKG_INFO = "Metadata-Version: 2.1\nName: minilib\nVersion: 0.3.0\n"


def minilib_sdist() -> Path:
    """The minilib fixture packed as an sdist, byte-identical on every call (fixed mtimes),
    so building its environment happens once and nothing is written into the source tree."""
    SDIST_DIR.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        files = sorted(p for p in MINILIB.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        entries = [(f"minilib-0.3.0/{p.relative_to(MINILIB).as_posix()}", p.read_bytes()) for p in files]
        entries.append(("minilib-0.3.0/PKG-INFO", _PKG_INFO.encode()))
        for name, data in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            archive.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    # gzip stores a timestamp too: zero it so the bytes never change
    data = data[:4] + b"\0\0\0\0" + data[8:]
    target = SDIST_DIR / "minilib-0.3.0.tar.gz"
    if not target.is_file() or target.read_bytes() != data:
        target.write_bytes(data)
    return target


def benchmark_engine(bench_path: Path, workers: int = 2):
    """The engine `knowbench certify` uses by default: fork servers in the benchmark's own
    environment, its imports preloaded, sandboxed."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.benchmark.preload import preload_modules
    from knowbench.execution import create_engine, resolve_sandbox
    from knowbench.execution.environments import ensure_env

    bench = load_benchmark(bench_path)
    python = ensure_env(bench.manifest.requirements).python
    return create_engine("forkserver", resolve_sandbox("auto", hidden=[bench_path]), workers, python,
                         preload_modules(bench.tasks, bench.manifest.preload), bench.manifest.requirements)
