"""The published AccelOpt rule for choosing the pairs the summarizer sees after an iteration."""

from __future__ import annotations

import pytest

from accelopt.memory.pairs import Outcome, Pair, representative, select_pairs
from accelopt.memory.records import ExperienceKind


def out(parent: str, plan: str, child: str, child_s: float | None, parent_s: float = 1.0):
    return Outcome(parent, plan, child, parent_s, child_s)


def test_positive_only_above_threshold() -> None:
    outcomes = [
        out("p", "a", "c1", 1.0 / 1.05),  # 1.05x: kept
        out("p", "b", "c2", 1.0 / 1.04),  # exactly 1.04x: not strictly above
        out("p", "c", "c3", 1.0 / 1.02),  # sped up, too little
    ]
    pairs = select_pairs(outcomes)
    assert [(p.slow_hash, p.fast_hash, p.kind) for p in pairs] == [("p", "c1", "positive")]
    assert pairs[0].speedup == pytest.approx(1.05)


def test_negative_only_below_threshold_and_reversed() -> None:
    outcomes = [
        out("p", "a", "c1", 1.20),  # 1.2x slower: kept, reversed
        out("p", "b", "c2", 1.15),  # exactly 1/1.15: not strictly below
        out("p", "c", "c3", 1.10),  # slower, too little
    ]
    pairs = select_pairs(outcomes)
    assert pairs == [
        Pair(
            slow_hash="c1",
            fast_hash="p",
            speedup=pytest.approx(1.2),
            kind="negative",
            parent_hash="p",
            plan_title="a",
        )
    ]
    assert pairs[0].speedup > 1.15


def test_best_child_if_it_sped_up_else_worst() -> None:
    sped_up = [out("p", "a", "fast", 0.5), out("p", "a", "slow", 3.0), out("p", "a", "ok", 0.9)]
    assert representative(sped_up).child_hash == "fast"
    # The best child sped up a little (1.02x): it represents the plan, so no pair, even though a
    # sibling is much slower.
    assert select_pairs([out("p", "a", "c1", 0.98), out("p", "a", "c2", 2.0)]) == []
    # No child sped up: the worst represents the plan.
    worse = [out("p", "a", "c1", 1.3), out("p", "a", "c2", 2.0), out("p", "a", "c3", 1.0)]
    assert representative(worse).child_hash == "c2"
    assert select_pairs(worse) == [Pair("c2", "p", pytest.approx(2.0), "negative", "p", "a")]


def test_groups_are_per_parent_and_plan() -> None:
    outcomes = [
        out("p", "a", "c1", 0.5),
        out("p", "a", "c2", 0.8),  # same (parent, plan): only the best counts
        out("p", "b", "c3", 0.8),  # another plan of the same parent
        out("q", "a", "c4", 0.25, parent_s=0.5),  # the same plan title on another parent
    ]
    pairs = select_pairs(outcomes)
    assert [(p.slow_hash, p.fast_hash) for p in pairs] == [("p", "c1"), ("q", "c4"), ("p", "c3")]


def test_failed_children_are_ignored() -> None:
    # The failed child would be "worst"; it must not count, and a plan with only failures gives
    # nothing.
    outcomes = [
        out("p", "a", "broken", None),
        out("p", "a", "slow", 1.5),
        out("p", "b", "broken2", None),
    ]
    assert select_pairs(outcomes) == [Pair("slow", "p", pytest.approx(1.5), "negative", "p", "a")]


def test_positives_take_at_most_half_the_slots() -> None:
    outcomes = [out("p", f"plan{i}", f"c{i}", 1.0 / (1.1 + i)) for i in range(10)]
    pairs = select_pairs(outcomes, slots=8)
    assert len(pairs) == 4
    assert all(p.kind == "positive" for p in pairs)
    # best first
    assert [p.fast_hash for p in pairs] == ["c9", "c8", "c7", "c6"]


def test_negatives_fill_the_rest_worst_first() -> None:
    positives = [out("p", f"pos{i}", f"fast{i}", 1.0 / (2 + i)) for i in range(2)]
    negatives = [out("p", f"neg{i}", f"slow{i}", 1.2 + i) for i in range(10)]
    pairs = select_pairs(positives + negatives, slots=8)
    assert [p.kind for p in pairs] == ["positive"] * 2 + ["negative"] * 6
    assert [p.fast_hash for p in pairs[:2]] == ["fast1", "fast0"]
    assert [p.slow_hash for p in pairs[2:]] == [f"slow{i}" for i in (9, 8, 7, 6, 5, 4)]
    assert all(p.fast_hash == "p" for p in pairs[2:])
    # with many positives the negatives still get the other half
    many = [out("p", f"pos{i}", f"fast{i}", 1.0 / (2 + i)) for i in range(6)]
    kinds = [p.kind for p in select_pairs(many + negatives, slots=8)]
    assert kinds == ["positive"] * 4 + ["negative"] * 4


def test_odd_and_zero_slots() -> None:
    outcomes = [out("p", f"pos{i}", f"f{i}", 0.5) for i in range(5)]
    outcomes += [out("p", f"neg{i}", f"s{i}", 2.0) for i in range(5)]
    kinds = [p.kind for p in select_pairs(outcomes, slots=5)]
    assert kinds == ["positive"] * 2 + ["negative"] * 3
    assert select_pairs(outcomes, slots=0) == []


def test_ordering_is_deterministic_with_hash_tiebreaks() -> None:
    outcomes = [
        out("p2", "a", "cb", 0.5),
        out("p1", "a", "cz", 0.5),
        out("p1", "b", "ca", 0.5),
        out("p1", "c", "cc", 0.5),  # same latency within one (parent, plan) below
        out("p1", "c", "cb2", 0.5),
    ]
    pairs = select_pairs(outcomes)
    expected = [("p1", "ca"), ("p1", "cb2"), ("p1", "cz"), ("p2", "cb")]
    assert [(p.slow_hash, p.fast_hash) for p in pairs] == expected
    assert select_pairs(list(reversed(outcomes))) == pairs


def test_same_pair_through_two_plans_is_given_once() -> None:
    outcomes = [out("p", "a", "same", 0.5), out("p", "b", "same", 0.5), out("p", "c", "p", 0.5)]
    assert select_pairs(outcomes) == [Pair("p", "same", pytest.approx(2.0), "positive", "p", "a")]


def test_a_gain_within_the_noise_is_no_lesson() -> None:
    """A child the beam judged "not faster" (within the noise) never becomes a positive lesson,
    however its raw medians compare; a slowdown within the noise is no negative one either."""
    unsure = Outcome("p", "a", "c", 1.0, 1 / 1.05, faster=False, slower=False)
    assert select_pairs([unsure]) == []
    noisy_slow = Outcome("p", "a", "c", 1.0, 1.2, faster=False, slower=False)
    assert select_pairs([noisy_slow]) == []
    confirmed = Outcome("p", "a", "c", 1.0, 1 / 1.05, faster=True, slower=False)
    assert [p.kind for p in select_pairs([confirmed])] == ["positive"]


def test_the_kind_of_a_pair_is_an_experience_kind() -> None:
    pairs = select_pairs([out("p", "a", "c1", 0.5), out("q", "b", "c2", 2.0)])
    assert [p.kind for p in pairs] == [ExperienceKind.POSITIVE, ExperienceKind.NEGATIVE]
    assert all(type(p.kind) is ExperienceKind for p in pairs)
