"""``accelopt mcp``: accelopt's tools for a coding agent, over MCP on stdio
(``accelopt.mcp_server``)."""

from __future__ import annotations

from accelopt.cli import common
from accelopt.cli.optimize import open_store
from accelopt.errors import UserError


def mcp_command(workspace: common.WorkspaceOption = None) -> None:
    """Serve accelopt to a coding agent (Claude Code, Codex, Cursor) over MCP on stdio: the
    problems, sandboxed evaluations against the roofline, and the optimization memory. Each
    kernel the agent evaluates is recorded in the workspace as a run (strategy agent)."""
    try:
        import mcp.server.mcpserver  # noqa: F401  (the SDK, an optional dependency)
    except ImportError:
        raise UserError("accelopt mcp needs the MCP SDK: pip install 'accelopt[serve]'") from None
    from accelopt.mcp_server.server import serve
    from accelopt.mcp_server.tools import McpTools

    store = open_store(workspace)
    serve(McpTools(store.path.parent, store), store)
