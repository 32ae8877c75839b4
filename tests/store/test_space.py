"""The check before work starts (``store.space``): each folder a run writes can be written and
holds the free space asked for; else one sentence naming the folder and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from mounts import fill, read_only_view, small_disk

from accelopt.store.errors import StoreFull, StoreReadOnly
from accelopt.store.space import (
    CACHE_FOLDERS,
    cache_places,
    check_run_space,
    check_writable,
    workspace_place,
)


def test_room_and_a_writable_folder_pass_and_leave_nothing(tmp_path: Path) -> None:
    check_writable([workspace_place(tmp_path / "ws")], need_bytes=1)
    assert list((tmp_path / "ws").iterdir()) == []  # made, probed, left empty


def test_too_little_room_names_the_folder_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(StoreFull) as info:
        check_writable([workspace_place(tmp_path)], need_bytes=1 << 62)
    sentence = str(info.value)
    assert f"the workspace {tmp_path} has" in sentence and "MiB free" in sentence
    assert "--workspace" in sentence and "\n" not in sentence


def test_the_cache_folders_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "kernels").mkdir(parents=True)
    folders = [p.folder for p in cache_places()]
    assert folders == [tmp_path / "cache", tmp_path / "cache" / "kernels"]
    assert "kernels" in CACHE_FOLDERS
    with pytest.raises(StoreFull, match=r"the cache folder .* ACCELOPT_CACHE_DIR"):
        check_writable(cache_places(), need_bytes=1 << 62)
    check_run_space(tmp_path / "ws", need_bytes=1)  # the workspace and the cache's folders


def test_a_full_disk_is_one_sentence(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "256k") as disk:
        fill(disk)
        with pytest.raises(StoreFull) as info:
            check_writable([workspace_place(disk)], need_bytes=0)
        assert f"the workspace {disk} is full" in str(info.value)


def test_a_read_only_folder_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with read_only_view(tmp_path / "ws", tmp_path / "view") as view:
        with pytest.raises(StoreReadOnly) as info:
            check_writable([workspace_place(view)], need_bytes=0)
        assert f"the workspace {view} cannot be written (Read-only file system)" in str(info.value)
