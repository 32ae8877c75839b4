"""A workload named by its sizes (``M=512,N=768,K=384``): parsed, named canonically, refused in
one sentence when it misses or mistypes a size, and accepted wherever a workload name is."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelopt.errors import UserError
from accelopt.problems import load_problem
from accelopt.problems.records import CostModel, Workload
from accelopt.problems.sizes import is_sized, sized_name, sized_workload
from accelopt.search.workloads import choose_workloads, workload_name

PARAMS = ("M", "N", "K")


def test_sizes_in_any_order_are_one_workload_under_its_canonical_name():
    for name in ("M=512,N=768,K=384", "K=384,M=512,N=768", "N=768,K=0384,M=512"):
        found = sized_workload(PARAMS, name)
        assert found == Workload("M=512,N=768,K=384", {"M": 512, "N": 768, "K": 384})
        assert list(found.sizes) == list(PARAMS)  # in the problem's order
    assert sized_name(PARAMS, {"K": 3, "N": 2, "M": 1}) == "M=1,N=2,K=3"
    assert sized_workload(PARAMS, "cpu") is None and not is_sized("paper")  # a name: not sizes


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("M=512,N=768", "misses K"),
        ("M=512", "misses N, K"),
        ("M=512,N=768,K=384,B=2", "names 'B', which is no size parameter"),
        ("M=512,M=4,N=768,K=384", "names M twice"),
        ("M=0,N=768,K=384", "gives M the value '0', not a positive integer"),
        ("M=-1,N=768,K=384", "gives M the value '-1', not a positive integer"),
        ("M=1.5,N=768,K=384", "gives M the value '1.5', not a positive integer"),
        ("M=,N=768,K=384", "gives M the value '', not a positive integer"),
        ("M=512, N=768,K=384", "names ' N', which is no size parameter"),  # no spaces
        ("M=512,,N=768,K=384", "is not a list of NAME=VALUE separated by commas"),
        ("M=512,N=768,K=384,", "is not a list of NAME=VALUE separated by commas"),
        ("=512", "is not a list of NAME=VALUE separated by commas"),
    ],
)
def test_a_wrong_list_of_sizes_is_one_sentence_saying_what_to_give(name: str, why: str):
    with pytest.raises(KeyError) as raised:
        sized_workload(PARAMS, name, owner="problem 'matmul'", example="M=1,N=2,K=3")
    sentence = raised.value.args[0]
    assert sentence.startswith(f"workload {name!r} {why}")
    assert sentence.endswith(
        "give every size parameter of problem 'matmul' (M, N, K) as a positive integer, "
        "e.g. M=1,N=2,K=3"
    )
    assert "\n" not in sentence


def test_a_problem_takes_a_workload_by_its_sizes_and_keeps_its_named_ones():
    matmul = load_problem("matmul")
    assert matmul.workload("small") is matmul.workloads["small"]  # unchanged
    found = matmul.workload("K=48,N=96,M=64")
    assert found.name == "M=64,N=96,K=48" and dict(found.sizes) == {"M": 64, "N": 96, "K": 48}
    assert matmul.workload_name("K=48,N=96,M=64") == found.name
    assert matmul.workload_name("small") == "small"
    assert matmul.has_workload("N=96,M=64,K=48") and matmul.has_workload("cpu")
    assert not matmul.has_workload("M=64,N=96") and not matmul.has_workload("huge")
    cpu = sized_name(matmul.params, matmul.workloads["cpu"].sizes)
    for name, sentence in (
        ("M=64,N=96", "workload 'M=64,N=96' misses K: give every size parameter of problem "
         f"'matmul' (M, N, K) as a positive integer, e.g. {cpu}"),
        ("huge", "problem 'matmul' has no workload 'huge'; choose one of: cpu, paper, small, "
         f"tiny, or give its sizes, e.g. {cpu}"),
    ):  # fmt: skip
        with pytest.raises(KeyError) as raised:
            matmul.workload(name)
        assert raised.value.args[0] == sentence


def test_a_problem_with_derived_sizes_is_given_every_one_of_them():
    rope = load_problem("rope_single_freq_apply")  # T = B*H*N and D2 = D/2 are params too
    with pytest.raises(KeyError, match="misses T, D2"):
        rope.workload("B=1,H=2,N=3,D=8")
    found = rope.workload("D2=4,T=6,D=8,N=3,H=2,B=1")
    assert found.name == "B=1,H=2,N=3,D=8,T=6,D2=4"
    x, cos, sin = rope.generate(found.sizes, seed=0)
    (out,) = rope.reference(x, cos, sin)
    assert [x.shape, cos.shape, out.shape] == [(8, 6), (4, 6), (8, 6)]
    assert [tuple(out.shape)] == rope.output_shapes(found.sizes)


def test_sizes_its_cost_model_refuses_are_refused_in_one_sentence():
    """An imported problem's counted costs know its own workloads only: its cost model is how
    the problem says which sizes it takes."""
    matmul = load_problem("matmul")

    def counted(sizes):
        if dict(sizes) != dict(matmul.workloads["small"].sizes):
            raise ValueError("counted costs for the workloads only")
        return 1.0

    imported = replace(matmul, cost=CostModel(counted, counted, counted))
    small = sized_name(matmul.params, matmul.workloads["small"].sizes)
    assert imported.workload(small).name == small  # its own sizes, named by them
    with pytest.raises(KeyError) as raised:
        imported.workload("M=64,N=96,K=48")
    assert raised.value.args[0] == (
        "problem 'matmul' cannot run workload 'M=64,N=96,K=48': its cost model fails on those "
        "sizes (ValueError: counted costs for the workloads only)"
    )


def test_a_run_keeps_the_canonical_names_and_refuses_two_spellings_of_one_workload():
    matmul = load_problem("matmul")
    chosen = choose_workloads(matmul, ["N=96,M=64,K=48", "small"], ["K=8,M=8,N=8"])
    assert chosen.tuned == ("M=64,N=96,K=48", "small") and chosen.held_out == ("M=8,N=8,K=8",)
    with pytest.raises(UserError, match="workload M=64,N=96,K=48 is named twice"):
        choose_workloads(matmul, ["M=64,N=96,K=48"], ["K=48,N=96,M=64"])
    small = ",".join(f"{p}={v}" for p, v in reversed(matmul.workloads["small"].sizes.items()))
    with pytest.raises(UserError, match="has the sizes of tuned workload small"):
        choose_workloads(matmul, ["small"], [small])
    with pytest.raises(UserError, match="misses K"):
        choose_workloads(matmul, ["M=64,N=96"])
    assert workload_name(matmul, "K=1,N=2,M=3") == "M=3,N=2,K=1"
