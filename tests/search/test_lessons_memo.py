"""The lessons a parent is shown in an iteration are recorded when the iteration first starts: a
resumed iteration shows exactly those, whatever the memory gained meanwhile (lessons of the killed
session, not yet committed, or of other runs), so its planner prompts are byte-identical."""

from __future__ import annotations

from test_settle import SessionProfiler, candidate, context

from accelopt.llm.client import LLMClient
from accelopt.llm.config import Config
from accelopt.memory.records import Experience, Lesson
from accelopt.search.config import SearchConfig
from accelopt.search.loop import Optimizer
from accelopt.store.records import RunRecord
from accelopt.store.store import Store


def optimizer(tmp_path, hw, profiler) -> Optimizer:
    store = Store.open(tmp_path)
    run = RunRecord("r1", "matmul", "small", "cpu", hw.key(), "beam", {})
    store.create_run(run)
    llm = Config.model_validate({"llm": {"default": {"base_url": "http://127.0.0.1:9/v1",
                                                     "model": "m"}}})  # fmt: skip
    return Optimizer(context(store, run, hw), LLMClient(llm), profiler, SearchConfig())


def lesson(title: str, run_id: str = "other", **kw) -> Experience:
    return Experience(
        Lesson(title, f"{title}: tile the matmul loops for the cache"), "positive", 2.0, "matmul",
        "cpu", "hw", "m", run_id, "a", "b", **kw,
    )  # fmt: skip


def test_a_resumed_iteration_is_shown_the_same_lessons(tmp_path, hw):
    opt = optimizer(tmp_path, hw, SessionProfiler({}))
    store = opt.context.store
    store.add_experience(lesson("tile loops"))
    parent = candidate("void kernel(){int p;}", 1.0)
    shown = opt.lessons.shown(1, parent)
    assert [e.lesson.title for e in shown] == ["tile loops"]
    # meanwhile: this run's own uncommitted lesson, another run's committed one
    store.add_experience(lesson("tile more", run_id="r1", iteration=1, parent_hash=parent.hash,
                                plan_title="tile"))  # fmt: skip
    store.add_experience(lesson("tile the cache"))
    assert opt.lessons.shown(1, parent) == shown  # the resumed iteration: the same lessons
    assert len(opt.lessons.shown(2, parent)) == 2  # the next iteration sees the committed memory
