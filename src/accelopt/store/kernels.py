"""A store's kernels (their sources once per hash), the evaluation cache and the re-timings."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from accelopt.profiling.config import harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.evaluation import stored as stored_evaluation
from accelopt.store.database import Database, dump_json, now_iso
from accelopt.store.records import KernelOrigin, KernelRecord, RunRecord

log = logging.getLogger(__name__)


class KernelTables(Database):
    """The kernels each run saw, the evaluations of kernels, and one-session re-timings."""

    def add_kernel(self, run_id: str, kernel: KernelRecord) -> bool:
        """Record that ``kernel`` entered the run; False (and no change) if it already had.

        The source is stored once per hash across runs: the first source seen for a hash is the
        one kept (sources with the same hash differ at most in what normalization removes). A
        kept one that is damaged (not text) is replaced by this one, with a warning: one bad row
        does not stop every later run of that kernel.
        """
        with self._write_run(run_id) as conn:
            kept = conn.execute(
                "INSERT OR IGNORE INTO kernel_sources (hash, backend, source) VALUES (?, ?, ?)",
                (kernel.hash, kernel.backend, kernel.source),
            )
            if kept.rowcount == 0:
                self._mend_source(conn, kernel)
            cur = conn.execute(
                "INSERT OR IGNORE INTO run_kernels (run_id, hash, iteration, origin, parent_hash,"
                " plan_title, plan_steps) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    kernel.hash,
                    kernel.iteration,
                    kernel.origin,
                    kernel.parent_hash,
                    kernel.plan_title,
                    json.dumps(list(kernel.plan_steps)),
                ),
            )
            conn.execute(
                "INSERT OR IGNORE INTO run_kernel_writes (run_id, hash, iteration, parent_hash,"
                " plan_title) VALUES (?, ?, ?, ?, ?)",
                (run_id, kernel.hash, kernel.iteration, kernel.parent_hash, kernel.plan_title),
            )
            return cur.rowcount == 1

    def _mend_source(self, conn: sqlite3.Connection, kernel: KernelRecord) -> None:
        """The source kept for ``kernel.hash`` replaced by ``kernel``'s when it cannot be read."""
        row = conn.execute(
            "SELECT CAST(source AS BLOB), typeof(source), CAST(backend AS BLOB), typeof(backend)"
            " FROM kernel_sources WHERE hash = ?",
            (kernel.hash,),
        ).fetchone()
        if _is_text(row[0], row[1]) and _is_text(row[2], row[3]):
            return
        conn.execute(
            "UPDATE kernel_sources SET backend = ?, source = ? WHERE hash = ?",
            (kernel.backend, kernel.source, kernel.hash),
        )
        log.warning(
            "the stored source of kernel %s in %s was damaged (not UTF-8 text): replaced by the "
            "one written now",
            kernel.hash,
            self.path,
        )

    def kernels(self, run_id: str, every_write: bool = False) -> list[KernelRecord]:
        """The run's kernels in the order they were added, each as first written; with
        ``every_write``, a record for every time one was written (a later iteration, another
        parent or plan that wrote the same source)."""
        # a write's own iteration, parent and plan; the kernel's origin and plan steps
        write = "w" if every_write else "k"
        writes = (
            " JOIN run_kernel_writes w ON w.run_id = k.run_id AND w.hash = k.hash"
            if every_write
            else ""
        )
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT k.hash, s.source, s.backend, {write}.iteration, k.origin,"
                f" {write}.parent_hash, {write}.plan_title, k.plan_steps FROM run_kernels k"
                f"{writes} JOIN kernel_sources s ON s.hash = k.hash WHERE k.run_id = ?"
                f" ORDER BY {write}.seq",
                (run_id,),
            ).fetchall()
        found = []
        for r in rows:
            with self._row("kernel_sources", f"hash={r['hash']!r}"):
                if not isinstance(r["source"], str):
                    raise TypeError("its source is not text")
            with self._row("run_kernels", f"run_id={run_id!r}, hash={r['hash']!r}"):
                found.append(_kernel(r))
        return found

    def kernel_source(self, kernel_hash: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT source FROM kernel_sources WHERE hash = ?", (kernel_hash,)
            ).fetchone()
        if row is None:
            return None
        with self._row("kernel_sources", f"hash={kernel_hash!r}"):
            if not isinstance(row["source"], str):
                raise TypeError("its source is not text")
        return str(row["source"])

    # -- evaluations --------------------------------------------------------------------------

    def put_evaluation(
        self, evaluation: Evaluation, harness_version: str | None = None, replace: bool = True
    ) -> None:
        """Cache ``evaluation`` under (kernel hash, problem, workload, hardware, harness version),
        replacing what was there (``replace``; else an evaluation there stays). The harness
        version is the running harness's, with the problem's fingerprint for a workspace problem
        (``config.harness_key``)."""
        harness_version = harness_version or harness_key(evaluation.problem_version)
        with self._write() as conn:
            conflict = "REPLACE" if replace else "IGNORE"
            _insert_evaluation(conn, conflict, evaluation, harness_version)

    def get_evaluation(
        self,
        kernel_hash: str,
        problem: str,
        workload: str,
        hardware: str,
        harness_version: str | None = None,
        problem_version: str = "",
    ) -> Evaluation | None:
        """The cached evaluation, or None; a damaged one is None too (measured again and replaced),
        with a warning."""
        harness_version = harness_version or harness_key(problem_version)
        with self._read() as conn:
            row = conn.execute(
                "SELECT CAST(data AS BLOB) AS data FROM evaluations WHERE kernel_hash = ?"
                " AND problem = ? AND workload = ? AND hardware = ? AND harness_version = ?",
                (kernel_hash, problem, workload, hardware, harness_version),
            ).fetchone()
        if row is None:
            return None
        try:
            return stored_evaluation(row["data"])
        except ValueError:
            log.warning(
                "the cached evaluation of kernel %s on %s/%s in %s is damaged: it is measured "
                "again",
                kernel_hash,
                problem,
                workload,
                self.path,
            )
            return None

    def evaluations_of(
        self, run: RunRecord, workload: str, harness_version: str
    ) -> dict[str, Evaluation]:
        """Kernel hash -> cached evaluation on ``workload``, for the run's kernels on the run's
        problem and hardware (kernels without one are absent), in the order they were added.

        A kernel evaluated after a ceiling of the run's device was re-measured during the run is
        cached under the raised ceilings' key (the same device name, another digest): its
        evaluation is found there when the run's own key has none, the newest first."""
        device = run.hardware.rsplit("-", 1)[0] + "-"  # HardwareSpec.key(): f"{name}-{digest}"
        with self._read() as conn:
            rows = conn.execute(
                "SELECT k.hash, (SELECT e.data FROM evaluations e WHERE e.kernel_hash = k.hash"
                " AND e.problem = ? AND e.workload = ? AND e.harness_version = ?"
                " AND substr(e.hardware, 1, ?) = ?"
                " ORDER BY e.hardware = ? DESC, e.created_at DESC, e.rowid DESC LIMIT 1) AS data"
                " FROM run_kernels k WHERE k.run_id = ? ORDER BY k.seq",
                (run.problem, workload, harness_version, len(device), device, run.hardware, run.id),
            ).fetchall()
        found = {}
        for r in rows:
            if r["data"] is not None:
                key = f"kernel_hash={r['hash']!r}, problem={run.problem!r}"
                with self._row("evaluations", key):
                    found[r["hash"]] = stored_evaluation(r["data"])
        return found

    def raced_kernels(self, run: RunRecord, workload: str, harness_version: str) -> set[str]:
        """The hashes of the run's kernels whose timing stopped early inside it on ``workload``
        (raced: cached apart from final evaluations, under ``harness_version`` + "+raced:")."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT k.hash FROM run_kernels k JOIN evaluations e"
                " ON e.kernel_hash = k.hash WHERE k.run_id = ? AND e.problem = ?"
                " AND e.workload = ? AND e.harness_version LIKE ?",
                (run.id, run.problem, workload, harness_version + "+raced:%"),
            ).fetchall()
        return {r["hash"] for r in rows}

    # -- re-timings ---------------------------------------------------------------------------

    def put_retiming(
        self, run_id: str, iteration: int, kernels: Sequence[str], data: dict[str, Any]
    ) -> dict[str, Any]:
        """Keep a one-session re-timing of ``kernels`` (the parent first) in a run's iteration;
        never in the evaluation cache. The first record of those kernels in that iteration wins:
        returns the data kept."""
        key = json.dumps(list(kernels))
        with self._write_run(run_id) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO retimings (run_id, iteration, kernels, data, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (run_id, iteration, key, dump_json(data), now_iso()),
            )
            row = conn.execute(
                "SELECT data FROM retimings WHERE run_id = ? AND iteration = ? AND kernels = ?",
                (run_id, iteration, key),
            ).fetchone()
        with self._row("retimings", f"run_id={run_id!r}, iteration={iteration}, kernels={key!r}"):
            return dict(json.loads(row["data"]))

    def get_retiming(
        self, run_id: str, iteration: int, kernels: Sequence[str]
    ) -> dict[str, Any] | None:
        """The data ``put_retiming`` kept for these kernels in that iteration, or None."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT data FROM retimings WHERE run_id = ? AND iteration = ? AND kernels = ?",
                (run_id, iteration, json.dumps(list(kernels))),
            ).fetchone()
        if row is None:
            return None
        with self._row("retimings", f"run_id={run_id!r}, iteration={iteration}"):
            return dict(json.loads(row["data"]))

    def retimings(self, run_id: str) -> list[tuple[list[str], dict[str, Any]]]:
        """Every re-timing session of the run, in the order kept: (its kernels, its data)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT kernels, data FROM retimings WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return self._decoded(
            "retimings",
            rows,
            lambda r: f"run_id={run_id!r}, kernels={r['kernels']!r}",
            lambda r: (list(json.loads(r["kernels"])), dict(json.loads(r["data"]))),
        )


def _insert_evaluation(
    conn: sqlite3.Connection, conflict: str, evaluation: Evaluation, harness_version: str
) -> None:
    """Cache ``evaluation``; ``conflict``: "REPLACE" what is there under its key, or "IGNORE"
    (keep it)."""
    assert conflict in ("REPLACE", "IGNORE")
    conn.execute(
        f"INSERT OR {conflict} INTO evaluations (kernel_hash, problem, workload, hardware,"
        " harness_version, status, latency_s, pct_of_peak, data, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            evaluation.kernel_hash,
            evaluation.problem,
            evaluation.workload,
            evaluation.hardware,
            harness_version,
            str(evaluation.status),
            evaluation.latency_s,
            evaluation.pct_of_peak,
            dump_json(evaluation),
            now_iso(),
        ),
    )


def _kernel(row: sqlite3.Row) -> KernelRecord:
    """A ``kernels`` row (its columns named as the record's fields) as the record."""
    steps = tuple(json.loads(row["plan_steps"]))
    return KernelRecord(**{**dict(row), "origin": KernelOrigin(row["origin"]), "plan_steps": steps})


def _is_text(raw: bytes | None, kind: str) -> bool:
    """Whether a value read as bytes (``CAST(... AS BLOB)``) of SQLite type ``kind`` is text."""
    if kind != "text" or raw is None:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
