"""``accelopt model optimize`` with an endpoint: each hot part of the model that no problem
matches is carved out as a KernelBench file (``model/carve.py``), imported as a workspace problem
and searched by the agents (``accelopt optimize``); the backend then matches it like any imported
problem. Without an endpoint that answers, one sentence says what it would add."""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelopt.cli.output import err_console
from accelopt.errors import UserError
from accelopt.llm.config import AGENTS, load_config
from accelopt.llm.preflight import check_endpoints
from accelopt.model.carve import kernelbench_file
from accelopt.model.profile import op_label
from accelopt.model.records import Unmatched
from accelopt.problems.kernelbench.importer import import_file
from accelopt.problems.loader import problems_dir, workspace_names


def endpoint_problem(config: Path | None) -> str:
    """ "" when every agent's endpoint answers; else why not, in one sentence."""
    try:
        cfg = load_config(config)
        asyncio.run(check_endpoints([cfg.endpoint(a) for a in AGENTS], timeout_s=5.0))
    except UserError as exc:
        return str(exc)
    return ""


def carved_problem(part: Unmatched, graph: Any, workspace: Path, origin: str) -> str | None:
    """The workspace problem of ``part`` (its largest call that can be written), imported now
    unless it already was; None when no call of it can be written as a problem."""
    nodes = [
        n
        for n in graph.graph.nodes
        if n.op in ("call_function", "call_method") and op_label(n) == part.label
    ]
    for node in sorted(nodes, key=lambda n: -_elements(n)):
        text = kernelbench_file(node, origin)
        if text is None:
            continue
        label = re.sub(r"[^a-z0-9_]", "_", part.label.lower())[:40]
        name = f"model_{label}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        if name not in workspace_names(workspace):
            path = workspace / "model" / "carved" / f"{name}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            import_file(path, problems_dir(workspace), name=name)
        return name
    return None


def _elements(node: Any) -> int:
    value = node.meta.get("example_value")
    return int(value.numel()) if hasattr(value, "numel") else 0


def search_unmatched(
    parts: Sequence[Unmatched],
    graph: Any,
    workspace: Path,
    config: Path | None,
    iterations: int,
    limit: int,
    origin: str,
) -> list[str]:
    """Import and search up to ``limit`` hot unmatched parts; a note on each."""
    reason = endpoint_problem(config)
    if reason:
        return [f"the unmatched parts were not imported and searched: {reason}"]
    notes = []
    for part in parts[:limit]:
        name = carved_problem(part, graph, workspace, origin)
        if name is None:
            notes.append(f"{part.label}: no call of it could be written as a problem")
            continue
        say = f"searching a kernel for {part.label} ({name}, accelopt optimize)…"
        options = ["--iterations", str(iterations)]
        options += ["--config", str(config)] if config is not None else []
        failed = run_optimize(say, name, workspace, *options)
        notes.append(
            f"{part.label}: imported as {name}; its search failed ({failed})"
            if failed is not None
            else f"{part.label}: imported as {name} and searched"
        )
    return notes


def run_optimize(say: str, problem: str, workspace: Path, *options: str) -> str | None:
    """``accelopt optimize problem`` in a process of its own, in ``workspace`` and without the
    reference kinds (``say`` is told first, on stderr): None when it finished, else the last
    line it wrote."""
    err_console.print(say, highlight=False, markup=False)
    argv = [sys.executable, "-m", "accelopt", "optimize", problem, "--workspace", str(workspace)]
    done = subprocess.run([*argv, "--no-references", *options], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    return ((done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"])[0]
