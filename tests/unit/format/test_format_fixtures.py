"""Round trips over every file smdebug 1.0.34 wrote in the smdebug fixtures.

GIVEN the trees smdebug wrote, WHEN we decode every record at the offsets its
index gives, THEN values match the ``.expected.npz`` ground truth and
mode/mode_step match the ``.expected.json`` manifest; and re-encoding every
record (with its own wall_time), index file and collections file reproduces the
original bytes exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tornasole.exceptions import FormatError
from tornasole.format.collections import decode_collections, encode_collections
from tornasole.format.event_records import decode_event, encode_record
from tornasole.format.index import decode_index, encode_index
from tornasole.format.paths import (
    collections_file_name,
    event_file_name,
    index_file_name,
    parse_collections_file_name,
    parse_event_file_name,
    parse_index_file_name,
)
from tornasole.format.tfrecord import iter_records, read_record
from tornasole.modes import ModeKeys

# Trees that come with ``<tree>.expected.{npz,json}`` ground truth.
EXPECTED_TREES = ["pt_hook_single", "pt_dist_2workers", "core_writer_2workers"]


def _decode_tree(tree: Path):
    """Yield (worker, index step, index, record bytes, decoded record) for every index entry."""
    for index_path in sorted((tree / "index").rglob("*.json")):
        step, worker = parse_index_file_name(str(index_path))
        index = decode_index(index_path.read_bytes(), str(index_path))
        if not index.tensors:
            continue
        event_path = tree / index.event_file_name
        buf = event_path.read_bytes()
        for entry in index.tensors:
            payload = read_record(buf, str(event_path), entry.start_idx, entry.length)
            raw = buf[entry.start_idx : entry.start_idx + entry.length]
            yield worker, step, index, entry, raw, decode_event(payload, path=str(event_path))


@pytest.mark.parametrize("tree_name", EXPECTED_TREES)
def test_every_indexed_record_matches_ground_truth(
    fixtures_dir: Path, expected_manifest, tree_name: str
) -> None:
    tree = fixtures_dir / tree_name
    expected = np.load(fixtures_dir / f"{tree_name}.expected.npz")
    manifest = expected_manifest[tree_name]
    decoded = list(_decode_tree(tree))
    assert len(decoded) == len(manifest)

    last: dict[str, np.ndarray] = {}
    for (worker, step, index, entry, _, rec), want in zip(decoded, manifest, strict=True):
        key = f"{worker}|{step}|{rec.tag}"
        assert key == want["key"]
        assert rec.tag == entry.tensorname
        assert rec.step == step
        assert index.mode.name == want["index_mode"]
        assert index.mode_step == want["index_mode_step"]
        assert rec.mode == ModeKeys(int(want["record_mode"]))
        assert rec.mode_step == int(want["record_mode_step"])
        assert rec.value.dtype == np.dtype(want["dtype"])
        assert list(rec.value.shape) == want["shape"]
        last[key] = rec.value

    assert set(last) == set(expected.files)
    for key, value in last.items():
        want = expected[key]
        assert value.dtype == want.dtype, key
        assert value.shape == want.shape, key
        np.testing.assert_array_equal(value, want, err_msg=key)


@pytest.mark.parametrize("tree_name", EXPECTED_TREES + ["pt_hook_tensorboard"])
def test_reencoding_each_record_reproduces_its_bytes(fixtures_dir: Path, tree_name: str) -> None:
    count = 0
    for _, _, _, _, raw, rec in _decode_tree(fixtures_dir / tree_name):
        again = encode_record(
            rec.tag, rec.value, step=rec.step, mode=rec.mode, mode_step=rec.mode_step, wall_time=rec.wall_time
        )
        assert again == raw, rec.tag
        count += 1
    assert count > 0


def test_event_files_are_contiguous_records_covered_by_their_index(fixture_trees: list[Path]) -> None:
    for tree in fixture_trees:
        for event_path in sorted((tree / "events").rglob("*.tfevents")):
            step, worker = parse_event_file_name(str(event_path))
            assert str(event_path).endswith(event_file_name(step, worker))
            buf = event_path.read_bytes()
            offsets = [off for off, _ in iter_records(buf, str(event_path))]
            index_path = tree / index_file_name(step, worker)
            index = decode_index(index_path.read_bytes(), str(index_path))
            assert [e.start_idx for e in index.tensors] == offsets
            assert sum(e.length for e in index.tensors) == len(buf)


def test_every_index_file_reencodes_byte_identical(fixture_trees: list[Path]) -> None:
    paths = [p for tree in fixture_trees for p in sorted((tree / "index").rglob("*.json"))]
    assert len(paths) >= 30
    for path in paths:
        data = path.read_bytes()
        assert encode_index(decode_index(data, str(path))) == data, path
        step, worker = parse_index_file_name(str(path))
        assert str(path).endswith(index_file_name(step, worker))


def test_every_collections_file_reencodes_byte_identical(fixture_trees: list[Path]) -> None:
    paths = [p for tree in fixture_trees for p in sorted((tree / "collections").rglob("*.json"))]
    assert len(paths) == 6
    for path in paths:
        data = path.read_bytes()
        collections, num_workers = decode_collections(data, str(path))
        assert encode_collections(collections, num_workers) == data, path
        worker = parse_collections_file_name(str(path))
        assert str(path).endswith(collections_file_name(worker))
        assert num_workers == (2 if "2workers" in str(path) else 1)


def test_tensorboard_files_with_real_payload_crcs_are_accepted(fixtures_dir: Path) -> None:
    files = sorted((fixtures_dir / "pt_hook_tensorboard" / "tensorboard").rglob("*.tfevents"))
    assert files
    records = 0
    for path in files:
        buf = path.read_bytes()
        for offset, payload in iter_records(buf, str(path)):
            # GIVEN a standard TFRecord footer: the real masked CRC, not smdebug's constant
            assert buf[offset + 12 + len(payload) : offset + 16 + len(payload)] != b"\xb3\xc0\x2d\x06"
            records += 1
    assert records > 0


def test_truncated_real_event_file_names_file_and_offset(fixtures_dir: Path) -> None:
    path = fixtures_dir / "pt_hook_single" / "events" / "000000000005" / "000000000005_worker_0.tfevents"
    buf = path.read_bytes()
    last = [offset for offset, _ in iter_records(buf, str(path))][-1]
    cut = buf[: last + 50]  # the file's last record loses its tail
    good = [offset for offset, _ in iter_records(cut[:last], str(path))]
    assert good[-1] < last
    with pytest.raises(FormatError, match="truncated record") as err:
        list(iter_records(cut, str(path)))
    assert err.value.offset == last
    assert str(path) in str(err.value)
