"""A fault is never a verdict: which evaluations the kernel did not earn.

An evaluation the service could not do (``KernelMeasurement.service``: a build without disk, a
worker killed from outside, a lost node, a harness fault) is retried, then reported as "the
evaluation could not be done"; it is never cached, served from a cache, or used to rank. Caches
written before the field existed hold such failures under the kernel's name: they are known by
the words their errors carry (``not_earned``).
"""

from __future__ import annotations

import re

from accelopt.profiling.measurement import KernelMeasurement

ATTEMPTS = 3  # an evaluation the service failed is tried this many times in all
# What the errors of older service failures say (cached before ``service`` existed)
_LEGACY = re.compile(
    r"No space left on device|Read-only file system|Disk quota exceeded|harness error: "
    r"|the worker died from SIG(KILL|TERM|INT|HUP|QUIT)\b|a worker process failed to start"
    r"|the job was lost \d+ times"
)


def not_earned(found: KernelMeasurement) -> bool:
    """Whether ``found`` is the service's failure, not the kernel's verdict."""
    error = getattr(found, "error", "")
    return bool(found.service) or bool(_LEGACY.search(error))


def could_not(reason: str) -> str:
    """The error an evaluation the service could not do reports."""
    return f"the evaluation could not be done: {reason}"
