"""KernelBench files accelopt refuses, with one sentence naming why, leaving nothing behind; and
a file too big for this machine, refused without --fit and shrunk with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt.problems.kernelbench import ImportRefused, import_file
from accelopt.problems.kernelbench import importer as importer_module

FILES = Path(__file__).parent / "kernelbench_files"
REFUSED = FILES / "refused"

pytest.importorskip("torch")

SYNTAX_ERROR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x)
        return x


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("stem", "pattern"),
    [
        ("cross_entropy_int64", r"input 'targets' of .* is torch\.int64; .*float32 tensors only"),
        ("argmax_output", r"the output of argmax_output\.py is torch\.int64"),
        ("dropout", r"is random \(two float64 runs on the same inputs and parameters differ"),
        ("nonzero", r"shapes of nonzero\.py depend on the data \(output 0 is \(\d+,\)"),
        ("cuda", r"cuda\.py needs a GPU"),
        ("no_model", r"no_model\.py defines no Model class"),
    ],
)
def test_refused(tmp_path: Path, stem: str, pattern: str) -> None:
    with pytest.raises(ImportRefused, match=pattern) as info:
        import_file(REFUSED / f"{stem}.py", tmp_path)
    assert info.value.reason == str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_syntax_error(tmp_path: Path) -> None:
    # Written here: a file in the tree that does not parse would fail `ruff check`.
    (tmp_path / "syntax_error.py").write_text(SYNTAX_ERROR)
    with pytest.raises(ImportRefused, match=r"syntax_error\.py does not parse: .* at line 6"):
        import_file(tmp_path / "syntax_error.py", tmp_path / "ws")
    assert list(tmp_path.iterdir()) == [tmp_path / "syntax_error.py"]


def test_too_big_names_the_sizes_and_fit(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused) as info:
        import_file(REFUSED / "too_big.py", tmp_path)
    reason = info.value.reason
    assert "too big for this machine" in reason and "4.0 GiB" in reason
    assert "batch_size=4096, dim=131072" in reason and "--set" in reason and "--fit" in reason
    assert list(tmp_path.iterdir()) == []


def test_fit_halves_the_largest_sizes(tmp_path: Path) -> None:
    imp = import_file(REFUSED / "too_big.py", tmp_path, fit=True)
    p = imp.problem
    cpu = dict(p.workload("cpu").sizes)
    assert cpu == {"batch_size": 2048, "dim": 4096}  # dim halved first: the largest
    assert p.buffer_bytes(cpu) <= 64 << 20
    assert dict(p.workload("source").sizes) == {"batch_size": 4096, "dim": 131072}
    assert p.cost.at(p.workload("source").sizes).bytes == 8 * 4096 * 131072
    halved = "--fit halved dim from 131072 to 4096, batch_size from 4096 to 2048"
    assert any(halved in n for n in imp.notes)


def test_fit_leaves_a_workload_that_fits_alone(tmp_path: Path) -> None:
    imp = import_file(FILES / "1_ReLU.py", tmp_path, fit=True)
    assert dict(imp.problem.workload("cpu").sizes) == {"batch_size": 16, "dim": 384}
    assert imp.notes == ()


def test_name_refusals(tmp_path: Path) -> None:
    relu = FILES / "1_ReLU.py"
    with pytest.raises(ImportRefused, match="a suite problem is named kb_1_relu"):
        import_file(relu, tmp_path, reserved_names={"kb_1_relu"})
    with pytest.raises(ImportRefused, match="not a valid problem name"):
        import_file(relu, tmp_path, name="Bad-Name")
    with pytest.raises(ImportRefused, match=r"--set nope: 1_ReLU\.py has no integer constant"):
        import_file(relu, tmp_path, sets={"nope": 3})
    assert list(tmp_path.iterdir()) == []
    import_file(relu, tmp_path)
    with pytest.raises(ImportRefused) as info:
        import_file(relu, tmp_path)
    assert info.value.reason == (
        "a workspace problem named kb_1_relu exists: remove it with "
        "`accelopt problem remove kb_1_relu` or choose another --name"
    )


def test_constant_named_like_c(tmp_path: Path) -> None:
    src = (FILES / "1_ReLU.py").read_text().replace("dim = 384", "dim = 384\nexp = 2")
    (tmp_path / "exp.py").write_text(src)
    with pytest.raises(ImportRefused, match=r"constant exp of exp\.py cannot be a size parameter"):
        import_file(tmp_path / "exp.py", tmp_path / "ws")


def test_a_failure_while_writing_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(importer_module, "build_problem", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        import_file(FILES / "1_ReLU.py", tmp_path)
    assert list(tmp_path.iterdir()) == []
