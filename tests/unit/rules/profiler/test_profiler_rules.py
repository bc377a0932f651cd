"""Each profiler rule on small crafted record sequences: fires, stays quiet, honours its parameters,
keeps a bounded state that round-trips through JSON (what the evaluator stores between files)."""

from __future__ import annotations

import json

import pytest
from profiler_records import T0, sample, steps_file, system_file

from tornasole.exceptions import RuleParameterError
from tornasole.profiler.format.trace_events import TraceEvent, TraceFile
from tornasole.rules.profiler import FRAMEWORK, PROFILER_RULES, SYSTEM, create_profiler_rule
from tornasole.rules.profiler.base import MAX_SERIES


def run(rule, files):
    """Feed ``(kind, payload)`` files one at a time, the state through JSON between them (as stored)."""
    state = rule.initial_state()
    for kind, payload in files:
        rule.update(state, kind, payload)
        state = json.loads(json.dumps(state))
    return rule.finding(state), state


def system_files(n_files, per_file, make):
    return [(SYSTEM, system_file([make(f * per_file + i) for i in range(per_file)])) for f in range(n_files)]


# -- names, parameters, defaults ------------------------------------------------------------------------
def test_the_twelve_rules_of_sagemaker():
    assert sorted(PROFILER_RULES) == [
        "BatchSize",
        "CPUBottleneck",
        "Dataloader",
        "GPUMemoryIncrease",
        "IOBottleneck",
        "LoadBalancing",
        "LowGPUUtilization",
        "MaxInitializationTime",
        "OverallFrameworkMetrics",
        "OverallSystemUsage",
        "ProfilerReport",
        "StepOutlier",
    ]


def test_defaults_are_the_sdks():
    assert create_profiler_rule("CPUBottleneck").params == {
        "threshold": 50.0,
        "gpu_threshold": 10.0,
        "cpu_threshold": 90.0,
        "patience": 1000,
        "scan_interval_us": 60_000_000,
    }
    assert create_profiler_rule("LowGPUUtilization").params["window"] == 500
    assert create_profiler_rule("GPUMemoryIncrease").params == {
        "increase": 5.0,
        "patience": 1000,
        "window": 10,
        "scan_interval_us": 60_000_000,
    }
    assert create_profiler_rule("StepOutlier").params["mode"] is None
    assert create_profiler_rule("MaxInitializationTime").params["threshold"] == 20.0
    assert create_profiler_rule("Dataloader").params["max_threshold"] == 200.0
    assert create_profiler_rule("LoadBalancing").params["threshold"] == 0.5


@pytest.mark.parametrize(
    ("name", "params", "words"),
    [
        ("CPUBottleneck", {"threshold": "150"}, "'threshold'"),
        ("CPUBottleneck", {"treshold": "50"}, "'treshold'"),
        ("LowGPUUtilization", {"window": "0"}, "'window'"),
        ("LowGPUUtilization", {"window": "100000"}, "bounded"),
        ("StepOutlier", {"n_outliers": "many"}, "'n_outliers'"),
        ("ProfilerReport", {"CPUBottleneck_treshold": "5"}, "CPUBottleneck"),
        ("ProfilerReport", {"Nope_threshold": "5"}, "Nope_threshold"),
        ("ProfilerReport", {"threshold": "5"}, "<RuleName>_<parameter>"),
        ("NoSuchRule", {}, "NoSuchRule"),
    ],
)
def test_bad_parameters_name_the_rule_and_parameter(name, params, words):
    with pytest.raises(RuleParameterError) as err:
        create_profiler_rule(name, params)
    assert words in str(err.value)


# -- system rules -------------------------------------------------------------------------------------------
def test_cpu_bottleneck_fires_when_the_gpu_idles_while_the_cpu_is_busy():
    rule = create_profiler_rule("CPUBottleneck", {"patience": "20"})
    busy = system_files(4, 10, lambda i: sample(i * 0.5, cpu=95, gpus={"gpu0": 2}))
    found, _ = run(rule, busy)
    assert found.fired
    assert "40 of 40" in found.details
    assert "Suggested fix" in found.details
    healthy = system_files(4, 10, lambda i: sample(i * 0.5, cpu=95, gpus={"gpu0": 90}))
    assert not run(rule, healthy)[0].fired


def test_cpu_bottleneck_waits_for_patience_and_honours_threshold():
    rule = create_profiler_rule("CPUBottleneck", {"patience": "100"})
    busy = system_files(4, 10, lambda i: sample(i * 0.5, cpu=95, gpus={"gpu0": 2}))
    found, _ = run(rule, busy)
    assert not found.fired
    assert "patience" in found.details
    # 30% of samples bottlenecked: quiet at the default threshold 50, fires at 20
    mixed = system_files(1, 10, lambda i: sample(i, cpu=95 if i < 3 else 20, gpus={"gpu0": 2}))
    assert not run(create_profiler_rule("CPUBottleneck", {"patience": "5"}), mixed)[0].fired
    assert run(create_profiler_rule("CPUBottleneck", {"patience": "5", "threshold": "20"}), mixed)[0].fired


def test_cpu_bottleneck_without_a_gpu_judges_nothing():
    rule = create_profiler_rule("CPUBottleneck", {"patience": "1"})
    found, state = run(rule, system_files(2, 10, lambda i: sample(i, cpu=99)))
    assert not found.fired
    assert state.get("datapoints", 0) == 0


def test_io_bottleneck():
    rule = create_profiler_rule("IOBottleneck", {"patience": "10"})
    assert run(rule, system_files(2, 10, lambda i: sample(i, io_wait=80, gpus={"gpu0": 1})))[0].fired
    assert not run(rule, system_files(2, 10, lambda i: sample(i, io_wait=5, gpus={"gpu0": 1})))[0].fired


def test_low_gpu_utilization_under_use_and_fluctuation():
    rule = create_profiler_rule("LowGPUUtilization", {"patience": "20", "window": "50"})
    low = run(rule, system_files(3, 10, lambda i: sample(i, gpus={"gpu0": 30})))[0]
    assert low.fired
    assert "under-used" in low.details
    swinging = run(rule, system_files(3, 10, lambda i: sample(i, gpus={"gpu0": 95 if i % 4 else 0})))[0]
    assert swinging.fired
    assert "fluctuating" in swinging.details
    busy = run(rule, system_files(3, 10, lambda i: sample(i, gpus={"gpu0": 95})))[0]
    assert not busy.fired


def test_low_gpu_utilization_window_forgets_the_start():
    """Only the last ``window`` samples count: a slow start then a busy run is not under-use."""
    rule = create_profiler_rule("LowGPUUtilization", {"patience": "20", "window": "20"})
    files = system_files(3, 20, lambda i: sample(i, gpus={"gpu0": 5 if i < 20 else 95}))
    found, state = run(rule, files)
    assert not found.fired
    assert len(state["gpus"]["algo-1/gpu0"]["w"]) == 20


def test_batch_size_fires_when_everything_is_under_used():
    rule = create_profiler_rule("BatchSize", {"patience": "10", "window": "30"})
    small = run(
        rule, system_files(2, 10, lambda i: sample(i, cpu=20, gpus={"gpu0": 30}, gpu_memory={"gpu0": 10}))
    )
    assert small[0].fired
    assert "CPU p95 20%" in small[0].details
    busy_memory = system_files(2, 10, lambda i: sample(i, cpu=20, gpus={"gpu0": 30}, gpu_memory={"gpu0": 90}))
    assert not run(rule, busy_memory)[0].fired


def test_gpu_memory_increase():
    rule = create_profiler_rule("GPUMemoryIncrease", {"patience": "10", "window": "10"})
    growing = run(rule, system_files(4, 10, lambda i: sample(i, gpu_memory={"gpu0": 20 + i})))[0]
    assert growing.fired
    assert "rose" in growing.details
    flat = run(rule, system_files(4, 10, lambda i: sample(i, gpu_memory={"gpu0": 40 + (i % 3)})))[0]
    assert not flat.fired
    # the increase parameter: +10 points per window is allowed at increase=15
    allowed = create_profiler_rule("GPUMemoryIncrease", {"patience": "10", "window": "10", "increase": "15"})
    assert not run(allowed, system_files(4, 10, lambda i: sample(i, gpu_memory={"gpu0": 20 + i})))[0].fired


def test_load_balancing():
    rule = create_profiler_rule("LoadBalancing", {"patience": "10"})
    uneven = run(rule, system_files(2, 10, lambda i: sample(i, gpus={"gpu0": 95, "gpu1": 5})))[0]
    assert uneven.fired
    assert "gpu0" in uneven.details
    assert "gpu1" in uneven.details
    even = run(rule, system_files(2, 10, lambda i: sample(i, gpus={"gpu0": 90, "gpu1": 92})))[0]
    assert not even.fired


def test_overall_system_usage_summarises_and_never_fires():
    rule = create_profiler_rule("OverallSystemUsage")
    found, _ = run(rule, system_files(2, 10, lambda i: sample(i, cpu=i * 5, gpus={"gpu0": 80})))
    assert not found.fired
    assert found.values["algo-1/gpu0"]["p50"] == 80.0
    assert found.values["algo-1/cpu"]["p95"] == 90.0


# -- framework rules ----------------------------------------------------------------------------------------
def test_step_outlier():
    rule = create_profiler_rule("StepOutlier", {"n_outliers": "2"})
    durations = [0.1 + 0.001 * (i % 5) for i in range(60)]
    for i in (20, 30, 40, 50):
        durations[i] = 2.0
    files = [
        (FRAMEWORK, steps_file(durations[k : k + 15], first_step=k, start_s=k)) for k in range(0, 60, 15)
    ]
    found, _ = run(rule, files)
    assert found.fired
    assert "4 step-time outliers" in found.details
    calm = [(FRAMEWORK, steps_file([0.1 + 0.001 * (i % 5) for i in range(60)]))]
    assert not run(rule, calm)[0].fired
    # mode: the outliers are TRAIN steps, so an EVAL-only rule sees none
    assert not run(create_profiler_rule("StepOutlier", {"n_outliers": "2", "mode": "EVAL"}), files)[0].fired


def test_max_initialization_time():
    rule = create_profiler_rule("MaxInitializationTime", {"threshold": "1"})
    early_system = (SYSTEM, system_file([sample(0.0)]))
    late_step = (FRAMEWORK, steps_file([0.1], start_s=120.0))
    found = run(rule, [early_system, late_step])[0]
    assert found.fired
    assert "2.0 min" in found.details
    soon = (FRAMEWORK, steps_file([0.1], start_s=10.0))
    assert not run(rule, [early_system, soon])[0].fired
    # no step at all, profiling for 3 minutes: fires while waiting
    waiting = [(SYSTEM, system_file([sample(0.0)])), (SYSTEM, system_file([sample(180.0)]))]
    assert run(rule, waiting)[0].fired


def test_dataloader_counts_parallel_workers_against_cores():
    origin = int(T0 * 1e6)

    def workers(n):
        events = tuple(
            TraceEvent("DataLoaderWorker", "DataLoaderWorker", origin + 1000 * i, 100_000, tid=i)
            for i in range(n)
        )
        return (FRAMEWORK, TraceFile(origin, events))

    cores = (SYSTEM, system_file([sample(0.0, cores=8)]))
    rule = create_profiler_rule("Dataloader")
    too_few = run(rule, [cores, workers(2)])[0]
    assert too_few.fired
    assert "2 parallel data-loader workers for 8 cores" in too_few.details
    assert not run(rule, [cores, workers(8)])[0].fired
    assert run(rule, [cores, workers(20)])[0].fired  # 250% > max_threshold 200
    assert not run(rule, [cores, (FRAMEWORK, steps_file([0.1]))])[
        0
    ].fired  # no worker events: nothing to count


def test_overall_framework_metrics_breaks_down_step_time():
    origin = int(T0 * 1e6)
    events = (
        TraceEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", origin, 100_000, args={"step_num": "0"}),
        TraceEvent("Forward", "Forward", origin, 30_000),
        TraceEvent("Backward(post-forward)", "Backward(post-forward)", origin + 30_000, 60_000),
    )
    found, _ = run(create_profiler_rule("OverallFrameworkMetrics"), [(FRAMEWORK, TraceFile(origin, events))])
    assert not found.fired
    assert found.values["steps"] == 1
    assert found.values["Forward_s"] == 0.03
    assert "Backward(post-forward) 60%" in found.details


# -- ProfilerReport -----------------------------------------------------------------------------------------
def test_profiler_report_aggregates_and_passes_parameters():
    files = system_files(2, 10, lambda i: sample(i, cpu=95, gpus={"gpu0": 2}))
    quiet = run(create_profiler_rule("ProfilerReport"), files)[0]  # patience 1000: nothing judged yet
    assert not quiet.fired
    report = create_profiler_rule(
        "ProfilerReport", {"CPUBottleneck_patience": "10", "lowgpuutilization_patience": "10"}
    )
    found = run(report, files)[0]
    assert found.fired
    assert found.values["CPUBottleneck"]["fired"]
    assert found.values["LowGPUUtilization"]["fired"]
    assert not found.values["IOBottleneck"]["fired"]
    assert "2 of 11 rules found issues" in found.details


# -- bounded state ---------------------------------------------------------------------------------
def test_state_stays_bounded_over_an_hour_of_files():
    """One hour at 500 ms (7,200 samples, 8 cores + 1 GPU): ProfilerReport's whole state stays small, and
    an hour of the same as another hour leaves it the same size."""
    report = create_profiler_rule("ProfilerReport")
    state = report.initial_state()
    sizes = []
    for f in range(60):
        records = system_file(
            [
                sample(f * 60 + i * 0.5, cpu=60, gpus={"gpu0": 70}, gpu_memory={"gpu0": 30}, cores=8)
                for i in range(120)
            ]
        )
        report.update(state, SYSTEM, records)
        report.update(state, FRAMEWORK, steps_file([0.25] * 240, first_step=f * 240, start_s=f * 60))
        sizes.append(len(json.dumps(state)))
    assert sizes[-1] < 64 * 1024
    assert sizes[-1] - sizes[20] < 64  # grows no more once the windows are full (counters may gain digits)


def test_series_beyond_the_cap_are_counted_not_kept():
    rule = create_profiler_rule("LowGPUUtilization", {"patience": "1"})
    gpus = {f"gpu{i}": 50.0 for i in range(MAX_SERIES + 10)}
    _, state = run(rule, [(SYSTEM, system_file([sample(0.0, gpus=gpus)]))])
    assert len(state["gpus"]) == MAX_SERIES
    assert state["dropped_series"] == 10


def test_an_instant_s_lines_a_few_milliseconds_apart_are_one_sample():
    """A sampler reads CPU, then the GPU: the GPU line of an instant is a few ms later than its CPU line."""
    from tornasole.profiler.format import system_records as sr
    from tornasole.profiler.format.system_records import SystemRecord
    from tornasole.rules.profiler.base import samples_of

    records = []
    for i in range(40):
        t = T0 + i * 0.1  # SageMaker's fastest interval, 100 ms
        records.append(SystemRecord("cpu", sr.CPU_TOTAL, sr.CPU_UTILIZATION, 95.0, "algo-1", t))
        records.append(SystemRecord("gpu", "gpu0", sr.GPU_UTILIZATION, 2.0, "algo-1", t + 0.004))
    samples = samples_of(records)
    assert len(samples) == 40
    assert all(s.cpu_total == 95.0 and s.gpu == {"gpu0": 2.0} for s in samples)
    found, _ = run(create_profiler_rule("CPUBottleneck", {"patience": "40"}), [(SYSTEM, records)])
    assert found.fired
