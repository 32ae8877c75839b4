"""Measured CPU specs, cached per machine as JSON under ``cache_dir()/hardware/``.

The machine key is a short sha256 of the CPU model, the number of CPUs in the affinity mask,
/etc/machine-id (when readable), the hostname and the CPU target kernels are built for
(``ACCELOPT_CPU_TARGET``). A corrupt cache file, or one written before the spec held the ISA, is
ignored and re-measured. Two processes that find no spec measure it once: each holds an exclusive
lock on ``<key>.json.lock`` next to the entry while it reads, measures if still missing, and
writes, so the second waits and then reads what the first wrote (``ensure_cpu_spec``).

Ceilings are ceilings: an honest kernel must never beat one. So a cached figure only ever goes up,
except by an explicit ``measure_and_cache`` (``accelopt hardware --measure``):

- a ``provisional`` spec (measured while the machine was busy) is measured again by
  ``load_cpu_spec`` once the machine is quiet (at most every REFRESH_AFTER_S), keeping the
  higher of the old and new figure of each ceiling;
- ``raise_ceiling`` re-measures every ceiling together when a kernel beat one (the profiling
  service calls it before calling the kernel SUSPICIOUS) and keeps the higher figure of each, so
  that the spec (and its key) changes once, not once per ceiling; one that another process
  already raised meanwhile is taken from the cache, not measured again;
- a library that beats a ceiling (``library_check``) has every ceiling re-measured too.

Every measurement says on stderr what it does as it goes (``notices``), and ends with its figures
(old -> new for a re-measurement); one that comes out provisional ends with a warning that says
what was seen and what to do.

Each figure's provenance says which measurement it came from, and a figure taken from another
measurement brings along how sure that measurement was of it (``disagreement``, ``confidence``).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import accelopt.hardware.devicelock as devicelock
import accelopt.hardware.notices as notices
from accelopt import settings
from accelopt.hardware.consistency import rates_checked
from accelopt.hardware.cpu_spec import measure_cpu
from accelopt.hardware.cpuinfo import available_cpus, cpu_model_name
from accelopt.hardware.figures import Figure, Measurement, in_units, label
from accelopt.hardware.library_check import beaten, library_figures, with_library
from accelopt.hardware.load import machine_load
from accelopt.hardware.measure import CEILINGS, measure_figures
from accelopt.hardware.spec import MEASUREMENT_NOTES, HardwareSpec

# What the profiling service calls when a kernel beat a ceiling: (spec, ceiling beaten, why) -> the
# spec with every ceiling re-measured (the higher figure of each kept), saved as this machine's.
Remeasure = Callable[[HardwareSpec, str, str], HardwareSpec]

# The ceiling that bounds a problem of each roofline bound (``hardware.roofline.BOUNDS``).
BOUND_CEILINGS = {"matmul": "matmul_rate", "vector": "vector_rate", "memory": "bandwidth"}
KEPT = "kept from an earlier measurement, higher than the re-measurement"
# A re-measurement before accusing a kernel repeats each micro-benchmark this many times as often
# as a first measurement: a ceiling on a shared machine moves from one second to the next, and
# the kernel may have run in a good one (a few seconds, at most once per ceiling per evaluator).
REMEASURE_REPEAT_FACTOR = 2

# A provisional spec is measured again at most this often (seconds since it was written).
REFRESH_AFTER_S = 600

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


def spec_lock_path() -> Path:
    """The lock file next to this machine's cached spec: held while the spec is read, measured
    when missing and written, so that two first runs measure once."""
    path = cpu_spec_path()
    return path.with_name(f"{path.name}.lock")


def measure_and_cache(threads: int | None = None) -> HardwareSpec:
    """Measure this CPU (see ``measure_cpu``) and cache the result for this machine, replacing
    what was cached.

    The device lock is held exclusively meanwhile: no evaluation of ours runs beside the
    micro-benchmarks (other programs on the machine still can: then the spec is provisional).
    """
    with devicelock.exclusive(spec_lock_path()):
        return _measure_and_save(threads)


def _measure_and_save(threads: int | None = None) -> HardwareSpec:
    """Measure (under the device lock) and cache; the caller holds the spec lock."""
    start = time.monotonic()
    notices.progress(
        "measuring this machine's ceilings once (matmul, vector, bandwidth; then a check "
        "against libraries); cached for later runs"
    )
    with devicelock.exclusive(devicelock.lock_path("cpu")):
        spec = rates_checked(library_checked(measure_cpu(threads)))
        save_cpu_spec(spec)
    took = f"measured in {time.monotonic() - start:.0f} s and cached"
    notices.announce(spec, f"{took}: {notices.figures(spec)}")
    return spec


def library_checked(spec: HardwareSpec) -> HardwareSpec:
    """``spec`` checked against what libraries reach here (``library_check``): when one beats a
    ceiling, every ceiling is re-measured (that measurement was disturbed), and a ceiling still
    beaten is raised to the library's figure. Called with the device lock held."""
    notices.progress("checking the ceilings against libraries (NumPy's and torch's sgemm, a copy)")
    best = library_figures(spec.cores)
    found = beaten({c: getattr(spec, c) for c in CEILINGS}, best)
    for name, figure in best.items():
        where = "above" if name in found else "below"
        notices.progress(
            f"{figure.source} reached {in_units(name, figure.rate)}, {where} the "
            f"{label(name)} ceiling {in_units(name, getattr(spec, name))}"
        )
    if found:
        notices.progress("re-measuring every ceiling together")
        measured = measure_figures(CEILINGS, spec.cores, repeat_factor=REMEASURE_REPEAT_FACTOR)
        sources = " and ".join(best[name].source for name in found)
        note = f"re-measured on {_today()}: {sources} beat the first figure"
        spec, before = remeasured(spec, measured, note), spec
        notices.progress(f"re-measured: {notices.changes(before, spec)}")
    return with_library(spec, best)


def remeasured(spec: HardwareSpec, measured: Measurement, note: str) -> HardwareSpec:
    """``spec`` after a re-measurement of its ceilings: the higher figure of each (``note`` on
    those taken). A quiet spec stays quiet (its figures are at least a quiet measurement's); a
    provisional one takes the re-measurement's verdict, what it saw and its load."""
    raised = keep_higher(spec, measured.figures, note=note)
    if not spec.provisional:
        return raised
    load = {**raised.provenance, "load": measured.describe()}
    update = {"provisional": measured.provisional, "doubts": measured.doubts, "provenance": load}
    return raised.model_copy(update=update)


def _cached() -> HardwareSpec | None:
    """The cached spec, or None when missing, corrupt, or cached before the ISA was detected."""
    spec = read_spec(cpu_spec_path())
    return spec if spec is not None and spec.isa else None


def ensure_cpu_spec() -> HardwareSpec:
    """This machine's cached spec, measured and cached first when there is none. The spec lock
    is held throughout: a second process waits, then reads what the first one measured."""
    with devicelock.exclusive(spec_lock_path()):
        cached = _cached()
        return cached if cached is not None else _measure_and_save()


def load_cpu_spec(
    measure_if_missing: bool = True, refresh_provisional: bool = True
) -> HardwareSpec | None:
    """This machine's cached spec; when there is none (or it is corrupt), measure and cache it
    (``ensure_cpu_spec``), or return None if ``measure_if_missing`` is False. A provisional spec
    is measured again when the machine is quiet now (unless ``refresh_provisional`` is False),
    each ceiling keeping the higher of its old and new figure."""
    spec = _cached()
    if spec is None:
        return ensure_cpu_spec() if measure_if_missing else None
    if spec.provisional and refresh_provisional and _due() and not machine_load().busy:
        return refresh(spec)
    return spec


def _due(path: Path | None = None) -> bool:
    """Whether the cached spec is old enough to measure again: a machine whose measurements stay
    provisional (a noisy VM) is re-measured every REFRESH_AFTER_S, not by every command."""
    try:
        age = time.time() - (path or cpu_spec_path()).stat().st_mtime
    except OSError:
        return True
    return age >= REFRESH_AFTER_S


def refresh(old: HardwareSpec) -> HardwareSpec:
    """Measure again (under the device lock), keep the higher figure of each ceiling, cache."""
    with devicelock.exclusive(devicelock.lock_path("cpu")):
        cached = read_spec(cpu_spec_path())
        if cached is not None and cached.isa and not cached.provisional:
            return cached  # another process refreshed it while this one waited for the lock
        notices.progress(
            "the cached ceilings are provisional and the machine is quiet now: measuring them "
            "again, keeping the higher figure of each"
        )
        new = measure_cpu()
        spec = library_checked(keep_higher(new, figures_of(old), note=f"{KEPT} of {_today()}"))
        spec = rates_checked(spec)
        save_cpu_spec(spec)
    notices.announce(spec, f"re-measured together: {notices.changes(old, spec)}")
    return spec


def raise_ceiling(spec: HardwareSpec, ceiling: str, why: str) -> HardwareSpec:
    """A kernel beat ``ceiling`` (``why``: how, for the provenance and the message): re-measure
    every ceiling of this machine now, together (under the device lock, exclusive), and return
    ``spec`` with the higher of its figure and the new one for each, cached as this machine's
    spec (with whatever higher figures the cache got meanwhile). When another process raised
    that ceiling in the cache meanwhile, its figures are taken and nothing is measured: the
    spec changes once, not once per process or per ceiling. Says on stderr what it does and
    each ceiling's old -> new."""
    beaten_line = f"a kernel beat the {label(ceiling)} ceiling ({why})"
    with devicelock.exclusive(devicelock.lock_path("cpu")):
        cached = read_spec(cpu_spec_path())
        if cached is not None and not same_device(cached, spec):
            cached = None
        if cached is not None and getattr(cached, ceiling) > getattr(spec, ceiling):
            raised = keep_higher(spec, figures_of(cached))
            meanwhile = "another process re-measured every ceiling meanwhile"
            notices.progress(f"{beaten_line}; {meanwhile}: {notices.changes(spec, raised)}")
            return raised
        notices.progress(f"{beaten_line}: re-measuring every ceiling together")
        measured = measure_figures(CEILINGS, spec.cores, repeat_factor=REMEASURE_REPEAT_FACTOR)
        note = f"raised by a re-measurement on {_today()} ({why})"
        raised = remeasured(spec, measured, note)
        if cached is not None:
            raised = keep_higher(raised, figures_of(cached))
        raised = rates_checked(raised)
        save_cpu_spec(raised)
    notices.announce(raised, f"re-measured together: {notices.changes(spec, raised)}")
    return raised


def describe_figure(ceiling: str, value: float) -> str:
    """A ceiling in the units people read: GB/s or GFLOP/s."""
    return in_units(ceiling, value)


def _today() -> str:
    return datetime.date.today().isoformat()


def figures_of(spec: HardwareSpec) -> dict[str, Figure]:
    """The ceilings of ``spec`` as figures (value, spread, provenance, and how sure)."""
    return {
        name: Figure(
            getattr(spec, name),
            spec.spread.get(name, 0.0),
            spec.provenance.get(name, ""),
            spec.disagreement.get(name),
            spec.confidence.get(name),
        )
        for name in CEILINGS
    }


def keep_higher(
    spec: HardwareSpec, figures: dict[str, Figure], note: str | None = None
) -> HardwareSpec:
    """``spec`` with each ceiling in ``figures`` that is higher than its own taken from there
    (its value, spread, provenance prefixed with ``note``, disagreement and confidence: how sure
    a figure is belongs to the measurement it came from, not to the spec it joins). A ceiling
    raised to a library's figure and now measured above it loses its ``library_scale``."""
    update: dict[str, object] = {}
    notes: dict[str, dict[str, Any]] = {
        "spread": dict(spec.spread),
        "disagreement": dict(spec.disagreement),
        "confidence": dict(spec.confidence),
        "provenance": dict(spec.provenance),
        "library_scale": dict(spec.library_scale),
    }
    for name, figure in figures.items():
        if figure.value <= getattr(spec, name):
            continue
        update[name] = figure.value
        notes["library_scale"].pop(name, None)  # above the library's figure: no longer raised
        notes["spread"][name] = figure.spread
        notes["provenance"][name] = _noted(note, figure.provenance)
        _set_or_drop(notes["disagreement"], name, figure.disagreement)
        _set_or_drop(notes["confidence"], name, figure.confidence)
    if not update:
        return spec
    return spec.model_copy(update={**update, **notes})


def _set_or_drop(notes: dict[str, Any], name: str, value: object | None) -> None:
    """Record ``value`` for ``name``; a figure without one leaves none (not the replaced one's)."""
    if value is None:
        notes.pop(name, None)
    else:
        notes[name] = value


def _noted(note: str | None, provenance: str) -> str:
    if note is None:
        return provenance
    start = provenance.find("measured: ")  # one note at a time, the latest
    return f"{note}: {provenance[max(start, 0) :]}"


def same_device(a: HardwareSpec, b: HardwareSpec) -> bool:
    """Whether two specs describe the same device (their ceilings aside)."""
    ignore = {*CEILINGS, *MEASUREMENT_NOTES}
    return a.model_dump(exclude=ignore) == b.model_dump(exclude=ignore)


def is_measured_here(spec: HardwareSpec) -> bool:
    """Whether ``spec`` is this machine's measured and cached CPU spec (what ``load_cpu_spec``
    returns): not a datasheet, not a GPU's, not ceilings fixed by hand (as tests do)."""
    if not spec.on_host:
        return False
    if not all("measured: " in spec.provenance.get(name, "") for name in CEILINGS):
        return False
    cached = read_spec(cpu_spec_path())
    return cached is not None and cached.key() == spec.key()


def remeasurer_for(spec: HardwareSpec) -> Remeasure | None:
    """``raise_ceiling`` for this machine's measured spec; None for any other spec."""
    return raise_ceiling if is_measured_here(spec) else None
