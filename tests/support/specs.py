"""The one factory of test ceilings: ``make_spec(**overrides)``, a ``HardwareSpec`` with fixed
figures near this machine's (2 cores), so that no test depends on a measurement.

Importable as ``specs``: tests/conftest.py puts this folder on ``sys.path`` (a script run on its
own, such as tests/ray/cluster_driver.py, does so itself). The defaults are those of the ``hw``
fixture; a test whose assertions depend on a figure, the name or a provenance passes it as an
override, so that it does not rely on these defaults."""

from __future__ import annotations

from typing import Any

from accelopt.hardware.spec import HardwareSpec

DEFAULTS: dict[str, Any] = {
    "name": "test-cpu",
    "backend": "cpu",
    "matmul_rate": 545e9,
    "vector_rate": 140e9,
    "bandwidth": 45e9,
    "cores": 2,
    "llc_bytes": 32 << 20,
}


def make_spec(**overrides: Any) -> HardwareSpec:
    """Fixed test ceilings, with ``overrides`` (any ``HardwareSpec`` field) replacing defaults."""
    unknown = set(overrides) - set(HardwareSpec.model_fields)
    if unknown:  # HardwareSpec ignores unknown keys: a misspelt figure would go unnoticed
        raise TypeError(f"make_spec: not HardwareSpec fields: {sorted(unknown)}")
    return HardwareSpec(**{**DEFAULTS, **overrides})
