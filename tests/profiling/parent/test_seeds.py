"""An evaluation's default seeds: the same on one machine, drawn anew with a new salt
(``parent/seeds.py``)."""

from __future__ import annotations

from accelopt.profiling.parent.seeds import seed_pool


def test_the_seed_pool_is_stable_per_machine_and_differs_per_problem(tmp_path):
    first = seed_pool(tmp_path, "silu", "cpu", 5)
    assert first == seed_pool(tmp_path, "silu", "cpu", 5)
    assert len(set(first)) == 5 and all(0 <= s < 2**31 for s in first)
    assert seed_pool(tmp_path, "silu", "cpu", 3) == first[:3]
    assert seed_pool(tmp_path, "silu", "small", 5) != first
    assert seed_pool(tmp_path, "matmul", "cpu", 5) != first
    (tmp_path / "salt").unlink()  # a new salt draws new seeds
    assert seed_pool(tmp_path, "silu", "cpu", 5) != first


def test_threads_drawing_the_first_salt_agree(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        drawn = list(pool.map(lambda _: seed_pool(tmp_path, "silu", "cpu", 2), range(32)))
    assert all(seeds == seed_pool(tmp_path, "silu", "cpu", 2) for seeds in drawn)
