"""The status of an evaluation: every outcome of building, checking and timing a kernel."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PASSED = "PASSED"
    COMPILE_ERROR = "COMPILE_ERROR"  # the compiler refused it or ran past its timeout
    REJECTED = "REJECTED"  # static checks refused it before compiling
    CRASH = "CRASH"  # the worker died (signal) or the kernel broke the harness
    TIMEOUT = "TIMEOUT"  # a call ran past its deadline
    INCORRECT = "INCORRECT"  # wrong output, NaN/Inf, output not written, or an input modified
    SUSPICIOUS = "SUSPICIOUS"  # faster than the roofline allows: a cheat or a wrong cost model

    @property
    def ok(self) -> bool:
        return self is Status.PASSED
