"""Sample indices (``search.samples``): one module encodes them for the loop and decodes them for
the reports, with the values every recorded call already carries."""

from __future__ import annotations

import itertools

from accelopt.search import samples


def test_a_planner_index_round_trips():
    for iteration, n in itertools.product(range(12), range(samples.STRIDE)):
        index = samples.planner(iteration, n)
        assert index == iteration * 1000 + n
        assert samples.decode(index) == (iteration, n)


def test_the_values_recorded_calls_carry():
    assert samples.STRIDE == 1000 and samples.REASK == 500_000
    assert samples.planner(3, 2) == 3002
    assert samples.executor(3, 5) == 3_000_005
    assert samples.executor(3, 5, again=True) == 3_500_005
    assert samples.fixer(3, 5, 1) == 3_005_001
    assert samples.summarizer(3) == 3
    # the first kernel, drafted from the reference: iteration 0
    assert samples.executor(0, 1) == 1 and samples.fixer(0, 1, 2) == 1002


def test_the_calls_of_one_agent_never_share_an_index():
    plans, k, rounds = 8, 4, 3
    slots = range(plans * k)
    iterations = range(4)
    planners = [samples.planner(t, n) for t in iterations for n in range(plans * 4)]
    executors = [samples.executor(t, s, again) for t in iterations for s in slots
                 for again in (False, True)]  # fmt: skip
    fixers = [samples.fixer(t, s, r) for t in iterations for s in slots for r in range(rounds)]
    summarizers = [samples.summarizer(t) for t in iterations]
    for indices in (planners, executors, fixers, summarizers):
        assert len(set(indices)) == len(indices)
