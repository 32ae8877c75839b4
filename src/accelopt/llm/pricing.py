"""Dollars per million tokens, per model: a built-in table the config can override.

The table holds list prices of hosted models (input, output), as published by their providers in
2025; check them against your provider and set ``price_in``/``price_out`` in the config when they
differ (or when you run your own server: its cost is yours to state). A model not in the table
and not priced in the config has an unknown cost: reported as "unknown", never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelopt.llm.config import Endpoint

# (input $/M tokens, output $/M tokens)
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "openai/gpt-oss-120b": (0.10, 0.50),
    "openai/gpt-oss-20b": (0.05, 0.20),
    "qwen/qwen3-coder": (0.22, 0.95),
}


@dataclass(frozen=True)
class Price:
    input_per_m: float
    output_per_m: float

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_m + tokens_out * self.output_per_m) / 1e6


def price_for(endpoint: Endpoint) -> Price | None:
    """The config's price when it gives both; else the table's for the model (also without a
    provider prefix such as ``openai/``); else None (unknown)."""
    if endpoint.price_in is not None and endpoint.price_out is not None:
        return Price(endpoint.price_in, endpoint.price_out)
    model = endpoint.model
    for name in (model, model.split("/", 1)[-1], model.lower()):
        if name in PRICES:
            table_in, table_out = PRICES[name]
            return Price(
                endpoint.price_in if endpoint.price_in is not None else table_in,
                endpoint.price_out if endpoint.price_out is not None else table_out,
            )
    return None
