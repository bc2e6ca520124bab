"""The report's charts, drawn with matplotlib and returned as inline SVG text.

Each function takes plain data and returns one `<svg>` element (no XML prolog, no DOCTYPE,
no metadata block, every id prefixed with the chart's name so several charts can live in
one HTML page). Text stays text (svg.fonttype "none") and ids are salted with a constant,
so the same data gives byte-identical SVG. Nothing is fetched: matplotlib's SVG has no
external references.
"""

from __future__ import annotations

import functools
import io
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from knowbench.scoring.cost import format_money
from knowbench.scoring.taxonomy import KOCO_CATEGORIES, LABELS

# Colour-blind-safe palette (Okabe-Ito), then greys.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000", "#999999", "#666666")
LABEL_COLOURS = dict(zip(("pass", *LABELS), ("#2ca02c", "#7f7f7f", "#d62728", "#ff7f0e",
                                              "#9467bd", "#8c564b", "#1f77b4", "#e377c2",
                                              "#bcbd22", "#17becf", "#c7c7c7", "#393b79"),
                         strict=True))
_RC = {"svg.fonttype": "none", "svg.hashsalt": "knowbench", "font.size": 9,
       "axes.spines.top": False, "axes.spines.right": False, "font.family": "sans-serif"}


def _styled(chart: Callable[..., str]) -> Callable[..., str]:
    """Draw the whole chart under the report's matplotlib settings (rcParams are read as
    artists are created, so the context must span the drawing, not only the saving)."""

    @functools.wraps(chart)
    def draw(*args: Any, **kwargs: Any) -> str:
        with matplotlib.rc_context(_RC):
            return chart(*args, **kwargs)

    return draw


@dataclass(frozen=True)
class Series:
    """One run as the charts see it."""

    name: str
    per_domain: Mapping[str, float | None]  # domain -> pass@1 (None: no function task)
    pass_at_k: Mapping[int, float]  # k -> pass@k, only the ks every task has samples for
    failures: Mapping[str, int]  # "pass" and each label -> number of function samples
    koco: Mapping[str, int]  # KOCO category -> number of failed function samples
    tokens_per_sample: float | None  # mean prompt + completion tokens
    pass_at_1: float | None
    cost_per_sample: float | None = None  # in `currency`; None: the run has no price
    currency: str | None = None


@_styled
def domain_bars(series: Sequence[Series], chart_id: str = "chart-domains") -> str:
    """Grouped bars: pass@1 per domain, one bar per run."""
    domains = sorted({d for s in series for d, v in s.per_domain.items() if v is not None})
    figure, axes = _figure(max(6.0, 1.2 * len(domains) + 2), 3.6)
    width = 0.8 / max(1, len(series))
    for index, run in enumerate(series):
        values = [100 * (run.per_domain.get(d) or 0.0) for d in domains]
        positions = [i - 0.4 + width * (index + 0.5) for i in range(len(domains))]
        axes.bar(positions, values, width, label=_wrap(run.name), color=PALETTE[index % len(PALETTE)])
    axes.set_xticks(range(len(domains)), domains, rotation=20 if len(domains) > 6 else 0)
    axes.set_ylabel("pass@1 (%)")
    axes.set_ylim(0, 105)
    axes.set_title("pass@1 by domain")
    _legend(figure, axes, len(series))
    return _svg(figure, chart_id, "pass@1 by domain, one bar per run")


@_styled
def failure_stacks(series: Sequence[Series], chart_id: str = "chart-failures") -> str:
    """Horizontal stacked bars per run: the share of function samples that passed and of
    each failure label (NovelAPIBench's failure-class stacks)."""
    keys = ["pass", *LABELS]
    return _stacks(series, keys, lambda run: run.failures, LABEL_COLOURS, chart_id,
                   "share of function samples: passed, and failed by label",
                   "function samples by outcome (%)")


@_styled
def koco_stacks(series: Sequence[Series], chart_id: str = "chart-koco") -> str:
    """Stacked bars per run over KOCO-Bench's error categories (failed samples only)."""
    colours = dict(zip(KOCO_CATEGORIES, PALETTE, strict=False))
    return _stacks(series, list(KOCO_CATEGORIES), lambda run: run.koco, colours, chart_id,
                   "failed function samples by KOCO-Bench error category",
                   "failed samples by KOCO category (%)")


@_styled
def corpus_size_curves(lines: Mapping[str, Sequence[tuple[int, float | None]]],
                       baseline: float | None = None, chart_id: str = "chart-corpus-size") -> str:
    """pass@1 (%) against corpus tokens, one line per method (`knowbench study corpus-size`);
    `baseline` (the model without knowledge) as a dashed line."""
    figure, axes = _figure(6.0, 3.6)
    for index, (method, points) in enumerate(lines.items()):
        shown = sorted((tokens, 100 * value) for tokens, value in points if value is not None)
        axes.plot([t for t, _ in shown], [v for _, v in shown], marker="o", label=method,
                  color=PALETTE[index % len(PALETTE)])
    if baseline is not None:
        axes.axhline(100 * baseline, color="#999999", linestyle="--", linewidth=1,
                     label="no knowledge")
    axes.set_xscale("log")
    axes.set_xlabel("corpus tokens")
    axes.set_ylabel("pass@1 (%)")
    axes.set_ylim(0, 105)
    axes.set_title("pass@1 against corpus size")
    _legend(figure, axes, len(lines) + (baseline is not None))
    return _svg(figure, chart_id, "pass@1 against corpus tokens, one line per method")


@_styled
def pass_at_k_curves(series: Sequence[Series], chart_id: str = "chart-passk") -> str:
    """pass@k against k for every run (a single point when a run has one sample per task)."""
    figure, axes = _figure(6.0, 3.6)
    ks: set[int] = set()
    for index, run in enumerate(series):
        points = sorted(run.pass_at_k.items())
        ks |= {k for k, _ in points}
        axes.plot([k for k, _ in points], [100 * v for _, v in points], marker="o",
                  label=_wrap(run.name), color=PALETTE[index % len(PALETTE)])
    axes.set_xlabel("k (samples drawn per task)")
    axes.set_ylabel("pass@k (%)")
    axes.set_ylim(0, 105)
    if ks:
        axes.set_xticks(sorted(ks) if len(ks) <= 12 else _thin(sorted(ks)))
    axes.set_title("pass@k")
    _legend(figure, axes, len(series))
    return _svg(figure, chart_id, "pass@k curves per run")


@_styled
def cost_scatter(series: Sequence[Series], chart_id: str = "chart-cost") -> str:
    """pass@1 against tokens spent per sample, one point per run (KOCO-Bench's Figure 5),
    on a log x axis."""
    points = [(run, run.tokens_per_sample, run.pass_at_1) for run in series
              if run.tokens_per_sample and run.pass_at_1 is not None]
    return _tradeoff(points, chart_id, "tokens per sample (prompt + completion, log scale)",
                     "no token counts recorded", lambda value: f"{value:,.0f}",
                     "pass@1 against tokens per sample, one point per run")


@_styled
def money_scatter(series: Sequence[Series], chart_id: str = "chart-money") -> str:
    """pass@1 against money spent per sample, one point per run that has a price (runs in
    other currencies than the first priced run's are left out), on a log x axis."""
    currency = next((run.currency for run in series if run.cost_per_sample), None)
    points = [(run, run.cost_per_sample, run.pass_at_1) for run in series
              if run.cost_per_sample and run.pass_at_1 is not None and run.currency == currency]
    return _tradeoff(points, chart_id, f"cost per sample ({currency or 'no price'}, log scale)",
                     "no run has a price (--price / --prices)",
                     lambda value: format_money(value, currency or "USD"),
                     "pass@1 against cost per sample, one point per priced run",
                     "performance against money spent")


def _tradeoff(plotted: list[tuple[Series, float, float]], chart_id: str, xlabel: str, empty: str,
              tick: Callable[[float], str], description: str,
              title: str = "performance against inference cost") -> str:
    figure, axes = _figure(6.0, 3.8)
    low = min((x for _, x, _ in plotted), default=1.0)
    high = max((x for _, x, _ in plotted), default=1.0)
    for index, (run, x, score) in enumerate(plotted):
        axes.scatter([x], [100 * score], s=60, color=PALETTE[index % len(PALETTE)], label=run.name,
                     zorder=3)
        # Labels point into the plot: right of points in the left half, left of the others.
        left_half = high == low or math.log10(x / low) <= math.log10(high / low) / 2
        axes.annotate(_wrap(run.name, 24), (x, 100 * score), textcoords="offset points",
                      xytext=(6 if left_half else -6, 6), ha="left" if left_half else "right",
                      fontsize=7)
    if plotted:
        axes.set_xscale("log")
        axes.set_xlim(10 ** (math.log10(low) - 0.3), 10 ** (math.log10(high) + 0.3))
        # Ticks at 1, 2 and 5 of each decade, so a range narrower than a decade is labelled too.
        axes.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        # Plain numbers: matplotlib's default log labels go through mathtext, 3x slower.
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: tick(value)))
        axes.xaxis.set_minor_formatter(NullFormatter())
    else:
        axes.text(0.5, 0.5, empty, ha="center", transform=axes.transAxes)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("pass@1 (%)")
    axes.set_ylim(0, 105)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    return _svg(figure, chart_id, description)


def _stacks(series: Sequence[Series], keys: list[str],
            counts_of: Callable[[Series], Mapping[str, int]], colours: Mapping[str, str],
            chart_id: str, title: str, xlabel: str) -> str:
    names = [_wrap(run.name, 28) for run in series]
    lines = sum(name.count("\n") + 1 for name in names)
    figure, axes = _figure(7.5, 1.2 + 0.3 * max(2, lines) + 0.2 * len(series))
    left = [0.0] * len(series)
    used = [key for key in keys if any(counts_of(run).get(key, 0) for run in series)]
    for key in used:
        shares = []
        for run in series:
            counts = counts_of(run)
            total = sum(counts.values())
            shares.append(100 * counts.get(key, 0) / total if total else 0.0)
        axes.barh(names, shares, left=left, color=colours.get(key, "#999999"), label=key)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    if not used:
        axes.text(50, 0, "nothing to show", ha="center", va="center")
    axes.set_xlim(0, 100)
    axes.invert_yaxis()
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    if used:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    return _svg(figure, chart_id, title)


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.add_subplot()


def _legend(figure: Figure, axes: Axes, runs: int) -> None:
    """With two or more runs: the legend below the plot, where it cannot hide a bar or a
    point, in as many columns as the figure's width holds (labels are wrapped by `_wrap`),
    the figure grown by its rows so the plot keeps its height."""
    if runs < 2:
        return
    handles, labels = axes.get_legend_handles_labels()
    widest = max(len(line) for label in labels for line in label.splitlines())
    entry_pt = 8 * 0.62 * widest + 34  # 8 pt text, marker and padding
    width_pt = figure.get_figwidth() * 72
    columns = max(1, min(runs, int(0.95 * width_pt // entry_pt)))
    rows = math.ceil(runs / columns)
    lines = sum(max(label.count("\n") + 1 for label in labels[r * columns:(r + 1) * columns])
                for r in range(rows))
    figure.set_figheight(figure.get_figheight() + 0.16 * lines + 0.1 * rows + 0.1)
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, frameon=False,
                  fontsize=8)


def _wrap(name: str, width: int = 34) -> str:
    """A run name broken into lines of at most `width` characters (at spaces or " · ")."""
    return "\n".join(textwrap.wrap(name, width, break_long_words=True, break_on_hyphens=False)) or name


def _thin(ks: list[int]) -> list[int]:
    step = math.ceil(len(ks) / 10)
    return ks[::step]


def _svg(figure: Figure, chart_id: str, description: str) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{chart_id}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{chart_id}-\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{chart_id}-\1"', text)
    return text.replace(
        "<svg ", f'<svg id="{chart_id}" role="img" aria-label="{description}" ', 1).strip()
