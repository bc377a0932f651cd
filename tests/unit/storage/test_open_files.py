"""The descriptor cache behind local ranged reads, and local batches that stay inline.

Local files only (tmp_path); the point is what a cached descriptor must never
do: read a replaced or deleted file, or be closed under a running read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from tornasole.storage import LocalStorage, ReadRequest
from tornasole.storage import local as local_module
from tornasole.storage.open_files import OpenFiles, default_capacity


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_a_file_replaced_by_another_process_is_read_anew(tmp_path) -> None:
    # GIVEN a storage that has read (and keeps open) a file
    path = _write(tmp_path / "e.tfevents", b"old-bytes")
    storage = LocalStorage()
    assert storage.read(path, 0, 3) == b"old"
    assert len(storage._files) == 1
    # WHEN another process publishes a new version atomically (temp + rename), as writers do
    code = (
        "import os, sys; p = sys.argv[1]; open(p + '.tmp', 'wb').write(b'new-bytes'); "
        "os.replace(p + '.tmp', p)"
    )
    subprocess.run([sys.executable, "-c", code, path], check=True)
    # THEN the next read sees the new file, not the descriptor's old one
    assert storage.read(path, 0, 3) == b"new"
    storage.close()


def test_a_deleted_file_is_missing_even_with_a_cached_descriptor(tmp_path) -> None:
    path = _write(tmp_path / "e.tfevents", b"abcdef")
    storage = LocalStorage()
    assert storage.read(path, 1, 3) == b"bc"
    os.remove(path)  # not through the storage: only st_nlink can tell
    with pytest.raises(FileNotFoundError):
        storage.read(path, 1, 3)
    storage.close()


def test_close_closes_every_descriptor_and_the_storage_stays_usable(tmp_path) -> None:
    paths = [_write(tmp_path / f"f{i}", bytes([i]) * 8) for i in range(5)]
    storage = LocalStorage()
    before = len(os.listdir("/proc/self/fd"))
    for p in paths:
        storage.read(p, 0, 4)
    assert len(storage._files) == 5
    assert len(os.listdir("/proc/self/fd")) == before + 5
    storage.close()
    assert len(storage._files) == 0
    assert len(os.listdir("/proc/self/fd")) == before
    assert storage.read(paths[0], 0, 2) == b"\x00\x00"
    storage.close()


def test_capacity_bounds_the_open_descriptors_least_recently_used_first(tmp_path) -> None:
    paths = [_write(tmp_path / f"f{i}", bytes([i]) * 8) for i in range(6)]
    files = OpenFiles(capacity=3)
    for p in paths[:3]:
        files.pread(p, 2, 0)
    files.pread(paths[0], 2, 0)  # paths[0] is now the most recently used
    files.pread(paths[3], 2, 0)  # evicts paths[1]
    assert list(files._entries) == [paths[2], paths[0], paths[3]]
    assert [files.pread(p, 2, 6) for p in paths] == [bytes([i]) * 2 for i in range(6)]
    assert len(files) == 3
    files.close()
    assert OpenFiles(capacity=0).pread(paths[5], 3, 0) == b"\x05" * 3


def test_default_capacity_is_a_fraction_of_the_descriptor_limit() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_capacity() == min(1024, soft // 8)


def test_concurrent_reads_with_evictions_never_mix_files(tmp_path) -> None:
    # GIVEN more files than descriptors, each holding its own byte
    paths = [_write(tmp_path / f"f{i:02d}", bytes([i]) * 4096) for i in range(24)]
    files = OpenFiles(capacity=4)
    errors: list[str] = []

    def reader(k: int) -> None:
        for n in range(300):
            i = (k * 7 + n) % len(paths)
            data = files.pread(paths[i], 64, (n * 37) % 4000)
            if data != bytes([i]) * 64:
                errors.append(f"{paths[i]}: {data[:4]!r}")

    # WHEN eight threads read while descriptors are evicted and closed under them
    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN every read returned bytes of its own file
    assert errors == []
    assert len(files) <= 4
    files.close()


def test_a_directory_read_names_the_path(tmp_path) -> None:
    storage = LocalStorage()
    with pytest.raises(IsADirectoryError) as info:
        storage.read(str(tmp_path), 0, 4)
    assert info.value.filename == str(tmp_path)
    storage.close()


def test_cached_batches_stay_inline_and_slow_waits_go_to_the_pool(tmp_path, monkeypatch) -> None:
    paths = [_write(tmp_path / f"f{i}", bytes([i]) * 16) for i in range(6)]
    requests = [ReadRequest(p, 0, 4) for p in paths]
    storage = LocalStorage(max_workers=4)
    pooled: list[int] = []
    real_batch = storage._run_batch

    def recording_batch(reqs, on_error, read_one):
        pooled.append(len(reqs))
        return real_batch(reqs, on_error, read_one)

    monkeypatch.setattr(storage, "_run_batch", recording_batch)
    # page-cache reads: no thread hand-off
    assert storage.read_many(requests) == [bytes([i]) * 4 for i in range(6)]
    assert pooled == []
    # GIVEN reads that take long and sleep (a cold disk): the rest of the batch goes to the pool
    monkeypatch.setattr(local_module, "INLINE_READ_S", -1.0)
    monkeypatch.setattr(local_module, "_slept_since", lambda before: True)
    assert storage.read_many(requests, on_error="return") == [bytes([i]) * 4 for i in range(6)]
    assert pooled == [5]
    # being slow without sleeping (preempted on a busy machine) keeps the batch inline
    pooled.clear()
    monkeypatch.setattr(local_module, "_slept_since", lambda before: False)
    assert storage.read_many(requests) == [bytes([i]) * 4 for i in range(6)]
    assert pooled == []
    storage.close()
