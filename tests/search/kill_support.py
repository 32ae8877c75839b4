"""What the kill-and-resume tests share: scripted agents that answer as a function of the prompt
alone, and one driver session (kill_driver.py) SIGKILLed as it enters a chosen phase."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from agents_pool import VARIANTS, variant

from accelopt.testing.scripted import RecordedRequest, Reply

DRIVER = Path(__file__).parent / "kill_driver.py"
# the plan asked for, by the variant the planner is shown: from the slow start a compile error,
# which the fixer repairs into a much faster kernel; from that one a much slower one. Every
# verdict is far beyond the noise, so that two runs decide alike.
NEXT = {"slow": "broken", "fixed": "slower"}
DELAY_S = 0.15  # every reply takes this long: a kill lands while calls are in flight


def shown_variant(prompt: str) -> str:
    """Which variant's source is the "current kernel" of a planner prompt."""
    current = prompt.split("# Current kernel", 1)[1]
    for path in sorted(VARIANTS.glob("matmul_*.c")):
        first = path.read_text().splitlines()[0]
        if first in current.split("# Its profile")[0]:
            return path.stem.removeprefix("matmul_")
    raise AssertionError("the planner was shown no known variant")


def agents(request: RecordedRequest) -> Reply:
    prompt = request.messages[-1]["content"]
    if request.model == "planner":
        name = NEXT.get(shown_variant(prompt), "good")
        plan = f"TITLE: variant {name}\nSTEPS:\n1. Rewrite as variant {name}.\n"
        return Reply(plan, delay_s=DELAY_S)
    if request.model == "executor":
        name = re.search(r"Plan to carry out: variant (\w+)", prompt).group(1)  # type: ignore[union-attr]
        return Reply(f"```c\n{variant(name)}```\n", delay_s=DELAY_S)
    if request.model == "fixer":
        return Reply(f"```c\n{variant('fixed')}```\n", delay_s=DELAY_S)
    speedup = re.search(r"measured ([\d.]+)x", prompt).group(1)  # type: ignore[union-attr]
    return Reply(f"TITLE: loop order {speedup}\nLESSON: i-k-j streams rows.\n", delay_s=DELAY_S)


def write_config(path: Path, base_url: str, max_usd: float, price_in: float = 1.0,
                 price_out: float = 2.0, max_tokens: int | None = None) -> Path:  # fmt: skip
    models = "".join(
        f"  {a}: {{model: {a}}}\n" for a in ("planner", "executor", "fixer", "summarizer")
    )
    limit = f", max_tokens: {max_tokens}" if max_tokens else ""
    path.write_text(
        f"budget: {{max_usd: {max_usd}}}\nllm:\n"
        f"  default: {{base_url: '{base_url}', model: m, max_retries: 0,"
        f" price_in: {price_in}, price_out: {price_out}{limit}}}\n" + models
    )
    return path


def session(
    setup, workspace: Path, phases: Path, resume: str | None = None, kill_at: str = "",
    search: dict | None = None, fake: bool = False, workloads: str = "",
) -> int:  # fmt: skip
    """One driver process; with ``kill_at`` ("learning 1"), SIGKILLed when it enters that phase;
    ``search``: SearchConfig fields (default: the driver's); ``fake``: evaluations from
    fake_runner.py; ``workloads``: a new run's tuned workloads ("small,tiny"). Returns its exit
    status."""
    _root, config, hardware, cache = setup
    env = {**os.environ, "ACCELOPT_CACHE_DIR": str(cache)}
    argv = [sys.executable, str(DRIVER), str(workspace), str(config), str(hardware), str(phases)]
    argv += ["--resume", resume] if resume else []
    argv += ["--search", json.dumps(search)] if search else []
    argv += ["--fake"] if fake else []
    argv += ["--workloads", workloads] if workloads else []
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        while kill_at and proc.poll() is None:
            if phases.exists() and kill_at in phases.read_text().splitlines():
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
        return proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def run_id(phases: Path) -> str:
    return next(
        line.split()[1] for line in phases.read_text().splitlines() if line.startswith("run ")
    )
