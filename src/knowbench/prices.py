"""Price files and the `--price` / `--prices` options (see knowbench.scoring.cost)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from knowbench.errors import UserError
from knowbench.scoring.cost import Price, parse_price, price_for


def load_prices(path: Path) -> dict[str, Price]:
    """A price file (see knowbench.scoring.cost); `UserError` naming the file and entry when wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UserError(f"cannot read the price file {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}: not JSON ({error.msg})\n  fix: write an object "
                        'such as {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}') from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object mapping model names to prices")
    prices = {}
    for model, entry in data.items():
        try:
            prices[model] = Price.model_validate(entry)
        except ValidationError as error:
            problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                                for e in error.errors())
            raise UserError(f"{path}: the price of {model!r} is wrong ({problem})\n  fix: give "
                            '{"input": PER_1M_INPUT_TOKENS, "output": PER_1M_OUTPUT_TOKENS}') from None
    return prices


def choose_price(model: str, price: str | None = None, prices_file: Path | None = None) -> Price | None:
    """The price given on a command line: `--price INPUT,OUTPUT` or the entry for `model` in
    `--prices FILE` (not both); None when neither is given. `UserError` when the file has
    no entry for the model."""
    if price is not None and prices_file is not None:
        raise UserError("--price and --prices both given\n  fix: pass one of them")
    if price is not None:
        return parse_price(price)
    if prices_file is None:
        return None
    prices = load_prices(prices_file)
    chosen = price_for(model, prices)
    if chosen is None:
        raise UserError(f"{prices_file} has no price for model {model!r} (entries: "
                        f"{', '.join(prices) or 'none'})\n  fix: add an entry (the name or a "
                        "pattern such as \"gpt-4o*\"), or pass --price INPUT,OUTPUT")
    return chosen
