"""The store: one SQLite database per workspace (``<workspace>/accelopt.db``).

Runs, the kernels each run saw (sources kept once per hash), the evaluation cache, every LLM call,
the state after each iteration, and the optimization memory with a full-text index.

Durability: WAL journal, ``synchronous = FULL``, and every write method is one transaction
(``BEGIN IMMEDIATE`` ... ``COMMIT``) committed before it returns, so a process killed right after a
call returns loses nothing. Other processes may use the same file; they wait up to 10 s for a lock.

Threads: the store holds one connection (``check_same_thread=False``) and serializes every use of
it with a re-entrant lock, so one ``Store`` can be shared by all threads of a process. SQLite
admits one writer at a time anyway; reads are short.

Structured fields without a natural column are kept as JSON: a run's config, a kernel's plan steps,
an iteration, and whole ``Evaluation`` and ``LLMCall`` models (written with ``NaN``/``Infinity``
constants, so a ``max_rel_err`` of ``inf`` survives the round trip where ``model_dump_json`` would
write ``null``). The columns the queries need are kept beside the JSON.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pydantic_core
from pydantic import BaseModel

from accelopt.hardware.spec import HardwareSpec
from accelopt.llm.client import Usage
from accelopt.llm.records import LLMCall
from accelopt.memory.records import Experience, ExperienceKind, Lesson
from accelopt.profiling.composite import combine
from accelopt.profiling.config import harness_key
from accelopt.profiling.evaluation import Evaluation
from accelopt.store.errors import AmbiguousRunError, StoreError
from accelopt.store.records import (
    IterationRecord,
    KernelOrigin,
    KernelRecord,
    RunRecord,
    RunStatus,
)
from accelopt.store.schema import connect
from accelopt.store.search import fts_query

DB_NAME = "accelopt.db"
MIN_PREFIX = 4  # the shortest run id prefix ``get_run`` resolves

# bm25 column weights: title, description, before, after, problem. Code snippets are long and
# full of identifiers, so a hit there counts for less than one in the lesson's words.
_BM25 = "bm25(experiences_fts, 2.0, 1.0, 0.5, 0.5, 1.0)"


def now_iso() -> str:
    """The current time, ISO 8601 in UTC to the second (as ``LLMCall.started_at``)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _dump_model(model: BaseModel) -> str:
    return pydantic_core.to_json(model.model_dump(), inf_nan_mode="constants").decode()


class Store:
    """Persistence for one workspace. Use ``Store.open(workspace)``; close it (or use ``with``)."""

    def __init__(self, path: Path) -> None:
        """Open the database file at ``path`` (created if absent; its folder must exist)."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = connect(self.path)
        self._conn.row_factory = sqlite3.Row

    @classmethod
    def open(cls, workspace: Path) -> Store:
        """The store of ``workspace``: creates the folder and ``accelopt.db`` when absent."""
        workspace = Path(workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        return cls(workspace / DB_NAME)

    def close(self) -> None:
        """Close the connection; closing twice is harmless, using a closed store is an error."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the store {self.path} is closed")
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on exit (rolled back on an exception)."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connection()

    @staticmethod
    def _require_run(conn: sqlite3.Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise StoreError(f"no run with id {run_id!r} in the store")

    # -- runs ---------------------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> None:
        """Insert a new run. ``created_at``/``updated_at`` are set to now where left empty."""
        created = run.created_at or now_iso()
        updated = run.updated_at or created
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
        """Change a run's status, best or starting kernel; ``updated_at`` becomes now."""
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
                return _run(row)
            if len(run_id) < MIN_PREFIX:
                return None
            rows = conn.execute(
                "SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id",
                (len(run_id), run_id),
            ).fetchall()
        if len(rows) > 1:
            raise AmbiguousRunError(run_id, [r["id"] for r in rows])
        return _run(rows[0]) if rows else None

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first (by ``created_at``, then by insertion)."""
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC")
            return [_run(row) for row in rows.fetchall()]

    # -- kernels ------------------------------------------------------------------------------

    def add_kernel(self, run_id: str, kernel: KernelRecord) -> bool:
        """Record that ``kernel`` entered the run; False (and no change) if it already had.

        The source is stored once per hash across runs: the first source seen for a hash is the
        one kept (sources with the same hash differ at most in what normalization removes).
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT OR IGNORE INTO kernel_sources (hash, backend, source) VALUES (?, ?, ?)",
                (kernel.hash, kernel.backend, kernel.source),
            )
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
        return [
            KernelRecord(
                hash=r["hash"],
                source=r["source"],
                backend=r["backend"],
                iteration=r["iteration"],
                origin=KernelOrigin(r["origin"]),
                parent_hash=r["parent_hash"],
                plan_title=r["plan_title"],
                plan_steps=tuple(json.loads(r["plan_steps"])),
            )
            for r in rows
        ]

    def kernel_source(self, kernel_hash: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT source FROM kernel_sources WHERE hash = ?", (kernel_hash,)
            ).fetchone()
        return None if row is None else row["source"]

    # -- evaluations --------------------------------------------------------------------------

    def put_evaluation(self, evaluation: Evaluation, harness_version: str | None = None) -> None:
        """Cache ``evaluation`` under (kernel hash, problem, workload, hardware, harness version),
        replacing what was there. The harness version is the running harness's, with the
        problem's fingerprint for a workspace problem (``config.harness_key``)."""
        harness_version = harness_version or harness_key(evaluation.problem_version)
        with self._write() as conn:
            _insert_evaluation(conn, "REPLACE", evaluation, harness_version)

    def get_evaluation(
        self,
        kernel_hash: str,
        problem: str,
        workload: str,
        hardware: str,
        harness_version: str | None = None,
        problem_version: str = "",
    ) -> Evaluation | None:
        harness_version = harness_version or harness_key(problem_version)
        with self._read() as conn:
            row = conn.execute(
                "SELECT data FROM evaluations WHERE kernel_hash = ? AND problem = ?"
                " AND workload = ? AND hardware = ? AND harness_version = ?",
                (kernel_hash, problem, workload, hardware, harness_version),
            ).fetchone()
        return None if row is None else Evaluation.model_validate_json(row["data"])

    def run_evaluations(
        self, run_id: str, harness_version: str | None = None, workload: str | None = None
    ) -> dict[str, Evaluation]:
        """Kernel hash -> cached evaluation, for the run's kernels on the run's problem and
        hardware (kernels without one are absent), in the order the kernels were added.

        ``workload``: that workload's evaluations; by default the run's tuned workloads (its
        config's ``workloads``, else its one ``workload``), combined per kernel
        (``profiling.composite.combine``): a kernel is present once it failed on one of them or
        was evaluated on all.

        A kernel evaluated after a ceiling of the run's device was re-measured during the run is
        cached under the raised ceilings' key (the same device name, another digest): its
        evaluation is found there when the run's own key has none, the newest first. The harness
        version is the running one, with the fingerprint of the run's problem (its config's
        ``problem_version``) for a workspace problem."""
        run = self.get_run(run_id)
        if run is None:
            return {}
        harness_version = harness_version or harness_key(run.spec.get("problem_version", ""))
        if workload is not None:
            return self._workload_evaluations(run, workload, harness_version)
        tuned = run.spec.get("workloads") or [run.workload]
        found = [self._workload_evaluations(run, w, harness_version) for w in tuned]
        if len(found) == 1:
            return found[0]
        combined = {}
        for kernel_hash in found[0]:
            present = [f[kernel_hash] for f in found if kernel_hash in f]
            if len(present) == len(found) or not all(e.passed for e in present):
                combined[kernel_hash] = combine(present, tuned)
        return combined

    def run_raced(self, run_id: str) -> set[str]:
        """The hashes of the run's kernels whose timing stopped early inside it (raced, cached
        apart from final evaluations: ``CachedProfiler.race``), on the run's first workload."""
        run = self.get_run(run_id)
        if run is None:
            return set()
        raced = harness_key(run.spec.get("problem_version", "")) + "+raced:%"
        workload = (run.spec.get("workloads") or [run.workload])[0]
        with self._read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT k.hash FROM run_kernels k JOIN evaluations e"
                " ON e.kernel_hash = k.hash WHERE k.run_id = ? AND e.problem = ?"
                " AND e.workload = ? AND e.harness_version LIKE ?",
                (run.id, run.problem, workload, raced),
            ).fetchall()
        return {r["hash"] for r in rows}

    def _workload_evaluations(
        self, run: RunRecord, workload: str, harness_version: str
    ) -> dict[str, Evaluation]:
        device = run.hardware.rsplit("-", 1)[0] + "-"  # HardwareSpec.key(): f"{name}-{digest}"
        with self._read() as conn:
            rows = conn.execute(
                "SELECT k.hash, (SELECT e.data FROM evaluations e WHERE e.kernel_hash = k.hash"
                " AND e.problem = ? AND e.workload = ? AND e.harness_version = ?"
                " AND substr(e.hardware, 1, ?) = ?"
                " ORDER BY e.hardware = ? DESC, e.created_at DESC, e.rowid DESC LIMIT 1) AS data"
                " FROM run_kernels k WHERE k.run_id = ? ORDER BY k.seq",
                (run.problem, workload, harness_version, len(device), device,
                 run.hardware, run.id),
            ).fetchall()  # fmt: skip
        return {
            r["hash"]: Evaluation.model_validate_json(r["data"])
            for r in rows
            if r["data"] is not None
        }

    def rescore_run(
        self, run_id: str, hardware: HardwareSpec, evaluations: Sequence[Evaluation]
    ) -> None:
        """Move a run onto ``hardware``, the spec of its device it ended with (a ceiling a kernel
        beat was raised during it), in one transaction: ``evaluations``, the run's evaluations
        re-scored against it (``profiling.parent.rescoring``), are cached under its key where
        the cache holds none there yet (one measured against it stays); the run's hardware and
        recorded spec (what a resume is scored against) become it; and each iteration's best %
        of peak becomes its best kernel's re-scored one."""
        key = hardware.key()
        other = next((e for e in evaluations if e.hardware != key), None)
        if other is not None:
            raise ValueError(f"an evaluation scored against {other.hardware}, not {key}")
        with self._write() as conn:
            row = conn.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run with id {run_id!r} in the store")
            for evaluation in evaluations:
                harness_version = harness_key(evaluation.problem_version)
                _insert_evaluation(conn, "IGNORE", evaluation, harness_version)
            config = json.loads(row["config"])
            config["hardware_spec"] = hardware.model_dump(mode="json")
            conn.execute(
                "UPDATE runs SET hardware = ?, config = ?, updated_at = ? WHERE id = ?",
                (key, json.dumps(config), now_iso(), run_id),
            )
            best = self.run_evaluations(run_id)  # in this transaction: the re-scored ones
            rows = conn.execute(
                "SELECT iteration, data FROM iterations WHERE run_id = ?", (run_id,)
            ).fetchall()
            for r in rows:
                data = json.loads(r["data"])
                found = best.get(data["best_hash"])
                if found is None or not found.passed or found.pct_of_peak is None:
                    continue
                data["best_pct_of_peak"] = found.pct_of_peak
                conn.execute(
                    "UPDATE iterations SET data = ? WHERE run_id = ? AND iteration = ?",
                    (json.dumps(data), run_id, r["iteration"]),
                )

    # -- LLM calls ----------------------------------------------------------------------------

    def recorder(self, run_id: str, replay_from: Sequence[str] = ()) -> StoreRecorder:
        """A ``Recorder`` that stores calls under ``run_id`` (which must exist) and replays the
        successful, paid-for calls of that run and of the runs in ``replay_from`` only."""
        with self._read() as conn:
            for run in (run_id, *replay_from):
                self._require_run(conn, run)
        return StoreRecorder(self, run_id, tuple(replay_from))

    def hold_call(self, run_id: str, key: str, usd: float, tokens: int) -> str:
        """Hold what a paid call may cost before its request is sent; its id. ``record_call``
        with that id drops the hold with the record: a hold left behind is a call a kill cut
        off, which the server may have answered and charged (``spent`` counts it)."""
        hold = uuid.uuid4().hex
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT INTO llm_holds (hold, run_id, key, usd, tokens, started_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (hold, run_id, key, usd, tokens, now_iso()),
            )
        return hold

    def record_call(self, run_id: str, call: LLMCall, hold: str = "") -> None:
        """Append ``call`` to the run's calls (every call is kept, even with a repeated id), and
        drop its ``hold`` in the same transaction."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            if hold:
                conn.execute("DELETE FROM llm_holds WHERE hold = ?", (hold,))
            conn.execute(
                "INSERT INTO llm_calls (run_id, id, key, agent, model, ok, replayed, tokens_in,"
                " tokens_out, cost_usd, started_at, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    call.id,
                    call.key,
                    call.agent,
                    call.model,
                    int(call.ok),
                    int(call.replayed),
                    call.tokens_in,
                    call.tokens_out,
                    call.cost_usd,
                    call.started_at,
                    _dump_model(call),
                ),
            )

    def find_call(self, key: str, run_ids: Sequence[str]) -> LLMCall | None:
        """The first successful, non-replayed call with this replay key in one of ``run_ids``."""
        if not run_ids:
            return None
        marks = ", ".join("?" for _ in run_ids)
        with self._read() as conn:
            row = conn.execute(
                "SELECT data FROM llm_calls WHERE key = ? AND ok = 1 AND replayed = 0"
                f" AND run_id IN ({marks}) ORDER BY seq LIMIT 1",
                (key, *run_ids),
            ).fetchone()
        return None if row is None else LLMCall.model_validate_json(row["data"])

    def spent(self, run_ids: Sequence[str]) -> Spent:
        """What the runs' calls cost, over every session of each: dollars of the priced calls,
        tokens, and how many calls had no price; replayed calls cost nothing. Calls held and
        never recorded (``hold_call``: cut off by a kill, or on their way now) count at what
        they may have cost."""
        if not run_ids:
            return Spent(0.0, 0, 0)
        marks = ", ".join("?" for _ in run_ids)
        with self._read() as conn:
            row = conn.execute(
                "SELECT total(cost_usd) AS usd, total(tokens_in + tokens_out) AS tokens,"
                " total(cost_usd IS NULL) AS unknown FROM llm_calls"
                f" WHERE replayed = 0 AND run_id IN ({marks})",
                tuple(run_ids),
            ).fetchone()
            held = conn.execute(
                "SELECT total(usd) AS usd, total(tokens) AS tokens, count(*) AS calls"
                f" FROM llm_holds WHERE run_id IN ({marks})",
                tuple(run_ids),
            ).fetchone()
        return Spent(
            float(row["usd"]) + float(held["usd"]), int(row["tokens"]) + int(held["tokens"]),
            int(row["unknown"]), int(held["calls"]), float(held["usd"]),
        )  # fmt: skip

    def llm_calls(self, run_id: str) -> list[LLMCall]:
        """The run's calls in the order they were recorded."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT data FROM llm_calls WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [LLMCall.model_validate_json(r["data"]) for r in rows]

    def usage_by_agent(self, run_id: str) -> dict[str, Usage]:
        """The run's calls over all its sessions, per agent (in order of first call), counted as
        ``llm.client.Usage`` counts a session's: calls, failed, replayed, tokens in and out,
        ``cost_usd`` (the sum of the known costs; replays cost 0) and ``unknown_cost`` (how many
        calls had no price)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT agent, count(*) AS calls, total(ok = 0) AS failed,"
                " total(replayed) AS replayed, total(tokens_in) AS tokens_in,"
                " total(tokens_out) AS tokens_out, total(cost_usd) AS cost_usd,"
                " total(cost_usd IS NULL) AS unknown_cost"
                " FROM llm_calls WHERE run_id = ? GROUP BY agent ORDER BY min(seq)",
                (run_id,),
            ).fetchall()
        return {
            r["agent"]: Usage(
                calls=int(r["calls"]),
                failed=int(r["failed"]),
                replayed=int(r["replayed"]),
                tokens_in=int(r["tokens_in"]),
                tokens_out=int(r["tokens_out"]),
                cost_usd=float(r["cost_usd"]),
                unknown_cost=int(r["unknown_cost"]),
            )
            for r in rows
        }

    def usage(self, run_id: str) -> dict[str, dict[str, float | int]]:
        """``usage_by_agent`` as JSON: each agent's ``Usage`` as a dict of its fields."""
        return {agent: usage_json(u) for agent, u in self.usage_by_agent(run_id).items()}

    # -- iterations ---------------------------------------------------------------------------

    def commit_iteration(
        self, run_id: str, record: IterationRecord, best_hash: str | None = None
    ) -> None:
        """Commit one iteration in one transaction: its record (replacing an earlier record of
        the same one), the experiences it learned (visible from now on), and the run's best."""
        data = dataclasses.asdict(record)
        with self._write() as conn:
            self._require_run(conn, run_id)
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
                "SELECT data FROM iterations WHERE run_id = ? ORDER BY iteration", (run_id,)
            ).fetchall()
        return [_iteration(json.loads(r["data"])) for r in rows]

    # -- optimization memory ------------------------------------------------------------------

    def add_experience(self, experience: Experience) -> int:
        """Store an experience and return its id (``experience.id`` is ignored); ``created_at``
        is set to now where left empty. One learned in a run's iteration (``iteration`` set) is
        unique per (run, iteration, parent, plan): adding it again returns the first one's id;
        it stays invisible until ``commit_iteration`` commits that iteration."""
        lesson = experience.lesson
        with self._write() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO experiences (run_id, kind, speedup, problem, backend,"
                " hardware, model, slow_hash, fast_hash, title, description, before_src,"
                " after_src, created_at, iteration, parent_hash, plan_title, committed)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    experience.run_id,
                    experience.kind,
                    experience.speedup,
                    experience.problem,
                    experience.backend,
                    experience.hardware,
                    experience.model,
                    experience.slow_hash,
                    experience.fast_hash,
                    lesson.title,
                    lesson.description,
                    lesson.before,
                    lesson.after,
                    experience.created_at or now_iso(),
                    experience.iteration,
                    experience.parent_hash,
                    experience.plan_title,
                    int(experience.iteration is None),
                ),
            )
            if cur.rowcount == 1:
                assert cur.lastrowid is not None
                return cur.lastrowid
            row = conn.execute(
                "SELECT id FROM experiences WHERE run_id = ? AND iteration = ?"
                " AND parent_hash = ? AND plan_title = ?",
                (
                    experience.run_id,
                    experience.iteration,
                    experience.parent_hash,
                    experience.plan_title,
                ),
            ).fetchone()
            return int(row["id"])

    def experiences(
        self,
        *,
        run_id: str | None = None,
        problem: str | None = None,
        backend: str | None = None,
        pending: bool = False,
    ) -> list[Experience]:
        """Committed experiences, oldest first, optionally only those of one run, problem and/or
        backend; ``pending``: also those of iterations not committed (yet, or ever: a killed
        run's)."""
        where, params = _filters(run_id=run_id, problem=problem, backend=backend)
        if not pending:
            where = f"{where} AND committed = 1" if where else "WHERE committed = 1"
        with self._read() as conn:
            rows = conn.execute(f"SELECT * FROM experiences {where} ORDER BY id", params)
            return [_experience(r) for r in rows.fetchall()]

    def experiences_by_id(self, ids: Sequence[int]) -> list[Experience]:
        """The experiences with these ids, in this order (an id deleted since is left out)."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        with self._read() as conn:
            rows = conn.execute(f"SELECT * FROM experiences WHERE id IN ({marks})", tuple(ids))
            found = {r["id"]: _experience(r) for r in rows.fetchall()}
        return [found[i] for i in ids if i in found]

    def save_retrieval(
        self, run_id: str, iteration: int, parent_hash: str, ids: Sequence[int]
    ) -> list[int]:
        """Keep the lessons ``parent_hash`` was shown in a run's iteration; the first record
        wins. Returns the ids recorded (the earlier ones when there were)."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT OR IGNORE INTO retrievals (run_id, iteration, parent_hash, ids)"
                " VALUES (?, ?, ?, ?)",
                (run_id, iteration, parent_hash, json.dumps(list(ids))),
            )
            row = conn.execute(
                "SELECT ids FROM retrievals WHERE run_id = ? AND iteration = ? AND parent_hash = ?",
                (run_id, iteration, parent_hash),
            ).fetchone()
        return [int(i) for i in json.loads(row["ids"])]

    def get_retrieval(self, run_id: str, iteration: int, parent_hash: str) -> list[int] | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT ids FROM retrievals WHERE run_id = ? AND iteration = ? AND parent_hash = ?",
                (run_id, iteration, parent_hash),
            ).fetchone()
        return None if row is None else [int(i) for i in json.loads(row["ids"])]

    # -- re-timings ---------------------------------------------------------------------------

    def put_retiming(
        self, run_id: str, iteration: int, kernels: Sequence[str], data: dict[str, Any]
    ) -> dict[str, Any]:
        """Keep a one-session re-timing of ``kernels`` (the parent first) in a run's iteration;
        never in the evaluation cache. The first record of those kernels in that iteration wins:
        returns the data kept."""
        key = json.dumps(list(kernels))
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT OR IGNORE INTO retimings (run_id, iteration, kernels, data, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    run_id,
                    iteration,
                    key,
                    pydantic_core.to_json(data, inf_nan_mode="constants").decode(),
                    now_iso(),
                ),
            )
            row = conn.execute(
                "SELECT data FROM retimings WHERE run_id = ? AND iteration = ? AND kernels = ?",
                (run_id, iteration, key),
            ).fetchone()
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
        return None if row is None else dict(json.loads(row["data"]))

    def retimings(self, run_id: str) -> list[tuple[list[str], dict[str, Any]]]:
        """Every re-timing session of the run, in the order kept: (its kernels, its data)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT kernels, data FROM retimings WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return [(list(json.loads(r["kernels"])), dict(json.loads(r["data"]))) for r in rows]

    def get_experience(self, experience_id: int) -> Experience | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM experiences WHERE id = ?", (experience_id,))
            found = row.fetchone()
        return None if found is None else _experience(found)

    def delete_experience(self, experience_id: int) -> None:
        """Remove an experience (and its full-text entry); an unknown id is a no-op."""
        with self._write() as conn:
            conn.execute("DELETE FROM experiences WHERE id = ?", (experience_id,))

    def search_experiences(
        self,
        query: str,
        *,
        limit: int = 50,
        run_id: str | None = None,
        backend: str | None = None,
    ) -> list[tuple[Experience, float]]:
        """Committed experiences matching any word of ``query`` (free text; never an FTS5 syntax
        error), best first, with relevance = -bm25 (higher is better). A query without any word
        returns the most recent experiences with relevance 0. Optionally only those of one run
        and/or one backend."""
        if limit <= 0:
            return []
        match = fts_query(query)
        where, params = _filters(prefix="e.", run_id=run_id, backend=backend)
        where = f"{where} AND e.committed = 1" if where else "WHERE e.committed = 1"
        with self._read() as conn:
            if match is None:
                rows = conn.execute(
                    f"SELECT e.*, 0.0 AS score FROM experiences e {where}"
                    " ORDER BY e.id DESC LIMIT ?",
                    (*params, limit),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT e.*, {_BM25} AS score FROM experiences_fts"
                    f" JOIN experiences e ON e.id = experiences_fts.rowid {where}"
                    " AND experiences_fts MATCH ? ORDER BY score, e.id DESC LIMIT ?",
                    (*params, match, limit),
                ).fetchall()
        return [(_experience(r), -float(r["score"]) + 0.0) for r in rows]


class StoreRecorder:
    """The ``llm.recorder.Recorder`` of one run: calls are stored with the run id as they come;
    ``find`` replays from this run (a resume) and from the runs in ``replay_from`` only (never
    silently from another run of the workspace). Thread-safe (through the store's lock)."""

    def __init__(self, store: Store, run_id: str, replay_from: tuple[str, ...] = ()) -> None:
        self.store = store
        self.run_id = run_id
        self.replay_from = replay_from

    def hold(self, key: str, usd: float, tokens: int) -> str:
        return self.store.hold_call(self.run_id, key, usd, tokens)

    def record(self, call: LLMCall, hold: str = "") -> None:
        self.store.record_call(self.run_id, call, hold)

    def find(self, key: str) -> LLMCall | None:
        return self.store.find_call(key, (self.run_id, *self.replay_from))


@dataclass(frozen=True)
class Spent:
    """What a run's calls cost over all its sessions (``Store.spent``)."""

    usd: float
    tokens: int
    unknown_cost_calls: int
    held_calls: int = 0  # of which, calls held and never recorded (a kill cut them off) ...
    held_usd: float = 0.0  # ... at what they may have cost (counted in ``usd``)


def usage_json(usage: Usage) -> dict[str, float | int]:
    """One agent's ``Usage`` as the CLI's and the API's JSON give it: its fields, in order."""
    return dataclasses.asdict(usage)


# -- rows to records ------------------------------------------------------------------------------


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
            _dump_model(evaluation),
            now_iso(),
        ),
    )


def _filters(prefix: str = "", **columns: Any) -> tuple[str, tuple[Any, ...]]:
    """A ``WHERE`` clause for the columns whose value is not None (names are ours, not input)."""
    given = {name: value for name, value in columns.items() if value is not None}
    if not given:
        return "", ()
    clause = " AND ".join(f"{prefix}{name} = ?" for name in given)
    return f"WHERE {clause}", tuple(given.values())


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
    return IterationRecord(
        iteration=data["iteration"],
        beam=tuple(data["beam"]),
        best_hash=data["best_hash"],
        best_latency_s=data["best_latency_s"],
        best_pct_of_peak=data["best_pct_of_peak"],
        spent_usd=data["spent_usd"],
        evaluated=data["evaluated"],
        failed_by_status=dict(data.get("failed_by_status", {})),
        wasted=dict(data.get("wasted", {})),
    )


def _experience(row: sqlite3.Row) -> Experience:
    return Experience(
        lesson=Lesson(
            title=row["title"],
            description=row["description"],
            before=row["before_src"],
            after=row["after_src"],
        ),
        kind=ExperienceKind(row["kind"]),
        speedup=row["speedup"],
        problem=row["problem"],
        backend=row["backend"],
        hardware=row["hardware"],
        model=row["model"],
        run_id=row["run_id"],
        slow_hash=row["slow_hash"],
        fast_hash=row["fast_hash"],
        id=row["id"],
        created_at=row["created_at"],
        iteration=row["iteration"],
        parent_hash=row["parent_hash"],
        plan_title=row["plan_title"],
    )
