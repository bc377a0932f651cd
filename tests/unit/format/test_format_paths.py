"""Trial file names, both directions."""

from __future__ import annotations

import pytest

from tornasole.format.paths import (
    END_MARKER,
    JOB_CONFIG,
    STOP_SIGNAL,
    collections_file_name,
    deserialize_worker,
    event_file_name,
    index_file_name,
    index_prefix_for_step,
    parse_collections_file_name,
    parse_event_file_name,
    parse_index_file_name,
    serialize_worker,
)

TF_DEVICE = "/job:worker/replica:0/task:1/device:GPU:0"


def test_constants() -> None:
    assert (END_MARKER, STOP_SIGNAL, JOB_CONFIG) == (
        "training_job_end.ts",
        "tornasole_stop_training.json",
        "tornasole_job.json",
    )


def test_builders() -> None:
    assert event_file_name(5, "worker_0") == "events/000000000005/000000000005_worker_0.tfevents"
    assert index_file_name(5, "worker_0") == "index/000000000/000000000005_worker_0.json"
    assert index_file_name(1234, "worker_1") == "index/000000001/000000001234_worker_1.json"
    assert event_file_name(1234, "worker_1") == "events/000000001234/000000001234_worker_1.tfevents"
    assert index_prefix_for_step(999) == "index/000000000/"
    assert index_prefix_for_step(1000) == "index/000000001/"
    assert collections_file_name("worker_0") == "collections/000000000/worker_0_collections.json"
    with pytest.raises(ValueError, match="step must be >= 0"):
        event_file_name(-1, "worker_0")


def test_tf_device_workers_are_escaped_both_ways() -> None:
    assert serialize_worker(TF_DEVICE) == "_job-worker_replica-0_task-1_device-GPU-0"
    assert deserialize_worker(serialize_worker(TF_DEVICE)) == TF_DEVICE
    name = index_file_name(5, TF_DEVICE)
    assert name == "index/000000000/000000000005__job-worker_replica-0_task-1_device-GPU-0.json"
    assert parse_index_file_name(name) == (5, TF_DEVICE)
    assert parse_event_file_name(event_file_name(5, TF_DEVICE)) == (5, TF_DEVICE)
    assert parse_collections_file_name(collections_file_name(TF_DEVICE)) == TF_DEVICE


@pytest.mark.parametrize("base", ["", "/tmp/run/", "s3://bucket/pre/fix/", "/tmp/123_abc/"])
def test_parsers_accept_keys_and_full_paths(base: str) -> None:
    assert parse_index_file_name(base + index_file_name(1234, "worker_3")) == (1234, "worker_3")
    assert parse_index_file_name(base + "index/000000000/000000000007_worker_0.csv") == (7, "worker_0")
    assert parse_event_file_name(base + event_file_name(7, "worker_0")) == (7, "worker_0")
    assert parse_collections_file_name(base + collections_file_name("worker_2")) == "worker_2"


@pytest.mark.parametrize(
    "key",
    [
        "index/000000000/000000000005_worker_0.json.tmp",
        "index/000000000/notes.json",
        "events/000000000005/000000000005_worker_0.tfevents",
        "run/tensorboard/TRAIN/000000000000_7399_vm.tfevents",
        "000000000005_worker_0.json",
    ],
)
def test_parse_index_rejects_other_files(key: str) -> None:
    assert parse_index_file_name(key) is None


def test_parse_event_and_collections_reject_other_files() -> None:
    assert parse_event_file_name("run/tensorboard/TRAIN/000000000000_7399_vm.tfevents") is None
    assert parse_event_file_name("index/000000000/000000000005_worker_0.json") is None
    assert parse_collections_file_name("run/collections/000000000/worker_0_collections.json.tmp") is None
    assert parse_collections_file_name("run/index/000000000/000000000005_worker_0.json") is None
