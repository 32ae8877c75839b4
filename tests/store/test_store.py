"""Round trips and queries of the store: runs, kernels, evaluations, LLM calls, iterations."""

from __future__ import annotations

import dataclasses
import math
import sqlite3

import pytest

from accelopt.backends.status import Status
from accelopt.errors import UserError
from accelopt.llm.recorder import Recorder
from accelopt.profiling.config import HARNESS_VERSION
from accelopt.store.calls import Spent
from accelopt.store.database import DB_NAME
from accelopt.store.errors import AmbiguousRunError, SchemaVersionError, StoreError
from accelopt.store.records import IterationRecord
from accelopt.store.schema import SCHEMA_VERSION
from accelopt.store.store import Store

# -- opening ----------------------------------------------------------------------------------


def test_open_creates_workspace_and_database(tmp_path):
    workspace = tmp_path / "a" / "b"
    with Store.open(workspace) as store:
        assert store.path == workspace / DB_NAME
        assert store.path.is_file()


def test_pragmas_wal_foreign_keys_busy_timeout(store):
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    conn.close()
    inner = store._connection()
    assert inner.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert inner.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert inner.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


def test_reopen_keeps_data_and_version(tmp_path, make_run):
    with Store.open(tmp_path) as store:
        store.create_run(make_run())
    with Store.open(tmp_path) as store:
        assert store.get_run("run-0001") is not None
        rows = store._connection().execute("SELECT version FROM schema_version").fetchall()
        assert [tuple(r) for r in rows] == [(SCHEMA_VERSION,)]


def test_newer_schema_version_is_refused(tmp_path):
    Store.open(tmp_path).close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer") as info:
        Store.open(tmp_path)
    assert isinstance(info.value, UserError)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"this is not sqlite, not at all" * 100)
    with pytest.raises(StoreError, match="not a usable accelopt database"):
        Store.open(tmp_path)


def test_closed_store_refuses_use(tmp_path):
    store = Store.open(tmp_path)
    store.close()
    store.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()


# -- runs -------------------------------------------------------------------------------------


def test_run_round_trip_sets_timestamps(store, make_run):
    run = make_run()
    store.create_run(run)
    got = store.get_run(run.id)
    assert got is not None
    assert got.created_at and got.created_at == got.updated_at
    assert got.created_at.endswith("+00:00") and "." not in got.created_at  # UTC, seconds
    assert got == dataclasses.replace(run, created_at=got.created_at, updated_at=got.updated_at)


def test_given_timestamps_are_kept(store, make_run):
    run = make_run(created_at="2024-01-01T00:00:00+00:00", updated_at="2024-01-02T00:00:00+00:00")
    store.create_run(run)
    assert store.get_run(run.id) == run


def test_duplicate_run_is_an_error(store, make_run):
    store.create_run(make_run())
    with pytest.raises(StoreError, match="already"):
        store.create_run(make_run())


def test_update_run(store, make_run):
    store.create_run(make_run(created_at="2024-01-01T00:00:00+00:00"))
    store.update_run("run-0001", status="finished")
    got = store.get_run("run-0001")
    assert got.status == "finished" and got.best_hash == ""
    assert got.updated_at > got.created_at
    store.update_run("run-0001", best_hash="k9")
    got = store.get_run("run-0001")
    assert got.status == "finished" and got.best_hash == "k9"
    with pytest.raises(StoreError, match="no run"):
        store.update_run("nope", status="failed")


def test_get_run_by_prefix(store, make_run):
    store.create_run(make_run("abcdef01"))
    store.create_run(make_run("abcdef02"))
    store.create_run(make_run("abc"))
    store.create_run(make_run("zzzz9999"))
    assert store.get_run("zzzz").id == "zzzz9999"
    assert store.get_run("abcdef01").id == "abcdef01"
    assert store.get_run("abc").id == "abc"  # an exact id, however short
    assert store.get_run("zzz") is None  # a prefix under 4 characters is not looked up
    assert store.get_run("ZZZZ") is None  # case matters
    assert store.get_run("nothing") is None
    assert store.get_run("abc%") is None  # no LIKE wildcards
    with pytest.raises(AmbiguousRunError, match="abcdef01, abcdef02") as info:
        store.get_run("abcdef")
    assert info.value.matches == ["abcdef01", "abcdef02"]
    assert isinstance(info.value, UserError)


def test_list_runs_newest_first(store, make_run):
    store.create_run(make_run("old", created_at="2024-01-01T00:00:00+00:00"))
    store.create_run(make_run("new", created_at="2024-06-01T00:00:00+00:00"))
    store.create_run(make_run("same-second-1", created_at="2024-03-01T00:00:00+00:00"))
    store.create_run(make_run("same-second-2", created_at="2024-03-01T00:00:00+00:00"))
    assert [r.id for r in store.list_runs()] == ["new", "same-second-2", "same-second-1", "old"]


# -- kernels ----------------------------------------------------------------------------------


def test_kernel_round_trip_and_order(store, make_run, make_kernel):
    store.create_run(make_run())
    kernels = [
        make_kernel("k0"),
        make_kernel(
            "k2",
            iteration=1,
            origin="executor",
            parent_hash="k0",
            plan_title="tile",
            plan_steps=("tile i", "tile j"),
        ),
        make_kernel("k1", iteration=1, origin="fixer", parent_hash="k2"),
    ]
    assert all(store.add_kernel("run-0001", k) for k in kernels)
    assert store.kernels("run-0001") == kernels
    assert store.kernel_source("k2") == kernels[1].source
    assert store.kernel_source("missing") is None


def test_add_kernel_is_idempotent_and_source_shared(store, make_run, make_kernel):
    store.create_run(make_run("r1"))
    store.create_run(make_run("r2"))
    k = make_kernel("k0")
    assert store.add_kernel("r1", k) is True
    assert store.add_kernel("r1", k) is False
    assert store.add_kernel("r1", dataclasses.replace(k, iteration=3)) is False
    assert store.kernels("r1") == [k]
    assert store.add_kernel("r2", dataclasses.replace(k, iteration=2)) is True
    assert store.kernels("r2") == [dataclasses.replace(k, iteration=2)]
    count = store._connection().execute("SELECT count(*) FROM kernel_sources").fetchone()[0]
    assert count == 1


def test_add_kernel_to_unknown_run_is_an_error(store, make_kernel):
    with pytest.raises(StoreError, match="no run"):
        store.add_kernel("nope", make_kernel())
    assert store.kernel_source("k0") is None  # the transaction was rolled back


# -- evaluations ------------------------------------------------------------------------------


def test_evaluation_round_trip(store, make_evaluation):
    evaluation = make_evaluation()
    store.put_evaluation(evaluation)
    assert store.get_evaluation("k0", "matmul", "cpu", "test-cpu") == evaluation


def test_failed_evaluation_with_inf_error_round_trips(store, make_evaluation):
    evaluation = make_evaluation(
        status=Status.INCORRECT,
        error="output has NaN",
        latency_s=None,
        pct_of_peak=None,
        max_rel_err=math.inf,
        log="x" * 10_000 + ' ✗ "quoted" \n',
    )
    store.put_evaluation(evaluation)
    got = store.get_evaluation("k0", "matmul", "cpu", "test-cpu")
    assert got == evaluation and got.status is Status.INCORRECT and got.max_rel_err == math.inf
    store.put_evaluation(evaluation.model_copy(update={"max_rel_err": math.nan}))
    assert math.isnan(store.get_evaluation("k0", "matmul", "cpu", "test-cpu").max_rel_err)


def test_evaluation_cache_key_components(store, make_evaluation):
    store.put_evaluation(make_evaluation())
    key = ("k0", "matmul", "cpu", "test-cpu")
    assert store.get_evaluation(*key) is not None
    assert store.get_evaluation(*key, harness_version=HARNESS_VERSION) is not None
    for i in range(4):
        other = list(key)
        other[i] = "other"
        assert store.get_evaluation(*other) is None, other
    assert store.get_evaluation(*key, harness_version=HARNESS_VERSION + "-next") is None


def test_evaluation_harness_versions_are_separate_and_put_replaces(store, make_evaluation):
    key = ("k0", "matmul", "cpu", "test-cpu")
    store.put_evaluation(make_evaluation(latency_s=1.0), harness_version="old")
    store.put_evaluation(make_evaluation(latency_s=2.0))
    assert store.get_evaluation(*key, harness_version="old").latency_s == 1.0
    assert store.get_evaluation(*key).latency_s == 2.0
    store.put_evaluation(make_evaluation(latency_s=3.0))
    assert store.get_evaluation(*key).latency_s == 3.0
    assert store._connection().execute("SELECT count(*) FROM evaluations").fetchone()[0] == 2


# -- LLM calls --------------------------------------------------------------------------------


def test_calls_round_trip_in_order(store, make_run, make_call):
    store.create_run(make_run())
    recorder = store.recorder("run-0001")
    calls = [
        make_call("a", reasoning="thinking...", finish_reason="stop", latency_s=1.25, attempts=2),
        make_call("b", error="RateLimitError: slow down", cost_usd=None),
        make_call("a", replayed=True, cost_usd=0.0, agent="executor"),
    ]
    for c in calls:
        recorder.record(c)
    assert store.llm_calls("run-0001") == calls
    assert store.llm_calls("nope") == []


def test_recorder_implements_the_protocol(store, make_run):
    store.create_run(make_run())
    recorder: Recorder = store.recorder("run-0001")
    assert callable(recorder.record) and callable(recorder.find)


def test_recorder_for_unknown_run_is_an_error(store):
    with pytest.raises(StoreError, match="no run"):
        store.recorder("nope")


def test_replay_is_scoped_to_the_run_and_the_runs_it_names(store, make_run, make_call):
    store.create_run(make_run("r1"))
    store.create_run(make_run("r2"))
    r1, r2 = store.recorder("r1"), store.recorder("r2")
    r1.record(make_call("failed", error="APITimeoutError"))
    r1.record(make_call("replayed", replayed=True))
    r1.record(make_call("paid", reply="first"))
    r2.record(make_call("paid", reply="second"))
    assert r1.find("failed") is None
    assert r1.find("replayed") is None
    assert r1.find("unknown") is None
    assert r1.find("paid").reply == "first"
    assert r2.find("paid").reply == "second"  # its own, never the other run's
    store.create_run(make_run("r3"))
    assert store.recorder("r3").find("paid") is None  # a new run pays for fresh samples
    asked = store.recorder("r3", replay_from=("r1",))
    assert asked.find("paid").reply == "first"
    with pytest.raises(StoreError, match="no run"):
        store.recorder("r3", replay_from=("nope",))


def test_spent_counts_every_session_of_the_runs(store, make_run, make_call):
    store.create_run(make_run("r1"))
    store.create_run(make_run("r2"))
    store.recorder("r1").record(make_call("1", tokens_in=10, tokens_out=5, cost_usd=0.5))
    store.recorder("r1").record(make_call("2", tokens_in=1, tokens_out=1, cost_usd=None))
    store.recorder("r1").record(make_call("3", replayed=True, tokens_in=7, cost_usd=0.0))
    store.recorder("r2").record(make_call("4", tokens_in=100, tokens_out=0, cost_usd=2.0))
    assert store.spent(["r1"]) == Spent(0.5, 17, 1)
    assert store.spent(["r1", "r2"]) == Spent(2.5, 117, 1)
    assert store.spent([]) == Spent(0.0, 0, 0)


def test_usage_sums_per_agent_with_unknown_costs(store, make_run, make_call):
    store.create_run(make_run("r1"))
    store.create_run(make_run("r2"))
    rec = store.recorder("r1")
    rec.record(make_call("1", agent="planner", tokens_in=10, tokens_out=1, cost_usd=0.5))
    rec.record(make_call("2", agent="planner", tokens_in=20, tokens_out=2, cost_usd=None))
    rec.record(make_call("3", agent="planner", tokens_in=30, tokens_out=3, cost_usd=0.25))
    rec.record(make_call("4", agent="executor", error="boom", tokens_in=0, tokens_out=0))
    rec.record(make_call("5", agent="executor", replayed=True, tokens_in=5, cost_usd=0.0))
    store.recorder("r2").record(make_call("6", agent="planner", tokens_in=1000, cost_usd=9.0))
    usage = store.usage("r1")
    assert list(usage) == ["planner", "executor"]
    assert usage["planner"] == {
        "calls": 3,
        "failed": 0,
        "replayed": 0,
        "tokens_in": 60,
        "tokens_out": 6,
        "cost_usd": 0.75,
        "unknown_cost": 1,
    }
    assert usage["executor"] == {
        "calls": 2,
        "failed": 1,
        "replayed": 1,
        "tokens_in": 5,
        "tokens_out": 20,
        "cost_usd": 0.01,
        "unknown_cost": 0,
    }
    assert store.usage("nope") == {}


def test_usage_with_only_unknown_costs(store, make_run, make_call):
    store.create_run(make_run())
    store.recorder("run-0001").record(make_call("1", cost_usd=None))
    usage = store.usage("run-0001")["planner"]
    assert usage["cost_usd"] == 0.0 and usage["unknown_cost"] == 1


# -- iterations -------------------------------------------------------------------------------


def test_iterations_round_trip_and_replace(store, make_run):
    store.create_run(make_run())
    first = IterationRecord(
        iteration=1,
        beam=("k2", "k1"),
        best_hash="k2",
        best_latency_s=1e-3,
        best_pct_of_peak=0.25,
        spent_usd=0.5,
        evaluated=6,
        failed_by_status={"INCORRECT": 2, "COMPILE_ERROR": 1},
    )
    zeroth = IterationRecord(
        iteration=0,
        beam=("k0",),
        best_hash="k0",
        best_latency_s=None,
        best_pct_of_peak=None,
        spent_usd=0.0,
        evaluated=1,
    )
    store.commit_iteration("run-0001", first)
    store.commit_iteration("run-0001", zeroth)
    assert store.iterations("run-0001") == [zeroth, first]
    again = dataclasses.replace(first, beam=("k3",), best_hash="k3", spent_usd=0.75)
    store.commit_iteration("run-0001", again)
    assert store.iterations("run-0001") == [zeroth, again]
    assert store.iterations("nope") == []
    with pytest.raises(StoreError, match="no run"):
        store.commit_iteration("nope", first)


# -- experiences ------------------------------------------------------------------------------


def test_experience_round_trip(store, make_experience):
    experience = make_experience(before='a "quoted" \\ snippet', after="ø ✓\n\tnext")
    new_id = store.add_experience(experience)
    got = store.get_experience(new_id)
    assert got.created_at
    assert got == dataclasses.replace(experience, id=new_id, created_at=got.created_at)
    assert store.get_experience(new_id + 100) is None


def test_experiences_filters_and_delete(store, make_experience):
    a = store.add_experience(make_experience("a", run_id="r1", problem="matmul"))
    b = store.add_experience(make_experience("b", run_id="r2", problem="matmul"))
    c = store.add_experience(make_experience("c", run_id="r1", problem="softmax"))
    assert [e.id for e in store.experiences()] == [a, b, c]
    assert [e.id for e in store.experiences(run_id="r1")] == [a, c]
    assert [e.id for e in store.experiences(problem="matmul")] == [a, b]
    assert [e.id for e in store.experiences(run_id="r1", problem="matmul")] == [a]
    store.delete_experience(b)
    store.delete_experience(b)  # an unknown id is a no-op
    assert [e.id for e in store.experiences()] == [a, c]
    assert store.get_experience(b) is None


def test_update_run_sets_the_starting_kernel(tmp_path):
    from accelopt.store.records import RunRecord
    from accelopt.store.store import Store

    with Store.open(tmp_path / "ws") as store:
        store.create_run(RunRecord("r1", "matmul", "cpu", "cpu", "hw", "beam", {}))
        store.update_run("r1", baseline_hash="abc")
        run = store.get_run("r1")
        assert run is not None and run.baseline_hash == "abc" and run.best_hash == ""


def test_a_version_2_store_keeps_its_kernels_as_their_first_writes(tmp_path, make_run, make_kernel):
    path = tmp_path / "ws"
    with Store.open(path) as store:
        store.create_run(make_run())
        store.add_kernel("run-0001", make_kernel("k0"))
        db = store.path
    raw = sqlite3.connect(db)  # what version 2 had: neither table
    raw.executescript(
        "DROP TABLE run_kernel_writes; DROP TABLE llm_holds; UPDATE schema_version SET version = 2;"
    )
    raw.close()
    with Store.open(path) as store:
        assert [k.hash for k in store.kernels("run-0001", every_write=True)] == ["k0"]
        assert store.spent(["run-0001"]).held_calls == 0
