"""A swapped subgraph at run time: one ``torch.library`` op (``accelopt_model::site``, opaque to
Inductor) takes the subgraph's inputs and gives its outputs' values, from the kernel where the
kernel was confirmed at these sizes, else from the subgraph itself.

The first call at sizes runs both and compares them (relative L2 error within twice the
problem's tolerance: each is within it of the truth), then times them, interleaved (``RACE``
rounds): a kernel that fails to build, raises, disagrees or is slower than the subgraph it
replaces beyond doubt is never called at those sizes again, and ``decisions`` says why. ``policy``:
``compile`` builds the kernel for sizes it was not exported for; ``fallback`` runs the subgraph
there instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelopt.model.confirm import relative_error
from accelopt.model.matching import Arg
from accelopt.model.subgraphs import WeightCache, node_values, problem_args
from accelopt.profiling.stats import interval, point

POLICIES = ("compile", "fallback")
RACE = 11  # rounds (a call of each) timed at new shapes: kernel against subgraph


@dataclass(frozen=True)
class Decision:
    path: str  # "kernel" or "subgraph"
    reason: str = ""
    error: float | None = None  # the kernel against the subgraph on the first call


class SiteCall:
    """What the op runs for one site."""

    def __init__(
        self,
        site: str,
        args: Sequence[Arg],
        fallback: Any,
        widths: Sequence[int],
        provided: Any,
        tolerance: float,
        policy: str = "compile",
        layout: str = "split",
        race: bool = True,
        keep_inputs: bool = False,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.site, self.args, self.fallback = site, list(args), fallback
        self.widths, self.provided, self.tolerance = list(widths), provided, tolerance
        self.policy, self.layout, self.race = policy, layout, race
        self.weights = WeightCache()
        self.decisions: dict[tuple[tuple[int, ...], ...], Decision] = {}
        self._lock = threading.Lock()
        self.seconds, self.calls = 0.0, 0  # time inside this op, for the after profile
        self.keep_inputs = keep_inputs  # hold the last real inputs (memory), to time the kernel
        self.last_inputs: list[Any] = []

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        start = time.perf_counter()
        key = tuple(tuple(int(d) for d in t.shape) for t in inputs)
        decision = self.decisions.get(key)
        if decision is None:
            with self._lock:
                found = self._first(key, inputs)
        elif decision.path == "kernel":
            found = self.kernel(inputs)
        else:
            found = list(self.fallback(*inputs))
        if self.keep_inputs:
            self.last_inputs = list(inputs)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return found

    def kernel(self, inputs: Sequence[Any]) -> list[Any]:
        args = problem_args(self.args, inputs, self.weights)
        out = self.provided.kernel(*args, policy="compile", verify=False)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        if self.layout == "each":
            return [o.contiguous() for o in outs]
        lead = tuple(inputs[self.args[0].inputs[0]].shape[:-1])
        shapes = [(*lead, w) for w in self.widths]
        return [p.contiguous() for p in node_values(self.layout, outs, shapes)]

    def _first(self, key: Any, inputs: Sequence[Any]) -> list[Any]:
        want = list(self.fallback(*inputs))
        reason = self._unusable(inputs)
        if reason:
            self.decisions[key] = Decision("subgraph", reason)
            return want
        try:
            got = self.kernel(inputs)
        except Exception as exc:  # a build error, a kernel error: the subgraph stays
            self.decisions[key] = Decision("subgraph", f"the kernel failed here: {exc}")
            return want
        error = max(relative_error(a.numpy(), b.numpy()) for a, b in zip(got, want, strict=True))
        if not error <= 2 * self.tolerance:
            why = f"the kernel differs from the subgraph here (relative error {error:.3g})"
            self.decisions[key] = Decision("subgraph", why, error)
            return want
        slower = self._race(inputs)
        if slower:
            self.decisions[key] = Decision("subgraph", slower, error)
            return want
        self.decisions[key] = Decision("kernel", "", error)
        return got

    def _race(self, inputs: Sequence[Any]) -> str:
        """Why the kernel is kept out ("" when it is not): it is slower than the subgraph beyond
        doubt (the 95 % interval of the median per-round time ratio above 1). A first call often
        meets a machine still busy compiling: noise alone never drops a kernel."""
        if not self.race:
            return ""
        kernel, subgraph = [], []
        for _ in range(RACE):
            for times, call in ((kernel, self.kernel), (subgraph, self._subgraph)):
                start = time.perf_counter()
                call(inputs)
                times.append(time.perf_counter() - start)
        low, high = interval([k / s for k, s in zip(kernel, subgraph, strict=True)])
        if low <= 1.0:
            return ""
        return (
            f"the kernel is slower than the subgraph here ({point(kernel) * 1e3:.3g} "
            f"ms against {point(subgraph) * 1e3:.3g} ms; time ratio {low:.2f}-"
            f"{high:.2f}, 95 % interval over {RACE} interleaved rounds)"
        )

    def _subgraph(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.fallback(*inputs))

    def _unusable(self, inputs: Sequence[Any]) -> str:
        if self.provided is None:
            return "no kernel"
        if self.policy == "compile":
            return ""
        kernel = self.provided.kernel
        args = problem_args(self.args, inputs, self.weights)
        shapes = {n: tuple(a.shape) for (n, _), a in zip(kernel.inputs, args, strict=True)}
        sizes = _bind(kernel.inputs, shapes)
        key = tuple(sizes.get(p, -1) for p in kernel.params)
        if kernel.exported(key) is None:
            return f"no kernel was exported for these sizes ({kernel.exported_sizes()})"
        return ""

    def fake(self, inputs: Sequence[Any]) -> list[Any]:
        return [o.new_empty(o.shape) for o in self.fallback(*inputs)]


def _bind(specs: Sequence[tuple[str, Sequence[str]]], shapes: dict[str, tuple[int, ...]]) -> dict:
    sizes: dict[str, int] = {}
    for name, spec in specs:
        for dim, size in zip(spec, shapes[name], strict=False):
            if not dim.isdigit():
                sizes.setdefault(dim, int(size))
    return sizes


SITES: dict[str, SiteCall] = {}
_library: list[Any] = []


def site_op() -> Any:
    """``torch.ops.accelopt_model.site``, defined once per process."""
    import torch

    if not _library:
        lib = torch.library.Library("accelopt_model", "FRAGMENT")
        lib.define("site(str site, Tensor[] inputs) -> Tensor[]")
        lib.impl("site", lambda site, inputs: SITES[site](list(inputs)), "CPU")
        torch.library.register_fake("accelopt_model::site", lib=lib)(
            lambda site, inputs: SITES[site].fake(list(inputs))
        )
        _library.append(lib)
    return torch.ops.accelopt_model.site.default
