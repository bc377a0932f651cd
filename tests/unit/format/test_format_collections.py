"""Collections file JSON: exact bytes and validation."""

from __future__ import annotations

import json

import pytest

from tornasole.exceptions import FormatError
from tornasole.format.collections import decode_collections, encode_collections

PATH = "/run/collections/000000000/worker_0_collections.json"
LOSSES = {
    "name": "losses",
    "include_regex": ["[Ll]oss_(?!input).*output"],
    "tensor_names": [],
    "reduction_config": None,
    "save_config": {
        m: {"save_interval": 5, "save_steps": [], "start_step": 0, "end_step": None}
        for m in ("TRAIN", "EVAL", "PREDICT", "GLOBAL")
    },
    "save_histogram": False,
}


def test_encode_matches_smdebug_serialization() -> None:
    data = encode_collections({"losses": LOSSES}, 2)
    assert data.startswith(b'{"collections": {"losses": {"name": "losses", "include_regex": ["[Ll]oss_')
    assert b'"end_step": null}' in data
    assert data.endswith(b'"save_histogram": false}}, "_meta": {"num_workers": 2}}')
    assert decode_collections(data, PATH) == ({"losses": LOSSES}, 2)


def test_missing_meta_means_one_worker() -> None:
    assert decode_collections(b'{"collections": {}}', PATH) == ({}, 1)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a JSON object"),
        ({"_meta": {"num_workers": 1}}, "missing or non-object 'collections'"),
        ({"collections": {"a": []}}, "collection 'a' must be an object"),
        ({"collections": {"a": {}}}, "collection 'a' has no 'name'"),
        ({"collections": {"a": {"name": "a", "include_regex": "x"}}}, "'include_regex' must be list or null"),
        ({"collections": {"a": {"name": "a", "tensor_names": [1]}}}, "'tensor_names' must hold strings"),
        ({"collections": {"a": {"name": "a", "save_histogram": "yes"}}}, "'save_histogram' must be bool"),
        ({"collections": {}, "_meta": []}, "'_meta' must be an object"),
        ({"collections": {}, "_meta": {"num_workers": 0}}, "must be a positive integer"),
    ],
)
def test_malformed_collections_name_the_file(doc, message: str) -> None:
    with pytest.raises(FormatError, match=message) as err:
        decode_collections(json.dumps(doc), PATH)
    assert err.value.path == PATH


def test_unparseable_collections_name_the_file() -> None:
    with pytest.raises(FormatError, match="malformed collections JSON") as err:
        decode_collections(b'{"collections": ', PATH)
    assert PATH in str(err.value)
