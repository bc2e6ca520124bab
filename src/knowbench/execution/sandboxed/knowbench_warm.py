"""Warm-ups of the libraries a fork server preloaded (standard library only, like the runner).

A process forked from a server that holds pandas pays for its first `DataFrame`, `groupby` or
`sort_values` far more than for its second: the library imports submodules on first use,
fills its caches and, on CPython 3.11+, specialises the bytecode of every function it runs,
and every one of those writes lands on a page the child shares with its server, which the
kernel then copies. evalplus' and bigcodebench's children pay the same. A server that has run
the library's common paths once before forking leaves its children far less of that to do
(docs/execution.md, *Library warm-ups*).

What a warm-up may do, and what it must not:
- it is a fixed repertoire of the library's everyday calls, the same for every benchmark: it
  never runs a benchmark's code (a reference's calls, warmed, would tell a sample which APIs
  the reference uses), and it runs only for a library the server already imported;
- it keeps nothing: every object it makes is garbage when it returns (the server collects it
  before its snapshot), it changes no option, global state or random generator, and it runs
  with warnings ignored in a `catch_warnings` block, whose exit makes the warning registries
  start afresh. What stays is what any earlier use of the library would leave: submodules the
  library imports on first use, its caches of code and types, specialised bytecode;
- a warm-up that fails is skipped (a new release renamed a call): only speed is lost.
  `warm_up(strict=True)` raises instead, for the tests.

Measured per library on calls no warm-up here makes (CPU per forked child, cold -> warmed):
pandas 28.5-29.4 -> 23.9-25.0 ms, sympy 49-51 -> 29, pyplot 57 -> 52; numpy gains 0.2 ms and
scipy under 1 ms, so they have no entry. `warm_up` stops starting steps once it has spent
`budget_s`, so a future release that makes the steps slow delays a server's start by about
that much (and the step under way).
"""

import sys
import time
import warnings

_MARK = "knowbench_warm"  # every label a warm-up makes starts with it (the tests look for it)


def _pandas(pd):
    a, b, c = _MARK + "_a", _MARK + "_b", _MARK + "_c"
    frame = pd.DataFrame({a: [1, 2, 3, 1], b: [1.0, 2.5, None, 4.0], c: ["x", "y", "x", "z"]})
    yield lambda: frame.groupby(a)[b].agg(["sum", "mean", "max", "min", "count"])
    yield lambda: frame.groupby(c).sum()
    yield lambda: frame.sort_values([a, b], ascending=[False, True]).head(2)
    yield lambda: frame.merge(frame, on=a, how="left")
    yield lambda: frame.describe()
    yield lambda: frame[b].rolling(2).mean()
    yield lambda: frame.pivot_table(index=a, values=b, aggfunc="sum")
    yield lambda: pd.DataFrame([{a: 1, c: "x"}, {a: 2, c: "y"}])
    yield lambda: frame.to_dict(orient="records")
    yield lambda: list(frame[a].items())
    yield lambda: frame.apply(len, axis=1)
    series = pd.Series([1, 2, 3], index=[a, b, c], name=a)
    yield lambda: (series.value_counts(), series.cumsum(), series.isna().any(), series.tolist())
    yield lambda: pd.concat([frame, frame], ignore_index=True).dropna().fillna(0)
    yield lambda: frame.reset_index().set_index(a).loc[1]
    yield lambda: frame.iloc[1:3][[a, c]].copy().astype({a: "float64"})
    yield lambda: (frame[a] > 1) & frame[c].isin(["x"])
    yield lambda: frame[frame[a] > 1][c].str.upper()
    yield lambda: pd.to_datetime(pd.Series(["2024-01-02", "2024-03-04"])).dt.year
    yield lambda: pd.testing.assert_frame_equal(frame, frame.copy())
    yield lambda: pd.testing.assert_series_equal(series, series.copy())
    yield lambda: frame.equals(frame) and frame.shape and frame.columns.tolist() and repr(frame)


def _sympy(sympy):
    x = sympy.Symbol(_MARK + "_x")
    yield lambda: sympy.simplify((x ** 2 - 1) / (x - 1))
    yield lambda: sympy.diff(sympy.sin(x) * x, x)
    yield lambda: sympy.solve(x ** 2 - 4, x)
    yield lambda: sympy.expand((x + 1) ** 3)
    yield lambda: sympy.Rational(1, 3) + sympy.sqrt(2) * sympy.pi
    yield lambda: str(sympy.Matrix([[1, x], [0, 1]]).inv())
    # sympy memoises expressions in a cache of its own: the warm-up's must not stay in it.
    yield lambda: sympy.core.cache.clear_cache()


def _matplotlib(figures):
    # The object-oriented API on an Agg canvas: pyplot's state (its figures, the backend it
    # chose) stays untouched.
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def draw():
        figure = figures.Figure()
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        axes.plot([1, 2, 3], [3, 1, 2], label=_MARK)
        axes.bar([1, 2], [2, 1])
        axes.set_title(_MARK)
        axes.set_xlabel(_MARK)
        axes.legend()
        figure.canvas.draw()
    yield draw


# module -> generator of steps (each a callable), given that module: run only where the
# server has imported it (for matplotlib, where the benchmark plots: the figure module, which
# pyplot imports; matplotlib alone imports a tenth of what drawing needs).
WARM_UPS = {"pandas": _pandas, "sympy": _sympy, "matplotlib.figure": _matplotlib}


def warm_up(strict=False, budget_s=5.0):
    """Run the warm-up of every library in `WARM_UPS` that is already imported; returns their
    names. A step that raises is skipped (the library's other steps still run), unless
    `strict`. No step starts once `budget_s` seconds have gone (the library being warmed then
    is not counted)."""
    warmed, started = [], time.monotonic()
    for name, steps in WARM_UPS.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        complete = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                for step in steps(module):
                    if time.monotonic() - started > budget_s:
                        complete = False
                        break
                    try:
                        step()
                    except Exception:
                        if strict:
                            raise
            except Exception:  # (making the steps' inputs failed)
                if strict:
                    raise
                continue
        if not complete:
            break
        warmed.append(name)
    return warmed
