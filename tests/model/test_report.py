"""The model report page, from a ModelResult built by hand."""

from __future__ import annotations

import math

import pytest

from accelopt.model.plots import OTHER, stacked_segments, time_bars
from accelopt.model.records import ModelResult, Share, Site, Speedup, Timed, Unmatched
from accelopt.model.report import amdahl, check_line, render_html

HOSTILE = "<script>alert(1)</script>"


def result() -> ModelResult:
    return ModelResult(
        model=f"models/{HOSTILE}.py",
        inputs=[[8, 512], [8, 512, 64]],
        sites=[
            Site(
                "s0",
                "matmul",
                {"M": 8, "N": 512, "K": 512},
                "swapped",
                kernel="run 3fa2c1d0e9ab",
                speedup=Speedup("kernel", "subgraph", 2.0, 1.8, 2.2),
            ),
            Site("s1", "softmax", {"N": 512}, "kept", reason="numerical check failed"),
        ],
        before=[
            Share(f"linear {HOSTILE}", 6.0, 0.6, "s0", "matmul"),
            Share("softmax", 2.0, 0.2, "s1", "softmax"),
            Share("aten.gelu", 2.0, 0.2),
        ],
        after=[
            Share(f"linear {HOSTILE}", 3.0, 0.43, "s0", "matmul"),
            Share("softmax", 2.0, 0.29, "s1", "softmax"),
            Share("aten.gelu", 2.0, 0.28),
        ],
        unmatched=[Unmatched("aten.gelu", 0.2, "describe a <b>gelu</b> problem")],
        timings=[
            Timed("eager", 10.0, 9.8, 10.3, 30),
            Timed("inductor", 8.0, 7.9, 8.2, 30),
            Timed("accelopt", 7.0, 6.9, 7.1, 30),
        ],
        speedups=[
            Speedup("accelopt", "eager", 1.43, 1.40, 1.46),
            Speedup("accelopt", "inductor", 1.14, 1.12, 1.16),
        ],
        check={"max_abs_err": 3e-6, "tolerance": 1e-4, "passed": True},
        notes=[f"note {HOSTILE}"],
    )


def test_amdahl_counts_only_swapped_sites():
    r = result()
    uncovered, bound = amdahl(r.before, {"s0"})
    assert uncovered == pytest.approx(0.4)
    assert bound == pytest.approx(2.5)
    assert amdahl(r.before, set()) == (pytest.approx(1.0), pytest.approx(1.0))
    assert amdahl(r.before, {"s0", "s1"})[1] == pytest.approx(1 / 0.2)


def test_amdahl_unattributed_time_is_uncovered_and_full_cover_is_unbounded():
    partial = [Share("a", 1.0, 0.5, "s0"), Share("b", 1.0, 0.3)]  # 20 % attributed to nothing
    assert amdahl(partial, {"s0"})[0] == pytest.approx(0.5)
    assert amdahl([Share("a", 1.0, 1.0, "s0")], {"s0"}) == (0.0, math.inf)


def test_check_line():
    assert check_line({}) == "outputs not checked against eager"
    line = check_line({"max_abs_err": 3e-6, "tolerance": 1e-4, "passed": False})
    assert "3.0e-06" in line and "1.0e-04" in line and line.endswith("FAILED")


def test_page_has_the_tables_the_plot_and_the_numbers():
    page = render_html(result())
    assert page.startswith("<!DOCTYPE html>")
    for section in ("end-to-end", "where-the-time-went", "sites", "unmatched", "notes"):
        assert f'id="{section}"' in page
    assert "torch.compile (Inductor)" in page
    assert "10.000 ms" in page and "7.000 ms" in page
    assert "1.43× (1.40–1.46)" in page and "1.14× (1.12–1.16)" in page
    assert "M=8, N=512, K=512" in page and "kept: numerical check failed" in page
    assert "run 3fa2c1d0e9ab" in page and "2.00× (1.80–2.20)" in page
    assert "60.0%" in page  # s0's share of eager time
    assert "max abs err 3.0e-06, tolerance 1.0e-04: passed" in page
    assert page.count("<svg") == 1 and 'class="plot"' in page
    assert "8×512" in page and "8×512×64" in page


def test_page_says_the_amdahl_bound():
    page = render_html(result())
    assert "cover 60.0 % of eager time" in page
    assert "at most 2.50× faster" in page


def test_page_escapes_what_the_model_named():
    page = render_html(result())
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>gelu</b>" not in page


def test_an_empty_result_renders():
    page = render_html(ModelResult(model="m.py", inputs=[]))
    assert "not timed" in page and "outputs not checked" in page and "<svg" in page


def test_segments_keep_the_top_labels_and_sum_the_rest():
    before = [Share(f"op{i}", float(10 - i), 0.0) for i in range(10)]
    after = [Share("op9", 20.0, 0.0), Share("new", 0.5, 0.0)]
    labels, (b, a) = stacked_segments([before, after], top=3)
    assert labels == ["op9", "op0", "op1", OTHER]
    assert b == [1.0, 10.0, 9.0, sum(range(2, 9))]
    assert a == [20.0, 0.0, 0.0, 0.5]
    assert sum(b) == pytest.approx(sum(s.ms for s in before))


def test_plot_is_inline_svg_with_escaped_labels():
    svg = time_bars([Share(HOSTILE, 1.0, 1.0)], [Share("_hidden $x$", 0.5, 1.0)])
    assert svg.startswith("<svg") and HOSTILE not in svg
    assert "hidden" in svg  # a leading underscore would drop it from the legend
