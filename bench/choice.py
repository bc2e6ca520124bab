"""Seconds to parse a multiple-choice reply of 10 KB / 100 KB / 1 MB, and agreement on KOCO-Bench.

Replies are built from KOCO-Bench's released replies (default: the anchors in
../shared/anchors/koco-qa), concatenated and repeated up to each size:
  real       every released reply, one after another (boxes, markers, prose)
  cut-off    only the replies without a boxed answer: long reasoning, no answer
  capitals   the cut-off replies with "(B) A C, D and E." after every sentence: standalone
             capitals and "(B)" in prose everywhere, the adversarial case
Each is parsed by knowbench's parser and, as the baseline, by the parser of a git revision
(`--baseline`, default the last revision before the linear parser) in this same run. The
baseline grows with the square of the length, so it is run only up to `--baseline-max-kb`
(default 100 KB); the larger sizes print "-". The last column is time(largest)/time(previous
size): about 10 for a parser linear in the length, about 100 for one quadratic in it.

With the released replies at hand it also prints agreement: knowbench (and the baseline)
against KOCO's own `pred_letters` and against the careful reader's verdicts in
tests/fixtures/koco_choice_verdicts.jsonl.

    python bench/choice.py [--koco DIR] [--baseline REV] [--baseline-max-kb 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from knowbench.choice import parse_choice  # noqa: E402
from koco_replies import koco_replies  # noqa: E402
from options import count  # noqa: E402

DEFAULT_KOCO = ROOT.parent / "shared" / "anchors" / "koco-qa"
VERDICTS = ROOT / "tests" / "fixtures" / "koco_choice_verdicts.jsonl"
SIZES = {"10 KB": 10_000, "100 KB": 100_000, "1 MB": 1_000_000}
Parser = Callable[[str, list[str], bool], list[str]]


def load_rows(koco: Path) -> list[dict[str, Any]]:
    rows = koco_replies(koco)
    if not rows:
        sys.exit(f"no KOCO-Bench results under {koco} (expected results/<model>/results_*.json)")
    return rows


def baseline_parser(revision: str) -> Parser:
    source = subprocess.run(["git", "show", f"{revision}:src/knowbench/choice.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("baseline_choice")
    exec(compile(source, f"{revision}:choice.py", "exec"), module.__dict__)
    return module.parse_choice  # type: ignore[no-any-return]


def corpora(rows: list[dict[str, Any]]) -> dict[str, str]:
    real = "\n\n".join(row["pred_raw"] for row in rows)
    cut_off = "\n\n".join(row["pred_raw"] for row in rows if "\\boxed{" not in row["pred_raw"])
    capitals = re.sub(r"([.!?])(\s)", r"\1 (B) A C, D and E.\2", cut_off)
    return {"real": real, "cut-off": cut_off, "capitals": capitals}


def sized(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


def seconds(parser: Parser, reply: str, repeat: int) -> float:
    """CPU seconds of this process per parse (best of `repeat` rounds of at least 0.2 s each
    where one parse is faster): CPU time, not wall time, so that other work on a shared
    machine does not count."""
    letters = list("ABCDEFGH")
    started = time.process_time()
    parser(reply, letters, True)
    calls = max(1, int(0.2 / max(time.process_time() - started, 1e-6)))
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(calls):
            parser(reply, letters, True)
        best = min(best, (time.process_time() - started) / calls)
    return best


def timing(rows: list[dict[str, Any]], baseline: Parser | None, baseline_max: int,
           repeat: int) -> None:
    names = list(SIZES)
    print(f"{'corpus':<10} {'parser':<10} " + " ".join(f"{name:>10}" for name in names)
          + f" {'100KB/10KB':>10} {'1MB/100KB':>10}")
    for corpus, text in corpora(rows).items():
        for label, parser in (("knowbench", parse_choice), ("baseline", baseline)):
            if parser is None:
                continue
            times = {name: seconds(parser, sized(text, size), repeat)
                     if label == "knowbench" or size <= baseline_max else None
                     for name, size in SIZES.items()}
            cells = " ".join(f"{t:>10.4f}" if t is not None else f"{'-':>10}" for t in times.values())
            ratios = " ".join(
                f"{big / small:>10.1f}" if big is not None and small else f"{'-':>10}"
                for small, big in ((times["10 KB"], times["100 KB"]), (times["100 KB"], times["1 MB"])))
            print(f"{corpus:<10} {label:<10} {cells} {ratios}", flush=True)


def agreement(rows: list[dict[str, Any]], parsers: dict[str, Parser]) -> None:
    verdicts = {(e["model"], e["framework"], e["id"]): e
                for e in map(json.loads, VERDICTS.read_text().splitlines())}
    read = [row for row in rows if (row["model"], row["framework"], row["id"]) in verdicts]
    cut_off = [row for row in read
               if verdicts[(row["model"], row["framework"], row["id"])]["kind"] == "cut_off"]
    print(f"\n{len(rows)} replies; {len(read)} of them have a careful reader's verdict "
          f"({len(cut_off)} cut off before answering)")
    for label, parser in parsers.items():
        ours = {id(row): parser(row["pred_raw"], row["options"], row["multiple"]) for row in rows}
        differ = sum(ours[id(row)] != sorted(row["pred_letters"]) for row in rows)
        agree = sum(ours[id(row)] == verdicts[(row["model"], row["framework"], row["id"])]["verdict"]
                    for row in read)
        spurious = sum(len(ours[id(row)]) for row in cut_off)
        print(f"{label:<10} differs from KOCO on {differ}/{len(rows)}; agrees with the reader on "
              f"{agree}/{len(read)}; letters on cut-off replies: {spurious}")
    koco_agree = sum(sorted(row["pred_letters"])
                     == verdicts[(row["model"], row["framework"], row["id"])]["verdict"] for row in read)
    koco_spurious = sum(len(row["pred_letters"]) for row in cut_off)
    print(f"{'KOCO':<10} agrees with the reader on {koco_agree}/{len(read)}; letters on cut-off "
          f"replies: {koco_spurious}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--koco", type=Path, default=DEFAULT_KOCO,
                        help="a KOCO-Bench domain_knowledge_understanding directory (problems/, results/)")
    parser.add_argument("--baseline", default="a30eefa",
                        help="git revision whose parser is the baseline ('none' to skip)")
    parser.add_argument("--baseline-max-kb", type=count(1), default=100)
    parser.add_argument("--repeat", type=count(1), default=3)
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    rows = load_rows(args.koco)
    baseline = None if args.baseline == "none" else baseline_parser(args.baseline)
    if not args.no_timing:
        print(f"CPU seconds per reply (best of {args.repeat}); baseline = {args.baseline}, run up to "
              f"{args.baseline_max_kb} KB")
        timing(rows, baseline, args.baseline_max_kb * 1000, args.repeat)
    agreement(rows, {"knowbench": parse_choice, **({"baseline": baseline} if baseline else {})})


if __name__ == "__main__":
    main()
