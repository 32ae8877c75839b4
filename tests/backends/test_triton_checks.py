"""Static checks on Triton kernel modules: the imports, torch and triton names, launcher methods
and tl.dot precisions a kernel may use, with a reason that names the line and the offender, and no
false alarms on the shipped baselines or ordinary launcher code."""

from __future__ import annotations

import pytest

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
    path = load_problem(name).kernel_path("baseline", "triton")
    assert path.name == "baseline_triton.py"
    assert check_source(path.read_text()) is None


@pytest.mark.parametrize("source", ["def kernel(:\n", "x = (\n", "import\n", "\x00"])
def test_source_that_does_not_parse_passes_for_the_build_to_report(source):
    assert check_source(source) is None


def test_empty_module_passes():
    assert check_source("") is None


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
        "_k[grid](flat, tmp, out, BLOCK=block)"
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
        "opts.driver = 1",
        "cfg.testing = cfg.runtime",
        "os = 3",
        "values = {'sum': 1}.get('sum')",
        "torch_like = x.shape",
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
    [("t = torch", "'torch'"), ("f(tl)", "'tl'"), ("mods = [triton]", "'triton'")],
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
