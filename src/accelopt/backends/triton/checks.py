"""Static checks of a Triton kernel module: refuse, before anything runs, code that would do the
work outside the kernel (torch operators, other libraries) or reach files, network, processes or
the interpreter's own state (a module object, ``sys``, ``builtins``, a namespace's ``__dict__``).

The module is parsed (``ast``), never imported, here. The rules are allow-lists (the names are in
``check_names.py``), and they close over the values a kernel can hold, whatever names it binds
them to: a dotted name starts at an import and ends at an allowed function, class, dtype or
constant, so no module is ever a value (``x = tl.extra`` is refused, not followed); every other
attribute is read on a value and must be in a list (a launcher's shape queries, a Triton tensor's
methods); no attribute is assigned; a launcher calls only its own functions, the allowed names and
a few builtins by name, and a method only by calling it at once (``f = out.copy_`` is refused).
What the rules cannot see (an operator on a tensor) is the run-time guard's (``guard.py``). A
source that does not parse passes here: its build then fails with Python's own message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from accelopt.backends.triton.check_names import (
    BANNED_BUILTINS,
    BUILTIN_FUNCTIONS,
    CALLABLE_BUILTINS,
    DEVICE_MATH,
    DOT_NAMES,
    FORMAT_METHODS,
    JIT_ATTRS,
    LAUNCHER_ATTRS,
    LAUNCHER_METHODS,
    NAMESPACES,
    TORCH_NAMES,
    TRITON_NAMES,
    resolve,
)

PRECISIONS = ("ieee", "tf32x3")  # tl.dot input_precision values that keep fp32 accuracy
IMPORTS = "torch, triton, triton.language (and its device-math namespaces) and math"
_LAUNCHER = (
    "outside a @triton.jit kernel: the launcher may only read shapes and launch kernels; the work "
    "must happen in @triton.jit kernels"
)

RULES = (
    "imports other than torch, triton, triton.language (and its "
    + ", ".join(DEVICE_MATH)
    + ") and math",
    "a dotted name that does not start at an import and end at an allowed name (tl.<name>, a "
    "function of " + ", ".join(DEVICE_MATH) + ", math.<name>); a module is never a value: no "
    "t = torch, x = tl.extra, f(tl), return tl.math",
    "torch names other than " + ", ".join(sorted(TORCH_NAMES)) + " (no torch operator: "
    "matmul, softmax, nn.functional, ... run outside the kernel)",
    "triton names other than " + ", ".join(sorted(TRITON_NAMES)) + " and triton.language.*",
    "outside @triton.jit functions, method calls other than "
    + ", ".join(sorted(LAUNCHER_METHODS))
    + ", attributes other than "
    + ", ".join(sorted(LAUNCHER_ATTRS))
    + ", a method taken "
    "without calling it (f = x.view), and the @ operator",
    "outside @triton.jit functions, a call through a name other than the module's own functions, "
    "the allowed imported names and the builtins "
    + ", ".join(sorted(BUILTIN_FUNCTIONS))
    + " (and exceptions); kernel[grid](...) only on the module's own kernels",
    "inside @triton.jit functions, attributes of a value other than a Triton tensor's methods "
    "(x.to, x.reshape, ...), its shape, dtype, type, numel, a dtype's, a constexpr's value",
    'tl.dot without input_precision="ieee" (or "tf32x3"): TF32 misses the problems\' '
    "tolerance; allow_tf32 is refused",
    "the builtins " + ", ".join(sorted(BANNED_BUILTINS - {"__import__"})) + ", __import__, "
    "and str.format / format_map",
    "dunder names and attributes (__class__, __dict__, __globals__, ...), class definitions, "
    "assigning or deleting an attribute (torch.empty = ..., x.data = ...), rebinding an imported "
    "name, global, nonlocal, match statements and generators (yield)",
)


def check_source(source: str) -> str | None:
    """The first reason to refuse ``source`` (the earliest line), or None when it passes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # the build reports Python's own message
    checker = _Checker(tree)
    checker.visit(tree)
    if not checker.reasons:
        return None
    return min(checker.reasons, key=lambda r: r[0])[1]


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _import_bindings(node: ast.Import | ast.ImportFrom) -> tuple[list[tuple[str, str]], list[str]]:
    """The names an import binds (name, dotted path) when allowed, and the reasons it is not."""
    bound: list[tuple[str, str]] = []
    reasons: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name not in NAMESPACES:
                reasons.append(f"import of {alias.name!r}: a kernel may import only {IMPORTS}")
            elif alias.asname:
                bound.append((alias.asname, alias.name))
            else:
                root = alias.name.split(".")[0]
                bound.append((root, root))
        return bound, reasons
    module = node.module or ""
    if module == "__future__":
        return bound, reasons
    if module not in NAMESPACES or node.level:
        return bound, [f"import from {module!r}: a kernel may import only {IMPORTS}"]
    for alias in node.names:
        full, reason, _ = resolve(module, [alias.name])
        if alias.name == "*":
            reason = "`import *` hides which names the kernel uses"
        elif alias.name in DOT_NAMES and module.startswith("triton.language"):
            reason = f"import {alias.name} by name: call tl.{alias.name}(...) directly"
        if reason:
            reasons.append(reason)
        else:
            bound.append((alias.asname or alias.name, full))
    return bound, reasons


# Statements a kernel has no use for, refused where they stand
_NO_USE: dict[type[ast.AST], str] = {
    ast.AsyncFunctionDef: "async functions",
    ast.ClassDef: "class definitions (a kernel is functions)",
    ast.Global: "global statements (a kernel keeps no state across calls)",
    ast.Nonlocal: "nonlocal statements (a kernel keeps no state across calls)",
    ast.Match: "match statements (a class pattern reads attributes by name)",
    ast.Yield: "generators (yield): a kernel's functions return",
    ast.YieldFrom: "generators (yield from): a kernel's functions return",
}


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.reasons: list[tuple[int, str]] = []
        self.aliases: dict[str, str] = {}  # every name an import binds, anywhere: its dotted path
        self.functions: set[str] = set()  # the module's own functions (def, or a lambda bound)
        self.calls: set[int] = set()  # ids of the expressions called (a call's func, decorators)
        self.in_jit = False
        self._collect(tree)

    def _collect(self, tree: ast.Module) -> None:
        """Imports and functions first: a use may come before its import in the source."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name, path in _import_bindings(node)[0]:
                    if self.aliases.setdefault(name, path) != path:
                        self.refuse(node, f"{name!r} imported as two different names")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                self.functions.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def refuse(self, node: ast.AST, reason: str) -> None:
        line = getattr(node, "lineno", 0)
        self.reasons.append((line, f"line {line or '?'}: {reason}"))

    # -- imports and bindings ----------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for reason in _import_bindings(node)[1]:
            self.refuse(node, reason)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for reason in _import_bindings(node)[1]:
            self.refuse(node, reason)

    def _check_binding(self, node: ast.AST, name: str) -> None:
        if name in BANNED_BUILTINS or _dunder(name):
            self.refuse(node, f"the name {name!r} is not allowed in a kernel")
        elif name in self.aliases:
            self.refuse(node, f"rebinding the imported name {name!r}: it must stay the module")

    def visit_arg(self, node: ast.arg) -> None:
        self._check_binding(node, node.arg)
        self._visit_annotation(node.annotation)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._check_binding(node, node.name)
        self.generic_visit(node)

    def _visit_annotation(self, annotation: ast.expr | None) -> None:
        """An annotation is host code; a string one too (a tool may evaluate it)."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                parsed = ast.parse(annotation.value.strip(), mode="eval").body
            except SyntaxError:
                return  # prose: nothing can evaluate it
            annotation = ast.increment_lineno(parsed, annotation.lineno - 1)
        if annotation is not None:
            self.visit(annotation)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        self._visit_annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    # -- names and attributes ----------------------------------------------------------------
    def _chain(self, node: ast.expr) -> tuple[str, list[str]] | None:
        """The import a dotted name starts at (its path) and the attributes after it, or None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return self.aliases[node.id], parts[::-1]
        return None

    def _dotted(self, node: ast.expr) -> str | None:
        chain = self._chain(node)
        return ".".join([chain[0], *chain[1]]) if chain else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = self._chain(node)
        if _dunder(node.attr):
            self.refuse(node, f"dunder attribute {node.attr!r}")
        elif chain is not None and (reason := resolve(*chain)[1]):
            self.refuse(node, reason)
        elif not isinstance(node.ctx, ast.Load):
            self.refuse(
                node,
                f"assigning or deleting the attribute .{node.attr}: a kernel "
                "changes no object's attributes (a module's, a tensor's)",
            )
        elif chain is not None:
            self._check_dotted(node, *chain)
        else:
            self._check_value_attribute(node)
            self.generic_visit(node)

    def _check_dotted(self, node: ast.Attribute, base: str, parts: list[str]) -> None:
        """A dotted name from an import: it must end at an allowed leaf, and a tl.dot be called."""
        full, _, namespace = resolve(base, parts)  # an allowed name: refused names are refused
        if namespace:
            self.refuse(node, f"module {full} used as a value: use its names directly")
        elif parts[-1] in DOT_NAMES and id(node) not in self.calls:
            self.refuse(node, f"{full} used as a value: call it directly")

    def _check_value_attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in FORMAT_METHODS:
            self.refuse(
                node, f".{attr}: a format string can read attributes ({{0.x}}); use an f-string"
            )
        elif self.in_jit:
            if attr not in JIT_ATTRS:
                self.refuse(
                    node,
                    f"attribute .{attr} in a @triton.jit function: only a Triton "
                    "tensor's methods, shape, dtype and type, a dtype's, a constexpr's "
                    "value",
                )
        elif attr in LAUNCHER_ATTRS:
            return
        elif id(node) not in self.calls:
            taken = "a method taken without calling it" if attr in LAUNCHER_METHODS else "attribute"
            readable = ", ".join(sorted(LAUNCHER_ATTRS))
            self.refuse(
                node,
                f"{taken} .{attr} {_LAUNCHER} (it may read {readable} and call methods at once)",
            )
        elif attr not in LAUNCHER_METHODS:
            self.refuse(node, f".{attr}() {_LAUNCHER}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BANNED_BUILTINS or _dunder(node.id):
            self.refuse(node, f"{node.id} is not allowed in a kernel")
        elif not isinstance(node.ctx, ast.Load):
            self._check_binding(node, node.id)
        elif node.id in self.aliases:
            full = self.aliases[node.id]
            if full in NAMESPACES:
                self.refuse(node, f"module {node.id!r} used as a value: use its names directly")
            elif full.split(".")[-1] in DOT_NAMES and id(node) not in self.calls:
                self.refuse(node, f"{node.id} used as a value: call it directly")

    # -- functions and calls -----------------------------------------------------------------
    def _is_jit(self, node: ast.FunctionDef) -> bool:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self._dotted(target) == "triton.jit":
                return True
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """Decorators, defaults and annotations run on the host when the module loads or a kernel
        launches (a heuristic's lambda, an autotune pre_hook): they are launcher code. Only the
        body of a @triton.jit function is kernel code."""
        self._check_binding(node, node.name)
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call):  # @name calls it with the function
                self.calls.add(id(decorator))
                self._check_callee(decorator)
            self.visit(decorator)
        self.visit(node.args)
        self._visit_annotation(node.returns)
        outer, self.in_jit = self.in_jit, self.in_jit or self._is_jit(node)
        for statement in node.body:
            self.visit(statement)
        self.in_jit = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        outer, self.in_jit = self.in_jit, False  # a lambda runs on the host, even in a kernel file
        self.generic_visit(node)
        self.in_jit = outer

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.add(id(node.func))
        name = self._dotted(node.func)
        if name is not None and name.split(".")[-1] in DOT_NAMES:
            self._check_dot(node, name)
        if not self.in_jit:
            self._check_callee(node.func)
        self.generic_visit(node)

    def _check_callee(self, func: ast.expr) -> None:
        """Outside @triton.jit code, what a call may go through: a method (checked as an
        attribute), the module's own function or kernel[grid], an allowed import, a builtin."""
        if isinstance(func, ast.Attribute):
            return
        if isinstance(func, ast.Name):
            name = func.id
            if name in BANNED_BUILTINS or _dunder(name):
                return  # refused as a name
            if name not in self.functions | self.aliases.keys() | CALLABLE_BUILTINS:
                what = "its own functions, allowed imported names, a few builtins"
                self.refuse(func, f"a call through the name {name!r} {_LAUNCHER} (it calls {what})")
        elif not (
            isinstance(func, ast.Subscript)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.functions
        ):
            self.refuse(
                func,
                f"a call of a computed value {_LAUNCHER} (only f(...), x.m(...), "
                "and kernel[grid](...) on the module's own kernels)",
            )

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

    # -- statements a kernel has no use for --------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.refuse(node, "the @ operator outside a @triton.jit kernel runs torch's matmul")
        self.generic_visit(node)

    def visit(self, node: ast.AST) -> None:
        """Refuse a statement a kernel has no use for (``_NO_USE``), its body unread; visit any
        other node by its kind."""
        reason = _NO_USE.get(type(node))
        if reason is not None:
            self.refuse(node, reason)
            return
        super().visit(node)


def iter_rules() -> Iterator[str]:
    """The rules, one line each, for the agents' prompts (``BackendFacts.forbidden``)."""
    yield from RULES
