"""Measured CPU specs, cached per machine as JSON under ``cache_dir()/hardware/``.

The machine key is a short sha256 of the CPU model, the number of CPUs in the affinity mask,
/etc/machine-id (when readable), the hostname and the CPU target kernels are built for
(``ACCELOPT_CPU_TARGET``). A corrupt cache file, or one written before the spec held the ISA, is
ignored and re-measured.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

from accelopt import settings
from accelopt.hardware import devicelock
from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name
from accelopt.hardware.measure import measure_cpu
from accelopt.hardware.spec import HardwareSpec

MACHINE_ID = Path("/etc/machine-id")


def _machine_id() -> str:
    try:
        return MACHINE_ID.read_text().strip()
    except OSError:
        return ""


def machine_key() -> str:
    """A short identity of this machine, as the CPU ceilings depend on it."""
    parts = [cpu_model_name(), str(available_cpus()), _machine_id(), socket.gethostname()]
    parts.append(settings.cpu_target() or "native")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cpu_spec_path() -> Path:
    """Where this machine's measured spec is cached."""
    return settings.cache_dir() / "hardware" / f"{machine_key()}.json"


def read_spec(path: Path) -> HardwareSpec | None:
    """A cached spec, or None when it is missing, unreadable or corrupt."""
    try:
        return HardwareSpec.model_validate_json(path.read_text())
    except (OSError, ValueError):  # missing, unreadable or corrupt: ValidationError is a ValueError
        return None


def write_spec(path: Path, spec: HardwareSpec) -> Path:
    """Write ``spec`` to ``path`` atomically (a reader never sees half a file); return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(spec.model_dump_json(indent=2))
    os.replace(tmp, path)
    return path


def save_cpu_spec(spec: HardwareSpec) -> Path:
    """Write ``spec`` as this machine's cached spec; return the file."""
    return write_spec(cpu_spec_path(), spec)


def measure_and_cache(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU (see ``measure_cpu``) and cache the result for this machine.

    The device lock is held exclusively meanwhile: no evaluation of ours runs beside the
    micro-benchmarks (other programs on the machine still can; measure on a quiet machine).
    """
    with devicelock.exclusive(devicelock.lock_path("cpu")):
        spec = measure_cpu(threads)
    save_cpu_spec(spec)
    return spec


def load_cpu_spec(measure_if_missing: bool = True) -> HardwareSpec | None:
    """This machine's cached spec; when there is none (or it is corrupt), measure and cache it,
    or return None if ``measure_if_missing`` is False."""
    spec = read_spec(cpu_spec_path())
    if spec is not None and not spec.isa:  # cached by an accelopt that did not detect the ISA
        spec = None
    if spec is None and measure_if_missing:
        return measure_and_cache()
    return spec
