"""Where a model's time goes on this machine: its Dynamo graph run node by node, each node inside
a ``torch.profiler.record_function`` range named after the matched problem it belongs to, else
after its operation; the ranges' CPU time per model call, with shares."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from accelopt.model import graphs as g
from accelopt.model.records import Share, Unmatched

PREFIX = "accelopt::"
HOT = 0.05  # a part of the model with at least this share of its time is hot
ENDPOINT_ADVICE = (
    "no problem of the suite or the workspace computes it; with an endpoint that answers "
    "(ACCELOPT_LLM_BASE_URL or --config), `accelopt model optimize` imports it as a problem of "
    "its own, searches a kernel for it with the agents and swaps that in"
)


def op_label(node: Any) -> str:
    """A remaining node's label: its canonical operation, else its target's name."""
    name = g.op(node)
    if name:
        return name
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def profile(
    gm: Any, inputs: Sequence[Any], sites: Mapping[str, tuple[str, str]], calls: int = 5
) -> list[Share]:
    """Per label, the CPU time per call of ``gm`` on ``inputs``; ``sites`` maps a node's name
    to (site id, problem) for the nodes of matched subgraphs."""
    import torch

    class Labelled(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            if n.op in ("placeholder", "output", "get_attr"):
                return super().run_node(n)
            label = sites[n.name][0] if n.name in sites else op_label(n)
            with torch.profiler.record_function(PREFIX + label):
                return super().run_node(n)

    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with torch.inference_mode():
        Labelled(gm).run(*inputs)  # warm: first-call allocations and lazy inits
        with _quiet_stderr():  # kineto prints a line on stderr as it starts and stops
            prof.start()
        try:
            for _ in range(calls):
                Labelled(gm).run(*inputs)
        finally:
            with _quiet_stderr():
                prof.stop()
    ms = {
        e.key[len(PREFIX) :]: e.cpu_time_total / 1e3 / calls
        for e in prof.key_averages()
        if e.key.startswith(PREFIX)
    }
    return shares(ms, {site: problem for site, problem in sites.values()})


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (C++ writes there, not to sys.stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def shares(ms: Mapping[str, float], problems: Mapping[str, str]) -> list[Share]:
    """Shares of the total, largest first; a label that is a site id carries its problem."""
    total = sum(ms.values()) or 1.0
    found = [
        Share(label, t, t / total, label if label in problems else "", problems.get(label, ""))
        for label, t in ms.items()
    ]
    return sorted(found, key=lambda s: -s.ms)


def unmatched(before: Sequence[Share]) -> list[Unmatched]:
    """The hot parts no problem matched, each with what an endpoint would add."""
    return [
        Unmatched(s.label, s.share, ENDPOINT_ADVICE)
        for s in before
        if not s.site and s.share >= HOT
    ]
