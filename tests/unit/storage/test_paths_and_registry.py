"""Location parsing/joining and the scheme registry (no network, no boto3 calls)."""

from __future__ import annotations

import sys

import pytest

from tornasole.storage import LocalStorage, get_storage, is_s3, join, register, split_s3
from tornasole.storage.paths import scheme_of, to_local
from tornasole.storage.schemes import clear_storage_cache, registered_schemes


@pytest.fixture(autouse=True)
def _fresh_registry():
    clear_storage_cache()
    yield
    clear_storage_cache()


@pytest.mark.parametrize(
    ("base", "parts", "expected"),
    [
        ("s3://b/run", ("index", "000000000/"), "s3://b/run/index/000000000/"),
        ("s3://b/run/", ("/index/", "/x"), "s3://b/run/index/x"),
        ("s3://b", ("k",), "s3://b/k"),
        ("s3://b/", ("k",), "s3://b/k"),
        ("/tmp/run", ("events", "f.tfevents"), "/tmp/run/events/f.tfevents"),
        ("/tmp/run/", ("", "a"), "/tmp/run/a"),
        ("/", ("a",), "/a"),
        ("", ("a", "b"), "a/b"),
        ("file:///tmp/run", ("a",), "file:///tmp/run/a"),
        ("s3://b/run", (), "s3://b/run"),
    ],
)
def test_join_uses_single_slashes(base, parts, expected) -> None:
    assert join(base, *parts) == expected


def test_is_s3_and_scheme() -> None:
    assert is_s3("s3://bucket/key")
    assert is_s3("S3://bucket/key")
    assert not is_s3("/tmp/s3://x")
    assert not is_s3("file:///tmp/x")
    assert scheme_of("gs://b/k") == "gs"
    assert scheme_of("relative/path") == "file"


def test_split_s3() -> None:
    assert split_s3("s3://bucket/run/index/x.json") == ("bucket", "run/index/x.json")
    assert split_s3("s3://bucket/") == ("bucket", "")
    assert split_s3("s3://bucket") == ("bucket", "")


@pytest.mark.parametrize("bad", ["s3://", "s3:///key", "/tmp/x", "s3://bad bucket/k"])
def test_split_s3_rejects_malformed_naming_the_path(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        split_s3(bad)
    assert repr(bad) in str(info.value)


def test_to_local_strips_file_scheme() -> None:
    assert to_local("file:///tmp/a") == "/tmp/a"
    assert to_local("/tmp/a") == "/tmp/a"


def test_get_storage_picks_backend_by_scheme_and_caches_per_scheme() -> None:
    local = get_storage("/tmp/run")
    assert isinstance(local, LocalStorage)
    assert get_storage("file:///other") is local
    assert get_storage("relative/dir") is local
    s3 = get_storage("s3://bucket/run")
    assert type(s3).__name__ == "S3Storage"
    assert get_storage("s3://another/prefix") is s3
    assert s3 is not local


def test_get_storage_unknown_scheme_lists_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'gs'.*file, s3"):
        get_storage("gs://bucket/run")


def test_register_a_new_scheme_and_replace_cached_instance() -> None:
    register("mem", "tornasole.storage.local:LocalStorage")
    assert "mem" in registered_schemes()
    first = get_storage("mem://x")
    assert isinstance(first, LocalStorage)
    register("mem", "tornasole.storage.local:LocalStorage")
    assert get_storage("mem://x") is not first


def test_register_rejects_malformed_target() -> None:
    with pytest.raises(ValueError, match="module:Class"):
        register("mem", "no_colon_here")


def test_missing_boto3_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN boto3/botocore cannot be imported and the S3 backend was never loaded
    for name in ("boto3", "botocore", "botocore.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "tornasole.storage.s3", raising=False)
    # WHEN an s3:// path is used THEN the error says which extra to install, keeping the cause
    with pytest.raises(ImportError, match=r"install tornasole\[s3\] to read s3:// paths") as info:
        get_storage("s3://bucket/run")
    assert isinstance(info.value.__cause__, ImportError)
