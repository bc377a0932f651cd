"""ProfilerConfig: one object from the hook argument, $TORNASOLE_PROFILER, profilerconfig.json or the SDK."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tornasole import Hook
from tornasole.exceptions import ConfigurationError
from tornasole.profiler.sampling.config import (
    DEFAULT_CLOSE_INTERVAL_S,
    DEFAULT_MAX_FILE_SIZE,
    ProfilerConfig,
    load_profiler_config_file,
    resolve_profiler_config,
)


def _file(tmp_path: Path, body: object, name: str = "profilerconfig.json") -> str:
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def test_defaults_are_sagemakers() -> None:
    config = ProfilerConfig()
    assert config.interval_ms == 500
    assert config.rotate_max_file_size_bytes == DEFAULT_MAX_FILE_SIZE == 10 * 1024 * 1024
    assert config.rotate_file_close_interval_s == DEFAULT_CLOSE_INTERVAL_S == 60
    assert config.file_open_fail_threshold == 50


def test_sagemakers_file_with_every_parameter(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {
            "ProfilingIntervalInMilliseconds": 100,
            "ProfilingParameters": {
                "ProfilerEnabled": True,
                "LocalPath": "/tmp/prof",
                "RotateMaxFileSizeInBytes": 4096,
                "RotateFileCloseIntervalInSeconds": 0.5,
                "FileOpenFailThreshold": 2,
                "DataloaderProfilingConfig": '{"StartStep": 5, "NumSteps": 3}',
            },
        },
    )
    config = load_profiler_config_file(path)
    assert config == ProfilerConfig(
        output_path="/tmp/prof",
        interval_ms=100,
        rotate_max_file_size_bytes=4096,
        rotate_file_close_interval_s=0.5,
        file_open_fail_threshold=2,
    )


def test_keys_are_case_insensitive_and_values_may_be_strings(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {
            "profilingparameters": {
                "PROFILERENABLED": "True",
                "localPath": "/tmp/x",
                "rotateMaxFileSizeInBYTES": "2048",
                "RotatefileCloseintervalInseconds": "1",
                "FILEopenFAILthreshold": "5",
                "detailedProfilingconfig": '{"startstep": "2"}',
            }
        },
    )
    config = load_profiler_config_file(path)
    assert (config.output_path, config.rotate_max_file_size_bytes, config.rotate_file_close_interval_s) == (
        "/tmp/x",
        2048,
        1.0,
    )
    assert config.file_open_fail_threshold == 5


def test_the_sdk_payload_writes_next_to_the_job(tmp_path: Path) -> None:
    payload = {
        "S3OutputPath": "s3://bucket/jobs",
        "ProfilingIntervalInMilliseconds": 1000,
        "ProfilingParameters": {"DataloaderProfilingConfig": '{"StartStep": 1}'},
    }
    config = resolve_profiler_config(payload, env={"TRAINING_JOB_NAME": "job-1"})
    assert config.output_path == "s3://bucket/jobs/job-1/profiler-output"
    assert config.interval_ms == 1000
    assert ProfilerConfig.parse({"S3OutputPath": "s3://b"}).enabled


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (
            {"ProfilingParameters": {"RotateMaxFileSizeInBytes": "ten"}},
            "ProfilingParameters.RotateMaxFileSizeInBytes",
        ),
        (
            {"ProfilingParameters": {"RotateMaxFileSizeInBytes": 10}},
            "ProfilingParameters.RotateMaxFileSizeInBytes",
        ),
        ({"ProfilingParameters": {"ProfilerEnabled": "maybe"}}, "ProfilingParameters.ProfilerEnabled"),
        ({"ProfilingParameters": {"LocalPath": ""}}, "ProfilingParameters.LocalPath"),
        ({"ProfilingParameters": {"DataloaderProfilingConfig": "{nope"}}, "DataloaderProfilingConfig"),
        (
            {"ProfilingParameters": {"X": 1}, "ProfilingIntervalInMilliseconds": 0},
            "ProfilingIntervalInMilliseconds",
        ),
        ({"ProfilingParameters": []}, "ProfilingParameters"),
        ({"S3OutputPath": "bucket/no-scheme"}, "S3OutputPath"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path: Path, body: dict, key: str) -> None:
    path = _file(tmp_path, body)
    with pytest.raises(ConfigurationError) as raised:
        load_profiler_config_file(path)
    assert path in str(raised.value)
    assert key in str(raised.value)


def test_a_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "{1, 2, 3, 4, 5}")
    with pytest.raises(ConfigurationError, match="profilerconfig.json: the profiler config is not JSON"):
        load_profiler_config_file(path)


def test_unknown_keys_are_logged_and_ignored_as_in_the_hook_config(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="tornasole")
    path = _file(tmp_path, {"ProfilingParameters": {"ProfilerEnabled": True, "Colour": "red"}, "Extra": 1})
    assert load_profiler_config_file(path).enabled
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "Colour" in messages
    assert "Extra" in messages
    caplog.clear()
    assert ProfilerConfig.parse({"interval_ms": 200, "colour": 1}).interval_ms == 200
    assert "colour" in caplog.text


def test_disabled_or_empty_parameters_mean_off(tmp_path: Path) -> None:
    for body in (
        {"ProfilingParameters": {"ProfilerEnabled": False}},
        {"ProfilingParameters": {}},
        {"DisableProfiler": True, "ProfilingParameters": {"ProfilerEnabled": True}},
    ):
        path = _file(tmp_path, body)
        assert resolve_profiler_config(env={"SMPROFILER_CONFIG_PATH": path}) is None


def test_the_order_argument_then_environment_then_file(tmp_path: Path) -> None:
    path = _file(tmp_path, {"ProfilingParameters": {"ProfilerEnabled": True, "LocalPath": "/tmp/from-file"}})
    assert resolve_profiler_config(env={"SMPROFILER_CONFIG_PATH": path}).output_path == "/tmp/from-file"
    env = {"SMPROFILER_CONFIG_PATH": path, "TORNASOLE_PROFILER": '{"interval_ms": 200}'}
    assert resolve_profiler_config(env=env).interval_ms == 200
    assert resolve_profiler_config(False, env=env) is None
    assert resolve_profiler_config(env={"TORNASOLE_PROFILER": "1"}) == ProfilerConfig()
    assert resolve_profiler_config(env={"TORNASOLE_PROFILER": "off"}) is None
    assert resolve_profiler_config(env={"SMPROFILER_CONFIG_PATH": str(tmp_path / "absent.json")}) is None


def test_a_bad_environment_variable_names_itself() -> None:
    with pytest.raises(ConfigurationError, match=r"\$TORNASOLE_PROFILER"):
        resolve_profiler_config(env={"TORNASOLE_PROFILER": "sometimes"})
    with pytest.raises(ConfigurationError, match=r"\$TORNASOLE_PROFILER: interval_ms=5"):
        resolve_profiler_config(env={"TORNASOLE_PROFILER": '{"interval_ms": 5}'})


def test_the_hook_argument_is_validated_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"Hook\(profiler=...\): rotate_file_close_interval_s"):
        Hook(str(tmp_path), profiler={"rotate_file_close_interval_s": -1})
    with pytest.raises(ConfigurationError, match="interval_ms"):
        ProfilerConfig(interval_ms=1)
    hook = Hook(str(tmp_path), profiler=True, enabled=False)
    assert hook.profiler_config is None  # a disabled hook profiles nothing either


def test_a_profiling_hook_has_no_default_configuration(tmp_path: Path) -> None:
    quiet, profiling = Hook(str(tmp_path / "a"), profiler=False), Hook(str(tmp_path / "b"), profiler=True)
    assert quiet.has_default_configuration()
    assert profiling.has_default_hook_configuration()
    assert not profiling.has_default_configuration()  # smdebug's answer with its profiler on
    quiet.close()
    profiling.close()
