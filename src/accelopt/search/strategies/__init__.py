"""The search strategies, by name: ``STRATEGIES`` maps each name (``SearchConfig.strategy``, the
``--strategy`` option, ``RunRecord.strategy``) to its class (``base.Strategy``).

A new strategy is one module with its class and one entry here, its name a ``StrategyName``
value; a test registers one of its own by adding an entry (``monkeypatch.setitem``), its name
a value of an enum of the test's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelopt.search.strategies.autotune import Autotune
from accelopt.search.strategies.base import Strategy, StrategyName
from accelopt.search.strategies.beam import Beam
from accelopt.search.strategies.sampling import Sampling

STRATEGIES: dict[str, type[Strategy]] = {
    StrategyName.BEAM: Beam,
    StrategyName.SAMPLING: Sampling,
    StrategyName.AUTOTUNE: Autotune,
}


def strategy_for(name: str) -> Strategy:
    """The strategy named ``name``; a ValueError naming those there are."""
    if name not in STRATEGIES:
        raise ValueError(f"no strategy {name!r}: one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name]()


def iteration_size(name: str, search: Mapping[str, Any]) -> str:
    """What one iteration of a run of strategy ``name`` does (a run that is no search, an
    `accelopt mcp` session: as a planned search's)."""
    return STRATEGIES.get(name, Strategy).iteration_size(search)
