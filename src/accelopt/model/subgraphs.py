"""A match as code: its subgraph cut out of the model's graph (run as the fallback and as the
numerical check's subject), the problem's arguments made from the subgraph's inputs, and the
problem's output cut back into the values of the nodes it replaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelopt.model.matching import Arg, Match


class NotClosed(ValueError):
    """The nodes between a match's outputs and inputs read a value that is not an input."""


def collect(match: Match) -> list[Any]:
    """The nodes a match computes, in graph order (its inputs excluded)."""
    inputs, seen, stack = set(match.inputs), set(), list(match.outputs)
    while stack:
        node = stack.pop()
        if node in seen or node in inputs:
            continue
        if node.op in ("placeholder", "get_attr", "output"):
            raise NotClosed(f"{match.label} reads {node.name}, which is not among its inputs")
        seen.add(node)
        stack.extend(node.all_input_nodes)
    order = {n: i for i, n in enumerate(match.outputs[0].graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def extract(match: Match) -> Any:
    """The match's subgraph as a GraphModule: its inputs in, its outputs' values out (a tuple)."""
    import torch
    import torch.fx

    graph = torch.fx.Graph()
    env = {n: graph.placeholder(f"in{i}") for i, n in enumerate(match.inputs)}
    for node in collect(match):
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in match.outputs))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def problem_args(args: Sequence[Arg], inputs: Sequence[Any], weights: Any = None) -> list[Any]:
    """The problem's arguments (contiguous float32 tensors) from the subgraph's inputs;
    ``weights``: a cache of the weight transforms (``WeightCache``), else made each time."""
    found = []
    for a in args:
        if a.how == "flat":
            x = inputs[a.inputs[0]]
            found.append(x.reshape(-1, x.shape[-1]).contiguous())
        elif a.how == "t12":  # heads-major [B, H, N, D] to token-major [B, N, H, D]
            found.append(inputs[a.inputs[0]].transpose(1, 2).contiguous())
        elif a.how in ("t", "cat_t"):
            parts = [inputs[i] for i in a.inputs]
            found.append(weights.get(parts) if weights is not None else stacked_t(parts))
        else:
            found.append(inputs[a.inputs[0]].contiguous())
    return found


def stacked_t(parts: Sequence[Any]) -> Any:
    """[N_i, K] weights stacked along N and transposed: [K, sum N_i], contiguous."""
    import torch

    whole = parts[0] if len(parts) == 1 else torch.cat(list(parts), 0)
    return whole.t().contiguous()


def node_values(layout: str, outs: Sequence[Any], shapes: Sequence[Sequence[Any]]) -> list[Any]:
    """The replaced nodes' values from the problem's outputs (``Match.layout``)."""
    if layout == "each":
        return [o.reshape(*s) for o, s in zip(outs, shapes, strict=True)]
    return split_outputs(outs[0], shapes)


def split_outputs(out: Any, shapes: Sequence[Sequence[Any]]) -> list[Any]:
    """The problem's output cut along its last axis into the replaced nodes' values (one each:
    q, k and v of a fused projection), each reshaped to its node's shape."""
    found, start = [], 0
    for shape in shapes:
        width = shape[-1]
        part = out if len(shapes) == 1 else out.narrow(-1, start, width)
        found.append(part.reshape(*shape))
        start += width
    return found


class WeightCache:
    """Transposed (and stacked) weights, made once per weight version: a parameter updated in
    place (an optimizer step) bumps its ``_version`` and is transposed again."""

    def __init__(self) -> None:
        self._made: dict[tuple[Any, ...], tuple[list[Any], Any]] = {}

    def get(self, parts: Sequence[Any]) -> Any:
        key = tuple((id(p), p.data_ptr(), p._version, tuple(p.shape)) for p in parts)
        found = self._made.get(key)
        if found is None:
            if len(self._made) >= 64:  # old versions of weights updated in place
                self._made.clear()
            found = (list(parts), stacked_t(parts))  # holding the parts keeps their ids unique
            self._made[key] = found
        return found[1]
