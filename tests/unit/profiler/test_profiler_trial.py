"""ProfilerTrial and TrainingJob wait for a live job's files, and end when its end marker says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from profiler_fixture import EXPECTED, ROOT, upload_tree

from tornasole.exceptions import NoMoreProfilerData
from tornasole.profiler.analysis import ProfilerTrial, TrainingJob
from tornasole.profiler.format import paths, system_records
from tornasole.profiler.format.system_records import SystemRecord


class FakeTime:
    """A clock that moves only when slept on; each sleep may also run what the job does meanwhile."""

    def __init__(self, on_sleep=None) -> None:
        self.now = 0.0
        self.sleeps = 0
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        if self.on_sleep is not None:
            self.on_sleep(self.sleeps)


def _system_file(root: Path, start: int) -> None:
    target = root / paths.system_file_name(start)
    target.parent.mkdir(parents=True, exist_ok=True)
    record = SystemRecord("cpu", "cpu0", system_records.CPU_UTILIZATION, 1.0, "algo-1", start + 0.5)
    target.write_text(system_records.encode_record(record))


def test_trial_path_or_profiler_root_both_work_and_know_the_first_file() -> None:
    for path in (str(ROOT), str(ROOT.parent)):
        trial = ProfilerTrial("job", path, None)
        assert trial.path == str(ROOT)
        framework = trial.framework_metrics_reader
        assert trial.first_timestamp == min(
            EXPECTED["first_system_us"], framework.get_timestamp_of_first_available_file()
        )
        assert not trial.job_finished()
        assert len(trial.get_system_metrics(0, 4 * 10**15)) == 216
        assert len(trial.get_framework_metrics(0, 4 * 10**15)) == 88


def test_trial_waits_for_the_first_file_of_a_live_job(tmp_path: Path) -> None:
    root = tmp_path / "job" / "profiler-output"
    time = FakeTime(on_sleep=lambda n: _system_file(root, 1_700_000_000) if n == 3 else None)
    out = str(tmp_path / "rule-out")
    trial = ProfilerTrial("job", str(tmp_path / "job"), out, sleep=time.sleep, clock=time.clock)
    assert time.sleeps == 3
    assert trial.first_timestamp == 1_700_000_000 * 10**6
    assert (tmp_path / "rule-out" / ".sagemaker-ignore").is_dir()


def test_a_job_that_ended_without_profiler_data_raises_instead_of_polling_forever(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / paths.END_MARKER).write_text("")
    time = FakeTime()
    with pytest.raises(NoMoreProfilerData):
        ProfilerTrial("job", str(tmp_path / "job"), None, sleep=time.sleep, clock=time.clock)
    assert time.sleeps == 0


def test_waiting_is_bounded_by_max_wait_seconds(tmp_path: Path) -> None:
    time = FakeTime()
    with pytest.raises(TimeoutError, match="waited 30 s for the first profiler file"):
        ProfilerTrial(
            "job",
            str(tmp_path),
            None,
            sleep=time.sleep,
            clock=time.clock,
            poll_seconds=10,
            max_wait_seconds=30,
        )
    assert time.sleeps == 3


def test_wait_for_data_returns_when_files_arrive_and_raises_after_the_end(tmp_path: Path) -> None:
    job = tmp_path / "job"
    root = job / "profiler-output"
    _system_file(root, 1_700_000_000)

    def job_goes_on(n: int) -> None:
        if n == 2:
            _system_file(root, 1_700_000_060)
        if n == 4:
            (job / paths.END_MARKER).write_text("")

    time = FakeTime(on_sleep=job_goes_on)
    trial = ProfilerTrial("job", str(job), None, sleep=time.sleep, clock=time.clock)
    trial.wait_for_data(1_700_000_060 * 10**6, 1_700_000_000 * 10**6)
    assert time.sleeps == 2
    trial.wait_for_data(1_700_000_120 * 10**6, 1_700_000_030 * 10**6)  # returns at the end marker
    assert time.sleeps == 4
    assert trial.job_finished()
    with pytest.raises(NoMoreProfilerData, match="no more profiler data after 1700000180000000"):
        trial.wait_for_data(1_700_000_180 * 10**6, 1_700_000_120 * 10**6)


def test_sagemaker_s_end_markers_under_system_and_framework_count(tmp_path: Path) -> None:
    shutil.copytree(ROOT, tmp_path / "p")
    trial = ProfilerTrial("job", str(tmp_path / "p"), None)
    assert not trial.job_finished()
    (tmp_path / "p" / "framework" / paths.END_MARKER).write_text("")
    assert trial.job_finished()


def test_training_job_on_s3_waits_then_hands_out_its_readers(s3_bucket: str, tmp_path: Path) -> None:
    uri = f"s3://{s3_bucket}/jobs/job-7"
    uploaded = []

    def upload(n: int) -> None:
        if n == 1 and not uploaded:
            uploaded.append(upload_tree(ROOT, s3_bucket, "jobs/job-7"))

    time = FakeTime(on_sleep=upload)
    job = TrainingJob(uri, sleep=time.sleep, clock=time.clock)
    assert job.name == "job-7"
    assert job.describe_training_job()["TrainingJobStatus"] == "InProgress"
    job.wait_for_sys_profiling_data_to_be_available()
    job.wait_for_framework_profiling_data_to_be_available()
    assert job.profiler_s3_output_path == uploaded[0]
    system = job.get_systems_metrics_reader()
    assert system.get_timestamp_of_latest_available_file() == EXPECTED["latest_system_us"]
    assert len(job.get_framework_metrics_reader().get_events(0, 4 * 10**15)) == 88


def test_training_job_ends_its_wait_at_the_end_marker_or_the_limit(tmp_path: Path) -> None:
    time = FakeTime()
    job = TrainingJob(str(tmp_path / "job"), sleep=time.sleep, clock=time.clock, max_wait_seconds=25)
    with pytest.raises(TimeoutError, match="waited 25 s for the system"):
        job.wait_for_sys_profiling_data_to_be_available()
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / paths.END_MARKER).write_text("")
    assert job.describe_training_job()["TrainingJobStatus"] == "Completed"
    with pytest.raises(NoMoreProfilerData):
        job.wait_for_framework_profiling_data_to_be_available()
