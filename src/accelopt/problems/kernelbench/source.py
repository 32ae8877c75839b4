"""A KernelBench file as source text: parse it, override its top-level integer constants, run it.

A KernelBench file defines ``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()`` and
module-level integer constants (``batch_size = 16``). The constants are the problem's size
parameters; ``--set`` rewrites them in the syntax tree, so constants computed from others follow.
Nothing here imports torch: running the file does, through the file's own imports.
"""

from __future__ import annotations

import ast
import hashlib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.problems.imports import ImportRefused


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# C11 keywords, the names a C kernel's translation unit defines or includes, and common macros:
# a size parameter becomes ``#define NAME value`` and an argument a C parameter name, so neither
# may take one of these.
C_RESERVED = _words(
    """auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union
    unsigned void volatile while bool true false NULL size_t ptrdiff_t int8_t int16_t int32_t
    int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t kernel main errno assert
    exp expf exp2 exp2f expm1 log logf log2 log1p log10 pow powf sqrt sqrtf cbrt fabs fabsf fmax
    fmaxf fmin fminf floor floorf ceil ceilf round roundf trunc fmod fma fmaf sin sinf cos cosf tan
    tanf tanh tanhf sinh cosh asin acos atan atan2 erf erff erfc hypot isnan isinf isfinite lrint
    copysign signbit nan NAN INFINITY HUGE_VAL M_PI M_E FLT_MAX FLT_MIN DBL_MAX min max abs
    malloc calloc realloc free memcpy memset memmove memcmp strlen exit abort"""
)

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_c_name(name: str) -> bool:
    """A C identifier that no C kernel needs for itself (not a keyword, libc name, or reserved
    ``__x`` / ``_X`` identifier)."""
    return (
        bool(_C_IDENT.match(name))
        and name not in C_RESERVED
        and not name.startswith("__")
        and not re.match(r"_[A-Z]", name)
    )


def default_name(path: Path) -> str:
    """The problem name for a KernelBench file: ``19_ReLU.py`` -> ``kb_19_relu``."""
    stem = re.sub(r"[^a-z0-9]+", "_", Path(path).stem.lower()).strip("_")
    return f"kb_{stem}" if stem else "kb"


@dataclass(frozen=True)
class Source:
    """A parsed KernelBench file: its text, its syntax tree, and the names its top-level
    statements assign (in file order)."""

    filename: str
    text: str
    tree: ast.Module
    assigned: tuple[str, ...]


def parse(text: str, filename: str) -> Source:
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise ImportRefused(
            f"{filename} does not parse: {exc.msg} at line {exc.lineno}; fix the file"
        ) from None
    assigned: dict[str, None] = {}
    for stmt in tree.body:
        for name in _assigned_names(stmt):
            assigned.setdefault(name, None)
    return Source(filename, text, tree, tuple(assigned))


def _assigned_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def rewrite(source: Source, overrides: Mapping[str, int]) -> ast.Module:
    """The tree with ``NAME = value`` inserted after every top-level statement that assigns an
    overridden NAME, so the override wins and later constants computed from NAME follow."""
    body: list[ast.stmt] = []
    for stmt in source.tree.body:
        body.append(stmt)
        for name in _assigned_names(stmt):
            if name in overrides:
                fix = ast.Assign(
                    targets=[ast.Name(id=name, ctx=ast.Store())],
                    value=ast.Constant(value=int(overrides[name])),
                )
                body.append(ast.copy_location(fix, stmt))
    module = ast.Module(body=body, type_ignores=[])
    return ast.fix_missing_locations(module)


def mentions_gpu(exc: BaseException | str) -> bool:
    """Whether an error (or its message) says the code wanted a GPU."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return bool(re.search(r"cuda|nvidia|\bgpu\b|cudnn|nccl", text, re.IGNORECASE))


def short_error(exc: BaseException) -> str:
    """``Type: first line of the message``, at most 200 characters."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def gpu_refusal(filename: str, exc: BaseException) -> ImportRefused:
    return ImportRefused(
        f"{filename} needs a GPU ({short_error(exc)}); accelopt runs an imported problem's "
        "reference on the CPU"
    )


def execute(source: Source, overrides: Mapping[str, int]) -> dict[str, Any]:
    """Run the file (its ``if __name__ == "__main__"`` block excluded) with the constants
    overridden; its namespace, which must define Model, get_inputs and get_init_inputs."""
    text = rewrite(source, overrides)
    code = compile(text, source.filename, "exec")
    # a name of its own per file and constants: torch.compile imports a module by its name
    digest = hashlib.sha256(f"{source.filename}\0{text}".encode()).hexdigest()[:16]
    module = types.ModuleType(f"accelopt_kernelbench_{digest}")
    module.__file__ = source.filename
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        if mentions_gpu(exc):
            raise gpu_refusal(source.filename, exc) from None
        raise ImportRefused(f"{source.filename} fails to run: {short_error(exc)}") from None
    ns = module.__dict__
    for name, kind in (("Model", "class"), ("get_inputs", "function"), ("get_init_inputs", "")):
        if not callable(ns.get(name)):
            what = kind or "function"
            raise ImportRefused(
                f"{source.filename} defines no {name} {what}; a KernelBench file defines "
                "class Model, get_inputs() and get_init_inputs()"
            )
    return ns


def integer_constants(source: Source, ns: Mapping[str, Any]) -> dict[str, int]:
    """The file's top-level integer constants (booleans excluded), in file order."""
    return {
        n: ns[n]
        for n in source.assigned
        if isinstance(ns.get(n), int) and not isinstance(ns.get(n), bool)
    }


def first_sentence(doc: str | None) -> str:
    text = " ".join((doc or "").split())
    if not text:
        return ""
    match = re.search(r"(?<=[.!?])\s", text)
    return text[: match.start()] if match else text
