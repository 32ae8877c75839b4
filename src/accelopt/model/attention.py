"""The recognizer of ``gqa_full`` (non-causal grouped-query attention) in a Dynamo graph:
``F.scaled_dot_product_attention`` on heads-major q [B, QH, N, D] and k, v [B, KH, N, D], where
k and v reach QH heads through ``enable_gqa=True`` or a ``repeat_kv`` (index, expand, reshape), as
LLaMA-style code writes it. The problem takes token-major q, k, v ([B, N, heads, D]): a tensor
that is the ``transpose(1, 2)`` of a token-major one is passed as that one; another is
transposed (a copy). A causal, masked, dropped-out or rescaled attention is a near miss."""

from __future__ import annotations

import math
from typing import Any

from accelopt.model import graphs as g
from accelopt.model.matching import Arg, Match, nodes_in


def _unrepeated(node: Any) -> Any:
    """The [B, KH, N, D] tensor a repeat_kv made ``node`` from, else ``node``."""
    if g.op(node) != "view" or not g.is_node(node.args[0]):
        return node
    expand = node.args[0]
    if g.op(expand) != "expand" or not g.is_node(expand.args[0]):
        return node
    index = expand.args[0]
    if g.op(index) != "getitem" or not g.is_node(index.args[0]):
        return node
    source, shape = index.args[0], g.shape(index.args[0])
    if shape is None or g.shape(index) != (*shape[:2], 1, *shape[2:]):
        return node
    return source


def _token_major(node: Any) -> tuple[Any, str]:
    """(the input, how) that gives ``node``'s [B, N, H, D] token-major layout."""
    if g.op(node) == "transpose" and sorted(node.args[1:3]) == [1, 2]:
        return node.args[0], "as_is"
    return node, "t12"


def _why_not(node: Any, d: int) -> str:
    if g.arg(node, 5, "is_causal", False):
        return "it is causal; gqa_full attends to every key"
    if g.arg(node, 3, "attn_mask") is not None:
        return "it has an attention mask; gqa_full has none"
    if g.arg(node, 4, "dropout_p", 0.0):
        return "it drops attention weights out; gqa_full does not"
    scale = g.arg(node, 6, "scale")
    if scale is not None and not math.isclose(scale, 1 / math.sqrt(d)):
        return f"its scale is {scale:g}; gqa_full's is 1/sqrt(D)"
    return ""


def gqa_full(graph: Any) -> list[Match]:
    found = []
    for node in nodes_in(graph, "sdpa"):
        q, k, v = (g.arg(node, i, n) for i, n in enumerate(("query", "key", "value")))
        if not all(map(g.is_node, (q, k, v))):
            continue
        k, v = _unrepeated(k), _unrepeated(v)
        qs, ks, vs = g.shape(q), g.shape(k), g.shape(v)
        if qs is None or ks is None or len(qs) != 4 or ks != vs or ks[::2] != qs[::2]:
            continue
        (b, qh, n, d), kh = qs, ks[1]
        if kh != qh and not g.arg(node, 7, "enable_gqa", False) and k is g.arg(node, 1, "key"):
            continue  # differing heads and no repeat: not attention this problem computes
        if qh % kh:
            continue
        inputs, args = [], []
        for i, tensor in enumerate((q, k, v)):
            source, how = _token_major(tensor)
            inputs.append(source)
            args.append(Arg((i,), how))
        sizes = {"B": b, "N": n, "QH": qh, "KH": kh, "D": d}
        flops, why = 4.0 * b * qh * n * n * d, _why_not(node, d)
        label = f"attention at {node.name}"
        found.append(
            Match("gqa_full", [node], inputs, args, sizes, flops, label, why, layout="each")
        )
    return found
