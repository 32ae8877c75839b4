"""A swapped site at run time, with fake kernels: the first call at new shapes keeps the kernel
only when it agrees with the subgraph and beats it; the weight cache follows in-place updates."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from accelopt.model.matching import Arg  # noqa: E402
from accelopt.model.sites import SiteCall  # noqa: E402
from accelopt.model.subgraphs import WeightCache  # noqa: E402


def _site(kernel, subgraph_s: float = 0.0, race: bool = True) -> SiteCall:
    def fallback(x):
        time.sleep(subgraph_s)
        return (x * 2,)

    def call(x, policy=None, verify=None):
        return kernel(x)

    provided = SimpleNamespace(kernel=call)
    return SiteCall("s", [Arg((0,))], fallback, [4], provided, 1e-5, layout="each", race=race)


def test_a_correct_kernel_that_beats_the_subgraph_is_kept_and_called_from_then_on():
    calls = []
    site = _site(lambda x: calls.append(1) or x * 2, subgraph_s=0.002)
    x = torch.ones(3, 4)
    assert torch.equal(site([x])[0], x * 2)
    (decision,) = site.decisions.values()
    assert decision.path == "kernel" and decision.error == 0.0
    before = len(calls)
    site([x])
    assert len(calls) == before + 1  # the kernel, not the subgraph


def test_a_kernel_slower_than_the_subgraph_is_not_kept():
    site = _site(lambda x: time.sleep(0.002) or x * 2)
    site([torch.ones(3, 4)])
    (decision,) = site.decisions.values()
    assert decision.path == "subgraph" and "slower than the subgraph" in decision.reason


@pytest.mark.parametrize(
    ("kernel", "why"),
    [(lambda x: x * 3, "differs from the subgraph"), (lambda x: 1 / 0, "failed here")],
)
def test_a_wrong_or_failing_kernel_leaves_the_subgraph_at_those_shapes(kernel, why):
    site = _site(kernel, race=False)
    x = torch.ones(3, 4)
    assert torch.equal(site([x])[0], x * 2)  # the subgraph's value, always
    (decision,) = site.decisions.values()
    assert decision.path == "subgraph" and why in decision.reason
    site([torch.ones(5, 4)])  # new shapes: decided again
    assert len(site.decisions) == 2


def test_the_weight_cache_transposes_again_after_an_in_place_update():
    cache, w = WeightCache(), torch.arange(6.0).reshape(2, 3)
    first = cache.get([w])
    assert torch.equal(first, w.t()) and cache.get([w]) is first
    with torch.no_grad():
        w.add_(1)
    assert torch.equal(cache.get([w]), w.t())
