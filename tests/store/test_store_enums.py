"""The store's enums and records: what it reads back is typed, what it writes is the same text as
before (the values of the enums), and its usage is counted as ``llm.client.Usage`` counts."""

from __future__ import annotations

import dataclasses
import sqlite3

from accelopt.hardware.roofline import Bound
from accelopt.llm.client import Usage
from accelopt.memory.records import ExperienceKind
from accelopt.store.records import KernelOrigin, RunStatus


def test_the_enums_hold_the_values_the_database_always_had():
    assert [s.value for s in RunStatus] == [
        "running", "finished", "budget", "failed", "interrupted"
    ]  # fmt: skip
    # values are only ever added (with a schema version: an older accelopt cannot read them)
    origins = ["baseline", "executor", "fixer", "agent", "tuned"]
    assert [o.value for o in KernelOrigin] == origins
    assert [k.value for k in ExperienceKind] == ["positive", "negative"]
    assert [b.value for b in Bound] == ["matmul", "vector", "memory"]


def test_records_come_back_as_enums_and_are_stored_as_text(
    store, make_run, make_kernel, make_experience
):
    store.create_run(make_run())
    store.add_kernel("run-0001", make_kernel("k0", origin=KernelOrigin.BASELINE))
    store.add_kernel("run-0001", make_kernel("k1", origin="fixer", iteration=1))  # a plain str
    store.update_run("run-0001", status=RunStatus.BUDGET)
    store.add_experience(make_experience(kind=ExperienceKind.NEGATIVE))
    run = store.get_run("run-0001")
    assert run is not None and run.status is RunStatus.BUDGET
    assert [k.origin for k in store.kernels("run-0001")] == [
        KernelOrigin.BASELINE, KernelOrigin.FIXER
    ]  # fmt: skip
    assert all(type(k.origin) is KernelOrigin for k in store.kernels("run-0001"))
    (exp,) = store.experiences()
    assert exp.kind is ExperienceKind.NEGATIVE
    raw = sqlite3.connect(store.path)
    try:
        assert raw.execute("SELECT status, typeof(status) FROM runs").fetchall() == [
            ("budget", "text")
        ]
        origins = raw.execute("SELECT origin, typeof(origin) FROM run_kernels ORDER BY seq")
        assert origins.fetchall() == [("baseline", "text"), ("fixer", "text")]
        assert raw.execute("SELECT kind, typeof(kind) FROM experiences").fetchall() == [
            ("negative", "text")
        ]
    finally:
        raw.close()


def test_a_new_run_is_running(store, make_run):
    store.create_run(make_run())
    run = store.get_run("run-0001")
    assert run is not None and run.status is RunStatus.RUNNING and run.status == "running"


def test_a_cached_evaluation_keeps_its_bound(store, make_evaluation):
    store.put_evaluation(make_evaluation("k0", bound="memory"))
    found = store.get_evaluation("k0", "matmul", "cpu", "test-cpu")
    assert found is not None and found.bound is Bound.MEMORY
    raw = sqlite3.connect(store.path)
    try:
        (data,) = raw.execute("SELECT data FROM evaluations").fetchone()
    finally:
        raw.close()
    assert '"bound":"memory"' in data


def test_usage_by_agent_counts_as_the_client_does(store, make_run, make_call):
    store.create_run(make_run("r1"))
    calls = [
        make_call("1", agent="planner", tokens_in=10, tokens_out=1, cost_usd=0.5),
        make_call("2", agent="planner", tokens_in=20, tokens_out=2, cost_usd=None),
        make_call("3", agent="executor", error="boom", tokens_in=0, tokens_out=0),
        make_call("4", agent="executor", replayed=True, tokens_in=5, cost_usd=0.0),
    ]
    client: dict[str, Usage] = {}
    for call in calls:
        store.recorder("r1").record(call)
        client.setdefault(call.agent, Usage()).add(call)
    assert store.usage_by_agent("r1") == client
    assert list(store.usage_by_agent("r1")) == ["planner", "executor"]
    # the JSON form: each record's fields, in order
    assert store.usage("r1") == {a: dataclasses.asdict(u) for a, u in client.items()}
    assert list(store.usage("r1")["planner"]) == [f.name for f in dataclasses.fields(Usage)]
    assert store.usage_by_agent("nope") == {}
