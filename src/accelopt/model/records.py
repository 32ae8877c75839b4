"""What the model path measures and reports, as plain data (JSON via ``asdict``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Timed:
    """One callable timed in an interleaved session: the median of its rounds in ms and the
    95 % interval of that median (order statistics), over ``rounds`` rounds."""

    name: str  # "eager", "inductor", "accelopt", or a site's "kernel" / "subgraph"
    ms: float
    low_ms: float
    high_ms: float
    rounds: int


@dataclass(frozen=True)
class Speedup:
    """``baseline`` time over ``candidate`` time, the median of the per-round ratios (above 1:
    the candidate is faster), with its 95 % interval."""

    candidate: str
    baseline: str
    ratio: float
    low: float
    high: float


@dataclass(frozen=True)
class Share:
    """Where the time goes: one matched problem's subgraph (``site`` set) or one remaining op
    (``label`` is the op, ``site`` empty), its time per model call in ms and its share of the
    total (a fraction)."""

    label: str
    ms: float
    share: float
    site: str = ""
    problem: str = ""


@dataclass(frozen=True)
class Site:
    """A subgraph of the model that computes a known problem, and what became of it.

    ``status``: "swapped" (its kernel runs in the compiled model), "kept" (left to Inductor:
    ``reason`` says why: numerical check failed, needs gradients, no kernel, ...).
    ``kernel``: where the kernel came from ("run 3fa2c1d0e9ab", "shipped expert", "" when none).
    ``sizes``: the problem's size parameters bound from the real shapes."""

    id: str
    problem: str
    sizes: dict[str, int]
    status: str
    reason: str = ""
    kernel: str = ""
    nodes: tuple[str, ...] = ()
    speedup: Speedup | None = None  # the kernel over the subgraph it replaced, timed interleaved


@dataclass(frozen=True)
class Unmatched:
    """A hot part of the model that no problem matched, and what an endpoint would add."""

    label: str
    share: float
    advice: str


@dataclass
class ModelResult:
    """Everything ``accelopt model profile`` / ``optimize`` found, in the order they print."""

    model: str  # the file or module:attr
    inputs: list[list[int]]  # the input shapes
    sites: list[Site] = field(default_factory=list)
    before: list[Share] = field(default_factory=list)  # eager, per site and remaining op
    after: list[Share] = field(default_factory=list)  # with accelopt's backend
    unmatched: list[Unmatched] = field(default_factory=list)
    timings: list[Timed] = field(default_factory=list)  # eager, inductor, accelopt
    speedups: list[Speedup] = field(default_factory=list)  # accelopt over eager and inductor
    check: dict[str, float | bool | str] = field(default_factory=dict)  # outputs vs eager
    notes: list[str] = field(default_factory=list)
