"""Tunables: declared in a kernel's own source, which stays valid on its own; variants set them."""

from __future__ import annotations

import pytest

from accelopt.backends.registry import shipped_kernel
from accelopt.backends.tunables import (
    Tunable,
    TunableError,
    base,
    find_tunables,
    label,
    product_size,
    render,
    sweep,
    values_of,
)
from accelopt.problems.loader import load_problem

C_KERNEL = """#include <stddef.h>
#if defined(__AVX512F__)
#ifndef BM
#define BM 64 /* tune: 32 64 128 */
#endif
#else
#ifndef BM
#define BM 32 /* tune: 16 32 64 */
#endif
#endif
#ifndef UNROLL
#define UNROLL 2 /* tune: 1 2 4 */ /* inner loop */
#endif
#define FIXED 8 /* not a tunable: no #ifndef, no tune list */
void kernel(const float *x, float *y) { for (int i = 0; i < BM * UNROLL; i++) y[i] = x[i]; }
"""

PY_KERNEL = """import triton
BLOCK_M = 64  # tune: 32 64 128
BLOCK_N = 32  # tune: 32 64
OTHER = 3
"""


def test_c_declarations_are_found_once_per_name_with_every_branchs_values():
    found = find_tunables(C_KERNEL)
    assert found == [
        Tunable("BM", "64", ("32", "64", "128", "16")),
        Tunable("UNROLL", "2", ("1", "2", "4")),
    ]
    assert product_size(found) == 12


def test_a_c_variant_sets_every_branch_and_keeps_the_declarations():
    variant = render(C_KERNEL, {"BM": "16", "UNROLL": "4"})
    assert variant.splitlines()[1:3] == ["#define BM 16", "#define UNROLL 4"]
    assert variant.endswith(C_KERNEL)  # the kernel itself, unchanged, after the block
    assert find_tunables(variant) == find_tunables(C_KERNEL)
    assert values_of(variant, find_tunables(C_KERNEL)) == {"BM": "16", "UNROLL": "4"}
    again = render(variant, {"BM": "32", "UNROLL": "1"})  # replaces the block, never stacks
    assert again.count("accelopt tuned values") == 1
    assert base(again) == base(variant) == C_KERNEL


def test_the_defaults_are_what_the_source_defines():
    assert values_of(C_KERNEL, find_tunables(C_KERNEL)) == {"BM": "64", "UNROLL": "2"}


def test_python_declarations_are_module_constants():
    found = find_tunables(PY_KERNEL, "python")
    assert [t.name for t in found] == ["BLOCK_M", "BLOCK_N"]
    variant = render(PY_KERNEL, {"BLOCK_M": "128", "BLOCK_N": "32"}, "python")
    assert "BLOCK_M = 128  # tune: 32 64 128" in variant
    assert "OTHER = 3" in variant
    assert values_of(variant, found, "python") == {"BLOCK_M": "128", "BLOCK_N": "32"}
    assert base(variant, "python") == base(PY_KERNEL, "python")


@pytest.mark.parametrize(
    "declaration",
    [
        "#ifndef BM\n#define BM 64 /* tune: 32 (64+1) */\n#endif\n",  # an expression
        '#ifndef BM\n#define BM 64 /* tune: 32 "x" */\n#endif\n',  # a string
        "#ifndef BM\n#define BM 64 /* tune: */\n#endif\n",  # no value
        "#ifndef BM\n#define BM 64 /* tune: " + " ".join(map(str, range(17))) + " */\n#endif\n",
    ],
)
def test_a_declaration_that_is_not_a_list_of_literals_is_refused(declaration):
    with pytest.raises(TunableError):
        find_tunables(declaration)


def test_a_value_that_could_carry_code_is_never_rendered():
    with pytest.raises(TunableError):
        render(C_KERNEL, {"BM": "64\n#include </etc/passwd>"})
    with pytest.raises(TunableError):
        render(PY_KERNEL, {"BLOCK_M": "__import__('os')"}, "python")


def test_a_small_product_is_swept_whole_less_the_kernel_itself_and_what_was_tried():
    found = find_tunables(C_KERNEL)
    current = values_of(C_KERNEL, found)
    tried = frozenset({"BM=32 UNROLL=2"})
    chosen = sweep(found, current, limit=100, seed=1, tried=tried)
    labels = [label(v) for v in chosen]
    assert len(labels) == 12 - 2 == len(set(labels))
    assert label(current) not in labels and "BM=32 UNROLL=2" not in labels


def test_a_large_product_tries_single_moves_nearest_first_then_a_seeded_draw():
    found = [Tunable(f"P{i}", "4", ("1", "2", "4", "8", "16")) for i in range(4)]  # 625
    current = {t.name: "4" for t in found}
    chosen = sweep(found, current, limit=12, seed=7)
    moves = [v for v in chosen[:8]]
    assert all(sum(v[k] != "4" for k in v) == 1 for v in moves)  # one parameter each
    assert {v[k] for v in moves for k in v if v[k] != "4"} == {"2", "8"}  # the neighbours
    assert len({label(v) for v in chosen}) == 12
    assert chosen == sweep(found, current, limit=12, seed=7)  # a resumed run draws the same


def test_the_shipped_matmul_expert_declares_its_blocking():
    source = shipped_kernel(load_problem("matmul"), "expert").read_text()
    names = {t.name for t in find_tunables(source)}
    assert {"KCMAX", "NCB", "KSTEP"} <= names


def test_a_triton_variant_is_a_kernel_the_triton_backend_accepts():
    from accelopt.backends.base import get_backend

    source = shipped_kernel(load_problem("silu"), "baseline", "triton").read_text()
    (block,) = find_tunables(source, "python")
    assert block.name == "BLOCK_SIZE" and "256" in block.values
    variant = render(source, {"BLOCK_SIZE": "256"}, "python")
    assert "BLOCK_SIZE = 256  # tune:" in variant
    assert get_backend("triton").check(variant) is None  # its static checks pass
