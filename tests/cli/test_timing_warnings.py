"""The CLI warns about figures taken on a busy machine or noisy ones, and never for quiet ones."""

from __future__ import annotations

from accelopt.backends.status import Status
from accelopt.cli.output import timing_warnings
from accelopt.profiling.evaluation import Evaluation

QUIET = Evaluation(
    problem="silu", workload="cpu", backend="cpu", kernel="baseline", kernel_hash="h",
    hardware="hw", status=Status.PASSED, latency_s=1e-3, noise=0.01, ci_low_s=0.995e-3,
    ci_high_s=1.005e-3, load_others=0.01, load_steal=0.0, peak_s=5e-4, bound="memory",
    tolerance=1e-5,
)  # fmt: skip


def test_a_quiet_precise_timing_gets_no_warning():
    assert timing_warnings([QUIET]) == []


def test_a_check_only_result_gets_no_warning():
    assert timing_warnings([QUIET.model_copy(update={"latency_s": None, "load_others": 0.9})]) == []


def test_a_busy_machine_is_named_with_what_others_took():
    busy = QUIET.model_copy(update={"load_others": 0.45, "load_steal": 0.02})
    lines = timing_warnings([busy])
    assert lines[0].startswith("warning: some timings were taken on a busy machine")
    assert lines[1] == "silu / baseline: other work used 45.0% of the CPUs, steal 2.0%"


def test_noise_and_an_imprecise_median_are_named():
    noisy = QUIET.model_copy(
        update={"kernel": "expert", "noise": 0.12, "ci_low_s": 0.96e-3, "ci_high_s": 1.04e-3}
    )
    lines = timing_warnings([QUIET, noisy])
    assert len(lines) == 2
    assert (
        lines[1]
        == "silu / expert: noise (IQR/median) 12.0%; median known to ±4.0% within its timing"
    )


def test_isolation_warnings_name_the_missing_layer():
    from accelopt.cli.output import isolation_warnings

    full = {"seccomp": "1", "seccomp_load": "1", "uid": "65534"}
    sandboxed = QUIET.model_copy(update={"isolation": full, "network_isolated": True})
    assert isolation_warnings([sandboxed]) == []
    unfiltered = QUIET.model_copy(
        update={"isolation": {**full, "seccomp": "0"}, "network_isolated": False}
    )
    (line,) = isolation_warnings([unfiltered])
    assert "no system call filter" in line and "host's network" in line


def test_the_table_and_the_warning_say_one_interval_and_why_they_differ():
    """Issue 46, defect 14: the ± column (with the machine's drift) and the warning (within the
    timing) were two unexplained figures under a header that read as "plus or minus 95 %"."""
    from rich.console import Console

    from accelopt.cli.output import evaluations_table

    wide = QUIET.model_copy(
        update={"kernel": "expert", "session_ci": 0.053, "ci_low_s": 0.36e-3, "ci_high_s": 1.64e-3}
    )
    [_, line] = timing_warnings([wide])
    assert line == (
        "silu / expert: median known to ±5.3% within its timing (±64.0% in the table, with the "
        "machine's drift between evaluations)"
    )
    console = Console(width=250, record=True)
    console.print(evaluations_table([wide], "t"))
    text = console.export_text()
    assert "ms ± (95% CI)" in text and "± 95%" not in text and "64.0%" in text
