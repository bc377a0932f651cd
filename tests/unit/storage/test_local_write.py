"""LocalStorage.write_atomic: parents made once, made again when removed, unique temporary names."""

from __future__ import annotations

import os
import shutil

import pytest

from tornasole.storage import local
from tornasole.storage.local import LocalStorage


def test_writes_into_new_nested_directories_and_after_one_was_removed(tmp_path):
    storage = LocalStorage()
    first = tmp_path / "events" / "000000000000" / "a.tfevents"
    storage.write_atomic(str(first), b"one")
    storage.write_atomic(str(tmp_path / "events" / "000000000000" / "b.tfevents"), b"two")
    assert first.read_bytes() == b"one"
    shutil.rmtree(tmp_path / "events")  # a directory the storage made, removed behind its back
    storage.write_atomic(str(first), b"three")
    assert first.read_bytes() == b"three"
    assert sorted(os.listdir(first.parent)) == ["a.tfevents"]


def test_a_file_where_a_directory_should_be_is_an_error(tmp_path):
    (tmp_path / "index").write_bytes(b"not a directory")
    storage = LocalStorage()
    with pytest.raises(NotADirectoryError):
        storage.write_atomic(str(tmp_path / "index" / "x.json"), b"{}")
    assert sorted(os.listdir(tmp_path)) == ["index"]


def test_temporary_names_are_unique_and_recognised_as_temporary():
    names = {local._temp_suffix() for _ in range(1000)}
    assert len(names) == 1000
    assert all(local._TEMP_NAME.search(f"x.json.tmp.{name}") for name in names)


def test_a_forked_child_draws_its_own_temporary_names():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its prefix and exits at once
        os.write(write, local._TEMP_PREFIX[0].encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert len(child) == 16
    assert child != local._TEMP_PREFIX[0]
