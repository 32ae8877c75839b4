"""Importing FlashInfer Trace definitions: names, sizes and #defines, arguments, workloads and the
cpu alias, counted costs, the float64 reference against NumPy, the generator, refusals."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from accelopt.interop.flashinfer.export import export_problem
from accelopt.problems.flashinfer import (
    Imported,
    ImportRefused,
    import_dataset,
    load_imported,
    problem_name,
)
from accelopt.problems.kernelbench.source import is_c_name
from accelopt.problems.loader import load_problem_dir
from accelopt.problems.records import Problem

pytest.importorskip("torch")

DATASET = Path(__file__).parent / "flashinfer_dataset"
GEMM_UUIDS = [f"a1b2c3d4-0000-4000-8000-0000000000{m:02d}" for m in (24, 5, 64, 9)]
HELD_OUT = "a1b2c3d4-0000-4000-8000-000000000064"  # M = 64: not the cpu workload
RMS_UUIDS = [f"5b0e2c1a-1111-4c3e-9a51-0000000000{b:02d}" for b in (7, 3, 16)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fi-workspace") / "problems"


@pytest.fixture(scope="module")
def results(root: Path) -> dict[str, Imported | ImportRefused]:
    return dict(import_dataset(DATASET, root, reserved_names=("matmul",)))


@pytest.fixture(scope="module")
def gemm(results) -> Problem:
    return results["gemm_n48_k32"].problem


@pytest.fixture(scope="module")
def rms(results) -> Problem:
    return results["rmsnorm_h64"].problem


def test_one_entry_per_definition(results, root: Path) -> None:
    assert sorted(results) == ["gemm_n48_k32", "rmsnorm_bf16_h64", "rmsnorm_eps_h64", "rmsnorm_h64"]
    assert isinstance(results["gemm_n48_k32"], Imported)
    assert isinstance(results["rmsnorm_h64"], Imported)
    assert results["gemm_n48_k32"].notes == ()
    assert sorted(p.name for p in root.iterdir()) == ["gemm_n48_k32", "rmsnorm_h64"]


def test_names_params_and_arguments(gemm: Problem, rms: Problem) -> None:
    assert gemm.name == "gemm_n48_k32" and rms.name == "rmsnorm_h64"
    assert gemm.params == ("M", "N", "K")  # every axis, const or var, is a #define
    assert rms.params == ("batch_size", "hidden_size")
    assert all(is_c_name(p) for p in (*gemm.params, *rms.params))
    assert [(t.name, t.shape) for t in gemm.inputs] == [("A", ("M", "K")), ("B", ("N", "K"))]
    assert [(t.name, t.shape) for t in gemm.outputs] == [("C", ("M", "N"))]
    assert [t.name for t in (*rms.inputs, *rms.outputs)] == ["input", "weight", "output"]
    assert gemm.requires == ("torch",) and gemm.tolerance == 1e-4
    assert "run(A, B)" in gemm.reference_text and "A[M, K] (input)" in gemm.reference_text


def test_problem_name() -> None:
    assert problem_name("GEMM-n4096_k4096") == "gemm_n4096_k4096"
    assert problem_name("4bit gemm") == "fi_4bit_gemm"


def test_workloads_and_the_cpu_alias(gemm: Problem, rms: Problem, root: Path) -> None:
    assert list(gemm.workloads) == [*GEMM_UUIDS, "cpu"]
    assert list(rms.workloads) == [*RMS_UUIDS, "cpu"]
    assert [gemm.workloads[u].sizes["M"] for u in GEMM_UUIDS] == [24, 5, 64, 9]
    assert all(w.sizes["N"] == 48 and w.sizes["K"] == 32 for w in gemm.workloads.values())
    assert all(w.sizes["hidden_size"] == 64 for w in rms.workloads.values())
    assert gemm.workload("cpu").sizes == gemm.workloads[GEMM_UUIDS[1]].sizes  # M = 5: smallest
    assert rms.workload("cpu").sizes["batch_size"] == 3
    meta = json.loads((root / "gemm_n48_k32" / "import.json").read_text())
    assert meta["aliases"] == {"cpu": GEMM_UUIDS[1]} and "cpu" not in meta["workloads"]
    shapes = [gemm.output_shapes(gemm.workloads[u].sizes) for u in GEMM_UUIDS]
    assert shapes == [[(24, 48)], [(5, 48)], [(64, 48)], [(9, 48)]]


def test_counted_costs(gemm: Problem, rms: Problem) -> None:
    for w in gemm.workloads.values():
        s = w.sizes
        cost = gemm.cost.at(s)
        assert cost.matmul_flops == 2 * s["M"] * s["N"] * s["K"]
        assert cost.bytes == 4 * (s["M"] * s["K"] + s["N"] * s["K"] + s["M"] * s["N"])
    cost = rms.cost.at(rms.workload("cpu").sizes)
    assert cost.matmul_flops == 0 and cost.vector_flops >= 3 * 64
    assert "aten.mm" in gemm.cost_notes["matmul_flops"]
    with pytest.raises(ValueError, match="counted costs"):
        gemm.cost.at({"M": 1000, "N": 48, "K": 32})


def test_reference_against_numpy_on_a_held_out_workload(gemm: Problem, rms: Problem) -> None:
    a, b = (x.astype(np.float64) for x in gemm.generate(gemm.workloads[HELD_OUT].sizes, 11))
    (c,) = gemm.reference(a, b)
    assert c.dtype == np.float64 and c.shape == (64, 48)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-12)
    x, w = (v.astype(np.float64) for v in rms.generate(rms.workloads[RMS_UUIDS[2]].sizes, 5))
    (y,) = rms.reference(x, w)
    want = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, want, rtol=1e-12)
    (y32,) = rms.reference(x.astype(np.float32), w.astype(np.float32))
    assert y32.dtype == np.float32


def test_generator(gemm: Problem) -> None:
    sizes = gemm.workloads[GEMM_UUIDS[0]].sizes
    a0, b0 = gemm.generate(sizes, 0)
    a1, _ = gemm.generate(sizes, 1)
    assert a0.shape == (24, 32) and b0.shape == (48, 32) and a0.dtype == np.float32
    assert not np.array_equal(a0, a1)
    assert np.array_equal(a0, gemm.generate(sizes, 0)[0])
    assert np.count_nonzero(a0) == a0.size and 0.5 < a0.std() < 1.5


def test_the_folder_loads_and_takes_overrides(root: Path) -> None:
    folder = root / "gemm_n48_k32"
    kept = json.loads((DATASET / "definitions/gemm/gemm_n48_k32.json").read_text())
    assert json.loads((folder / "definition.json").read_text()) == kept
    original = (DATASET / "workloads/gemm/gemm_n48_k32.jsonl").read_text()
    assert (folder / "workloads.jsonl").read_text() == original
    problem = load_problem_dir(folder)
    assert problem.origin == "workspace" and problem.fingerprint
    assert list(problem.workloads) == [*GEMM_UUIDS, "cpu"]
    custom = load_imported(folder, bytes=lambda s: 7.0, tolerance=1e-3)
    assert custom.cost.bytes({"M": 1, "N": 2, "K": 3}) == 7.0
    assert custom.tolerance == 1e-3 and custom.cost_notes["bytes"] == "set in problem.py"
    with pytest.raises(TypeError, match="unknown keyword"):
        load_imported(folder, flops=1)


def test_refusals_say_why_and_leave_nothing(results, root: Path) -> None:
    bf16 = results["rmsnorm_bf16_h64"]
    assert isinstance(bf16, ImportRefused)
    assert "bfloat16" in bf16.reason and "float32 only" in bf16.reason
    scalar = results["rmsnorm_eps_h64"]
    assert isinstance(scalar, ImportRefused)
    assert "scalar" in scalar.reason and "cannot pass yet" in scalar.reason
    assert not any(p.name.startswith(".") for p in root.iterdir())


def test_existing_reserved_and_unknown_names(tmp_path: Path) -> None:
    (tmp_path / "gemm_n48_k32").mkdir()
    got = dict(
        import_dataset(
            DATASET,
            tmp_path,
            definitions=["gemm_n48_k32", "rmsnorm_h64", "nope"],
            reserved_names=("rmsnorm_h64",),
        )
    )
    assert list(got) == ["gemm_n48_k32", "rmsnorm_h64", "nope"]
    assert "exists" in got["gemm_n48_k32"].reason
    assert "suite problem" in got["rmsnorm_h64"].reason
    assert "no definition named nope" in got["nope"].reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemm_n48_k32"]


def _dataset_copy(tmp_path: Path, lines: list[dict]) -> Path:
    data = tmp_path / "dataset"
    (data / "definitions").mkdir(parents=True)
    (data / "workloads").mkdir()
    shutil.copy(DATASET / "definitions/gemm/gemm_n48_k32.json", data / "definitions")
    text = "".join(
        json.dumps({"definition": "gemm_n48_k32", "workload": w, "solution": None}) + "\n"
        for w in lines
    )
    (data / "workloads" / "gemm.jsonl").write_text(text)
    return data


R = {"type": "random"}


def test_workloads_left_out_with_a_note(tmp_path: Path) -> None:
    st = {"type": "safetensors", "path": "blob/a.safetensors", "tensor_key": "A"}
    data = _dataset_copy(
        tmp_path,
        [
            {"uuid": "ok", "axes": {"M": 4}, "inputs": {"A": R, "B": R}},
            {"uuid": "no-m", "axes": {}, "inputs": {"A": R, "B": R}},
            {"uuid": "bad-n", "axes": {"M": 4, "N": 3}, "inputs": {"A": R, "B": R}},
            {"uuid": "zero", "axes": {"M": 0}, "inputs": {"A": R, "B": R}},
            {"uuid": "file", "axes": {"M": 2}, "inputs": {"A": st, "B": R}},
        ],
    )
    (_, done), *_ = import_dataset(data, tmp_path / "ws")
    assert isinstance(done, Imported)
    assert list(done.problem.workloads) == ["ok", "cpu"]
    text = " | ".join(done.notes)
    assert "no-m" in text and "no value for axes M" in text
    assert "bad-n" in text and "other values for const axes N" in text
    assert "zero" in text and "sets M to 0" in text
    assert "file" in text or "safetensors" in text  # missing file, or no package


def test_a_scalar_workload_input_refuses_the_definition(tmp_path: Path) -> None:
    scalar = {"type": "scalar", "value": 1.0}
    data = _dataset_copy(tmp_path, [{"uuid": "s", "axes": {"M": 4}, "inputs": {"A": scalar}}])
    ((_, refused),) = import_dataset(data, tmp_path / "ws")
    assert isinstance(refused, ImportRefused)
    assert "scalar inputs the contract cannot pass yet" in refused.reason
    assert not (tmp_path / "ws" / "gemm_n48_k32").exists()


def _safetensors_file(path: Path, key: str, array: np.ndarray) -> None:
    """A .safetensors file, written by hand (8-byte header size, JSON header, raw data)."""
    header = {key: {"dtype": "F32", "shape": list(array.shape), "data_offsets": [0, array.nbytes]}}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + array.astype("<f4").tobytes())


def test_safetensors_inputs_are_read(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    st = {"type": "safetensors", "path": "blob/a.safetensors", "tensor_key": "A"}
    data = _dataset_copy(tmp_path, [{"uuid": "f", "axes": {"M": 2}, "inputs": {"A": st, "B": R}}])
    a = np.arange(64, dtype=np.float32).reshape(2, 32)
    _safetensors_file(data / "blob" / "a.safetensors", "A", a)
    ((_, done),) = import_dataset(data, tmp_path / "ws")
    assert isinstance(done, Imported), done
    sizes = done.problem.workload("f").sizes
    assert np.array_equal(done.problem.generate(sizes, 3)[0], a)
    stored = done.directory / "data" / "blob" / "a.safetensors"
    assert stored.read_bytes() == (data / "blob" / "a.safetensors").read_bytes()
    assert "safetensors" in done.problem.requires
    files = export_problem(done.problem, tmp_path / "out")  # the file goes back where it was
    assert (tmp_path / "out" / "blob" / "a.safetensors").read_bytes() == stored.read_bytes()
    assert len(files) == 3


def test_a_reference_that_needs_a_gpu_is_refused(tmp_path: Path) -> None:
    data = _dataset_copy(tmp_path, [{"uuid": "g", "axes": {"M": 4}, "inputs": {"A": R, "B": R}}])
    path = data / "definitions" / "gemm_n48_k32.json"
    definition = json.loads(path.read_text())
    definition["reference"] = (
        "import torch\n\ndef run(A, B):\n    return torch.matmul(A.to('cuda'), B.T.to('cuda'))\n"
    )
    path.write_text(json.dumps(definition))
    ((_, refused),) = import_dataset(data, tmp_path / "ws")
    assert isinstance(refused, ImportRefused) and "needs a GPU" in refused.reason
    assert not (tmp_path / "ws").exists() or not any((tmp_path / "ws").iterdir())


def test_run_outputs_follow_the_documented_convention() -> None:
    from accelopt.problems.flashinfer.imported import output_tensors

    assert output_tensors("t", ["C"]) == ["t"]
    assert output_tensors(("a", "b"), ["x", "y"]) == ["a", "b"]
    assert output_tensors({"y": 2, "x": 1}, ["x", "y"]) == [1, 2]
    with pytest.raises(TypeError, match="2 outputs"):
        output_tensors("t", ["x", "y"])
