"""Static checks on Triton kernel modules: the imports, torch and triton names, launcher methods
and tl.dot precisions a kernel may use, with a reason that names the line and the offender, and no
false alarms on the shipped baselines or ordinary launcher code."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt.backends.registry import shipped_kernel
from accelopt.backends.triton.checks import check_source, iter_rules
from accelopt.problems import list_problems, load_problem

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"


LAUNCH = 7  # the line of a launcher's first statement under HEADER
JIT = 8  # the line of a @triton.jit function's first statement under HEADER


def launcher(code: str, header: str = HEADER) -> str:
    """A module whose launcher ``kernel(x, y, out)`` runs ``code`` (one line or several)."""
    body = "\n".join(f"    {line}" for line in code.splitlines())
    return f"{header}\n\ndef kernel(x, y, out):\n{body}\n"


def jit(code: str, header: str = HEADER) -> str:
    """A module whose @triton.jit function ``_k(a, b, c)`` runs ``code``."""
    body = "\n".join(f"    {line}" for line in code.splitlines())
    return f"{header}\n\n@triton.jit\ndef _k(a, b, c):\n{body}\n"


def refused(source: str, *parts: str, line: int | None = None) -> str:
    """The reason ``source`` is refused, checked to mention each of ``parts`` (and the line)."""
    reason = check_source(source)
    assert reason is not None, f"not refused:\n{source}"
    for part in parts:
        assert part in reason, f"{part!r} not in {reason!r}"
    if line is not None:
        assert reason.startswith(f"line {line}:"), reason
    return reason


# -- what passes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_problems())
def test_shipped_baselines_pass(name):
    path = shipped_kernel(load_problem(name), "baseline", "triton")
    assert path.name == "baseline_triton.py"
    assert check_source(path.read_text()) is None


@pytest.mark.parametrize("source", ["def kernel(:\n", "x = (\n", "import\n", "\x00"])
def test_source_that_does_not_parse_passes_for_the_build_to_report(source):
    assert check_source(source) is None


def test_empty_module_passes():
    assert check_source("") is None


STUB = "\n\n@triton.jit\ndef _k(a, b, c, BLOCK: tl.constexpr):\n    pass\n"  # a kernel to launch


def test_ordinary_launcher_passes():
    source = launcher(
        "n = x.numel()\n"
        "rows, cols = x.shape\n"
        "flat = x.view(-1)\n"
        "s0, s1 = x.stride(0), x.stride(1)\n"
        "size = x.size(0) * x.dim() * x.element_size()\n"
        "assert x.is_contiguous() and x.data_ptr() != 0\n"
        "tmp = torch.empty((rows, cols), device=x.device, dtype=torch.float32)\n"
        "like = torch.empty_like(x)\n"
        "block = triton.next_power_of_2(cols)\n"
        "grid = (triton.cdiv(n, block),)\n"
        "_k[grid](flat, tmp, out, BLOCK=block)\n"
        "meta_grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)\n"
        "_k[meta_grid](flat, tmp, out)\n"
        "nd, dt, dev, fp = x.ndim, x.dtype, x.device, x.dtype.itemsize\n"
        "print(f'{rows} x {cols}', max(1, min(n, 4)), len(x.shape), isinstance(x, torch.Tensor))",
        HEADER + STUB,
    )
    assert check_source(source) is None


def test_autotune_heuristics_and_config_pass():
    source = HEADER + (
        "\n\n@triton.autotune(\n"
        "    configs=[triton.Config({'BLOCK': 64}, num_warps=4), triton.Config({'BLOCK': 128})],\n"
        "    key=['n'],\n"
        ")\n"
        "@triton.heuristics(values={'EVEN': lambda args: args['n'] % args['BLOCK'] == 0})\n"
        "@triton.jit\n"
        "def _k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n"
    )
    assert check_source(source) is None


def test_methods_inside_a_jit_function_pass():
    source = jit("v = tl.load(a).to(tl.float32)\nw = v.sum(axis=0)\ntl.store(b, w.to(tl.float16))")
    assert check_source(source) is None


def test_libdevice_import_passes():
    header = HEADER + "from triton.language.extra import libdevice\n"
    assert check_source(jit("tl.store(b, libdevice.exp(tl.load(a)))", header)) is None


def test_math_and_future_imports_pass():
    header = "from __future__ import annotations\nimport math\n" + HEADER
    assert check_source(launcher("scale = 1.0 / math.sqrt(x.shape[-1])", header)) is None


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_tl_dot_with_an_fp32_precision_passes(precision):
    source = jit(f'acc = tl.dot(a, b, c, input_precision="{precision}", allow_tf32=False)')
    assert check_source(source) is None


@pytest.mark.parametrize(
    "code",
    [
        "opts['driver'] = 1",
        "cfg['testing'] = cfg.get('runtime')",
        "os = 3",
        "values = {'sum': 1}.get('sum')",
        "torch_like = x.shape",
        "sys = {'modules': 1}['modules']",
    ],
)
def test_dangerous_words_on_plain_values_pass(code):
    assert check_source(launcher(f"opts = cfg = {{}}\n{code}")) is None


# -- imports -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "offender"),
    [
        ("import os", "'os'"),
        ("import subprocess", "'subprocess'"),
        ("import numpy as np", "'numpy'"),
        ("import torch.nn.functional as F", "'torch.nn.functional'"),
        ("from os import system", "'os'"),
        ("from triton.testing import do_bench", "triton.testing"),
        ("from . import helper", "import from"),
    ],
)
def test_import_outside_the_allowed_modules_is_refused(line, offender):
    refused(f"{line}\n", offender, "import", line=1)


@pytest.mark.parametrize(
    ("line", "offender"),
    [
        ("from torch import matmul", "torch.matmul"),
        ("from torch import nn", "torch.nn"),
        ("from triton import testing", "triton.testing"),
        ("from triton import runtime", "triton.runtime"),
    ],
)
def test_importing_a_banned_name_from_an_allowed_module_is_refused(line, offender):
    refused(f"{line}\n", offender, line=1)


@pytest.mark.parametrize("module", ["triton.language", "math", "torch"])
def test_star_import_is_refused(module):
    refused(f"from {module} import *\n", "import *", line=1)


@pytest.mark.parametrize("name", ["dot"])
def test_importing_dot_by_name_is_refused(name):
    refused(f"from triton.language import {name}\n", f"import {name} by name", line=1)


def test_first_reason_is_the_earliest_line():
    source = "import torch\nimport os\nx = torch.matmul\n"
    assert refused(source, "'os'").startswith("line 2:")


# -- torch and triton names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "offender"),
    [
        ("out = torch.matmul(x, y)", "torch.matmul"),
        ("out = torch.nn.functional.softmax(x, dim=-1)", "torch.nn.functional.softmax"),
        ("out = torch.softmax(x, dim=-1)", "torch.softmax"),
        ("z = torch.zeros(4, device=x.device)", "torch.zeros"),
        ("z = torch.ones(4)", "torch.ones"),
        ("z = torch.from_numpy(a)", "torch.from_numpy"),
        ("torch.cuda.synchronize()", "torch.cuda.synchronize"),
        ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends"),
        ("f = torch.Tensor.sum", "torch.Tensor.sum"),
    ],
)
def test_torch_operators_in_the_launcher_are_refused(code, offender):
    refused(launcher(code), offender, line=LAUNCH)


@pytest.mark.parametrize(
    ("code", "offender"),
    [
        ("d = triton.runtime.driver.active", "triton.runtime.driver.active"),
        ("triton.testing.do_bench(lambda: None)", "triton.testing.do_bench"),
        ("triton.compiler.compile(None)", "triton.compiler"),
        ("triton.knobs.cache.dir = '/tmp'", "triton.knobs"),
        ("triton.Tensor", "triton.Tensor"),
    ],
)
def test_triton_names_outside_the_allow_list_are_refused(code, offender):
    refused(launcher(code), offender, "not for kernels", line=LAUNCH)


def test_dangerous_component_under_an_allowed_module_is_refused():
    refused(launcher("m = tl.core.os"), "triton.language.core.os", "not for kernels", line=LAUNCH)


def test_aliases_are_resolved():
    refused(launcher("y = th.matmul(x, x)", "import torch as th\n"), "torch.matmul", line=5)
    header = "import triton\nimport triton.language as T\n"
    refused(jit("c = T.dot(a, b)", header), "triton.language.dot", "input_precision", line=7)


def test_from_import_alias_is_resolved():
    header = "from torch import empty as alloc, float32\nfrom triton import jit\n"
    assert check_source(launcher("t = alloc(4, dtype=float32)", header)) is None
    source = "from triton import language as L\nimport triton\n\n@triton.jit\ndef k(a, b):\n"
    refused(source + "    return L.dot(a, b)\n", "triton.language.dot", line=6)


# -- launcher methods and the @ operator ---------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "method"),
    [
        ("out.copy_(x)", "copy_"),
        ("x.sum()", "sum"),
        ("out.fill_(0)", "fill_"),
        ("x.contiguous()", "contiguous"),
        ("x.item()", "item"),
        ("x.cpu()", "cpu"),
        ("x.t()", "t"),
        ("x.to(torch.float16)", "to"),
        ("x.mul_(2)", "mul_"),
        ("torch.empty(3).zero_()", "zero_"),
        ("x[0].add(1)", "add"),
    ],
)
def test_tensor_methods_in_the_launcher_are_refused(call, method):
    refused(launcher(call), f".{method}()", "outside a @triton.jit kernel", line=LAUNCH)


def test_helper_function_is_checked_as_launcher_code():
    source = HEADER + "\n\ndef _total(t):\n    return t.sum()\n"
    refused(source, ".sum()", line=LAUNCH)


def test_lambda_in_the_launcher_is_checked():
    refused(launcher("f = lambda t: t.sum()"), ".sum()", line=LAUNCH)


def test_matmul_operator_outside_jit_is_refused():
    refused(launcher("out = x @ y"), "@ operator", line=LAUNCH)


def test_matmul_operator_inside_jit_passes():
    # Triton rejects `@` when it compiles the kernel: the checks leave that to the build.
    assert check_source(jit("c = a @ b")) is None


def test_function_nested_in_a_jit_function_is_kernel_code():
    assert check_source(jit("def inner(v):\n    return v.sum()\nreturn inner(a)")) is None


# -- builtins, dunders, classes, modules as values -----------------------------------------------


@pytest.mark.parametrize(
    "builtin", ["getattr", "eval", "exec", "open", "__import__", "globals", "type", "compile",
                "setattr", "vars", "breakpoint"],
)  # fmt: skip
def test_banned_builtins_are_refused(builtin):
    refused(launcher(f"r = {builtin}('x')"), builtin, "not allowed", line=LAUNCH)


def test_banned_builtin_inside_jit_is_refused():
    refused(jit("f = eval('1')"), "eval", line=JIT)


@pytest.mark.parametrize(
    ("code", "attr"), [("c = x.__class__", "__class__"), ("g = kernel.__globals__", "__globals__")]
)
def test_dunder_attributes_are_refused(code, attr):
    refused(launcher(code), "dunder attribute", repr(attr), line=LAUNCH)


def test_dunder_attribute_on_a_module_is_refused():
    refused(launcher("d = torch.__dict__"), "dunder attribute", "'__dict__'", line=LAUNCH)


def test_dunder_names_are_refused():
    refused(launcher("b = __builtins__"), "__builtins__", line=LAUNCH)
    refused("def __getattr__(name):\n    return name\n", "'__getattr__'", line=1)


def test_class_definition_is_refused():
    refused(HEADER + "\n\nclass Launcher:\n    pass\n", "class definitions", line=6)


def test_async_function_is_refused():
    refused(HEADER + "\n\nasync def kernel(x):\n    return x\n", "async functions", line=6)


@pytest.mark.parametrize(
    ("code", "module"),
    [("t = torch", "'torch'"), ("print(tl)", "'tl'"), ("mods = [triton]", "'triton'")],
)
def test_module_used_as_a_value_is_refused(code, module):
    refused(launcher(code), "module", module, "used as a value", line=LAUNCH)


# -- tl.dot precision ----------------------------------------------------------------------------


def test_tl_dot_without_input_precision_is_refused():
    refused(jit("c = tl.dot(a, b)"), "triton.language.dot", 'input_precision="ieee"', line=JIT)


def test_tl_dot_with_tf32_is_refused():
    refused(jit('c = tl.dot(a, b, input_precision="tf32")'), "input_precision", line=JIT)


def test_tl_dot_with_a_variable_precision_is_refused():
    refused(jit('p = "ieee"\nc = tl.dot(a, b, input_precision=p)'), "input_precision", line=JIT + 1)


@pytest.mark.parametrize("allow", ["True", "flag", "1"])
def test_tl_dot_allow_tf32_is_refused(allow):
    code = f'c = tl.dot(a, b, input_precision="ieee", allow_tf32={allow})'
    refused(jit(code), "allow_tf32 is refused", line=JIT)


def test_tl_dot_with_positional_precision_is_refused():
    refused(jit('c = tl.dot(a, b, c, "ieee")'), "pass input_precision by keyword", line=JIT)


def test_tl_dot_with_double_star_kwargs_is_refused():
    code = 'kw = {"input_precision": "ieee"}\nc = tl.dot(a, b, **kw)'
    refused(jit(code), "**kwargs hides its precision", line=JIT + 1)


def test_tl_dot_as_a_value_is_refused():
    refused(jit("d = tl.dot\nc = d(a, b)"), "triton.language.dot used as a value", line=JIT)


def test_tl_dot_in_the_launcher_is_checked_too():
    refused(launcher("c = tl.dot(x, y)"), "input_precision", line=LAUNCH)


# -- host code that hides in reach of triton.language or in a kernel's decorators ---------------


@pytest.mark.parametrize(
    "code",
    [
        "f = tl.extra.pkgutil.resolve_name('os:system')",
        "r = tl.core.typing.stdlib_re.enum.bltns.eval('1')",
    ],
)
def test_stdlib_reached_through_triton_language_is_refused(code):
    refused(launcher(code), line=LAUNCH)


def test_device_math_namespaces_are_allowed_and_nothing_below_them():
    assert check_source(HEADER + "from triton.language.extra.cuda import libdevice\n") is None
    assert check_source(launcher("y = tl.extra.cuda.libdevice.exp")) is None
    refused(launcher("y = tl.extra.cuda.utils.globaltimer"), "not for kernels")
    refused(HEADER + "from triton.language.extra import pkgutil\n", "triton.language.extra")


def test_torch_work_in_a_jit_functions_heuristics_is_refused():
    source = HEADER + (
        "\n\n@triton.heuristics(values={'D': lambda a: a['o'].copy_(a['x'] * 2) is None})\n"
        "@triton.jit\n"
        "def _k(x, o, D: tl.constexpr):\n"
        "    pass\n"
    )
    refused(source, ".copy_()", line=6)


# -- the rules -----------------------------------------------------------------------------------


def test_rules_are_non_empty_lines():
    rules = list(iter_rules())
    assert len(rules) >= 5
    for rule in rules:
        assert rule.strip() and "\n" not in rule


def test_rules_name_dot_precision_and_torch():
    rules = list(iter_rules())
    assert any("tl.dot" in r and "input_precision" in r for r in rules)
    assert any("torch" in r and "matmul" in r for r in rules)
    assert any("__import__" in r and "eval" in r for r in rules)


# -- every kernel the repository ships passes ----------------------------------------------------

TRITON_KERNELS = Path(__file__).parent / "triton_kernels"
REFUSED_KERNELS = {"imports_os"}  # the kernels there that the static checks are meant to refuse


@pytest.mark.parametrize("path", sorted(TRITON_KERNELS.glob("*.py")), ids=lambda p: p.stem)
def test_the_test_suites_triton_kernels_pass_unless_meant_to_be_refused(path):
    """The guard's and the harness's test kernels (torch_op, caught_guard, ...) must reach the
    run-time checks: the static ones refuse none of them but imports_os."""
    reason = check_source(path.read_text())
    assert (reason is not None) == (path.stem in REFUSED_KERNELS), reason


def test_honest_launcher_and_kernel_idioms_pass():
    header = HEADER + "import math\nfrom triton.language.extra.cuda import libdevice\n"
    source = header + (
        "\n\n@triton.autotune(configs=[triton.Config({'BLOCK': 64}, num_warps=4)], key=['n'])\n"
        "@triton.jit(do_not_specialize=['n'])\n"
        "def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr, ACC: tl.constexpr = tl.float32):\n"
        "    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n"
        "    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(ACC)\n"
        "    w = tl.math.exp(v) + libdevice.tanh(v) + tl.extra.cuda.libdevice.erf(v)\n"
        "    w = tl.where(v > 0, w, w.T.trans().reshape((BLOCK,)))\n"
        "    tl.store(y_ptr + offs, w.to(y_ptr.dtype.element_ty), mask=offs < v.shape[0])\n"
        "\n\ndef _grid(meta):\n    return (triton.cdiv(meta['n'], meta['BLOCK']),)\n"
        "\n\ndef kernel(x: 'torch.Tensor', y: torch.Tensor) -> None:\n"
        "    n = x.numel()\n"
        "    scale = 1.0 / math.sqrt(max(n, 1))\n"
        "    assert x.is_contiguous() and x.is_cuda in (True, False) and scale > 0\n"
        "    if n == 0:\n"
        "        raise ValueError(f'empty input {tuple(x.shape)}')\n"
        "    _k[_grid](x, y, n)\n"
    )
    assert check_source(source) is None


def test_listed_names_are_no_modules_in_the_installed_triton():
    """The allow-lists name leaves (functions, types, dtypes): a Triton that turned one into a
    module would hand a kernel a module object through it."""
    import types

    tl = pytest.importorskip("triton.language")
    from triton.language import math as tl_math
    from triton.language.extra.cuda import libdevice

    from accelopt.backends.triton import check_names as names

    for module, listed in ((tl, names.TL_NAMES), (tl_math, names.TL_MATH_NAMES),
                           (libdevice, names.LIBDEVICE_NAMES)):  # fmt: skip
        for name in listed:
            assert not isinstance(getattr(module, name, None), types.ModuleType), name
    assert "handle" not in names.JIT_ATTRS  # the interpreter's numpy array (tofile, ctypes)


# -- attacks: values reached through a binding, a method taken as a value, a hidden call ---------
# Each source was run against the checks before this rewrite (which resolved a dotted name only
# when it started at an import alias, refused a method only in `obj.m(...)` syntax and checked no
# binding): the comment says how they let it pass.


def jit_module(code: str, header: str = HEADER) -> str:
    """``jit(code)`` followed by a launcher that launches it."""
    return jit(code, header) + "\n\ndef kernel(x, y, out):\n    _k[(1,)](x, y, out)\n"


LIBDEVICE = HEADER + "from triton.language.extra.cuda import libdevice\n"


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        # old: `tl.extra` is tl.<name> (allowed); `e.pkgutil...` started at a local, unchecked;
        # `system('true')` is a call through a plain name, unchecked.
        (launcher("e = tl.extra\nsystem = e.pkgutil.os.system\nsystem('true')"),
         "module triton.language.extra used as a value"),
        # old: triton.language is an allowed triton name; the rest hung off a local.
        (launcher("lang = triton.language\nopen_ = lang.core.builtins.open\nopen_('/etc/x')"),
         "module triton.language used as a value"),
        # old: tl.math is a device-math namespace, fine as a value; math.core.builtins unchecked.
        (launcher("m = tl.math\nrun = m.core.builtins.exec\nrun('1')"),
         "module triton.language.math used as a value"),
        # old: libdevice.core is "a name in a device-math namespace"; c.builtins hung off a local.
        (launcher("c = libdevice.core\nrun = c.builtins.exec\nrun('1')", LIBDEVICE),
         "libdevice.core is not for kernels"),
        # old: an alias with a dot in its path was not "a module used as a value".
        (launcher("ld = libdevice\nrun = ld.core.builtins.exec\nrun('1')", LIBDEVICE),
         "module 'libdevice' used as a value"),
        # old: a walrus, a for target, a comprehension variable: bindings were never tracked.
        (launcher("(e := tl.extra)\nrun = e.pkgutil.os.system\nrun('true')"), "used as a value"),
        (launcher("for e in (tl.extra,):\n    run = e.pkgutil.os.system\n    run('true')"),
         "used as a value"),
        (launcher("runs = [e.pkgutil.os.system for e in [tl.extra]]"), "attribute .system"),
        (launcher("runs = [e for e in [tl.extra]]"), "used as a value"),
        # old: a default is host code, but only chains from an alias were resolved in it.
        (HEADER + "\n\ndef _h(e=tl.extra):\n    return e.pkgutil.os.system\n", "used as a value"),
        # old: inside @triton.jit no method rule at all, and `e` was a plain local (the
        # interpreter runs this body as Python; on a GPU Triton's code generator calls it).
        (jit_module("e = tl.extra\ne.pkgutil.os.system('true')"), "used as a value"),
    ],
)  # fmt: skip
def test_a_module_reached_through_a_binding_is_refused(source, fragment):
    refused(source, fragment)


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        # old: only `out.copy_(...)` was a method call; `f = out.copy_` then `f(x)` passed.
        ("f = out.copy_\nf(x)", "attribute .copy_"),
        # old: the bound method handed to a builtin that calls it (max's key) passed.
        ("max([x], key=out.copy_)", "attribute .copy_"),
        # old: a lambda's default is evaluated on the host; `out.copy_` there was never a call.
        ("g = lambda f=out.copy_: f(x)\ng()", "attribute .copy_"),
        # old: an allowed method taken without its call (the launcher-method list was for calls).
        ("v = x.view\nv(-1)", "a method taken without calling it .view"),
        # old: a builtin bound to a name, then called through it: calls by name were unchecked.
        ("pick = max\npick([x], key=len)", "a call through the name 'pick'"),
        # old: torch.Tensor is allowed; `T.copy_` hung off a local, `f(out, x)` a plain call.
        ("T = torch.Tensor\nf = T.copy_\nf(out, x)", "attribute .copy_"),
        # old: reading `.data` is no call (`out.data = x` swaps the output's storage).
        ("d = out.data", "attribute .data"),
        ("s = out.untyped_storage", "attribute .untyped_storage"),
        # old: a call of a subscript or of a call's result was never looked at.
        ("fns = {'c': len}\nfns['c'](x)", "a call of a computed value"),
        # old: generator frames are plain attributes: g.gi_frame.f_builtins['exec'] is eval.
        ("g = (i for i in [0])\nrun = g.gi_frame.f_builtins['exec']", "attribute .f_builtins"),
        # old: hasattr was no banned builtin (it probes properties by name).
        ("ok = hasattr(x, 'untyped_storage')", "hasattr is not allowed"),
        # old: format() was no banned builtin either (it calls the value's __format__).
        ("f = format(x, '')", "format is not allowed"),
        # old: SystemExit was no banned name; it slips past the harness's `except Exception`.
        ("raise SystemExit(0)", "SystemExit is not allowed"),
    ],
)
def test_a_method_or_callable_taken_as_a_value_is_refused(code, fragment):
    refused(launcher(code), fragment)


def test_a_kernels_capture_scope_is_refused():
    # old: `_k.get_capture_scope` is no call, `scope()` a plain call, and `b['exec'](...)` a call
    # of a subscript: the kernel module's globals (its __builtins__) were one step away.
    body = "    scope = _k.get_capture_scope\n    b = scope()['__builtins__']\n    b['exec']('1')\n"
    source = HEADER + STUB + "\n\ndef kernel(x, y):\n" + body
    refused(source, "attribute .get_capture_scope", line=12)
    # old: the same from a Triton function (tl.sum is a JITFunction) bound to a name first.
    refused(launcher("s = tl.sum\nscope = s.get_capture_scope"), ".get_capture_scope")


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        # old: no method rule inside @triton.jit: Triton's own functions' globals, and through
        # them __builtins__, were a call away (the interpreter and the code generator run it).
        ("b = _k.get_capture_scope()['__builtins__']", "attribute .get_capture_scope"),
        # old: the interpreter's tensors hold numpy arrays (`a.handle.data.tofile(path)`).
        ("h = a.handle\nh.data.tofile('/tmp/leak')", "attribute .handle"),
        # old: the launcher's .format() was refused as a method, a kernel's was not; a format
        # field walks attributes by name: "{0.__class__.__mro__}".
        ("s = '{0.__class__.__mro__}'.format(a)", ".format"),
        ("s = '{0.x}'.format_map({'0': a})", ".format_map"),
    ],
)
def test_host_reaches_inside_a_jit_function_are_refused(code, fragment):
    refused(jit_module(code), fragment, "line 8:")


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        # old: `e.pkgutil.sys.modules` hung off a local, `.get` is an allowed method, and an
        # attribute assignment was never checked: the worker's own modules, patched.
        ("e = tl.extra\nmods = e.pkgutil.sys.modules\nb = mods.get('accelopt.x')\nb.check = None",
         "used as a value"),
        # old: assigning or deleting an allowed name was reading it (torch.empty is allowed).
        ("torch.empty = lambda *a, **k: x", "assigning or deleting the attribute .empty"),
        ("del torch.empty_like", "assigning or deleting the attribute .empty_like"),
        ("out.data = x", "assigning or deleting the attribute .data"),
        ("tl.load = None", "assigning or deleting the attribute .load"),
        # old: the Store of an alias name was skipped; then `tl.copy_` resolved as
        # triton.language.copy_ (tl.<name>: allowed) while tl held the output tensor.
        ("tl = out\ntl.copy_(x)", "rebinding the imported name 'tl'"),
        ("for tl in [out]:\n    tl.zero_()", "rebinding the imported name 'tl'"),
    ],
)  # fmt: skip
def test_patching_modules_or_shadowing_an_import_is_refused(code, fragment):
    refused(launcher(code), fragment, line=LAUNCH)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        # old: global was allowed, and a Store of an alias name unchecked: tl became a tensor.
        (HEADER + "\n\ndef _swap(t):\n    global tl\n    tl = t\n", "global statements"),
        (HEADER + "\n\ndef kernel(x, y, out):\n    f = 1\n\n    def inner():\n        nonlocal f\n"
         "        f = 2\n", "nonlocal statements"),
        # old: a class pattern reads attributes by name (strings, never an Attribute node):
        # `case torch.Tensor(copy_=c)` binds the bound method, then `c(x)` is a plain call.
        (launcher("match out:\n    case torch.Tensor(copy_=c):\n        c(x)"), "match statements"),
        # old: generators were allowed; a generator's frame holds f_builtins and f_globals.
        (HEADER + "\n\ndef _gen():\n    yield 1\n", "generators (yield)"),
        # old: a decorator is a call on the host, but its chain hung off a local binding of
        # libdevice.core (allowed as "a name in a device-math namespace").
        (HEADER + "_c = tl.extra.cuda.libdevice.core\n\n\n@_c.builtins.exit\ndef _boom():\n"
         "    pass\n", "libdevice.core is not for kernels"),
        # old: a decorator that is a plain name is a call through that name.
        (HEADER + "_d = max\n\n\n@_d\ndef _boom():\n    pass\n", "a call through the name '_d'"),
        # old: annotations were visited, but a string annotation (which tools may evaluate,
        # typing.get_type_hints) was an opaque constant.
        (HEADER + "\n\ndef kernel(x: \"tl.extra.pkgutil.os.system('true')\", y):\n    pass\n",
         "triton.language.extra.pkgutil"),
        # old: two imports binding one name: the checks kept the last, Python the one in scope.
        ("import torch as tl\nimport triton.language as tl\n", "imported as two different"),
    ],
)  # fmt: skip
def test_statements_that_hide_a_binding_or_a_call_are_refused(source, fragment):
    refused(source, fragment)


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        # old refused these too (dunder attributes and names, banned builtins): kept refused.
        ("d = tl.__dict__", "'__dict__'"),
        ("m = torch.Tensor.__dict__", "'__dict__'"),
        ("c = x.__class__", "'__class__'"),
        ("t = type(x)", "type is not allowed"),
        ("b = __builtins__", "__builtins__"),
        ("g = vars(x)", "vars is not allowed"),
        ("s = '{0.device}'.format(x)", ".format"),
        ("o = torch.ops.aten.mm", "torch.ops"),
        ("o = torch._C", "torch._C"),
        ("o = torch.library", "torch.library"),
        ("o = torch.utils", "torch.utils"),
        ("o = triton.runtime", "triton.runtime"),
        ("o = tl.core.tensor", "triton.language.core"),
        ("n = x.numpy()", ".numpy()"),
        ("n = x.tolist()", ".tolist()"),
        ("n = x.storage()", ".storage()"),
    ],
)
def test_the_direct_spellings_stay_refused(code, fragment):
    refused(launcher(code), fragment, line=LAUNCH)


def test_the_held_out_rounds_kernel_is_refused():
    # old: `x = tl.extra` (tl.<name>), `o = x.pkgutil.os` and `opener = o.open` hung off locals;
    # every call went through a plain name. Only `o.getppid()`, one method call, was refused, and
    # the kernel could have bound it to a name too.
    path = Path(__file__).parent / "triton_attacks" / "held_out.py"
    if not path.exists():
        pytest.skip("the held-out kernel is not in this checkout")
    refused(path.read_text(), "module triton.language.extra used as a value", line=8)
