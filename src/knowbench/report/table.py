"""Terminal tables of a run's scores (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from knowbench.scoring.cost import CostSummary, format_money
from knowbench.scoring.metrics import MetricSet, Scores, percent, percent_interval


def _row(name: str, metrics: MetricSet, ks: list[int], api: bool = False) -> list[str]:
    return [name, str(metrics.tasks), str(metrics.samples),
            *(percent(metrics.pass_at.get(k)) for k in ks),
            percent(metrics.apr), percent(metrics.pass_any), percent(metrics.accuracy),
            *((percent(metrics.api_acc), percent(metrics.param_corr)) if api else ())]


def scores_table(scores: Scores, title: str = "") -> Table:
    """Overall (micro), per-domain and macro ± std rows, and the 95% bootstrap interval of
    the overall pass@1 and ACC; percentages."""
    ks = [k for k in scores.ks if scores.overall.pass_at.get(k) is not None] or scores.ks[:1]
    api = scores.overall.api_tasks > 0  # tasks with a target-API spy: API_acc, Param_corr
    table = Table(title=title or None, title_justify="left")
    for header in ("", "tasks", "samples", *(f"pass@{k}" for k in ks), "APR", "Pass@any", "ACC",
                   *(("API_acc", "Param_corr") if api else ())):
        table.add_column(header, justify="left" if not header else "right")
    for domain, metrics in scores.by_domain.items():
        table.add_row(*_row(domain, metrics, ks, api))
    table.add_section()
    table.add_row(*_row("all (micro)", scores.overall, ks, api), style="bold")
    intervals = ["95% CI (tasks)", "", ""]
    for key in (*(f"pass@{k}" for k in ks), "apr", "pass_any", "accuracy"):
        interval = scores.ci.get(key)
        intervals.append(percent_interval(interval.low, interval.high) if interval else "")
    intervals.extend([""] * (2 if api else 0))
    if scores.ci:
        table.add_row(*intervals, style="dim")
    macro = ["macro ± std", str(len(scores.by_domain)), ""]
    for key in (*(f"pass@{k}" for k in ks), "apr", "pass_any", "accuracy"):
        stat = scores.macro.get(key)
        if stat is None or stat.mean is None:
            macro.append("—")
        else:
            std = "" if stat.std is None else f" ± {percent(stat.std)}"
            macro.append(f"{percent(stat.mean)}{std}")
    macro.extend(["—"] * (2 if api else 0))
    table.add_row(*macro)
    return table


def choice_rows(scores: Scores) -> list[tuple[str, str, MetricSet]]:
    """(group kind, name, metrics) of every framework and domain that has choice tasks, then
    the overall row: what the multiple-choice tables show (terminal and HTML report)."""
    frameworks = {name: metrics for name, metrics in scores.by_framework.items() if metrics.choice_tasks}
    domains = {name: metrics for name, metrics in scores.by_domain.items() if metrics.choice_tasks}
    if frameworks == domains:  # every framework is its own domain (KOCO-Bench): one row each
        return [*(("framework = domain", name, m) for name, m in frameworks.items()),
                ("all", "all (micro)", scores.overall)] if scores.overall.choice_tasks else []
    rows = [("framework", name, metrics) for name, metrics in frameworks.items()]
    rows += [("domain", name, metrics) for name, metrics in domains.items()]
    return [*rows, ("all", "all (micro)", scores.overall)] if scores.overall.choice_tasks else []


def choice_table(scores: Scores, title: str = "") -> Table:
    """Multiple-choice scores per framework and domain: ACC (exact set), the unanswered rate
    and partial credit (Jaccard), percentages."""
    table = Table(title=title or None, title_justify="left")
    for header in ("", "", "choice tasks", "samples", "ACC", "unanswered", "Jaccard"):
        table.add_column(header, justify="left" if header in ("", ) else "right")
    for group, name, metrics in choice_rows(scores):
        if group == "all":
            table.add_section()
        table.add_row(group if group != "all" else "", name, str(metrics.choice_tasks),
                      str(metrics.samples), percent(metrics.accuracy), percent(metrics.unanswered),
                      percent(metrics.jaccard), style="bold" if group == "all" else None)
    return table


def print_scores(console: Console, scores: Scores, title: str = "") -> None:
    console.print(scores_table(scores, title))
    if scores.overall.choice_tasks:
        console.print(choice_table(scores, "multiple choice: ACC = exact set; unanswered = no "
                                           "letter named; Jaccard = partial credit"))


def cost_line(cost: CostSummary) -> str:
    """One line of what a run's samples cost (the terminal summary of `run` and `score`)."""
    if cost.tokens_per_sample is None:
        return "cost: no tokens recorded"
    parts = [f"{cost.tokens_per_sample:,.0f} tokens/sample (prompt "
             f"{cost.prompt_tokens_per_sample or 0:,.0f}"]
    if cost.knowledge_tokens_per_sample:
        parts[0] += f", of which ~{cost.knowledge_tokens_per_sample:,.0f} knowledge"
    parts[0] += f"; completion {cost.completion_tokens_per_sample or 0:,.0f})"
    if cost.samples and cost.requests > cost.samples:
        parts.append(f"{cost.requests / cost.samples:.1f} model requests/sample")
    if cost.estimated_samples:
        parts.append(f"{cost.estimated_samples} of {cost.samples} samples estimated at "
                     "4 characters per token (no usage reported)")
    if cost.price is not None:
        currency = cost.price.currency
        parts.append(f"{format_money(cost.cost_per_sample, currency)}/sample, "
                     f"{format_money(cost.cost, currency)} in all at {cost.price.text()}")
    parts.append(f"pass@1 {percent(cost.pass_at_1)}%" if cost.pass_at_1 is not None else "pass@1 —")
    return "cost: " + " · ".join(parts)
