"""Building an exported C kernel for sizes it was not built for, where it is used (part of the
export runtime: ``runtime.py`` loads this file from beside itself; standard library only)."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

COMPILE_TIMEOUT_S = 300


def build_object(kernel: Any, key: tuple[int, ...]) -> Path:
    """Build the object for these sizes with the flags the kernel was evaluated with, in the
    folder's build/ (or a cache of the user's where the folder is read-only). The kernel defines
    ``kernel``; ``-Dkernel=<symbol>`` gives it the export's own C name, as the exported objects."""
    build = kernel.manifest["build"]
    symbol = kernel.manifest.get("symbol")  # the export's C name for `kernel` (an old one: none)
    identity = f"{machine_fingerprint()} {key} {kernel.manifest['kernel_hash']} {symbol}"
    tag = hashlib.sha256(identity.encode()).hexdigest()[:16]
    target = _build_dir(kernel.folder, kernel.manifest["kernel_hash"]) / f"{tag}.so"
    if target.is_file():
        return target
    compiler = os.environ.get("CC") or shutil.which(build["compiler"]) or "cc"
    target_flags = _target_flags(build)
    defines = [f"-D{p}={v}" for p, v in zip(kernel.params, key, strict=True)]
    defines += [f"-Dkernel={symbol}"] if symbol else []
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        out = Path(scratch) / "kernel.so"
        command = [
            compiler,
            *build["flags"],
            *target_flags,
            *defines,
            "-include",
            str(kernel.folder / kernel.manifest["header"]),
            "-o",
            str(out),
            str(kernel.folder / kernel.manifest["source"]),
            *build["libs"],
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-12:])
            sizes = ", ".join(f"{p}={v}" for p, v in zip(kernel.params, key, strict=True))
            raise RuntimeError(
                f"building {kernel.name} for {sizes} failed ({' '.join(command)}):\n{tail}"
            )
        os.replace(out, target)
    return target


def machine_fingerprint() -> str:
    """What an object built with -march=native depends on: the architecture, the CPU's model
    and its feature flags. An object built elsewhere is rebuilt here, never loaded."""
    parts = [platform.machine()]
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for key in ("model name", "flags", "Features", "CPU part"):
        line = next((ln for ln in text.splitlines() if ln.startswith(key)), "")
        parts.append(line.split(":", 1)[-1].strip())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _target_flags(build: dict[str, Any]) -> list[str]:
    """The target the kernel was evaluated for (-march=native, or a portable one such as
    -march=x86-64-v3) where this machine has its architecture; else this machine's own."""
    arch = platform.machine().replace("arm64", "aarch64").replace("AMD64", "x86_64")
    if build.get("target") and build.get("arch") == arch:
        return list(build["target"])
    return ["-mcpu=native"] if arch == "aarch64" else ["-march=native"]


def _build_dir(folder: Path, kernel_hash: str) -> Path:
    for place in (folder / "build", _user_cache() / kernel_hash[:16]):
        try:
            place.mkdir(parents=True, exist_ok=True)
            probe = place / f".write-test-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
            return place
        except OSError:
            continue
    raise RuntimeError(f"no writable place to build {folder.name}'s kernel: set XDG_CACHE_HOME")


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accelopt-export"
