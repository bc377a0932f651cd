"""The profiler rules that read system metrics (CPU, I/O wait, GPU utilisation and memory).

Names, parameters and defaults are SageMaker's (AWS: "List of Debugger built-in profiler rules",
https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html, and the SDK's
``smdebug_rulesconfig.profiler_rules``); the criteria are re-implemented over a bounded state
(:mod:`.sketches`) so that each new metrics file is one small update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from tornasole.rules.params import Param
from tornasole.rules.profiler.base import (
    SYSTEM,
    ProfilerFinding,
    ProfilerRule,
    Sample,
    patience_param,
    scan_interval_param,
    series_slot,
)
from tornasole.rules.profiler.sketches import (
    hist_percentile,
    percent,
    percentile,
    window_push,
    window_values,
)

__all__ = [
    "BatchSize",
    "CPUBottleneck",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "OverallSystemUsage",
]


def _gpu_key(sample: Sample, gpu: str) -> str:
    return f"{sample.node}/{gpu}"


def _gpu_readings(
    state: dict[str, Any], samples: list[Sample], make: Callable[[], Any], memory: bool = False
) -> Iterator[tuple[Sample, str, float, Any]]:
    """``(sample, gpu, value, slot)`` for each GPU's utilisation (``memory``: its memory) in ``samples``,
    ``slot`` that GPU's entry of ``state["gpus"]`` (made by ``make``); a GPU past :data:`MAX_SERIES` is
    counted by :func:`series_slot`, not yielded."""
    gpus = state.setdefault("gpus", {})
    for s in samples:
        for gpu, value in (s.gpu_memory if memory else s.gpu).items():
            slot = series_slot(gpus, _gpu_key(s, gpu), state, make)
            if slot is not None:
                yield s, gpu, value, slot


def _bottleneck_params(host_threshold: Param) -> tuple[Param, ...]:
    """SageMaker's parameters of a bottleneck rule, in its order; ``host_threshold`` says when the host is
    busy (the one parameter the two rules do not share)."""
    return (
        Param("threshold", "float", "50", "percent of samples with a bottleneck beyond which the rule fires"),
        Param("gpu_threshold", "float", "10", "GPU utilisation (%) below which a GPU is idle"),
        host_threshold,
        patience_param(),
        scan_interval_param(),
    )


class _BottleneckRule(ProfilerRule):
    """CPUBottleneck and IOBottleneck: the share of samples where a GPU idles while the host is busy, busy
    meaning the sample's ``HOST_MEASURE`` (a :class:`Sample` field, in %) above ``HOST_THRESHOLD``."""

    KINDS = frozenset({SYSTEM})
    POSITIVE_PARAMS = ("patience", "scan_interval_us")
    HOST_MEASURE: ClassVar[str] = ""
    HOST_THRESHOLD: ClassVar[str] = ""
    WHAT = ""

    def busy(self, sample: Sample) -> bool | None:
        """Whether the host was busy at ``sample``; None when the sample does not measure it."""
        value = getattr(sample, self.HOST_MEASURE)
        return None if value is None else value > self.params[self.HOST_THRESHOLD]

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        for s in samples:
            busy = self.busy(s)
            if not s.gpu or busy is None:
                continue  # no GPU or no host measure at this instant: nothing to judge
            state["datapoints"] = state.get("datapoints", 0) + 1
            if busy and min(s.gpu.values()) < self.params["gpu_threshold"]:
                state["bottlenecks"] = state.get("bottlenecks", 0) + 1

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        n, b = state.get("datapoints", 0), state.get("bottlenecks", 0)
        share = 100.0 * b / n if n else 0.0
        values = {"datapoints": n, "bottlenecks": b, "bottleneck_percent": round(share, 2)}
        if n < self.params["patience"]:
            return self.quiet(f"{n} of {self.params['patience']} samples with a GPU seen (patience)", values)
        if share > self.params["threshold"]:
            return self.fire(
                f"{self.WHAT} in {b} of {n} samples ({share:.1f}% > threshold {self.params['threshold']:g}%)",
                values,
            )
        return self.quiet(f"{self.WHAT} in {share:.1f}% of {n} samples", values)


class CPUBottleneck(_BottleneckRule):
    """A GPU idles (below ``gpu_threshold``) while the CPU is busy (above ``cpu_threshold``) in more than
    ``threshold`` percent of the samples. AWS: CPUBottleneck, in the list of built-in profiler rules
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "CPUBottleneck"
    PARAMETERS = _bottleneck_params(
        Param("cpu_threshold", "float", "90", "CPU utilisation (%) above which the CPU is busy")
    )
    HOST_MEASURE, HOST_THRESHOLD = "cpu_total", "cpu_threshold"
    PERCENT_PARAMS = ("threshold", "gpu_threshold", HOST_THRESHOLD)
    WHAT = "GPU idle while the CPU was busy"
    CAUSE = "the CPU cannot prepare batches as fast as the GPU consumes them (preprocessing on the CPU)"
    FIX = (
        "use more data-loader workers, move preprocessing (augmentation, decoding) to the GPU or offline, "
        "or choose an instance with more vCPUs per GPU"
    )
    SUMMARY = "GPU idle while the CPU is above cpu_threshold for more than threshold% of samples"


class IOBottleneck(_BottleneckRule):
    """A GPU idles while the CPU waits on I/O (above ``io_threshold``) in more than ``threshold`` percent of
    the samples. AWS: IOBottleneck (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "IOBottleneck"
    PARAMETERS = _bottleneck_params(
        Param("io_threshold", "float", "50", "I/O wait (%) above which the host waits on I/O")
    )
    HOST_MEASURE, HOST_THRESHOLD = "io_wait", "io_threshold"
    PERCENT_PARAMS = ("threshold", "gpu_threshold", HOST_THRESHOLD)
    WHAT = "GPU idle while the CPU waited on I/O"
    CAUSE = "training data is read from slow storage (network file system, S3 streaming) as it is needed"
    FIX = (
        "prefetch and cache the data set (local NVMe, FSx for Lustre, Pipe/FastFile mode), "
        "shard it into larger files, or read with more parallel workers"
    )
    SUMMARY = "GPU idle while I/O wait is above io_threshold for more than threshold% of samples"


class LowGPUUtilization(ProfilerRule):
    """Per GPU, over its last ``window`` samples: the 95th percentile below ``threshold_p95`` (under-used),
    or above it with the 5th percentile below ``threshold_p5`` (fluctuating). AWS: LowGPUUtilization
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "LowGPUUtilization"
    KINDS = frozenset({SYSTEM})
    PARAMETERS = (
        Param("threshold_p95", "float", "70", "95th percentile (%) below which a GPU is under-used"),
        Param("threshold_p5", "float", "10", "5th percentile (%) below which a busy GPU fluctuates"),
        Param("window", "int", "500", "samples per GPU the percentiles are computed over"),
        patience_param(),
        scan_interval_param(),
    )
    PERCENT_PARAMS = ("threshold_p95", "threshold_p5")
    POSITIVE_PARAMS = ("window", "patience", "scan_interval_us")
    WINDOW_PARAMS = ("window",)
    CAUSE = "the GPU waits for work: small batches, a slow input pipeline or synchronisation between steps"
    FIX = (
        "increase the batch size, speed up data loading (more workers, prefetching), "
        "or use a smaller (cheaper) instance type"
    )
    SUMMARY = "a GPU's p95 utilisation below threshold_p95, or p5 below threshold_p5 (fluctuation)"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        for _, _, value, slot in _gpu_readings(state, samples, lambda: {"n": 0, "w": ""}):
            slot["n"] += 1
            slot["w"] = window_push(slot["w"], [value], self.params["window"])

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        low, fluctuating, judged = [], [], 0
        values: dict[str, Any] = {}
        for key, slot in sorted(state.get("gpus", {}).items()):
            if slot["n"] < self.params["patience"]:
                continue
            judged += 1
            window = window_values(slot["w"])
            p95, p5 = percentile(window, 95), percentile(window, 5)
            values[key] = {"p95": p95, "p5": p5}
            if p95 < self.params["threshold_p95"]:
                low.append(f"{key} p95 {p95:.0f}%")
            elif p5 < self.params["threshold_p5"]:
                fluctuating.append(f"{key} p95 {p95:.0f}% p5 {p5:.0f}%")
        if low or fluctuating:
            parts = []
            if low:
                parts.append(f"under-used (p95 < {self.params['threshold_p95']:g}%): {', '.join(low)}")
            if fluctuating:
                parts.append(f"fluctuating (p5 < {self.params['threshold_p5']:g}%): {', '.join(fluctuating)}")
            return self.fire("; ".join(parts), values)
        return self.quiet(f"{judged} GPU(s) judged, utilisation normal", values)


class BatchSize(ProfilerRule):
    """CPU, GPU and GPU memory all low at their 95th percentile: the batch could be larger (or the
    instance smaller). AWS: BatchSize (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "BatchSize"
    KINDS = frozenset({SYSTEM})
    PARAMETERS = (
        Param(
            "cpu_threshold_p95", "float", "70", "95th percentile of CPU utilisation (%) below which it is low"
        ),
        Param(
            "gpu_threshold_p95", "float", "70", "95th percentile of GPU utilisation (%) below which it is low"
        ),
        Param(
            "gpu_memory_threshold_p95",
            "float",
            "70",
            "95th percentile of GPU memory (%) below which it is low",
        ),
        patience_param(),
        Param("window", "int", "500", "samples the percentiles are computed over"),
        scan_interval_param(),
    )
    PERCENT_PARAMS = ("cpu_threshold_p95", "gpu_threshold_p95", "gpu_memory_threshold_p95")
    POSITIVE_PARAMS = ("patience", "window", "scan_interval_us")
    WINDOW_PARAMS = ("window",)
    CAUSE = "the batch is too small to keep the GPU (and its memory) busy"
    FIX = "increase the batch size (scale the learning rate with it), or move to a smaller instance type"
    SUMMARY = "CPU, GPU and GPU-memory p95 all below their thresholds"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        nodes = state.setdefault("cpu", {})
        size = self.params["window"]
        for s in samples:
            if s.cpu_total is not None:
                slot = series_slot(nodes, s.node, state, lambda: {"n": 0, "w": ""})
                if slot is not None:
                    slot["n"] += 1
                    slot["w"] = window_push(slot["w"], [s.cpu_total], size)
        for s, gpu, value, slot in _gpu_readings(state, samples, lambda: {"n": 0, "w": "", "m": ""}):
            slot["n"] += 1
            slot["w"] = window_push(slot["w"], [value], size)
            if gpu in s.gpu_memory:
                slot["m"] = window_push(slot["m"], [s.gpu_memory[gpu]], size)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        p = self.params
        small, values = [], {}
        for key, slot in sorted(state.get("gpus", {}).items()):
            node = key.split("/", 1)[0]
            cpu = state.get("cpu", {}).get(node)
            if slot["n"] < p["patience"] or cpu is None or not slot["m"]:
                continue
            cpu95 = percentile(window_values(cpu["w"]), 95)
            gpu95 = percentile(window_values(slot["w"]), 95)
            mem95 = percentile(window_values(slot["m"]), 95)
            values[key] = {"cpu_p95": cpu95, "gpu_p95": gpu95, "gpu_memory_p95": mem95}
            if (
                cpu95 < p["cpu_threshold_p95"]
                and gpu95 < p["gpu_threshold_p95"]
                and mem95 < p["gpu_memory_threshold_p95"]
            ):
                small.append(
                    f"{key} (CPU p95 {cpu95:.0f}%, GPU p95 {gpu95:.0f}%, GPU memory p95 {mem95:.0f}%)"
                )
        if small:
            return self.fire(f"CPU, GPU and GPU memory all under-used: {', '.join(small)}", values)
        return self.quiet(f"{len(values)} GPU(s) judged, no sign of a too-small batch", values)


class GPUMemoryIncrease(ProfilerRule):
    """The mean GPU memory of a window of ``window`` samples exceeds the previous window's by more than
    ``increase`` percentage points. AWS: GPUMemoryIncrease
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "GPUMemoryIncrease"
    KINDS = frozenset({SYSTEM})
    PARAMETERS = (
        Param("increase", "float", "5", "increase of the moving average (percentage points) that fires"),
        patience_param(),
        Param("window", "int", "10", "samples per moving-average window"),
        scan_interval_param(),
    )
    POSITIVE_PARAMS = ("increase", "patience", "window", "scan_interval_us")
    WINDOW_PARAMS = ("window",)
    CAUSE = "GPU memory grows during training: tensors kept alive across steps (a leak) or growing inputs"
    FIX = (
        "detach values you keep for logging (loss.item()), clear caches between steps, and check for "
        "sequence lengths or batch shapes that grow"
    )
    SUMMARY = "moving average of GPU memory rises by more than increase points"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        size = self.params["window"]
        windows = _gpu_readings(
            state, samples, lambda: {"n": 0, "sum": 0.0, "k": 0, "prev": None}, memory=True
        )
        for s, gpu, value, slot in windows:
            slot["n"] += 1
            slot["sum"] += value
            slot["k"] += 1
            if slot["k"] < size:
                continue
            mean = slot["sum"] / slot["k"]
            prev = slot["prev"]
            if (
                prev is not None
                and slot["n"] >= self.params["patience"]
                and mean - prev > self.params["increase"]
            ):
                worst = state.get("worst")
                if worst is None or mean - prev > worst["by"]:
                    state["worst"] = {
                        "gpu": _gpu_key(s, gpu),
                        "from": round(prev, 2),
                        "to": round(mean, 2),
                        "by": round(mean - prev, 2),
                        "at": s.timestamp,
                    }
            slot.update(prev=mean, sum=0.0, k=0)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        worst = state.get("worst")
        if worst:
            return self.fire(
                f"GPU memory of {worst['gpu']} rose from a moving average of {worst['from']:.1f}% to "
                f"{worst['to']:.1f}% (+{worst['by']:.1f} > {self.params['increase']:g} points)",
                dict(worst),
            )
        return self.quiet(f"no increase above {self.params['increase']:g} points", {})


class LoadBalancing(ProfilerRule):
    """GPUs of one node whose utilisation histograms differ by more than ``threshold`` (total variation
    distance, 0..1). AWS: LoadBalancing (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "LoadBalancing"
    KINDS = frozenset({SYSTEM})
    PARAMETERS = (
        Param("threshold", "float", "0.5", "distance between two GPUs' utilisation histograms that fires"),
        patience_param(),
        scan_interval_param(),
    )
    PERCENT_PARAMS = ("threshold",)
    POSITIVE_PARAMS = ("patience", "scan_interval_us")
    BINS = 20
    CAUSE = "work is not spread evenly over the GPUs (uneven data-parallel shards, one GPU doing extra work)"
    FIX = (
        "check the distributed sampler and per-rank batch sizes, and move rank-0-only work (logging, "
        "evaluation, checkpointing) off the training path"
    )
    SUMMARY = "two GPUs of a node with utilisation histograms further apart than threshold"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        for _, _, value, hist in _gpu_readings(state, samples, lambda: [0] * (self.BINS + 1)):
            hist[min(self.BINS, max(0, int(value * self.BINS / 100)))] += 1

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        by_node: dict[str, list[tuple[str, list[int]]]] = {}
        for key, hist in sorted(state.get("gpus", {}).items()):
            if sum(hist) >= self.params["patience"]:
                by_node.setdefault(key.split("/", 1)[0], []).append((key, hist))
        worst = (0.0, "", "")
        for gpus in by_node.values():
            for i, (a, ha) in enumerate(gpus):
                for b, hb in gpus[i + 1 :]:
                    na, nb = sum(ha), sum(hb)
                    distance = 0.5 * sum(abs(x / na - y / nb) for x, y in zip(ha, hb, strict=True))
                    if distance > worst[0]:
                        worst = (distance, a, b)
        values = {"max_distance": round(worst[0], 4), "gpus": [worst[1], worst[2]] if worst[1] else []}
        if worst[0] > self.params["threshold"]:
            return self.fire(
                f"utilisation of {worst[1]} and {worst[2]} differs by {worst[0]:.2f} "
                f"(> {self.params['threshold']:g})",
                values,
            )
        return self.quiet(f"largest difference between two GPUs {worst[0]:.2f}", values)


class OverallSystemUsage(ProfilerRule):
    """Per node, the percentiles of CPU, GPU, GPU memory, host memory and I/O wait; it summarises and never
    fires (as SageMaker's does). AWS: OverallSystemUsage
    (https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html)."""

    NAME = "OverallSystemUsage"
    KINDS = frozenset({SYSTEM})
    PARAMETERS = (scan_interval_param(),)
    POSITIVE_PARAMS = ("scan_interval_us",)
    CAN_FIRE = False
    CAUSE = "summary only"
    FIX = "read the percentiles in the profiler report"
    SUMMARY = "percentiles of CPU, GPU, memory and I/O wait per node (never fires)"

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:
        series = state.setdefault("series", {})

        def add(key: str, value: float | None) -> None:
            if value is None:
                return
            hist = series_slot(series, key, state, lambda: [0] * 101)
            if hist is not None:
                hist[percent(value)] += 1

        for s in samples:
            add(f"{s.node}/cpu", s.cpu_total)
            add(f"{s.node}/io_wait", s.io_wait)
            add(f"{s.node}/memory", s.memory)
            for gpu, v in s.gpu.items():
                add(f"{s.node}/{gpu}", v)
            for gpu, v in s.gpu_memory.items():
                add(f"{s.node}/{gpu}_memory", v)

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:
        values = {
            key: {q: hist_percentile(hist, float(q[1:])) for q in ("p50", "p95", "p99")}
            for key, hist in sorted(state.get("series", {}).items())
            if hist
        }
        shown = ", ".join(f"{k} p50 {v['p50']:.0f}% p95 {v['p95']:.0f}%" for k, v in list(values.items())[:8])
        return self.quiet(shown or "no system metrics yet", values)
