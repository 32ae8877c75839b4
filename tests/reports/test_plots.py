"""The charts as inline SVG: no XML prolog or namespaces, ids unique per chart on one page."""

from __future__ import annotations

import re

from accelopt.reports import plots

DOC = (
    '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg xmlns:xlink="http://www.w3.org/1999/xlink" '
    'width="10pt" height="5pt" viewBox="0 0 10 5" xmlns="http://www.w3.org/2000/svg">'
    "<metadata><rdf:RDF/></metadata><defs><style>*{stroke-linejoin: round}</style>"
    '<path id="m1" d="M 0 0"/><clipPath id="c1"/></defs>'
    '<use xlink:href="#m1" style="fill: #ffffff"/><g clip-path="url(#c1)"/></svg>'
)


def test_inline_svg_drops_the_prolog_and_prefixes_ids():
    svg = plots.inline_svg(DOC, "p9", "a <label>")
    assert svg.startswith("<svg") and "xmlns" not in svg and "metadata" not in svg
    assert 'width="' not in svg and 'viewBox="0 0 10 5"' in svg
    assert 'aria-label="a &lt;label&gt;"' in svg and 'class="plot"' in svg
    assert 'id="p9-m1"' in svg and 'xlink:href="#p9-m1"' in svg and "url(#p9-c1)" in svg
    assert "#ffffff" in svg  # colours are not ids
    assert "svg.plot *{stroke-linejoin" in svg  # the chart's style stays inside charts


def test_two_charts_share_no_id():
    a = plots.progress_plot([plots.CandidatePoint(0, 0.2, "PASSED")], [(0, 0.2)])
    b = plots.progress_plot([plots.CandidatePoint(1, None, "CRASH")], [(0, 0.1), (1, 0.1)])
    ids_a = set(re.findall(r'\sid="([^"]+)"', a))
    ids_b = set(re.findall(r'\sid="([^"]+)"', b))
    assert ids_a and ids_b and not ids_a & ids_b
    for ref in re.findall(r'href="#([^"]+)"', a):
        assert ref in ids_a


def test_charts_without_data_say_so():
    assert "no evaluated kernels" in plots.progress_plot([], [])
    assert "no timed kernels" in plots.kind_bars(["silu"], {"baseline": [None]})
    assert "no timed kernels" in plots.roofline_chart([], 5e11, 2e11, 5e10)
    assert "no iterations recorded" in plots.compare_plot([plots.Curve("r", ())], "iteration")
    assert "<text" in plots.kind_bars(["silu"], {"baseline": [0.5]})  # text stays text
