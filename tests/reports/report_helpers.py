"""Shared by the report tests: a small fake run written straight into a store (kernels over two
iterations, failures, lessons, LLM calls), fast evaluation settings, and an HTML parser that
collects what the assertions need. (Not in conftest: tests/search owns that module name.)"""

from __future__ import annotations

from html.parser import HTMLParser

from specs import make_spec

from accelopt.backends.status import Status
from accelopt.llm.records import LLMCall
from accelopt.memory.records import Experience, Lesson
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.records import IterationRecord, KernelRecord, RunRecord
from accelopt.store.store import Store

FAST_EVAL = EvalConfig(seeds=2, min_calls=5, min_time_s=0.02, workers=2)

SPEC = make_spec(
    name="cpu:report-test",
    matmul_rate=500e9,
    vector_rate=250e9,
    bandwidth=50e9,
    isa=("avx2", "fma"),
    provenance={"matmul_rate": "fma chains, 2026-01-01", "bandwidth": "triad, 2026-01-01"},
)
PEAK_S = 1e-3

BASE_SRC = (
    "void kernel(const float *a, float *o) {\n  for (int i = 0; i < N; i++) o[i] = a[i];\n}\n"
)


def _src(body: str) -> str:
    return f"void kernel(const float *a, float *o) {{\n  {body}\n}}\n"


# (hash, iteration, origin, parent, plan, source, status, latency_s, error)
KERNELS = [
    ("base", 0, "baseline", "", "", BASE_SRC, Status.PASSED, 4e-3, ""),
    ("k1", 1, "executor", "base", "Vectorize <the> loop & unroll", _src("/* simd */"),
     Status.PASSED, 2e-3, ""),
    ("k2", 1, "executor", "base", "Tile it", _src("/* broken"), Status.COMPILE_ERROR, None,
     "error: unterminated comment <here>"),
    ("k3", 1, "fixer", "base", "Tile it", _src("/* wrong */"), Status.INCORRECT, None,
     "rel. error 0.5 > 2e-05"),
    ("k4", 2, "executor", "k1", "Use OpenMP", _src("#pragma omp parallel for\n  /* simd */"),
     Status.PASSED, 1.25e-3, ""),
    ("k5", 2, "executor", "k1", "Prefetch", _src("/* prefetch */"), Status.PASSED, 2.5e-3, ""),
]  # fmt: skip


def _evaluation(kernel_hash: str, status: Status, latency: float | None, error: str):
    return Evaluation(
        problem="silu", workload="small", backend="cpu", kernel=kernel_hash,
        kernel_hash=kernel_hash, hardware=SPEC.key(), status=status, error=error,
        latency_s=latency, peak_s=PEAK_S, pct_of_peak=PEAK_S / latency if latency else None,
        bound="memory", tolerance=2e-5,
    )  # fmt: skip


def call(
    n: int, agent: str, cost: float | None, sample: int = 0, replayed: bool = False
) -> LLMCall:
    return LLMCall(
        id=f"c{n}", key=f"key{n}", agent=agent, model=f"{agent}-model", base_url="http://x/v1",
        messages=[{"role": "user", "content": "hi"}], params={}, reply="ok",
        tokens_in=100 * n, tokens_out=10 * n, cost_usd=cost, sample_index=sample,
        replayed=replayed,
    )  # fmt: skip


def make_fake_run(store: Store, run_id: str = "fakerun00001", strategy: str = "beam") -> RunRecord:
    """A finished two-iteration run: the best kernel (k4) is 3.2x the baseline at 80 % of peak."""
    models = {a: f"{a}-model" for a in ("planner", "executor", "fixer", "summarizer")}
    config = {"search": {"strategy": strategy, "beam": 2, "plans": 2, "samples": 1,
                         "iterations": 2}, "models": models}  # fmt: skip
    run = RunRecord(id=run_id, problem="silu", workload="small", backend="cpu",
                    hardware=SPEC.key(), strategy=strategy, spec=config)  # fmt: skip
    store.create_run(run)
    for h, it, origin, parent, plan, src, status, latency, error in KERNELS:
        store.add_kernel(
            run_id,
            KernelRecord(
                h, src, "cpu", it, origin, parent, plan, ("step one", "step <two>") if plan else ()
            ),
        )
        store.put_evaluation(_evaluation(h, status, latency, error))
    for t, best, spent in ((0, "base", 0.0), (1, "k1", 0.01), (2, "k4", 0.03)):
        latency = dict((k[0], k[7]) for k in KERNELS)[best]
        store.commit_iteration(run_id, IterationRecord(t, (best,), best, latency, PEAK_S / latency,
                                                    spent, 2 * t))  # fmt: skip
    lesson = Lesson("Vectorize <inner> loops", "Use SIMD & unroll.", "o[i] = a[i];", "/* simd */")
    store.add_experience(Experience(lesson, "positive", 2.0, "silu", "cpu", SPEC.key(),
                                    "summarizer-model", run_id, "base", "k1"))  # fmt: skip
    for n, (agent, cost) in enumerate(
        [("planner", 0.01), ("executor", 0.015), ("fixer", None), ("summarizer", 0.005)], 1
    ):
        store.record_call(run_id, call(n, agent, cost, sample=1000 if agent == "planner" else 0))
    store.update_run(run_id, status="finished", best_hash="k4")
    return store.get_run(run_id)  # type: ignore[return-value]


# -- reading the pages ----------------------------------------------------------------------------


class Page(HTMLParser):
    """What a report page holds: ids, tags, resource references, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.refs: list[str] = []  # src=, href=, xlink:href=, data= values
        self.svg_parents: list[str] = []  # the section each <svg> sits in
        self.text: list[str] = []
        self._sections: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])  # type: ignore[arg-type]
        if tag == "section":
            self._sections.append(values.get("id") or "")
        if tag == "svg":
            self.svg_parents.append(self._sections[-1] if self._sections else "")
        self.refs += [v for k, v in attrs if k in {"src", "href", "xlink:href", "data"} and v]

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self._sections:
            self._sections.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def assert_self_contained(html: str, page: Page) -> None:
    """Nothing a browser would fetch: no scripts, stylesheets, images or fonts from elsewhere."""
    assert all(not ref.startswith(("http:", "https:", "//")) for ref in page.refs), page.refs
    assert not {"script", "link", "img", "iframe", "object"} & set(page.tags)
    assert "@import" not in html and "url(http" not in html and "@font-face" not in html


# -- the tables of a page, and the check that their % of peak is their own peak over latency ----


class Tables(HTMLParser):
    """Every ``<table>`` of a page: its header cells and its rows, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.found.append(([], []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell, self._head = [], tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self.found:
            headers, rows = self.found[-1]
            if self._head and not headers:
                headers.extend(self._row)
            else:
                rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def page_tables(html: str) -> list[tuple[list[str], list[list[str]]]]:
    parser = Tables()
    parser.feed(html)
    parser.close()
    return parser.found


def _seconds(text: str) -> tuple[float, float] | None:
    """A shown time as the interval of what it may have been before rounding; None for none."""
    parts = text.split()[-2:]  # a cell may name a status first: "SUSPICIOUS 1.234 ms"
    if len(parts) != 2 or parts[1] not in ("ms", "µs"):
        return None
    value, unit = parts[0], {"ms": 1e-3, "µs": 1e-6}[parts[1]]
    half = 0.5 * 10 ** -len(value.split(".")[1]) if "." in value else 0.5
    return (float(value) - half) * unit, (float(value) + half) * unit


def check_pct_columns(html: str) -> int:
    """Every table with a "% of peak" column also has the "peak" it is against, and in every row
    that % is that peak over the row's latency (the "latency" column of the same prefix: "best %
    of peak" goes with "best latency"), within the rounding of the three figures shown. Returns
    how many figures were checked. Rows without a figure (—), and totals (a geometric mean,
    which shows neither a peak nor a latency), are passed over."""
    checked = 0
    for headers, rows in page_tables(html):
        pcts = [i for i, h in enumerate(headers) if h.endswith("% of peak")]
        if not pcts:
            continue
        assert "peak" in headers, f"a % of peak without its peak: {headers}"
        peak = headers.index("peak")
        for i in pcts:
            prefix = headers[i][: -len("% of peak")].strip()
            latency = headers.index(f"{prefix} latency".strip())
            for row in rows:
                if len(row) != len(headers) or row[i] == "—":
                    continue
                if not row[peak] and not row[latency]:
                    continue  # a geometric mean over rows: no one peak
                p, ms = _seconds(row[peak]), _seconds(row[latency])
                assert p is not None and ms is not None, (headers, row)
                shown = float(row[i].rstrip("%"))
                low, high = 100 * p[0] / ms[1], 100 * p[1] / ms[0]
                assert low - 0.05 <= shown <= high + 0.05, (headers, row)
                checked += 1
    return checked
