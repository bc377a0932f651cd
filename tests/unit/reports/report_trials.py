"""Trials for the report's tests and benchmark: tensors through our format writer, profiler files
through ``tornasole.profiler.format`` (the bytes the sampler writes), any number of steps.

``write_report_trial(path, steps)`` writes a TRAIN loss at every step and an EVAL loss every 10th, two
weights and two gradients every ``layer_every`` steps, and, with ``profiler=True``, system metrics
(CPU total and per core, memory, one GPU) every 0.5 s and one trace file per 1,000 steps with each step
and its four phases; ``slow_steps`` last ten times longer (the outliers).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from tornasole.core.collection import Collection
from tornasole.format.writer import TrialWriter
from tornasole.modes import ModeKeys
from tornasole.profiler.format import paths, system_records, trace_events
from tornasole.profiler.format.system_records import SystemRecord
from tornasole.profiler.format.trace_events import TraceEvent

COLLECTIONS = {"losses": ["^loss"], "weights": ["^weights/"], "gradients": ["^gradients/"]}
T0_S = 1_700_000_000
STEP_MS = 100


def write_report_trial(
    path: str,
    steps: int,
    *,
    profiler: bool = True,
    layer_every: int = 1,
    slow_steps: Iterable[int] = (),
    names: dict[str, str] | None = None,
    end: bool = True,
) -> str:
    """Write the trial (see the module docstring); ``names`` renames tensors (hostile names)."""
    rename = names or {}
    tw = TrialWriter(path)
    tw.write_collections(
        {n: Collection(n, include_regex=rx).to_json_dict() for n, rx in COLLECTIONS.items()}, 1
    )
    rng = np.random.default_rng(0)
    train = evals = 0
    for step in range(steps):
        is_eval = step % 10 == 9
        mode, mode_step = (ModeKeys.EVAL, evals) if is_eval else (ModeKeys.TRAIN, train)
        evals, train = (evals + 1, train) if is_eval else (evals, train + 1)
        sw = tw.step_writer(step, mode=mode, mode_step=mode_step)
        loss = 2.0 / (1 + step / 50) + (0.1 if is_eval else 0.0)
        sw.add_tensor(rename.get("loss", "loss"), np.float32(loss), wall_time=T0_S + step)
        if step % layer_every == 0:
            for layer in ("fc1", "fc2"):
                w = rng.standard_normal((4, 4)).astype(np.float32) * (1 + step / steps)
                sw.add_tensor(
                    rename.get(f"weights/{layer}", f"weights/{layer}.weight"), w, wall_time=T0_S + step
                )
                sw.add_tensor(
                    rename.get(f"gradients/{layer}", f"gradients/{layer}.weight"),
                    w / 100,
                    wall_time=T0_S + step,
                )
        tw.write_step(sw)
    if end:
        tw.write_end_marker()
    if profiler:
        write_profiler_files(path, steps, slow_steps=set(slow_steps))
    return path


def _put(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_profiler_files(
    trial: str, steps: int, *, slow_steps: set[int] = frozenset(), per_file: int = 1000
) -> None:
    root = paths.profiler_root(trial)
    # steps and their phases, one trace file per ``per_file`` steps
    t_us = T0_S * 1_000_000
    for first in range(0, steps, per_file):
        origin = t_us
        events = []
        for step in range(first, min(steps, first + per_file)):
            dur = STEP_MS * 1000 * (10 if step in slow_steps else 1)
            args = {"step_num": str(step)}
            events.append(
                TraceEvent(
                    trace_events.step_phase("TRAIN"), trace_events.step_phase("TRAIN"), t_us, dur, args=args
                )
            )
            share = dur // 10
            at = t_us
            for phase, parts in (
                (trace_events.DATALOADER, 1),
                (trace_events.FORWARD, 3),
                (trace_events.BACKWARD, 5),
                (trace_events.OPTIMIZER, 1),
            ):
                events.append(TraceEvent(phase, phase.lower(), at, share * parts, args=args))
                at += share * parts
            t_us += dur
        text = trace_events.encode_trace_file(origin, events)
        name = paths.framework_file_name(max(e.end_us for e in events), paths.framework_node_id(0, "host"))
        _put(f"{root}/{name}", text)
    # system metrics every 0.5 s over the run, one file per minute
    end_s = t_us / 1e6
    t = float(T0_S)
    while t < end_s:
        file_start = t
        records = []
        while t < min(end_s, file_start + 60):
            busy = 50 + 40 * np.sin(t / 30)
            records += [
                SystemRecord(
                    "cpu", system_records.CPU_TOTAL, system_records.CPU_UTILIZATION, busy, "algo-1", t
                ),
                SystemRecord("cpu", "cpu0", system_records.CPU_UTILIZATION, busy, "algo-1", t),
                SystemRecord("memory", "memory", system_records.MEMORY_USED_PERCENT, 30.0, "algo-1", t),
                SystemRecord("gpu", "gpu0", system_records.GPU_UTILIZATION, 100 - busy, "algo-1", t),
                SystemRecord("gpu", "gpu0", system_records.GPU_MEMORY_UTILIZATION, 20.0, "algo-1", t),
            ]
            t += 0.5
        _put(f"{root}/{paths.system_file_name(file_start)}", system_records.encode_records(records))
