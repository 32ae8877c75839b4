"""One damaged row is contained: reading it is one sentence naming its table and key, the other
runs still read, a new run of the same kernel is not blocked (the damaged source is replaced),
and ``Store.check`` names every damaged row. The damage is written as SQLite would hand it back
from a page of random bytes: text that is not UTF-8, JSON that does not parse."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from accelopt.store.errors import BadRowError, StoreUnusable
from accelopt.store.records import IterationRecord
from accelopt.store.store import Store

NOT_UTF8 = "CAST(x'66ff00fe41c3' AS TEXT)"  # f, then bytes no UTF-8 text has


def _damage(store: Store, sql: str, *params: object) -> None:
    """Write through a connection of its own, as a damaged page would read."""
    with sqlite3.connect(store.path) as conn:
        conn.execute(sql, params)


@pytest.fixture
def two_runs(store: Store, make_run, make_kernel, make_evaluation) -> Store:
    """A matmul run on kernel "shared" and a silu run on kernel "own", each with its iteration."""
    for run_id, problem, kernel in (("mm01", "matmul", "shared"), ("si01", "silu", "own")):
        store.create_run(make_run(run_id, problem=problem))
        store.add_kernel(run_id, make_kernel(kernel))
        store.put_evaluation(make_evaluation(kernel, problem=problem))
        record = IterationRecord(0, (kernel,), kernel, 1e-3, 0.5, 0.0, 1)
        store.commit_iteration(run_id, record, best_hash=kernel)
    return store


def test_a_source_that_is_not_utf8_is_named_and_the_other_run_reads(two_runs: Store) -> None:
    _damage(two_runs, f"UPDATE kernel_sources SET source = {NOT_UTF8} WHERE hash = 'shared'")
    with pytest.raises(BadRowError) as info:
        two_runs.kernels("mm01")
    assert (info.value.table, info.value.key) == ("kernel_sources", "hash='shared'")
    assert "accelopt store check" in str(info.value) and "\n" not in str(info.value)
    assert [k.hash for k in two_runs.kernels("si01")] == ["own"]  # the other run reads
    assert [r.id for r in two_runs.list_runs()] == ["si01", "mm01"]


def test_a_new_run_of_the_damaged_kernel_replaces_its_source(
    two_runs: Store, make_run, make_kernel, caplog: pytest.LogCaptureFixture
) -> None:
    _damage(two_runs, f"UPDATE kernel_sources SET source = {NOT_UTF8} WHERE hash = 'shared'")
    two_runs.create_run(make_run("mm02"))
    with caplog.at_level(logging.WARNING):
        assert two_runs.add_kernel("mm02", make_kernel("shared"))
    assert "kernel shared" in caplog.text and "damaged" in caplog.text
    assert [k.source for k in two_runs.kernels("mm02")] == [make_kernel("shared").source]
    assert two_runs.kernels("mm01")[0].hash == "shared"  # the old run reads again too
    assert two_runs.check()[2] == []


def test_a_damaged_cached_evaluation_is_measured_again(
    two_runs: Store, make_evaluation, caplog: pytest.LogCaptureFixture
) -> None:
    _damage(two_runs, f"UPDATE evaluations SET data = {NOT_UTF8} WHERE kernel_hash = 'shared'")
    with caplog.at_level(logging.WARNING):
        found = two_runs.get_evaluation("shared", "matmul", "cpu", "test-cpu")
    assert found is None and "measured again" in caplog.text
    two_runs.put_evaluation(make_evaluation("shared"))  # the new measurement replaces it
    assert two_runs.get_evaluation("shared", "matmul", "cpu", "test-cpu") is not None


def test_a_run_row_that_does_not_parse_is_left_out_of_the_list(
    two_runs: Store, caplog: pytest.LogCaptureFixture
) -> None:
    _damage(two_runs, "UPDATE runs SET config = '{\"search\": ' WHERE id = 'mm01'")
    with caplog.at_level(logging.WARNING):
        assert [r.id for r in two_runs.list_runs()] == ["si01"]
    assert "runs with id='mm01'" in caplog.text
    with pytest.raises(BadRowError) as info:
        two_runs.get_run("mm01")
    assert (info.value.table, info.value.key) == ("runs", "id='mm01'")


def test_an_iteration_that_does_not_parse_is_named(two_runs: Store) -> None:
    _damage(two_runs, "UPDATE iterations SET data = 'not json' WHERE run_id = 'mm01'")
    with pytest.raises(BadRowError) as info:
        two_runs.iterations("mm01")
    assert (info.value.table, info.value.key) == ("iterations", "run_id='mm01', iteration=0")
    assert len(two_runs.iterations("si01")) == 1


def test_check_names_every_damaged_row(two_runs: Store) -> None:
    assert two_runs.check()[0] == [] and two_runs.check()[2] == []
    _damage(two_runs, f"UPDATE kernel_sources SET source = {NOT_UTF8} WHERE hash = 'shared'")
    _damage(two_runs, "UPDATE runs SET status = 'melted' WHERE id = 'si01'")
    _damage(two_runs, "UPDATE evaluations SET data = '{}' WHERE kernel_hash = 'own'")
    _damage(two_runs, "UPDATE run_kernels SET plan_steps = x'00ff' WHERE hash = 'own'")
    pages, tables, bad = two_runs.check()
    assert pages == [] and {"runs", "kernel_sources", "llm_calls"} <= set(tables)
    found = {(b.table, b.key) for b in bad}
    assert found == {
        ("kernel_sources", "hash='shared'"),
        ("runs", "id='si01'"),
        ("evaluations", "kernel_hash='own', problem='silu', workload='cpu', hardware='test-cpu',"
         " harness_version=" + repr(_harness(two_runs))),
        ("run_kernels", "seq=2"),
    }  # fmt: skip
    assert all(b.why for b in bad)


def _harness(store: Store) -> str:
    with sqlite3.connect(store.path) as conn:
        return str(conn.execute("SELECT harness_version FROM evaluations LIMIT 1").fetchone()[0])


def test_a_damaged_file_is_one_sentence_with_the_salvage(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        path = store.path
    data = bytearray(path.read_bytes())
    data[:16] = b"definitely not!!"  # the header: no longer SQLite's
    path.write_bytes(bytes(data))
    with pytest.raises(StoreUnusable, match=r"not a usable accelopt database.*\.recover"):
        Store.open(tmp_path)
