"""Ranking the optimization memory for the planner: query, score, near-duplicates, scopes."""

from __future__ import annotations

import math

import pytest

from accelopt.errors import UserError
from accelopt.memory.records import Experience
from accelopt.memory.retrieval import (
    MAX_TERMS,
    Lookup,
    dedupe,
    near_duplicate,
    query_terms,
    rank,
    retrieve,
    score,
    snippet_key,
    stem,
    title_key,
    weight,
)
from accelopt.store.store import Store

from .conftest import make_experience

MATMUL_TEXT = (
    "matmul: Dense matrix multiply out[M, N] = lhs[M, K] @ rhs[K, N], all float32 and row-major "
    "(rhs is K-major, not transposed); compute-bound."
)
MATMUL_KERNEL = """\
/* matmul baseline: out = lhs @ rhs, i-k-j order so the inner loop streams rows of rhs. */
#include <stdlib.h> /* size_t */

void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        for (int j = 0; j < N; j++)
            o[j] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float a = lhs[(size_t)i * K + k];
            const float *r = rhs + (size_t)k * N;
            for (int j = 0; j < N; j++)
                o[j] += a * r[j];
        }
    }
}
"""
SILU_TEXT = "silu: y = x / (1 + exp(-x)) elementwise over a float32 matrix; memory-bound."


# --- pure helpers ----------------------------------------------------------------------------


def test_query_terms_problem_first_then_kernel_by_frequency() -> None:
    terms = query_terms(MATMUL_TEXT, MATMUL_KERNEL)
    assert terms[:4] == ["matmul", "dense", "matrix", "multiply"]
    for word in ("lhs", "rhs", "float32", "omp", "parallel", "stream"[:6]):
        assert any(t.startswith(word) for t in terms), word
    # C keywords, stopwords, the kernel contract, short words and numbers are dropped
    for dropped in ("for", "int", "const", "restrict", "void", "float", "the", "is", "kernel"):
        assert dropped not in terms
    assert all(len(t) > 1 and not t[0].isdigit() for t in terms)
    assert "baseline" not in terms
    assert len(terms) == len(set(terms))


def test_query_terms_split_intrinsics_and_pragmas_and_cap() -> None:
    kernel = (
        "#pragma omp simd\n#pragma GCC unroll 4\n"
        "__m256 v = _mm256_loadu_ps(x); v = _mm256_fmadd_ps(v, v, v); _mm256_storeu_ps(y, v);\n"
        "void kernel(const float *in0, float *out0) {}\n"
    )
    terms = query_terms("", kernel)
    assert terms[0] == "mm256"  # the most frequent first
    for word in ("omp", "simd", "gcc", "unroll", "loadu", "fmadd", "storeu", "m256"):
        assert word in terms
    assert "ps" not in terms  # kernel words need 3 letters
    assert "in0" not in terms and "out0" not in terms
    long_text = " ".join(f"word{i}" for i in range(200))
    assert len(query_terms(long_text, MATMUL_KERNEL)) == MAX_TERMS
    assert query_terms("", "") == []


def test_weight_and_score() -> None:
    assert weight(1.0) == pytest.approx(1.0)
    assert weight(3.0) == pytest.approx(2.0)
    assert weight(2.0) > weight(1.2) > weight(1.0)
    assert score(2.0, 3.0) == pytest.approx(4.0)
    assert score(-1.0, 10.0) == 0.0  # never a negative relevance times a weight
    assert math.isclose(score(1.0, 0.5), 1.0)  # speedups below 1 weigh as 1


def test_stem_and_title_key() -> None:
    assert {stem(w) for w in ("tile", "tiles", "tiled", "tiling")} == {"til"}
    assert {stem(w) for w in ("pack", "packs", "packed", "packing")} == {"pack"}
    assert stem("access") == "access"
    assert title_key("Packing the B matrix into panels") == {"pack", "b", "matrix", "panel"}


def test_near_duplicate() -> None:
    a = make_experience("Pack the B matrix into contiguous panels")
    b = make_experience("Packing B matrix into contiguous panel")
    c = make_experience("Vectorize the inner loop with AVX2 FMA")
    assert near_duplicate(a, b)
    assert not near_duplicate(a, c)
    same_after_1 = make_experience(
        "One", after="for (int j = 0; j < N; j++)  // go\n  o[j] += a*r[j];"
    )
    same_after_2 = make_experience("Two", after="for(int j=0;j<N;j++) o[j] += a * r[j];")
    assert snippet_key(same_after_1.lesson.after) == snippet_key(same_after_2.lesson.after)
    assert near_duplicate(same_after_1, same_after_2)
    assert not near_duplicate(make_experience("Alpha"), make_experience("Beta"))  # empty afters


def test_dedupe_keeps_the_higher_scored() -> None:
    a = make_experience("Pack the B matrix into contiguous panels")
    b = make_experience("Packing B matrix into contiguous panel")
    c = make_experience("Vectorize the inner loop")
    kept = dedupe([(a, 1.0), (c, 1.5), (b, 2.0)])
    assert [(e.lesson.title, s) for e, s in kept] == [(b.lesson.title, 2.0), (c.lesson.title, 1.5)]


# --- with the store --------------------------------------------------------------------------


def _add(store: Store, *experiences: Experience) -> list[int]:
    return [store.add_experience(e) for e in experiences]


def test_packing_b_ranks_first_for_a_matmul_kernel(store: Store) -> None:
    _add(
        store,
        make_experience(
            "Use a fast expf approximation",
            "For silu and other activations, a polynomial exp halves the time of the loop.",
            problem="silu",
            speedup=2.0,
        ),
        make_experience(
            "Pack B (rhs) into contiguous panels for matmul",
            "In a matmul, copy panels of the rhs matrix into a contiguous buffer so the inner "
            "loop streams it with unit stride and the panel stays in cache.",
            speedup=1.6,
            after="pack_panel(rhs, buf, k0, j0);",
        ),
        make_experience(
            "Fuse the rmsnorm reduction with the scale",
            "Compute the sum of squares and scale in one pass over each row.",
            problem="rmsnorm",
            speedup=1.3,
        ),
    )
    got = retrieve(store, backend="cpu", problem_text=MATMUL_TEXT, kernel_text=MATMUL_KERNEL, k=3)
    assert got[0].lesson.title.startswith("Pack B")
    assert len(got) == 3  # the unmatched ones fill the list after the matches


def test_speedup_breaks_a_relevance_tie(store: Store) -> None:
    _add(
        store,
        # titles 2/4 alike (no duplicates), of equal length: BM25 cannot tell them apart
        make_experience("Block matmul alpha", "Block the matmul loops.", speedup=1.2),
        make_experience("Block matmul bravo", "Block the matmul loops.", speedup=3.0),
    )
    ranked = rank(store, Lookup("matmul blocking", "", backend="cpu", k=2))
    hits = store.search_experiences("matmul blocking")
    assert hits[0][1] == pytest.approx(hits[1][1])
    assert hits[0][1] > 0
    (first, s1), (second, s2) = ranked
    assert first.lesson.title.endswith("bravo") and second.lesson.title.endswith("alpha")
    assert s1 / s2 == pytest.approx(weight(3.0) / weight(1.2))


def test_scopes(store: Store) -> None:
    _add(
        store,
        make_experience("Tile matmul loops for cache", run_id="run-1"),
        make_experience("Unroll the matmul inner loop", run_id="run-2"),
    )
    args = {"problem_text": MATMUL_TEXT, "kernel_text": MATMUL_KERNEL, "backend": "cpu"}
    assert retrieve(store, scope="off", **args) == []
    run1 = retrieve(store, scope="run", run_id="run-1", **args)
    assert [e.run_id for e in run1] == ["run-1"]
    assert {e.run_id for e in retrieve(store, scope="workspace", **args)} == {"run-1", "run-2"}
    with pytest.raises(UserError, match="memory scope"):
        retrieve(store, scope="everything", **args)
    with pytest.raises(ValueError, match="run id"):
        retrieve(store, scope="run", **args)


def test_near_duplicates_are_merged(store: Store) -> None:
    _add(
        store,
        make_experience("Pack the B matrix into panels for matmul", speedup=1.5),
        make_experience("Packing B matrix into panel for matmul", speedup=2.5),
        make_experience(
            "Hoist the row pointer of matmul",
            after="const float *r = rhs + k * N;",
            speedup=1.1,
        ),
        make_experience(
            "Precompute row addresses in matmul",
            after="const float *r = rhs + k*N;",
            speedup=1.2,
        ),
    )
    got = retrieve(store, backend="cpu", problem_text=MATMUL_TEXT, kernel_text=MATMUL_KERNEL, k=16)
    titles = [e.lesson.title for e in got]
    assert len(got) == 2
    assert "Packing B matrix into panel for matmul" in titles  # the higher speedup wins the tie
    assert "Precompute row addresses in matmul" in titles


def test_top_k_and_fill(store: Store) -> None:
    titles = ("Tile matmul loops", "Unroll the matmul", "Vectorize matmul with FMA")
    _add(store, *(make_experience(t) for t in titles))
    _add(store, make_experience("Nothing in common", "zzz", problem="other", speedup=5.0))
    assert len(retrieve(store, backend="cpu", problem_text="matmul", kernel_text="", k=2)) == 2
    got = retrieve(store, backend="cpu", problem_text="matmul", kernel_text="", k=10)
    assert len(got) == 4 and got[-1].lesson.title == "Nothing in common"
    assert retrieve(store, backend="cpu", problem_text="matmul", kernel_text="", k=0) == []
    # no salient word at all: the memory still comes, by speedup
    assert retrieve(store, backend="cpu", problem_text="", kernel_text="", k=1)[0].speedup == 5.0
