"""A failed kernel's error in a table: its cell is cut at a word boundary with an ellipsis, and
the full error is printed once, under the table, only where the cell did not hold it all (issue
46, defect 17: "error cells are cut mid-word and printed twice")."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from accelopt.cli.cells import ELLIPSIS, cut_at_word, cut_errors, error_cell, error_summary, is_cut

LONG = (
    "the kernel wrote outside its outputs: out[4095] was changed although the kernel writes only "
    "y[0..4094]; relative error 3.2e-01 against the reference"
)


def test_a_long_line_is_cut_at_a_word_with_an_ellipsis() -> None:
    cut = cut_at_word(LONG, 60)
    assert cut == "the kernel wrote outside its outputs: out[4095] was changed…"
    assert len(cut) <= 60
    assert LONG.startswith(cut.removesuffix(ELLIPSIS))
    # a cut that falls on a space keeps the whole word before it
    assert cut_at_word("alpha beta gamma", 11) == "alpha beta…"
    # one word longer than the cell (a path) is cut inside it: nothing else would fit
    assert cut_at_word("/a/very/long/path/to/kernel.c", 10) == "/a/very/l…"
    assert cut_at_word("fits", 4) == "fits"


def test_the_summary_is_the_first_line_and_says_when_there_is_more() -> None:
    compiler = "kernel.c:2:40: error: 'j' undeclared\n    2 |     y[j] = x[i];\n      |       ^"
    assert error_summary(compiler) == f"kernel.c:2:40: error: 'j' undeclared {ELLIPSIS}"
    assert error_summary("INCORRECT: relative error 0.4") == "INCORRECT: relative error 0.4"
    assert error_summary(LONG, 60).endswith(f"changed{ELLIPSIS}")
    line = "word " * 23 + "ends"  # 119 characters: no room for " …" in a cell of 120
    summary = error_summary(f"{line}\nmore", 120)
    assert summary == "word " * 22 + "word" + ELLIPSIS


def test_the_cell_is_verbatim_text_not_markup() -> None:
    cell = error_cell("y[j] *= inv; [bold]x[/bold]")
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(cell)
    assert out.getvalue().strip() == "y[j] *= inv; [bold]x[/bold]"


def test_the_full_error_is_printed_once_and_only_where_the_cell_cut_it() -> None:
    short = "RUNTIME_ERROR: the kernel crashed (SIGSEGV)"
    assert not is_cut(short) and not is_cut(short + "\n")
    assert is_cut(LONG, 60) and is_cut("a\nb")
    below = cut_errors([("silu / expert", short), ("matmul / mine", LONG), ("x / y", "")], 60)
    assert below == [f"matmul / mine: {LONG}"]


# -- the tables (cli/output.py's evaluations_table, eval in cli/app.py) ---------------------------
INDEXED = """void kernel(const float *x, float *y) {
    for (int i = 0; i < N; i++) y[j] = x[i];
}
"""


def test_eval_prints_a_compile_error_once_under_a_cell_cut_at_a_word(run_cli, tmp_path: Path):
    kernel = tmp_path / "indexed.c"
    kernel.write_text(INDEXED)
    out = run_cli("eval", "silu", kernel, "--workload", "tiny", "--workspace", tmp_path / "ws")
    assert out.returncode == 0, out.stderr
    assert "COMPILE_ERROR" in out.stdout
    assert out.stdout.count("y[j] = x[i];") == 1, out.stdout  # under the table, once
    assert ELLIPSIS in out.stdout  # the cell: the first line, and a mark that there is more


def test_the_evaluations_table_cuts_a_long_error_at_a_word(make_evaluation) -> None:
    from accelopt.cli.output import evaluations_table

    failed = make_evaluation(status="INCORRECT", latency_s=None, error=LONG)
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(evaluations_table([failed], "t"))
    shown = out.getvalue()
    assert error_summary(LONG) in shown
    assert LONG[:120] not in shown  # not cut inside a word
