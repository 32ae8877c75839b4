"""An imported lesson's speedup is a claim: it never ranks the lesson above a measured one, it is
kept as a claim by the store, and an older store's imported lessons become claims when opened."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

from accelopt.memory.records import Experience
from accelopt.memory.retrieval import (
    SAME_PROBLEM_FACTOR,
    Lookup,
    evidence,
    preference,
    rank,
    retrieve,
)
from accelopt.memory.transfer import import_jsonl, to_json
from accelopt.store.records import RunRecord
from accelopt.store.schema import SCHEMA_VERSION
from accelopt.store.store import Store

from .conftest import make_experience
from .test_retrieval_scope import FakeSource, lesson, titles


def claimed(exp: Experience) -> Experience:
    return dataclasses.replace(exp, measured_here=False)


def test_a_huge_claim_does_not_outrank_an_equally_relevant_measured_lesson() -> None:
    measured = lesson("Tile alpha", speedup=1.2)
    claim = claimed(lesson("Tile bravo", speedup=900.0))
    ranked = rank(FakeSource(claim, measured), Lookup("tile matmul", "", "cpu", k=2))
    assert titles([e for e, _ in ranked]) == ["Tile alpha", "Tile bravo"]
    assert ranked[0][1] > ranked[1][1]  # the claim weighs as no speedup at all
    assert evidence(claim) == 1.0 and evidence(measured) == 1.2


def test_the_filling_puts_measured_lessons_before_claims() -> None:
    source = FakeSource(
        claimed(lesson("Unrelated claim", speedup=999.0, description="zzz")),
        lesson("Unrelated measured", speedup=1.05, description="yyy"),
    )
    found = retrieve(source, problem_text="qqq", kernel_text="", backend="cpu", k=2)
    assert titles(found) == ["Unrelated measured", "Unrelated claim"]


def test_a_claim_gets_no_same_hardware_preference() -> None:
    measured, claim = lesson("a"), claimed(lesson("b"))
    assert preference(claim, problem=None, hardware="test-cpu") == 1.0
    assert preference(measured, problem=None, hardware="test-cpu") > 1.0
    assert preference(claim, problem="matmul", hardware=None) == SAME_PROBLEM_FACTOR


def test_an_imported_claim_ranks_below_a_measured_lesson_in_a_store(
    store: Store, tmp_path: Path
) -> None:
    store.add_experience(
        make_experience("Block matmul alpha", "Block the matmul loops.", speedup=1.2)
    )
    claim = make_experience("Block matmul bravo", "Block the matmul loops.", speedup=900.0)
    (tmp_path / "claim.jsonl").write_text(to_json(claim) + "\n")
    assert import_jsonl(store, tmp_path / "claim.jsonl").added == 1
    assert [e.measured_here for e in store.experiences()] == [True, False]
    found = retrieve(store, problem_text="matmul blocking", kernel_text="", backend="cpu", k=2)
    assert titles(found) == ["Block matmul alpha", "Block matmul bravo"]


def test_an_exported_claim_stays_a_claim(store: Store, tmp_path: Path) -> None:
    store.add_experience(claimed(make_experience("Claimed here")))
    line = json.loads(to_json(store.experiences()[0]))
    assert line["measured_here"] is False
    with Store.open(tmp_path / "other") as other:
        (tmp_path / "x.jsonl").write_text(json.dumps(line | {"measured_here": True}) + "\n")
        import_jsonl(other, tmp_path / "x.jsonl")
        assert [e.measured_here for e in other.experiences()] == [False]


def test_a_version_3_store_opens_and_its_imported_lessons_become_claims(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws") as store:
        store.create_run(RunRecord("run-0001", "matmul", "cpu", "cpu", "hw", "beam", {}))
        store.add_experience(make_experience("Learned here", run_id="run-0001"))
        store.add_experience(make_experience("Imported before v4", run_id="their-run"))
        db = store.path
    raw = sqlite3.connect(db)  # what version 3 had: no measured_here column
    raw.executescript(
        "ALTER TABLE experiences DROP COLUMN measured_here; UPDATE schema_version SET version = 3;"
    )
    raw.close()
    with Store.open(tmp_path / "ws") as store:
        found = {e.lesson.title: e.measured_here for e in store.experiences()}
        assert found == {"Learned here": True, "Imported before v4": False}
        version = store._connection().execute("SELECT version FROM schema_version").fetchone()
        assert version[0] == SCHEMA_VERSION == 5
