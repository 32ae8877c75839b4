"""A store's optimization memory: experiences with their full-text index, and the lessons each
parent was shown in an iteration."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from accelopt.memory.records import Experience, ExperienceKind, Lesson
from accelopt.store.database import Database, now_iso
from accelopt.store.search import fts_query

# bm25 column weights: title, description, before, after, problem. Code snippets are long and
# full of identifiers, so a hit there counts for less than one in the lesson's words.
_BM25 = "bm25(experiences_fts, 2.0, 1.0, 0.5, 0.5, 1.0)"
# An experience's fields kept in columns of their own name (its lesson and kind aside)
_PROVENANCE = (
    *("speedup", "problem", "backend", "hardware", "model", "run_id", "slow_hash", "fast_hash"),
    *("id", "created_at", "iteration", "parent_hash", "plan_title"),
)


class ExperienceTables(Database):
    """Experiences (committed with their iteration) and per-iteration retrievals."""

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
                " after_src, created_at, iteration, parent_hash, plan_title, committed,"
                " measured_here) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    int(experience.measured_here),
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
        with self._write_run(run_id) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO retrievals (run_id, iteration, parent_hash, ids)"
                " VALUES (?, ?, ?, ?)",
                (run_id, iteration, parent_hash, json.dumps(list(ids))),
            )
            row = conn.execute(
                "SELECT ids FROM retrievals WHERE run_id = ? AND iteration = ? AND parent_hash = ?",
                (run_id, iteration, parent_hash),
            ).fetchone()
        with self._row("retrievals", _retrieval_key(run_id, iteration, parent_hash)):
            return [int(i) for i in json.loads(row["ids"])]

    def get_retrieval(self, run_id: str, iteration: int, parent_hash: str) -> list[int] | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT ids FROM retrievals WHERE run_id = ? AND iteration = ? AND parent_hash = ?",
                (run_id, iteration, parent_hash),
            ).fetchone()
        if row is None:
            return None
        with self._row("retrievals", _retrieval_key(run_id, iteration, parent_hash)):
            return [int(i) for i in json.loads(row["ids"])]

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


def _retrieval_key(run_id: str, iteration: int, parent_hash: str) -> str:
    return f"run_id={run_id!r}, iteration={iteration}, parent_hash={parent_hash!r}"


def _filters(prefix: str = "", **columns: Any) -> tuple[str, tuple[Any, ...]]:
    """A ``WHERE`` clause for the columns whose value is not None (names are ours, not input)."""
    given = {name: value for name, value in columns.items() if value is not None}
    if not given:
        return "", ()
    clause = " AND ".join(f"{prefix}{name} = ?" for name in given)
    return f"WHERE {clause}", tuple(given.values())


def _experience(row: sqlite3.Row) -> Experience:
    return Experience(
        lesson=Lesson(
            title=row["title"],
            description=row["description"],
            before=row["before_src"],
            after=row["after_src"],
        ),
        kind=ExperienceKind(row["kind"]),
        measured_here=bool(row["measured_here"]),
        **{name: row[name] for name in _PROVENANCE},
    )
