"""What a measurement of ceilings tells the person waiting for it, on stderr.

- ``progress``: one whole line per step (what is measured, round i/n, the figure and the best so
  far), ended and flushed at once, so that a terminal, a pipe and a log file all show it as it
  happens (a first measurement can take minutes on a busy machine).
- ``warn``: one sentence that stands out (``warning:`` in bold yellow on a terminal, plain in a
  pipe), never wrapped into several lines.
- ``busy_warning`` and ``changes`` are the sentences (pure functions of the specs).

stderr is looked up at each call: a live display that redirects it (``search.progress``) and a
test's capture both get the lines.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from accelopt.hardware.figures import CEILINGS, in_units, label
from accelopt.hardware.spec import HardwareSpec

PREFIX = "ceilings: "


def progress(line: str) -> None:
    """One step of a measurement, as a whole line on stderr."""
    print(f"{PREFIX}{line}", file=sys.stderr, flush=True)


def warn(sentence: str) -> None:
    """A warning line that stands out on a terminal and stays one line in a pipe."""
    text = Text("warning: ", style="bold yellow") + Text(sentence)
    Console(stderr=True, highlight=False).print(text, soft_wrap=True)


def figures(spec: HardwareSpec) -> str:
    """``matmul 246.7 GFLOP/s, vector 120.0 GFLOP/s, bandwidth 50.0 GB/s``."""
    return ", ".join(f"{label(c)} {in_units(c, getattr(spec, c))}" for c in CEILINGS)


def changes(old: HardwareSpec, new: HardwareSpec) -> str:
    """Each ceiling, old -> new where it moved: ``matmul 104.8 -> 246.7 GFLOP/s, vector 35.0
    GFLOP/s (unchanged), ...``."""
    parts = []
    for c in CEILINGS:
        before, after = getattr(old, c), getattr(new, c)
        if after == before:
            parts.append(f"{label(c)} {in_units(c, after)} (unchanged)")
        else:
            parts.append(f"{label(c)} {before / 1e9:,.1f} → {in_units(c, after)}")
    return ", ".join(parts)


def busy_warning(spec: HardwareSpec) -> str:
    """The sentence for a provisional spec: the machine was busy, what was seen, the figures are
    provisional, and what to do."""
    seen = "; ".join(spec.doubts) or "its rounds or its load"
    return (
        f"the machine was busy while its ceilings were measured ({seen}), so they are "
        "provisional and may be too low (kernels may read above 100% of peak): accelopt measures "
        "them again, keeping the higher figures, once the machine is quiet; for ceilings you can "
        "trust now, stop the other work and run `accelopt hardware --measure`"
    )


def announce(spec: HardwareSpec, line: str) -> None:
    """The end of a measurement: ``line`` (what was measured, the figures), then the warning
    when the spec is provisional."""
    progress(f"{line}{'; PROVISIONAL' if spec.provisional else ''}")
    if spec.provisional:
        warn(busy_warning(spec))
