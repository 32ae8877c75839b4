"""``accelopt model profile`` and ``optimize`` without the command line: where a model's time
goes, then the model compiled with accelopt's backend, checked against eager on fresh inputs and
timed against eager and Inductor in one interleaved session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.model.backend import AccelOptBackend
from accelopt.model.confirm import relative_error
from accelopt.model.loading import LoadedModel, capture
from accelopt.model.profile import HOT, profile, shares, unmatched
from accelopt.model.records import ModelResult, Share, Site, Unmatched
from accelopt.model.session import time_interleaved

TOLERANCE = 1e-4  # the compiled model against eager: relative L2 error of each output


def _shapes(inputs: Sequence[Any]) -> list[list[int]]:
    return [list(t.shape) for t in inputs if hasattr(t, "shape")]


@dataclass
class Profiled:
    result: ModelResult
    hot: list[tuple[str, dict[str, int]]]  # the hot matches (problem, sizes) to tune
    graph: Any  # Dynamo's graph of the model (GraphModule)


def profile_model(loaded: LoadedModel, workspace: Path | None) -> Profiled:
    """The model's matched subgraphs and where its eager time goes; also the hot matches
    (problem, sizes) an optimization would tune."""
    inputs = loaded.make_inputs()
    gm, example = capture(loaded.model, inputs)
    chosen, misses = AccelOptBackend(workspace).plan(gm)
    labels: dict[str, tuple[str, str]] = {}
    sites = []
    for i, (match, covered) in enumerate(chosen, 1):
        site = f"{match.problem}-{i}"  # as the backend names it
        labels.update({n.name: (site, match.problem) for n in covered})
        sites.append(
            Site(
                site,
                match.problem,
                match.sizes,
                "matched",
                nodes=tuple(n.name for n in match.outputs),
            )
        )
    sites += [
        Site(
            f"{m.problem} (near miss)",
            m.problem,
            m.sizes,
            "kept",
            f"near miss ({m.label}): {m.rejected}",
        )
        for m in misses
    ]
    before = profile(gm, example, labels)
    result = ModelResult(loaded.name, _shapes(inputs), sites, before, unmatched=unmatched(before))
    hot = [
        (m.problem, m.sizes)
        for i, (m, _) in enumerate(chosen, 1)
        if sum(s.share for s in before if s.site == f"{m.problem}-{i}") >= HOT
    ]
    return Profiled(result, hot, gm)


Search = Callable[[Sequence[Unmatched], Any], list[str]]


def optimize_model(
    loaded: LoadedModel,
    workspace: Path | None,
    policy: str = "compile",
    tune: Callable[[str, dict[str, int]], str] | None = None,
    budget_s: float = 20.0,
    search: Search | None = None,
    runs: bool = True,
) -> ModelResult:
    """Profile; tune each hot match (``tune``: problem, sizes -> a note); ``search`` the hot
    parts no problem matched (they become problems of their own, matched from then on);
    compile with the backend, check and time. None: that step is skipped."""
    import torch

    profiled = profile_model(loaded, workspace)
    result = profiled.result
    result.notes += [tune(problem, sizes) for problem, sizes in profiled.hot] if tune else []
    if search is not None and result.unmatched:
        result.notes += search(result.unmatched, profiled.graph)
    torch._dynamo.reset()
    backend = AccelOptBackend(workspace, policy, runs=runs)
    backend.keep_inputs = True  # each kernel is timed against its subgraph on real inputs
    with torch.inference_mode():
        eager = loaded.model
        compiled = torch.compile(loaded.model, backend=backend, dynamic=False)
        inductor = torch.compile(loaded.model, dynamic=False)
        result.check = check(eager, compiled, inductor, loaded.make_inputs())
        sites = _with_speedups(backend, budget_s / 4)  # before the session: may keep some out
        inputs = loaded.make_inputs()
        fns = {
            "eager": lambda: eager(*inputs),
            "inductor": lambda: inductor(*inputs),
            "accelopt": lambda: compiled(*inputs),
        }
        for call in backend.calls.values():
            call.seconds, call.calls = 0.0, 0
        session = time_interleaved(fns, rounds=60, budget_s=budget_s)
    result.timings = session.timed()
    result.speedups = [
        session.speedup("accelopt", "eager"),
        session.speedup("accelopt", "inductor"),
    ]
    result.sites = sites + _unswapped(result.sites, backend)
    result.after = after_shares(backend, result.timings)
    return result


def check(eager: Any, compiled: Any, inductor: Any, inputs: Sequence[Any]) -> dict:
    """The compiled model against eager on fresh inputs (the first call compiles)."""
    want = _outputs(eager(*inputs))
    got, other = _outputs(compiled(*inputs)), _outputs(inductor(*inputs))
    error = max(relative_error(a.numpy(), b.numpy()) for a, b in zip(got, want, strict=True))
    inductor_error = max(
        relative_error(a.numpy(), b.numpy()) for a, b in zip(other, want, strict=True)
    )
    return {
        "max_rel_err": error,
        "tolerance": TOLERANCE,
        "passed": bool(error <= TOLERANCE),
        "inductor_rel_err": inductor_error,
        "inputs": "fresh (get_inputs() again)",
    }


def _outputs(value: Any) -> list[Any]:
    found = list(value) if isinstance(value, tuple | list) else [value]
    return [t.detach().float() for t in found]


def _with_speedups(backend: AccelOptBackend, budget_s: float) -> list[Site]:
    """The backend's sites, each swapped one with its kernel timed against the subgraph it
    replaced, interleaved, on the last real inputs it saw."""
    import dataclasses

    found = []
    for site in backend.sites:
        call = backend.calls.get(site.id)
        if call is None or not call.last_inputs or site.status != "swapped":
            found.append(site)
            continue
        used = [d for d in call.decisions.values() if d.path == "subgraph"]
        if used:  # it fell back at the sizes the model ran
            found.append(dataclasses.replace(site, status="kept", reason=used[0].reason))
            continue
        found.append(_raced(site, call, budget_s))
    return found


def _raced(site: Site, call: Any, budget_s: float) -> Site:
    """The site with its kernel's speedup over the subgraph (interleaved, on the last real
    inputs); a kernel slower beyond doubt (the interval below 1) is kept out from then on."""
    import dataclasses

    import torch

    from accelopt.model.sites import Decision

    inputs = call.last_inputs
    with torch.inference_mode():
        session = time_interleaved(
            {"kernel": lambda: call.kernel(inputs), "subgraph": lambda: call.fallback(*inputs)},
            rounds=30,
            budget_s=budget_s,
        )
    speedup = session.speedup("kernel", "subgraph")
    if speedup.high >= 1.0:
        return dataclasses.replace(site, speedup=speedup)
    why = (
        f"the kernel is slower than the subgraph it replaces ({speedup.ratio:.2f}x, "
        f"{speedup.low:.2f}-{speedup.high:.2f} over {session.rounds} interleaved rounds)"
    )
    call.decisions = {key: Decision("subgraph", why) for key in call.decisions}
    return dataclasses.replace(site, status="kept", reason=why, speedup=speedup)


def _unswapped(profiled: Sequence[Site], backend: AccelOptBackend) -> list[Site]:
    """The profile's near misses the backend did not list again."""
    seen = {s.reason for s in backend.sites}
    return [s for s in profiled if s.status == "kept" and s.reason not in seen]


def after_shares(backend: AccelOptBackend, timings: Sequence[Any]) -> list[Share]:
    """Where the compiled model's time goes: each swapped kernel's time per model call (timed
    inside its op during the session), and the rest (Inductor's code)."""
    total = next((t.ms for t in timings if t.name == "accelopt"), 0.0)
    ms = {site: c.seconds * 1e3 / c.calls for site, c in backend.calls.items() if c.calls}
    ms["rest (Inductor)"] = max(total - sum(ms.values()), 0.0)
    return shares(ms, {site: site.rsplit("-", 1)[0] for site in backend.calls})
