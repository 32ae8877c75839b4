"""What the user reads is what happened: compiler output printed verbatim (``[j]`` is an index,
not markup), no sandbox warning where no kernel ran, a progress line that ends when the output is
not a terminal (issue 46, defects 8, 9 and 13)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from accelopt.cli.output import isolation_warnings
from accelopt.search.progress import Progress

INDEXED = """void kernel(const float *x, float *y) {
    for (int i = 0; i < N; i++) y[j] = x[i];
}
"""


def test_a_compile_error_keeps_its_indices_and_warns_of_no_sandbox(run_cli, tmp_path: Path):
    kernel = tmp_path / "indexed.c"
    kernel.write_text(INDEXED)
    out = run_cli("eval", "silu", kernel, "--workload", "tiny", "--workspace", tmp_path / "ws")
    assert out.returncode == 0, out.stderr
    assert "COMPILE_ERROR" in out.stdout
    assert out.stdout.count("y[j] = x[i];") == 1, out.stdout  # the full error, once
    assert "system call filter" not in out.stderr  # nothing ran, nothing ran unfiltered


def test_only_a_kernel_that_ran_unfiltered_is_warned_of(make_evaluation) -> None:
    built_only = make_evaluation(isolation={})
    unfiltered = make_evaluation(isolation={"seccomp": "0", "landlock": "7"})
    assert isolation_warnings([built_only]) == []
    [line] = isolation_warnings([unfiltered])
    assert "no system call filter" in line


def test_the_progress_line_ends_where_the_output_is_not_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    progress = Progress("silu", 2, console=console)
    progress.start()
    progress.evaluated = 3
    progress.refresh()
    progress.stop()
    console.print("run abc finished")
    assert out.getvalue().endswith("evaluated 3\nrun abc finished\n"), repr(out.getvalue())
