"""The backend registry: one record per backend, the one place its identity lives.

A backend is a folder under ``backends/`` (its class: building, loading, its device) and a line
here: a ``BackendRecord`` that says everything the rest of accelopt asks of a backend by its name
(the language of its sources, their file names, where it runs, how FlashInfer Trace calls it).
Code outside ``backends/`` and ``cli/`` reads these fields; it never compares a backend's name
(``tests/test_layers.py`` fails on one).

A backend outside this package registers the same way from its own distribution: an entry point
in the group ``accelopt.backends`` whose value is its ``BackendRecord`` (``pkg.mod:RECORD``).

This module imports no backend class (each is imported on first use) and nothing above
``backends``: it is read by the worker process too.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from accelopt.errors import UserError
from accelopt.problems.records import Problem

ENTRY_POINT_GROUP = "accelopt.backends"


class Language(StrEnum):
    """The syntax of a backend's sources: comments (a kernel's hash ignores them), how tunables
    are declared (``tunables.py``), which code fence an agent's reply is read from."""

    C = "c"
    PYTHON = "python"


class Runs(StrEnum):
    """Where a backend's kernels run, and so which ceilings score them (``views.hardware_for``)."""

    HOST = "host"  # this machine's CPU
    GPU = "gpu"


@dataclass(frozen=True)
class FlashInferLanguage:
    """How FlashInfer Trace names a backend's solutions: its language, entry file, dependencies."""

    language: str
    entry: str
    dependencies: tuple[str, ...]


@dataclass(frozen=True)
class BackendRecord:
    """One backend's identity. ``target`` is its class, ``module:attribute``, imported on use."""

    name: str
    target: str
    language: Language
    runs: Runs = Runs.HOST
    # the file a shipped kernel of a kind has in a problem's folder: "{kind}" formatted in
    # (``baseline.c``, ``expert_triton.py``); "" where kernels of this backend are not shipped
    shipped: str = ""
    exported: str = ""  # the source's file name in an export folder; "" where it is not exported
    # how an export's runtime loads it (its manifest's "loader"): SHARED_OBJECT, compiled per
    # workload; TRITON_MODULE, imported, and compiled at its first launch for any sizes
    loader: str = ""
    # ``accelopt serve`` and ``accelopt mcp`` evaluate its kernels from clients only where the
    # operator opted in (ACCELOPT_SERVE_TRITON): their kernels run as Python in the server's user
    serve_opt_in: bool = False
    flashinfer: FlashInferLanguage | None = None
    # what a user would pick instead of writing a kernel: timed beside the kernels of a
    # ``compared`` backend as its references (the fastest is the "best reference")
    reference: bool = False
    compared: bool = False
    # ceilings this backend is measured against of its own (``accelopt hardware --backend``)
    has_hardware: bool = False

    @property
    def builds_per_workload(self) -> bool:
        """Whether an exported kernel is compiled once per workload (else once, for any sizes)."""
        return self.loader == SHARED_OBJECT

    @property
    def suffix(self) -> str:
        """The file suffix of this backend's kernel sources."""
        return ".c" if self.language is Language.C else ".py"

    def shipped_name(self, kind: str) -> str:
        """The file name of a shipped kernel of ``kind`` (``baseline``, ``expert``)."""
        return (
            self.shipped.format(kind=kind) if self.shipped else f"{kind}_{self.name}{self.suffix}"
        )


SHARED_OBJECT = "shared-object"
TRITON_MODULE = "triton-module"
_TORCH = "accelopt.backends.pytorch.backend:"

# The order is the order the error for an unknown backend lists them in; the first is the default.
BUILT_IN: tuple[BackendRecord, ...] = (
    BackendRecord(
        "cpu",
        "accelopt.backends.cpu.backend:CpuBackend",
        Language.C,
        shipped="{kind}.c",
        exported="kernel.c",
        loader=SHARED_OBJECT,
        flashinfer=FlashInferLanguage("cpp", "kernel.c", ("openmp",)),
        compared=True,
        has_hardware=True,
    ),
    BackendRecord(
        "triton",
        "accelopt.backends.triton.backend:TritonBackend",
        Language.PYTHON,
        Runs.GPU,
        shipped="{kind}_triton.py",
        exported="kernel_triton.py",
        loader=TRITON_MODULE,
        serve_opt_in=True,
        flashinfer=FlashInferLanguage("triton", "main.py", ("torch", "triton")),
        has_hardware=True,
    ),
    BackendRecord(
        "numpy",
        "accelopt.backends.numpy.backend:NumpyBackend",
        Language.PYTHON,
        flashinfer=FlashInferLanguage("python", "main.py", ("numpy",)),
        reference=True,
    ),
    BackendRecord("torch", _TORCH + "TorchBackend", Language.PYTHON, reference=True),
    BackendRecord("inductor", _TORCH + "InductorBackend", Language.PYTHON, reference=True),
    BackendRecord("max-autotune", _TORCH + "MaxAutotuneBackend", Language.PYTHON, reference=True),
)

DEFAULT_BACKEND = BUILT_IN[0].name
_BY_NAME = {r.name: r for r in BUILT_IN}
BUILT_IN_REFERENCES = tuple(r.name for r in BUILT_IN if r.reference)


@cache
def _plugins() -> tuple[tuple[BackendRecord, ...], dict[str, str]]:
    """The records other distributions register (entry points of ``ENTRY_POINT_GROUP``), and
    why each one that cannot be used cannot, by its name: it stops only what names it."""
    found, broken = [], {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            record = point.load()
        except Exception as exc:  # a plugin's own import error: its name says which
            broken[point.name] = f"cannot be imported ({type(exc).__name__}: {exc})"
            continue
        if not isinstance(record, BackendRecord) or record.name != point.name:
            broken[point.name] = "is not a BackendRecord of that name"
            continue
        found.append(record)
    return tuple(found), broken


def records() -> dict[str, BackendRecord]:
    """Every backend's record by name: the built-in ones, then those registered by others."""
    everything = dict(_BY_NAME)
    for found in _plugins()[0]:
        everything.setdefault(found.name, found)  # a plugin cannot shadow a built-in
    return everything


def names() -> tuple[str, ...]:
    return tuple(records())


def record(name: str) -> BackendRecord:
    """The record of the backend called ``name``; a UserError for a name none has."""
    found = known(name)
    if found is None:
        raise UserError(
            f"unknown backend {name!r}; the available backends are: {', '.join(names())}"
        )
    return found


def known(name: str) -> BackendRecord | None:
    """The record of ``name``, or None (for data that may name a backend no longer installed).
    A built-in name is answered without loading any other distribution's entry point."""
    found = _BY_NAME.get(name) or records().get(name)
    why = _plugins()[1].get(name) if found is None else None
    if why is not None:
        point = f"the backend {name!r} (entry point group {ENTRY_POINT_GROUP})"
        raise UserError(f"{point} {why}: fix or uninstall the package that declares it")
    return found


def reference_kinds() -> tuple[str, ...]:
    """The backends timed as references beside a ``compared`` backend's kernels."""
    return tuple(r.name for r in records().values() if r.reference)


def kernel_backends() -> tuple[str, ...]:
    """The backends whose kernels are sources a user or an agent writes (not reference kinds,
    which time a problem's own form)."""
    return tuple(r.name for r in records().values() if not r.reference)


def hardware_backends() -> tuple[str, ...]:
    """The backends with ceilings of their own to measure (``accelopt hardware --backend``)."""
    return tuple(r.name for r in records().values() if r.has_hardware)


def needs_serve_opt_in(name: str) -> bool:
    """Whether ``accelopt serve`` and ``accelopt mcp`` evaluate kernels of the backend ``name``
    (however it is spelt) only where the operator opted in (``serve_opt_in``)."""
    found = known(name.strip().lower())
    return found is not None and found.serve_opt_in


def load_class(name: str) -> type:
    """The class of the backend called ``name``, its module imported now."""
    module, _, attribute = record(name).target.partition(":")
    cls: type = getattr(importlib.import_module(module), attribute)
    return cls


def shipped_kernel(problem: Problem, kind: str, backend: str = DEFAULT_BACKEND) -> Path:
    """Where ``problem`` keeps its shipped kernel of ``kind`` for ``backend`` (it may not exist)."""
    return problem.directory / record(backend).shipped_name(kind)
