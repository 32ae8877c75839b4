"""The references each run timed in its own session: NumPy and the PyTorch kinds, what a user
would pick instead of a kernel. A run's summary, ``runs compare`` and its report compare its best
kernel with the fastest of them (``search.references``)."""

from __future__ import annotations

import logging

from accelopt.profiling.evaluation import Evaluation
from accelopt.profiling.evaluation import stored as stored_evaluation
from accelopt.store.database import Database, dump_json

log = logging.getLogger(__name__)


class ReferenceTables(Database):
    """``run_references``: one evaluation per run and reference kind."""

    def put_reference(self, run_id: str, evaluation: Evaluation) -> None:
        """Keep ``evaluation`` (its ``kernel`` is the kind) as the run's, replacing an older one."""
        with self._write_run(run_id) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO run_references (run_id, kind, data) VALUES (?, ?, ?)",
                (run_id, evaluation.kernel, dump_json(evaluation)),
            )

    def references(self, run_id: str) -> list[Evaluation]:
        """The run's reference evaluations, by kind; a damaged one is left out, with a warning."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT kind, CAST(data AS BLOB) AS data FROM run_references WHERE run_id = ?"
                " ORDER BY kind",
                (run_id,),
            ).fetchall()
        found = []
        for row in rows:
            try:
                found.append(stored_evaluation(row["data"]))
            except ValueError:
                log.warning("run %s: its %s reference is damaged: left out", run_id, row["kind"])
        return found
