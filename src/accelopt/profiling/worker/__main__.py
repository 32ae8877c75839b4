"""``python -m accelopt.profiling.worker FD [LOCK]``: a worker process (``serve.run``).

It isolates itself before it imports anything else: the fallback of ``sandbox.isolate_network``
(a user namespace, for a user who may not make a network namespace alone) needs a process with a
single thread, and NumPy, which the typed protocol's records import, starts threads. So this
module imports only ``sandbox`` (the standard library) until the worker is isolated.
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelopt.profiling.worker import sandbox


def main(argv: list[str]) -> int:
    fd = int(argv[1])
    lock = Path(argv[2]) if len(argv) > 2 else None
    network_isolated = sandbox.isolate_network()  # before any thread: unshare needs one
    sandbox.limit_process()
    sandbox.watch_parent()
    from accelopt.profiling.worker.serve import run  # after isolating: it imports NumPy

    return run(fd, lock, network_isolated)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
