"""A hot part of a model that no problem matches, written out as a KernelBench file (a ``Model``
doing only that operation, ``get_inputs`` at its shapes) so that the importer makes it a
workspace problem, a search finds it a kernel, and ``generic.py`` matches it next time.

Only a single call whose arguments are the tensors it reads and literal constants is carved: its
code is the call as Dynamo recorded it, so the traced problem is the same graph as the part."""

from __future__ import annotations

import operator
from typing import Any

from accelopt.model import graphs as g

_SYMBOLS = {
    operator.add: "+",
    operator.mul: "*",
    operator.sub: "-",
    operator.truediv: "/",
    operator.matmul: "@",
}


def _literal(value: Any) -> bool:
    if isinstance(value, tuple | list):
        return all(_literal(v) for v in value)
    return value is None or isinstance(value, bool | int | float | str | slice | type(...))


def call_text(node: Any, names: dict[Any, str]) -> str | None:
    """The call's source with its tensor inputs named by ``names``; None where it cannot be
    written (an argument that is neither an input nor a literal)."""
    from torch.fx.node import _get_qualified_name

    def text(value: Any) -> str | None:
        if g.is_node(value):
            return names.get(value)
        return repr(value) if _literal(value) else None

    args = [text(a) for a in node.args]
    kwargs = {k: text(v) for k, v in node.kwargs.items()}
    if any(a is None for a in args) or any(v is None for v in kwargs.values()):
        return None
    named = [f"{k}={v}" for k, v in kwargs.items()]
    if node.op == "call_method":
        return f"{args[0]}.{node.target}({', '.join([*args[1:], *named])})"  # type: ignore[list-item]
    written = ", ".join([*args, *named])  # type: ignore[list-item]
    if node.target in _SYMBOLS and len(args) == 2 and not kwargs:
        return f"{args[0]} {_SYMBOLS[node.target]} {args[1]}"
    if node.op != "call_function":
        return None
    return f"{_get_qualified_name(node.target)}({written})"


def kernelbench_file(node: Any, origin: str) -> str | None:
    """A KernelBench file computing ``node`` alone on fresh inputs of its shapes; None where the
    node cannot be carved (not float32 tensors of static shapes, or unwritable arguments)."""
    inputs = list(dict.fromkeys(node.all_input_nodes))
    shapes = [g.shape(n) for n in inputs]
    if not inputs or any(s is None for s in shapes) or not all(map(g.is_float32, inputs)):
        return None
    names = {n: f"in{i}" for i, n in enumerate(inputs)}
    call = call_text(node, names)
    if call is None or g.shape(node) is None:
        return None
    constants, dims = _constants(shapes)  # type: ignore[arg-type]
    args = ", ".join(names.values())
    randn = ", ".join(f"torch.randn({', '.join(d)})" for d in dims)
    return (
        f'"""{g.op(node) or node.name} at {shapes}, carved from {origin} by accelopt model '
        'optimize: no problem matched it."""\n\n'
        "import operator  # noqa: F401\n\nimport torch\n\n"
        + "".join(f"{k} = {v}\n" for k, v in constants.items())
        + f"\n\nclass Model(torch.nn.Module):\n    def forward(self, {args}):\n"
        f"        return {call}\n\n\ndef get_inputs():\n    return [{randn}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def _constants(shapes: list[tuple[int, ...]]) -> tuple[dict[str, int], list[list[str]]]:
    """One named constant per distinct size (``D0 = 256``), and each shape spelt with them."""
    constants: dict[str, int] = {}
    by_value: dict[int, str] = {}
    dims = []
    for shape in shapes:
        spelt = []
        for size in shape:
            if size not in by_value:
                by_value[size] = f"D{len(by_value)}"
                constants[by_value[size]] = size
            spelt.append(by_value[size])
        dims.append(spelt)
    return constants, dims
