"""How many earlier steps a step's trial holds for its rules, and the cache of earlier index files."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tornasole.evaluator.models import RuleConfig
from tornasole.evaluator.runner import (
    DEFAULT_HISTORY_STEPS,
    MAX_HISTORY_STEPS,
    StepFiles,
    StepRunner,
    history_window,
    leading_window,
)
from tornasole.evaluator.store.index_cache import CachingStorage, IndexFileCache
from tornasole.format.writer import StepWriter, TrialWriter
from tornasole.rules import Rule, create_rule
from tornasole.storage import get_storage
from tornasole.storage.base import ReadRequest
from tornasole.trials import create_trial


class SmdebugStyleRule(Rule):
    """A custom rule written for smdebug: it does not say how far back it reads."""

    def invoke_at_step(self, step: int) -> bool:
        return False


class LongMemoryRule(SmdebugStyleRule):
    def history_steps(self) -> int | None:
        return 1000


@pytest.fixture
def trial(tmp_path: Any) -> Any:
    writer = TrialWriter(str(tmp_path))
    for step in range(3):
        sw = StepWriter(step, "worker_0")
        sw.add_tensor("loss", np.float32(1.0), wall_time=1.0)
        writer.write_step(sw)
    writer.write_collections({"losses": {"name": "losses", "include_regex": ["loss"]}}, num_workers=1)
    return create_trial(str(tmp_path), listing=False)


class _Counting:
    """A storage that records every read reaching it (the backend behind the cache) in ``reads``."""

    def __init__(self, inner: Any, reads: list[ReadRequest]) -> None:
        self.inner, self.reads = inner, reads

    def read_many(self, requests: Any, on_error: str = "raise") -> list[Any]:
        self.reads.extend(requests)
        return self.inner.read_many(requests, on_error=on_error)


def test_the_window_is_what_the_rule_declares(trial: Any) -> None:
    assert history_window(create_rule("VanishingGradient", trial)) == 0
    assert history_window(create_rule("LossNotDecreasing", trial, num_steps="10")) == 22
    assert history_window(create_rule("Overtraining", trial)) == 22


def test_rules_reading_the_whole_run_or_too_far_get_the_cap(trial: Any) -> None:
    assert history_window(create_rule("ClassImbalance", trial)) == MAX_HISTORY_STEPS
    assert history_window(LongMemoryRule(trial)) == MAX_HISTORY_STEPS
    assert history_window(create_rule("Overtraining", trial), cap=8) == 8


def test_custom_rules_without_a_declaration_get_the_default_window(trial: Any) -> None:
    assert history_window(SmdebugStyleRule(trial)) == DEFAULT_HISTORY_STEPS


def test_index_files_are_read_once_and_event_ranges_every_time(tmp_path: Any, trial: Any) -> None:
    # GIVEN a storage that counts the reads reaching the backend
    reads: list[ReadRequest] = []
    inner = get_storage(str(tmp_path))

    cache = IndexFileCache()
    index = f"{tmp_path}/index/000000000/000000000001_worker_0.json"
    event = f"{tmp_path}/events/000000000001/000000000001_worker_0.tfevents"
    storage = CachingStorage(_Counting(inner, reads), cache)  # type: ignore[arg-type]
    # WHEN the same index file and event range are read twice
    first = storage.read_many([ReadRequest(index), ReadRequest(event, 0, 8)])
    second = storage.read_many([ReadRequest(index), ReadRequest(event, 0, 8)])
    # THEN the index file reached the backend once, the ranged read twice, and the bytes are the same
    assert first == second
    assert [r.path for r in reads] == [index, event, event]
    assert len(cache) == 1


def test_collections_files_are_read_once_and_whole(tmp_path: Any) -> None:
    reads: list[ReadRequest] = []
    inner = get_storage(str(tmp_path))

    collections = f"{tmp_path}/collections/000000000/worker_0_collections.json"
    body = b'{"collections": {}, "_meta": {"num_workers": 1}}' + b" " * (1 << 20)
    inner.write_atomic(collections, body)
    cache = IndexFileCache()
    storage = CachingStorage(_Counting(inner, reads), cache, max_index_bytes=16)  # type: ignore[arg-type]
    assert storage.read(collections) == body  # not capped like an index file
    assert storage.read(collections) == body
    assert [(r.path, r.start, r.end) for r in reads] == [(collections, None, None)]


def test_bounded_collections_reads_are_kept_when_they_hold_the_whole_file(tmp_path: Any) -> None:
    """The trial reads a collections file bounded (MAX_COLLECTIONS_BYTES + 1): kept once it returned less
    than it asked for (the whole file); a read cut at its bound (maybe more behind it) is not kept."""
    reads: list[ReadRequest] = []
    inner = get_storage(str(tmp_path))

    collections = f"{tmp_path}/collections/000000000/worker_0_collections.json"
    body = b'{"collections": {}, "_meta": {"num_workers": 1}}'
    inner.write_atomic(collections, body)
    storage = CachingStorage(_Counting(inner, reads), IndexFileCache())  # type: ignore[arg-type]
    assert storage.read(collections, 0, 10) == body[:10]  # cut at its bound: not kept
    assert storage.read(collections, 0, 1000) == body  # shorter than asked: the whole file, kept
    assert storage.read(collections, 0, 1000) == body
    assert storage.read(collections, 0, 10) == body[:10]  # served from the kept file, as S3 would
    assert storage.read(collections) == body
    assert [(r.start, r.end) for r in reads] == [(0, 10), (0, 1000)]


def test_missing_index_files_are_not_cached(tmp_path: Any) -> None:
    cache = IndexFileCache()
    storage = CachingStorage(get_storage(str(tmp_path)), cache)
    missing = f"{tmp_path}/index/000000000/000000000009_worker_0.json"
    (result,) = storage.read_many([ReadRequest(missing)], on_error="return")
    assert isinstance(result, FileNotFoundError)
    assert len(cache) == 0


def test_the_cache_keeps_at_most_its_byte_budget() -> None:
    cache = IndexFileCache(max_bytes=10)
    for i in range(5):
        cache.put(f"s3://b/run/index/000000000/00000000000{i}_worker_0.json", b"1234")
    assert cache.size <= 10
    assert len(cache) == 2
    assert cache.get("s3://b/run/index/000000000/000000000004_worker_0.json") == b"1234"
    assert cache.get("s3://b/run/index/000000000/000000000000_worker_0.json") is None


def test_the_runner_asks_for_the_window_of_its_most_demanding_rule(tmp_path: Any, trial: Any) -> None:
    asked: list[int] = []

    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        asked.append(depth)
        return [(s, ("worker_0",)) for s in range(1, -1, -1)][:depth]

    rules = [
        RuleConfig(name="VG", rule_to_invoke="VanishingGradient"),
        RuleConfig(name="LND", rule_to_invoke="LossNotDecreasing"),
    ]
    outcomes = StepRunner().run("job", str(tmp_path), StepFiles(2, ("worker_0",)), rules, history)
    assert asked == [22]
    assert [(o.rule_name, o.error) for o in outcomes] == [("VG", None), ("LND", None)]
    step_local = StepRunner().run("job", str(tmp_path), StepFiles(2, ("worker_0",)), rules[:1], history)
    assert asked == [22]  # no earlier steps looked up for step-local rules
    assert step_local[0].error is None


def test_a_failed_history_lookup_fails_the_invocation_not_the_rules(tmp_path: Any, trial: Any) -> None:
    # GIVEN the state query for earlier steps fails (e.g. throttled)
    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        raise OSError("throttled")

    rules = [RuleConfig(name="LND", rule_to_invoke="LossNotDecreasing")]
    # THEN the error propagates (Lambda retries) instead of becoming the rule's sticky Error status
    with pytest.raises(OSError, match="throttled"):
        StepRunner().run("job", str(tmp_path), StepFiles(2, ("worker_0",)), rules, history)


def test_rules_comparing_with_the_start_ask_for_the_runs_first_steps(trial: Any) -> None:
    # WHY: at step 5,000 the recent window no longer holds the start of training, which
    # LossNotDecreasing(reference=first) and PoorWeightInitialization compare with
    assert leading_window(create_rule("LossNotDecreasing", trial)) == 0
    assert leading_window(create_rule("LossNotDecreasing", trial, reference="first", window="5")) == 20
    # ``first`` also asks whether any earlier evaluation point came down: the whole run, capped
    first = create_rule("LossNotDecreasing", trial, reference="first", window="5")
    assert history_window(first) == MAX_HISTORY_STEPS
    assert leading_window(create_rule("PoorWeightInitialization", trial)) == 60
    assert leading_window(create_rule("PoorWeightInitialization", trial, steps="100")) == MAX_HISTORY_STEPS
    assert leading_window(SmdebugStyleRule(trial)) == 0


def test_the_runner_asks_for_the_first_steps_its_rules_need(tmp_path: Any, trial: Any) -> None:
    asked: list[tuple[int, int]] = []

    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        asked.append((depth, lead))
        return [(0, ("worker_0",))]

    rules = [RuleConfig(name="LND", rule_to_invoke="LossNotDecreasing", parameters={"reference": "first"})]
    outcomes = StepRunner().run("job", str(tmp_path), StepFiles(2, ("worker_0",)), rules, history)
    assert asked == [(MAX_HISTORY_STEPS, 4)]  # ``first`` reads every earlier evaluation point (capped)
    assert outcomes[0].error is None


def test_a_rewritten_steps_index_file_and_values_are_forgotten(tmp_path: Any, trial: Any) -> None:
    """A resumed run re-saves step 1 into the same keys (same offsets, a new value): the warm runner's
    next trial reads the new bytes once told, where its caches would serve the old value."""
    runner = StepRunner()
    files = StepFiles(2, ("worker_0",), ((0, ("worker_0",)), (1, ("worker_0",))))

    def loss_at_1() -> float:
        loaded = runner.build_trial("job", str(tmp_path), files)
        loaded.load_index_files(files.history_keys())
        return float(np.ravel(loaded.tensor("loss").value(1))[0])

    assert loss_at_1() == 1.0
    sw = StepWriter(1, "worker_0")
    sw.add_tensor("loss", np.float32(5.0), wall_time=1.0)
    TrialWriter(str(tmp_path)).write_step(sw)
    assert loss_at_1() == 1.0  # served from the caches: stale
    kept = (len(runner.index_cache), len(runner.value_cache))
    runner.forget(str(tmp_path), 1, ["worker_0"])
    assert (len(runner.index_cache), len(runner.value_cache)) == (kept[0] - 1, kept[1] - 1)
    assert loss_at_1() == 5.0
