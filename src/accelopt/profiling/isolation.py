"""The isolation a worker process gets on this machine, for those who report it (``accelopt
hardware`` shows it beside the layers of a C kernel's process).

Asked of a fresh process, as a worker starts: the probe runs the worker's own
``sandbox.isolate_network`` in a child interpreter of one thread (``unshare`` of a user namespace
needs one). Like the pool, which starts its workers as ``python -m accelopt.profiling.worker``, this
side reaches the worker across the process boundary and imports nothing of it.
"""

from __future__ import annotations

import subprocess
import sys

_NETWORK_PROBE = (
    "import sys; from accelopt.profiling.worker.sandbox import isolate_network; "
    "sys.exit(0 if isolate_network() else 1)"
)
PROBE_TIMEOUT_S = 60


def worker_network() -> str:
    """The network a worker process gets here: ``none`` when it can enter an empty network
    namespace, as workers do, ``host`` when it cannot (the host's namespace is kept)."""
    probe = subprocess.run(
        [sys.executable, "-c", _NETWORK_PROBE],
        capture_output=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    return "none" if probe.returncode == 0 else "host"
