"""An iteration is one commit: its experiences appear with its record, are unique per (run,
iteration, parent, plan), and what a parent was shown or how it was re-timed is kept for resume."""

from __future__ import annotations

import sqlite3

from accelopt.store.records import IterationRecord
from accelopt.store.schema import SCHEMA_VERSION
from accelopt.store.store import Store


def record(t: int) -> IterationRecord:
    return IterationRecord(
        iteration=t, beam=("k1",), best_hash="k1", best_latency_s=1.0, best_pct_of_peak=0.5,
        spent_usd=0.0, evaluated=1,
    )  # fmt: skip


def learned(make_experience, title: str = "tile it", **kw):
    origin = {"iteration": 1, "parent_hash": "k0", "plan_title": "tile"} | kw
    return make_experience(title, **origin)


def test_an_iterations_experiences_appear_with_its_commit(store, make_run, make_experience):
    store.create_run(make_run("run-0001"))
    store.add_experience(learned(make_experience))
    assert store.experiences() == []
    assert store.search_experiences("tile") == []
    assert len(store.experiences(pending=True)) == 1
    store.commit_iteration("run-0001", record(1), best_hash="k1")
    assert [e.lesson.title for e in store.experiences()] == ["tile it"]
    assert [e.lesson.title for e, _ in store.search_experiences("tile")] == ["tile it"]
    assert store.get_run("run-0001").best_hash == "k1"


def test_an_experience_is_unique_per_run_iteration_parent_and_plan(
    store, make_run, make_experience
):
    store.create_run(make_run("run-0001"))
    first = store.add_experience(learned(make_experience))
    again = store.add_experience(learned(make_experience, title="a replayed summary"))
    assert again == first
    other_plan = store.add_experience(learned(make_experience, plan_title="unroll"))
    next_iteration = store.add_experience(learned(make_experience, iteration=2))
    assert len({first, other_plan, next_iteration}) == 3
    imported = [store.add_experience(make_experience("by hand")) for _ in range(2)]
    assert imported[0] != imported[1]  # outside a run's loop: no uniqueness, visible at once
    assert [e.lesson.title for e in store.experiences()] == ["by hand", "by hand"]


def test_backend_filters_experiences(store, make_experience):
    store.add_experience(make_experience("vectorize", backend="cpu"))
    store.add_experience(make_experience("vectorize blocks", backend="triton"))
    assert [e.backend for e in store.experiences(backend="triton")] == ["triton"]
    found = store.search_experiences("vectorize", backend="cpu")
    assert [e.backend for e, _ in found] == ["cpu"]


def test_retrievals_keep_the_first_record(store, make_run, make_experience):
    store.create_run(make_run("run-0001"))
    a = store.add_experience(make_experience("a"))
    b = store.add_experience(make_experience("b"))
    assert store.get_retrieval("run-0001", 1, "k0") is None
    assert store.save_retrieval("run-0001", 1, "k0", [b, a]) == [b, a]
    assert store.save_retrieval("run-0001", 1, "k0", [a]) == [b, a]
    assert [e.lesson.title for e in store.experiences_by_id([b, a])] == ["b", "a"]
    store.delete_experience(a)
    assert [e.lesson.title for e in store.experiences_by_id([b, a])] == ["b"]


def test_retimings_are_kept_apart_from_the_cache(store, make_run):
    store.create_run(make_run("run-0001"))
    data = {"ratios": [1.0, 0.97], "ratio_ci": [0.0, float("inf")], "rounds": 8}
    assert store.put_retiming("run-0001", 2, ["p", "c"], data)["ratios"] == [1.0, 0.97]
    kept = store.put_retiming("run-0001", 2, ["p", "c"], {"ratios": [1.0, 2.0]})  # first wins
    assert kept["ratios"] == [1.0, 0.97] and kept["ratio_ci"][1] == float("inf")
    assert store.get_retiming("run-0001", 2, ["p", "c"]) == kept
    assert store.get_retiming("run-0001", 2, ["p", "d"]) is None
    assert store.get_retiming("run-0001", 3, ["p", "c"]) is None


def test_a_version_1_store_is_upgraded(tmp_path, make_experience):
    path = tmp_path / "accelopt.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES (1);"
        "CREATE TABLE runs (id TEXT PRIMARY KEY);"
        "CREATE TABLE experiences (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,"
        " kind TEXT NOT NULL, speedup REAL NOT NULL, problem TEXT NOT NULL, backend TEXT NOT NULL,"
        " hardware TEXT NOT NULL, model TEXT NOT NULL, slow_hash TEXT NOT NULL,"
        " fast_hash TEXT NOT NULL, title TEXT NOT NULL, description TEXT NOT NULL,"
        " before_src TEXT NOT NULL, after_src TEXT NOT NULL, created_at TEXT NOT NULL);"
        "INSERT INTO experiences (run_id, kind, speedup, problem, backend, hardware, model,"
        " slow_hash, fast_hash, title, description, before_src, after_src, created_at) VALUES"
        " ('r', 'positive', 2.0, 'matmul', 'cpu', 'h', 'm', 'a', 'b', 'old', 'd', '', '', 'now');"
    )
    conn.close()
    with Store(path) as store:
        assert [e.lesson.title for e in store.experiences()] == ["old"]  # committed
        version = store._connection().execute("SELECT version FROM schema_version").fetchone()
        assert version[0] == SCHEMA_VERSION == 5
