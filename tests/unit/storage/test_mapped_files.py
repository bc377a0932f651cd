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


def test_mapped_files_are_the_mappings_under_the_views(tmp_path) -> None:
    # GIVEN three files mapped through views, at most two kept
    files = MappedFiles(capacity=2)
    paths = [_write(tmp_path / f"f{i}", b"abc%d" % i) for i in range(3)]
    empty = _write(tmp_path / "empty", b"")
    views = [files.view(p) for p in paths]
    # THEN the hot loop's lookup holds exactly the mapped ones, each slicing to bytes of the same file
    assert set(files.mapped_files) == set(files.mapped) == set(paths[1:])
    mapped = files.mapped_files[paths[2]]
    assert mapped[1:3] == b"bc"
    assert isinstance(mapped[1:3], bytes)
    assert bytes(views[2]) == mapped[:] == b"abc2"
    # AND forgetting, an empty file and close keep both in step
    files.forget(paths[2])
    assert paths[2] not in files.mapped_files
    files.view(empty)
    assert files.mapped_files[empty] == b""
    files.close()
    assert not files.mapped_files
    assert not files.mapped
