"""A Triton kernel is hostile code too: attacks, at import and at call, each run twice.

- The old way (``triton_attacks/run_in_process.py``): imported and called inside the process that
  judges it, as the worker did before; every attack does its harm there (the first test).
- The way now (``triton_attacks/run_contained.py``): evaluated as a worker does, in the kernel's
  own contained process, with the static checks switched off (each kernel stands for one that got
  past them): none passes, and none reads or changes anything outside its process.
Triton runs in its CPU interpreter here; the layers are the same on a GPU (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from triton_plant import ATTACKS, Plant, run_driver

from accelopt.backends.triton import checks

API_KEY = "sk-canary-5f1e0c7a"  # in the judging process's environment, as a user's key is
REFUSED_BY_THE_FILTER = ("opens_socket", "starts_process", "writes_file", "signals_process",
                         "harms_from_a_thread")  # fmt: skip

pytestmark = [pytest.mark.slow]


@dataclass
class Outcome:
    plant: Plant
    results: dict[str, dict[str, object]]
    log: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Outcome, Outcome]]:
    base = tmp_path_factory.mktemp("triton_attacks")
    base.chmod(0o755)
    old, new = Plant(base / "old"), Plant(base / "new")
    lock = str(base / "device.lock")
    try:
        old_kernels = [str(p) for p in old.attacks()]
        new_kernels = [str(p) for p in new.attacks()]
        old_rows = run_driver("run_in_process.py", old_kernels, base / "old", API_KEY)
        new_rows = run_driver("run_contained.py", [lock, *new_kernels], base / "new", API_KEY)
        yield (Outcome(old, old_rows, (base / "old.log").read_text()),
               Outcome(new, new_rows, (base / "new.log").read_text()))  # fmt: skip
    finally:
        old.close()
        new.close()


def test_every_attack_does_its_harm_beside_its_judge(runs: tuple[Outcome, Outcome]) -> None:
    old, _ = runs
    assert not any(row["raised"] for row in old.results.values()), old.results
    assert "PUBLIC-CANARY-4821" in old.log and "PRIVATE-CANARY-9377" in old.log
    assert API_KEY in old.log  # its own environment and its parent's
    assert old.plant.received.count(b"exfiltrated") == 3  # twice at import (one by a thread)
    assert old.plant.markers() == [
        "marker_held_out", "marker_starts_process_at_call", "marker_starts_process_at_import",
        "marker_writes_file_at_call", "marker_writes_file_at_import",
    ]  # fmt: skip
    assert API_KEY.encode() in (old.plant.root / "marker_held_out").read_bytes()
    assert old.plant.victims["signals_process_at_import"].wait(timeout=10) == -9
    assert old.results["forges_verdict"]["nan_output_passes"] is True  # the forged verdict


def test_no_attack_passes_in_its_own_process(runs: tuple[Outcome, Outcome]) -> None:
    _, new = runs
    passed = [name for name, row in new.results.items() if row["status"] is None]
    assert not passed, new.results
    assert new.results["forges_verdict"]["status"] == "INCORRECT"
    for name, row in new.results.items():
        if name.rsplit("_at_", 1)[0] in REFUSED_BY_THE_FILTER:
            assert row["status"] == "REJECTED", (name, row)
            assert "system call the sandbox forbids" in str(row["error"]), (name, row)


def test_no_attack_reads_or_changes_anything_outside_its_process(
    runs: tuple[Outcome, Outcome],
) -> None:
    _, new = runs
    for secret in ("PUBLIC-CANARY-4821", "PRIVATE-CANARY-9377", API_KEY, "root:x:0:0"):
        assert secret not in new.log
    assert new.plant.received == []
    assert new.plant.markers() == []
    assert all(victim.poll() is None for victim in new.plant.victims.values())


def test_a_refused_call_names_the_kernels_line(runs: tuple[Outcome, Outcome]) -> None:
    _, new = runs
    assert "kernel.py line" in str(new.results["opens_socket_at_call"]["error"])


def test_the_held_out_kernel_is_also_refused_by_the_static_checks(tmp_path: Path) -> None:
    source = (ATTACKS / "held_out.py").read_text()
    assert checks.check_source(source) is not None
