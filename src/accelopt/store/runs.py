"""A store's runs and their iterations."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

from accelopt.store.database import Database, now_iso
from accelopt.store.errors import AmbiguousRunError, BadRowError, StoreError
from accelopt.store.records import IterationRecord, RunRecord, RunStatus

MIN_PREFIX = 4  # the shortest run id prefix ``get_run`` resolves
log = logging.getLogger(__name__)


class RunTables(Database):
    """Runs (their columns and their spec's JSON, kept unread) and each iteration's record."""

    def create_run(self, run: RunRecord) -> None:
        """Insert a new run. ``created_at``/``updated_at`` are set to now where left empty."""
        created = run.created_at or now_iso()
        updated = run.updated_at or created
        self._run_hint = run.id
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise StoreError(f"a run with id {run.id!r} is already in the store")
            conn.execute(
                "INSERT INTO runs (id, problem, workload, backend, hardware, strategy, config,"
                " status, baseline_hash, best_hash, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.problem,
                    run.workload,
                    run.backend,
                    run.hardware,
                    run.strategy,
                    json.dumps(run.spec),
                    run.status,
                    run.baseline_hash,
                    run.best_hash,
                    created,
                    updated,
                ),
            )

    def update_run(
        self,
        run_id: str,
        *,
        status: RunStatus | None = None,
        best_hash: str | None = None,
        baseline_hash: str | None = None,
    ) -> None:
        """Change a run's status, best or starting kernel; ``updated_at`` becomes now.

        Once a write of this store failed for the disk's sake (full, read-only, failing),
        marking a run failed is not tried: the run stays ``running``, to be resumed once the
        disk is mended, and the error that stopped it is the one told."""
        if status is RunStatus.FAILED and self._disk_failure is not None:
            log.debug("run %s left running: %s", run_id, self._disk_failure)
            return
        self._run_hint = run_id
        sets, params = ["updated_at = ?"], [now_iso()]
        for column, value in (
            ("status", status),
            ("best_hash", best_hash),
            ("baseline_hash", baseline_hash),
        ):
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(value)
        with self._write() as conn:
            cur = conn.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*params, run_id))
            if cur.rowcount == 0:
                raise StoreError(f"no run with id {run_id!r} in the store")

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run with this id, or with this unique id prefix (at least 4 characters).

        None when nothing matches; ``AmbiguousRunError`` (a ``UserError`` naming the matches)
        when the prefix matches several runs. An exact id always wins over a prefix.
        """
        with self._read() as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is not None:
                return self._run(row)
            if len(run_id) < MIN_PREFIX:
                return None
            rows = conn.execute(
                "SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id",
                (len(run_id), run_id),
            ).fetchall()
        if len(rows) > 1:
            raise AmbiguousRunError(run_id, [r["id"] for r in rows])
        return self._run(rows[0]) if rows else None

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first (by ``created_at``, then by insertion). A run whose row is
        damaged is left out, with a warning that names it (``accelopt store check``)."""
        with self._read() as conn:
            order = "SELECT rowid FROM runs ORDER BY created_at DESC, rowid DESC"
            rowids = [int(r[0]) for r in conn.execute(order).fetchall()]
        runs = []
        for rowid in rowids:
            try:
                with self._read() as conn:
                    row = conn.execute("SELECT * FROM runs WHERE rowid = ?", (rowid,)).fetchone()
                runs.append(self._run(row))
            except BadRowError as exc:
                log.warning("%s; that run is left out", exc)
        return runs

    def _run(self, row: sqlite3.Row) -> RunRecord:
        with self._row("runs", f"id={row['id']!r}"):
            if not isinstance(row["id"], str):
                raise TypeError("its id is not text")
            return _run(row)

    def commit_iteration(
        self, run_id: str, record: IterationRecord, best_hash: str | None = None
    ) -> None:
        """Commit one iteration in one transaction: its record (replacing an earlier record of
        the same one), the experiences it learned (visible from now on), and the run's best."""
        data = dataclasses.asdict(record)
        with self._write_run(run_id) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO iterations (run_id, iteration, best_hash, best_latency_s,"
                " spent_usd, data) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    record.iteration,
                    record.best_hash,
                    record.best_latency_s,
                    record.spent_usd,
                    json.dumps(data),
                ),
            )
            conn.execute(
                "UPDATE experiences SET committed = 1 WHERE run_id = ? AND iteration = ?",
                (run_id, record.iteration),
            )
            if best_hash is not None:
                conn.execute(
                    "UPDATE runs SET best_hash = ?, updated_at = ? WHERE id = ?",
                    (best_hash, now_iso(), run_id),
                )

    def iterations(self, run_id: str) -> list[IterationRecord]:
        """The run's iteration records, by iteration number."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT iteration, data FROM iterations WHERE run_id = ? ORDER BY iteration",
                (run_id,),
            ).fetchall()
        found = []
        for r in rows:
            with self._row("iterations", f"run_id={run_id!r}, iteration={r['iteration']}"):
                found.append(_iteration(json.loads(r["data"])))
        return found

    def move_run(self, run_id: str, hardware: str, spec: Mapping[str, Any]) -> None:
        """Put the run on another hardware key with its spec as ``spec`` (the ceilings it is now
        scored against: ``search.one_ceiling.rescore_run``)."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET hardware = ?, config = ?, updated_at = ? WHERE id = ?",
                (hardware, json.dumps(spec), now_iso(), run_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no run with id {run_id!r} in the store")

    def set_best_pct(self, run_id: str, pct: Mapping[str, float]) -> None:
        """Each iteration's best % of peak becomes ``pct`` of its best kernel where given."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT iteration, data FROM iterations WHERE run_id = ?", (run_id,)
            ).fetchall()
            for r in rows:
                data = json.loads(r["data"])
                if data["best_hash"] not in pct:
                    continue
                data["best_pct_of_peak"] = pct[data["best_hash"]]
                conn.execute(
                    "UPDATE iterations SET data = ? WHERE run_id = ? AND iteration = ?",
                    (json.dumps(data), run_id, r["iteration"]),
                )


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        problem=row["problem"],
        workload=row["workload"],
        backend=row["backend"],
        hardware=row["hardware"],
        strategy=row["strategy"],
        spec=json.loads(row["config"]),
        status=RunStatus(row["status"]),
        baseline_hash=row["baseline_hash"],
        best_hash=row["best_hash"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _iteration(data: dict[str, Any]) -> IterationRecord:
    known = {f.name for f in dataclasses.fields(IterationRecord)}
    return IterationRecord(
        **{k: v for k, v in data.items() if k in known} | {"beam": tuple(data["beam"])}
    )
