"""Full-text search over the optimization memory: ranking, filters, sync, odd queries."""

from __future__ import annotations

import pytest

from accelopt.store.search import MAX_TOKENS, fts_query, query_tokens

LESSONS = [
    (
        "Pack the B panel for the matmul micro-kernel",
        "Copy a K x NR panel of B into a contiguous buffer so the inner matmul loop streams it.",
        "for (k...) acc += A[i*K+k] * B[k*N+j];",
        "pack_b(panel, B); micro_kernel(A, panel);",
        "matmul",
    ),
    (
        "Fuse the RMS normalization into one pass",
        "Compute the sum of squares and scale in a single sweep over the row.",
        "sum = ...; for (...) out = x / rms;",
        "one loop",
        "rmsnorm",
    ),
    (
        "Vectorize the softmax exponent",
        "Use AVX2 to compute exp over eight lanes; reduce the max first.",
        "expf(x[i])",
        "_mm256_exp_ps",
        "softmax",
    ),
]


@pytest.fixture
def filled(store, make_experience):
    ids = []
    for i, (title, description, before, after, problem) in enumerate(LESSONS):
        ids.append(
            store.add_experience(
                make_experience(
                    title,
                    description=description,
                    before=before,
                    after=after,
                    problem=problem,
                    run_id=f"r{i % 2}",
                )
            )
        )
    return ids


def test_query_ranks_the_matching_experience_first(store, filled):
    results = store.search_experiences("pack B panel matmul")
    assert results[0][0].id == filled[0]
    assert results[0][0].lesson.title.startswith("Pack the B panel")
    assert results[0][1] > 0
    assert [r for _, r in results] == sorted((r for _, r in results), reverse=True)


def test_each_lesson_found_by_its_words(store, filled):
    assert store.search_experiences("rms normalization single pass")[0][0].id == filled[1]
    assert store.search_experiences("softmax exp AVX2 lanes")[0][0].id == filled[2]
    assert store.search_experiences("PACKING panels")[0][0].id == filled[0]  # case, stemming


def test_a_query_matching_nothing_returns_nothing(store, filled):
    assert store.search_experiences("transpose attention xyzzy") == []


def test_search_restricted_to_a_run_and_limited(store, filled):
    everywhere = store.search_experiences("the")
    assert len(everywhere) == 3
    in_r1 = store.search_experiences("the", run_id="r1")
    assert [e.id for e, _ in in_r1] == [filled[1]]
    assert store.search_experiences("pack B panel matmul", run_id="r1") == []
    assert len(store.search_experiences("the", limit=2)) == 2
    assert store.search_experiences("the", limit=0) == []


def test_empty_query_returns_recent_with_zero_relevance(store, filled):
    results = store.search_experiences("")
    assert [e.id for e, _ in results] == list(reversed(filled))
    assert all(r == 0.0 for _, r in results)
    assert [e.id for e, _ in store.search_experiences("  -*- ", limit=2)] == filled[:0:-1]
    assert [e.id for e, _ in store.search_experiences("", run_id="r0")] == [filled[2], filled[0]]


def test_index_kept_in_sync_after_delete(store, filled, make_experience):
    store.delete_experience(filled[0])
    assert store.search_experiences("pack B panel matmul") == []
    assert [e.id for e, _ in store.search_experiences("the")] != []
    assert filled[0] not in [e.id for e, _ in store.search_experiences("the")]
    new = store.add_experience(make_experience("pack panel again", run_id="r5"))
    assert store.search_experiences("panel")[0][0].id == new
    conn = store._connection()
    conn.execute("INSERT INTO experiences_fts (experiences_fts) VALUES ('integrity-check')")


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        '"',
        '""',
        'pack "B',
        "*",
        "pack*",
        "-",
        "-pack",
        "NOT",
        "pack AND NOT panel",
        "NEAR(pack panel)",
        "title:pack",
        "^pack",
        "(((",
        ")",
        "a + b - c",
        "{title description}: x",
        "'; DROP TABLE experiences; --",
        "_mm256_exp_ps",
        "x²  é  中文 ✓ \x00 \u0301",
        "word " * 500,
    ],
)
def test_odd_queries_never_raise(store, filled, query):
    results = store.search_experiences(query)
    assert isinstance(results, list)
    assert len(store.experiences()) == 3


def test_fts_query_quotes_every_token():
    assert fts_query("") is None
    assert fts_query("-*- \"'") is None
    assert fts_query('pack "B" panel*') == '"pack" OR "B" OR "panel"'
    assert fts_query("Pack pack PACK b") == '"Pack" OR "b"'
    assert query_tokens("_mm256_exp_ps") == ["mm256", "exp", "ps"]
    assert len(query_tokens(" ".join(f"w{i}" for i in range(500)))) == MAX_TOKENS
