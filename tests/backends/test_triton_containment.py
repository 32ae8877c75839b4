"""A Triton kernel is hostile code too: attacks, at import and at call, each run twice.

- The old way (``triton_attacks/run_in_process.py``): imported and called inside the process that
  judges it, as the worker did before; every attack does its harm there (the first test).
- The way now (``triton_attacks/run_contained.py``): evaluated as a worker does, in the kernel's
  own contained process, with the static checks switched off (each kernel stands for one that got
  past them): none passes, and none reads or changes anything outside its process.
Triton runs in its CPU interpreter here; the layers are the same on a GPU (docs/security.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from accelopt.backends.triton import checks

ATTACKS = Path(__file__).parent / "triton_attacks"
sys.path.insert(0, str(ATTACKS))
from harms import HARMS  # noqa: E402

API_KEY = "sk-canary-5f1e0c7a"  # in the judging process's environment, as a user's key is
AT_CALL = ("reads_files", "opens_socket", "starts_process", "writes_file")
REFUSED_BY_THE_FILTER = ("opens_socket", "starts_process", "writes_file", "signals_process",
                         "harms_from_a_thread")  # fmt: skip

pytestmark = [pytest.mark.slow]


@dataclass
class Plant:
    """What one run's attacks aim at: canaries, files that must not appear, a listener, victims."""

    root: Path
    received: list[bytes] = field(default_factory=list)
    victims: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(mode=0o755)
        self.root.chmod(0o755)  # nobody could traverse it: only the sandbox keeps it out
        (self.root / "public").write_text("PUBLIC-CANARY-4821")
        (self.root / "public").chmod(0o644)
        (self.root / "private").write_text("PRIVATE-CANARY-9377")
        (self.root / "private").chmod(0o600)
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(1 << 10))

    def kernel(self, harm: str, when: str) -> Path:
        name = f"{harm}_at_{when}"
        doc, body = HARMS[harm]
        victim = subprocess.Popen(["sleep", "600"])
        self.victims[name] = victim
        template = (ATTACKS / "_template.py").read_text()
        source = template.replace("ATTACK_DOC", f"Attack: {doc}.").replace("@WHEN@", when)
        source = source.replace("    pass  # HARM\n", body.lstrip("\n"))
        return self.write(name, self.fill(source, name, victim.pid))

    def fill(self, source: str, name: str, victim: int = 0) -> str:
        port = self.listener.getsockname()[1]
        places = {"@PUBLIC@": self.root / "public", "@PRIVATE@": self.root / "private",
                  "@MARKER@": self.root / f"marker_{name}", "@PORT@": port,
                  "@VICTIM@": victim}  # fmt: skip
        for key, value in places.items():
            source = source.replace(key, str(value))
        return source

    def write(self, name: str, source: str) -> Path:
        path = self.root / f"{name}.py"
        path.write_text(source)
        return path

    def attacks(self) -> list[Path]:
        made = [self.kernel(h, "import") for h in HARMS] + [self.kernel(h, "call") for h in AT_CALL]
        for extra in ("forges_verdict", "held_out"):
            made.append(self.write(extra, self.fill((ATTACKS / f"{extra}.py").read_text(), extra)))
        return made

    def markers(self) -> list[str]:
        return sorted(p.name for p in self.root.glob("marker_*"))

    def close(self) -> None:
        self.listener.close()
        for victim in self.victims.values():
            victim.kill()
            victim.wait()


def _run(script: str, args: list[str], results: Path, log: Path) -> dict[str, dict[str, object]]:
    env = {**os.environ, "ACCELOPT_TEST_API_KEY": API_KEY, "TRITON_INTERPRET": "1"}
    with log.open("w") as out:
        subprocess.run([sys.executable, str(ATTACKS / script), str(results), *args], env=env,
                       stdout=out, stderr=subprocess.STDOUT, timeout=600, check=True)  # fmt: skip
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return {str(row["name"]): row for row in rows}


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
        old_rows = _run("run_in_process.py", old_kernels, base / "old.jsonl", base / "old.log")
        new_rows = _run("run_contained.py", [lock, *new_kernels], base / "new.jsonl",
                        base / "new.log")  # fmt: skip
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
