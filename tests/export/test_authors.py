"""Who wrote an exported kernel (issue 46, defect 17): an LLM where its lineage has an executor,
fixer or agent kernel, accelopt's developers for a shipped kernel or a tuned variant of one, the
user for a file they gave."""

from __future__ import annotations

from accelopt.backends.registry import shipped_kernel
from accelopt.cli.export import _lineage
from accelopt.export.bundle import AUTHORS, author_of
from accelopt.problems.loader import load_problem
from accelopt.store.records import KernelOrigin, KernelRecord

MATMUL = load_problem("matmul")
EXPERT = shipped_kernel(MATMUL, "expert").read_text()


def record(hash: str, origin: KernelOrigin, parent: str = "", source: str = "") -> KernelRecord:
    return KernelRecord(hash=hash, source=source or hash, backend="cpu", iteration=0,
                        origin=origin, parent_hash=parent)  # fmt: skip


def test_the_author_follows_the_lineage() -> None:
    kernels = [
        record("a", KernelOrigin.BASELINE, source=EXPERT),
        record("b", KernelOrigin.TUNED, "a"),
        record("c", KernelOrigin.EXECUTOR, "b"),
        record("d", KernelOrigin.TUNED, "c"),
    ]
    tuned_expert = _lineage(kernels, "b")
    assert [k.hash for k in tuned_expert] == ["b", "a"]
    assert author_of(tuned_expert[-1].source, MATMUL, "cpu") == "shipped"
    written = _lineage(kernels, "d")
    llm = any(k.origin is KernelOrigin.EXECUTOR for k in written)
    assert author_of(written[-1].source, MATMUL, "cpu", llm) == "llm"
    assert author_of("void kernel(void) {}", MATMUL, "cpu") == "user"
    assert AUTHORS["llm"] == "LLM-written code"


def test_a_lineage_that_loops_ends() -> None:
    kernels = [record("a", KernelOrigin.TUNED, "b"), record("b", KernelOrigin.TUNED, "a")]
    assert [k.hash for k in _lineage(kernels, "a")] == ["a", "b"]
