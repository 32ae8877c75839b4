"""Matching the workspace's own problems imported from PyTorch (KernelBench files, and the parts
``accelopt model optimize`` imports): each problem's ``Model`` is traced (torch.fx) at each of its
workloads, and its graph is looked for in the model's graph as it is written (torch.fx's
``SubgraphMatcher``: same operations, same constants, any inputs). A match at a workload's shapes
binds the problem's arguments: its forward's inputs, then its parameters by state_dict key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelopt.model import graphs as g
from accelopt.model.matching import Arg, Match
from accelopt.problems.loader import load_problem, problems_dir, workspace_names


def _pattern(directory: Path, shapes: list[tuple[int, ...]]) -> tuple[Any, list[str]] | None:
    """The problem's graph (its forward traced through every submodule, so ``nn.Linear`` is the
    ``F.linear`` call Dynamo records too), its parameters and buffers as placeholders named by
    their state_dict keys, after its inputs; and those placeholders' names, in order. Traced
    symbolically, not by Dynamo: the backend runs inside a Dynamo compilation."""
    import torch

    from accelopt.problems.kernelbench.imported import imported_model
    from accelopt.problems.kernelbench.runtime import build_model

    class Through(torch.fx.Tracer):
        def is_leaf_module(self, m: Any, qualname: str) -> bool:
            return False

    module = build_model(imported_model(directory).namespace(shapes), 0).eval()
    try:
        graph = Through().trace(module)
    except Exception:  # control flow on values, say: not matched structurally
        return None
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = inputs[-1] if inputs else next(iter(graph.nodes))
    for node in [n for n in graph.nodes if n.op == "get_attr"]:
        with graph.inserting_after(anchor):
            anchor = graph.placeholder(str(node.target))
        node.replace_all_uses_with(anchor)
        graph.erase_node(node)
    graph.eliminate_dead_code()
    names = [
        str(n.target) if n not in inputs else n.name for n in graph.nodes if n.op == "placeholder"
    ]
    return torch.fx.GraphModule(module, graph), names


def imported_matches(graph: Any, workspace: Path | None) -> list[Match]:
    """Matches of every imported workspace problem, at each of its workloads' shapes."""
    found: list[Match] = []
    root = problems_dir(workspace)
    for name in workspace_names(workspace):
        if (root / name / "import.json").is_file() and (root / name / "model.py").is_file():
            found += _matches_of(graph, name, root / name, workspace)
    return found


def _matches_of(graph: Any, name: str, directory: Path, workspace: Path | None) -> list[Match]:
    from torch.fx.passes.utils.matcher_utils import SubgraphMatcher

    meta = json.loads((directory / "import.json").read_text(encoding="utf-8"))
    args = [a for a in meta["arguments"] if a["role"] != "output"]
    problem = load_problem(name, workspace)
    present = {g.shape(n) for n in graph.nodes}
    found = []
    for workload in problem.workloads.values():
        shapes = [t.dims(workload.sizes) for t in problem.inputs]
        if not all(tuple(s) in present for s in shapes):
            continue  # a tensor of this workload is nowhere in the graph: no model is built
        key = (str(directory), problem.fingerprint, tuple(map(tuple, shapes)))
        traced = _traced(key, directory, shapes[: sum(a["role"] == "input" for a in args)])
        if traced is None:
            continue
        pattern, names = traced
        matcher = SubgraphMatcher(
            pattern.graph,
            match_output=False,
            match_placeholder=False,
            remove_overlapping_matches=True,
            ignore_literals=False,
        )
        for m in matcher.match(graph):
            bound = _bind(m, names, args, shapes)
            if bound is not None:
                outputs = [m.nodes_map[n] for n in _returned(pattern.graph)]
                cost = problem.cost
                flops = cost.matmul_flops(workload.sizes) + cost.vector_flops(workload.sizes)
                found.append(
                    Match(
                        name,
                        outputs,
                        bound,
                        [Arg((i,)) for i in range(len(bound))],
                        dict(workload.sizes),
                        flops,
                        f"{name} ({workload.name})",
                        layout="each",
                    )
                )
    return found


_TRACED: dict[tuple[Any, ...], tuple[Any, list[str]] | None] = {}


def _traced(key: tuple[Any, ...], directory: Path, shapes: list[Any]) -> Any:
    """``_pattern``, once per problem version and shapes in a process (each graph Dynamo hands
    the backend would otherwise build and trace every imported model again)."""
    if key not in _TRACED:
        _TRACED[key] = _pattern(directory, shapes)
    return _TRACED[key]


def _returned(pattern_graph: Any) -> list[Any]:
    out = next(n for n in pattern_graph.nodes if n.op == "output")
    value = out.args[0]
    return list(value) if isinstance(value, tuple | list) else [value]


def _bind(match: Any, names: list[str], args: list[dict], shapes: list[Any]) -> list[Any] | None:
    """The model's nodes for the problem's arguments, in its order; None when a shape differs
    or a parameter has no placeholder."""
    by_name = dict(zip(names, match.placeholder_nodes, strict=False))
    n_inputs = sum(a["role"] == "input" for a in args)
    bound = list(match.placeholder_nodes[:n_inputs])
    for a in args[n_inputs:]:
        keys = a.get("keys") or [a["name"]]
        node = next((by_name[k] for k in keys if k in by_name), None)
        if node is None:
            return None
        bound.append(node)
    if [g.shape(n) for n in bound] != [tuple(s) for s in shapes]:
        return None
    return bound
