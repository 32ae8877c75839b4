"""Reading Dynamo's FX graphs: one canonical name per operation, whichever way the user spelt it
(``x * y``, ``torch.mul``, ``x.mul``), the shape and dtype of a node's value, and constants."""

from __future__ import annotations

import operator
from typing import Any

# Dynamo keeps the user's spelling: a method call ("pow"), a torch function, an operator
_METHODS = {
    "pow": "pow",
    "mean": "mean",
    "rsqrt": "rsqrt",
    "mul": "mul",
    "add": "add",
    "neg": "neg",
    "view": "view",
    "reshape": "view",
    "transpose": "transpose",
    "matmul": "matmul",
    "contiguous": "contiguous",
    "float": "float",
    "type_as": "type_as",
    "to": "to",
    "expand": "expand",
    "sqrt": "sqrt",
    "div": "div",
    "square": "square",
    "t": "t",
}
_OPERATORS = {
    operator.add: "add",
    operator.mul: "mul",
    operator.neg: "neg",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.truediv: "div",
    operator.getitem: "getitem",
    operator.iadd: "add",
    operator.imul: "mul",
}


def _torch_functions() -> dict[Any, str]:
    import torch
    import torch.nn.functional as F

    found = {
        torch.add: "add",
        torch.mul: "mul",
        torch.neg: "neg",
        torch.pow: "pow",
        torch.mean: "mean",
        torch.rsqrt: "rsqrt",
        torch.matmul: "matmul",
        torch.mm: "matmul",
        torch.sqrt: "sqrt",
        torch.div: "div",
        torch.square: "square",
        torch.cat: "cat",
        torch.transpose: "transpose",
        torch.reshape: "view",
        torch.sigmoid: "sigmoid",
        F.linear: "linear",
        torch._C._nn.linear: "linear",
        F.silu: "silu",
        F.scaled_dot_product_attention: "sdpa",
        torch._C._nn.scaled_dot_product_attention: "sdpa",
    }
    return found


_FUNCTIONS: dict[Any, str] = {}


def op(node: Any) -> str:
    """The canonical name of what ``node`` computes ("mul", "linear", "sdpa", ...); "" for a
    placeholder, an output or an operation this module does not name."""
    if node.op == "call_method":
        return _METHODS.get(node.target, "")
    if node.op != "call_function":
        return ""
    if not _FUNCTIONS:
        _FUNCTIONS.update(_torch_functions())
    return _OPERATORS.get(node.target) or _FUNCTIONS.get(node.target, "")


def shape(node: Any) -> tuple[int, ...] | None:
    """The shape of a node's value: a symbolic size (``dynamic=True``) as its hint, the size it
    had when the graph was traced; None when it is not a tensor or a size has no hint."""
    value = node.meta.get("example_value") if hasattr(node, "meta") else None
    if value is None or not hasattr(value, "shape"):
        return None
    found = []
    for d in value.shape:
        hint = getattr(getattr(d, "node", None), "hint", d)
        if not isinstance(hint, int):
            return None
        found.append(int(hint))
    return tuple(found)


def is_float32(node: Any) -> bool:
    import torch

    value = node.meta.get("example_value") if hasattr(node, "meta") else None
    return value is not None and getattr(value, "dtype", None) == torch.float32


def needs_grad(node: Any) -> bool:
    value = node.meta.get("example_value") if hasattr(node, "meta") else None
    return bool(getattr(value, "requires_grad", False))


def is_node(value: Any) -> bool:
    return hasattr(value, "op") and hasattr(value, "users")


def arg(node: Any, index: int, name: str, default: Any = None) -> Any:
    """A call's argument by position or keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def only_user(node: Any) -> Any | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def binary(node: Any) -> tuple[Any, Any]:
    """The two operands of a binary call (``torch.add(a, b)``, ``a + b``, ``a.add(b)``)."""
    return arg(node, 0, "input"), arg(node, 1, "other")
