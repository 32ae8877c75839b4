"""A run's evaluations: per kernel, over its tuned workloads, found under a raised ceiling's key
(``search.evaluations``, over the store's cache)."""

import pytest

from accelopt.backends.status import Status
from accelopt.search.evaluations import run_evaluations


def test_run_evaluations(store, make_run, make_kernel, make_evaluation):
    store.create_run(make_run())
    for h in ("k0", "k1", "k2", "k3"):
        store.add_kernel("run-0001", make_kernel(h))
    store.put_evaluation(make_evaluation("k2", latency_s=2.0))
    store.put_evaluation(make_evaluation("k0", latency_s=1.0))
    store.put_evaluation(make_evaluation("k1", hardware="other-cpu"))  # not this run's hardware
    store.put_evaluation(make_evaluation("k3"), harness_version="old")  # an older harness
    store.put_evaluation(make_evaluation("k9"))  # not a kernel of the run
    got = run_evaluations(store, "run-0001")
    assert list(got) == ["k0", "k2"]  # the order the kernels were added
    assert got["k2"].latency_s == 2.0
    assert run_evaluations(store, "nope") == {}


def test_run_evaluations_after_a_ceiling_was_raised(store, make_run, make_kernel, make_evaluation):
    """Kernels evaluated after the run's device had a ceiling re-measured are cached under the
    raised spec's key (same device, another digest): still the run's evaluations."""
    store.create_run(make_run(hardware="cpu:x-aaaaaaaaaaaa"))
    for h in ("k0", "k1", "k2"):
        store.add_kernel("run-0001", make_kernel(h))
    store.put_evaluation(make_evaluation("k0", hardware="cpu:x-aaaaaaaaaaaa", latency_s=1.0))
    store.put_evaluation(make_evaluation("k0", hardware="cpu:x-bbbbbbbbbbbb", latency_s=9.0))
    store.put_evaluation(make_evaluation("k1", hardware="cpu:x-bbbbbbbbbbbb", latency_s=2.0))
    store.put_evaluation(make_evaluation("k2", hardware="cpu:y-cccccccccccc"))  # another device
    got = run_evaluations(store, "run-0001")
    assert {h: e.latency_s for h, e in got.items()} == {"k0": 1.0, "k1": 2.0}


def test_run_evaluations_of_a_run_tuned_on_several_workloads(
    store, make_run, make_kernel, make_evaluation
):
    store.create_run(make_run(spec={"workloads": ["cpu", "small"], "held_out": ["tiny"]}))
    for h in ("k0", "k1", "k2", "k3"):
        store.add_kernel("run-0001", make_kernel(h))
    store.put_evaluation(make_evaluation("k0", latency_s=4e-3))
    store.put_evaluation(make_evaluation("k0", workload="small", latency_s=1e-3))
    store.put_evaluation(make_evaluation("k1", status=Status.INCORRECT, latency_s=None))
    store.put_evaluation(make_evaluation("k2"))  # measured on cpu only so far: not complete
    store.put_evaluation(make_evaluation("k0", workload="tiny", latency_s=5e-4))  # held out
    got = run_evaluations(store, "run-0001")
    assert list(got) == ["k0", "k1"]
    assert got["k0"].workload == "cpu+small" and got["k0"].latency_s == pytest.approx(2e-3)
    assert got["k1"].status is Status.INCORRECT and got["k1"].error.startswith("on workload cpu")
    tiny = run_evaluations(store, "run-0001", workload="tiny")
    assert list(tiny) == ["k0"] and tiny["k0"].latency_s == 5e-4
