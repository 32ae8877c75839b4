"""A store opened read-only (``Store.open_readonly``: what ``runs`` and ``report`` use) reads a
workspace it cannot write, an archived run's or a full one, and never writes, creates or upgrades
the file: cleanly closed (read as immutable), left with a WAL by a killed writer (read from a
copy), of an older schema (upgraded in memory), or missing (an empty store). Tests run as root,
which ignores permission bits, so a read-only bind mount (or an immutable file, ``chattr +i``)
stands for a read-only disk; each test skips where neither can be made."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mounts import fill, read_only_view, small_disk

from accelopt.store.errors import SchemaVersionError, StoreReadOnly
from accelopt.store.records import RunStatus
from accelopt.store.schema import SCHEMA_VERSION
from accelopt.store.store import Store


def _workspace(folder: Path, make_run, make_experience) -> Path:
    with Store.open(folder) as store:
        store.create_run(make_run("arch01"))
        store.add_experience(make_experience())
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_read_only_workspace_reads_and_refuses_writes_in_one_sentence(
    tmp_path: Path, make_run, make_experience
) -> None:
    source = _workspace(tmp_path / "ws", make_run, make_experience)
    before = _files(source)
    with read_only_view(source, tmp_path / "view") as view:
        with Store.open_readonly(view) as store:
            assert [r.id for r in store.list_runs()] == ["arch01"]
            assert len(store.experiences()) == 1
            with pytest.raises(StoreReadOnly) as info:
                store.update_run("arch01", status=RunStatus.FINISHED)
            assert "cannot be written" in str(info.value) and "\n" not in str(info.value)
        with pytest.raises(StoreReadOnly, match="cannot be written"):
            Store.open(view)  # the writable opener: one sentence, not sqlite3's error
    assert _files(source) == before


def test_a_wal_left_by_a_killed_writer_is_read(tmp_path: Path, make_run) -> None:
    live = tmp_path / "live"
    writer = Store.open(live)  # never closed before the copy: its last rows are in the WAL
    writer.create_run(make_run("late01"))
    archive = tmp_path / "archive"
    archive.mkdir()
    for name in ("accelopt.db", "accelopt.db-wal"):  # as a backup of a killed run copies them
        shutil.copyfile(live / name, archive / name)
    writer.close()
    assert (archive / "accelopt.db-wal").stat().st_size > 0
    before = _files(archive)
    with read_only_view(archive, tmp_path / "view") as view, Store.open_readonly(view) as store:
        assert [r.id for r in store.list_runs()] == ["late01"]
    assert _files(archive) == before


def test_an_older_schema_is_read_without_upgrading_the_file(
    tmp_path: Path, make_run, make_experience
) -> None:
    source = _workspace(tmp_path / "ws", make_run, make_experience)
    with Store.open(source) as store:  # as a version-3 accelopt left it
        store._connection().executescript(
            "ALTER TABLE experiences DROP COLUMN measured_here;"
            "UPDATE schema_version SET version = 3;"
        )
    before = _files(source)
    with read_only_view(source, tmp_path / "view") as view, Store.open_readonly(view) as store:
        (lesson,) = store.experiences()
        assert lesson.run_id == "run-0001" and not lesson.measured_here  # a claim, as upgraded
    assert _files(source) == before


def test_a_newer_schema_is_one_sentence(tmp_path: Path, make_run, make_experience) -> None:
    source = _workspace(tmp_path / "ws", make_run, make_experience)
    with Store.open(source) as store:
        store._connection().execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaVersionError, match="upgrade accelopt"):
        Store.open_readonly(source)


def test_a_missing_store_is_empty_and_nothing_is_made(tmp_path: Path) -> None:
    with Store.open_readonly(tmp_path / "nowhere") as store:
        assert store.list_runs() == [] and store.get_run("anything") is None
    assert not (tmp_path / "nowhere").exists()


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Files made immutable (``chattr +i``: refused even to root) for the test's length."""
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_an_immutable_database_is_read_and_never_written(
    tmp_path: Path, make_run, make_experience, immutable: list[Path]
) -> None:
    source = _workspace(tmp_path / "ws", make_run, make_experience)
    db = source / "accelopt.db"
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    done = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is refused here: {done.stderr.strip()}")
    immutable.append(db)
    before = db.read_bytes()
    with Store.open_readonly(source) as store:
        assert [r.id for r in store.list_runs()] == ["arch01"]
        with pytest.raises(StoreReadOnly):
            store.update_run("arch01", status=RunStatus.FINISHED)
    with Store.open(source) as store, pytest.raises(StoreReadOnly, match="cannot be written"):
        store.update_run("arch01", status=RunStatus.FINISHED)  # SQLite opened it read-only
    assert db.read_bytes() == before


def test_a_full_workspace_is_still_read(tmp_path: Path, make_run, make_experience) -> None:
    with small_disk(tmp_path / "disk", "1m") as disk:
        _workspace(disk, make_run, make_experience)
        fill(disk)
        with Store.open_readonly(disk) as store:
            assert [r.id for r in store.list_runs()] == ["arch01"]
