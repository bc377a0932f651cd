"""What every profiler rule is: parameters, a bounded state, one update per file, a finding.

SageMaker ran each profiler rule in a processing container that re-scanned the job's
``profiler-output/`` every ``scan_interval_us``. Here a rule is driven by the files themselves: the
evaluator decodes ONE new file (system metrics or framework events, :mod:`tornasole.profiler.format`)
and calls :meth:`ProfilerRule.update` with the rule's state from the previous file, then
:meth:`ProfilerRule.finding` says whether the rule fires now. The state is a plain JSON object
(dicts, lists, numbers, strings) whose size is bounded by the rule's parameters (windows, histograms,
running counts; :mod:`.sketches`), so a one-hour job costs one small step per file. ``scan_interval_us``
is accepted for the SDK's payloads and has nothing left to pace: every file is its own scan.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tornasole.exceptions import RuleParameterError
from tornasole.profiler.format import system_records as sr
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceFile
from tornasole.rules.outcome import format_advice
from tornasole.rules.params import Param, parse_value

__all__ = [
    "SYSTEM",
    "FRAMEWORK",
    "DOCS_URL",
    "MAX_SERIES",
    "ProfilerFinding",
    "ProfilerRule",
    "Sample",
    "samples_of",
    "scan_interval_param",
    "patience_param",
]

SYSTEM = "system"
FRAMEWORK = "framework"
#: AWS's list of the built-in profiler rules, their parameters and defaults.
DOCS_URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/debugger-built-in-profiler-rules.html"
#: Devices (a GPU of a node, a node's CPU) one rule tracks at most; more are counted, not kept.
MAX_SERIES = 64
#: The longest a sampler takes to read every device of one instant (SageMaker samples every 100 ms at
#: the fastest; a repeated device starts the next instant anyway).
SAMPLE_SPAN_S = 0.09


def scan_interval_param() -> Param:
    return Param(
        "scan_interval_us", "int", "60000000", "SageMaker's re-scan interval (us); each file is a scan here"
    )


def patience_param(default: str = "1000") -> Param:
    return Param(
        "patience", "int", default, "samples to see before the rule first judges (start-up is noisy)"
    )


@dataclass(frozen=True)
class ProfilerFinding:
    """A rule's verdict after a file: ``fired``, one line of ``details`` (advice when fired), numbers."""

    rule: str
    fired: bool
    details: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Sample:
    """One sampling instant of one node: CPU total and I/O wait, per-GPU utilisation and memory."""

    node: str
    timestamp: float
    cpu_total: float | None = None
    io_wait: float | None = None
    cores: dict[str, float] = field(default_factory=dict)
    gpu: dict[str, float] = field(default_factory=dict)
    gpu_memory: dict[str, float] = field(default_factory=dict)
    memory: float | None = None


def samples_of(records: Sequence[SystemRecord]) -> list[Sample]:
    """The file's records grouped into sampling instants, per node, in time order.

    A sampler reads its devices one after the other, so the lines of one instant may differ by a few
    milliseconds: per node, a record joins the current instant unless that instant already holds the same
    device's same measure or began more than :data:`SAMPLE_SPAN_S` earlier. When a sampler writes no
    ``cpu_total`` line the machine's CPU is the mean of its cores.
    """
    by_node: dict[str, list[SystemRecord]] = {}
    for r in records:
        by_node.setdefault(r.node_id, []).append(r)
    out: list[Sample] = []
    for node, rows in by_node.items():
        rows.sort(key=lambda r: r.timestamp)
        current: Sample | None = None
        seen: set[tuple[str, str]] = set()
        for r in rows:
            what = (r.dimension, r.name)
            if current is None or what in seen or r.timestamp - current.timestamp > SAMPLE_SPAN_S:
                current = Sample(node=node, timestamp=r.timestamp)
                seen = set()
                out.append(current)
            seen.add(what)
            _add(current, r)
    out.sort(key=lambda s: (s.timestamp, s.node))
    for s in out:
        if s.cpu_total is None and s.cores:
            s.cpu_total = sum(s.cores.values()) / len(s.cores)
    return out


def _add(s: Sample, r: SystemRecord) -> None:
    if r.dimension == sr.CPU_UTILIZATION:
        if r.name == sr.CPU_TOTAL:
            s.cpu_total = r.value
        else:
            s.cores[r.name] = r.value
    elif r.dimension == sr.IO_WAIT:
        s.io_wait = r.value
    elif r.dimension == sr.GPU_UTILIZATION:
        s.gpu[r.name] = r.value
    elif r.dimension == sr.GPU_MEMORY_UTILIZATION:
        s.gpu_memory[r.name] = r.value
    elif r.dimension == sr.MEMORY_USED_PERCENT or r.type == "memory":
        s.memory = r.value


class ProfilerRule:
    """Base of the built-in profiler rules; subclasses set the class attributes and the hooks below.

    ``params`` may be strings (SageMaker's ``RuleParameters``) or typed values; each is parsed once
    against ``PARAMETERS`` and range-checked as the SageMaker SDK's ``rule_configs`` checks it
    (percentiles within 0..100, counts positive), with errors naming the rule and the parameter.
    """

    NAME: ClassVar[str] = ""
    PARAMETERS: ClassVar[tuple[Param, ...]] = ()
    #: The file kinds the rule reads (:data:`SYSTEM`, :data:`FRAMEWORK`).
    KINDS: ClassVar[frozenset[str]] = frozenset()
    PERCENT_PARAMS: ClassVar[tuple[str, ...]] = ()
    POSITIVE_PARAMS: ClassVar[tuple[str, ...]] = ()
    WINDOW_PARAMS: ClassVar[tuple[str, ...]] = ()
    #: Whether the rule can fire (OverallSystemUsage and OverallFrameworkMetrics only summarise).
    CAN_FIRE: ClassVar[bool] = True
    CAUSE: ClassVar[str] = ""
    FIX: ClassVar[str] = ""
    SUMMARY: ClassVar[str] = ""

    def __init__(self, **params: Any) -> None:
        self.params = self.parse(params)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> dict[str, Any]:
        declared = {p.name: p for p in cls.PARAMETERS}
        out: dict[str, Any] = {}
        for key in raw:
            if key not in declared and key not in ("rule_to_invoke", "action_json"):
                valid = ", ".join(declared) or "(none)"
                raise RuleParameterError(cls.NAME, key, f"is not a parameter of {cls.NAME}; valid: {valid}")
        for p in cls.PARAMETERS:
            given = raw.get(p.name)
            value = parse_value(cls.NAME, p, p.default if given is None else given)
            if value is None:
                out[p.name] = None
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise RuleParameterError(cls.NAME, p.name, f"value {given!r} is not finite")
            if p.name in cls.PERCENT_PARAMS and not 0 <= value <= 100:
                raise RuleParameterError(cls.NAME, p.name, f"value {given!r} must be a percentile (0 to 100)")
            if p.name in cls.POSITIVE_PARAMS and value <= 0:
                raise RuleParameterError(cls.NAME, p.name, f"value {given!r} must be positive")
            if p.name in cls.WINDOW_PARAMS and value > cls.max_window():
                raise RuleParameterError(
                    cls.NAME,
                    p.name,
                    f"value {given!r} exceeds {cls.max_window()} (the rule's state is bounded)",
                )
            out[p.name] = value
        return out

    @staticmethod
    def max_window() -> int:
        from tornasole.rules.profiler.sketches import MAX_WINDOW

        return MAX_WINDOW

    # -- the serverless contract --------------------------------------------------------------------
    def initial_state(self) -> dict[str, Any]:
        return {}

    def update(
        self,
        state: dict[str, Any],
        kind: str,
        payload: Sequence[SystemRecord] | TraceFile,
        samples: list[Sample] | None = None,
    ) -> None:
        """Fold one decoded file into ``state`` in place; other kinds of file are no-ops. ``samples``: the
        system records already grouped (``samples_of``), when several rules read the same file."""
        if kind not in self.KINDS:
            return
        if kind == SYSTEM:
            self.update_system(state, samples if samples is not None else samples_of(payload))  # type: ignore[arg-type]
        else:
            self.update_framework(state, payload)  # type: ignore[arg-type]

    def update_system(self, state: dict[str, Any], samples: list[Sample]) -> None:  # pragma: no cover
        raise NotImplementedError

    def update_framework(self, state: dict[str, Any], trace: TraceFile) -> None:  # pragma: no cover
        raise NotImplementedError

    def finding(self, state: dict[str, Any]) -> ProfilerFinding:  # pragma: no cover
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------------------
    def fire(self, what: str, values: dict[str, Any]) -> ProfilerFinding:
        return ProfilerFinding(
            self.NAME, True, f"{self.NAME}: {what}. {format_advice(self.CAUSE, self.FIX)}", values
        )

    def quiet(self, what: str, values: dict[str, Any] | None = None) -> ProfilerFinding:
        return ProfilerFinding(self.NAME, False, f"{self.NAME}: {what}", values or {})

    @staticmethod
    def state_bytes(state: Mapping[str, Any]) -> int:
        """The state's size as stored (compact JSON)."""
        return len(json.dumps(state, separators=(",", ":")))


def series_slot(table: dict[str, Any], key: str, state: dict[str, Any], make: Any) -> Any:
    """``table[key]``, created with ``make()`` while fewer than :data:`MAX_SERIES` exist; else None
    (counted in ``state["dropped_series"]``, so the bound shows)."""
    if key in table:
        return table[key]
    if len(table) >= MAX_SERIES:
        state["dropped_series"] = state.get("dropped_series", 0) + 1
        return None
    table[key] = make()
    return table[key]
