"""Static checks of a Triton kernel module: refuse, before anything runs, code that would do the
work outside the kernel (torch operators, other libraries) or touch files, network or processes.

The module is parsed (``ast``), never imported, here. The rules are allow-lists: the modules a
kernel may import, the torch and triton names it may use, the methods its launcher may call; what
is not listed is refused. Spellings a parser cannot follow (a method bound to a name, an operator on
a tensor) are the run-time guard's (``guard.py``): it records every torch operator the launcher
runs. A source that does not parse passes here: its
build then fails with Python's own message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

# Modules a kernel may import (and their aliases), with the names it may use from each.
ALLOWED_MODULES = ("torch", "triton", "triton.language", "math")
TORCH_NAMES = frozenset(
    {
        "empty", "empty_like", "empty_strided", "Tensor", "dtype", "device", "Size",
        "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
        "uint8", "bool",
    }
)  # fmt: skip
TRITON_NAMES = frozenset(
    {"jit", "autotune", "Config", "heuristics", "cdiv", "next_power_of_2", "language"}
)
# Components that never appear in a dotted name a kernel uses, even under an allowed module.
BANNED_COMPONENTS = frozenset(
    {
        "os", "sys", "subprocess", "shutil", "socket", "ctypes", "importlib", "builtins",
        "inspect", "pathlib", "io", "pickle", "multiprocessing", "threading", "signal",
        "runtime", "compiler", "knobs", "driver", "testing", "tools", "backends",
    }
)  # fmt: skip
# Names no kernel may use: they reach files, processes, or names the checks cannot see.
BANNED_BUILTINS = frozenset(
    {
        "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr",
        "globals", "locals", "vars", "input", "breakpoint", "memoryview", "exit", "quit",
        "help", "dir", "type", "object", "super", "classmethod", "staticmethod", "property",
    }
)  # fmt: skip
# Methods the launcher (code outside @triton.jit functions) may call: shape queries, views and
# the containers a grid is built with. Everything else would run on the tensors outside the kernel.
LAUNCHER_METHODS = frozenset(
    {
        "numel", "stride", "size", "dim", "data_ptr", "element_size", "is_contiguous", "view",
        "append", "get", "items", "keys",
    }
)  # fmt: skip
PRECISIONS = ("ieee", "tf32x3")  # tl.dot input_precision values that keep fp32 accuracy
DOT_NAMES = frozenset({"dot"})
# Below triton.language, a kernel names tl.<name>, or a name in one of these namespaces (device math
# functions); nothing deeper: Triton's modules hold standard-library modules (tl.extra.pkgutil).
TL_NAMESPACES = frozenset(
    {
        "triton.language.math",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
    }
)

RULES = (
    "imports other than torch, triton, triton.language, its device-math namespaces ("
    + ", ".join(sorted(TL_NAMESPACES)) + ") and math; below triton.language only tl.<name> or a "
    "name in those namespaces",
    "torch names other than " + ", ".join(sorted(TORCH_NAMES)) + " (no torch operator: "
    "matmul, softmax, nn.functional, ... run outside the kernel)",
    "triton names other than " + ", ".join(sorted(TRITON_NAMES)) + " and triton.language.*",
    "outside @triton.jit functions, method calls other than " + ", ".join(sorted(LAUNCHER_METHODS))
    + ", and the @ operator",
    "tl.dot without input_precision=\"ieee\" (or \"tf32x3\"): TF32 misses the problems' "
    "tolerance; allow_tf32 is refused",
    "the builtins " + ", ".join(sorted(BANNED_BUILTINS - {"__import__"})) + ", __import__",
    "dunder names and attributes (__class__, __globals__, ...), class definitions, and using a "
    "module as a value (t = torch)",
)  # fmt: skip


def check_source(source: str) -> str | None:
    """The first reason to refuse ``source``, or None when it passes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # the build reports Python's own message
    checker = _Checker()
    checker.visit(tree)
    return checker.reasons[0] if checker.reasons else None


def _line(node: ast.AST) -> str:
    return f"line {getattr(node, 'lineno', '?')}"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _allowed_module(name: str) -> bool:
    return name in ALLOWED_MODULES or name in TL_NAMESPACES


def _tl_reason(name: str) -> str | None:
    """Below triton.language: tl.<name>, or <namespace>.<name> for a device-math namespace."""
    parts = name.split(".")
    if len(parts) <= 3 or name in TL_NAMESPACES or ".".join(parts[:-1]) in TL_NAMESPACES:
        return None
    return f"{name} is not for kernels (use tl.<name> or {', '.join(sorted(TL_NAMESPACES))})"


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.reasons: list[str] = []
        self.in_jit = False
        self.dot_calls: set[int] = set()  # ids of Attribute/Name nodes called as tl.dot(...)

    def refuse(self, node: ast.AST, reason: str) -> None:
        self.reasons.append(f"{_line(node)}: {reason}")

    # -- imports -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _allowed_module(alias.name):
                self.refuse(node, f"import of {alias.name!r}: a kernel may import only "
                            "torch, triton, triton.language and math")  # fmt: skip
            elif alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "__future__":
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if not (_allowed_module(module) or _allowed_module(full)):
                self.refuse(node, f"import from {module!r}: a kernel may import only "
                            "torch, triton, triton.language (and its device-math namespaces) and "
                            "math")  # fmt: skip
                continue
            reason = self._dotted_reason(full)
            if alias.name == "*":
                reason = "`import *` hides which names the kernel uses"
            elif alias.name in DOT_NAMES and module.startswith("triton.language"):
                reason = f"import {alias.name} by name: call tl.{alias.name}(...) directly"
            if reason:
                self.refuse(node, reason)
            else:
                self.aliases[alias.asname or alias.name] = full

    # -- names and attributes ----------------------------------------------------------------
    def _dotted(self, node: ast.expr) -> str | None:
        """The full dotted name of ``node`` when it starts at a module alias, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return ".".join([self.aliases[node.id], *reversed(parts)])
        return None

    @staticmethod
    def _dotted_reason(name: str) -> str | None:
        parts = name.split(".")
        if any(p in BANNED_COMPONENTS for p in parts[1:]):
            return f"{name} is not for kernels"
        if (
            parts[0] == "torch"
            and len(parts) > 1
            and (len(parts) > 2 or parts[1] not in TORCH_NAMES)
        ):
            return f"{name}: the launcher may only allocate with torch (torch.empty, dtypes); " \
                "the work must happen in @triton.jit kernels"  # fmt: skip
        if name.startswith("triton.language."):
            return _tl_reason(name)
        if parts[0] == "triton" and len(parts) > 1 and parts[1] not in TRITON_NAMES:
            allowed = ", ".join(f"triton.{n}" for n in sorted(TRITON_NAMES))
            return f"{name} is not for kernels (allowed: {allowed})"
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _dunder(node.attr):
            self.refuse(node, f"dunder attribute {node.attr!r}")
            return
        name = self._dotted(node)
        if name is not None:
            reason = self._dotted_reason(name)
            if reason:
                self.refuse(node, reason)
                return
            if name.split(".")[-1] in DOT_NAMES and id(node) not in self.dot_calls:
                self.refuse(node, f"{name} used as a value: call it directly")
            return  # a module chain: its parts are checked as one name
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BANNED_BUILTINS or _dunder(node.id):
            self.refuse(node, f"{node.id} is not allowed in a kernel")
        elif node.id in self.aliases and not isinstance(node.ctx, ast.Store):
            full = self.aliases[node.id]
            if full in ALLOWED_MODULES or full.count(".") == 0:
                self.refuse(node, f"module {node.id!r} used as a value: use its names directly")
            elif full.split(".")[-1] in DOT_NAMES and id(node) not in self.dot_calls:
                self.refuse(node, f"{node.id} used as a value: call it directly")

    # -- functions and calls -----------------------------------------------------------------
    def _is_jit(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self._dotted(target) == "triton.jit":
                return True
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """Decorators, defaults and annotations run on the host when the module loads or a kernel
        launches (a heuristic's lambda, an autotune pre_hook): they are launcher code. Only the
        body of a @triton.jit function is kernel code."""
        if _dunder(node.name):
            self.refuse(node, f"function named {node.name!r}")
        for part in (*node.decorator_list, node.args, node.returns):
            if part is not None:
                self.visit(part)
        outer, self.in_jit = self.in_jit, self.in_jit or self._is_jit(node)
        for statement in node.body:
            self.visit(statement)
        self.in_jit = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        outer, self.in_jit = self.in_jit, False  # a lambda runs on the host, even in a kernel file
        self.generic_visit(node)
        self.in_jit = outer

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.refuse(node, "async functions")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.refuse(node, "class definitions (a kernel is functions)")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.refuse(node, "the @ operator outside a @triton.jit kernel runs torch's matmul")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func)
        if name is not None and name.split(".")[-1] in DOT_NAMES:
            self.dot_calls.add(id(node.func))
            self._check_dot(node, name)
        elif isinstance(node.func, ast.Attribute) and name is None and not self.in_jit:
            method = node.func.attr
            if method not in LAUNCHER_METHODS:
                self.refuse(node, f".{method}() outside a @triton.jit kernel: the launcher may "
                            "only read shapes and launch kernels; the work must happen in "
                            "@triton.jit kernels")  # fmt: skip
        self.generic_visit(node)

    def _check_dot(self, node: ast.Call, name: str) -> None:
        if len(node.args) > 3:
            self.refuse(node, f"{name}: pass input_precision by keyword")
        keywords = {k.arg: k.value for k in node.keywords}
        if None in keywords:
            self.refuse(node, f"{name}: **kwargs hides its precision")
        allow = keywords.get("allow_tf32")
        if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
            self.refuse(node, f"{name}: allow_tf32 is refused (TF32 misses the tolerance)")
        precision = keywords.get("input_precision")
        if not (isinstance(precision, ast.Constant) and precision.value in PRECISIONS):
            self.refuse(
                node,
                f'{name} must say input_precision="ieee" (or "tf32x3"): fp32 semantics, TF32 '
                "misses the problems' tolerance",
            )


def iter_rules() -> Iterator[str]:
    """The rules, one line each, for the agents' prompts (``BackendFacts.forbidden``)."""
    yield from RULES
