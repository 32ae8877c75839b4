"""Reports people look at: self-contained HTML pages with inline SVG plots.

``run_report``: one optimization run (``accelopt report RUN``); ``suite_report``: the suite table
with % of peak per kind and a roofline chart (``accelopt bench run --html FILE``); ``compare``:
several runs side by side (``accelopt runs compare``). Each module builds a plain data model
first (pure), then renders it through a Jinja2 template (``templates/``); ``plots`` draws the
charts with matplotlib (Agg) as SVG text that the page inlines.
"""
