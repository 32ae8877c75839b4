"""Importing KernelBench files: names, arguments, sizes, workloads, costs, the float64 reference
against NumPy, the generator, and the generated problem folder."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelopt.problems.kernelbench import (
    ImportRefused,
    default_name,
    import_dir,
    import_file,
    load_imported,
)
from accelopt.problems.records import Problem

FILES = Path(__file__).parent / "kernelbench_files"

pytest.importorskip("torch")


def rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kb-workspace")


@pytest.fixture(scope="module")
def imported(ws: Path) -> dict[str, Problem]:
    """Every good fixture imported with its own sizes."""
    return {p.stem: import_file(p, ws).problem for p in sorted(FILES.glob("*.py"))}


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = w.shape[2]
    length = x.shape[2] - k + 1
    windows = np.stack([x[:, :, i : i + length] for i in range(k)], axis=-1)  # B, C, L, K
    return np.einsum("bclk,ock->bol", windows, w) + b[None, :, None]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


NUMPY = {
    "1_ReLU": lambda x: (np.maximum(x, 0),),
    "2_Sum_keepdim": lambda x: (x.sum(axis=1, keepdims=True),),
    "3_Softmax": lambda x: (softmax(x),),
    "4_Square_matmul_": lambda a, b: (a @ b,),
    "5_LayerNorm": lambda x, w, b: (layer_norm(x, w, b, (1, 2, 3)),),
    "6_Tuple_output": lambda a, b: (a + b, a * b, a.max(axis=1)),
    "7_conv1d": lambda x, w, b: (conv1d(x, w, b),),
    "8_BatchNorm": lambda x, w, b, rm, rv: (
        layer_norm(x, w[None, :, None, None], b[None, :, None, None], (0, 2, 3)),
    ),
    "9_Causal_mask": lambda x, mask: (np.where(mask == 0, 0.0, x),),
}


def check_reference(stem: str, problem: Problem, workload: str = "cpu", seed: int = 3) -> None:
    sizes = problem.workload(workload).sizes
    arrays = problem.generate(sizes, seed)
    assert [a.shape for a in arrays] == [t.dims(sizes) for t in problem.inputs]
    assert all(a.dtype == np.float32 for a in arrays)
    got = problem.reference(*(a.astype(np.float64) for a in arrays))
    want = NUMPY[stem](*(a.astype(np.float64) for a in arrays))
    assert [g.shape for g in got] == problem.output_shapes(sizes)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float64
        assert rel_l2(g, w) < 1e-10
    as32 = problem.reference(*arrays)
    assert all(g.dtype == np.float32 for g in as32)
    assert max(rel_l2(g.astype(np.float64), w) for g, w in zip(as32, want, strict=True)) < 1e-4


@pytest.mark.parametrize("stem", sorted(NUMPY))
def test_reference_matches_numpy(imported: dict[str, Problem], stem: str) -> None:
    check_reference(stem, imported[stem])


def test_default_name() -> None:
    assert default_name(Path("19_ReLU.py")) == "kb_19_relu"
    assert default_name(Path("a/1_Square_matrix_multiplication_.py")) == (
        "kb_1_square_matrix_multiplication"
    )
    assert default_name(Path("75_conv__x--Y.py")) == "kb_75_conv_x_y"


def test_relu_problem(imported: dict[str, Problem], ws: Path) -> None:
    p = imported["1_ReLU"]
    assert p.name == "kb_1_relu"
    assert p.directory == ws / "kb_1_relu"
    assert p.description == "KernelBench 1_ReLU.py: Simple model that performs a ReLU activation."
    assert p.params == ("batch_size", "dim")
    assert [(t.name, t.shape) for t in p.inputs] == [("x", ("batch_size", "dim"))]
    assert [(t.name, t.shape) for t in p.outputs] == [("out", ("batch_size", "dim"))]
    assert {w: dict(v.sizes) for w, v in p.workloads.items()} == {
        "source": {"batch_size": 16, "dim": 384},
        "cpu": {"batch_size": 16, "dim": 384},
    }
    assert p.tolerance == 1e-4 and p.requires == ("torch",)
    cost = p.cost.at(p.workload("cpu").sizes)
    assert (cost.matmul_flops, cost.vector_flops, cost.bytes) == (0, 16 * 384, 8 * 16 * 384)
    assert p.cost_notes["vector_flops"].startswith("one per output element of aten.relu x1")
    assert "lower bound" in p.cost_notes["vector_flops"]
    assert p.cost_notes["bytes"] == "inputs, parameters and outputs read or written once (float32)"
    with pytest.raises(ValueError, match="counted costs"):
        p.cost.at({"batch_size": 3, "dim": 5})


def test_folder_contents(imported: dict[str, Problem], ws: Path) -> None:
    folder = ws / "kb_1_relu"
    assert sorted(f.name for f in folder.iterdir()) == ["import.json", "model.py", "problem.py"]
    assert (folder / "model.py").read_bytes() == (FILES / "1_ReLU.py").read_bytes()
    meta = json.loads((folder / "import.json").read_text())
    assert meta["file"] == "1_ReLU.py" and meta["constants"] == {"batch_size": 16, "dim": 384}
    assert meta["sets"] == {} and meta["tolerance"] == 1e-4 and meta["torch"] and meta["date"]
    assert meta["workloads"]["cpu"]["costs"]["vector_flops"] == 16 * 384
    assert meta["arguments"][0]["origin"] == "get_inputs()[0], forward's x"
    text = (folder / "problem.py").read_text()
    assert "imported from KernelBench file 1_ReLU.py by `accelopt problem import" in text
    assert "Edit the keyword arguments" in text
    problem = runpy.run_path(str(folder / "problem.py"))["PROBLEM"]
    assert problem.name == "kb_1_relu" and problem.params == ("batch_size", "dim")
    assert not [p for p in ws.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_keepdim_axis_is_a_literal(imported: dict[str, Problem]) -> None:
    p = imported["2_Sum_keepdim"]
    assert p.params == ("batch_size", "dim1", "dim2", "reduce_dim")
    assert p.inputs[0].shape == ("batch_size", "dim1", "dim2")
    assert p.outputs[0].shape == ("batch_size", "1", "dim2")
    assert "aten.sum x1" in p.cost_notes["vector_flops"]


def test_matmul_flops_and_names(ws: Path) -> None:
    imp = import_file(FILES / "4_Square_matmul_.py", ws, name="mm_set", sets={"N": 32})
    p = imp.problem
    assert [(t.name, t.shape) for t in p.inputs] == [("A", ("N", "N")), ("B", ("N", "N"))]
    assert [(t.name, t.shape) for t in p.outputs] == [("out", ("N", "N"))]
    assert {w: v.sizes["N"] for w, v in p.workloads.items()} == {"source": 64, "cpu": 32}
    for workload in p.workloads.values():
        n = workload.sizes["N"]
        assert p.cost.at(workload.sizes).matmul_flops == 2 * n**3
        assert p.cost.at(workload.sizes).bytes == 3 * 4 * n * n
    assert p.cost_notes["matmul_flops"] == "torch FLOP counter: aten.mm x1"
    check_reference("4_Square_matmul_", p, "source")
    check_reference("4_Square_matmul_", p, "cpu")


def test_set_gives_two_workloads_that_the_reference_recognizes(ws: Path) -> None:
    p = import_file(FILES / "1_ReLU.py", ws, name="relu_set", sets={"dim": 128}).problem
    assert dict(p.workload("source").sizes) == {"batch_size": 16, "dim": 384}
    assert dict(p.workload("cpu").sizes) == {"batch_size": 16, "dim": 128}
    assert p.cost.at(p.workload("source").sizes).vector_flops == 16 * 384
    assert p.cost.at(p.workload("cpu").sizes).vector_flops == 16 * 128
    check_reference("1_ReLU", p, "source")
    check_reference("1_ReLU", p, "cpu")
    with pytest.raises(ValueError, match="no workload"):
        p.reference(np.zeros((3, 5)))
    meta = json.loads((p.directory / "import.json").read_text())
    assert meta["sets"] == {"dim": 128}


def test_same_input_shapes_keep_only_cpu(ws: Path) -> None:
    imp = import_file(FILES / "2_Sum_keepdim.py", ws, name="sum_dim2", sets={"reduce_dim": 2})
    p = imp.problem
    assert list(p.workloads) == ["cpu"]
    assert p.outputs[0].shape == ("batch_size", "dim1", "1")
    assert any("source is left out" in n for n in imp.notes)
    got = p.reference(*(a.astype(np.float64) for a in p.generate(p.workload("cpu").sizes, 0)))
    assert got[0].shape == (8, 48, 1)


def test_derived_size_parameter(ws: Path) -> None:
    p = import_file(FILES / "7_conv1d.py", ws, name="conv_set", sets={"length": 32}).problem
    names = [t.name for t in (*p.inputs, *p.outputs)]
    assert names == ["x", "conv1d_weight", "conv1d_bias", "out"]
    assert p.inputs[1].shape == ("out_channels", "in_channels", "kernel_size")
    assert p.outputs[0].shape == ("batch_size", "out_channels", "out_d2")
    assert p.params[-1] == "out_d2" and "bias" not in p.params  # a bool is no size
    assert {w: v.sizes["out_d2"] for w, v in p.workloads.items()} == {"source": 62, "cpu": 30}
    for w in p.workloads.values():
        s = w.sizes
        flops = 2 * s["batch_size"] * s["out_channels"] * s["out_d2"] * s["in_channels"] * 3
        assert p.cost.at(s).matmul_flops == flops
    check_reference("7_conv1d", p, "source")
    check_reference("7_conv1d", p, "cpu")


def test_parameters_are_arguments_and_generated_off_their_init(
    imported: dict[str, Problem],
) -> None:
    p = imported["5_LayerNorm"]
    assert [t.name for t in (*p.inputs, *p.outputs)] == ["x", "ln_weight", "ln_bias", "out"]
    assert p.inputs[0].shape == ("batch_size", "features", "dim1", "dim2")
    assert p.inputs[1].shape == ("features", "dim1", "dim2")
    sizes = p.workload("cpu").sizes
    one, two = p.generate(sizes, 1), p.generate(sizes, 2)
    assert not np.allclose(one[1], 1) and not np.allclose(one[2], 0)
    assert np.all(one[1] > 0)  # an all-positive weight stays positive
    assert not np.array_equal(one[1], two[1]) and not np.array_equal(one[0], two[0])
    assert all(np.array_equal(a, b) for a, b in zip(one, p.generate(sizes, 1), strict=True))


def test_integer_buffers_are_not_arguments(imported: dict[str, Problem]) -> None:
    p = imported["8_BatchNorm"]
    names = [t.name for t in p.inputs]
    assert names == ["x", "bn_weight", "bn_bias", "bn_running_mean", "bn_running_var"]
    assert all(t.shape == ("features",) for t in p.inputs[1:])
    arrays = p.generate(p.workload("cpu").sizes, 5)
    assert np.all(arrays[4] > 0) and not np.allclose(arrays[4], 1)
    assert "num_batches_tracked" not in p.cost_notes["vector_flops"]
    assert "aten.add_" not in p.cost_notes["vector_flops"]


def test_a_mask_buffer_is_kept(imported: dict[str, Problem]) -> None:
    p = imported["9_Causal_mask"]
    assert [(t.name, t.shape) for t in p.inputs] == [
        ("x", ("batch_size", "seq_len", "seq_len")),
        ("bias", ("seq_len", "seq_len")),
    ]
    mask = p.generate(p.workload("cpu").sizes, 4)[1]
    assert np.array_equal(mask, np.tril(np.ones((12, 12), np.float32)))


def test_tuple_output_and_star_args(imported: dict[str, Problem]) -> None:
    p = imported["6_Tuple_output"]
    assert [t.name for t in p.inputs] == ["in0", "in1"]
    assert [(t.name, t.shape) for t in p.outputs] == [
        ("out0", ("rows", "cols")),
        ("out1", ("rows", "cols")),
        ("out2", ("rows",)),
    ]
    assert p.cost.at(p.workload("cpu").sizes).vector_flops == 2 * 12 * 20 + 12


def test_load_imported_overrides(imported: dict[str, Problem], ws: Path) -> None:
    folder = ws / "kb_3_softmax"
    p = load_imported(folder, bytes=lambda s: 8.0 * s["batch_size"] * s["dim"], tolerance=1e-3)
    assert p.tolerance == 1e-3
    assert p.cost_notes["bytes"] == "set in problem.py"
    assert p.cost_notes["vector_flops"].startswith("one per output element of aten._softmax")
    cost = p.cost.at(p.workload("cpu").sizes)
    assert cost.bytes == 8.0 * 16 * 256 and cost.vector_flops == 16 * 256
    assert p.cost.bytes({"batch_size": 1, "dim": 2}) == 16.0  # no lookup once set
    with pytest.raises(TypeError, match="unknown keyword"):
        load_imported(folder, flops=lambda s: 1)


def test_counted_on_real_tensors_when_meta_fails(tmp_path: Path) -> None:
    src = (FILES / "1_ReLU.py").read_text()
    src = src.replace("return torch.relu(x)", "return torch.relu(x) * x.abs().max().item()")
    (tmp_path / "item.py").write_text(src)
    imp = import_file(tmp_path / "item.py", tmp_path / "ws", sets={"dim": 64})
    assert any("counted on real tensors" in n for n in imp.notes)
    p = imp.problem
    assert set(p.workloads) == {"source", "cpu"}
    assert p.cost.at(p.workload("cpu").sizes).vector_flops >= 16 * 64
    arrays = p.generate(p.workload("cpu").sizes, 0)
    x = arrays[0].astype(np.float64)
    assert rel_l2(p.reference(x)[0], np.maximum(x, 0) * np.abs(x).max()) < 1e-12


def test_arguments_never_take_a_size_parameter_name(tmp_path: Path) -> None:
    src = (FILES / "1_ReLU.py").read_text().replace("dim = 384", "dim = 384\nx = 3\nout = 2")
    (tmp_path / "clash.py").write_text(src)
    imp = import_file(tmp_path / "clash.py", tmp_path / "ws")
    p = imp.problem
    assert p.params == ("batch_size", "dim", "x", "out")
    assert [t.name for t in (*p.inputs, *p.outputs)] == ["x_arg", "out_arg"]
    assert any("'x' is the kernel argument 'x_arg'" in n for n in imp.notes)


def test_import_dir_applies_sets_to_files_that_define_them(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    for name in ("4_Square_matmul_.py", "1_ReLU.py"):
        (folder / name).write_bytes((FILES / name).read_bytes())
    (folder / "10_bad.py").write_text("def broken(:\n")
    results = import_dir(folder, tmp_path / "ws", sets={"N": 16})
    assert [p.name for p, _ in results] == ["1_ReLU.py", "4_Square_matmul_.py", "10_bad.py"]
    relu, mm, bad = (r for _, r in results)
    assert not isinstance(relu, ImportRefused) and not isinstance(mm, ImportRefused)
    assert dict(relu.problem.workload("cpu").sizes) == {"batch_size": 16, "dim": 384}
    assert mm.problem.workload("cpu").sizes["N"] == 16
    assert isinstance(bad, ImportRefused) and "does not parse" in bad.reason
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == [
        "kb_1_relu",
        "kb_4_square_matmul",
    ]
    with pytest.raises(ImportRefused, match="--set nope"):
        import_dir(folder, tmp_path / "ws2", sets={"nope": 1})


def test_package_and_listing_need_no_torch(imported: dict[str, Problem], ws: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import accelopt.problems.kernelbench as kb\n"
        "assert 'torch' not in sys.modules, 'importing the package imported torch'\n"
        "sys.modules['torch'] = None\n"
        f"p = kb.load_imported(Path({str(ws / 'kb_1_relu')!r}))\n"
        "print(p.name, p.params, p.cost.at(p.workload('cpu').sizes).bytes)\n"
        "import numpy as np\n"
        "try:\n"
        "    p.reference(np.zeros((16, 384)))\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('refused:', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "kb_1_relu ('batch_size', 'dim') 49152.0" in out
    assert "refused:" in out and "install torch" in out


def test_an_all_zero_output_is_noted(tmp_path: Path) -> None:
    src = (FILES / "1_ReLU.py").read_text()
    src = src.replace(
        "return torch.relu(x)", "return torch.clamp(torch.minimum(x, x.abs() * 0), 0, 1)"
    )
    (tmp_path / "zeros.py").write_text(src)
    imp = import_file(tmp_path / "zeros.py", tmp_path / "ws")
    assert any("output 'out' is all zeros" in n for n in imp.notes)
