"""The HTTP API under load: a few hundred evaluations submitted at once, on loopback.

Starts ``accelopt serve`` on 127.0.0.1 with a private workspace and cache (this machine's
ceilings copied in, so nothing is measured twice), then ``--clients`` threads submit
``--requests`` evaluations of silu (``--distinct`` different kernels, the rest repeats that the
evaluation cache or a measurement in flight answers) and poll each until done. A 429 is honoured:
the client waits the Retry-After it was given, then submits again. It prints how many were
accepted, refused (429) and answered, the wall time and throughput, and the time from first
submission to result (median, 95th percentile); every request must get an answer. Usage:

    python benchmarks/serve_load.py [--requests 300] [--distinct 12] [--clients 32] [--queue 16]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

TOKEN = "load-test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(base: str, method: str, path: str, body: object = None) -> tuple[int, dict, object]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    request = urllib.request.Request(base + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"null")


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted = self.refused = self.answered = self.failed = 0
        self.statuses: dict[str, int] = {}
        self.latencies: list[float] = []

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


def one_request(base: str, source: str, tally: Tally) -> None:
    start = time.monotonic()
    while True:
        payload = {"problem": "silu", "workload": "small", "source": source}
        status, headers, body = call(base, "POST", "/v1/evaluations", payload)
        if status == 429:
            tally.add(refused=1)
            time.sleep(float(headers.get("retry-after", "1")))
            continue
        if status != 202:
            tally.add(failed=1)
            return
        tally.add(accepted=1)
        break
    job = body["id"]  # type: ignore[index]
    while True:
        status, _, state = call(base, "GET", f"/v1/evaluations/{job}")
        if status == 200 and state["state"] == "done":  # type: ignore[index]
            break
        time.sleep(0.1)
    result = state.get("result") or {}  # type: ignore[union-attr]
    with tally.lock:
        tally.answered += 1
        key = result.get("status") or "service error"
        tally.statuses[key] = tally.statuses.get(key, 0) + 1
        tally.latencies.append(time.monotonic() - start)


def start_server(port: int, workspace: Path, queue: int, workers: int) -> subprocess.Popen[str]:
    token_file = workspace / "token"
    token_file.write_text(TOKEN + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelopt", "serve", "--port", str(port), "--token-file",
         str(token_file), "--workspace", str(workspace), "--queue", str(queue),
         "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if call(base, "GET", "/v1/health")[0] == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start within 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--distinct", type=int, default=12)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--queue", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from accelopt.problems import load_problem
    from accelopt.settings import cache_dir

    own = cache_dir()
    tmp = Path(tempfile.mkdtemp(prefix="accelopt-serve-load-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    if (own / "hardware").is_dir():  # this machine's ceilings, so the server measures nothing
        shutil.copytree(own / "hardware", tmp / "cache" / "hardware")
    os.environ["ACCELOPT_CACHE_DIR"] = str(tmp / "cache")
    baseline = load_problem("silu").kernel_path("baseline").read_text()
    sources = [f"/* variant {i} */\n{baseline}" for i in range(args.distinct)]
    port = free_port()
    (tmp / "ws").mkdir()
    server = start_server(port, tmp / "ws", args.queue, args.workers)
    tally = Tally()
    try:
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            base = f"http://127.0.0.1:{port}"
            jobs = [
                pool.submit(one_request, base, sources[i % len(sources)], tally)
                for i in range(args.requests)
            ]
            for job in jobs:
                job.result()
        wall = time.monotonic() - start
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(args, tally, wall)


def report(args: argparse.Namespace, tally: Tally, wall: float) -> None:
    table = Table(title=f"accelopt serve under load: {args.requests} requests, {args.distinct} "
                  f"distinct kernels, {args.clients} clients, queue {args.queue}, "
                  f"{args.workers} workers, loopback")  # fmt: skip
    for col in ("accepted (202)", "refused (429, retried)", "answered", "failed", "wall s",
                "evaluations / s", "median s", "p95 s", "results"):  # fmt: skip
        table.add_column(col, justify="right")
    lat = sorted(tally.latencies)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else None
    table.add_row(
        str(tally.accepted), str(tally.refused), str(tally.answered), str(tally.failed),
        f"{wall:.1f}", f"{tally.answered / wall:.1f}",
        f"{statistics.median(lat):.2f}" if lat else "—", f"{p95:.2f}" if p95 else "—",
        ", ".join(f"{k} {v}" for k, v in sorted(tally.statuses.items())),
    )  # fmt: skip
    Console(width=200).print(table)
    if tally.answered != args.requests:
        raise SystemExit(f"{args.requests - tally.answered} requests got no answer")


if __name__ == "__main__":
    main()
