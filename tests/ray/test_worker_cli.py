"""``accelopt worker``: the ``ray start`` command it builds (no Ray started here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt.cli.worker import parse_devices, ray_start_command
from accelopt.errors import UserError


def test_devices_become_counts_per_kind():
    assert parse_devices(["cpu:1"]) == {"cpu": 1}
    assert parse_devices(["cpu:1", "cpu:2"]) == {"cpu": 3}
    assert parse_devices(["cpu:0"]) == {"cpu": 0}  # a node that only coordinates
    with pytest.raises(UserError, match="unknown device kind"):
        parse_devices(["tpu:1"])
    with pytest.raises(UserError, match="write KIND:COUNT"):
        parse_devices(["cpu"])


def test_the_head_declares_its_devices_as_resources():
    command = ray_start_command(
        head=True, address=None, port=6390, devices={"cpu": 1},
        node_ip_address="127.0.0.1", temp_dir=Path("/tmp/r"),
    )  # fmt: skip
    assert command[:4] == [sys.executable, "-m", "ray.scripts.scripts", "start"]
    assert "--head" in command and "--port=6390" in command and "--block" in command
    resources = next(a for a in command if a.startswith("--resources="))
    assert json.loads(resources.removeprefix("--resources=")) == {"accelopt_cpu": 1}
    assert "--node-ip-address=127.0.0.1" in command and "--temp-dir=/tmp/r" in command
    assert "--disable-usage-stats" in command


def test_a_worker_joins_by_address():
    command = ray_start_command(
        head=False, address="10.0.0.5:6379", port=6379, devices={"cpu": 2}, block=False
    )
    assert "--address=10.0.0.5:6379" in command and "--head" not in command
    assert "--block" not in command
    assert '--resources={"accelopt_cpu": 2}' in command


def test_head_or_address_exactly_one():
    for head, address in [(True, "h:1"), (False, None)]:
        with pytest.raises(UserError, match="either --head"):
            ray_start_command(head=head, address=address, port=1, devices={"cpu": 1})


def test_the_command_line_dry_run():
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt.cli.worker", "--address", "h:6379", "--dry-run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ray.scripts.scripts start --address=h:6379" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "accelopt.cli.worker", "--head", "--devices", "gpu", "--dry-run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "unknown device kind" in bad.stderr
