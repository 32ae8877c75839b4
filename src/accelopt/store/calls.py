"""A store's LLM calls: each call as it was made, the holds on calls under way, what they cost."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from accelopt.llm.client import Usage
from accelopt.llm.records import LLMCall
from accelopt.store.database import Database, dump_json, now_iso


class CallTables(Database):
    """Every LLM call of every run, and the holds of paid calls on their way."""

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
        with self._write_run(run_id) as conn:
            conn.execute(
                "INSERT INTO llm_holds (hold, run_id, key, usd, tokens, started_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (hold, run_id, key, usd, tokens, now_iso()),
            )
        return hold

    def record_call(self, run_id: str, call: LLMCall, hold: str = "") -> None:
        """Append ``call`` to the run's calls (every call is kept, even with a repeated id), and
        drop its ``hold`` in the same transaction."""
        with self._write_run(run_id) as conn:
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
                    dump_json(call),
                ),
            )

    def find_call(self, key: str, run_ids: Sequence[str]) -> LLMCall | None:
        """The first successful, non-replayed call with this replay key in one of ``run_ids``."""
        if not run_ids:
            return None
        marks = ", ".join("?" for _ in run_ids)
        with self._read() as conn:
            row = conn.execute(
                "SELECT seq, data FROM llm_calls WHERE key = ? AND ok = 1 AND replayed = 0"
                f" AND run_id IN ({marks}) ORDER BY seq LIMIT 1",
                (key, *run_ids),
            ).fetchone()
        if row is None:
            return None
        with self._row("llm_calls", f"seq={row['seq']}"):
            return LLMCall.model_validate_json(row["data"])

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
            float(row["usd"]) + float(held["usd"]),
            int(row["tokens"]) + int(held["tokens"]),
            int(row["unknown"]),
            int(held["calls"]),
            float(held["usd"]),
        )

    def llm_calls(self, run_id: str) -> list[LLMCall]:
        """The run's calls in the order they were recorded."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, data FROM llm_calls WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return self._decoded(
            "llm_calls",
            rows,
            lambda r: f"seq={r['seq']}",
            lambda r: LLMCall.model_validate_json(r["data"]),
        )

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


class StoreRecorder:
    """The ``llm.recorder.Recorder`` of one run: calls are stored with the run id as they come;
    ``find`` replays from this run (a resume) and from the runs in ``replay_from`` only (never
    silently from another run of the workspace). Thread-safe (through the store's lock)."""

    def __init__(self, store: CallTables, run_id: str, replay_from: tuple[str, ...] = ()) -> None:
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
