"""The store's SQLite schema and the schema version check (``connect``: opening the file).

Version history (``SCHEMA_VERSION``): 1, the first schema; 2, an iteration is one commit:
experiences carry the (iteration, parent, plan) that learned them, unique per run, and stay
invisible until their iteration is committed; the lessons each parent was shown (``retrievals``)
and the one-session re-timings (``retimings``) are kept per iteration, so that a resumed iteration
is built from exactly what the killed one saw; 3, a kernel's origin may be ``tuned`` (a variant of
another kernel's tunables, ``search/tuner.py``), which an accelopt of version 2 could not read,
and every paid call is *held* (``llm_holds``: its reservation) from before its request is sent
until its record is written, so that a call a kill cut off counts against the budget, and every
time a run's kernel is written is kept (``run_kernel_writes``: a plan tried again that wrote the
same kernel is one the planner is told of); 4, an experience says whether its speedup was
``measured_here`` (by a run of this workspace) or is an imported claim; an older store's lessons
of no run it holds (imported, or added by hand) become claims; 5, a run keeps the references it
timed in its own session (``run_references``: NumPy, torch, torch.compile), which its summary,
``runs compare`` and its report compare the best kernel with. A later
version adds a function to ``MIGRATIONS`` that upgrades the previous one in place; opening a
database whose version is newer than this code knows raises ``SchemaVersionError`` rather than
guessing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from accelopt.store.errors import SALVAGE, SchemaVersionError, StoreDamaged

SCHEMA_VERSION = 5

# What the triggers below write into the external-content FTS5 index: a row's words, or the
# 'delete' command that takes an old row's words out (SQLite needs the old values verbatim).
_FTS_COLUMNS = "rowid, title, description, before_src, after_src, problem"
_FTS_ADD = (
    f"INSERT INTO experiences_fts ({_FTS_COLUMNS}) VALUES"
    " (new.id, new.title, new.description, new.before_src, new.after_src, new.problem);"
)
_FTS_REMOVE = (
    f"INSERT INTO experiences_fts (experiences_fts, {_FTS_COLUMNS}) VALUES ('delete',"
    " old.id, old.title, old.description, old.before_src, old.after_src, old.problem);"
)

_SCHEMA_V1 = f"""
CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    problem       TEXT NOT NULL,
    workload      TEXT NOT NULL,
    backend       TEXT NOT NULL,
    hardware      TEXT NOT NULL,
    strategy      TEXT NOT NULL,
    config        TEXT NOT NULL,              -- JSON object
    status        TEXT NOT NULL,
    baseline_hash TEXT NOT NULL DEFAULT '',
    best_hash     TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX runs_created ON runs (created_at);

-- The source of each kernel, once per hash across all runs (the first source seen is kept).
CREATE TABLE kernel_sources (
    hash    TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    source  TEXT NOT NULL
);

-- A kernel as it entered a run; seq keeps insertion order.
CREATE TABLE run_kernels (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs (id),
    hash        TEXT NOT NULL REFERENCES kernel_sources (hash),
    iteration   INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    parent_hash TEXT NOT NULL DEFAULT '',
    plan_title  TEXT NOT NULL DEFAULT '',
    plan_steps  TEXT NOT NULL DEFAULT '[]',   -- JSON list of strings
    UNIQUE (run_id, hash)
);
CREATE INDEX run_kernels_hash ON run_kernels (hash);

-- The evaluation cache. No foreign key to kernels: `eval` and `bench` evaluate outside runs.
CREATE TABLE evaluations (
    kernel_hash     TEXT NOT NULL,
    problem         TEXT NOT NULL,
    workload        TEXT NOT NULL,
    hardware        TEXT NOT NULL,
    harness_version TEXT NOT NULL,
    status          TEXT NOT NULL,
    latency_s       REAL,
    pct_of_peak     REAL,
    data            TEXT NOT NULL,            -- Evaluation.model_dump_json()
    created_at      TEXT NOT NULL,
    PRIMARY KEY (kernel_hash, problem, workload, hardware, harness_version)
);
CREATE INDEX evaluations_context ON evaluations (problem, workload, hardware, harness_version);

CREATE TABLE llm_calls (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs (id),
    id          TEXT NOT NULL,
    key         TEXT NOT NULL,
    agent       TEXT NOT NULL,
    model       TEXT NOT NULL,
    ok          INTEGER NOT NULL,             -- 1 when error is empty
    replayed    INTEGER NOT NULL,
    tokens_in   INTEGER NOT NULL,
    tokens_out  INTEGER NOT NULL,
    cost_usd    REAL,                         -- NULL: the price is unknown
    started_at  TEXT NOT NULL,
    data        TEXT NOT NULL                 -- LLMCall.model_dump_json()
);
CREATE INDEX llm_calls_key ON llm_calls (key, ok, replayed);
CREATE INDEX llm_calls_run ON llm_calls (run_id, agent);

CREATE TABLE iterations (
    run_id         TEXT NOT NULL REFERENCES runs (id),
    iteration      INTEGER NOT NULL,
    best_hash      TEXT NOT NULL,
    best_latency_s REAL,
    spent_usd      REAL NOT NULL,
    data           TEXT NOT NULL,             -- the whole IterationRecord as JSON
    PRIMARY KEY (run_id, iteration)
);

-- The optimization memory. No foreign key to runs: memory outlives runs and may be imported.
CREATE TABLE experiences (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    speedup     REAL NOT NULL,
    problem     TEXT NOT NULL,
    backend     TEXT NOT NULL,
    hardware    TEXT NOT NULL,
    model       TEXT NOT NULL,
    slow_hash   TEXT NOT NULL,
    fast_hash   TEXT NOT NULL,
    title       TEXT NOT NULL,
    description TEXT NOT NULL,
    before_src  TEXT NOT NULL,                -- Lesson.before
    after_src   TEXT NOT NULL,                -- Lesson.after
    created_at  TEXT NOT NULL
);
CREATE INDEX experiences_run ON experiences (run_id);
CREATE INDEX experiences_problem ON experiences (problem);

-- Full-text index over the lessons; external content, kept in sync by the triggers below.
CREATE VIRTUAL TABLE experiences_fts USING fts5 (
    title, description, before_src, after_src, problem,
    content = 'experiences', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER experiences_ai AFTER INSERT ON experiences BEGIN
    {_FTS_ADD}
END;
CREATE TRIGGER experiences_ad AFTER DELETE ON experiences BEGIN
    {_FTS_REMOVE}
END;
CREATE TRIGGER experiences_au AFTER UPDATE ON experiences BEGIN
    {_FTS_REMOVE}
    {_FTS_ADD}
END;
"""

_SCHEMA_V2 = """
ALTER TABLE experiences ADD COLUMN iteration INTEGER;            -- NULL: imported or by hand
ALTER TABLE experiences ADD COLUMN parent_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE experiences ADD COLUMN plan_title TEXT NOT NULL DEFAULT '';
ALTER TABLE experiences ADD COLUMN committed INTEGER NOT NULL DEFAULT 1;
CREATE UNIQUE INDEX experiences_origin ON experiences (run_id, iteration, parent_hash, plan_title)
    WHERE iteration IS NOT NULL;

-- The lessons a parent was shown in an iteration (experience ids, in order): a resumed iteration
-- shows the same ones, whatever the memory holds by then.
CREATE TABLE retrievals (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    iteration   INTEGER NOT NULL,
    parent_hash TEXT NOT NULL,
    ids         TEXT NOT NULL,                -- JSON list of experience ids
    PRIMARY KEY (run_id, iteration, parent_hash)
);

-- One-session re-timings of a parent and its unsure children; never in the evaluation cache.
CREATE TABLE retimings (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    iteration   INTEGER NOT NULL,
    kernels     TEXT NOT NULL,                -- JSON list of kernel hashes, the parent first
    data        TEXT NOT NULL,                -- JSON: evaluations, ratios, ratio intervals, rounds
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, iteration, kernels)
);
"""


def _to_v2(conn: sqlite3.Connection) -> None:
    _run_script(conn, _SCHEMA_V2)


_SCHEMA_V3 = """
CREATE TABLE llm_holds (          -- a paid call on its way: deleted with the call's record
    hold       TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs(id),
    key        TEXT NOT NULL,
    usd        REAL NOT NULL,     -- the most it may cost (the budget's reservation)
    tokens     INTEGER NOT NULL,
    started_at TEXT NOT NULL
);
CREATE INDEX llm_holds_run ON llm_holds (run_id);

CREATE TABLE run_kernel_writes (  -- every time a kernel was written (run_kernels: the first)
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, hash TEXT NOT NULL,
    iteration INTEGER NOT NULL, parent_hash TEXT NOT NULL, plan_title TEXT NOT NULL,
    FOREIGN KEY (run_id, hash) REFERENCES run_kernels (run_id, hash),
    UNIQUE (run_id, hash, iteration, parent_hash, plan_title)
);
"""
_WRITES_FROM_KERNELS = """
INSERT INTO run_kernel_writes (run_id, hash, iteration, parent_hash, plan_title)
    SELECT run_id, hash, iteration, parent_hash, plan_title FROM run_kernels ORDER BY seq;
"""


def _to_v3(conn: sqlite3.Connection) -> None:
    _run_script(conn, _SCHEMA_V3)
    known = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_kernels'"
    if conn.execute(known).fetchone() is not None:  # the first writes are the kernels' records
        _run_script(conn, _WRITES_FROM_KERNELS)


_SCHEMA_V4 = """
ALTER TABLE experiences ADD COLUMN measured_here INTEGER NOT NULL DEFAULT 1;  -- 0: a claim
"""
# Before version 4 an imported lesson was stored like a measured one: those of no run here
_CLAIMS_FROM_OLDER = """
UPDATE experiences SET measured_here = 0
    WHERE iteration IS NULL AND run_id NOT IN (SELECT id FROM runs);
"""


def _to_v4(conn: sqlite3.Connection) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(experiences)")}
    if "measured_here" not in columns:  # a copy of a newer store relabelled older has it
        _run_script(conn, _SCHEMA_V4)
    _run_script(conn, _CLAIMS_FROM_OLDER)


_SCHEMA_V5 = """
-- what a user would pick instead of a kernel, timed in the run's session
CREATE TABLE IF NOT EXISTS run_references (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    kind        TEXT NOT NULL,                -- numpy, torch, inductor, max-autotune
    data        TEXT NOT NULL,                -- Evaluation.model_dump_json()
    PRIMARY KEY (run_id, kind)
);
"""


def _to_v5(conn: sqlite3.Connection) -> None:
    _run_script(conn, _SCHEMA_V5)


# MIGRATIONS[v] upgrades a database at version v - 1 to version v, inside the open transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    2: _to_v2,
    3: _to_v3,
    4: _to_v4,
    5: _to_v5,
}


def ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the schema in an empty database, or upgrade an older one, in one transaction; a
    ``SchemaVersionError`` for a newer one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = stored_version(conn)
        if version is None:
            _run_script(conn, _SCHEMA_V1)
            _run_script(conn, _SCHEMA_V2)
            _run_script(conn, _SCHEMA_V3)
            _run_script(conn, _SCHEMA_V4)
            _run_script(conn, _SCHEMA_V5)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        elif version > SCHEMA_VERSION:
            raise too_new(path, version)
        elif version < SCHEMA_VERSION:
            for target in range(version + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[target](conn)
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def too_new(path: Path, version: int) -> SchemaVersionError:
    return SchemaVersionError(
        f"{path} has store schema version {version}, newer than the {SCHEMA_VERSION} "
        "this accelopt knows; upgrade accelopt to open it."
    )


def stored_version(conn: sqlite3.Connection) -> int | None:
    """The schema version the database says it has (None: no schema yet)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return None
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    if row is None or row[0] is None:
        raise StoreDamaged(f"the store's schema_version table is empty (it is damaged): {SALVAGE}")
    return int(row[0])


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run DDL statements one by one inside the open transaction (``executescript`` would
    COMMIT first, and the schema must appear all at once or not at all)."""
    for statement in _statements(script):
        conn.execute(statement)


def _statements(script: str) -> list[str]:
    """Split a DDL script into complete statements (trigger bodies contain ``;``)."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not pending.strip():
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:80]}")
    return out
