"""Memory is scoped: only lessons of the planner's backend, preferring the same problem and the
same hardware. Against a small in-memory source, so that the ranking alone is under test."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from accelopt.memory.records import Experience
from accelopt.memory.retrieval import (
    SAME_HARDWARE_FACTOR,
    SAME_PROBLEM_FACTOR,
    Lookup,
    preference,
    rank,
    retrieve,
    weight,
)
from accelopt.store.store import Store

from .conftest import make_experience

HW = "test-cpu"
OTHER_HW = "other-cpu-0123456789ab"


class FakeSource:
    """An ``ExperienceSource`` in memory. Relevance: how many query words occur in the title,
    description and problem (a tie when two lessons share the same words). ``honours_backend``
    False plays an older store that ignores the ``backend`` filter."""

    def __init__(self, *experiences: Experience, honours_backend: bool = True) -> None:
        self.items = [dataclasses.replace(e, id=i) for i, e in enumerate(experiences, 1)]
        self.honours_backend = honours_backend
        self.backends_asked: list[str | None] = []

    def _in(self, exp: Experience, run_id: str | None, backend: str | None) -> bool:
        self.backends_asked.append(backend)
        wrong_backend = self.honours_backend and backend is not None and exp.backend != backend
        return not wrong_backend and (run_id is None or exp.run_id == run_id)

    def search_experiences(
        self,
        query: str,
        *,
        limit: int = 50,
        run_id: str | None = None,
        backend: str | None = None,
    ) -> list[tuple[Experience, float]]:
        terms = set(query.lower().split())
        scored = []
        for exp in (e for e in self.items if self._in(e, run_id, backend)):
            text = f"{exp.lesson.title} {exp.lesson.description} {exp.problem}".lower().split()
            if relevance := float(len(terms & set(text))):
                scored.append((exp, relevance))
        scored.sort(key=lambda item: (-item[1], -(item[0].id or 0)))
        return scored[:limit]

    def experiences(
        self,
        *,
        run_id: str | None = None,
        problem: str | None = None,
        backend: str | None = None,
    ) -> list[Experience]:
        found = [e for e in self.items if self._in(e, run_id, backend)]
        return [e for e in found if problem is None or e.problem == problem]


def lesson(
    title: str,
    *,
    backend: str = "cpu",
    hardware: str = HW,
    problem: str = "matmul",
    speedup: float = 1.5,
    description: str = "Tile the matmul loops.",
) -> Experience:
    exp = make_experience(title, description, speedup=speedup, problem=problem)
    return dataclasses.replace(exp, backend=backend, hardware=hardware)


def titles(found: list[Experience]) -> list[str]:
    return [e.lesson.title for e in found]


# --- backend ---------------------------------------------------------------------------------


@pytest.mark.parametrize("honours_backend", [True, False], ids=["store", "older-store"])
def test_a_triton_lesson_never_reaches_a_cpu_planner(honours_backend: bool) -> None:
    triton = lesson("Tile matmul blocks with tl.dot matmul matmul", backend="triton", speedup=9)
    source = FakeSource(triton, lesson("Unroll inner loop"), honours_backend=honours_backend)
    for k in (1, 16):  # the best match, and the filling of the list
        found = retrieve(source, problem_text="matmul tile", kernel_text="", backend="cpu", k=k)
        assert titles(found) == ["Unroll inner loop"]
    assert set(source.backends_asked) == {"cpu"}  # the store is asked to filter, every time
    to_triton = retrieve(source, problem_text="matmul", kernel_text="", backend="triton")
    assert titles(to_triton) == [triton.lesson.title]


def test_backend_none_means_every_backend() -> None:
    source = FakeSource(lesson("Unroll inner loop"), lesson("Use tl.dot", backend="triton"))
    found = retrieve(source, problem_text="matmul", kernel_text="", backend=None, k=4)
    assert {e.backend for e in found} == {"cpu", "triton"}


def test_backend_must_be_given() -> None:
    with pytest.raises(TypeError, match="backend"):
        retrieve(FakeSource(), problem_text="matmul", kernel_text="")  # type: ignore[call-arg]


# --- preference ------------------------------------------------------------------------------


def test_preference_factors() -> None:
    exp = lesson("Unroll", problem="matmul", hardware=HW)
    assert preference(exp, problem=None, hardware=None) == 1.0
    assert preference(exp, problem="silu", hardware=OTHER_HW) == 1.0
    assert preference(exp, problem="matmul", hardware=None) == SAME_PROBLEM_FACTOR == 1.5
    assert preference(exp, problem=None, hardware=HW) == SAME_HARDWARE_FACTOR == 1.25
    assert preference(exp, problem="matmul", hardware=HW) == pytest.approx(1.875)


def test_a_same_problem_lesson_outranks_an_equally_relevant_one() -> None:
    # equally relevant; the other problem's is a little faster and older (it wins a plain tie)
    other = lesson("Block loops alpha", problem="batched_matmul", speedup=1.6)
    same = lesson("Block loops bravo", problem="matmul", speedup=1.5)
    source = FakeSource(other, same)
    ranked = rank(source, Lookup("tile", "", backend="cpu", problem="matmul"))
    assert [e.problem for e, _ in ranked] == ["matmul", "batched_matmul"]
    (_, s_same), (_, s_other) = ranked
    assert s_same / s_other == pytest.approx(1.5 * weight(1.5) / weight(1.6))
    plain = rank(source, Lookup("tile", "", backend="cpu"))
    assert [e.problem for e, _ in plain] == ["batched_matmul", "matmul"]


def test_a_same_hardware_lesson_outranks_an_equally_relevant_one() -> None:
    other = lesson("Block loops alpha", hardware=OTHER_HW, speedup=1.6)
    same = lesson("Block loops bravo", hardware=HW, speedup=1.5)
    source = FakeSource(other, same)
    found = retrieve(source, problem_text="tile", kernel_text="", backend="cpu", hardware=HW)
    assert [e.hardware for e in found] == [HW, OTHER_HW]


def test_relevance_still_beats_preference_when_clearly_higher() -> None:
    query = "tile matmul loops into panels"
    far = lesson("Panels", description=query, problem="batched_matmul", hardware=OTHER_HW)
    near = lesson("Unroll", description="Unroll the loops.", problem="silu", hardware=HW)
    source = FakeSource(far, near)
    args = {"problem": "silu", "hardware": HW, "backend": "cpu"}
    found = retrieve(source, problem_text=query, kernel_text="", **args)
    assert titles(found) == ["Panels", "Unroll"]  # relevance 4 (x1) beats 1 (x1.875)


def test_the_filling_prefers_same_problem_and_hardware_then_speedup() -> None:
    source = FakeSource(
        lesson("Fast elsewhere", problem="silu", hardware=OTHER_HW, speedup=9.0),
        lesson("Same hardware", problem="silu", hardware=HW, speedup=2.0),
        lesson("Same problem", problem="matmul", hardware=OTHER_HW, speedup=1.2),
        lesson("Same both slow", problem="matmul", hardware=HW, speedup=1.1),
        lesson("Same both fast", problem="matmul", hardware=HW, speedup=3.0),
    )
    args = {"backend": "cpu", "problem": "matmul", "hardware": HW, "k": 5}
    found = retrieve(source, problem_text="zzz", kernel_text="", **args)  # nothing matches
    assert titles(found) == [
        "Same both fast",
        "Same both slow",
        "Same problem",  # 1.5
        "Same hardware",  # 1.25
        "Fast elsewhere",
    ]
    assert found == retrieve(source, problem_text="zzz", kernel_text="", **args)  # deterministic


# --- with the store --------------------------------------------------------------------------

_STORE_FILTERS = "backend" in inspect.signature(Store.search_experiences).parameters


@pytest.mark.skipif(not _STORE_FILTERS, reason="the store has no backend filter yet")
def test_the_store_keeps_triton_lessons_from_a_cpu_retrieval(store: Store) -> None:
    store.add_experience(lesson("Tile matmul with tl.dot matmul", backend="triton", speedup=9))
    store.add_experience(lesson("Unroll the inner loop"))
    for k in (1, 16):
        found = retrieve(store, problem_text="matmul tile", kernel_text="", backend="cpu", k=k)
        assert titles(found) == ["Unroll the inner loop"]
