"""What a run that ended comes to: the numbers the CLI prints and writes as JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelopt.hardware.roofline import Bound
from accelopt.llm.client import Usage
from accelopt.search.headline import Headline
from accelopt.search.references import BestReference, best_reference, over_reference
from accelopt.search.run import OptimizeResult
from accelopt.search.workloads import Generalization, run_workloads
from accelopt.store.calls import usage_json
from accelopt.store.records import RunStatus


@dataclass(frozen=True)
class KernelSummary:
    """The baseline or the best kernel of a ``RunSummary``."""

    latency_s: float | None
    pct_of_peak: float | None
    hash: str


@dataclass(frozen=True)
class RunSummary:
    """The numbers the CLI prints of a run that ended, and writes as JSON (``as_json``)."""

    run: str
    problem: str
    workload: str
    workloads: tuple[str, ...]  # tuned on (the first is ``workload``)
    held_out: tuple[str, ...]
    status: RunStatus
    baseline: KernelSummary
    best: KernelSummary
    speedup: float | None  # the baseline's latency over the best's
    bound: Bound  # the best kernel's
    usage: Mapping[str, Usage]  # per agent
    best_kernel_path: str = ""  # where the best kernel was written ("": nowhere)
    generalization: Generalization | None = None  # figures per workload, for a run on several
    stopped: str = ""  # why the run stopped early (its LLM endpoint failed), or ""
    reference: BestReference | None = None  # the fastest of NumPy and PyTorch, timed in the run
    speedup_over_reference: float | None = None  # its latency over the best kernel's
    headline: Headline | None = None  # where the figures come from: the run's closing session

    def as_json(self) -> dict[str, Any]:
        """The JSON object: every field, the usage as its counts; the best reference, the kernel
        path, the generalization and why the run stopped only when there are."""
        data: dict[str, Any] = {
            "run": self.run,
            "problem": self.problem,
            "workload": self.workload,
            "workloads": list(self.workloads),
            "held_out": list(self.held_out),
            "status": self.status,
            "baseline": dataclasses.asdict(self.baseline),
            "best": dataclasses.asdict(self.best),
            "speedup": self.speedup,
            "bound": self.bound,
            "usage": {agent: usage_json(u) for agent, u in self.usage.items()},
        }
        if self.headline is not None:
            data["speedup_interval"] = self.headline.interval
            data["headline"] = self.headline.as_json()
        if self.reference is not None:
            data["best_reference"] = self.reference.as_json()
            data["speedup_over_reference"] = self.speedup_over_reference
        if self.best_kernel_path:
            data["best_kernel_path"] = self.best_kernel_path
        if self.generalization is not None:
            data["generalization"] = self.generalization.as_json()
        if self.stopped:
            data["stopped"] = self.stopped
        return data


def run_summary(result: OptimizeResult) -> RunSummary:
    """The summary of a run that ended, with this session's usage: the figures of its closing
    session (the baseline and the best re-timed side by side) where it had one, else those of
    the search's own evaluations."""
    b, t = result.baseline.evaluation, result.best.evaluation
    speedup = (b.latency_s / t.latency_s) if b.latency_s and t.latency_s else None
    if (h := result.headline) is not None and h.best.passed and h.baseline.passed:
        b, t, speedup = h.baseline, h.best, h.speedup
    chosen = run_workloads(result.run)
    return RunSummary(
        run=result.run.id,
        problem=result.run.problem,
        workload=result.run.workload,
        workloads=chosen.tuned,
        held_out=chosen.held_out,
        status=result.status,
        baseline=KernelSummary(b.latency_s, b.pct_of_peak, b.kernel_hash),
        best=KernelSummary(t.latency_s, t.pct_of_peak, t.kernel_hash),
        speedup=speedup,
        bound=t.bound,
        usage=result.usage,
        stopped=result.stopped,
        reference=(reference := best_reference(result.references)),
        speedup_over_reference=over_reference(reference, t.latency_s),
        headline=result.headline,
    )
