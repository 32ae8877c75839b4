"""`accelopt export` from the command line: the shipped matmul expert exported and called from a
fresh interpreter (at its workload's shape, at a new shape, with torch tensors, with a wrong
dtype), a kernel that fails refused in one sentence, and the options it needs."""

from __future__ import annotations

import json

from exported_calls import call_export


def test_export_the_shipped_expert_and_call_it(run_cli, tmp_path) -> None:
    folder = tmp_path / "matmul-[expert]"  # printed verbatim: [expert] is not markup
    out = run_cli("export", "matmul", "--kernel", "expert", "--workload", "small",
                  "--to", folder, "--workspace", tmp_path / "ws")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "small: PASSED" in out.stdout and f"exported to {folder}" in out.stdout
    # issue 46, defect 17: the export's C symbol is its own, and the command names it
    symbol = json.loads((folder / "manifest.json").read_text())["symbol"]
    assert symbol.startswith("matmul_") and f"C: {symbol}() in kernel.h" in out.stdout
    for name in (
        "kernel.c",
        "kernel.h",
        "build/small.so",
        "matmul_kernel.py",
        "reference.py",
        "EVIDENCE.json",
        "README.md",
        "manifest.json",
        "_accelopt/runtime.py",
        "_accelopt/runtime_build.py",
    ):
        assert (folder / name).is_file(), name
    readme = (folder / "README.md").read_text()
    assert "## Python" in readme and "## PyTorch" in readme and "## C and C++" in readme
    # issue 46, defect 17: a hand-written expert is not called LLM-written
    assert "It is a hand-written kernel shipped with accelopt" in readme
    assert "LLM-written" not in readme + (folder / "matmul_kernel.py").read_text()
    assert json.loads((folder / "manifest.json").read_text())["author"] == "shipped"
    call_export(folder, (64, 192, 80))


def test_a_failing_kernel_is_refused_in_one_sentence(run_cli, tmp_path) -> None:
    wrong = tmp_path / "zeros.c"
    wrong.write_text(
        "#include <string.h>\n"
        "void kernel(const float *lhs, const float *rhs, float *out) {\n"
        "    memset(out, 0, sizeof(float) * M * N);\n}\n"
    )
    out = run_cli("export", "matmul", "--kernel", wrong, "--workload", "tiny",
                  "--to", tmp_path / "out", "--workspace", tmp_path / "ws")  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not exported: the kernel did not pass on matmul/tiny: it is INCORRECT" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_export_needs_one_kernel_and_a_known_run(run_cli, tmp_path) -> None:
    ws = tmp_path / "ws"
    neither = run_cli("export", "matmul", "--to", tmp_path / "o", "--workspace", ws)
    assert neither.returncode == 2 and "give the kernel to export" in neither.stderr
    both = run_cli("export", "matmul", "--run", "r1", "--kernel", "expert", "--to",
                   tmp_path / "o", "--workspace", ws)  # fmt: skip
    assert both.returncode == 2 and "give the kernel to export" in both.stderr
    unknown = run_cli("export", "matmul", "--run", "nope", "--to", tmp_path / "o",
                      "--workspace", ws)  # fmt: skip
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr
