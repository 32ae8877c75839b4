"""The ``torch.compile`` backend: ``torch.compile(model, backend=accelopt.model.compile_backend())``
or the registered name ``"accelopt"``.

Dynamo hands it each FX graph of the model. It finds the subgraphs that compute a known problem
(``recognizers.py``), keeps the largest where they overlap, confirms each numerically on the real
shapes (``confirm.py``), finds its kernel (``provision.py``) and swaps it in as one opaque op
(``sites.py``); the rest of the graph, and any subgraph it left alone, goes to Inductor. What
became of each match is kept in ``sites`` (``records.Site``) for the report.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from accelopt.model import graphs as g
from accelopt.model.confirm import confirm
from accelopt.model.generic import imported_matches
from accelopt.model.matching import Match
from accelopt.model.provision import kernel_for
from accelopt.model.recognizers import RECOGNIZERS, choose
from accelopt.model.records import Site
from accelopt.model.sites import SITES, SiteCall, site_op
from accelopt.model.subgraphs import NotClosed, collect, extract
from accelopt.problems.loader import load_problem

_ids = itertools.count(1)
NO_BACKWARD = "it needs gradients, and {problem} declares no backward: left to Inductor"


class AccelOptBackend:
    """A torch.compile backend; ``sites`` lists every match it saw, swapped or kept."""

    def __init__(
        self,
        workspace: Path | None = None,
        policy: str = "compile",
        problems: Sequence[str] | None = None,
        inductor: bool = True,
        race: bool = True,
        runs: bool = True,
    ) -> None:
        self.workspace, self.policy, self.inductor = workspace, policy, inductor
        self.runs = runs  # False: shipped experts only (no run's kernel in this process)
        self.keep_inputs = False  # each site keeps its last inputs (to time it: pipeline.py)
        self.race = race  # keep a kernel only where it beats the subgraph (sites.SiteCall)
        self.problems = list(problems or RECOGNIZERS)
        self.own_problems = problems is None  # the workspace's imported problems too
        self.sites: list[Site] = []
        self.calls: dict[str, SiteCall] = {}  # by site id
        self._serial, self._count = next(_ids), itertools.count(1)

    def __call__(self, gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        self.swap(gm)
        if not self.inductor:
            return gm.forward
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, list(example_inputs))

    def plan(self, gm: Any) -> tuple[list[tuple[Match, set[Any]]], list[Match]]:
        """The matches to swap in ``gm``, each with the nodes it covers, and the near misses
        worth saying (their nodes are not swapped for another problem)."""
        found = [m for name in self.problems for m in RECOGNIZERS[name](gm.graph)]
        if self.workspace is not None and self.own_problems:
            found += imported_matches(gm.graph, self.workspace)
        usable = [m for m in found if not m.rejected and not _unusable(m)]
        covered = {id(m): _covered(m) for m in usable}
        chosen = choose([m for m in usable if covered[id(m)]], lambda m: covered[id(m)])
        taken = [(m, covered[id(m)]) for m in chosen]
        return taken, _misses(found, taken)

    def swap(self, gm: Any) -> list[Site]:
        """Swap every confirmed match of ``gm`` for its kernel; the sites it saw."""
        chosen, misses = self.plan(gm)
        sites = [self._site(gm, m) for m, _ in chosen]
        sites += [_near_miss(m) for m in misses]
        if any(s.status == "swapped" for s in sites):
            _order_by_uses(gm.graph)  # a fused call gives q where k was not computed yet
            gm.graph.eliminate_dead_code()
            gm.recompile()
        self.sites.extend(sites)
        return sites

    def _site(self, gm: Any, match: Match) -> Site:
        """Swap ``match`` for its kernel, or say why not. Nothing here breaks the user's model:
        an error on the way (a problem that no longer loads, a kernel refused at export, a
        workspace that cannot be written, no compiler) leaves the subgraph, with the reason."""
        site_id = f"{match.problem}-{next(self._count)}"  # as profile_model names it
        base = {
            "id": site_id,
            "problem": match.problem,
            "sizes": match.sizes,
            "nodes": tuple(n.name for n in match.outputs),
        }
        try:
            call, why = self._call(match, site_id)
        except Exception as exc:  # the subgraph stays: the model still runs, as written
            call, why = None, f"no kernel could be prepared: {type(exc).__name__}: {exc}"
        if call is None:
            return Site(**base, status="kept", reason=why)
        SITES[f"{self._serial}/{site_id}"] = self.calls[site_id] = call
        _replace(gm, match, f"{self._serial}/{site_id}")
        return Site(**base, status="swapped", kernel=call.provided.origin)

    def _call(self, match: Match, site_id: str) -> tuple[SiteCall | None, str]:
        import torch

        if torch.is_grad_enabled() and any(g.needs_grad(n) for n in match.inputs):
            return None, NO_BACKWARD.format(problem=match.problem)
        problem = load_problem(match.problem, self.workspace)
        _error, why = confirm(match, problem)
        if why:
            return None, why
        provided = kernel_for(problem, match.sizes, self.workspace, self.runs)
        if provided is None:
            return None, f"{match.problem} has no kernel here"
        widths = [g.shape(n)[-1] for n in match.outputs]  # type: ignore[index]
        call = SiteCall(
            site_id,
            match.args,
            extract(match),
            widths,
            provided,
            problem.tolerance,
            self.policy,
            match.layout,
            self.race,
            self.keep_inputs,
        )
        return call, ""


def _order_by_uses(graph: Any) -> None:
    """Reorder the graph's nodes in place so each comes after what it reads, moving as few as
    possible (stable: Kahn's order, ties in the present order). The nodes themselves stay, with
    what Dynamo attached to them."""
    nodes = list(graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    waiting = {n: len(set(n.all_input_nodes)) for n in nodes}
    import heapq

    ready = [(position[n], n.name) for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    by_name = {n.name: n for n in nodes}
    order = []
    while ready:
        node = by_name[heapq.heappop(ready)[1]]
        order.append(node)
        for user in node.users:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user.name))
    for before, node in itertools.pairwise(order):
        if node.prev is not before:
            before.append(node)


def _covered(match: Match) -> set[Any]:
    try:
        return set(collect(match))
    except NotClosed:
        return set()


def _unusable(match: Match) -> bool:
    """A match the C kernels cannot take: a symbolic shape, not float32, not on the CPU."""
    nodes = [*match.inputs, *match.outputs]
    if any(g.shape(n) is None or not g.is_float32(n) for n in nodes):
        return True
    return any(getattr(n.meta.get("example_value"), "device", None).type != "cpu" for n in nodes)


def _misses(found: Sequence[Match], taken: Sequence[tuple[Match, set[Any]]]) -> list[Match]:
    """The near misses worth saying: no larger match took their nodes (an RMSNorm and its
    projections that are not the problem's, whose linears were swapped for matmul, are)."""
    return [
        m
        for m in found
        if m.rejected and all(t.flops < m.flops for t, nodes in taken if nodes & set(m.outputs))
    ]


def _near_miss(match: Match) -> Site:
    return Site(
        f"{match.problem}-near-{match.outputs[0].name}",
        match.problem,
        match.sizes,
        "kept",
        f"near miss ({match.label}): {match.rejected}",
        nodes=tuple(n.name for n in match.outputs),
    )


def _replace(gm: Any, match: Match, site_id: str) -> None:
    graph = gm.graph
    last = collect(match)[-1]
    with graph.inserting_after(last):
        call = graph.call_function(site_op(), (site_id, list(match.inputs)))
    with graph.inserting_after(call):
        for i, out in enumerate(match.outputs):
            value = graph.call_function(operator.getitem, (call, i))
            value.meta.update(out.meta)
            out.replace_all_uses_with(value)


def compile_backend(
    workspace: Path | str | None = None,
    policy: str = "compile",
    problems: Sequence[str] | None = None,
    runs: bool = True,
) -> AccelOptBackend:
    """The backend for ``torch.compile(model, backend=...)``: kernels from ``workspace``'s runs
    (else the shipped experts; ``runs=False``: the shipped experts only, so that no kernel an
    LLM wrote runs in this process); ``policy`` at sizes no kernel was exported for: ``compile``
    (build it, check it on first use) or ``fallback`` (the original subgraph)."""
    return AccelOptBackend(Path(workspace) if workspace else None, policy, problems, runs=runs)


def accelopt_backend(gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """The backend registered as ``"accelopt"`` (the workspace from ACCELOPT_WORKSPACE, else
    ``./.accelopt``)."""
    from accelopt import settings

    return compile_backend(settings.workspace_dir(None))(gm, example_inputs)
