"""Backends: one per kernel language and device. ``cpu`` compiles C11 + OpenMP kernels."""

from accelopt.backends.base import Backend, BuildResult, get_backend
from accelopt.backends.kernel import Kernel, normalize_source
from accelopt.backends.status import Status

__all__ = ["Backend", "BuildResult", "Kernel", "Status", "get_backend", "normalize_source"]
