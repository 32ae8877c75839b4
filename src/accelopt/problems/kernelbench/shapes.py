"""Name the kernel arguments of a KernelBench model and write their shapes in size parameters.

Arguments: the tensors of get_inputs() (named after forward's parameters), the floating-point
state in state_dict order (``ln.weight`` -> ``ln_weight``), the outputs (``out``, or ``out0``,
``out1``... for a tuple). Each axis length is named by the constant whose value equals it in every
workload; probing (shape inference with one constant changed) decides between several and rejects
a coincidence; an axis no constant names is a literal when it never changes, else a derived size
parameter ``<arg>_d<axis>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from accelopt.problems.kernelbench.analysis import Run, Shape
from accelopt.problems.kernelbench.source import is_c_name

# A probe: the value given to a constant, and all argument shapes with it (None: it failed).
Probe = Callable[[str], tuple[int, list[Shape]] | None]


@dataclass(frozen=True)
class Argument:
    name: str
    role: str  # "input", "parameter" or "output"
    origin: str  # where the tensor comes from, for a reader
    keys: tuple[str, ...] = ()  # state_dict keys, for a parameter


def _unique(proposed: str, taken: set[str], label: str, notes: list[str]) -> str:
    """``proposed`` made a C identifier that is neither taken nor reserved."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", proposed)
    if not base or base[0].isdigit():
        base = f"p_{base}"
    candidate, k = base, 1
    while not is_c_name(candidate) or candidate in taken:
        candidate = f"{base}_arg" if k == 1 else f"{base}_arg{k}"
        k += 1
    if candidate != proposed:
        why = (
            "a C identifier is ASCII letters, digits and underscores"
            if base != proposed
            else "the name is a size parameter or another argument"
            if base in taken
            else "the name is a C keyword or a name C kernels use"
        )
        notes.append(f"{label} {proposed!r} is the kernel argument {candidate!r}: {why}")
    taken.add(candidate)
    return candidate


def name_arguments(run: Run, constants: Collection[str]) -> tuple[list[Argument], list[str]]:
    """The kernel arguments in order, with unique C names that are not size parameters; notes
    about renamed ones."""
    taken: set[str] = set(constants)
    notes: list[str] = []
    args: list[Argument] = []
    for i, raw in enumerate(run.input_names):
        name = _unique(raw, taken, "input", notes)
        args.append(Argument(name, "input", f"get_inputs()[{i}], forward's {raw}"))
    for keys, _ in run.groups:
        name = _unique(keys[0].replace(".", "_"), taken, "parameter", notes)
        tied = f" (tied to {', '.join(keys[1:])})" if len(keys) > 1 else ""
        args.append(Argument(name, "parameter", f"model.state_dict()[{keys[0]!r}]{tied}", keys))
    outs = run.outputs or []
    for i in range(len(outs)):
        raw = f"out{i}" if run.tuple_output else "out"
        what = f"forward()[{i}]" if run.tuple_output else "forward()"
        args.append(Argument(_unique(raw, taken, "output", notes), "output", what))
    return args, notes


def name_axes(
    args: Sequence[Argument],
    dims: Mapping[str, Sequence[Shape]],
    sizes: Mapping[str, Mapping[str, int]],
    order: Sequence[str],
    probe: Probe,
) -> tuple[list[tuple[str, ...]], dict[str, dict[str, int]], list[str]]:
    """The shape of each argument in size parameters, the derived size parameters with their
    value in each workload, and notes. ``dims``: the argument shapes of each workload; ``sizes``:
    the constants of each workload; ``order``: the constants in file order."""
    workloads = list(dims)
    probes: dict[str, tuple[int, list[Shape]] | None] = {}
    taken = set(order) | {a.name for a in args}
    derived: dict[str, dict[str, int]] = {}
    shapes, notes = [], []
    for i, arg in enumerate(args):
        shape: list[str] = []
        first_shape = dims[workloads[0]][i]
        for axis, length in enumerate(first_shape):
            lengths = {w: dims[w][i][axis] for w in workloads}
            candidates = [c for c in order if all(sizes[w][c] == lengths[w] for w in workloads)]
            confirmed, unknown = [], []
            for c in candidates:
                if c not in probes:
                    probes[c] = probe(c)
                result = probes[c]
                if result is None or i >= len(result[1]) or len(result[1][i]) != len(first_shape):
                    unknown.append(c)
                elif result[1][i][axis] == result[0]:
                    confirmed.append(c)
            chosen = (confirmed or unknown or [None])[0]
            if chosen is not None:
                if not confirmed and len(unknown) > 1:
                    notes.append(
                        f"axis {axis} of {arg.name!r} ({length}) could be any of "
                        f"{', '.join(unknown)}; probing could not tell, so it is {chosen}"
                    )
                shape.append(chosen)
            elif len(set(lengths.values())) == 1:
                shape.append(str(length))
            else:
                name = f"{arg.name}_d{axis}"
                while name in taken:
                    name += "_"
                taken.add(name)
                derived[name] = lengths
                shape.append(name)
        shapes.append(tuple(shape))
    return shapes, derived, notes
