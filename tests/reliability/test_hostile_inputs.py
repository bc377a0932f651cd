"""Hostile inputs: whatever lands in the bucket, the evaluator answers in bounded time with a reason.

Each input goes to the real ``on_object_created`` handler next to a healthy step of
the same job. The end state asserted every time: the handler returned (nothing
escaped to Lambda's retry/DLQ), the bad object's problem is recorded where a user
sees it (the step's evaluation record, or the object's result) naming it, the rule
is *not* turned to ``Error`` by the data, and the healthy steps were evaluated.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from reliability_rig import BUCKET, RULES_PREFIX, SCOREBOARD, Rig, trial

from tornasole.format import event_records as event_format
from tornasole.format import proto, tfrecord
from tornasole.format.paths import event_file_name, index_file_name
from tornasole.jobs import Rule

JOB = "hostile"
STEP = 1
KEY_ROOT = f"jobs/{JOB}"
TIME_LIMIT_S = 30.0


def index_key(step: int = STEP, worker: str = "worker_0") -> str:
    return f"{KEY_ROOT}/{index_file_name(step, worker)}"


def event_key(step: int = STEP, worker: str = "worker_0") -> str:
    return f"{KEY_ROOT}/{event_file_name(step, worker)}"


def valid_index(length: int = 209, start: int = 0) -> dict[str, Any]:
    return {
        "meta": {"mode": "TRAIN", "mode_step": STEP, "event_file_name": event_file_name(STEP, "worker_0")},
        "tensor_payload": [{"tensorname": "gradients/fc.weight", "start_idx": start, "length": length}],
        "shape_payload": [],
    }


def event_record(mutate: Callable[[Any], None] | None = None) -> bytes:
    payload = event_format.encode_event(
        "gradients/fc.weight", np.full((4, 4), 1e-9, dtype=np.float32), step=STEP, mode=None, mode_step=STEP
    )
    if mutate is not None:
        event = proto.messages().Event.FromString(payload)
        mutate(event.summary.value[0].tensor)
        payload = event.SerializeToString()
    return tfrecord.frame(payload)


def with_event(body: bytes) -> dict[str, bytes]:
    return {event_key(): body, index_key(): json.dumps(valid_index(len(body))).encode()}


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]


def terabyte_shape(t: Any) -> None:
    del t.tensor_shape.dim[:]
    for _ in range(3):
        t.tensor_shape.dim.add(size=10**6)


def unknown_dtype(t: Any) -> None:
    t.dtype = 999


def negative_dim(t: Any) -> None:
    t.tensor_shape.dim[0].size = -5


GOOD = event_record()

# A bad step: the bodies written at step 1; it must be recorded as a step error (the rule goes on).
BAD_STEP_FILES: dict[str, Callable[[], dict[str, bytes]]] = {
    "truncated index": lambda: {index_key(): json.dumps(valid_index()).encode()[:40]},
    "bit-flipped index": lambda: {index_key(): flip(json.dumps(valid_index()).encode(), 0)},
    "index is a list": lambda: {index_key(): b"[1, 2, 3]"},
    "deeply nested index": lambda: {index_key(): b"[" * 200_000 + b"]" * 200_000},
    "index over the read cap": lambda: {index_key(): b" " * (5 * 1024 * 1024) + b"{}"},
    "2^63 record length": lambda: {event_key(): GOOD, index_key(): json.dumps(valid_index(2**63)).encode()},
    "2^63 start offset": lambda: {
        event_key(): GOOD,
        index_key(): json.dumps(valid_index(209, 2**63)).encode(),
    },
    "negative length": lambda: {event_key(): GOOD, index_key(): json.dumps(valid_index(-5)).encode()},
    "index naming a missing event file": lambda: {index_key(): json.dumps(valid_index()).encode()},
    "index with wrong types": lambda: {
        index_key(): b'{"meta": 5, "tensor_payload": "x", "shape_payload": 1}'
    },
    "empty index file": lambda: {index_key(): b""},
    "index of NaN literals": lambda: {index_key(): b'{"meta": NaN, "tensor_payload": [NaN]}'},
    "truncated event record": lambda: with_event(GOOD[:50]),
    "bit-flipped event record": lambda: with_event(flip(GOOD, 60)),
    "2^63 length in the record header": lambda: with_event((2**63).to_bytes(8, "little") + GOOD[8:]),
    "terabyte shape": lambda: with_event(event_record(terabyte_shape)),
    "unknown dtype": lambda: with_event(event_record(unknown_dtype)),
    "negative dimension": lambda: with_event(event_record(negative_dim)),
    "zero-byte event file": lambda: with_event(b""),
    "garbage event file": lambda: with_event(bytes(range(256)) * 4),
}


def healthy_job(rig: Rig, rules: list[Any] | None = None) -> None:
    rig.register(JOB, rules)
    rig.write_collections(JOB)
    rig.write_step(JOB, 0)
    rig.write_step(JOB, 2, grad=1e-9)


def timed(fn: Callable[[], Any]) -> Any:
    start = time.monotonic()
    out = fn()
    assert time.monotonic() - start < TIME_LIMIT_S
    return out


@pytest.mark.parametrize("name", sorted(BAD_STEP_FILES))
def test_a_hostile_step_file_is_recorded_against_its_step(rig: Rig, name: str) -> None:
    SCOREBOARD.add(hostile=1)
    healthy_job(rig)
    for key, body in BAD_STEP_FILES[name]().items():
        if key == index_key():
            continue
        rig.put(key, body)
    rig.put(index_key(), BAD_STEP_FILES[name]()[index_key()])
    rig.write_end(JOB)
    results = timed(rig.deliver_all)
    assert all(r["action"] != "invalid" or r["kind"] != "index" for r in results)
    records = rig.records(JOB)
    assert sorted(records) == [0, 1, 2]
    bad = records[STEP]
    if "step_error" in bad:
        assert "000000000001" in bad["step_error"] or "step 1" in bad["step_error"]
    else:  # a value the format reader could still make sense of (e.g. skipped tensor)
        assert not bad.get("error")
    status, details = rig.statuses(JOB)["VanishingGradient"]
    assert status == "IssuesFound", details  # step 2's issue was found: the data did not turn the rule off
    rig.tally(JOB, [0, 1, 2])
    rig.pump()
    rig.count_duplicates(rig.events())


BAD_KEYS = {
    "45-digit step": (f"{KEY_ROOT}/index/000000000/{'9' * 45}_worker_0.json", "more than 12 digits"),
    "wrong folder": (f"{KEY_ROOT}/index/000000004/000000000001_worker_0.json", "canonical place"),
    "unpadded step": (f"{KEY_ROOT}/index/000000000/1_worker_0.json", "canonical place"),
    "dot-dot segment": (f"{KEY_ROOT}/index/../index/000000000/000000000001_worker_0.json", "path segments"),
    "encoded slash": (f"{KEY_ROOT}/index/000000000%2F000000000001_worker_0.json", "not an index"),
    "control character worker": (f"{KEY_ROOT}/index/000000000/000000000001_w\x00rk.json", "control"),
    "bidi override worker": (f"{KEY_ROOT}/index/000000000/000000000001_\u202ekrow.json", "control"),
    "overlong worker": (f"{KEY_ROOT}/index/000000000/000000000001_{'w' * 2000}.json", "too long"),
}


@pytest.mark.parametrize("name", sorted(BAD_KEYS))
def test_a_hostile_index_key_is_rejected_with_its_reason(rig: Rig, name: str) -> None:
    SCOREBOARD.add(hostile=1)
    healthy_job(rig)
    rig.deliver_all()
    key, why = BAD_KEYS[name]
    result = timed(lambda: rig.deliver_key(key.replace("%2F", "%252F")))  # the key arrives with "%2F" in it
    if why == "not an index":
        assert (result["kind"], result["action"]) == ("ignored", "ignored")
    else:
        assert (result["kind"], result["action"]) == ("index", "invalid")
    assert why in result["reason"]
    assert rig.statuses(JOB)["VanishingGradient"][0] == "IssuesFound"
    rig.tally(JOB, [0, 2])


def test_objects_of_a_foreign_bucket_are_ignored(rig: Rig) -> None:
    SCOREBOARD.add(hostile=1)
    healthy_job(rig)
    rig.deliver_all()
    result = rig.deliver_key(index_key(), bucket="someone-elses-bucket")
    assert result["action"] == "ignored"
    assert "not the trial bucket" in result["reason"]
    rig.tally(JOB, [0, 2])


BAD_COLLECTIONS = {
    "collections over the read cap": b"{" + b" " * (2 * 1024 * 1024) + b"}",
    "collections not JSON": b"\x00\x01garbage",
    "collections with 1e400 workers": json.dumps({"collections": [], "num_workers": 1e400}).encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_COLLECTIONS))
def test_a_hostile_collections_file_is_recorded_on_the_job(rig: Rig, name: str) -> None:
    SCOREBOARD.add(hostile=1)
    rig.register(JOB)
    rig.put(f"{KEY_ROOT}/collections/000000000/worker_0_collections.json", BAD_COLLECTIONS[name])
    (note,) = rig.notes()
    result = timed(lambda: rig.deliver(note))
    assert (result["kind"], result["action"]) == ("collections", "invalid")
    assert "collections" in result["reason"]
    status, details = rig.statuses(JOB)["VanishingGradient"]  # settled with the file's reason (#34 N6)
    assert status == "Error"
    assert "worker_0_collections.json" in details


BAD_JOB_FILES = {
    "deeply nested job file": b'{"TrainingJobName": "j", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "gigantic job file": b'{"TrainingJobName": "j", "x": "' + b"a" * (2 * 1024 * 1024) + b'"}',
    "job file NumWorkers 1e400": b'{"TrainingJobName": "j", "NumWorkers": 1e400}',
    "job file not JSON": b"\xff\xfe not json",
}


@pytest.mark.parametrize("name", sorted(BAD_JOB_FILES))
def test_a_hostile_job_file_is_recorded_not_raised(rig: Rig, name: str) -> None:
    SCOREBOARD.add(hostile=1)
    rig.put(f"{KEY_ROOT}/tornasole_job.json", BAD_JOB_FILES[name])
    (note,) = rig.notes()
    result = timed(lambda: rig.deliver(note))
    assert (result["kind"], result["action"]) == ("job_config", "invalid")
    assert "tornasole_job.json: cannot register the job" in result["reason"]


def custom_rule(name: str, source: str) -> Any:
    return Rule.custom(
        name=name,
        image_uri="tornasole",
        instance_type="ml.t3.medium",
        volume_size_in_gb=1,
        source=source,
        rule_to_invoke="Hostile",
        rule_parameters={},
    )


RULE_HEADER = (
    "from smdebug.rules import Rule\n\nclass Hostile(Rule):\n    def __init__(self, base_trial):\n"
    "        super().__init__(base_trial)\n\n    def invoke_at_step(self, step):\n"
)
HOSTILE_RULE_BODIES = {
    "rule that loops forever": "        while True:\n            pass\n",
    "rule that allocates without bound": "        hoard = []\n        while True:\n"
    "            hoard.append(bytearray(8 * 1024 * 1024))\n",
    "rule that calls sys.exit": "        import sys\n        sys.exit(0)\n",
    "rule that raises KeyboardInterrupt": "        raise KeyboardInterrupt\n",
    "rule that recurses without end": "        return self.invoke_at_step(step)\n",
    "rule that reads another job's trial": "        from tornasole.storage import get_storage\n"
    "        path = 's3://tornasole-trials/jobs/other/x'\n"
    "        return bool(get_storage(path).read(path))\n",
    "rule with a catastrophic regex": "        import re\n"
    "        return bool(re.match('(a+)+$', 'a' * 22 + '!'))\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_RULE_BODIES))
def test_a_hostile_rule_file_costs_only_its_own_status(rig: Rig, name: str, monkeypatch: Any) -> None:
    from tornasole.evaluator import runner
    from tornasole.evaluator.sandbox.isolation import Budget

    SCOREBOARD.add(hostile=1)
    # 2 s: the well-behaved rule runs under the same budget, and at 1 s it ran out on a loaded 2-core machine
    monkeypatch.setattr(runner.StepRunner, "__init__", _budgeted_init(Budget(2.0, 128 * 1024 * 1024)))
    rig.put("rules/hostile.py", (RULE_HEADER + HOSTILE_RULE_BODIES[name]).encode())
    healthy_job(rig, [{**VG_RULE}, custom_rule("Hostile", f"{RULES_PREFIX}hostile.py")])
    rig.write_end(JOB)
    timed(rig.deliver_all)
    got = rig.statuses(JOB)
    assert got["VanishingGradient"][0] == "IssuesFound"
    assert got["Hostile"][0] in ("Error", "IssuesFound", "NoIssuesFound")
    if got["Hostile"][0] == "Error":  # its own failure, or every step it tried unreadable to it
        assert got["Hostile"][1].startswith("Hostile: ")
    rig.tally(JOB, [0, 2])


VG_RULE = {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "0.001"}}
REFUSED_SOURCES = {
    "rule source under the trials prefix": f"s3://{BUCKET}/jobs/{JOB}/rule.py",
    "rule source with a dot-dot segment": f"{RULES_PREFIX}../jobs/{JOB}/rule.py",
    "rule source in another bucket": "s3://attacker-bucket/rules/rule.py",
    "rule source sharing the prefix's spelling": f"s3://{BUCKET}/rules-evil/rule.py",
    "rule source that is not s3": "file:///etc/passwd",
}


@pytest.mark.parametrize("name", sorted(REFUSED_SOURCES))
def test_rule_code_outside_the_rule_prefix_is_never_loaded(rig: Rig, name: str) -> None:
    SCOREBOARD.add(hostile=1)
    source = REFUSED_SOURCES[name]
    if source.startswith(f"s3://{BUCKET}/"):
        rig.put(source.removeprefix(f"s3://{BUCKET}/"), (RULE_HEADER + "        return True\n").encode())
    healthy_job(rig, [{**VG_RULE}, custom_rule("Hostile", source)])
    rig.write_end(JOB)
    rig.deliver_all()
    got = rig.statuses(JOB)
    assert got["Hostile"][0] == "Error"
    assert "custom rule source" in got["Hostile"][1]
    assert got["VanishingGradient"][0] == "IssuesFound"
    assert all(not r.get("fired") for r in rig.records(JOB, "Hostile").values())


def _budgeted_init(budget: Any) -> Callable[..., None]:
    from tornasole.evaluator.runner import StepRunner

    original = StepRunner.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("budget", budget)
        original(self, *args, **kwargs)

    return init


def test_trial_path_helper_is_the_rig_s() -> None:
    assert trial(JOB) == f"s3://{BUCKET}/{KEY_ROOT}"
