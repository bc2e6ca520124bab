"""The public Python API: the example in docs/api.md runs as written, and `knowbench` exposes
its names without importing the library up front."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def _python(code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def test_the_run_example_in_docs_api_md_prints_a_perfect_pass_at_1() -> None:
    example = _python_blocks(API_DOC.read_text())[0]
    done = _python(example)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pass@1 = 1.00"


def test_the_backend_example_in_docs_api_md_registers_a_selectable_backend() -> None:
    example = _python_blocks(API_DOC.read_text())[1]
    check = (example + "\nimport asyncio\nfrom knowbench.models import create_backend\n"
             "backend = create_backend('constant:hello')\n"
             "print(asyncio.run(backend.generate(None, [], None, 0)).text)\n")
    done = _python(check)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"


def test_every_public_name_resolves_and_import_knowbench_loads_none_of_them() -> None:
    done = _python(
        "import sys, knowbench\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('knowbench.'))\n"
        "missing = [n for n in knowbench.__all__ if getattr(knowbench, n, None) is None]\n"
        "print(loaded, missing)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
