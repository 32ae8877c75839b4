"""The recognizers of the suite's problems in a Dynamo graph, and the choice among overlapping
matches. Each returns ``Match`` records (``matching.py``); a near miss carries ``rejected``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from accelopt.model import graphs as g
from accelopt.model.attention import gqa_full
from accelopt.model.matching import Arg, Match, linear_parts, nodes_in, rmsnorm_at, rows

# The constants of the suite's PyTorch forms (problems/suite/*/torch_form.py)
EPS = {"add_rmsnorm_matmul": 1e-5, "rmsnorm_matmul": 0.0}


def _linears_of(node: Any) -> list[Any]:
    """The bias-free linears that read ``node``, in graph order."""
    return [u for u in node.users if (p := linear_parts(u)) is not None and p[0] is node]


def swiglu(graph: Any) -> list[Match]:
    """down(silu(gate(x)) * up(x)): the MLP of LLaMA-style models."""
    found = []
    for mul in nodes_in(graph, "mul"):
        a, b = g.binary(mul)
        if not (g.is_node(a) and g.is_node(b)):
            continue
        act, up = (a, b) if g.op(a) == "silu" else (b, a)
        gate = g.arg(act, 0, "input") if g.op(act) == "silu" else None
        gp, up_p = (linear_parts(gate) if g.is_node(gate) else None), linear_parts(up)
        down = g.only_user(mul)
        dp = linear_parts(down) if down is not None else None
        if gp is None or up_p is None or dp is None or gp[0] is not up_p[0] or dp[0] is not mul:
            continue
        x, (n, k) = gp[0], g.shape(gp[1])
        m = rows(x)
        found.append(
            Match(
                "swiglu",
                [down],
                [x, gp[1], up_p[1], dp[1]],
                [Arg((0,), "flat"), Arg((2,), "t"), Arg((3,), "t"), Arg((1,), "t")],
                {"M": m, "N": n, "K": k},
                6.0 * m * n * k,
                f"MLP at {down.name}",
            )
        )
    return found


def _rms_matmul(graph: Any, problem: str) -> list[Match]:
    """An RMSNorm read by linears: add_rmsnorm_matmul (x + z first, gain, eps 1e-5) or
    rmsnorm_matmul (no eps, no gain)."""
    found = []
    for rsqrt in nodes_in(graph, "rsqrt"):
        rms = rmsnorm_at(rsqrt)
        linears = _linears_of(rms.out) if rms is not None else []
        if rms is None or not linears:
            continue
        weights = [linear_parts(n)[1] for n in linears]  # type: ignore[index]
        k, n = g.shape(rms.x)[-1], sum(g.shape(w)[0] for w in weights)  # type: ignore[index]
        m, label = rows(rms.x), f"RMSNorm at {rsqrt.name} and {len(linears)} linear(s)"
        flops = 2.0 * m * n * k + 4.0 * m * k
        add = rms.x if g.op(rms.x) == "add" and all(map(g.is_node, g.binary(rms.x))) else None
        if problem == "add_rmsnorm_matmul":
            why = _why_not_add_rms(rms, add)
            inputs = [*(g.binary(add) if add is not None else (rms.x, rms.x)), rms.gain, *weights]
            args = [
                Arg((0,), "flat"),
                Arg((1,), "flat"),
                Arg((2,)),
                Arg(tuple(range(3, 3 + len(weights))), "cat_t"),
            ]
        else:
            why = _why_not_plain_rms(rms)
            inputs = [rms.x, *weights]
            args = [Arg((0,), "flat"), Arg(tuple(range(1, 1 + len(weights))), "cat_t")]
        found.append(
            Match(problem, linears, inputs, args, {"M": m, "N": n, "K": k}, flops, label, why)
        )
    return found


def _why_not_add_rms(rms: Any, add: Any) -> str:
    if add is None:
        return "its input is not a sum x + z (add_rmsnorm_matmul adds a residual first)"
    if any(g.shape(v) != g.shape(rms.x) for v in g.binary(add)):
        return "the two terms of its sum differ in shape"
    if rms.gain is None:
        return "it has no gain (add_rmsnorm_matmul scales by g)"
    eps = EPS["add_rmsnorm_matmul"]
    return "" if rms.eps == eps else f"its eps is {rms.eps:g}; add_rmsnorm_matmul's is {eps:g}"


def _why_not_plain_rms(rms: Any) -> str:
    if rms.eps != 0.0:
        return f"its eps is {rms.eps:g}; rmsnorm_matmul has none"
    return "it has a gain; rmsnorm_matmul has none" if rms.gain is not None else ""


def add_rmsnorm_matmul(graph: Any) -> list[Match]:
    return _rms_matmul(graph, "add_rmsnorm_matmul")


def rmsnorm_matmul(graph: Any) -> list[Match]:
    return _rms_matmul(graph, "rmsnorm_matmul")


def matmul(graph: Any) -> list[Match]:
    """Bias-free linears, those that read one input taken together (q, k and v: one call)."""
    by_input: dict[Any, list[Any]] = {}
    for node in nodes_in(graph, "linear"):
        parts = linear_parts(node)
        if parts is not None:
            by_input.setdefault(parts[0], []).append(node)
    found = []
    for x, linears in by_input.items():
        weights = [linear_parts(n)[1] for n in linears]  # type: ignore[index]
        k, n, m = g.shape(x)[-1], sum(g.shape(w)[0] for w in weights), rows(x)  # type: ignore[index]
        names = ", ".join(n.name for n in linears)
        args = [Arg((0,), "flat"), Arg(tuple(range(1, 1 + len(weights))), "cat_t")]
        sizes = {"M": m, "N": n, "K": k}
        found.append(
            Match("matmul", linears, [x, *weights], args, sizes, 2.0 * m * n * k, f"linear {names}")
        )
    return found


def silu(graph: Any) -> list[Match]:
    found = []
    for node in nodes_in(graph, "silu"):
        x, shape = g.arg(node, 0, "input"), g.shape(node)
        if shape and not g.arg(node, 1, "inplace", False):
            m, n = rows(node), shape[-1]
            found.append(
                Match(
                    "silu",
                    [node],
                    [x],
                    [Arg((0,), "flat")],
                    {"M": m, "N": n},
                    3.0 * m * n,
                    f"silu at {node.name}",
                )
            )
    return found


RECOGNIZERS: dict[str, Callable[[Any], list[Match]]] = {
    "swiglu": swiglu,
    "add_rmsnorm_matmul": add_rmsnorm_matmul,
    "rmsnorm_matmul": rmsnorm_matmul,
    "matmul": matmul,
    "silu": silu,
    "gqa_full": gqa_full,
}


def choose(matches: Iterable[Match], covered: Callable[[Match], set[Any]]) -> list[Match]:
    """The matches to swap: largest work first, none sharing a computed node with one taken."""
    taken: list[Match] = []
    claimed: set[Any] = set()
    for m in sorted(matches, key=lambda m: -m.flops):
        nodes = covered(m)
        if not (nodes & claimed):
            taken.append(m)
            claimed |= nodes
    return taken
