"""``accelopt llm check``: one tiny request per agent, to see that every endpoint answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from accelopt.cli.output import JsonOption, console, err_console, shows_table, write_json
from accelopt.llm.client import LLMClient
from accelopt.llm.config import AGENTS, Endpoint, load_config
from accelopt.llm.records import LLMCall

app = typer.Typer(help="The LLM endpoints of the agents.", no_args_is_help=True)

PROBE = [{"role": "user", "content": "Reply with the single word OK."}]


def explain(call: LLMCall, endpoint: Endpoint) -> str:
    """One sentence a user can act on, from the failed call's error kind."""
    kind = call.error.split(":", 1)[0]
    key = endpoint.api_key_env or "ACCELOPT_LLM_API_KEY"
    if kind in {"APIConnectionError", "APITimeoutError"}:
        return (
            f"cannot reach {endpoint.base_url}: is the server running, and is the base URL right "
            "(it usually ends in /v1)?"
        )
    if kind in {"AuthenticationError", "PermissionDeniedError"}:
        return f"{endpoint.base_url} refused the API key: check the variable {key}"
    if kind == "NotFoundError":
        return f"{endpoint.base_url} does not serve model {endpoint.model!r}, or the URL is wrong"
    if kind == "RateLimitError":
        return f"{endpoint.base_url} is rate limiting: try again later or lower the concurrency"
    return f"{endpoint.model} at {endpoint.base_url} failed: {call.error}"


async def _probe(client: LLMClient) -> list[LLMCall]:
    try:
        return list(await asyncio.gather(*(client.complete(a, PROBE) for a in AGENTS)))
    finally:
        await client.aclose()


def _row(call: LLMCall, endpoint: Endpoint) -> dict[str, Any]:
    return {
        "agent": call.agent,
        "model": call.model,
        "base_url": call.base_url,
        "ok": call.ok,
        "latency_s": call.latency_s,
        "tokens_in": call.tokens_in,
        "tokens_out": call.tokens_out,
        "cost_usd": call.cost_usd,
        "error": "" if call.ok else explain(call, endpoint),
    }


@app.command("check")
def check_command(
    config: Annotated[
        Path | None, typer.Option("--config", help="YAML config (default: ./accelopt.yaml)")
    ] = None,
    json_path: JsonOption = None,
) -> None:
    """Send one tiny request per agent; print model, latency, tokens and cost, or what is wrong."""
    cfg = load_config(config)
    client = LLMClient(cfg, max_retries=1)
    calls = asyncio.run(_probe(client))
    rows = [_row(call, client.endpoints[call.agent]) for call in calls]
    if shows_table(json_path):
        console.print(_table(rows))
    for row in rows:
        if not row["ok"]:
            err_console.print(f"[red]error:[/red] {row['agent']}: {row['error']}", highlight=False)
    write_json(json_path, rows)
    if not all(row["ok"] for row in rows):
        raise typer.Exit(1)


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="LLM endpoints", title_justify="left")
    for col in ["agent", "model", "base URL", "status", "latency s", "tokens in/out", "cost $"]:
        table.add_column(col)
    for r in rows:
        cost = "unknown" if r["cost_usd"] is None else f"{r['cost_usd']:.6f}"
        table.add_row(
            r["agent"],
            r["model"],
            r["base_url"],
            "[green]ok[/green]" if r["ok"] else "[red]failed[/red]",
            f"{r['latency_s']:.2f}",
            f"{r['tokens_in']}/{r['tokens_out']}",
            cost if r["ok"] else "—",
        )
    return table
