"""The profiler writing to S3 (moto server): each closed file arrives as one whole object, once."""

from __future__ import annotations

import time

from tornasole import Hook
from tornasole.aws.clients import s3_client
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.sampling.config import ProfilerConfig


def _objects(bucket: str, prefix: str) -> dict[str, bytes]:
    client = s3_client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def _decode(key: str, body: bytes) -> int:
    """The number of records or events in one object; raises if the object is not a whole file."""
    if paths.profiler_file_kind(key) == "system":
        return len(system_records.decode_records(body, source=key))
    assert paths.profiler_file_kind(key) == "framework", key
    text = body.decode("utf-8")
    assert text.endswith("]")  # a cut-short trace file would not be JSON at all
    return len(trace_events.decode_trace_file(text, source=key).events)


def test_closed_files_appear_as_whole_objects(s3_bucket: str) -> None:
    trial = f"s3://{s3_bucket}/jobs/run-1"
    prefix = "jobs/run-1/profiler-output/"
    config = ProfilerConfig(interval_ms=50, rotate_file_close_interval_s=1.0)
    hook = Hook(trial, profiler=config)
    seen_during: dict[str, bytes] = {}
    deadline = time.monotonic() + 3.5
    step = 0
    while time.monotonic() < deadline:
        hook.save_scalar("loss", 1.0 / (step + 1))
        hook.next_step()
        step += 1
        time.sleep(0.02)
        if step % 25 == 0:
            for key, body in _objects(s3_bucket, prefix).items():
                _decode(key, body)  # every object listed mid-run is already a whole file
                seen_during.setdefault(key, body)
    hook.close()
    final = _objects(s3_bucket, prefix)
    assert seen_during, "no file was closed while training ran"
    for key, body in seen_during.items():
        assert final[key] == body  # a closed file is never rewritten
    written = {p.removeprefix(f"s3://{s3_bucket}/") for p in hook.profiler_recorder.files_written}
    assert set(final) == written  # one object per closed file, nothing else
    kinds = {paths.profiler_file_kind(key) for key in final}
    assert kinds == {"system", "framework"}
    steps = [
        e
        for key, body in final.items()
        if paths.profiler_file_kind(key) == "framework"
        for e in trace_events.decode_trace_file(body).events
    ]
    assert sorted(int(e.args["step_num"]) for e in steps) == list(range(step + 1))
    assert sum(_decode(k, b) for k, b in final.items() if k in written) > 0
    # the tensors went next to it, as ever
    assert any(k.startswith("jobs/run-1/events/") for k in _objects(s3_bucket, "jobs/run-1/"))
