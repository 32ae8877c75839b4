"""The live dashboard of `accelopt serve`: its JSON is the report's figures, its routes (pages
without the token, JSON with it), and the pages in real headless Chromium: they render a run,
escape what the store holds, ask for the token when it is missing, and follow a run that is
going (an `accelopt optimize` against the scripted LLM server) until it ends.

Chromium is driven without new dependencies: ``--dump-dom`` for one look at a page (it runs the
page's script and its fetches under a virtual time budget), and the DevTools protocol over
``--remote-debugging-pipe`` (JSON messages on file descriptors 3 and 4) to watch one page load
over real time. The browser tests skip only where Chromium is absent."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_server import dashboard_over

sys.path.insert(0, str(Path(__file__).parents[1] / "search"))
sys.path.append(str(Path(__file__).parents[1] / "reports"))

from agents_pool import AgentPool, variant, write_config
from browser_support import BROWSER_FLAGS, CHROMIUM, dump_dom, needs_chromium
from cli_timing import NO_REFERENCES, QUICK_TIMING
from report_helpers import SPEC, make_fake_run

from accelopt.cli.serve import dashboard_hint, dashboard_url
from accelopt.formatting import percent, usd
from accelopt.memory.records import Experience, Lesson
from accelopt.reports.run_report import load_run, run_report
from accelopt.serve.dashboard import live_figures, live_json, status_counts
from accelopt.store.records import RunRecord
from accelopt.store.store import Store
from accelopt.testing.scripted import RecordedRequest, Reply, ScriptedServer

pytest.importorskip("fastapi")


TOKEN = "dashboard-t0ken-0123456789"
FAKE = "fakerun00001"
EVIL = '<img id="pwned" src="x" onerror="document.body.dataset.pwned = 1">'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str, token: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


# -- a store with a finished run, served in this process ----------------------------------------


def add_evil_run(store: Store) -> None:
    """A run whose problem name and lesson title are HTML: the page must show them as text."""
    run = RunRecord(id="evilrun00001", problem="<b id='injected'>silu</b>", workload="small",
                    backend="cpu", hardware=SPEC.key(), strategy="beam", spec={})  # fmt: skip
    store.create_run(run)
    lesson = Lesson(EVIL, "Never render a title as HTML.")
    store.add_experience(Experience(lesson, "positive", 1.5, "silu", "cpu", SPEC.key(), "m",
                                    run.id, "a", "b"))  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with Store.open(tmp_path_factory.mktemp("ws")) as opened:
        make_fake_run(opened)
        add_evil_run(opened)
        yield opened


@pytest.fixture(scope="module")
def base(store: Store, serve_in_thread) -> Iterator[str]:
    """The API over ``store`` (a real uvicorn in a thread), its token ``TOKEN``."""
    with dashboard_over(store, TOKEN, serve_in_thread) as url:
        yield url


# -- the figures --------------------------------------------------------------------------------


def test_the_live_figures_are_the_reports(store: Store):
    data = load_run(store, store.get_run(FAKE))  # type: ignore[arg-type]
    live = live_figures(data)
    report = run_report(data, None)
    assert live["run"] == FAKE and live["status"] == "finished" and not live["running"]
    assert live["iteration"] == 2 and live["iterations_planned"] == 2
    assert [(p["iteration"], p["pct"]) for p in live["best_curve"]] == list(report.best_curve)
    assert [p["pct"] for p in live["best_curve"]] == pytest.approx([0.25, 0.5, 0.8])
    assert live["evaluated"] == len(report.candidates) == 6
    assert live["by_status"] == {"PASSED": 4, "INCORRECT": 1, "COMPILE_ERROR": 1}
    assert list(live["by_status"]) == ["PASSED", "INCORRECT", "COMPILE_ERROR"]  # report order
    (top,) = live["beam"]
    assert top["hash"] == "k4" and top["latency_s"] == 1.25e-3
    assert top["pct"] == pytest.approx(0.8) and top["plan"] == "Use OpenMP"
    assert live["best"]["pct"] == report.best.pct and live["best"]["speedup"] == pytest.approx(3.2)  # type: ignore[union-attr]
    assert live["baseline"]["hash"] == "base"
    assert live["cost"]["total_usd"] == pytest.approx(report.cost.total_usd) == 0.03
    assert live["cost"]["unknown_calls"] == 1 and live["cost"]["tokens"] == report.cost.tokens
    assert [lesson["title"] for lesson in live["lessons"]] == ["Vectorize <inner> loops"]
    json.dumps(live, allow_nan=False)  # strict JSON: what the route sends


def test_a_run_just_started_has_empty_figures(tmp_path: Path):
    with Store.open(tmp_path / "ws") as fresh:
        fresh.create_run(RunRecord(id="newrun000001", problem="silu", workload="small",
                                   backend="cpu", hardware="h", strategy="beam",
                                   spec={"search": {"iterations": 3}}))  # fmt: skip
        live = live_json(fresh, "newrun000001")
        assert live_json(fresh, "nosuchrun") is None
    assert live is not None and live["running"] and live["status"] == "running"
    assert live["iteration"] is None and live["iterations_planned"] == 3
    assert live["beam"] == [] and live["best_curve"] == [] and live["candidates"] == []
    assert live["best"] is None and live["lessons"] == [] and live["cost"]["total_usd"] == 0


def test_status_counts_keep_the_reports_order_then_any_other():
    counts = status_counts(["TIMEOUT", "PASSED", "ODD", "PASSED", "CRASH"])
    assert counts == {"PASSED": 2, "CRASH": 1, "TIMEOUT": 1, "ODD": 1}
    assert list(counts) == ["PASSED", "CRASH", "TIMEOUT", "ODD"]


def test_a_number_that_is_not_finite_is_null(store: Store):
    data = load_run(store, store.get_run(FAKE))  # type: ignore[arg-type]
    lesson = data.experiences[0]
    odd = Experience(lesson.lesson, "positive", math.inf, "silu", "cpu", SPEC.key(), "m", FAKE,
                     "a", "b")  # fmt: skip
    live = live_figures(type(data)(**{**vars(data), "experiences": (odd,)}))
    assert live["lessons"][0]["speedup"] is None
    json.dumps(live, allow_nan=False)


def test_the_dashboard_address_carries_no_token(tmp_path: Path):
    assert dashboard_url("127.0.0.1", 8600) == "http://127.0.0.1:8600/runs"
    assert dashboard_url("0.0.0.0", 80) == "http://127.0.0.1:80/runs"
    assert dashboard_url("::1", 81) == "http://[::1]:81/runs"
    assert dashboard_hint("127.0.0.1", 1, None) == "live dashboard: http://127.0.0.1:1/runs"
    hint = dashboard_hint("127.0.0.1", 1, tmp_path / "tok")
    assert hint == f"live dashboard: http://127.0.0.1:1/runs#token=<the token in {tmp_path}/tok>"


# -- the routes ---------------------------------------------------------------------------------


def test_the_live_json_needs_the_token(base: str, store: Store):
    assert fetch(f"{base}/v1/runs/{FAKE}/live")[0] == 401
    assert fetch(f"{base}/v1/runs/{FAKE}/live", "wrong-token")[0] == 401
    status, _, body = fetch(f"{base}/v1/runs/{FAKE}/live", TOKEN)
    assert status == 200 and json.loads(body) == live_json(store, FAKE)
    status, _, body = fetch(f"{base}/v1/runs/{FAKE[:6]}/live", TOKEN)  # a prefix, as runs show
    assert status == 200 and json.loads(body)["run"] == FAKE
    status, _, body = fetch(f"{base}/v1/runs/nosuchrun/live", TOKEN)
    assert status == 404 and "no run 'nosuchrun'" in json.loads(body)["detail"]


def test_the_pages_hold_no_data_and_load_nothing_from_elsewhere(base: str):
    for path in ("/runs", f"/runs/{FAKE}"):
        status, headers, body = fetch(base + path)  # no token: the page holds no data
        html = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/html")
        policy = headers["content-security-policy"]
        nonce = policy.split("'nonce-")[1].split("'")[0]
        assert f'<script nonce="{nonce}">' in html and html.count("<script") == 1
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert headers["cache-control"] == "no-store"
        assert "http://" not in html.replace('"http://www.w3.org/2000/svg"', "")
        assert "https://" not in html and " src=" not in html and "<link" not in html
        assert "Vectorize" not in html and "silu" not in html  # the figures come by fetch
    assert fetch(f"{base}/runs")[2] != fetch(f"{base}/runs")[2]  # a fresh nonce every time
    status, _, body = fetch(f"{base}/runs/%3Cb%3Eid")
    assert status == 200 and b"&lt;b&gt;id" in body and b"<b>id" not in body
    schema = json.loads(fetch(f"{base}/openapi.json")[2])
    assert "/v1/runs/{run_id}/live" in schema["paths"] and "/runs" not in schema["paths"]


def test_the_home_page_is_the_run_list(base: str):
    request = urllib.request.Request(f"{base}/")
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(request, timeout=10)
    assert redirect.value.code == 307 and redirect.value.headers["location"] == "/runs"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# -- in Chromium --------------------------------------------------------------------------------


@pytest.mark.browser
@needs_chromium
def test_chromium_shows_the_run_as_the_report_does(base: str, store: Store):
    dom = dump_dom(f"{base}/runs/{FAKE}#token={TOKEN}")
    report = run_report(load_run(store, store.get_run(FAKE)), None)  # type: ignore[arg-type]
    assert 'data-state="ok"' in dom
    assert "<title>silu / small — run fakerun00001</title>" in dom
    assert 'data-status="finished">finished</dd>' in dom
    assert f'<dd id="best-pct">{percent(report.best.pct)}</dd>' in dom  # type: ignore[union-attr]
    assert f'<dd id="spent">{usd(report.cost.total_usd)} (+1 unpriced)</dd>' in dom
    assert '<dd id="iteration" data-iteration="2">2 of 2</dd>' in dom
    assert '<dd id="evaluated" data-count="6">6</dd>' in dom
    assert '<tr data-hash="k4"><td><code>k4</code></td><td class="status">PASSED</td>' in dom
    assert '<tr data-status="COMPILE_ERROR">' in dom
    assert 'id="best-line"' in dom and 'data-points="3"' in dom
    assert dom.count('class="candidate"') == 6
    assert "Vectorize &lt;inner&gt; loops" in dom  # the lesson's title, as text
    listing = dump_dom(f"{base}/runs#token={TOKEN}")
    assert 'data-runs="2"' in listing
    assert f'<a href="/runs/{FAKE}#token={TOKEN}">{FAKE}</a>' in listing


@pytest.mark.browser
@needs_chromium
def test_chromium_shows_html_from_the_store_as_text(base: str):
    dom = dump_dom(f"{base}/runs/evilrun00001#token={TOKEN}")
    assert 'data-state="ok"' in dom
    assert '&lt;img id="pwned"' in dom and "<img" not in dom and "data-pwned" not in dom
    assert "&lt;b id='injected'&gt;silu&lt;/b&gt;" in dom and "<b id=" not in dom
    listing = dump_dom(f"{base}/runs#token={TOKEN}")
    assert 'data-state="ok"' in listing and "<b id=" not in listing


@pytest.mark.browser
@needs_chromium
def test_chromium_without_the_token_says_how_to_give_it(base: str):
    dom = dump_dom(f"{base}/runs/{FAKE}")
    assert 'data-state="unauthorized"' in dom
    assert "This page needs the server's token: open" in dom
    assert f"{base}/runs/{FAKE}#token=&lt;the token in the server's token file&gt;" in dom
    assert "Vectorize" not in dom and 'data-updates="0"' in dom
    wrong = dump_dom(f"{base}/runs#token=not-the-token")
    assert "The server refused the token in this page's address" in wrong


# -- a run that goes, watched in Chromium over the DevTools protocol ----------------------------


class Browser:
    """Headless Chromium driven over ``--remote-debugging-pipe``: the DevTools protocol's JSON
    messages, each ended by a NUL byte, on the browser's fds 3 (in) and 4 (out)."""

    def __init__(self, chromium: str, profile: Path) -> None:
        to_browser, self._in = os.pipe()
        self._out, from_browser = os.pipe()
        move = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4);"
                " os.execv(sys.argv[3], sys.argv[3:])")  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-c", move, str(to_browser), str(from_browser), chromium,
             *BROWSER_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "about:blank"],
            pass_fds=(to_browser, from_browser), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.session = ""
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            attached = self.call("Target.attachToTarget", {"targetId": page["targetId"],
                                                            "flatten": True})  # fmt: skip
        except BaseException:
            self.close()
            raise
        self.session = attached["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 30) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if method.split(".")[0] not in {"Target", "Browser"}:
            message["sessionId"] = self.session
        os.write(self._in, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._out], [], [], left)[0]:
                    raise TimeoutError(f"Chromium did not answer {method} in {timeout_s} s")
                chunk = os.read(self._out, 1 << 16)
                if not chunk:
                    raise EOFError(f"Chromium closed the pipe (answering {method})")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            answer = json.loads(raw)
            if answer.get("id") == self._next_id:  # anything else is an event
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            self.call("Browser.close", timeout_s=10)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


# What the run's page shows, read in the page (null before its body exists).
SNAPSHOT = """(() => {
  if (!document.body || !document.getElementById("status")) return null;
  const text = (id) => document.getElementById(id).textContent;
  const all = (selector) => Array.from(document.querySelectorAll(selector));
  const line = document.getElementById("best-line");
  return {
    marker: window.__watched || null, href: location.href, title: document.title,
    state: document.body.dataset.state, updates: Number(document.body.dataset.updates),
    message: text("message"), status: text("status"),
    iteration: document.getElementById("iteration").dataset.iteration || null,
    evaluated: Number(document.getElementById("evaluated").dataset.count || -1),
    best_pct: text("best-pct"), spent: text("spent"),
    beam: all("#beam tbody tr").map((r) => r.dataset.hash),
    by_status: Object.fromEntries(all("#by-status tbody tr").map(
      (r) => [r.dataset.status, Number(r.cells[1].textContent)])),
    lessons: all("#lessons .lesson-title").map((e) => e.textContent),
    curve_points: line ? Number(line.dataset.points) : 0,
    candidates: all("#chart circle.candidate").length,
  };
})()"""


class GatedPool(AgentPool):
    """The scripted team, but the planner waits for ``go``: the run measures its baseline,
    commits iteration 0 and holds there until the test lets it go on."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.held = threading.Event()

    def planner(self, request: RecordedRequest) -> Reply:
        self.held.set()
        self.go.wait(240)
        return super().planner(request)


def wait_for(what: str, check: Any, timeout_s: float, every_s: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s} s (last: {last})")


@pytest.mark.browser
@pytest.mark.alone  # the best kernel must improve while the page watches
@pytest.mark.slow
@pytest.mark.timeout(600)
@needs_chromium
def test_chromium_follows_a_run_while_it_goes(cli_env: dict[str, str], tmp_path: Path):
    assert CHROMIUM is not None
    ws, token_file, start = tmp_path / "ws", tmp_path / "token", tmp_path / "slow.c"
    token_file.write_text(TOKEN + "\n")
    start.write_text(variant("slow"))
    api = f"http://127.0.0.1:{free_port()}"
    serve_log, run_log = tmp_path / "serve.log", tmp_path / "optimize.log"
    pool = GatedPool()
    with contextlib.ExitStack() as stack:  # undone in reverse: browser, run, server, LLM
        llm = stack.enter_context(ScriptedServer(default=pool))
        stack.callback(pool.go.set)  # never leave the scripted planner waiting
        accelopt = ("serve", "--port", api.rsplit(":", 1)[1], "--token-file", token_file,
                    "--workspace", ws, "--workers", "1")  # fmt: skip
        stack.callback(stop, start_cli(accelopt, cli_env, serve_log))
        wait_for("the server answers", lambda: _up(f"{api}/v1/health"), 60)
        config = write_config(tmp_path / "accelopt.yaml", llm.base_url)
        run = start_cli(("optimize", "matmul", "--workload", "small", "--beam", "2", "--plans",
                         "2", "--samples", "1", "--iterations", "2", "--kernel", start,
                         "--config", config, "--workspace", ws, "--json", "-", *QUICK_TIMING,
                         *NO_REFERENCES),
                        cli_env, run_log)  # fmt: skip
        stack.callback(stop, run)
        page = Browser(CHROMIUM, tmp_path / "profile")
        stack.callback(page.close)

        def snapshot() -> dict[str, Any]:
            return page.evaluate(SNAPSHOT)  # type: ignore[no-any-return]

        # The run list shows the run; its link (which carries the token) opens its page.
        page.navigate(f"{api}/runs#token={TOKEN}")
        link = "document.querySelector('#runs tbody a')"
        wait_for("the run list shows the run", lambda: page.evaluate(f"{link} !== null"), 120)
        page.evaluate(f"{link}.click()")
        wait_for("the run's page loads", snapshot, 30)
        page.evaluate("window.__watched = 'this very page load'")
        assert pool.held.wait(180), f"the run never asked for a plan: {run_log.read_text()}"
        before = wait_for(
            "the page shows the baseline measured, the run held at iteration 0",
            lambda: (s := snapshot())["iteration"] == "0" and s["state"] == "ok" and s, 30,
        )  # fmt: skip
        assert before["status"] == "running" and before["evaluated"] == 1
        assert before["beam"] and before["curve_points"] == 1 and before["lessons"] == []
        assert before["title"].startswith("matmul / small — run ")
        assert "#token=" in before["href"]  # the link carried the token
        wait_for(  # while the run is held, the page keeps asking
            "the page refreshes while the run is held",
            lambda: snapshot()["updates"] > before["updates"], 30,
        )  # fmt: skip
        pool.go.set()
        seen = [before]

        def finished() -> dict[str, Any] | None:
            seen.append(snapshot())
            return seen[-1] if seen[-1]["status"] == "finished" else None

        after = wait_for("the page shows the run finished", finished, 300, every_s=0.5)
        assert run.wait(timeout=60) == 0, run_log.read_text()
    # One page load saw it all: no reload, many refreshes, the figures moved on.
    assert after["marker"] == "this very page load" and after["state"] == "ok"
    assert after["updates"] > before["updates"] + 1  # held, then at least once more
    assert after["iteration"] == "2" and after["curve_points"] == 3
    assert after["evaluated"] > before["evaluated"] and after["candidates"] == after["evaluated"]
    assert sum(after["by_status"].values()) == after["evaluated"]
    assert after["lessons"], "the run learned lessons; the page lists none"
    assert {s["status"] for s in seen} == {"running", "finished"}
    # The same numbers as the report of the run.
    with Store.open(ws) as final:
        (record,) = final.list_runs()
        report = run_report(load_run(final, record), None)
        beam = final.iterations(record.id)[-1].beam
    assert after["best_pct"] == percent(report.best.pct)  # type: ignore[union-attr]
    assert after["best_pct"] != before["best_pct"]
    assert after["spent"] == usd(report.cost.total_usd) and report.cost.total_usd > 0
    assert after["lessons"] == [e.lesson.title for e in report.lessons]
    assert after["beam"] == list(beam)
    printed = serve_log.read_text()
    assert f"live dashboard: {api}/runs#token=<the token in {token_file}>" in printed
    assert TOKEN not in printed  # the token is not printed


def start_cli(args: tuple[str | Path, ...], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "accelopt", *map(str, args)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _up(url: str) -> bool:
    try:
        return fetch(url, TOKEN)[0] == 200
    except OSError:
        return False
