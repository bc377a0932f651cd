"""Index file JSON: exact bytes, validation errors that name the file."""

from __future__ import annotations

import json

import pytest

from tornasole.exceptions import IndexReaderException
from tornasole.format.index import IndexEntry, ShapeEntry, StepIndex, decode_index, encode_index
from tornasole.modes import ModeKeys

PATH = "s3://bucket/run/index/000000000/000000000005_worker_0.json"
EFN = "events/000000000005/000000000005_worker_0.tfevents"


def _index() -> StepIndex:
    return StepIndex(
        ModeKeys.TRAIN,
        5,
        EFN,
        [IndexEntry("Net_fc1.weight", 0, 324), IndexEntry("Net_fc1.bias", 324, 126)],
        [ShapeEntry("gradient/Net_fc2.weight", "gradient/Net_fc2.weight", (3, 6)), ShapeEntry("l", "l", ())],
    )


def test_encode_uses_json_dumps_default_separators_and_key_order() -> None:
    data = encode_index(_index())
    assert data == (
        b'{"meta": {"mode": "TRAIN", "mode_step": 5, "event_file_name": "' + EFN.encode() + b'"}, '
        b'"tensor_payload": [{"tensorname": "Net_fc1.weight", "start_idx": 0, "length": 324}, '
        b'{"tensorname": "Net_fc1.bias", "start_idx": 324, "length": 126}], '
        b'"shape_payload": [{"tensorname": "gradient/Net_fc2.weight", "originalname": '
        b'"gradient/Net_fc2.weight", "shape": [3, 6]}, '
        b'{"tensorname": "l", "originalname": "l", "shape": []}]}'
    )


@pytest.mark.parametrize(
    "name", ["plain", 'quo"te/back\\slash', "tab\tnew\nline\x01", "ünï/çødé", "emoji \U0001f600", ""]
)
def test_encode_equals_json_dumps_of_smdebug_dict(name: str) -> None:
    idx = StepIndex(
        ModeKeys.EVAL,
        2**40,
        EFN,
        [IndexEntry(name, 0, 17), IndexEntry(name + "2", 17, 2**33)],
        [ShapeEntry(name, name + "o", (0, 3))],
    )
    doc = {
        "meta": {"mode": "EVAL", "mode_step": 2**40, "event_file_name": EFN},
        "tensor_payload": [
            {"tensorname": name, "start_idx": 0, "length": 17},
            {"tensorname": name + "2", "start_idx": 17, "length": 2**33},
        ],
        "shape_payload": [{"tensorname": name, "originalname": name + "o", "shape": [0, 3]}],
    }
    assert encode_index(idx) == json.dumps(doc).encode("utf-8")
    assert decode_index(encode_index(idx), PATH) == idx


def test_round_trip() -> None:
    assert decode_index(encode_index(_index()), PATH) == _index()


def test_shapes_only_index_has_no_event_file_name() -> None:
    idx = StepIndex(ModeKeys.EVAL, 2, None, [], [ShapeEntry("a", "a", (2,))])
    data = encode_index(idx)
    assert b"event_file_name" not in data
    assert decode_index(data, PATH) == idx


def test_accepts_missing_shape_payload_and_legacy_mode_spelling() -> None:
    doc = {"meta": {"mode": "ModeKeys.GLOBAL", "mode_step": 0, "event_file_name": EFN}, "tensor_payload": []}
    idx = decode_index(json.dumps(doc), PATH)
    assert idx.mode is ModeKeys.GLOBAL
    assert idx.shapes == []


def _bad(mutate) -> dict:
    doc = json.loads(encode_index(_index()))
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("meta"), "'meta' section is missing"),
        (lambda d: (d.pop("tensor_payload"), d.pop("shape_payload")), "neither 'tensor_payload'"),
        (lambda d: d["meta"].pop("mode"), "missing key 'mode'"),
        (lambda d: d["meta"].update(mode="TRAINING"), "unknown mode 'TRAINING'"),
        (lambda d: d["meta"].update(mode_step="5"), "'mode_step' must be int, got str"),
        (lambda d: d["meta"].update(mode_step=True), "'mode_step' must be int, got bool"),
        (lambda d: d["meta"].pop("event_file_name"), "missing key 'event_file_name'"),
        (lambda d: d.update(tensor_payload={}), "'tensor_payload' must be list"),
        (lambda d: d["tensor_payload"].append(3), r"tensor_payload\[2\] must be an object"),
        (lambda d: d["tensor_payload"][1].pop("length"), r"tensor_payload\[1\]: missing key 'length'"),
        (lambda d: d["tensor_payload"][1].update(start_idx=-4), "negative start_idx -4"),
        (lambda d: d["tensor_payload"][0].update(length=3), "length 3 cannot hold a record"),
        (lambda d: d["shape_payload"][0].update(shape=[3, -1]), "bad shape"),
        (lambda d: d["shape_payload"][0].update(shape="3x6"), "'shape' must be list"),
    ],
)
def test_malformed_index_names_the_file(mutate, message: str) -> None:
    with pytest.raises(IndexReaderException, match=message) as err:
        decode_index(json.dumps(_bad(mutate)).encode(), PATH)
    assert err.value.path == PATH
    assert str(err.value).startswith(PATH)


@pytest.mark.parametrize("data", [b"", b"{not json", b"\xff\xfe", b"[]", b'{"meta": {}}'])
def test_unparseable_index_names_the_file(data: bytes) -> None:
    with pytest.raises(IndexReaderException) as err:
        decode_index(data, PATH)
    assert PATH in str(err.value)
