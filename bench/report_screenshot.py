"""Regenerate docs/images/report-1400.png: the HTML report of four runs at 1400 CSS pixels.

Runs the four replay models of tests/report_runs.py on examples/basic with the real
`knowbench run --label` (a finished run in the work directory is resumed, not redone), writes
their report, opens it in headless Chromium at 1400 px, checks that nothing scrolls sideways
and no chart text is cut off (the check of tests/test_report.py), and saves the top of the
page as a palette PNG small enough to keep in the repository.

    python bench/report_screenshot.py [--work runs/report-screenshot] [--height 2300]
                                      [--out docs/images/report-1400.png]

With `--report FILE` it checks and photographs that report instead (the demo's, for the
README: `--report runs/demo/report.html --out docs/images/demo-report.png` after `make demo`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from PIL import Image  # noqa: E402  (matplotlib's dependency)

from knowbench.report.html import write_report  # noqa: E402
from options import count  # noqa: E402
from report_runs import four_replay_runs, measure, screenshot  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "report-screenshot")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "report-1400.png")
    parser.add_argument("--height", type=count(1), default=2300, help="CSS pixels of the page kept")
    parser.add_argument("--report", type=Path, help="an existing report to check and photograph")
    arguments = parser.parse_args()
    arguments.work = arguments.work.resolve()
    arguments.work.mkdir(parents=True, exist_ok=True)
    if arguments.report is not None:
        report = arguments.report.resolve()
    else:
        runs = four_replay_runs(arguments.work / "runs")
        report = write_report(runs, arguments.work / "report.html")
    measured = measure(report, arguments.work)
    wide = [box for box in measured["containers"] if box["scroll"] > box["client"]]
    if measured["page"]["scroll"] > measured["page"]["client"] or wide or measured["clipped"]:
        print(f"the report does not fit 1400 px: {measured}", file=sys.stderr)
        return 1
    raw = screenshot(report, arguments.work / "report-1400-full.png", arguments.work,
                     height=arguments.height)
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(raw) as image:
        image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
            arguments.out, optimize=True)
    print(f"{report}\n{arguments.out}: {arguments.out.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
