"""The Storage contract, run against every backend (STYLE practice 15).

``StorageContract`` holds the behaviours every backend must share; each
``Test<Backend>`` subclass only says how to build the backend and where its
scratch root is. Backend-specific behaviour (pruned local walks, S3 error
translation, one shared boto3 client) is tested in the subclasses.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from tornasole.aws import clients
from tornasole.aws.clients import s3_client
from tornasole.storage import LocalStorage, ReadRequest, Storage, join
from tornasole.storage import s3 as s3_module
from tornasole.storage.s3 import S3Storage

DATA = bytes(range(256)) * 4  # 1024 bytes, every offset distinguishable in 256-byte windows


class StorageContract:
    """Behaviours shared by all backends; subclasses provide ``storage`` and ``root`` fixtures."""

    @pytest.fixture
    def storage(self) -> Storage:
        raise NotImplementedError

    @pytest.fixture
    def root(self) -> str:
        raise NotImplementedError

    def _write(self, storage: Storage, root: str, *names: str) -> list[str]:
        paths = [join(root, n) for n in names]
        for p in paths:
            storage.write_atomic(p, p.encode())
        return paths

    # -- read / write ------------------------------------------------------------------------

    def test_satisfies_the_protocol(self, storage: Storage) -> None:
        assert isinstance(storage, Storage)

    def test_round_trip_and_overwrite(self, storage: Storage, root: str) -> None:
        path = join(root, "deep/nested/dir/blob.bin")
        storage.write_atomic(path, DATA)
        assert storage.read(path) == DATA
        storage.write_atomic(path, b"second")
        assert storage.read(path) == b"second"

    def test_empty_object(self, storage: Storage, root: str) -> None:
        path = join(root, "empty")
        storage.write_atomic(path, b"")
        assert storage.read(path) == b""
        assert storage.read(path, 0, 10) == b""
        assert storage.exists(path)

    @pytest.mark.parametrize(
        ("start", "end", "expected"),
        [
            (10, 20, DATA[10:20]),
            (None, 5, DATA[:5]),
            (1000, None, DATA[1000:]),
            (0, None, DATA),
            (1020, 2000, DATA[1020:]),  # runs past the end: what exists
            (1024, None, b""),  # starts exactly at the end
            (5000, 6000, b""),  # entirely past the end
            (5000, None, b""),
            (7, 7, b""),  # empty range
            (1023, 1024, DATA[1023:]),
        ],
    )
    def test_ranged_reads(self, storage: Storage, root: str, start, end, expected) -> None:
        path = join(root, "ranged.bin")
        storage.write_atomic(path, DATA)
        assert storage.read(path, start, end) == expected

    def test_missing_raises_file_not_found_naming_path(self, storage: Storage, root: str) -> None:
        path = join(root, "no/such/object")
        with pytest.raises(FileNotFoundError, match="no/such/object"):
            storage.read(path)
        with pytest.raises(FileNotFoundError, match="no/such/object"):
            storage.read(path, 5, 10)

    def test_concurrent_atomic_writes_leave_one_complete_object(self, storage: Storage, root: str) -> None:
        # GIVEN eight threads publishing different 64 KiB payloads to the same path
        path = join(root, "contended")
        payloads = [bytes([i]) * 65536 for i in range(8)]
        threads = [threading.Thread(target=storage.write_atomic, args=(path, p)) for p in payloads]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # THEN exactly one object is listed and it is one whole payload (no temp files, no mixes)
        assert list(storage.list(join(root, ""))) == [path]
        assert storage.read(path) in payloads

    # -- read_many ---------------------------------------------------------------------------

    def test_read_many_results_in_request_order(self, storage: Storage, root: str) -> None:
        paths = [join(root, f"f{i:02d}") for i in range(20)]
        for i, p in enumerate(paths):
            storage.write_atomic(p, bytes([i]) * (i + 10))
        requests = [ReadRequest(p, i % 3, i % 3 + 5) for i, p in reversed(list(enumerate(paths)))]
        results = storage.read_many(requests)
        assert results == [bytes([i]) * 5 for i in reversed(range(20))]

    def test_read_many_whole_objects_and_empty_batch(self, storage: Storage, root: str) -> None:
        a, b = self._write(storage, root, "a", "b")
        assert storage.read_many([ReadRequest(b), ReadRequest(a)]) == [b.encode(), a.encode()]
        assert storage.read_many([]) == []

    def test_read_many_on_error_return_puts_exception_in_place(self, storage: Storage, root: str) -> None:
        a, b = self._write(storage, root, "a", "b")
        missing = join(root, "missing")
        results = storage.read_many(
            [ReadRequest(a), ReadRequest(missing), ReadRequest(b, 0, 3)], on_error="return"
        )
        assert results[0] == a.encode()
        assert isinstance(results[1], FileNotFoundError)
        assert "missing" in str(results[1])
        assert results[2] == b.encode()[:3]

    def test_read_many_on_error_raise(self, storage: Storage, root: str) -> None:
        (a,) = self._write(storage, root, "a")
        with pytest.raises(FileNotFoundError, match="missing"):
            storage.read_many([ReadRequest(a), ReadRequest(join(root, "missing"))])

    def test_read_many_rejects_unknown_error_policy(self, storage: Storage, root: str) -> None:
        with pytest.raises(ValueError, match="on_error"):
            storage.read_many([ReadRequest(join(root, "x"))], on_error="ignore")  # type: ignore[arg-type]

    def test_read_many_200_concurrent_ranged_reads(self, storage: Storage, root: str) -> None:
        path = join(root, "big.bin")
        blob = os.urandom(200 * 100)
        storage.write_atomic(path, blob)
        requests = [ReadRequest(path, i * 100, i * 100 + 100) for i in range(200)]
        results = storage.read_many(requests)
        assert results == [blob[i * 100 : i * 100 + 100] for i in range(200)]

    # -- list --------------------------------------------------------------------------------

    def test_list_is_lexicographic_over_full_paths(self, storage: Storage, root: str) -> None:
        # "a-b" and "a.c" sort before "a/x" ('-' and '.' < '/'): a naive directory walk gets this wrong
        names = ["b", "a/y/z", "a-b", "a/x", "a.c", "a0", "A", "a/y-1"]
        paths = self._write(storage, root, *names)
        assert list(storage.list(join(root, ""))) == sorted(paths)

    def test_list_start_after_is_strict(self, storage: Storage, root: str) -> None:
        paths = self._write(storage, root, "k1", "k2", "k3", "k4")
        assert list(storage.list(join(root, ""), start_after=paths[1])) == paths[2:]
        # a start_after that is not itself a key
        assert list(storage.list(join(root, ""), start_after=join(root, "k25"))) == paths[2:]
        assert list(storage.list(join(root, ""), start_after=paths[-1])) == []

    def test_list_start_after_across_directories(self, storage: Storage, root: str) -> None:
        # GIVEN the index layout of a live trial: one directory per 1000 steps
        steps = [(d, s) for d in range(3) for s in range(d * 1000, d * 1000 + 3)]
        names = [f"index/{d:09d}/{s:012d}_worker_0.json" for d, s in steps]
        paths = self._write(storage, root, *names)
        prefix = join(root, "index/")
        # WHEN polling after the last key of the first directory THEN only later directories come back
        assert list(storage.list(prefix, start_after=paths[2])) == paths[3:]
        # ... and from the middle of a directory
        assert list(storage.list(prefix, start_after=paths[4])) == paths[5:]
        # ... and after a directory prefix itself (every key in it sorts after "dir/")
        assert list(storage.list(prefix, start_after=join(root, "index/000000001/"))) == paths[3:]

    def test_list_prefix_semantics(self, storage: Storage, root: str) -> None:
        paths = self._write(storage, root, "index/001/a", "index/001/b", "index/002/a", "index2/x", "other")
        assert list(storage.list(join(root, "index/"))) == paths[:3]
        # without the trailing slash it is a plain string prefix, as on S3
        assert list(storage.list(join(root, "index"))) == paths[:4]
        # a partial directory name and a partial file name
        assert list(storage.list(join(root, "index/00"))) == paths[:3]
        assert list(storage.list(join(root, "index/001/"))) == paths[:2]
        assert list(storage.list(join(root, "index/001/b"))) == [paths[1]]
        assert list(storage.list(join(root, "nothing/here/"))) == []
        assert list(storage.list(join(root, "oth"))) == [paths[4]]

    # -- exists / delete ---------------------------------------------------------------------

    def test_exists_and_delete(self, storage: Storage, root: str) -> None:
        path = join(root, "dir/marker")
        assert not storage.exists(path)
        storage.write_atomic(path, b"1")
        assert storage.exists(path)
        assert not storage.exists(join(root, "dir"))  # a "directory" is not an object
        storage.delete(path)
        assert not storage.exists(path)
        storage.delete(path)  # missing is fine
        with pytest.raises(FileNotFoundError):
            storage.read(path)


class TestLocalStorage(StorageContract):
    @pytest.fixture
    def storage(self) -> Iterator[LocalStorage]:
        with LocalStorage(max_workers=8) as storage:
            yield storage

    @pytest.fixture
    def root(self, tmp_path) -> str:
        return str(tmp_path / "run")

    def test_temp_files_of_in_progress_writes_are_invisible(self, storage: LocalStorage, root: str) -> None:
        (path,) = self._write(storage, root, "index/000000000/000000000001_worker_0.json")
        # an interrupted write of ours, and smdebug's in-progress naming
        for tmp in (f"{path}.tmp.{'0a' * 16}", f"{path}.tmp"):
            with open(tmp, "wb") as f:
                f.write(b"partial")
        assert len(os.listdir(os.path.dirname(path))) == 3
        assert list(storage.list(join(root, "index/"))) == [path]
        assert list(storage.list(join(root, "index/"), start_after=path)) == []

    def test_write_atomic_leaves_no_temp_file(self, storage: LocalStorage, root: str) -> None:
        (path,) = self._write(storage, root, "a/b")
        assert os.listdir(os.path.dirname(path)) == ["b"]

    def test_write_atomic_makes_missing_parents_and_takes_any_buffer(
        self, storage: LocalStorage, root: str
    ) -> None:
        big = bytearray(range(256)) * 4096  # 1 MiB: os.write may take it in parts
        storage.write_atomic(join(root, "events/000000000007/x.tfevents"), big)
        storage.write_atomic(join(root, "events/000000000007/y.tfevents"), memoryview(b"yy"))
        assert storage.read(join(root, "events/000000000007/x.tfevents")) == bytes(big)
        assert storage.read(join(root, "events/000000000007/y.tfevents")) == b"yy"

    def test_failed_write_atomic_leaves_nothing(self, storage: LocalStorage, root: str) -> None:
        (path,) = self._write(storage, root, "a/b")
        with pytest.raises(OSError):
            storage.write_atomic(join(root, "a/b/c"), b"x")  # a/b is a file
        with pytest.raises(TypeError):
            storage.write_atomic(join(root, "a/d"), "not bytes")  # type: ignore[arg-type]
        assert os.listdir(os.path.dirname(path)) == ["b"]

    def test_list_start_after_prunes_earlier_directories(
        self, storage: LocalStorage, root: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # GIVEN 50 step directories
        names = [f"index/{d:09d}/{d:012d}_worker_0.json" for d in range(50)]
        paths = self._write(storage, root, *names)
        visited: list[str] = []
        real_scandir = os.scandir

        def recording_scandir(path="."):
            # an int is an open directory's descriptor: pytest's removal of the passing test's tmp_path
            # (tmp_path_retention_policy = "failed") walks it with shutil.rmtree while this is patched
            if not isinstance(path, int):
                visited.append(os.fspath(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", recording_scandir)
        # WHEN polling after the key in directory 47
        listed = list(storage.list(join(root, "index/"), start_after=paths[47]))
        # THEN only the directories that can hold newer keys are opened
        assert listed == paths[48:]
        assert [os.path.basename(v.rstrip("/")) for v in visited] == [
            "index",
            "000000047",
            "000000048",
            "000000049",
        ]

    def test_file_scheme_and_relative_paths(
        self, storage: LocalStorage, tmp_path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        storage.write_atomic(f"file://{tmp_path}/x/y", b"abc")
        assert storage.read(str(tmp_path / "x/y"), 1) == b"bc"
        assert list(storage.list(f"file://{tmp_path}/x/")) == [f"{tmp_path}/x/y"]
        monkeypatch.chdir(tmp_path)
        assert list(storage.list("x/")) == ["x/y"]
        assert list(storage.list("x")) == ["x/y"]

    def test_negative_range_is_rejected(self, storage: LocalStorage, root: str) -> None:
        (path,) = self._write(storage, root, "a")
        with pytest.raises(ValueError, match="negative"):
            storage.read(path, -1, 3)


class TestS3Storage(StorageContract):
    @pytest.fixture
    def storage(self, s3_endpoint: str) -> Iterator[S3Storage]:
        with S3Storage(max_workers=16) as storage:
            yield storage

    @pytest.fixture
    def root(self, s3_bucket: str) -> str:
        return f"s3://{s3_bucket}/run"

    def test_missing_bucket_names_the_bucket(self, storage: S3Storage) -> None:
        path = "s3://tornasole-no-such-bucket-zz/run/x"
        with pytest.raises(FileNotFoundError, match="tornasole-no-such-bucket-zz") as info:
            storage.read(path)
        assert isinstance(info.value.__cause__, ClientError)
        assert info.value.filename == path
        with pytest.raises(FileNotFoundError, match="no such bucket"):
            list(storage.list("s3://tornasole-no-such-bucket-zz/run/"))
        assert not storage.exists(path)

    def test_missing_key_keeps_the_client_error_as_cause(self, storage: S3Storage, root: str) -> None:
        path = join(root, "missing.json")
        with pytest.raises(FileNotFoundError) as info:
            storage.read(path, 0, 10)
        assert info.value.filename == path
        assert isinstance(info.value.__cause__, ClientError)
        assert info.value.__cause__.response["Error"]["Code"] == "NoSuchKey"

    def test_list_start_after_is_sent_as_start_after_key(self, storage: S3Storage, root: str) -> None:
        # GIVEN 30 index keys
        names = [f"index/000000000/{s:012d}_worker_0.json" for s in range(30)]
        paths = self._write(storage, root, *names)
        sent: list[dict] = []
        received: list[int] = []
        events = s3_client().meta.events
        record_params = lambda params, **_: sent.append(dict(params))  # noqa: E731
        record_count = lambda parsed, **_: received.append(parsed.get("KeyCount", 0))  # noqa: E731
        events.register("provide-client-params.s3.ListObjectsV2", record_params)
        events.register("after-call.s3.ListObjectsV2", record_count)
        try:
            # WHEN polling after the 25th key
            listed = list(storage.list(join(root, "index/"), start_after=paths[24]))
        finally:
            events.unregister("provide-client-params.s3.ListObjectsV2", record_params)
            events.unregister("after-call.s3.ListObjectsV2", record_count)
        # THEN S3 is asked only for keys after it, and returns only those 5
        assert listed == paths[25:]
        assert [p.get("StartAfter") for p in sent] == [paths[24].split("/", 3)[3]]
        assert received == [5]

    def test_list_paginates_past_1000_keys(self, storage: S3Storage, root: str, s3_bucket: str) -> None:
        # GIVEN 1005 objects, seeded through moto's in-process backend (1005 PUTs over HTTP take seconds)
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        paths = [join(root, f"k{i:04d}") for i in range(1005)]
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for p in paths:
            backend.put_object(s3_bucket, p.split("/", 3)[3], b"x")
        pages: list[int] = []
        record = lambda parsed, **_: pages.append(parsed.get("KeyCount", 0))  # noqa: E731
        s3_client().meta.events.register("after-call.s3.ListObjectsV2", record)
        try:
            assert list(storage.list(join(root, ""))) == paths
        finally:
            s3_client().meta.events.unregister("after-call.s3.ListObjectsV2", record)
        assert pages == [1000, 5]
        assert list(storage.list(join(root, ""), start_after=paths[999])) == paths[1000:]

    def test_list_rejects_start_after_in_another_bucket(self, storage: S3Storage, root: str) -> None:
        with pytest.raises(ValueError, match="not in the bucket"):
            list(storage.list(root, start_after="s3://elsewhere/run/x"))

    def test_200_ranged_reads_share_one_client(self, storage: S3Storage, root: str) -> None:
        path = join(root, "events.tfevents")
        blob = os.urandom(200 * 64)
        storage.write_atomic(path, blob)
        threads: set[str] = set()
        ranges: list[str] = []
        client = s3_client()

        def record(params, **_):
            threads.add(threading.current_thread().name)
            ranges.append(params["Range"])

        client.meta.events.register("provide-client-params.s3.GetObject", record)
        try:
            results = storage.read_many([ReadRequest(path, i * 64, i * 64 + 64) for i in range(200)])
        finally:
            client.meta.events.unregister("provide-client-params.s3.GetObject", record)
        assert results == [blob[i * 64 : i * 64 + 64] for i in range(200)]
        # every GET went through the one cached client, from several pool threads, as ranged GETs
        assert len(ranges) == 200
        assert sorted(ranges) == sorted(f"bytes={i * 64}-{i * 64 + 63}" for i in range(200))
        assert len(threads) > 1
        assert [k for k in clients._cache if k[0] == "s3"] == [clients._key("s3")]

    def test_picks_up_a_cleared_client_cache(self, storage: S3Storage, root: str) -> None:
        (path,) = self._write(storage, root, "a")
        before = storage.client
        clients.clear_client_cache()
        assert storage.client is not before
        assert storage.read(path) == path.encode()

    def test_injected_client_is_used(self, root: str) -> None:
        injected = s3_client()
        clients.clear_client_cache()
        storage = S3Storage(client=injected)
        assert storage.client is injected
        storage.write_atomic(join(root, "x"), b"1")
        assert storage.read(join(root, "x")) == b"1"
        assert not clients._cache  # nothing fell back to the factory

    def test_object_urls_need_a_key(self, storage: S3Storage, s3_bucket: str) -> None:
        with pytest.raises(ValueError, match="no key"):
            storage.read(f"s3://{s3_bucket}/")


def _client_error(code: str, status: int) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": "message from S3"},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "REQ123"},
    }
    return ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("code", "status", "expected", "text"),
    [
        ("NoSuchKey", 404, FileNotFoundError, "no such object"),
        ("404", 404, FileNotFoundError, "no such object"),
        ("NoSuchBucket", 404, FileNotFoundError, "no such bucket 'b'"),
        ("AccessDenied", 403, PermissionError, "access denied"),
        ("403", 403, PermissionError, "access denied"),
        ("SlowDown", 503, OSError, "S3 error SlowDown"),
    ],
)
def test_client_errors_translate_to_builtins(code, status, expected, text) -> None:
    # GIVEN the error S3 sends for `code` (as a real ClientError, not a mock of our code)
    exc = _client_error(code, status)
    translated = s3_module._translate(exc, "s3://b/run/k")
    assert type(translated) is expected
    assert translated.filename == "s3://b/run/k"
    assert text in str(translated)
    assert "REQ123" in str(translated)
