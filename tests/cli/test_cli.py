"""The command line as a user runs it: tables, JSON, exit codes and usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rendered_tables import check_one_ceiling, parse_tables

from accelopt.backends.registry import shipped_kernel
from accelopt.problems import load_problem

REQUIRED = {
    "problem": str,
    "workload": str,
    "backend": str,
    "kernel": str,
    "status": str,
    "error": str,
    "latency_s": (float, type(None)),
    "peak_s": float,
    "pct_of_peak": (float, type(None)),
    "bound": str,
    "max_rel_err": (float, type(None)),
    "noise": (float, type(None)),
}

# Quick verdicts on the small workload: what these tests read is the command line's output, not
# the figures (the cpu workload's rotation sets and timing are the profiling tests' subject).
FAST = ("--workload", "small", "--min-calls", "3", "--min-time", "0.01", "--seeds", "2")


def assert_schema(record: dict) -> None:
    for key, kind in REQUIRED.items():
        assert key in record, key
        assert isinstance(record[key], kind), (key, record[key])
    assert record["bound"] in {"matmul", "vector", "memory"}


@pytest.fixture()
def silu_baseline(tmp_path: Path) -> Path:
    path = tmp_path / "my_kernel.c"
    path.write_text(shipped_kernel(load_problem("silu"), "baseline").read_text())
    return path


def test_eval_json_schema_of_a_passing_kernel(run_cli, silu_baseline: Path) -> None:
    out = run_cli("eval", "silu", silu_baseline, *FAST, "--json", "-")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert_schema(record)
    assert record["status"] == "PASSED"
    assert record["kernel"] == "my_kernel.c"
    assert 0 < record["pct_of_peak"] < 1.05
    assert record["bound"] == "memory"
    assert record["max_rel_err"] <= 2e-5


def test_eval_table_and_json_file(run_cli, silu_baseline: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    out = run_cli(
        "eval", "silu", silu_baseline, "--check-only", "--workload", "small", "--json", target
    )
    assert out.returncode == 0, out.stderr
    assert "PASSED" in out.stdout and "silu" in out.stdout
    record = json.loads(target.read_text())
    assert_schema(record)
    assert record["latency_s"] is None and record["pct_of_peak"] is None


def test_a_failing_kernel_is_a_result_not_an_error(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("void kernel(const float *x, float *y) { y[0] = x[0] }\n")
    out = run_cli("eval", "silu", bad, "--json", "-")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert_schema(record)
    assert record["status"] == "COMPILE_ERROR"
    assert "kernel.c" in record["error"]


def test_bench_run_json_is_a_list_of_evaluations(run_cli) -> None:
    args = ("--problem", "silu", "--problem", "matmul", "--kernel", "baseline")
    out = run_cli("bench", "run", *args, *FAST, "--json", "-")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert [r["problem"] for r in records] == ["silu", "matmul"]
    for record in records:
        assert_schema(record)
        assert record["status"] == "PASSED", record["error"]
        assert record["kernel"] == "baseline"


def test_bench_run_compares_kinds_with_a_geomean_row(run_cli) -> None:
    out = run_cli("bench", "run", "--problem", "silu", "--problem", "matmul", *FAST)
    assert out.returncode == 0, out.stderr
    (table,) = parse_tables(out.stdout)  # a header rich wraps is joined again
    for column in (
        "bound",
        "peak ms",
        "baseline ms",
        "baseline %",
        "expert achieved",
        "numpy ms (%)",
        "inductor ms (%)",
        "max-autotune ms (%)",
        "best reference",
    ):
        assert column in table.headers
    assert check_one_ceiling(table) >= 6  # every % is the row's peak over its ms
    assert "geomean" in out.stdout
    assert "numpy column: NumPy" in out.stdout  # how the BLAS was set up
    assert out.stdout.count("%") >= 6


def test_bench_run_json_holds_every_kind(run_cli) -> None:
    out = run_cli(
        "bench", "run", "--problem", "silu", "--check-only", "--workload", "small", "--json", "-"
    )
    assert out.returncode == 0, out.stderr
    kinds = {r["kernel"] for r in json.loads(out.stdout)}
    assert {"baseline", "numpy"} <= kinds
    assert all(r["status"] == "PASSED" for r in json.loads(out.stdout))


def test_bench_run_numpy_only(run_cli) -> None:
    out = run_cli("bench", "run", "--kernel", "numpy", "--problem", "matmul", *FAST, "--json", "-")
    assert out.returncode == 0, out.stderr
    (record,) = json.loads(out.stdout)
    assert record["kernel"] == "numpy" and record["backend"] == "numpy"
    assert record["status"] == "PASSED" and 0 < record["pct_of_peak"] < 1.05


def test_bench_show(run_cli) -> None:
    out = run_cli("bench", "show", "rmsnorm_matmul")
    assert out.returncode == 0, out.stderr
    for text in ("rmsnorm_matmul", "x[M,K], w[K,N] → out[M,N]", "peak ms", "paper", "void kernel"):
        assert text in out.stdout
    data = json.loads(run_cli("bench", "show", "silu", "--json", "-").stdout)
    assert {c["workload"] for c in data["costs"]} >= {"paper", "cpu", "small"}
    cpu = next(c for c in data["costs"] if c["workload"] == "cpu")
    assert cpu["bound"] == "memory" and cpu["bytes"] == 8 * 2048 * 3584
    assert cpu["peak_s"] == pytest.approx(cpu["bytes"] / 45e9)
    assert "void kernel" in data["baseline_source"] and "baseline" in data["kernels"]


def test_bench_list(run_cli) -> None:
    out = run_cli("bench", "list", "--json", "-")
    assert out.returncode == 0
    names = [p["name"] for p in json.loads(out.stdout)]
    assert {"silu", "matmul", "rmsnorm_matmul"} <= set(names)
    table = run_cli("bench", "list")
    assert "rmsnorm_matmul" in table.stdout and "M=4096" in table.stdout


def test_hardware_shows_cached_spec_and_datasheets(run_cli) -> None:
    out = run_cli("hardware", "--json", "-")
    assert out.returncode == 0, out.stderr
    labels = {d["label"]: d for d in json.loads(out.stdout)}
    assert labels["this machine"]["name"] == "cpu:test"
    assert {"h100", "h200", "trn1", "trn2"} <= set(labels)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "nosuch", "k.c"), "unknown problem 'nosuch'"),
        (("eval", "silu", "/no/such/kernel.c"), "does not exist"),
        (("eval", "silu", "KERNEL", "--workload", "huge"), "no workload 'huge'"),
        (("eval", "silu", "KERNEL", "--backend", "fpga"), "unknown backend"),
        (("bench", "run", "--problem", "nosuch"), "unknown problem"),
        (("bench", "run", "--kernel", "wizard"), "unknown kernel kind"),
        (("bench", "show", "nosuch"), "unknown problem"),
        (("eval", "silu", "KERNEL", "--seeds", "0"), "invalid evaluation option"),
    ],
)
def test_usage_errors_exit_2_with_one_sentence(run_cli, silu_baseline, args, message) -> None:
    args = tuple(str(silu_baseline) if a == "KERNEL" else a for a in args)
    out = run_cli(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_missing_compiler_is_a_usage_error(run_cli, silu_baseline: Path) -> None:
    out = run_cli("eval", "silu", silu_baseline, env={"CC": "/nonexistent/cc"})
    assert out.returncode == 2
    assert "C compiler" in out.stderr and "Traceback" not in out.stderr


def test_missing_argument_is_a_usage_error(run_cli) -> None:
    out = run_cli("eval", "silu")
    assert out.returncode == 2


def test_describe_sandbox_names_each_layer_and_warns_for_missing_ones():
    from accelopt.cli.hardware import describe_sandbox

    full = {"seccomp": "1", "seccomp_load": "1", "uid": "65534", "dropped": "1",
            "privileges": "nobody", "no_new_privs": "1", "network": "none", "landlock": "7",
            "tasks": "2"}  # fmt: skip
    line, warnings = describe_sandbox(full)
    assert "seccomp" in line and "nobody" in line and "no network" in line and warnings == []
    assert "every thread" in line and "Landlock ABI 7" in line
    line, warnings = describe_sandbox({**full, "seccomp": "0", "network": "host"})
    assert "no filter" in line and "host's network" in line
    assert any("ACCELOPT_UNSANDBOXED" in w for w in warnings) and len(warnings) == 2
    _, warnings = describe_sandbox({**full, "landlock": "0", "landlock_error": "38"})
    assert len(warnings) == 1 and "no Landlock (errno 38)" in warnings[0]
    assert describe_sandbox({"error": "no C compiler"})[0] == "unknown"
    _, warnings = describe_sandbox({**full, "memory_access": "its memory (EPERM)"})
    assert any("process_vm_readv" in w for w in warnings)
    line, _ = describe_sandbox({**full, "uid": "0", "privileges": "root-without-capabilities"})
    assert "every capability dropped" in line
