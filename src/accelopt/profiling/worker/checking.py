"""Checking a kernel's work in the worker: before the timing, its calls on the correctness seeds
(``SeedCheck``); after it, the timed calls the audit kept (``verify_kept``). Each reads the
arguments back and judges them (``correctness.py``): the inputs as the harness wrote them, the
outputs against the float64 reference."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from accelopt.backends.device import Buffer
from accelopt.backends.status import Status
from accelopt.profiling.worker.arguments import Arguments
from accelopt.profiling.worker.correctness import OutputCheck, check_outputs, modified_input
from accelopt.profiling.worker.freshness import Audit, Freshness
from accelopt.profiling.worker.hostmemory import Lease
from accelopt.profiling.worker.protocol import KernelResult
from accelopt.profiling.worker.references import Arrays
from accelopt.profiling.worker.steps import Failed, Report

Call = Callable[[list[Buffer], str], None]  # one checked call of the kernel (what it is, named)


class SeedCheck:
    """The correctness check: the kernel called once per seed, in the same fenced buffers with
    fresh contents each time (a kernel that caches by address fails), each call's arguments
    judged before the next. What it finds goes into ``result`` (``max_rel_err``, ``check_s``) as
    it goes; ``call_s`` holds each call's wall time as the worker saw it, ``last_inputs`` the last
    seed's inputs (the base of the rotation sets' inputs)."""

    def __init__(self, args: Arguments, host: Lease, result: KernelResult, report: Report) -> None:
        """``host``: the arrays this evaluation keeps to read buffers back into."""
        self.args, self.host, self.result, self.report = args, host, result, report
        self.call_s: list[float] = []
        self.last_inputs: Arrays = ()

    def run(
        self,
        seeds: Iterable[tuple[str, Arrays, Arrays]],
        inputs: list[Buffer],
        outputs: list[Buffer],
        call: Call,
    ) -> None:
        """``seeds``: each one's name, inputs and references (``references.prepared_seeds``)."""
        start = time.perf_counter()
        device = self.args.device
        worst = 0.0
        for detail, fresh, refs in seeds:
            for buf, x in zip(inputs, fresh, strict=True):
                device.upload(x, into=buf)
            for out in outputs:
                device.fill(out, np.nan)
            call_start = time.perf_counter()
            call([*inputs, *outputs], detail)
            self.call_s.append(time.perf_counter() - call_start)
            # The call is over: checking its outputs is the harness's time, not the kernel's
            # (on a busy machine it may take longer than a call's deadline allows).
            self.report("check", detail)
            verdict = self._judge(inputs, outputs, fresh, refs, detail)
            worst = max(worst, verdict.max_rel_err)
            self.result.max_rel_err = worst
            if verdict.error:
                raise Failed(Status.INCORRECT, f"{verdict.error} ({detail})")
            self.last_inputs = fresh
        self.result.check_s = time.perf_counter() - start

    def _judge(
        self,
        inputs: list[Buffer],
        outputs: list[Buffer],
        fresh: Arrays,
        refs: Arrays,
        detail: str,
    ) -> OutputCheck:
        """One call's arguments read back: its inputs must be as written (else it fails); its
        outputs' verdict against ``refs``."""
        read = [self._read_back(b, ("input", i)) for i, b in enumerate(inputs)]
        changed = modified_input(self.args.input_names, read, fresh)
        if changed:
            raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} ({detail})")
        host_outputs = [self._read_back(o, ("output", i)) for i, o in enumerate(outputs)]
        tolerance = self.args.problem.tolerance
        return check_outputs(self.args.output_names, host_outputs, refs, tolerance)

    def _read_back(self, buffer: Buffer, name: tuple[str, int]) -> np.ndarray:
        """A correctness call's buffer on the host: where the device copies anyway, into the
        array this evaluation keeps for ``name`` (``hostmemory.py``), the same for every seed."""
        device = self.args.device
        if not device.copies_to_host:
            return device.to_host(buffer)
        return device.to_host(buffer, out=self.host.array(name, tuple(buffer.shape)))


def verify_kept(args: Arguments, host: Lease, audit: Audit, fresh: Freshness) -> None:
    """The timed calls kept by the audit: their inputs as the harness left them, their outputs
    right, element by element, against the reference on those (rolled, perturbed) inputs."""
    expected = [
        fresh.rebuild(
            rolls, [host.array(("expected", n, k), x.shape) for k, x in enumerate(inputs)]
        )
        for n, (inputs, _, rolls) in enumerate(audit.kept)
    ]
    for n, (inputs, _, _) in enumerate(audit.kept):
        changed = modified_input(args.input_names, inputs, expected[n])
        if changed:
            raise Failed(Status.INCORRECT, f"the kernel modified input {changed!r} while timed")

    def reference(inputs: Sequence[np.ndarray]) -> Arrays:
        return tuple(args.problem.reference(*(x.astype(np.float64) for x in inputs)))

    with ThreadPoolExecutor(max_workers=2) as pool:  # NumPy releases the GIL
        references = list(pool.map(reference, expected))
    for n, ((_, outputs, _), refs) in enumerate(zip(audit.kept, references, strict=True), 1):
        verdict = check_outputs(args.output_names, outputs, refs, args.problem.tolerance)
        if verdict.error:
            raise Failed(
                Status.INCORRECT,
                f"{verdict.error} (timed call {audit.calls[n - 1]}, checked afterwards: "
                "every timed call gets inputs no call saw before)",
            )
