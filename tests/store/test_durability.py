"""Concurrency and durability: threads writing at once, WAL, and a process killed mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from accelopt.store.store import Store

THREADS = 8
PER_THREAD = 25


def test_threads_write_calls_and_evaluations_at_once(store, make_run, make_call, make_evaluation):
    store.create_run(make_run())
    recorder = store.recorder("run-0001")
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i in range(PER_THREAD):
                recorder.record(make_call(f"t{t}-{i}", agent=f"agent{t}"))
                store.put_evaluation(make_evaluation(f"t{t}-{i}"))
                assert recorder.find(f"t{t}-{i}") is not None
                store.get_evaluation(f"t{t}-{i}", "matmul", "cpu", "test-cpu")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    calls = store.llm_calls("run-0001")
    assert len(calls) == THREADS * PER_THREAD
    assert len({c.key for c in calls}) == THREADS * PER_THREAD
    for t in range(THREADS):  # each thread's calls in its own order
        mine = [c.key for c in calls if c.agent == f"agent{t}"]
        assert mine == [f"t{t}-{i}" for i in range(PER_THREAD)]
    usage = store.usage("run-0001")
    assert sum(u["calls"] for u in usage.values()) == THREADS * PER_THREAD
    count = store._connection().execute("SELECT count(*) FROM evaluations").fetchone()[0]
    assert count == THREADS * PER_THREAD


def test_two_stores_on_one_workspace_write_at_once(tmp_path, make_run, make_call):
    with Store.open(tmp_path) as a, Store.open(tmp_path) as b:
        a.create_run(make_run())
        barrier = threading.Barrier(2)

        def work(store: Store, name: str) -> None:
            barrier.wait()
            rec = store.recorder("run-0001")
            for i in range(PER_THREAD):
                rec.record(make_call(f"{name}-{i}"))

        threads = [threading.Thread(target=work, args=(s, n)) for s, n in ((a, "a"), (b, "b"))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(a.llm_calls("run-0001")) == 2 * PER_THREAD
        assert b.find_call("a-0", ["run-0001"]) and a.find_call("b-0", ["run-0001"])


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    from accelopt.llm.records import LLMCall
    from accelopt.store.records import KernelRecord, RunRecord
    from accelopt.store.store import Store

    workspace, how = Path(sys.argv[1]), sys.argv[2]
    store = Store.open(workspace)
    store.create_run(RunRecord(id="crash-run", problem="matmul", workload="cpu", backend="cpu",
                               hardware="hw", strategy="beam", spec={"beam": 1}))
    store.add_kernel("crash-run", KernelRecord(hash="k0", source="void kernel(void) {}",
                                               backend="cpu", iteration=0, origin="baseline"))
    store.recorder("crash-run").record(LLMCall(
        id="c1", key="key-1", agent="planner", model="m", base_url="u",
        messages=[{"role": "user", "content": "hi"}], params={}, reply="paid for",
        cost_usd=0.5))
    if how == "exit":
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize(
    "how",
    [
        "exit",
        pytest.param(
            "sigkill",
            marks=pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL"),
        ),
    ],
)
def test_a_killed_process_loses_nothing(tmp_path, how):
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), how],
        capture_output=True,
        text=True,
        timeout=120,
    )
    expected = 0 if how == "exit" else -signal.SIGKILL
    assert done.returncode == expected, done.stderr
    assert (tmp_path / "accelopt.db-wal").exists()  # never checkpointed nor cleaned up
    with Store.open(tmp_path) as store:
        run = store.get_run("crash-run")
        assert run is not None and run.spec == {"beam": 1}
        assert [k.hash for k in store.kernels("crash-run")] == ["k0"]
        assert store.kernel_source("k0") == "void kernel(void) {}"
        calls = store.llm_calls("crash-run")
        assert [c.reply for c in calls] == ["paid for"]
        assert store.recorder("crash-run").find("key-1") == calls[0]
        assert store.usage("crash-run")["planner"]["cost_usd"] == 0.5


def test_wal_file_is_used(store, make_run):
    store.create_run(make_run())
    assert os.path.exists(str(store.path) + "-wal")
