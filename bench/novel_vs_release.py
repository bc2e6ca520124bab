"""knowbench's own bundles for the APIs of NovelAPIBench's released bundles, field by field.

    PYTHONPATH=src python bench/novel_vs_release.py [RELEASE_DIR] [--no-execute]

RELEASE_DIR defaults to ../shared/anchors/novelapibench (the release's `bundles.jsonl` there
holds httpx.put and httpx.request). For each library of those bundles, stage 1 runs at the
release's own boundary (`release_boundary` of its manifest; the versions it resolves are
printed next to the release's), then stage 2 builds bundles for exactly the release's APIs
(`--api`, kept even without a usable example) and each field is compared.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from knowbench.builders.novel.bundles import BundleOptions, build_bundles
from knowbench.builders.novel.discover import DiscoverOptions, discover

HELPER = re.compile(r"^# --- helper: (\S+) ---$", re.MULTILINE)


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(field, ours, theirs, verdict) rows."""
    rows: list[tuple[str, str, str, str]] = []

    def row(field: str, a: Any, b: Any, verdict: str | None = None) -> None:
        rows.append((field, str(a), str(b), verdict or ("same" if a == b else "differs")))

    row("s_name", ours["s_name"], theirs["s_name"])
    ours_params = {p["name"]: p for p in ours["s_param"]}
    theirs_params = {p["name"]: p for p in theirs["s_param"]}
    row("parameter names (in order)", [p["name"] for p in ours["s_param"]], [p["name"] for p in theirs["s_param"]])
    shared = [n for n in theirs_params if n in ours_params]
    for key in ("type", "default"):
        same = sum(1 for n in shared if ours_params[n][key] == theirs_params[n][key])
        differing = [f"{n}: {ours_params[n][key]} | {theirs_params[n][key]}" for n in shared
                     if ours_params[n][key] != theirs_params[n][key]]
        row(f"parameter {key}s equal", f"{same}/{len(shared)}", "", "; ".join(differing) or "all equal")
    described = sum(1 for n in shared if ours_params[n]["description"])
    row("parameters with a description", f"{described}/{len(shared)}",
        f"{sum(1 for n in shared if theirs_params[n]['description'])}/{len(shared)}", "count")
    row("return_type", ours["return_type"], theirs["return_type"])
    statuses = lambda r: sorted(e["status"] for e in r["examples"])  # noqa: E731
    row("examples (statuses)", statuses(ours), statuses(theirs), "count")
    row("mechanism grounding", ours["mechanism"]["grounding"], theirs["mechanism"]["grounding"])
    row("mechanism length (chars)", len(ours["mechanism"]["text"]), len(theirs["mechanism"]["text"]), "count")
    first = lambda text: text.split("\n", 1)[0]  # noqa: E731
    row("implementation: definition line", first(ours["implementation"]), first(theirs["implementation"]))
    row("implementation: inlined helpers", HELPER.findall(ours["implementation"]),
        HELPER.findall(theirs["implementation"]))
    row("implementation identical", ours["implementation"] == theirs["implementation"], True)
    row("implementation length (chars)", len(ours["implementation"]), len(theirs["implementation"]), "count")
    row("is_modified", ours["is_modified"], theirs["is_modified"])
    old_names = lambda r: [p["name"] for p in r["old_parameters"] or []]  # noqa: E731
    row("old parameter names", old_names(ours), old_names(theirs))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared/anchors/novelapibench")
    parser.add_argument("--no-execute", action="store_true", help="Do not run the examples.")
    args = parser.parse_args()
    manifest = json.loads((args.release / "data/benchmark/manifest.json").read_text())
    theirs = [json.loads(line) for line in (args.release / "data/benchmark/bundles.jsonl").read_text().splitlines()]
    by_library: dict[str, list[dict[str, Any]]] = {}
    for record in theirs:
        by_library.setdefault(record["library"], []).append(record)
    with tempfile.TemporaryDirectory() as scratch:
        for library, records in by_library.items():
            release_versions = manifest["libraries"][library]
            out = Path(scratch) / library
            report = discover(release_versions["package"], out, DiscoverOptions(cutoff=manifest["release_boundary"]))
            print(f"{library}: knowbench resolves {report['versions']['old']} -> {report['versions']['new']} at "
                  f"{manifest['release_boundary']}; the release used {release_versions['old_version']} -> "
                  f"{release_versions['new_version']}")
            build_bundles(out, out, BundleOptions(apis=[r["api_name"] for r in records], execute=not args.no_execute,
                                                  keep_without_examples=True))
            ours = {json.loads(line)["api_name"]: json.loads(line) for line in (out / "bundles.jsonl").read_text().splitlines()}
            for record in records:
                print(f"\n## {record['api_name']}\n")
                print("| field | knowbench | release | verdict |\n|---|---|---|---|")
                for field, a, b, verdict in compare(ours[record["api_name"]], record):
                    print(f"| {field} | {a[:70]} | {b[:70]} | {verdict[:160]} |")


if __name__ == "__main__":
    main()
