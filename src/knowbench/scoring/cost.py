"""What a run's samples cost: tokens per sample and, given a price, money (KOCO-Bench Fig. 5).

Tokens come from each sample's `Usage` (what the model's server reported, summed over every
request the sample took). A sample whose usage is all zero (an offline backend, a server
that sends no usage) is estimated at 4 characters per token: the prompt's size recorded by
the run (`extra["prompt_tokens_approx"]`) plus its completion; such samples are counted in
`estimated_samples`. The knowledge a method added (rag-*, oracle) is its trace's
`knowledge_tokens` (approximate); it is already part of the prompt tokens.

Prices are per 1M tokens, input (prompt) and output (completion) apart:

- `parse_price("0.15,0.60")` reads `--price INPUT,OUTPUT`;
- `knowbench.prices.load_prices(FILE)` reads a JSON object mapping a model name (or an fnmatch pattern such
  as `"gpt-4o-mini*"`) to `{"input": 0.15, "output": 0.60}` (optional `"currency"`, default
  USD); `price_for(model, prices)` takes the exact name first, then the first pattern (in
  file order) that matches.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from knowbench.errors import UserError
from knowbench.records import SampleResult

PER_TOKENS = 1_000_000


class Price(BaseModel):
    """A model's price per 1M tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="Per 1M prompt (input) tokens.")
    output: float = Field(ge=0, description="Per 1M completion (output) tokens.")
    currency: str = "USD"

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        """The cost of that many tokens."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / PER_TOKENS

    def text(self) -> str:
        return f"{self.input:g}/{self.output:g} {self.currency} per 1M input/output tokens"


class CostSummary(BaseModel):
    """A run's token use and cost, next to its pass@1 (summary.json "cost")."""

    model_config = ConfigDict(extra="forbid")

    samples: int
    requests: int = Field(description="Model requests, where the server reported usage.")
    prompt_tokens: int
    completion_tokens: int
    estimated_samples: int = Field(description="Samples with no reported usage, estimated at "
                                   "4 characters per token.")
    tokens_per_sample: float | None
    prompt_tokens_per_sample: float | None
    completion_tokens_per_sample: float | None
    knowledge_tokens_per_sample: float | None = Field(
        description="Approximate tokens of knowledge the method added (None: it adds none).")
    pass_at_1: float | None
    price: Price | None = None
    cost: float | None = Field(default=None, description="All samples, in price.currency.")
    cost_per_sample: float | None = None


def sample_tokens(result: SampleResult) -> tuple[int, int, bool]:
    """(prompt tokens, completion tokens, estimated) of one sample (see the module doc)."""
    usage = result.usage
    if usage.total_tokens:
        return usage.prompt_tokens, usage.completion_tokens, False
    prompt = int(result.extra.get("prompt_tokens_approx", 0) or 0)
    return prompt, len(result.completion) // 4, True


def summarise_cost(results: list[SampleResult], pass_at_1: float | None,
                   price: Price | None = None) -> CostSummary:
    """Totals and per-sample means over `results`, and their cost at `price` when given."""
    prompt = completion = estimated = requests = 0
    knowledge: list[int] = []
    for result in results:
        p, c, guessed = sample_tokens(result)
        prompt, completion, estimated = prompt + p, completion + c, estimated + guessed
        requests += result.usage.requests
        trace = result.extra.get("knowledge")
        if isinstance(trace, dict) and isinstance(trace.get("knowledge_tokens"), int):
            knowledge.append(trace["knowledge_tokens"])
    count = len(results)

    def mean(total: float) -> float | None:
        return round(total / count, 2) if count else None

    cost = price.of(prompt, completion) if price is not None and count else None
    return CostSummary(
        samples=count, requests=requests, prompt_tokens=prompt, completion_tokens=completion,
        estimated_samples=estimated,
        tokens_per_sample=mean(prompt + completion) if prompt + completion else None,
        prompt_tokens_per_sample=mean(prompt), completion_tokens_per_sample=mean(completion),
        knowledge_tokens_per_sample=mean(sum(knowledge)) if knowledge else None,
        pass_at_1=pass_at_1, price=price, cost=cost,
        cost_per_sample=None if cost is None else cost / count)


def parse_price(text: str) -> Price:
    """`--price INPUT,OUTPUT` (per 1M tokens, e.g. "0.15,0.60"); `UserError` when malformed."""
    parts = [part.strip() for part in text.replace("/", ",").split(",")]
    try:
        if len(parts) != 2:
            raise ValueError
        return Price(input=float(parts[0]), output=float(parts[1]))
    except (ValueError, ValidationError):
        raise UserError(f"--price {text!r} is not INPUT,OUTPUT\n  fix: give the price per 1M "
                        "input and output tokens, e.g. --price 0.15,0.60") from None


def price_for(model: str, prices: dict[str, Price]) -> Price | None:
    """The price of `model`: its exact entry, else the first matching pattern, else None."""
    if model in prices:
        return prices[model]
    return next((price for pattern, price in prices.items() if fnmatch.fnmatchcase(model, pattern)),
                None)


def model_name(settings: dict[str, Any]) -> str:
    """The model a run's settings name ("model" of the backend, else the backend)."""
    model = settings.get("model", {})
    return str(model.get("model") or model.get("backend") or "")


def format_money(value: float | None, currency: str = "USD") -> str:
    """A cost for people: enough significant digits for fractions of a cent."""
    if value is None:
        return "—"
    symbol = "$" if currency == "USD" else ""
    suffix = "" if symbol else f" {currency}"
    if value == 0:
        return f"{symbol}0{suffix}"
    if value >= 1:
        return f"{symbol}{value:,.2f}{suffix}"
    decimals = max(2, 2 - math.floor(math.log10(value)))  # three significant digits, no exponent
    return f"{symbol}{value:.{decimals}f}{suffix}"

