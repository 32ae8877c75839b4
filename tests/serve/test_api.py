"""`accelopt serve` as a client meets it: a real server in a subprocess, real HTTP. The token,
a submitted kernel polled until done (its result is what `accelopt eval --json` gives, and it is
in the workspace's evaluation cache), the problem and run views, the OpenAPI schema, and bad
requests: each a clear 4xx."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelopt.backends.registry import shipped_kernel
from accelopt.problems import load_problem
from accelopt.store.store import Store

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SILU = shipped_kernel(load_problem("silu"), "baseline").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, base: str, token: str | None) -> None:
        self.base, self.token = base, token

    def call(
        self, method: str, path: str, body: bytes | None = None, token: str | None = ""
    ) -> tuple[int, dict[str, str], object]:
        headers = {"content-type": "application/json"}
        token = self.token if token == "" else token
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, body, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), json.loads(err.read() or b"null")

    def post(self, path: str, payload: object, **kw) -> tuple[int, dict[str, str], object]:
        return self.call("POST", path, json.dumps(payload).encode(), **kw)

    def get(self, path: str, **kw) -> tuple[int, dict[str, str], object]:
        return self.call("GET", path, **kw)


@pytest.fixture(scope="module")
def api(cli_env, tmp_path_factory) -> Iterator[tuple[Client, Path]]:
    ws = tmp_path_factory.mktemp("ws")
    token_file = ws / "token"
    token_file.write_text("t0ken-for-the-tests-0123456789\n")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelopt", "serve", "--port", str(port), "--token-file",
         str(token_file), "--workspace", str(ws), "--queue", "8"],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    client = Client(f"http://127.0.0.1:{port}", "t0ken-for-the-tests-0123456789")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if client.get("/v1/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            proc.kill()
            pytest.fail(f"the server did not start: {proc.communicate()[0]}")
        yield client, ws
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_done(client: Client, job: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, _, state = client.get(f"/v1/evaluations/{job}")
        assert status == 200
        if state["state"] == "done":  # type: ignore[index]
            return state  # type: ignore[return-value]
        time.sleep(0.2)
    raise AssertionError(f"evaluation {job} not done in 120 s")


def test_a_kernel_is_evaluated_as_accelopt_eval_would(api, run_cli, tmp_path):
    client, ws = api
    status, _, submitted = client.post(
        "/v1/evaluations", {"problem": "silu", "workload": "small", "source": SILU}
    )
    assert status == 202 and submitted["state"] in {"queued", "running", "done"}  # type: ignore[index]
    done = wait_done(client, submitted["id"])  # type: ignore[index]
    assert done["error"] == "" and done["problem"] == "silu"
    result = done["result"]
    kernel = tmp_path / "silu.c"
    kernel.write_text(SILU)
    out = run_cli("eval", "silu", kernel, "--workload", "small", "--json", "-")
    expected = json.loads(out.stdout)
    assert set(result) == set(expected)
    for key in ("status", "problem", "workload", "backend", "kernel_hash", "hardware", "peak_s",
                "bound", "tolerance", "seeds"):  # fmt: skip
        assert result[key] == expected[key], key
    with Store.open(ws) as store:  # like any other evaluation, in the workspace's cache
        cached = store.get_evaluation(result["kernel_hash"], "silu", "small", result["hardware"])
    assert cached is not None and cached.latency_s == result["latency_s"]


def test_problems_and_runs_are_the_cli_json(api, run_cli):
    client, ws = api
    status, _, problems = client.get("/v1/problems")
    listed = json.loads(run_cli("bench", "list", "--workspace", ws, "--json", "-").stdout)
    assert status == 200 and problems == listed
    status, _, shown = client.get("/v1/problems/silu")
    expected = json.loads(run_cli("bench", "show", "silu", "--json", "-").stdout)
    assert status == 200 and shown == expected
    status, _, runs = client.get("/v1/runs")
    assert status == 200 and runs == []
    assert client.get("/v1/runs/nosuchrun")[0] == 404


def test_every_request_needs_the_token(api):
    client, _ = api
    for token in (None, "wrong-token"):
        status, headers, body = client.get("/v1/problems", token=token)
        assert status == 401 and "bearer token" in body["detail"]  # type: ignore[index]
        assert headers.get("www-authenticate") == "Bearer"
    anonymous = client.post("/v1/evaluations", {"problem": "silu", "source": SILU}, token=None)
    assert anonymous[0] == 401


def test_bad_requests_are_clear_4xx(api):
    client, _ = api
    bad_json = client.call("POST", "/v1/evaluations", b"{not json")
    assert bad_json[0] == 422
    unknown = client.post("/v1/evaluations", {"problem": "nope", "source": SILU})
    assert unknown[0] == 404 and "unknown problem 'nope'" in unknown[2]["detail"]  # type: ignore[index]
    workload = client.post("/v1/evaluations", {"problem": "silu", "workload": "x", "source": SILU})
    assert workload[0] == 400 and "no workload 'x'" in workload[2]["detail"]  # type: ignore[index]
    backend = client.post("/v1/evaluations", {"problem": "silu", "backend": "fpga", "source": "x"})
    assert backend[0] == 400
    extra = client.post("/v1/evaluations", {"problem": "silu", "source": SILU, "rm": "-rf"})
    assert extra[0] == 422  # unknown fields are refused, not ignored
    huge = client.post("/v1/evaluations", {"problem": "silu", "source": "x" * (3 << 20)})
    assert huge[0] == 413 and "larger than" in huge[2]["detail"]  # type: ignore[index]
    big = client.post("/v1/evaluations", {"problem": "silu", "source": "x" * ((1 << 20) + 10)})
    assert big[0] == 413
    assert client.get("/v1/evaluations/nope")[0] == 404
    assert client.get("/v1/health")[0] == 200  # nothing above took the server down


def raw_post(client: Client, head: bytes, parts: list[bytes], pause_s: float = 0.0) -> bytes:
    """POST over a bare socket: the head's headers, then the body in ``parts`` with a pause
    between them, then everything the server answers until it closes."""
    host, port = client.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Authorization: Bearer " + str(client.token).encode() + b"\r\n" + head + b"\r\n"
        )
        for part in parts:
            time.sleep(pause_s)
            sock.sendall(part)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_client_still_sending_a_refused_body_reads_the_413(api):
    # The server has decided by the headers; the client sends the rest of its 3 MiB later. The
    # server must read it (and throw it away) before it answers and closes: closing on unread
    # data resets the connection, and the client gets a broken pipe instead of the answer.
    client, _ = api
    body = b"x" * (3 << 20)
    head = b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    answer = raw_post(client, head, [body[:4096], body[4096:]], pause_s=0.5)
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer


def test_a_body_without_a_length_is_refused_once_it_is_too_large(api):
    client, _ = api
    chunks = [b"%x\r\n%s\r\n" % (1 << 16, b"x" * (1 << 16)) for _ in range(48)]  # 3 MiB
    head = b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    answer = raw_post(client, head, [b"".join(chunks) + b"0\r\n\r\n"])
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer


def test_the_openapi_schema_is_served(api):
    client, _ = api
    status, _, schema = client.get("/openapi.json", token=None)
    assert status == 200
    paths = schema["paths"]  # type: ignore[index]
    assert {"/v1/evaluations", "/v1/evaluations/{job_id}", "/v1/problems", "/v1/problems/{name}",
            "/v1/runs", "/v1/runs/{run_id}"} <= set(paths)  # fmt: skip
    request = schema["components"]["schemas"]["EvaluationRequest"]  # type: ignore[index]
    assert set(request["properties"]) == {"problem", "workload", "backend", "source"}
    assert request["required"] == ["problem", "source"]
    assert "202" in paths["/v1/evaluations"]["post"]["responses"]


def test_no_auth_is_refused_off_loopback(run_cli, tmp_path):
    out = run_cli("serve", "--host", "0.0.0.0", "--no-auth", "--workspace", tmp_path)
    assert out.returncode == 2 and "--no-auth only on loopback" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run_cli("serve", "--port", str(port), "--no-auth", "--workspace", tmp_path)
    assert busy.returncode == 2 and "give another --port" in busy.stderr
    missing = run_cli("serve", "--token-file", tmp_path / "none", "--workspace", tmp_path)
    assert missing.returncode == 2 and "cannot read the token file" in missing.stderr
