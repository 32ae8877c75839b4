"""Exporting problems as FlashInfer Trace: the files and their schema, statuses and languages,
refusals, the round trip (export -> import -> the same problem), and flashinfer-bench's own data
models when a virtual environment with it is at /tmp/fibvenv."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from specs import make_spec

from accelopt.backends.kernel import Kernel
from accelopt.interop.flashinfer.export import ExportRefused, export_problem
from accelopt.problems.flashinfer import import_dataset
from accelopt.problems.flashinfer import schema as fi
from accelopt.problems.loader import load_problem
from accelopt.profiling.evaluation import Evaluation

pytest.importorskip("torch")

DATASET = Path(__file__).parents[1] / "problems" / "flashinfer_dataset"
FIB_PYTHON = Path("/tmp/fibvenv/bin/python")
HW = make_spec(name="test-cpu")  # the name is what the exported traces must carry


@pytest.fixture(scope="module")
def gemm(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fi-export") / "problems"
    results = dict(import_dataset(DATASET, root, definitions=["gemm_n48_k32"]))
    return results["gemm_n48_k32"].problem


def evaluation(problem, kernel: Kernel, workload: str, status: str, **extra) -> Evaluation:
    fields = {
        "problem": problem.name,
        "workload": workload,
        "backend": kernel.backend,
        "kernel": kernel.name,
        "kernel_hash": kernel.hash,
        "hardware": HW.key(),
        "status": status,
        "error": "" if status == "PASSED" else "failed",
        "peak_s": 1e-4,
        "bound": "matmul",
        "tolerance": problem.tolerance,
    }
    return Evaluation(**{**fields, **extra})


def load_dataset(out: Path) -> dict[str, list]:
    """Every file of an exported dataset, parsed with the documented schema, which holds no field
    the documentation does not name."""
    parsed: dict[str, list] = {"definitions": [], "workloads": [], "solutions": [], "traces": []}
    models = {"definitions": fi.Definition, "solutions": fi.Solution}
    for kind in parsed:
        for path in sorted((out / kind).rglob("*.json*")):
            texts = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
            for text in texts:
                obj = models.get(kind, fi.Trace).model_validate_json(text)
                extra = fi.unknown_fields(obj)
                if kind == "traces":  # Correctness.extra is in the data model, not in the docs
                    extra = [f for f in extra if f != "evaluation.correctness.extra"]
                assert extra == [], (path, extra)
                parsed[kind].append(obj)
    return parsed


def test_an_imported_problem_is_written_back_as_it_came(gemm, tmp_path: Path) -> None:
    files = export_problem(gemm, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == [
        "definitions/gemm/gemm_n48_k32.json",
        "workloads/gemm/gemm_n48_k32.jsonl",
    ]
    for p in files:
        assert p.read_bytes() == (DATASET / p.relative_to(tmp_path)).read_bytes()
    assert len(load_dataset(tmp_path)["workloads"]) == 4  # the cpu alias is not exported


def test_round_trip(gemm, tmp_path: Path) -> None:
    export_problem(gemm, tmp_path / "out")
    ((_, again),) = import_dataset(tmp_path / "out", tmp_path / "ws")
    p = again.problem
    assert (p.name, p.params, p.inputs, p.outputs) == (
        gemm.name,
        gemm.params,
        gemm.inputs,
        gemm.outputs,
    )
    assert {k: dict(w.sizes) for k, w in p.workloads.items()} == {
        k: dict(w.sizes) for k, w in gemm.workloads.items()
    }
    sizes = p.workload("cpu").sizes
    assert p.cost.at(sizes) == gemm.cost.at(sizes)
    arrays = [a.astype(np.float64) for a in p.generate(sizes, 4)]
    assert all(np.array_equal(x, y) for x, y in zip(arrays, gemm.generate(sizes, 4), strict=True))
    assert np.array_equal(p.reference(*arrays)[0], gemm.reference(*arrays)[0])


def test_solution_and_traces(gemm, tmp_path: Path) -> None:
    kernel = Kernel("void kernel(const float *A, const float *B, float *C) {}", "cpu", "mine.c")
    evals = [
        evaluation(
            gemm, kernel, "cpu", "PASSED", latency_s=2e-4, pct_of_peak=0.5, max_rel_err=1e-7
        ),
        evaluation(gemm, kernel, "a1b2c3d4-0000-4000-8000-000000000064", "INCORRECT"),
        evaluation(gemm, kernel, "cpu", "REJECTED", error="calls system()"),
        evaluation(gemm, kernel, "cpu", "SUSPICIOUS", latency_s=1e-6),
        evaluation(gemm, kernel, "cpu", "TIMEOUT"),
    ]
    files = export_problem(gemm, tmp_path, solution=kernel, evaluations=evals, hardware=HW)
    names = [p.relative_to(tmp_path).as_posix() for p in files]
    sol_name = f"gemm_n48_k32_accelopt_cpu_{kernel.hash[:8]}"
    assert names[2:] == [
        f"solutions/accelopt/gemm/gemm_n48_k32/{sol_name}.json",
        "traces/accelopt/gemm/gemm_n48_k32.jsonl",
    ]
    parsed = load_dataset(tmp_path)
    (sol,) = parsed["solutions"]
    assert sol.spec.language == "cpp" and sol.spec.entry_point == "kernel.c::kernel"
    assert sol.spec.destination_passing_style and sol.spec.target_hardware == ["test-cpu"]
    assert "-O3 -march=native -fopenmp -shared -fPIC" in sol.description
    assert "#define" in sol.description and "void kernel(const float *A" in sol.description
    traces = parsed["traces"]
    assert [t.evaluation.status for t in traces] == [
        "PASSED",
        "INCORRECT_NUMERICAL",
        "COMPILE_ERROR",
        "RUNTIME_ERROR",
        "TIMEOUT",
    ]
    assert all(t.solution == sol_name and t.definition == "gemm_n48_k32" for t in traces)
    passed = traces[0].evaluation
    assert passed.performance.latency_ms == pytest.approx(0.2)
    assert "50.0% of peak" in passed.log and passed.environment.hardware == "test-cpu"
    assert passed.correctness.extra["relative_l2_error"] == 1e-7
    assert traces[0].workload.uuid == "a1b2c3d4-0000-4000-8000-000000000005"  # cpu's target
    assert traces[1].workload.axes == {"M": 64}
    assert "SUSPICIOUS" in traces[3].evaluation.log


def test_export_refusals(gemm, tmp_path: Path) -> None:
    kernel = Kernel("void kernel(void) {}", "cpu", "a.c")
    other = Kernel("void kernel(int x) {}", "cpu", "b.c")
    with pytest.raises(ExportRefused, match="need the kernel"):
        export_problem(gemm, tmp_path, evaluations=[evaluation(gemm, kernel, "cpu", "PASSED")])
    with pytest.raises(ExportRefused, match="not of the solution"):
        export_problem(
            gemm, tmp_path, solution=kernel, evaluations=[evaluation(gemm, other, "cpu", "CRASH")]
        )
    with pytest.raises(ExportRefused, match="not one of"):
        export_problem(
            gemm, tmp_path, solution=kernel, evaluations=[evaluation(gemm, kernel, "x", "CRASH")]
        )
    assert not any(tmp_path.iterdir())


def test_a_suite_problem_is_synthesized_and_imports_back(tmp_path: Path) -> None:
    matmul = load_problem("matmul")
    kernel = Kernel((matmul.directory / "baseline_triton.py").read_text(), "triton", "t.py")
    files = export_problem(matmul, tmp_path / "out", solution=kernel)
    assert len(files) == 3
    parsed = load_dataset(tmp_path / "out")
    (d,) = parsed["definitions"]
    assert {n: a.type for n, a in d.axes.items()} == {"M": "var", "N": "var", "K": "var"}
    assert list(d.inputs) == ["lhs", "rhs"] and d.inputs["lhs"].shape == ["M", "K"]
    assert [w.workload.axes for w in parsed["workloads"]][1] == {"M": 512, "N": 1536, "K": 640}
    assert parsed["solutions"][0].spec.language == "triton"
    ((_, back),) = import_dataset(tmp_path / "out", tmp_path / "ws")
    p = back.problem
    assert p.params == ("M", "N", "K") and len(p.workloads) == 4  # paper is too big to count
    assert any("cannot be counted" in n for n in back.notes)
    sizes = p.workload("cpu").sizes
    assert dict(sizes) == dict(matmul.workload("tiny").sizes)
    arrays = [a.astype(np.float64) for a in p.generate(sizes, 2)]
    np.testing.assert_allclose(p.reference(*arrays)[0], arrays[0] @ arrays[1], rtol=1e-12)


@pytest.mark.skipif(not FIB_PYTHON.exists(), reason="no flashinfer-bench venv at /tmp/fibvenv")
def test_flashinfer_bench_loads_the_export(gemm, tmp_path: Path) -> None:
    check = subprocess.run(
        [str(FIB_PYTHON), "-c", "import flashinfer_bench.data"], capture_output=True, timeout=120
    )
    if check.returncode != 0:
        pytest.skip("flashinfer_bench.data does not import in /tmp/fibvenv")
    kernel = Kernel("void kernel(const float *A, const float *B, float *C) {}", "cpu", "k.c")
    evals = [
        evaluation(gemm, kernel, "cpu", "PASSED", latency_s=1e-3, max_rel_err=1e-8),
        evaluation(gemm, kernel, "cpu", "INCORRECT"),
        evaluation(gemm, kernel, "cpu", "COMPILE_ERROR"),
    ]
    export_problem(gemm, tmp_path, solution=kernel, evaluations=evals, hardware=HW)
    export_problem(load_problem("matmul"), tmp_path)
    script = textwrap.dedent(
        """
        import json, sys
        from flashinfer_bench.data import TraceSet
        ts = TraceSet.from_path(sys.argv[1])
        print(json.dumps({
            "definitions": sorted(ts.definitions),
            "workloads": {k: len(v) for k, v in ts.workloads.items()},
            "solutions": {k: [s.name for s in v] for k, v in ts.solutions.items()},
            "traces": [t.evaluation.status.value for v in ts.traces.values() for t in v],
        }))
        """
    )
    run = subprocess.run(
        [str(FIB_PYTHON), "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["definitions"] == ["gemm_n48_k32", "matmul"]
    assert got["workloads"] == {"gemm_n48_k32": 4, "matmul": 4}
    assert got["solutions"] == {"gemm_n48_k32": [f"gemm_n48_k32_accelopt_cpu_{kernel.hash[:8]}"]}
    assert got["traces"] == ["PASSED", "INCORRECT_NUMERICAL", "COMPILE_ERROR"]
