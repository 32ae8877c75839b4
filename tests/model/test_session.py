"""Interleaved timing with a fake clock: each fake callable advances the clock by its cost."""

from __future__ import annotations

import sys

import pytest

from accelopt.model import session as session_mod
from accelopt.model.session import MIN_BUDGET_ROUNDS, round_order, time_interleaved


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def costing(clock: FakeClock, seconds: float, log: list[str] | None = None, name: str = ""):
    def fn() -> None:
        clock.t += seconds
        if log is not None:
            log.append(name)

    return fn


def test_round_order_rotates():
    names = ("a", "b", "c")
    firsts = [round_order(names, r)[0] for r in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    assert sorted(round_order(names, 1)) == list(names)


def test_every_round_calls_every_fn_and_no_fn_always_first():
    clock = FakeClock()
    log: list[str] = []
    fns = {n: costing(clock, 0.01, log, n) for n in ("eager", "inductor", "accelopt")}
    s = time_interleaved(fns, rounds=6, warmup=1, min_sample_s=0.001, clock=clock)
    assert s.rounds == 6
    assert s.inner == dict.fromkeys(fns, 1)
    timed_calls = log[3:]  # after the warmup round
    rounds = [timed_calls[i : i + 3] for i in range(0, len(timed_calls), 3)]
    assert len(rounds) == 6
    assert all(sorted(r) == sorted(fns) for r in rounds)
    assert {r[0] for r in rounds} == set(fns)


def test_a_fn_twice_as_slow_reads_twice_as_slow():
    clock = FakeClock()
    fns = {"fast": costing(clock, 0.001), "slow": costing(clock, 0.002)}
    s = time_interleaved(fns, rounds=10, clock=clock)
    sp = s.speedup("fast", "slow")
    assert (sp.candidate, sp.baseline) == ("fast", "slow")
    assert sp.ratio == pytest.approx(2.0)
    assert sp.low <= sp.ratio <= sp.high
    assert s.speedup("slow", "fast").ratio == pytest.approx(0.5)
    fast, slow = s.timed()
    assert (fast.name, slow.name) == ("fast", "slow")
    assert fast.ms == pytest.approx(1.0) and slow.ms == pytest.approx(2.0)
    assert fast.rounds == slow.rounds == 10


def test_interval_contains_median_when_noisy():
    clock = FakeClock()
    costs = iter([0.001 * (1 + (i * 7919 % 13) / 10) for i in range(10_000)])

    def noisy() -> None:
        clock.t += next(costs)

    s = time_interleaved(
        {"noisy": noisy, "steady": costing(clock, 0.002)}, rounds=30, min_sample_s=0.0, clock=clock
    )
    (t, _) = s.timed()
    assert t.low_ms < t.ms < t.high_ms
    sp = s.speedup("steady", "noisy")
    assert sp.low < sp.ratio < sp.high


def test_budget_stops_early_but_not_before_the_minimum():
    clock = FakeClock()
    fns = {"a": costing(clock, 0.5), "b": costing(clock, 0.5)}
    s = time_interleaved(fns, rounds=30, warmup=1, budget_s=1.0, clock=clock)
    assert s.rounds == MIN_BUDGET_ROUNDS
    assert s.elapsed_s == pytest.approx(1.0 + MIN_BUDGET_ROUNDS * 1.0)


def test_budget_lets_rounds_run_while_it_lasts():
    clock = FakeClock()
    fns = {"a": costing(clock, 0.01)}
    s = time_interleaved(fns, rounds=30, warmup=1, min_sample_s=0.0, budget_s=0.155, clock=clock)
    assert MIN_BUDGET_ROUNDS < s.rounds < 30


def test_no_budget_times_every_round():
    clock = FakeClock()
    s = time_interleaved({"a": costing(clock, 1.0)}, rounds=12, clock=clock)
    assert s.rounds == 12


def test_inner_is_calibrated_once_so_a_sample_lasts_the_minimum():
    clock = FakeClock()
    calls = {"tiny": 0, "big": 0}
    first = [True]

    def tiny() -> None:  # the first call compiles: slow; later ones 0.1 ms
        calls["tiny"] += 1
        clock.t += 1.0 if first[0] else 0.0001
        first[0] = False

    def big() -> None:
        calls["big"] += 1
        clock.t += 0.01

    s = time_interleaved(
        {"tiny": tiny, "big": big}, rounds=4, warmup=3, min_sample_s=0.002, clock=clock
    )
    assert s.inner == {"tiny": 20, "big": 1}
    # warmup: 1 call (slow), 1 (calibrates inner), 20; then 4 rounds of 20
    assert calls["tiny"] == 1 + 1 + 20 + 4 * 20
    assert calls["big"] == 3 + 4
    assert s.timed()[0].ms == pytest.approx(0.1)


def test_a_clock_that_never_moves_caps_inner():
    clock = FakeClock()
    s = time_interleaved({"free": lambda: None}, rounds=1, warmup=1, clock=clock)
    assert s.inner == {"free": session_mod.MAX_INNER}


def test_unknown_names_and_nothing_to_time_are_errors():
    clock = FakeClock()
    s = time_interleaved({"a": costing(clock, 0.01)}, rounds=3, clock=clock)
    with pytest.raises(ValueError, match="'b'"):
        s.speedup("a", "b")
    with pytest.raises(ValueError):
        time_interleaved({}, clock=clock)


def test_synchronizes_when_cuda_is_initialized(monkeypatch):
    synced: list[int] = []

    class Cuda:
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def is_initialized() -> bool:
            return True

        @staticmethod
        def synchronize() -> None:
            synced.append(1)

    class Torch:
        cuda = Cuda

    monkeypatch.setitem(sys.modules, "torch", Torch)
    clock = FakeClock()
    time_interleaved({"a": costing(clock, 0.01)}, rounds=2, warmup=1, clock=clock)
    assert len(synced) == 2 * 3  # before and after each of three samples


def test_no_torch_no_sync(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert session_mod._synchronizer() is None
