"""A re-timing session in the worker: several kernels checked one by one, then timed interleaved
under one exclusive device lock (``session.py`` says why and how the rounds are read)."""

from __future__ import annotations

import os
import traceback
from contextlib import AbstractContextManager, ExitStack, nullcontext

import numpy as np

from accelopt.backends.status import Status
from accelopt.hardware import devicelock
from accelopt.problems.shipping import resolve_ref
from accelopt.profiling import stats
from accelopt.profiling.worker import contention, disturbance, placement, sandbox
from accelopt.profiling.worker.harness import EvaluationRun
from accelopt.profiling.worker.pacing import Ticker
from accelopt.profiling.worker.protocol import Channel, RetimeRequest, SessionAnswer
from accelopt.profiling.worker.steps import Failed
from accelopt.profiling.worker.timed_loop import TimedLoop

Figure = tuple[float | None, float | None]  # a slice's: fastest clean batch, fastest floor
VOID_NS = 2_000_000  # CPU time a stopped kernel process may show across a slice (the stop's own)


class RetimeRun:
    """A re-timing session in the worker (``session.py``).

    Every kernel is built, loaded and checked by its own ``EvaluationRun``, on its own device
    (the cpu backend: its own kernel host process) and its own rotation sets (each spanning the cold
    span: a session holds a set per kernel). Then, under one exclusive device lock, their
    ``TimedLoop``s run in rounds of slices, each kernel's flanked by the reference's
    (``_flanked_round``; ``stats.round_order`` once the reference is gone), until every kernel has
    min_calls and min_time_s and each ratio to the first kernel is known to ci_target (or each
    kernel has been timed ci_time_cap_s), after ``min_rounds`` rounds at least; max_time_s of any
    kernel ends it. Each kernel is then summarized and verified as an evaluation is. A kernel that
    fails a step gets its failing result and drops out; the others go on.
    """

    _running: int | None = None  # the one kernel whose process may run now (``_run_only``)

    def __init__(self, request: RetimeRequest, channel: Channel) -> None:
        problem = resolve_ref(request.problem)  # loaded once: every kernel's is the same
        self.runs = [EvaluationRun(request.one(k), channel, problem) for k in request.kernels]
        self.config = self.runs[0].config
        self.lock_path = self.runs[0].lock_path
        self.min_rounds = request.min_rounds or stats.MIN_ROUNDS
        self.slice_s = stats.slice_seconds(self.config.min_time_s, self.min_rounds)
        self.tick = Ticker(self.runs[0].phase)
        for run in self.runs:
            run.tick = self.tick  # the parent hears of the timing as one phase
        self.loops: dict[int, TimedLoop] = {}  # the kernels still in the session, by position
        self.series: list[list[float | None]] = [[] for _ in self.runs]  # round figures
        self.floor_series: list[list[float | None]] = [[] for _ in self.runs]  # ... of floors
        self.rounds = 0
        self.clean_rounds = 0  # rounds with a figure for the reference (others: disturbed)
        self._carried: Figure | None = None  # the reference's last slice, flanking the next one

    def execute(self) -> SessionAnswer:
        with ExitStack() as closing:
            for run in self.runs:
                closing.callback(run.close)
            try:
                self._prepare()
                if self.loops:
                    self._time()
                self._verify()
            except Exception as exc:  # a harness fault: every kernel not yet judged shares it
                tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
                for run in self.runs:
                    if not run.failed:
                        run.note(status=Status.CRASH, error=f"harness error: {tail or exc}")
        return self._result()

    def _prepare(self) -> None:
        for i, run in enumerate(self.runs):
            with run.recording():
                rotated = run.prepare()
                if rotated is None:
                    raise ValueError("a re-timing session times kernels: check_only is set")
                self.loops[i] = run.timed_loop(rotated)

    def _kernel_memory(self) -> AbstractContextManager[object]:
        """One address-space cap while kernels that run in this process are timed; none where
        each has a process of its own."""
        if all(self.runs[i].device.kernel_pids for i in self.loops):
            return nullcontext()
        return sandbox.memory_cap(self.config.memory_cap_bytes)

    def _time(self) -> None:
        first = self.runs[0]
        first.phase("lock")
        with devicelock.exclusive(self.lock_path):
            first.phase("call", "timing")
            devices = [self.runs[i].device for i in self.loops]
            pids = tuple(pid for d in devices for pid in d.kernel_pids)
            before = contention.snapshot(pids)
            threads = self.runs[0].threads
            with self._kernel_memory(), placement.pinned(pids, threads) as where:
                for i in self.loops:
                    self.runs[i].note(placement=where)
                self.tick.reset()
                self._start_loops()
                while self.loops and not self._done():
                    self._round()
                self._confirm()
            after = contention.snapshot(pids)
        for i, loop in self.loops.items():
            self.runs[i].result.time_s = loop.spent_s
            self.runs[i].record_contention(before, after)

    def _start_loops(self) -> None:
        """Warm every kernel up; then one batch size for all (the smallest any would take: a
        batch of the slowest kernel lasts about BATCH_S, well within the timing deadline): what is
        left of the round trip once the overhead is subtracted then weighs the same on each."""
        for i in list(self.loops):
            run = self.runs[i]
            run.result.kernel_ran = True
            with run.recording():
                self._run_only(i)
                self.loops[i].start()
            if run.failed:
                del self.loops[i]
        batch = min((loop.batch for loop in self.loops.values()), default=1)
        for i, loop in self.loops.items():
            loop.batch = self.runs[i].result.batch_calls = batch
        self._share_overhead()

    def _run_only(self, i: int) -> None:
        """Only kernel ``i``'s process may run: every other one of the session is stopped
        (``Device.pause``) while it (or nothing) is timed."""
        if self._running == i:
            return
        for j, run in enumerate(self.runs):
            if j != i:
                run.device.pause()
        disturbance.all_stopped(self._other_pids(i))  # their CPU time final: ``_stopped_ns``
        self.runs[i].device.resume()
        self._running = i

    def _other_pids(self, i: int) -> list[int]:
        return [p for j, run in enumerate(self.runs) if j != i for p in run.device.kernel_pids]

    def _stopped_ns(self, i: int) -> int:
        """CPU time of the session's kernel processes other than ``i``'s (all stopped)."""
        return disturbance.task_ns(self._other_pids(i))

    def _share_overhead(self) -> None:
        """One round trip subtracted from every kernel's batches: the least any of their kernel
        processes measured (each measures its own before its kernel is loaded, and the figures
        differ by tens of microseconds, a tiny kernel's whole batch). Only where every device
        shares its round trip (``Device.overhead_s``)."""
        devices = [self.runs[i].device for i in self.loops]
        known = [d.overhead_s for d in devices if d.overhead_s is not None]
        if len(known) != len(devices) or not known:
            return
        for device in devices:
            device.overhead_s = min(known)

    def _round(self) -> None:
        flanked = 0 in self.loops and len(self.loops) > 1
        figures, floors = self._flanked_round() if flanked else self._plain_round()
        for i in range(len(self.runs)):
            self.series[i].append(figures.get(i))
            self.floor_series[i].append(floors.get(i))
        self.rounds += 1

    def _slice_figure(self, i: int) -> Figure:
        """Kernel ``i``'s fastest clean batch in one slice (``session.py``; None: the slice was
        disturbed) and its fastest batch less its threads' longest wait (``TimedLoop.floors``);
        (None, None) where it is out of the session, or failed in this slice (it then leaves)."""
        loop, run = self.loops.get(i), self.runs[i]
        if loop is None:
            return None, None
        figure: Figure = (None, None)
        self._run_only(i)
        stopped_ns = self._stopped_ns(i)
        with run.recording():
            samples = loop.run_slice(self.slice_s)
            figure = (float(np.min(samples)) if samples else None, loop.slice_floor)
        self._void_if_others_ran(i, stopped_ns)
        if run.failed:
            self.loops.pop(i, None)
            return None, None
        return figure

    def _void_if_others_ran(self, i: int, before_ns: int) -> None:
        """A kernel process that ran while it was stopped and another was timed (its stop did
        not hold) voids the session: every kernel still in it fails, none is compared."""
        ran_ns = self._stopped_ns(i) - before_ns
        if ran_ns <= VOID_NS:
            return
        for j in list(self.loops):
            with self.runs[j].recording():
                raise Failed(
                    Status.CRASH,
                    f"the session is void: another kernel's process ran "
                    f"{ran_ns / 1e6:.1f} ms while kernel {i} was timed",
                )
            del self.loops[j]

    def _plain_round(self) -> tuple[dict[int, float], dict[int, float]]:
        """Every kernel's slice in ``stats.round_order`` (no reference left to flank with)."""
        order = stats.round_order(self.rounds, len(self.runs))
        figures = {i: self._slice_figure(i) for i in order}
        return tuple({i: f[k] for i, f in figures.items() if f[k] is not None} for k in (0, 1))  # type: ignore[return-value]

    def _flanked_round(self) -> tuple[dict[int, float], dict[int, float]]:
        """A B A C A: the reference (kernel 0) timed before and after every other kernel's slice,
        its last slice carried into the next round; each kernel's figure is ``stats.flanked``
        by the reference's slices either side of it, on the scale of the reference's median
        slice (the round's figure for kernel 0). A slice with no clean batch (``run_slice``)
        has no figure, nor has a kernel it flanks, in this round: a disturbed round is dropped
        (the floors' round, the second, has figures whenever the kernels ran)."""
        before = self._carried if self._carried is not None else self._slice_figure(0)
        references, ratios = [before], ({}, {})
        children = [i for i in range(1, len(self.runs)) if i in self.loops]
        for i in children[:: -1 if self.rounds % 2 else 1]:
            if 0 not in self.loops:
                break
            child, after = self._slice_figure(i), self._slice_figure(0)
            for k, found in enumerate(ratios):
                if before[k] and child[k] and after[k]:  # known (and not zero)
                    found[i] = stats.flanked(child[k], before[k], after[k])  # type: ignore[arg-type]
            references.append(after)
            before = after
        self._carried = before
        if 0 not in self.loops:  # the reference failed: no figure is relative to it
            return {}, {}
        self.clean_rounds += bool(ratios[0])
        return self._scaled(references, ratios[0], 0), self._scaled(references, ratios[1], 1)

    @staticmethod
    def _scaled(references: list[Figure], ratios: dict[int, float], k: int) -> dict[int, float]:
        """The round's figures of kind ``k``: the reference's median slice, each other kernel's
        ratio to it on its scale ({} where the reference has none: a disturbed round)."""
        known = [r[k] for r in references if r[k] is not None]
        if not known:
            return {}
        reference = stats.point(known)  # type: ignore[arg-type]
        return {0: reference} | {i: ratio * reference for i, ratio in ratios.items()}

    def _confirm(self) -> None:
        """Each kernel that looked faster on sparse batches is measured again (TimedLoop.confirm)
        while the device is still held; each must then fall idle after a call (``check_idle``)."""
        for i, loop in list(self.loops.items()):
            with self.runs[i].recording():
                self._run_only(i)
                loop.confirm()
                loop.check_idle()

    def _done(self) -> bool:
        cfg, loops = self.config, list(self.loops.values())
        if max(loop.elapsed_s for loop in loops) >= cfg.max_time_s:
            return True
        # the time cap, as a budget for the whole session: the reference's slices flank every
        # other kernel's, so it is timed longest, and a session ends when it would have; on a
        # busy machine it waits as long again as an evaluation would for clean rounds
        cap_s = max(cfg.ci_time_cap_s, cfg.min_time_s) * len(loops)
        spent_s = sum(loop.elapsed_s for loop in loops)
        if self._rounds_kept() < self.min_rounds:
            return spent_s >= cap_s + cfg.disturbed_wait_s * len(loops)
        if any(loop.count < cfg.min_calls or loop.elapsed_s < cfg.min_time_s for loop in loops):
            return False
        if spent_s >= cap_s:
            return True
        return self._all_decided() or all(ci <= cfg.ci_target for ci in self._intervals())

    def _rounds_kept(self) -> int:
        """Rounds that gave figures: with a reference, those that compared a kernel with it."""
        return self.clean_rounds if 0 in self.loops and len(self.loops) > 1 else self.rounds

    def _all_decided(self) -> bool:
        """Whether every kernel's verdict against the first is one more rounds cannot change
        (``stats.decided``): a look-alike stops once its interval holds no gain worth timing
        for, a clearly slower or faster kernel at MIN_ROUNDS."""
        if 0 not in self.loops or len(self.loops) < 2:
            return False
        first = self.series[0]
        estimates = [
            stats.ratio_estimate(stats.round_ratios(first, self.series[i])) for i in self.loops if i
        ]
        return all(stats.decided(ratio, ci) for ratio, ci in estimates)

    def _intervals(self) -> list[float]:
        """What must be known to ci_target: each kernel's ratio to the first (with the first
        gone, each kernel's own median)."""
        if 0 not in self.loops:
            return [stats.ci_half_width(loop.samples) for loop in self.loops.values()]
        first = self.series[0]
        return [
            stats.ci_half_width(stats.round_ratios(first, self.series[i])) for i in self.loops if i
        ]

    def _verify(self) -> None:
        for i, loop in self.loops.items():
            run = self.runs[i]
            with run.recording():
                run.summarize(loop)
                run.phase("lock")
                with devicelock.shared(self.lock_path):
                    run.verify_timed(loop)

    def _result(self) -> SessionAnswer:
        """Each kernel's result and the round medians (the pool decides from the results whether
        kernel code failed in this process: the worker is then replaced)."""
        disturbed = self._rounds_kept() < self.min_rounds and self.rounds > 0
        return SessionAnswer(
            results=[run.result for run in self.runs],
            rounds=self.rounds,
            clean_rounds=self._rounds_kept(),
            disturbed=disturbed,
            round_s=self.floor_series if disturbed else self.series,
            worker_pid=os.getpid(),
        )
