"""A workspace whose disk fills mid-run: the store says so in one sentence that names the
workspace and how to resume, leaves the run ``running`` (it does not try to mark it failed on the
full disk), and once space is freed the same store goes on with its data intact. The disk fills
two ways: SQLite's page limit (``PRAGMA max_page_count``: SQLITE_FULL, everywhere) and a real
tmpfs (where mount is allowed)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mounts import grow, small_disk

from accelopt.store.errors import StoreFull, StoreUnusable
from accelopt.store.records import IterationRecord, RunStatus
from accelopt.store.store import Store

BIG = "x" * 3000


def _iteration(n: int, best: str) -> IterationRecord:
    return IterationRecord(n, (best,), best, 1e-3, 0.5, 0.0, 1)


def _started(store: Store, make_run, make_kernel) -> str:
    """A run with its baseline committed as iteration 0."""
    run = make_run()
    store.create_run(run)
    store.add_kernel(run.id, make_kernel("k0"))
    store.commit_iteration(run.id, _iteration(0, "k0"), best_hash="k0")
    return run.id


def _fill_until_full(store: Store, run_id: str, make_kernel) -> StoreUnusable:
    """Write kernels until the disk refuses one, then mark the run failed as ``execute_run``'s
    ``finally`` does; the error that stopped the writes."""
    with pytest.raises(StoreUnusable) as info:
        try:
            for i in range(1, 100_000):
                store.add_kernel(run_id, make_kernel(f"k{i}", source=f"{BIG} {i}", iteration=1))
        finally:
            store.update_run(run_id, status=RunStatus.FAILED)
    return info.value


def _assert_one_sentence(error: BaseException, workspace: Path, run_id: str) -> None:
    sentence = str(error)
    assert "\n" not in sentence and "Traceback" not in sentence
    assert str(workspace) in sentence, sentence
    assert f"`accelopt optimize --resume {run_id}`" in sentence, sentence


@pytest.mark.parametrize("room_pages", [1, 3, 12, 40])
def test_a_store_that_fills_mid_run_leaves_the_run_resumable(
    store: Store, make_run, make_kernel, room_pages: int
) -> None:
    run_id = _started(store, make_run, make_kernel)
    conn = store._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + room_pages}")
    error = _fill_until_full(store, run_id, make_kernel)
    assert isinstance(error, StoreFull)
    _assert_one_sentence(error, store.path.parent, run_id)
    assert not conn.in_transaction  # the failed write was rolled back whole
    assert store.get_run(run_id).status is RunStatus.RUNNING  # not marked failed
    kept = [k.hash for k in store.kernels(run_id)]
    conn.execute("PRAGMA max_page_count = 1073741823")  # space freed: the resume goes on
    store.update_run(run_id, status=RunStatus.RUNNING)
    store.add_kernel(run_id, make_kernel("after", iteration=2))
    store.commit_iteration(run_id, _iteration(1, "after"), best_hash="after")
    store.update_run(run_id, status=RunStatus.FINISHED)
    with Store.open(store.path.parent) as again:  # what is on disk, from another connection
        assert [k.hash for k in again.kernels(run_id)] == [*kept, "after"]
        assert [i.iteration for i in again.iterations(run_id)] == [0, 1]
        assert again.get_run(run_id).status is RunStatus.FINISHED


def test_a_full_store_refuses_a_resume_in_one_sentence(store: Store, make_run, make_kernel):
    run_id = _started(store, make_run, make_kernel)
    store.update_run(run_id, status=RunStatus.FINISHED)
    conn = store._connection()
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    store.add_kernel(run_id, make_kernel("k0"))  # nothing new: no page needed
    with pytest.raises(StoreFull) as info:
        store.put_retiming(run_id, 1, ["k0"], {"big": BIG * 4})
    _assert_one_sentence(info.value, store.path.parent, run_id)
    assert store.get_run(run_id).status is RunStatus.FINISHED


@pytest.mark.parametrize("size", ["256k", "320k", "448k", "640k"])
def test_a_workspace_on_a_small_disk_fills_with_one_sentence(
    tmp_path: Path, make_run, make_kernel, size: str
) -> None:
    with small_disk(tmp_path / "disk", size) as disk:
        try:
            store = Store.open(disk)
        except StoreFull as exc:  # too small for even an empty store: said as much
            assert str(disk) in str(exc) and "\n" not in str(exc)
            return
        with store:
            try:
                run_id = _started(store, make_run, make_kernel)
            except StoreFull as exc:  # room for the schema, none for a run: said as much
                assert str(disk) in str(exc) and "\n" not in str(exc)
                return
            error = _fill_until_full(store, run_id, make_kernel)
            assert isinstance(error, StoreFull), error
            _assert_one_sentence(error, disk, run_id)
            assert store.get_run(run_id).status is RunStatus.RUNNING
            count = len(store.kernels(run_id))
            grow(disk, "16m")
            store.add_kernel(run_id, make_kernel("after", iteration=2))
            store.commit_iteration(run_id, _iteration(1, "after"), best_hash="after")
        with Store.open(disk) as again:
            assert len(again.kernels(run_id)) == count + 1
            assert again.get_run(run_id).best_hash == "after"


def test_a_file_that_is_not_a_database_says_how_to_salvage(tmp_path: Path) -> None:
    (tmp_path / "accelopt.db").write_bytes(b"not a database " * 400)
    for opener in (Store.open, Store.open_readonly):
        with pytest.raises(StoreUnusable) as info:
            opener(tmp_path)
        assert "not a usable accelopt database" in str(info.value)
        assert "sqlite3 accelopt.db .recover > dump.sql" in str(info.value)
        assert "sqlite3 new.db < dump.sql" in str(info.value)


def test_an_error_that_is_not_the_users_stays_as_it_is(store: Store) -> None:
    with pytest.raises(sqlite3.OperationalError), store._read() as conn:
        conn.execute("SELECT no_such_column FROM runs")
