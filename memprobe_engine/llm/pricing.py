"""Prices per model role, in currency units per million tokens, for cost estimates and reports.

Given on the command line as ``--price ROLE=IN/OUT`` (``--price default=0.15/0.60`` prices every role)
or in a config file's ``[prices]`` table (``recovery_judge = "2.50/10.00"``); the flag wins. A role
without a price of its own takes ``default``'s; a role with none has no cost shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memprobe_engine.errors import ConfigError

DEFAULT = "default"


@dataclass(frozen=True)
class Price:
    prompt_per_million: float
    completion_per_million: float

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.prompt_per_million + completion_tokens * self.completion_per_million) / 1e6


def parse_price(value: str, where: str) -> Price:
    """``IN/OUT`` per million tokens; ConfigError naming ``where`` and the form."""
    parts = value.split("/")
    try:
        if len(parts) != 2:
            raise ValueError
        prompt, completion = float(parts[0]), float(parts[1])
    except ValueError:
        raise ConfigError(f"{where} {value!r}: give the price per million prompt and completion tokens as IN/OUT, "
                          f"e.g. 0.15/0.60.") from None
    if prompt < 0 or completion < 0:
        raise ConfigError(f"{where} {value!r}: prices cannot be negative.")
    return Price(prompt, completion)


def load_prices(config_file: Path | None, flags: Sequence[str] | None) -> dict[str, Price]:
    """The config's ``[prices]``, then ``--price ROLE=IN/OUT`` flags over it."""
    prices: dict[str, Price] = {}
    if config_file is not None:
        from memprobe_engine.llm.config import read_config_file

        table = read_config_file(config_file).get("prices", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{config_file}: [prices] must be a table of ROLE = \"IN/OUT\".")
        for role, value in table.items():
            prices[str(role)] = parse_price(str(value), f"{config_file} [prices] {role}")
    for flag in flags or []:
        role, sep, value = flag.partition("=")
        if not sep or not role.strip():
            raise ConfigError(f"--price {flag!r}: use ROLE=IN/OUT per million tokens, e.g. --price default=0.15/0.60.")
        prices[role.strip()] = parse_price(value.strip(), f"--price {role.strip()}")
    return prices


def price_of(prices: dict[str, Price], role: str) -> Price | None:
    return prices.get(role) or prices.get(DEFAULT)
