"""Triton attack kernels made from ``tests/backends/triton_attacks``, aimed at planted targets,
and the two drivers that run them (beside their judge, or in their own process). Used by
``tests/backends/test_triton_containment.py`` and ``benchmarks/red_team.py``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

ATTACKS = Path(__file__).parents[1] / "backends" / "triton_attacks"
sys.path.insert(0, str(ATTACKS))
from harms import HARMS  # noqa: E402

AT_CALL = ("reads_files", "opens_socket", "starts_process", "writes_file")


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


def run_driver(
    script: str, args: list[str], stem: Path, api_key: str
) -> dict[str, dict[str, object]]:
    """Run a driver of ``triton_attacks`` on ``args`` (its log in STEM.log, its rows in
    STEM.jsonl) with ``api_key`` in its environment; its rows by kernel name."""
    results, log = stem.with_suffix(".jsonl"), stem.with_suffix(".log")
    env = {**os.environ, "ACCELOPT_TEST_API_KEY": api_key, "TRITON_INTERPRET": "1"}
    with log.open("w") as out:
        subprocess.run([sys.executable, str(ATTACKS / script), str(results), *args], env=env,
                       stdout=out, stderr=subprocess.STDOUT, timeout=600, check=True)  # fmt: skip
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return {str(row["name"]): row for row in rows}
