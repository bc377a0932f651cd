"""The profiler rules that read framework events (steps and their phases) from trace files.

Names, parameters and defaults are SageMaker's (AWS: "List of Debugger built-in profiler rules",
https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html, and the SDK's
``smdebug_rulesconfig.profiler_rules``); each criterion is re-implemented over a bounded state.
"""

from __future__ import annotations

from typing import Any

from tornasole.profiler.format import trace_events as te
from tornasole.profiler.format.trace_events import TraceFile
from tornasole.rules.params import Param
from tornasole.rules.profiler.base import (
    FRAMEWORK,
    SYSTEM,
    ProfilerFinding,
    ProfilerRule,
    Sample,
    scan_interval_param,
)
from tornasole.rules.profiler.sketches import welford_add, welford_std

__all__ = ["Dataloader", "MaxInitializationTime", "OverallFrameworkMetrics", "StepOutlier"]

#: Trace-event names of data-loader worker processes (PyTorch's worker loop, as smdebug records it).
DATALOADER_WORKER = "DataLoaderWorker"
#: Steps a mode's statistics need before a step can be called an outlier.
MIN_STEPS_FOR_OUTLIERS = 10
#: The least standard deviation assumed, relative to the mean step time.
MIN_RELATIVE_SPREAD = 0.01
#: Phases OverallFrameworkMetrics keeps apart; the rest are summed as "other".
MAX_PHASES = 32


def _steps(trace: TraceFile) -> list[te.TraceEvent]:
    return sorted(
        (e for e in trace.events if e.phase.startswith(te.STEP_PREFIX) or e.name.startswith(te.STEP_PREFIX)),
        key=lambda e: e.start_us,
    )


class StepOutlier(ProfilerRule):
    """Steps longer than ``stddev`` standard deviations above the mean of the earlier steps (of their mode),
    more than ``n_outliers`` times. AWS: StepOutlier
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "StepOutlier"
    KINDS = frozenset({FRAMEWORK})
    PARAMETERS = (
        Param("stddev", "float", "3", "standard deviations above the mean that make a step an outlier"),
        Param("mode", "str", None, "only steps of this mode (TRAIN, EVAL); default: every mode"),
        Param("n_outliers", "int", "10", "outliers tolerated before the rule fires"),
        scan_interval_param(),
    )
    POSITIVE_PARAMS = ("stddev", "n_outliers", "scan_interval_us")
    CAUSE = (
        "some steps stall: data-loading hiccups, checkpointing or evaluation inside the loop, or contention"
    )
    FIX = (
        "look at what runs at the outlier steps (checkpoint saves, validation, garbage collection) and move "
        "it off the training loop or make it asynchronous"
    )
    SUMMARY = "more than n_outliers steps longer than mean + stddev * std of their mode"

    def update_framework(self, state: dict[str, Any], trace: TraceFile) -> None:
        modes = state.setdefault("modes", {})
        wanted = (self.params["mode"] or "").upper()
        for event in _steps(trace):
            mode = (event.phase if event.phase.startswith(te.STEP_PREFIX) else event.name)[
                len(te.STEP_PREFIX) :
            ]
            if wanted and mode.upper() != wanted:
                continue
            if mode not in modes and len(modes) >= 8:
                continue
            slot = modes.setdefault(mode, {"stats": None, "outliers": 0, "worst": None})
            duration = event.duration_us / 1e6
            stats = slot["stats"]
            if stats and stats[0] >= MIN_STEPS_FOR_OUTLIERS:
                # a run of identical step times has no spread: 1% of the mean stands in for it
                spread = max(welford_std(stats), MIN_RELATIVE_SPREAD * stats[1])
                if duration > stats[1] + self.params["stddev"] * spread:
                    slot["outliers"] += 1
                    if slot["worst"] is None or duration > slot["worst"]["s"]:
                        slot["worst"] = {
                            "s": round(duration, 6),
                            "step": event.args.get("step_num"),
                            "mean": stats[1],
                        }
            slot["stats"] = welford_add(stats, duration)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        total = sum(m["outliers"] for m in state.get("modes", {}).values())
        values = {
            mode: {
                "steps": int(m["stats"][0]) if m["stats"] else 0,
                "mean_s": m["stats"][1] if m["stats"] else None,
                "outliers": m["outliers"],
                "worst": m["worst"],
            }
            for mode, m in state.get("modes", {}).items()
        }
        if total > self.params["n_outliers"]:
            worst = max(
                ((mode, m["worst"]) for mode, m in state["modes"].items() if m["worst"]),
                key=lambda x: x[1]["s"],
            )
            mode, w = worst
            return self.fire(
                f"{total} step-time outliers (> {self.params['n_outliers']} allowed); the longest, "
                f"{mode} step {w['step']}, took {w['s']:.3f}s against a mean of {w['mean']:.3f}s",
                values,
            )
        return self.quiet(f"{total} step-time outlier(s)", values)


class MaxInitializationTime(ProfilerRule):
    """The first step starts more than ``threshold`` minutes after profiling began (or has not started
    that long after it). AWS: MaxInitializationTime
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "MaxInitializationTime"
    KINDS = frozenset({FRAMEWORK, SYSTEM})
    PARAMETERS = (
        Param("threshold", "float", "20", "minutes the first step may take to start"),
        scan_interval_param(),
    )
    POSITIVE_PARAMS = ("threshold", "scan_interval_us")
    CAUSE = "start-up is slow: downloading the data set or model, building the data pipeline, compiling"
    FIX = "stream or cache the data set (Pipe/FastFile mode), pre-build indexes, or warm caches in the image"
    SUMMARY = "first step later than threshold minutes after the job started"

    @staticmethod
    def _seen(state: dict[str, Any], first_us: int, last_us: int) -> None:
        state["first_us"] = min(state.get("first_us", first_us), first_us)
        state["last_us"] = max(state.get("last_us", last_us), last_us)

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        if samples:
            self._seen(state, int(samples[0].timestamp * 1e6), int(samples[-1].timestamp * 1e6))

    def update_framework(self, state: dict[str, Any], trace: TraceFile) -> None:
        if trace.events:
            self._seen(state, min(trace.start_time_us, *(e.start_us for e in trace.events)), trace.end_us)
        steps = _steps(trace)
        if steps:
            state["first_step_us"] = min(state.get("first_step_us", steps[0].start_us), steps[0].start_us)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        limit_s = self.params["threshold"] * 60
        if "first_us" not in state:
            return self.quiet("no profiler data yet")
        if "first_step_us" in state:
            waited = (state["first_step_us"] - state["first_us"]) / 1e6
            values = {"initialization_s": round(waited, 3), "threshold_s": limit_s}
            if waited > limit_s:
                return self.fire(
                    f"the first step started {waited / 60:.1f} min after profiling began "
                    f"(> {self.params['threshold']:g} min)",
                    values,
                )
            return self.quiet(f"the first step started after {waited:.1f}s", values)
        waited = (state["last_us"] - state["first_us"]) / 1e6
        values = {"waiting_s": round(waited, 3), "threshold_s": limit_s}
        if waited > limit_s:
            return self.fire(
                f"no step after {waited / 60:.1f} min of profiling (> {self.params['threshold']:g} min)",
                values,
            )
        return self.quiet(f"no step yet after {waited:.1f}s", values)


class Dataloader(ProfilerRule):
    """The data-loader worker processes running in parallel, as a percentage of the node's CPU cores,
    below ``min_threshold`` or above ``max_threshold``. AWS: Dataloader
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html).

    Workers are the distinct threads/processes of ``DataLoaderWorker`` events that overlap in time; the
    cores are the ``cpu<n>`` devices of the system metrics. Without worker events there is nothing to
    count and the rule stays quiet."""

    NAME = "Dataloader"
    KINDS = frozenset({FRAMEWORK, SYSTEM})
    PARAMETERS = (
        Param("min_threshold", "float", "70", "fewest parallel workers, in percent of the cores"),
        Param("max_threshold", "float", "200", "most parallel workers, in percent of the cores"),
        scan_interval_param(),
    )
    POSITIVE_PARAMS = ("min_threshold", "max_threshold", "scan_interval_us")
    CAUSE = "the number of data-loader workers does not match the CPU cores (too few starve the GPU)"
    FIX = "set the data loader's num_workers near the number of vCPUs per GPU, and enable pin_memory"
    SUMMARY = "parallel data-loader workers outside min_threshold..max_threshold % of the cores"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        for s in samples:
            if s.cores:
                state["cores"] = max(state.get("cores", 0), len(s.cores))

    def update_framework(self, state: dict[str, Any], trace: TraceFile) -> None:
        intervals = sorted(
            (e.start_us, e.end_us, e.tid)
            for e in trace.events
            if e.name.startswith(DATALOADER_WORKER) or e.phase.startswith(DATALOADER_WORKER)
        )
        if not intervals:
            return
        active: list[tuple[int, int]] = []  # (end, tid)
        best = 0
        for start, end, tid in intervals:
            active = [(e, t) for e, t in active if e > start]
            active.append((end, tid))
            best = max(best, len({t for _, t in active}))
        state["workers"] = max(state.get("workers", 0), best)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        workers, cores = state.get("workers"), state.get("cores")
        if not workers or not cores:
            return self.quiet("no data-loader worker events or no per-core CPU metrics yet")
        share = 100.0 * workers / cores
        values = {"workers": workers, "cores": cores, "percent_of_cores": round(share, 1)}
        if share < self.params["min_threshold"]:
            return self.fire(
                f"{workers} parallel data-loader workers for {cores} cores ({share:.0f}% < "
                f"{self.params['min_threshold']:g}%)",
                values,
            )
        if share > self.params["max_threshold"]:
            return self.fire(
                f"{workers} parallel data-loader workers for {cores} cores ({share:.0f}% > "
                f"{self.params['max_threshold']:g}%)",
                values,
            )
        return self.quiet(f"{workers} workers for {cores} cores", values)


class OverallFrameworkMetrics(ProfilerRule):
    """Where step time goes: the total per phase (data loading, forward, backward, optimizer, other) and
    the step count; it summarises and never fires. AWS: OverallFrameworkMetrics
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html); it is not in
    ``smdebug_rulesconfig`` 1.0.1, so only a configuration naming it reaches it."""

    NAME = "OverallFrameworkMetrics"
    KINDS = frozenset({FRAMEWORK})
    PARAMETERS = (scan_interval_param(),)
    POSITIVE_PARAMS = ("scan_interval_us",)
    CAN_FIRE = False
    CAUSE = "summary only"
    FIX = "read the phase breakdown in the profiler report"
    SUMMARY = "time per training phase and step count (never fires)"

    def update_framework(self, state: dict[str, Any], trace: TraceFile) -> None:
        phases = state.setdefault("phases_us", {})
        for e in trace.events:
            if e.phase.startswith(te.STEP_PREFIX) or e.name.startswith(te.STEP_PREFIX):
                state["steps"] = state.get("steps", 0) + 1
                state["step_us"] = state.get("step_us", 0) + e.duration_us
                continue
            name = e.name if e.name in phases or len(phases) < MAX_PHASES else "other"
            phases[name] = phases.get(name, 0) + e.duration_us

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        step_us = state.get("step_us", 0)
        phases = state.get("phases_us", {})
        values = {"steps": state.get("steps", 0), "step_s": step_us / 1e6}
        values.update({f"{k}_s": v / 1e6 for k, v in phases.items()})
        if not step_us:
            return self.quiet("no steps yet", values)
        parts = ", ".join(
            f"{k} {100 * v / step_us:.0f}%" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:5]
        )
        return self.quiet(f"{values['steps']} steps, {step_us / 1e6:.1f}s; of step time: {parts}", values)
