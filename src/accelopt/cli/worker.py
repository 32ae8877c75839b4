"""``accelopt worker``: start or join a Ray node that declares its devices, for ``--profiler ray``.

    accelopt worker --head                        # the first machine: starts the cluster
    accelopt worker --address HEAD_IP:6379        # every other machine: joins it

It runs ``ray start`` (``python -m ray.scripts.scripts start``: the Ray of this environment) with
the node's devices declared as custom resources: ``--devices cpu:1`` becomes
``--resources '{"accelopt_cpu": 1}'``. The ray profiler starts one device actor per declared
device, each asking for one unit, so a device is never shared by two actors; ``--devices cpu:0``
makes a node that only coordinates. For the CPU backend a device is the whole machine (its kernels
use every core), so declare ``cpu:1``. For the triton backend a device is one GPU: declare
``triton:N`` for N GPUs; each actor also asks Ray for one GPU, so Ray gives it its own
``CUDA_VISIBLE_DEVICES``.

By default the command stays in the foreground until SIGTERM, SIGINT (Ctrl-C) or SIGHUP, which
stops the node and every process it started (``ray_node``; ``--no-block`` returns at once: stop
the node later with ``ray stop``). A head given a loopback ``--node-ip-address`` listens on
loopback only. The node's Ray processes, and so the device actors, inherit this command's
environment: ``ACCELOPT_CACHE_DIR`` set here is where that machine keeps its compiled kernels and
its device lock. Ray's usage statistics stay off unless ``RAY_USAGE_STATS_ENABLED=1`` is set.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from accelopt import settings
from accelopt.cli.ray_node import LOOPBACK_SWITCH, is_loopback, node_environment, run_node
from accelopt.errors import UserError

DEVICE_KINDS = ("cpu", "triton")  # hardware backends a node can declare (triton: one per GPU)
DEFAULT_PORT = 6379


def parse_devices(specs: list[str]) -> dict[str, int]:
    """``["cpu:1"]`` -> ``{"cpu": 1}``; one sentence saying what is wrong otherwise."""
    devices: dict[str, int] = {}
    for spec in specs:
        kind, _, count = spec.partition(":")
        if kind not in DEVICE_KINDS:
            kinds = ", ".join(DEVICE_KINDS)
            raise UserError(f"unknown device kind in --devices {spec!r}; the kinds are: {kinds}")
        if not count.isdigit():
            raise UserError(f"--devices {spec!r}: write KIND:COUNT, e.g. cpu:1")
        devices[kind] = devices.get(kind, 0) + int(count)
    return devices


def ray_start_command(
    *,
    head: bool,
    address: str | None,
    port: int,
    devices: dict[str, int],
    node_ip_address: str | None = None,
    temp_dir: Path | None = None,
    block: bool = True,
) -> list[str]:
    """The ``ray start`` command line for this node."""
    from accelopt.profiling.cluster.fleet import device_resource

    if head == (address is not None):
        raise UserError("give either --head (start a cluster) or --address HOST:PORT (join one)")
    command = [sys.executable, "-m", "ray.scripts.scripts", "start"]
    if head:
        command += ["--head", f"--port={port}", "--include-dashboard=false"]
    else:
        command += [f"--address={address}"]
    resources = {device_resource(kind): count for kind, count in devices.items()}
    command += [f"--resources={json.dumps(resources)}", "--disable-usage-stats"]
    if node_ip_address:
        # Ray's servers bind loopback only for exactly 127.0.0.1 (see ray_node)
        node_ip = "127.0.0.1" if head and is_loopback(node_ip_address) else node_ip_address
        command += [f"--node-ip-address={node_ip}"]
    if temp_dir is not None:
        command += [f"--temp-dir={temp_dir}"]
    if block:
        command += ["--block"]
    return command


def _preflight(devices: dict[str, int]) -> None:
    if importlib.util.find_spec("ray") is None:
        raise UserError("accelopt worker needs Ray: pip install 'accelopt[ray]'")
    from accelopt.backends.base import get_backend

    for kind, count in devices.items():
        if count:
            get_backend(kind).preflight()  # a node without a compiler fails here, not mid-run


def _next_steps(head: bool, address: str | None, port: int, node_ip: str | None) -> str:
    cluster = address or f"{node_ip or '<this machine>'}:{port}"
    lines = [f"Ray node for accelopt, cluster {cluster}."]
    if head and not is_loopback(node_ip):
        lines.append(f"  other machines join with: accelopt worker --address {cluster}")
    lines.append(
        f"  run a search on it with:  accelopt optimize PROBLEM --profiler ray "
        f"--ray-address {cluster}"
    )
    if head and is_loopback(node_ip):
        lines.append(
            f"  it listens on loopback only (no other machine can join): set "
            f"{LOOPBACK_SWITCH}=0 for the commands that use it"
        )
    return "\n".join(lines)


_Head = Annotated[bool, typer.Option("--head", help="start a new cluster on this machine")]
_Address = Annotated[str | None, typer.Option(help="join the cluster whose head is at HOST:PORT")]
_Port = Annotated[int, typer.Option(help="the head's port (with --head)")]
_Devices = Annotated[
    list[str] | None,
    typer.Option(
        "--devices", help="devices this node offers, KIND:COUNT: cpu:1, triton:GPUS (default cpu:1)"
    ),
]
_NodeIp = Annotated[str | None, typer.Option(help="the address other machines reach this node at")]
_TempDir = Annotated[Path | None, typer.Option(help="Ray's session files (default /tmp/ray)")]
_Block = Annotated[
    bool, typer.Option("--block/--no-block", help="stay in the foreground until interrupted")
]
_DryRun = Annotated[
    bool, typer.Option("--dry-run", help="print the `ray start` command line, run nothing")
]


def worker_command(
    head: _Head = False,
    address: _Address = None,
    port: _Port = DEFAULT_PORT,
    devices: _Devices = None,
    node_ip_address: _NodeIp = None,
    temp_dir: _TempDir = None,
    block: _Block = True,
    dry_run: _DryRun = False,
) -> None:
    """Start or join a Ray node that offers this machine's devices to `--profiler ray`."""
    declared = parse_devices(devices or ["cpu:1"])
    command = ray_start_command(
        head=head,
        address=address,
        port=port,
        devices=declared,
        node_ip_address=node_ip_address,
        temp_dir=temp_dir,
        block=block,
    )
    base = settings.environment()
    env = node_environment(base, head, node_ip_address)
    if dry_run:  # with the variables this command sets
        typer.echo(shlex.join([f"{k}={v}" for k, v in env.items() if base.get(k) != v] + command))
        return
    _preflight(declared)
    typer.echo(_next_steps(head, address, port, node_ip_address))
    if block:
        code = run_node(command, env)  # None: stopped by a signal, the node with it
    else:
        code = subprocess.run(command, env=env, check=False).returncode
    if code:
        raise UserError(f"`ray start` failed (exit status {code}); its output above says why")


def main() -> None:
    """``python -m accelopt.cli.worker``: the command on its own (as ``accelopt worker``)."""
    from rich.markup import escape

    from accelopt.cli.output import err_console

    try:
        typer.run(worker_command)
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
