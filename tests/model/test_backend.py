"""The torch.compile backend on tiny models: matching (and a near miss that must not match),
the numerical check, the swap, outputs equal to eager, fallback at an unseen shape, training."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from tiny_models import NormProjection, TinyBlock  # noqa: E402

from accelopt.model.backend import AccelOptBackend  # noqa: E402
from accelopt.model.confirm import confirm, relative_error  # noqa: E402
from accelopt.model.loading import capture  # noqa: E402
from accelopt.problems.loader import load_problem  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _compiled(model, backend, x, **kw):
    torch._dynamo.reset()
    return torch.compile(model, backend=backend, **kw), model(x)


def _by_problem(backend):
    return {s.problem: s for s in backend.sites}


def test_a_block_gets_its_swiglu_and_projection_swapped_and_computes_what_eager_does(model_ws):
    torch.manual_seed(0)
    model, backend = TinyBlock().eval(), AccelOptBackend(model_ws, race=False)
    with torch.inference_mode():
        x = torch.randn(2, 8, 32)  # inference tensors, as the fresh ones: one graph, no recompile
        compiled, want = _compiled(model, backend, x, fullgraph=True)
        got = compiled(x)
        fresh = torch.randn(2, 8, 32)
        again, eager = compiled(fresh), model(fresh)
    sites = _by_problem(backend)
    assert sites["swiglu"].status == "swapped" and sites["swiglu"].kernel == "shipped expert"
    assert sites["swiglu"].sizes == {"M": 16, "N": 48, "K": 32}
    assert sites["matmul"].status == "swapped" and sites["matmul"].nodes == ("linear",)
    assert relative_error(got.numpy(), want.numpy()) <= 1e-5
    assert relative_error(again.numpy(), eager.numpy()) <= 1e-5
    # the kernels ran, not the subgraphs they replaced
    assert all(d.path == "kernel" for c in backend.calls.values() for d in c.decisions.values())
    assert len(backend.sites) == 2 and {c.calls for c in backend.calls.values()} == {2}


def test_a_norm_with_another_eps_is_a_near_miss_and_the_problem_s_own_eps_matches(model_ws):
    torch.manual_seed(1)
    x = torch.randn(2, 8, 32)
    with torch.inference_mode():
        near = AccelOptBackend(model_ws, inductor=False, race=False)
        compiled, want = _compiled(NormProjection(eps=1e-6).eval(), near, x)
        assert relative_error(compiled(x).numpy(), want.numpy()) <= 1e-5
        exact = AccelOptBackend(model_ws, inductor=False, race=False)
        compiled, want = _compiled(NormProjection(eps=1e-5).eval(), exact, x)
        assert relative_error(compiled(x).numpy(), want.numpy()) <= 1e-5
    missed = [s for s in near.sites if s.problem == "add_rmsnorm_matmul"]
    assert [s.status for s in missed] == ["kept"]
    assert "eps is 1e-06; add_rmsnorm_matmul's is 1e-05" in missed[0].reason
    assert "add_rmsnorm_matmul" not in {s.problem for s in near.sites if s.status == "swapped"}
    swapped = {s.problem: s for s in exact.sites if s.status == "swapped"}
    assert swapped["add_rmsnorm_matmul"].sizes == {"M": 16, "N": 48, "K": 32}


def test_a_match_that_computes_something_else_is_refused_by_the_numerical_check(model_ws):
    gm, _ = capture(TinyBlock().eval(), [torch.randn(2, 8, 32)])
    chosen, _ = AccelOptBackend(model_ws).plan(gm)
    match = next(m for m, _ in chosen if m.problem == "swiglu")
    problem = load_problem("swiglu")
    assert confirm(match, problem)[1] == ""
    up, down, gate = match.args[1:]  # w_up and w_gate swapped: gate and up exchange roles
    wrong = dataclasses.replace(match, args=[match.args[0], gate, down, up])
    error, why = confirm(wrong, problem)
    assert error > problem.tolerance and "computes something else" in why


@pytest.mark.parametrize("policy", ["fallback", "compile"])
def test_at_an_unseen_shape_the_kernel_is_built_and_checked_or_the_subgraph_runs(model_ws, policy):
    torch.manual_seed(2)
    model = TinyBlock().eval()
    backend = AccelOptBackend(model_ws, policy, inductor=False, race=False)
    with torch.inference_mode():
        compiled, _ = _compiled(model, backend, torch.randn(2, 8, 32), dynamic=True)
        compiled(torch.randn(2, 8, 32))
        unseen = torch.randn(3, 5, 32)  # 15 rows: no kernel was exported for them
        assert relative_error(compiled(unseen).numpy(), model(unseen).numpy()) <= 1e-5
    call = backend.calls["swiglu-1"]
    decision = call.decisions[((3, 5, 32), (48, 32), (48, 32), (32, 48))]
    if policy == "fallback":
        assert decision.path == "subgraph" and "no kernel was exported" in decision.reason
    else:
        assert decision.path == "kernel" and decision.error <= 2 * call.tolerance


def test_in_training_a_subgraph_that_needs_gradients_is_left_to_inductor(model_ws):
    model, x = TinyBlock().train(), torch.randn(2, 8, 32)
    backend = AccelOptBackend(model_ws, inductor=False)
    compiled, _ = _compiled(model, backend, x)
    compiled(x).sum().backward()
    assert model.gate.weight.grad is not None
    assert backend.sites and all(s.status == "kept" for s in backend.sites)
    assert (
        "needs gradients, and swiglu declares no backward" in _by_problem(backend)["swiglu"].reason
    )


def test_the_registered_name_finds_the_backend(model_ws, monkeypatch):
    monkeypatch.setenv("ACCELOPT_WORKSPACE", str(model_ws))
    model, x = TinyBlock().eval(), torch.randn(2, 8, 32)
    torch._dynamo.reset()
    with torch.inference_mode():
        got, want = torch.compile(model, backend="accelopt")(x), model(x)
    assert relative_error(got.numpy(), want.numpy()) <= 1e-5


def test_attention_is_gqa_full_when_it_attends_to_every_key_and_a_near_miss_when_causal(model_ws):
    from tiny_models import Attention

    torch.manual_seed(3)
    found = {}
    with torch.inference_mode():
        x = torch.randn(2, 8, 32)
        for causal in (False, True):
            backend = AccelOptBackend(model_ws, inductor=False, race=False)
            model = Attention(causal).eval()
            compiled, want = _compiled(model, backend, x)
            assert relative_error(compiled(x).numpy(), want.numpy()) <= 1e-5
            found[causal] = [s for s in backend.sites if s.problem == "gqa_full"]
    (full,) = found[False]
    assert full.status == "swapped"
    assert full.sizes == {"B": 2, "N": 8, "QH": 4, "KH": 2, "D": 8}
    (causal,) = found[True]
    assert causal.status == "kept" and "it is causal" in causal.reason


def test_a_kernel_that_cannot_be_prepared_leaves_the_subgraph_as_written(model_ws, tmp_path):
    not_a_folder = tmp_path / "workspace"
    not_a_folder.write_text("a file where the workspace should be\n")  # no export can be written
    backend = AccelOptBackend(not_a_folder, inductor=False, race=False)
    with torch.inference_mode():
        x = torch.randn(2, 8, 32)
        compiled, want = _compiled(TinyBlock().eval(), backend, x)
        assert relative_error(compiled(x).numpy(), want.numpy()) <= 1e-5
    assert backend.sites and all(s.status == "kept" for s in backend.sites)
    assert all("no kernel could be prepared" in s.reason for s in backend.sites)
    assert backend.calls == {}
