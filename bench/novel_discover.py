"""Stage 1 of `knowbench novel` (static: download, griffe, diff, filters) against the approach
NovelAPIBench's release takes (install both versions, import every module, introspect with
`inspect`), timed in the same run on the same libraries.

    PYTHONPATH=src python bench/novel_discover.py [--libraries more-itertools:9.1.0:10.5.0 ...]

Each library is timed three ways:
- `static cold`: knowbench's stage 1 with an empty download cache (PyPI JSON + two downloads);
- `static warm`: the same with the distributions cached (what a second run pays);
- `install+introspect`: `pip install --no-deps --target` of each version into a fresh temporary
  directory (pip's own wheel cache is left as it is, so downloads are usually cached), then a
  fresh interpreter per version importing the package and every submodule it can
  (`pkgutil.walk_packages`, test modules skipped) and reading every public function's and
  class's `inspect.signature`; then the same diff by public name.
The figures are wall-clock seconds on this machine; ratios are install+introspect / static.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knowbench.builders.novel.discover import DiscoverOptions, discover

INTROSPECT = r'''
import importlib, inspect, json, pkgutil, sys, warnings
warnings.simplefilter("ignore")
top = sys.argv[1]
root = importlib.import_module(top)
modules = [root]
for info in pkgutil.walk_packages(root.__path__, top + ".") if hasattr(root, "__path__") else []:
    parts = info.name.split(".")
    if any(p in ("tests", "test", "testing", "conftest") or p.startswith("test_") for p in parts):
        continue
    try:
        modules.append(importlib.import_module(info.name))
    except BaseException:
        pass
surface = {}
for module in modules:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
            continue
        if not (getattr(obj, "__module__", "") or "").startswith(top):
            continue
        try:
            params = [[p.name, str(p.kind), None if p.default is p.empty else repr(p.default)]
                      for p in inspect.signature(obj).parameters.values()]
        except (TypeError, ValueError):
            params = None
        surface[f"{module.__name__}.{name}"] = params
with open(sys.argv[2], "w") as handle:  # not stdout: importing submodules may print
    json.dump(surface, handle)
'''


def install_and_introspect(name: str, version: str, package: str, workdir: Path) -> tuple[dict, float, float]:
    target = workdir / f"{name}-{version}"
    clock = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--target", str(target), f"{name}=={version}"], check=True, capture_output=True)
    installed = time.perf_counter()
    result = workdir / f"{name}-{version}.json"
    subprocess.run([sys.executable, "-c", INTROSPECT, package, str(result)], capture_output=True, text=True,
                   env={**os.environ, "PYTHONPATH": str(target)}, check=True)
    return json.loads(result.read_text()), installed - clock, time.perf_counter() - installed


def introspect_diff(old: dict, new: dict) -> dict[str, int]:
    added = [k for k in new if k not in old]
    modified = [k for k in new if k in old and new[k] != old[k]]
    removed = [k for k in old if k not in new]
    return {"added": len(added), "modified": len(modified), "removed": len(removed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libraries", nargs="+",
                        default=["more-itertools:9.1.0:10.5.0:more_itertools", "numpy:1.26.4:2.0.2:numpy"],
                        help="name:old:new:package")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["KNOWBENCH_HOME"] = str(Path(scratch) / "home")  # an empty download cache
        for spec in args.libraries:
            name, old, new, package = spec.split(":")
            options = DiscoverOptions(old=old, new=new, packages=[package])
            cold = discover(name, Path(scratch) / "out" / name, options)
            warm = discover(name, Path(scratch) / "out" / name, options)
            workdir = Path(scratch) / "targets"
            old_surface, old_install, old_inspect = install_and_introspect(name, old, package, workdir)
            new_surface, new_install, new_inspect = install_and_introspect(name, new, package, workdir)
            shutil.rmtree(workdir, ignore_errors=True)
            introspect_s = old_install + old_inspect + new_install + new_inspect
            rows.append({
                "library": f"{name} {old} -> {new}",
                "static_cold_s": cold["seconds"]["total"], "static_warm_s": warm["seconds"]["total"],
                "static_warm_load_s": warm["seconds"]["load"],
                "install_s": round(old_install + new_install, 3), "introspect_s": round(old_inspect + new_inspect, 3),
                "install_introspect_s": round(introspect_s, 3),
                "ratio_vs_cold": round(introspect_s / cold["seconds"]["total"], 2),
                "ratio_vs_warm": round(introspect_s / warm["seconds"]["total"], 2),
                "static_counts": {k: cold["counts"][k] for k in ("added", "modified", "relocated", "removed", "kept")},
                "introspect_counts": introspect_diff(old_surface, new_surface),
            })
            print(json.dumps(rows[-1]), flush=True)
    header = (f"{'library':<32} {'static cold':>11} {'static warm':>11} {'install':>8} {'introspect':>10} "
              f"{'inst+intro':>10} {'ratio cold':>10} {'ratio warm':>10}")
    print(header)
    for row in rows:
        print(f"{row['library']:<32} {row['static_cold_s']:>11.2f} {row['static_warm_s']:>11.2f} "
              f"{row['install_s']:>8.2f} {row['introspect_s']:>10.2f} {row['install_introspect_s']:>10.2f} "
              f"{row['ratio_vs_cold']:>10.2f} {row['ratio_vs_warm']:>10.2f}")
    for row in rows:
        print(f"{row['library']}: static {row['static_counts']}; introspection (by public name, no "
              f"relocation) {row['introspect_counts']}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
