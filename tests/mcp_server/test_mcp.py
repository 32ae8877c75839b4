"""`accelopt mcp` as a coding agent meets it: the real server in a subprocess, driven by the MCP
SDK's own stdio client. Every tool is called; a failing kernel is data, a user's mistake a tool
error after which the server goes on serving; nothing but the protocol reaches stdout; and once
the client is gone, the session is a finished run of the workspace that `accelopt runs show`
shows with its lineage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from accelopt.backends.kernel import Kernel
from accelopt.backends.registry import shipped_kernel
from accelopt.mcp_server.server import TRITON_WARNING
from accelopt.mcp_server.tools import TRITON_REFUSED
from accelopt.problems import load_problem
from accelopt.store.store import Store

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SILU = shipped_kernel(load_problem("silu"), "baseline").read_text()
BROKEN = "void kernel(const float *x, float *y) { this is not C; }\n"
TRITON = "import os\nos.system('touch /tmp/pwned')\n"  # Python: refused unless opted in
TOOLS = {"list_problems", "show_problem", "evaluate_kernel", "search_memory"}


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def data(result: CallToolResult) -> Any:
    assert not result.is_error, text(result)
    [block] = result.content
    payload = json.loads(block.text)  # one JSON text block, the same as the structured content
    structured = result.structured_content
    assert structured == (payload if isinstance(payload, dict) else {"result": payload})
    return payload


async def agent_session(ws: Path, env: dict[str, str], errlog: Any) -> dict[str, Any]:
    """Every tool, as an agent would call them; what each answered."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "accelopt", "mcp", "--workspace", str(ws)], env=env
    )
    stray: list[Any] = []  # anything on stdout that is not a protocol message

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    got: dict[str, Any] = {}
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=on_message) as client,
    ):
        init = await client.initialize()
        got["server"] = init.server_info.name
        got["instructions"] = init.instructions or ""
        got["tools"] = {t.name for t in (await client.list_tools()).tools}
        got["problems"] = data(await client.call_tool("list_problems", {}))
        got["show"] = data(await client.call_tool("show_problem", {"name": "silu"}))
        args = {"problem": "silu", "source": SILU, "workload": "small"}
        got["baseline"] = data(await client.call_tool("evaluate_kernel", args))
        args = {"problem": "silu", "source": BROKEN, "workload": "small"}
        got["broken"] = data(await client.call_tool("evaluate_kernel", args))
        args = {"problem": "no_such_problem", "source": SILU, "workload": "small"}
        got["unknown"] = await client.call_tool("evaluate_kernel", args)
        args = {"problem": "silu", "source": SILU, "workload": "huge"}
        got["bad_workload"] = await client.call_tool("evaluate_kernel", args)
        args = {"problem": "silu", "source": TRITON, "workload": "small", "backend": "triton"}
        got["triton"] = await client.call_tool("evaluate_kernel", args)
        got["memory"] = data(await client.call_tool("search_memory", {"query": "vectorize expf"}))
    got["stray"] = stray
    return got


def test_an_agent_session_through_the_sdk_client(cli_env, tmp_path):
    ws = tmp_path / "ws"
    log_path = tmp_path / "server.log"
    env = {k: v for k, v in cli_env.items() if k != "ACCELOPT_SERVE_TRITON"}
    with log_path.open("w") as errlog:
        got = anyio.run(agent_session, ws, env, errlog)
    log = log_path.read_text()

    assert got["server"] == "accelopt" and "evaluate_kernel" in got["instructions"]
    assert got["tools"] == TOOLS
    assert got["stray"] == [], log
    assert "accelopt mcp: serving workspace" in log  # the banner went to stderr

    assert "silu" in [p["name"] for p in got["problems"]]
    show = got["show"]
    assert show["name"] == "silu" and show["costs"] and show["machine"]["name"] == "cpu:test"
    assert show["baseline_source"] == SILU and "Kernel contract" in show["backend_facts"]

    base = got["baseline"]
    assert base["status"] == "PASSED", base["error"]
    assert base["latency_s"] > 0 and base["pct_of_peak"] > 0
    assert base["kernel_hash"] == Kernel(SILU).hash
    assert "status: PASSED" in base["profile"] and "of peak" in base["profile"]
    assert base["run"]["iteration"] == 1 and base["run"]["new_best"] is True

    broken = got["broken"]  # a failing kernel is a result, not a tool error
    assert broken["status"] == "COMPILE_ERROR" and broken["error"]
    assert "status: COMPILE_ERROR" in broken["profile"]
    assert broken["run"]["id"] == base["run"]["id"] and broken["run"]["iteration"] == 2
    assert broken["run"]["best_hash"] == base["kernel_hash"]

    assert got["unknown"].is_error and "unknown problem" in text(got["unknown"])
    assert "Traceback" not in text(got["unknown"])
    assert got["bad_workload"].is_error and "no workload 'huge'" in text(got["bad_workload"])
    assert got["triton"].is_error and text(got["triton"]).endswith(f": {TRITON_REFUSED}")
    assert TRITON_WARNING not in log
    assert got["memory"] == []  # an empty workspace has no lessons: no error

    with Store.open(ws) as store:
        [run] = store.list_runs()
        kernels = store.kernels(run.id)
        iterations = store.iterations(run.id)
    assert (run.id, run.problem, run.workload, run.backend) == (
        base["run"]["id"], "silu", "small", "cpu",
    )  # fmt: skip
    assert (run.strategy, run.status) == ("agent", "finished")
    assert run.baseline_hash == run.best_hash == base["kernel_hash"]
    assert [(k.hash, k.iteration) for k in kernels] == [
        (base["kernel_hash"], 1), (broken["kernel_hash"], 2),
    ]  # fmt: skip
    assert kernels[1].parent_hash == base["kernel_hash"]
    assert [i.iteration for i in iterations] == [1, 2]
    assert iterations[-1].failed_by_status == {"COMPILE_ERROR": 1}

    shown = subprocess.run(
        [sys.executable, "-m", "accelopt", "runs", "show", run.id, "--workspace", str(ws),
         "--json", "-"],
        capture_output=True, text=True, env=cli_env, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    payload = json.loads(shown.stdout)
    assert (payload["run"], payload["strategy"], payload["status"]) == (run.id, "agent", "finished")
    assert payload["best_pct_of_peak"] == pytest.approx(base["pct_of_peak"])
    assert [s["hash"] for s in payload["lineage"]] == [base["kernel_hash"]]
    assert [i["iteration"] for i in payload["iterations"]] == [1, 2]


async def triton_call(ws: Path, env: dict[str, str], errlog: Any) -> CallToolResult:
    """One evaluate_kernel of a Triton kernel, as an agent would send it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "accelopt", "mcp", "--workspace", str(ws)], env=env
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        args = {"problem": "silu", "source": "import triton\n", "backend": "triton"}
        return await client.call_tool("evaluate_kernel", args)


def test_with_the_opt_in_a_triton_kernel_takes_the_usual_path(cli_env, tmp_path):
    log_path = tmp_path / "server.log"
    env = {**cli_env, "ACCELOPT_SERVE_TRITON": "1"}
    with log_path.open("w") as errlog:
        result = anyio.run(triton_call, tmp_path / "ws", env, errlog)
    log = log_path.read_text()
    assert log.splitlines().count(TRITON_WARNING) == 1, log
    # the usual path: here (no GPU) a tool error that says so; on a GPU host an evaluation
    assert TRITON_REFUSED not in text(result)


def test_without_the_sdk_the_command_says_what_to_install(cli_env, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp' or name.startswith('mcp.'):\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    env = {**cli_env, "PYTHONPATH": str(blocker)}
    done = subprocess.run(
        [sys.executable, "-m", "accelopt", "mcp", "--workspace", str(tmp_path / "ws")],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "accelopt mcp needs the MCP SDK: pip install 'accelopt[serve]'" in done.stderr
    assert done.stdout == ""
