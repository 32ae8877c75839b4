"""The names a Triton kernel module may use, for the static checks (``checks.py``), and how a dotted
name is resolved against them.

A dotted name starts at an import and walks down namespaces (modules) to one allowed leaf: a
function, class, dtype or constant. A namespace is never a value (``x = tl.extra`` would hand the
kernel a module, and Triton's modules hold ``os``, ``sys``, ``builtins``, ``pkgutil`` as
attributes). The lists are allow-lists, written out (the checks never import torch or triton):
a name a newer Triton adds is refused until it is listed here, never allowed by default.
"""

from __future__ import annotations

TORCH_NAMES = frozenset(
    {
        "empty", "empty_like", "empty_strided", "Tensor", "dtype", "device", "Size",
        "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
        "uint8", "bool",
    }
)  # fmt: skip
TRITON_NAMES = frozenset({"jit", "autotune", "Config", "heuristics", "cdiv", "next_power_of_2"})
# triton.language's public names (its __all__, Triton 3.9) less its modules (extra, math,
# target_info), and `advance` (older Triton): functions, types and dtypes.
TL_NAMES = frozenset(
    {
        "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange", "argmax",
        "argmin", "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas",
        "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_poll", "atomic_store",
        "atomic_xchg", "atomic_xor", "bfloat16", "bitonic_merge", "block_type", "broadcast",
        "broadcast_to", "cast", "cat", "cdiv", "ceil", "clamp", "condition", "const", "constexpr",
        "constexpr_type", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert",
        "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2",
        "expand_dims", "expect_zero", "fdiv", "flip", "float16", "float32", "float64",
        "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16", "floor", "fma",
        "full", "gather", "histogram", "int1", "int16", "int32",
        "int64", "int8", "interleave", "join", "load", "load_tensor_descriptor", "log", "log2",
        "make_block_ptr", "make_tensor_descriptor", "map_elementwise", "max", "max_constancy",
        "max_contiguous", "maximum", "min", "minimum", "mul", "multiple_of", "num_programs",
        "pair_uniform_to_normal", "permute", "philox", "philox_impl", "pi32_t", "pointer_type",
        "program_id", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x", "range",
        "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "slice", "softmax",
        "sort", "split", "sqrt", "sqrt_rn", "squeeze", "static_assert", "static_print",
        "static_range", "store", "store_tensor_descriptor", "sub", "sum", "swizzle2d", "tensor",
        "tensor_descriptor", "to_tensor", "topk", "trans", "tuple", "uint16", "uint32", "uint64",
        "uint8", "uint_to_uniform_float", "umulhi", "unsqueeze", "view", "void", "where",
        "xor_sum", "zeros", "zeros_like",
    }
)  # fmt: skip
TL_MATH_NAMES = frozenset(
    {
        "abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
        "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi",
    }
)  # fmt: skip
# The functions of triton.language.extra[.cuda].libdevice (their module also holds `core`).
LIBDEVICE_NAMES = frozenset(
    {
        "abs", "acos", "acosh", "add_rd", "add_rn", "add_ru", "add_rz", "asin", "asinh", "atan",
        "atan2", "atanh", "brev", "byte_perm", "cbrt", "ceil", "clz", "copysign", "cos", "cosh",
        "cospi", "cyl_bessel_i0", "cyl_bessel_i1", "div_rd", "div_rn", "div_ru", "div_rz",
        "double2float_rd", "double2float_rn", "double2float_ru", "double2float_rz",
        "double2hiint", "double2int_rd", "double2int_rn", "double2int_ru", "double2int_rz",
        "double2ll_rd", "double2ll_rn", "double2ll_ru", "double2ll_rz", "double2loint",
        "double2uint_rd", "double2uint_rn", "double2uint_ru", "double2uint_rz", "double2ull_rd",
        "double2ull_rn", "double2ull_ru", "double2ull_rz", "double_as_longlong", "erf", "erfc",
        "erfcinv", "erfcx", "erfinv", "exp", "exp10", "exp2", "expm1", "fast_cosf",
        "fast_dividef", "fast_exp10f", "fast_expf", "fast_log10f", "fast_log2f", "fast_logf",
        "fast_powf", "fast_sinf", "fast_tanf", "fast_tanhf", "fdim", "ffs", "finitef",
        "float2int_rd", "float2int_rn", "float2int_ru", "float2int_rz", "float2ll_rd",
        "float2ll_rn", "float2ll_ru", "float2ll_rz", "float2uint_rd", "float2uint_rn",
        "float2uint_ru", "float2uint_rz", "float2ull_rd", "float2ull_rn", "float2ull_ru",
        "float2ull_rz", "float_as_int", "float_as_uint", "floor", "fma", "fma_rd", "fma_rn",
        "fma_ru", "fma_rz", "fmod", "hadd", "hiloint2double", "hypot", "ilogb", "int2double_rn",
        "int2float_rd", "int2float_rn", "int2float_ru", "int2float_rz", "int_as_float",
        "isfinited", "isinf", "isnan", "j0", "j1", "jn", "ldexp", "lgamma", "ll2double_rd",
        "ll2double_rn", "ll2double_ru", "ll2double_rz", "ll2float_rd", "ll2float_rn",
        "ll2float_ru", "ll2float_rz", "llrint", "llround", "log", "log10", "log1p", "log2",
        "logb", "longlong_as_double", "mul24", "mul_rd", "mul_rn", "mul_ru", "mul_rz", "mulhi",
        "nearbyint", "nextafter", "norm3d", "norm4d", "normcdf", "normcdfinv", "popc", "pow",
        "rcbrt", "rcp64h", "rcp_rd", "rcp_rn", "rcp_ru", "rcp_rz", "remainder", "rhadd", "rhypot",
        "rint", "rnorm3d", "rnorm4d", "round", "rsqrt", "rsqrt_rn", "sad", "saturatef", "scalbn",
        "signbit", "sin", "sinh", "sinpi", "sqrt", "sqrt_rd", "sqrt_rn", "sqrt_ru", "sqrt_rz",
        "sub_rd", "sub_rn", "sub_ru", "sub_rz", "tan", "tanh", "tgamma", "trunc",
        "uint2double_rn", "uint2float_rd", "uint2float_rn", "uint2float_ru", "uint2float_rz",
        "uint_as_float", "ull2double_rd", "ull2double_rn", "ull2double_ru", "ull2double_rz",
        "ull2float_rd", "ull2float_rn", "ull2float_ru", "ull2float_rz", "y0", "y1", "yn",
    }
)  # fmt: skip
ANY_NAME = frozenset({"*"})  # math: every attribute of the module is a number or a function
# Each namespace: the namespaces below it, and its leaves.
NAMESPACES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "torch": (frozenset(), TORCH_NAMES),
    "math": (frozenset(), ANY_NAME),
    "triton": (frozenset({"language"}), TRITON_NAMES),
    "triton.language": (frozenset({"math", "extra"}), TL_NAMES),
    "triton.language.math": (frozenset(), TL_MATH_NAMES),
    "triton.language.extra": (frozenset({"cuda", "libdevice"}), frozenset()),
    "triton.language.extra.cuda": (frozenset({"libdevice"}), frozenset()),
    "triton.language.extra.libdevice": (frozenset(), LIBDEVICE_NAMES),
    "triton.language.extra.cuda.libdevice": (frozenset(), LIBDEVICE_NAMES),
}
DEVICE_MATH = ("tl.math", "tl.extra.libdevice", "tl.extra.cuda.libdevice")
DOT_NAMES = frozenset({"dot"})

# Outside @triton.jit functions, the attributes a launcher may read on a value, and the methods it
# may call (only by calling them at once: a bound method handed on runs where no rule sees it).
LAUNCHER_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "itemsize"})
LAUNCHER_METHODS = frozenset(
    {
        "numel", "stride", "size", "dim", "data_ptr", "element_size", "is_contiguous", "view",
        "append", "get", "items", "keys",
    }
)  # fmt: skip
# Inside @triton.jit functions, the attributes of a value: a triton.language tensor's methods, its
# shape and type, a dtype's, a constexpr's value (never `handle`: the interpreter's numpy array).
JIT_ATTRS = frozenset(
    {
        "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and",
        "atomic_cas", "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_poll",
        "atomic_store", "atomic_xchg", "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil",
        "cos", "cumprod", "cumsum", "erf", "exp", "exp2", "expand_dims", "flip", "floor",
        "gather", "histogram", "item", "log", "log2", "logical_and", "logical_or", "max", "min",
        "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin",
        "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to", "trans", "view",
        "xor_sum", "shape", "dtype", "type", "numel", "value", "name", "element_ty",
        "primitive_bitwidth", "scalar", "nbytes", "get_int_max_value", "get_int_min_value",
        "is_bf16", "is_block", "is_bool", "is_const", "is_dtype", "is_floating", "is_fp16",
        "is_fp32", "is_fp64", "is_fp8", "is_int", "is_int1", "is_int16", "is_int32", "is_int64",
        "is_int8", "is_int_signed", "is_int_unsigned", "is_ptr", "is_standard_floating",
        "is_uint16", "is_uint32", "is_uint64", "is_uint8", "is_void",
    }
)  # fmt: skip
FORMAT_METHODS = frozenset({"format", "format_map"})  # "{0.__class__}".format(x) reads attributes
# Builtins a launcher may call by name (besides its own functions and the allowed imported names).
BUILTIN_FUNCTIONS = frozenset(
    {
        "range", "len", "min", "max", "int", "float", "bool", "str", "abs", "round", "divmod",
        "pow", "sum", "any", "all", "tuple", "list", "dict", "set", "frozenset", "enumerate",
        "zip", "reversed", "sorted", "isinstance", "print", "slice",
    }
)  # fmt: skip
BUILTIN_EXCEPTIONS = frozenset(
    {
        "Exception", "ValueError", "RuntimeError", "TypeError", "AssertionError",
        "NotImplementedError", "IndexError", "KeyError", "ZeroDivisionError", "ArithmeticError",
        "OverflowError",
    }
)  # fmt: skip
CALLABLE_BUILTINS = BUILTIN_FUNCTIONS | BUILTIN_EXCEPTIONS
# Names no kernel may use: they reach files, processes, or names the checks cannot see (or, the
# BaseException family, slip past the harness's `except Exception`).
BANNED_BUILTINS = frozenset(
    {
        "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr",
        "globals", "locals", "vars", "input", "breakpoint", "memoryview", "exit", "quit",
        "help", "dir", "type", "object", "super", "classmethod", "staticmethod", "property",
        "format", "hasattr", "license", "credits", "copyright", "BaseException", "SystemExit",
        "KeyboardInterrupt", "GeneratorExit", "BaseExceptionGroup",
    }
)  # fmt: skip
# Components that never appear in a dotted name a kernel uses, even under an allowed module.
BANNED_COMPONENTS = frozenset(
    {
        "os", "sys", "subprocess", "shutil", "socket", "ctypes", "importlib", "builtins",
        "inspect", "pathlib", "io", "pickle", "multiprocessing", "threading", "signal", "pkgutil",
        "runtime", "compiler", "knobs", "driver", "testing", "tools", "backends", "core",
    }
)  # fmt: skip


def resolve(base: str, parts: list[str]) -> tuple[str, str | None, bool]:
    """``base`` (what an import bound: a namespace or a leaf) followed by ``parts``: the full
    dotted name, the reason it is refused (None when allowed), and whether it is a namespace."""
    full = ".".join([base, *parts])
    if any(p in BANNED_COMPONENTS for p in full.split(".")[1:]):
        return full, f"{full} is not for kernels", False
    path = base
    for part in parts:
        if path not in NAMESPACES:  # a leaf: nothing below it is for kernels
            return full, _refusal(full, path), False
        children, leaves = NAMESPACES[path]
        if not (part in children or part in leaves or (leaves is ANY_NAME and part[0] != "_")):
            return full, _refusal(full, path), False
        path = f"{path}.{part}"
    return full, None, path in NAMESPACES


def _refusal(full: str, reached: str) -> str:
    root = full.split(".")[0]
    if root == "torch":
        return (
            f"{full}: the launcher may only allocate with torch (torch.empty, dtypes); the work "
            "must happen in @triton.jit kernels"
        )
    if full.startswith("triton.language"):
        return f"{full} is not for kernels (tl.<name>, or a function of {', '.join(DEVICE_MATH)})"
    if root == "triton":
        allowed = ", ".join(f"triton.{n}" for n in sorted(TRITON_NAMES))
        return f"{full} is not for kernels (allowed: {allowed}, triton.language)"
    return f"{full} is not for kernels (only {root}.<name>, nothing below {reached})"
