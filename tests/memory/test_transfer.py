"""Export and import of the optimization memory as JSON Lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from accelopt.errors import UserError
from accelopt.memory.records import ExperienceKind
from accelopt.memory.transfer import export_jsonl, import_jsonl
from accelopt.store.store import Store

from .conftest import make_experience


def _fill(store: Store) -> None:
    store.add_experience(
        make_experience(
            "Pack B into panels",
            "Copy rhs panels into a contiguous buffer; the inner loop streams it. «ünïcode»",
            speedup=1.7,
            before="o[j] += a * r[j];",
            after="o[j] += a * panel[j];\n",
        )
    )
    store.add_experience(
        make_experience("Undo the scalar exp", kind="negative", speedup=1.3, problem="silu")
    )


def _without_id(store: Store) -> list[dict]:
    return [{**dataclasses.asdict(e), "id": None} for e in store.experiences()]


def test_round_trip_into_a_fresh_store(store: Store, tmp_path: Path) -> None:
    _fill(store)
    path = tmp_path / "memory.jsonl"
    assert export_jsonl(store, path) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert first["lesson"]["title"] == "Pack B into panels"  # the lesson is nested
    assert set(first) == {f.name for f in dataclasses.fields(type(store.experiences()[0]))}
    with Store.open(tmp_path / "other") as fresh:
        assert import_jsonl(fresh, path).added == 2
        # created_at and provenance kept; the speedups became claims, not measured there
        claims = [e | {"measured_here": False} for e in _without_id(store)]
        assert _without_id(fresh) == claims


def test_export_one_problem(store: Store, tmp_path: Path) -> None:
    _fill(store)
    path = tmp_path / "silu.jsonl"
    assert export_jsonl(store, path, problem="silu") == 1
    assert json.loads(path.read_text())["problem"] == "silu"


def test_import_skips_duplicates(store: Store, tmp_path: Path) -> None:
    _fill(store)
    path = tmp_path / "memory.jsonl"
    export_jsonl(store, path)
    assert import_jsonl(store, path).added == 0  # all already there
    # a duplicate line inside the file, and one that differs only by fast_hash, and a blank line
    lines = path.read_text().splitlines()
    changed = json.loads(lines[0]) | {"fast_hash": "another-kernel"}
    path.write_text("\n".join([lines[0], json.dumps(changed), "", json.dumps(changed)]) + "\n")
    report = import_jsonl(store, path)
    assert (report.added, report.duplicates) == (1, 2)
    assert len(store.experiences()) == 3


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: "{not json", "not valid JSON"),
        (lambda d: json.dumps([d]), "JSON object"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "problem"}), "'problem'"),
        (lambda d: json.dumps(d | {"kind": "neutral"}), "'kind'"),
        (lambda d: json.dumps(d | {"speedup": "fast"}), "'speedup'"),
        (lambda d: json.dumps(d | {"speedup": 0.5}), "> 1"),
        (lambda d: json.dumps(d | {"lesson": "text"}), "'lesson'"),
        (lambda d: json.dumps(d | {"lesson": {"title": "t"}}), "'description'"),
        (lambda d: json.dumps(d | {"colour": "red"}), "unknown field"),
        (lambda d: json.dumps(d | {"model": 3}), "'model' must be a string"),
    ],
)
def test_a_malformed_line_is_refused_by_number_and_the_rest_imported(
    store: Store, tmp_path: Path, mutate, message
) -> None:
    _fill(store)
    path = tmp_path / "memory.jsonl"
    export_jsonl(store, path)
    good = path.read_text().splitlines()
    bad = mutate(json.loads(good[0]))
    path.write_text("\n".join([good[0], "", bad]) + "\n")
    with Store.open(tmp_path / "fresh") as fresh:
        report = import_jsonl(fresh, path)
        (refused,) = report.refused
        assert refused.line == 3 and message in refused.text
        assert report.added == 1 and len(fresh.experiences()) == 1  # the good line went in


def test_unreadable_file(store: Store, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        import_jsonl(store, tmp_path / "missing.jsonl")
    with pytest.raises(UserError, match="cannot write"):
        export_jsonl(store, tmp_path / "no-such-dir" / "out.jsonl")


def test_the_kind_is_written_as_its_value_and_read_back_as_the_enum(
    store: Store, tmp_path: Path
) -> None:
    _fill(store)
    path = tmp_path / "memory.jsonl"
    export_jsonl(store, path)
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["positive", "negative"]
    assert '"kind": "negative"' in path.read_text()
    with Store.open(tmp_path / "other") as fresh:
        import_jsonl(fresh, path)
        assert [e.kind for e in fresh.experiences()] == [
            ExperienceKind.POSITIVE, ExperienceKind.NEGATIVE
        ]  # fmt: skip
        assert all(type(e.kind) is ExperienceKind for e in fresh.experiences())
