"""The MCP wiring of ``accelopt mcp``: the ``McpTools`` on the SDK's ``MCPServer``, served
over stdio.

stdout carries the protocol and nothing else: while it serves, the SDK points file descriptor 1
at stderr (and 0 at the null device), so that anything this process or a child writes there
(a rich console, a worker, a compiler) misses the wire; logs go to stderr. The profilers are made
at the first evaluation, hence inside that diversion.

A user's mistake (an unknown problem, workload or backend, a source too long) comes back as a
tool error carrying accelopt's one sentence; anything else as the SDK's generic tool error, its
traceback in the server's log. Either way the server goes on serving.

The session ends when the client closes stdin, or on SIGTERM (the runs it recorded are then
``finished``) or SIGINT (``interrupted``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from accelopt import __version__, settings
from accelopt.backends.registry import DEFAULT_BACKEND
from accelopt.errors import UserError
from accelopt.mcp_server.tools import McpTools
from accelopt.problems.loader import UnknownProblemError
from accelopt.store.records import RunStatus
from accelopt.store.store import Store

INSTRUCTIONS = """\
accelopt measures compute kernels against the hardware's roofline. To make a kernel faster:
1. list_problems: the problems (suite and workspace) with their workloads (sizes).
2. show_problem(name): the kernel contract (backend_facts), the sizes, each workload's cost and
   roofline time on this machine (costs), its ceilings (machine), and the baseline source.
3. Write a kernel, then evaluate_kernel(problem, source, workload): it is checked against the
   reference on fresh inputs and timed in a sandbox. The answer has the status (PASSED, or why
   not), the median latency, pct_of_peak (roofline time / latency, 1.0 = at the hardware's
   limit) and a profile (utilization of each ceiling, compiler remarks). Iterate.
4. search_memory(query): lessons learned by earlier optimization runs in this workspace.
Every evaluation is recorded in the workspace as a run (strategy "agent"): `accelopt runs list`,
`accelopt runs show RUN` and `accelopt report RUN` show them.
"""

ProblemName = Annotated[str, Field(description="problem name, as list_problems gives it")]
Backend = Annotated[
    str,
    Field(description="kernel language/device: cpu (C), or triton where the operator allows it"),
]
TRITON_WARNING = (
    "accelopt mcp: warning: ACCELOPT_SERVE_TRITON is set, so the client may send a Triton kernel "
    "(Python) that runs as this server's user, not contained"
)


def build_server(tools: McpTools) -> MCPServer:
    """The MCP server over ``tools``: four tools, each answering JSON."""
    server: MCPServer = MCPServer("accelopt", instructions=INSTRUCTIONS, version=__version__)
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    def list_problems() -> CallToolResult:
        """Every problem (the suite's, then the workspace's): name, description, kernel
        arguments (inputs then outputs, with shapes in size parameters), tolerance, workloads
        (name -> sizes) and notes on the cost model."""
        return answer(tools.list_problems)

    @server.tool(annotations=reading)
    def show_problem(name: ProblemName, backend: Backend = DEFAULT_BACKEND) -> CallToolResult:
        """One problem: its definition, each workload's cost (FLOPs, bytes) and roofline time
        (peak_s) on this machine, the kernels it ships, the baseline source (baseline_source),
        this machine's ceilings (machine) and the backend's kernel contract (backend_facts)."""
        return answer(tools.show_problem, name, backend)

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    def evaluate_kernel(
        problem: ProblemName,
        source: Annotated[
            str, Field(description="the kernel's whole source text (C for cpu), at most 1 MiB")
        ],
        workload: Annotated[
            str,
            Field(description="which sizes: cpu (default), small, tiny, paper, or the problem's"),
        ] = "cpu",
        backend: Backend = DEFAULT_BACKEND,
    ) -> CallToolResult:
        """Check a kernel against the problem's reference and time it, in sandboxed workers.
        Returns the evaluation: status (PASSED, COMPILE_ERROR, REJECTED, INCORRECT, CRASH,
        TIMEOUT, SUSPICIOUS) with its error and the kernel's output (log), latency_s (median),
        pct_of_peak (roofline time / latency; 1.0 = at the hardware's limit), bound, noise,
        max_rel_err; profile (the same as text, with each ceiling's utilization and the
        compiler's remarks); and run: where it was recorded (run id, iteration, best so far).
        A failing kernel is a result, not an error."""
        return answer(tools.evaluate_kernel, problem, source, workload, backend)

    @server.tool(annotations=reading)
    def search_memory(
        query: Annotated[str, Field(description="free text: a technique, a problem, a symptom")],
        k: Annotated[int, Field(description="how many lessons, at most")] = 8,
        backend: Backend = DEFAULT_BACKEND,
    ) -> CallToolResult:
        """Lessons earlier optimization runs of this workspace learned (a title, when and why it
        helps, before/after snippets, the measured speedup), best match first."""
        return answer(tools.search_memory, query, k, backend)

    return server


def answer(tool: Callable[..., Any], *args: Any) -> CallToolResult:
    """``tool(*args)`` as one JSON text block (and as structured content); a user's mistake as a
    ``ToolError`` with accelopt's sentence."""
    try:
        payload = tool(*args)
    except (UserError, UnknownProblemError) as exc:
        raise ToolError(str(exc)) from None
    structured = payload if isinstance(payload, dict) else {"result": payload}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, indent=2))],
        structured_content=structured,
    )


def serve(tools: McpTools, store: Store) -> None:
    """Serve ``tools`` on stdio until the client closes stdin or a signal ends it; its runs
    are then marked (``McpTools.close``) and the store is closed."""
    print(
        f"accelopt mcp: serving workspace {tools.workspace} on stdio (logs on stderr)",
        file=sys.stderr,
        flush=True,
    )
    if settings.serve_triton():
        print(TRITON_WARNING, file=sys.stderr, flush=True)
    status = RunStatus.FAILED
    try:
        anyio.run(_serve, build_server(tools), tools, store)
        status = RunStatus.FINISHED
    except KeyboardInterrupt:
        status = RunStatus.INTERRUPTED
        raise
    finally:
        # the client waits a little after closing stdin, then sends SIGTERM: finish first
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        tools.close(status)
        store.close()


async def _serve(server: MCPServer, tools: McpTools, store: Store) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(_end_on_signal, tools, store)
        await server.run_stdio_async()
        group.cancel_scope.cancel()


async def _end_on_signal(tools: McpTools, store: Store) -> None:
    """On SIGTERM or SIGINT: mark the runs, stop the profilers, exit. Cancelling the server
    instead would wait for stdin's reader thread, blocked until the client writes or closes."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            terminated = signum == signal.SIGTERM
            status = RunStatus.FINISHED if terminated else RunStatus.INTERRUPTED
            await anyio.to_thread.run_sync(tools.close, status)
            store.close()
            print(f"accelopt mcp: ended by signal {signum}", file=sys.stderr, flush=True)
            os._exit(0 if terminated else 130)
