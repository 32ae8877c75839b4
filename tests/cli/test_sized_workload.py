"""A workload given by its sizes on the command line: optimize tunes on it (an autotune run, no
LLM), records it under its canonical name and resumes by either spelling; export builds and
checks a kernel for it; a list of sizes that misses one is one sentence."""

from __future__ import annotations

import json

import numpy as np
from cli_timing import NO_REFERENCES, QUICK_TIMING

import accelopt

UNSET = {"ACCELOPT_LLM_BASE_URL": "", "ACCELOPT_LLM_MODEL": ""}
AUTOTUNE = ("--strategy", "autotune", "--kernel", "expert", "--iterations", "1", "--variants",
            "1", *QUICK_TIMING, *NO_REFERENCES)  # fmt: skip
SIZES = "M=64,N=96,K=48"


def test_optimize_tunes_on_a_workload_given_by_its_sizes(run_cli, tmp_path) -> None:
    ws = tmp_path / "ws"
    out = run_cli("optimize", "matmul", *AUTOTUNE, "--workload", "K=48,M=64,N=96",
                  "--workspace", ws, "--json", "-", env=UNSET)  # fmt: skip
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["status"] == "finished"
    assert found["workload"] == SIZES and found["workloads"] == [SIZES]  # the canonical name
    again = run_cli("optimize", "--resume", found["run"], "--workload", "N=96,K=48,M=64",
                    "--workspace", ws, "--json", "-", env=UNSET)  # fmt: skip
    assert again.returncode == 0, again.stderr  # the same workload, spelled otherwise


def test_export_builds_and_checks_a_kernel_for_a_workload_given_by_its_sizes(
    run_cli, tmp_path
) -> None:
    folder = tmp_path / "out"
    out = run_cli("export", "matmul", "--kernel", "expert", "--workload", SIZES,
                  "--to", folder, "--workspace", tmp_path / "ws")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"{SIZES}: PASSED" in out.stdout
    evidence = json.loads((folder / "EVIDENCE.json").read_text())
    assert evidence["workloads"][SIZES]["status"] == "PASSED"
    matmul = accelopt.load(folder).matmul
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 48), dtype=np.float32)
    b = rng.standard_normal((48, 96), dtype=np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(matmul(a, b) - want) / np.linalg.norm(want) < 2e-5


def test_a_list_of_sizes_that_misses_one_is_one_sentence(run_cli, tmp_path) -> None:
    for command in (
        ("optimize", "matmul", *AUTOTUNE, "--held-out", "M=64,N=96"),
        ("export", "matmul", "--kernel", "expert", "--workload", "M=64,N=96", "--to",
         tmp_path / "out"),
    ):  # fmt: skip
        out = run_cli(*command, "--workspace", tmp_path / "ws", env=UNSET)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip() == (
            "error: workload 'M=64,N=96' misses K: give every size parameter of problem "
            "'matmul' (M, N, K) as a positive integer, e.g. M=512,N=1536,K=640"
        )
