"""``accelopt mcp``: accelopt's tools served to a coding agent over MCP (stdio).

``tools`` holds the logic as plain Python (an ``McpTools``: the store, the profilers, the runs the
agent's evaluations are recorded in), testable without MCP; ``server`` wires it to the MCP SDK.
"""
