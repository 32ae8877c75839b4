"""A resume takes everything from the run's record (its hardware spec, backend, workload, search
settings, budget); replay answers a run from its own record, and another run's only when asked."""

from __future__ import annotations

import pytest
from agents_pool import variant

from accelopt.llm.budget import Budget
from accelopt.llm.config import load_config
from accelopt.search.config import SearchConfig
from accelopt.search.evaluations import run_evaluations, run_raced
from accelopt.search.run import (
    RunInputs,
    RunTarget,
    execute_run,
    hardware_note,
    new_run,
    run_budget,
)
from accelopt.store.store import Store
from conftest import FAST_EVAL

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

QUIET = SearchConfig(
    beam=1, plans=1, samples=1, iterations=2, fixer=0, memory="off", references=False
)


class Stop(Exception):
    pass


def stop_at(phase: str, iteration: int):
    def hook(name: str, t: int) -> None:
        if (name, t) == (phase, iteration):
            raise Stop(f"{name} {t}")

    return hook


def test_a_resume_goes_on_against_the_ceilings_the_run_started_with_when_the_new_are_lower(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    """(Ceilings re-measured higher move the run: test_resume_re_measured.py.)"""
    lowered = hw.model_copy(update={"matmul_rate": hw.matmul_rate * 0.8})  # re-measured since
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), QUIET, llm, variant("slow"))
        first = RunInputs(llm, hw, FAST_EVAL, on_phase=stop_at("planning", 2))
        with pytest.raises(Stop):
            execute_run(store, run, first, resume=False)
        assert "changed since run" in hardware_note(run, lowered)
        result = execute_run(store, run, RunInputs(llm, lowered, FAST_EVAL), resume=True)
        assert result.status == "finished"
        kernels = store.kernels(run.id)
        evaluations = run_evaluations(store, run.id)
        # every kernel, one key: a final evaluation, or a raced one (stopped early, clearly
        # slower than its parent: kept apart, under the run's hardware key too)
        assert set(evaluations) | run_raced(store, run.id) == {k.hash for k in kernels}
        assert {e.hardware for e in evaluations.values()} == {hw.key()}
        raced = store._connection().execute(
            "SELECT DISTINCT hardware FROM evaluations WHERE harness_version LIKE '%+raced:%'"
        )
        assert {row[0] for row in raced} <= {hw.key()}
        assert result.best.evaluation.hardware == hw.key()
        assert store.get_run(run.id).best_hash in evaluations


def test_a_new_run_pays_for_fresh_samples_unless_told_to_replay(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    one = QUIET.model_copy(update={"iterations": 1})
    with Store.open(tmp_path / "ws") as store:

        def requests_of(**kw) -> int:
            before = len(server.requests)
            run = new_run(
                store, RunTarget("matmul", "small", "cpu", hw), one, llm, variant("slow"), **kw
            )
            execute_run(store, run, RunInputs(llm, hw, FAST_EVAL, check_llm=False), resume=False)
            return len(server.requests) - before

        first = requests_of()
        assert first > 0
        assert requests_of() == first  # the same prompts, asked again: fresh samples
        (latest, *_) = store.list_runs()
        replayed = requests_of(replay_from=[latest.id])
        assert replayed == 0  # every answer reused from the run it names


def test_a_resumed_run_counts_what_it_spent_before(
    tmp_path, llm, hw, server, accelopt_cache, fake_evaluations
):
    capped = llm.model_copy(update={"budget": llm.budget.model_copy(update={"max_usd": 5.0})})
    with Store.open(tmp_path / "ws") as store:
        run = new_run(
            store, RunTarget("matmul", "small", "cpu", hw), QUIET, capped, variant("slow")
        )
        with pytest.raises(Stop):
            stopped = RunInputs(capped, hw, FAST_EVAL, on_phase=stop_at("writing", 2))
            execute_run(store, run, stopped, resume=False)
        spent = store.spent([run.id]).usd
        assert spent > 0
        budget = run_budget(store, run)
        assert budget.max_usd == 5.0 and budget.spent_usd == pytest.approx(spent)
        assert run_budget(store, run, max_usd=1.0).max_usd == 1.0  # --budget-usd on a resume


def test_a_resume_refuses_options_that_contradict_its_record(run_cli, tmp_path, hw):
    config = tmp_path / "accelopt.yaml"
    config.write_text("llm:\n  default: {base_url: 'http://127.0.0.1:9/v1', model: m}\n")
    with Store.open(tmp_path / "ws") as store:
        run = new_run(store, RunTarget("matmul", "small", "cpu", hw), QUIET, load_config(config))
    common = ("--config", config, "--workspace", tmp_path / "ws")
    for option, value in (("--backend", "triton"), ("--workload", "tiny")):
        out = run_cli("optimize", "--resume", run.id, option, value, *common)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert f"takes {option} from its record" in out.stderr
    mixed = run_cli("optimize", "matmul", "--resume", run.id, *common)
    assert mixed.returncode == 2 and "continues a run as it was recorded" in mixed.stderr
    other = tmp_path / "other.yaml"
    other.write_text("llm:\n  default: {base_url: 'http://127.0.0.1:9/v1', model: other}\n")
    changed = run_cli("optimize", "--resume", run.id, "--config", other, "--workspace",
                      tmp_path / "ws")  # fmt: skip
    assert changed.returncode == 2 and "was made with planner 'm'" in changed.stderr
    missing = run_cli("optimize", "matmul", "--replay-from", "nosuchrun", *common)
    assert missing.returncode == 2 and "no run 'nosuchrun' to replay from" in missing.stderr


def test_a_suite_budget_is_one_total(tmp_path, llm, hw, server, accelopt_cache):
    """The runs of one `--suite` share one budget: once the first spent it, the next stops
    before asking anything."""
    one = QUIET.model_copy(update={"iterations": 1})
    shared = Budget(max_usd=1e-6)
    with Store.open(tmp_path / "ws") as store:
        statuses = []
        for problem in ("matmul", "silu"):
            start = variant("slow") if problem == "matmul" else None
            run = new_run(store, RunTarget(problem, "small", "cpu", hw), one, llm, start)
            inputs = RunInputs(llm, hw, FAST_EVAL, check_llm=False, budget=shared)
            statuses.append(execute_run(store, run, inputs, resume=False).status)
        assert statuses == ["budget", "budget"]
        second = store.list_runs()[0]
        assert store.llm_calls(second.id) == []  # nothing asked once the total was spent
        assert shared.spent_usd == pytest.approx(store.spent([r.id for r in store.list_runs()]).usd)
