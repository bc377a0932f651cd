"""Mapped views of whole local files: what the local trial reader decodes records from."""

from __future__ import annotations

import os

import pytest

from tornasole.storage import LocalStorage
from tornasole.storage.mapped_files import MappedFiles


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_a_view_is_the_whole_file_and_is_kept(tmp_path) -> None:
    path = _write(tmp_path / "e.tfevents", b"0123456789")
    files = MappedFiles(capacity=4)
    view = files.view(path)
    assert bytes(view[2:5]) == b"234"
    assert view.readonly
    assert files.view(path) is view
    assert len(files) == 1


def test_a_mapping_keeps_the_file_it_was_made_on_until_forgotten(tmp_path) -> None:
    # GIVEN a mapped file that a writer then replaces atomically (a rename over the path)
    path = _write(tmp_path / "e.tfevents", b"old-bytes")
    files = MappedFiles()
    assert bytes(files.view(path)) == b"old-bytes"
    os.replace(_write(tmp_path / "tmp", b"new-bytes-longer"), path)
    # THEN the mapping still shows the complete old file, never a mix
    assert bytes(files.view(path)) == b"old-bytes"
    # AND once forgotten, the file now at the path is mapped
    files.forget(path)
    assert bytes(files.view(path)) == b"new-bytes-longer"


def test_at_most_capacity_files_stay_mapped(tmp_path) -> None:
    files = MappedFiles(capacity=2)
    paths = [_write(tmp_path / f"f{i}", bytes([i]) * 3) for i in range(4)]
    views = [files.view(p) for p in paths]
    assert len(files) == 2
    assert [bytes(v) for v in views] == [bytes([i]) * 3 for i in range(4)]  # dropped views stay valid
    files.close()
    assert len(files) == 0


def test_empty_missing_and_directory_paths(tmp_path) -> None:
    files = MappedFiles()
    assert bytes(files.view(_write(tmp_path / "empty", b""))) == b""
    missing = str(tmp_path / "missing.tfevents")
    with pytest.raises(FileNotFoundError) as info:
        files.view(missing)
    assert info.value.filename == missing
    with pytest.raises(OSError) as info:
        files.view(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_local_storage_views_follow_its_own_writes(tmp_path) -> None:
    storage = LocalStorage()
    path = str(tmp_path / "run" / "e.tfevents")
    storage.write_atomic(path, b"first")
    assert bytes(storage.view(path)) == b"first"
    storage.write_atomic(path, b"second")
    assert bytes(storage.view("file://" + path)) == b"second"
    storage.delete(path)
    with pytest.raises(FileNotFoundError):
        storage.view(path)
    storage.close()
