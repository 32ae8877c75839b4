"""Finding the subgraphs of a Dynamo graph that compute a known problem.

Each recognizer reads the graph around one anchor node (an ``rsqrt``, a ``linear``, a ``silu``)
the way people write the operation, in any of its spellings (``graphs.op``), and returns a
``Match``: the problem, the nodes whose values the kernel replaces, the subgraph's external
inputs and how each becomes one of the problem's arguments (``Arg``). Constants are checked
exactly (an RMSNorm with eps 1e-6 is not the problem's 1e-5: a near miss, reported with its
reason); the numerical check (``confirm.py``) catches what structure cannot. Overlapping matches
are settled by the work they cover, largest first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from accelopt.model import graphs as g


@dataclass(frozen=True)
class Arg:
    """How a problem argument is made from the subgraph's external inputs (by index):
    ``flat``: the input reshaped to [-1, its last size]; ``t``: a [N, K] weight transposed to
    [K, N]; ``cat_t``: several [N_i, K] weights stacked and transposed; ``t12``: axes 1 and 2
    swapped (heads-major to token-major); ``as_is``."""

    inputs: tuple[int, ...]
    how: str = "as_is"


@dataclass
class Match:
    problem: str
    outputs: list[Any]  # the nodes whose values the kernel gives (in order)
    inputs: list[Any]  # the subgraph's external inputs (nodes)
    args: list[Arg]  # the problem's arguments, in its order
    sizes: dict[str, int]
    flops: float  # the work the match covers: conflicts go to the larger
    label: str = ""
    rejected: str = ""  # a near miss: why it is not the problem
    # how the kernel's outputs give the nodes' values: "split" (one output cut along its last
    # axis, each part reshaped to its node's shape) or "each" (output i is node i's value)
    layout: str = "split"


@dataclass(frozen=True)
class RMSNorm:
    x: Any
    eps: float
    gain: Any | None
    out: Any


def _const(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _square_of(node: Any) -> Any | None:
    """x where node is x**2, x.pow(2), x * x or torch.square(x)."""
    name = g.op(node)
    if name == "pow" and _const(g.arg(node, 1, "exponent")) == 2.0:
        return g.arg(node, 0, "input")
    if name == "mul":
        a, b = g.binary(node)
        return a if a is b and g.is_node(a) else None
    return g.arg(node, 0, "input") if name == "square" else None


def _mean_last(node: Any) -> Any | None:
    """The operand of a mean over the last axis with keepdim, else None."""
    if g.op(node) != "mean":
        return None
    dim = g.arg(node, 1, "dim")
    keep = g.arg(node, 2, "keepdim", False)
    dims = dim if isinstance(dim, list | tuple) else [dim]
    shape = g.shape(node)
    last = {-1, len(shape) - 1} if shape else {-1}
    return g.arg(node, 0, "input") if keep and len(dims) == 1 and dims[0] in last else None


def rmsnorm_at(rsqrt: Any) -> RMSNorm | None:
    """The RMSNorm around an ``rsqrt`` node: x * rsqrt(mean(x^2, -1, keepdim) [+ eps]) [* g]."""
    inner, eps = g.arg(rsqrt, 0, "input"), 0.0
    if g.op(inner) == "add":
        a, b = g.binary(inner)
        mean, eps_value = (a, _const(b)) if g.is_node(a) else (b, _const(a))
        if eps_value is None:
            return None
        inner, eps = mean, eps_value
    square = _mean_last(inner) if g.is_node(inner) else None
    x = _square_of(square) if g.is_node(square) else None
    if x is None:
        return None
    scaled = [u for u in rsqrt.users if g.op(u) == "mul" and x in g.binary(u)]
    if len(scaled) != 1:
        return None
    out, gain = scaled[0], None
    user = g.only_user(out)
    if user is not None and g.op(user) == "mul":
        other = next((v for v in g.binary(user) if v is not out), None)
        if g.is_node(other) and g.shape(other) == (g.shape(x) or (0,))[-1:]:
            out, gain = user, other
    return RMSNorm(x, eps, gain, out)


def linear_parts(node: Any) -> tuple[Any, Any] | None:
    """(input, weight [N, K]) of a bias-free ``F.linear`` / ``nn.Linear`` on float32."""
    if g.op(node) != "linear" or g.arg(node, 2, "bias") is not None:
        return None
    x, w = g.arg(node, 0, "input"), g.arg(node, 1, "weight")
    ws, xs = g.shape(w) if g.is_node(w) else None, g.shape(x) if g.is_node(x) else None
    if ws is None or xs is None or len(ws) != 2 or xs[-1] != ws[1]:
        return None
    return x, w


def rows(node: Any) -> int:
    shape = g.shape(node) or (0,)
    count = 1
    for d in shape[:-1]:
        count *= d
    return count


def nodes_in(graph: Any, name: str) -> Iterator[Any]:
    yield from (n for n in graph.nodes if g.op(n) == name)
