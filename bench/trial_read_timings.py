"""Time one reader (ours or smdebug's) on a trial; runs in either venv.

    .venv/bin/python          bench/trial_read_timings.py --impl tornasole --path DIR --oracle-out OUT
    .venv-smdebug/bin/python  bench/trial_read_timings.py --impl smdebug   --path DIR --oracle-out OUT

Why one script for both: the workload must be the same user-level calls on
both sides (``create_trial``, ``steps()``, ``tensor(n).value(s)``,
``reduction_value(s, "mean", abs=True)``), so the ratio measures the readers and
nothing else. It imports only the standard library, numpy and the chosen
``trials`` package, because it also runs under smdebug's venv (numpy 2.2,
protobuf 3.20). ``bench/read_vs_smdebug.py`` drives it and prints the ratios.

Phases (``--phases``, comma separated):
  open     create_trial + steps() (+ tensor_names(), which every analysis needs)
  values   every value of every tensor at every step, tensor by tensor (for each tensor its steps)
  bystep   the same, step by step (for each step every tensor), on a fresh trial
  bulk     the same through ``tensor.values()`` (one call per tensor; our reader
           fetches the steps concurrently, smdebug's loops over value()), fresh trial
  reduce   reduction_value(step, "mean", abs=True) of every tensor at every step,
           on a fresh trial (our reader caches values; this phase must not profit
           from the previous one); the trial opening is not counted here
  rule     one rule over the run: a rule requiring every tensor at every step and checking
           that each value is finite, run by the package's own ``invoke_rule`` on a fresh
           trial (the trial opening is counted: that is what a rule job does)
  memory   on a fresh trial under tracemalloc: for a sample of values the peak
           traced memory while reading that one value, against the size of the
           value's event file (how much a reader holds for one value)

Each phase records wall seconds (``<phase>_s``) and the process's CPU seconds
(``<phase>_cpu``, all threads: what a busy, shared machine distorts least).
Writes ``result.json`` (seconds, counts, ru_maxrss after each phase) into
``--oracle-out`` (the same flag ``tests/oracle/smdebug_runner.py`` passes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import tracemalloc

import numpy as np


def _load(impl: str, path: str):
    if impl == "smdebug":
        from smdebug.trials import create_trial
    elif impl == "tornasole":
        from tornasole.trials import create_trial

        if path.startswith("s3://"):
            # smdebug imports boto3 when it is imported (in import_s); ours imports it on first
            # use, which would put boto3's import inside the timed create_trial of the open phase.
            import boto3  # noqa: F401
    else:
        raise SystemExit(f"unknown --impl {impl!r}")
    return create_trial


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _rss_anon_bytes() -> int:
    """Anonymous resident memory now (the heap, not mapped file pages: those are page cache); 0 if unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _event_file_sizes(path: str) -> dict[int, int]:
    """Size of each step's event file (local paths only; {} for s3://)."""
    if path.startswith("s3://"):
        return {}
    sizes: dict[int, int] = {}
    events = os.path.join(path, "events")
    for step_dir in os.listdir(events):
        for name in os.listdir(os.path.join(events, step_dir)):
            if name.endswith(".tfevents"):
                step = int(name.split("_", 1)[0])
                sizes[step] = sizes.get(step, 0) + os.path.getsize(os.path.join(events, step_dir, name))
    return sizes


def phase_open(create_trial, path: str, res: dict) -> None:
    t0 = time.perf_counter()
    c0 = time.process_time()
    trial = create_trial(path)
    steps = trial.steps()
    names = sorted(trial.tensor_names())
    res["open_s"] = time.perf_counter() - t0
    res["open_cpu"] = time.process_time() - c0
    res["steps"] = len(steps)
    res["tensors"] = len(names)
    res["rss_after_open"] = _maxrss_bytes()


def phase_values(create_trial, path: str, res: dict) -> None:
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    n = nbytes = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for name in names:
        tensor = trial.tensor(name)
        for step in tensor.steps():
            v = tensor.value(step)
            n += 1
            nbytes += v.nbytes
    res["values_s"] = time.perf_counter() - t0
    res["values_cpu"] = time.process_time() - c0
    res["values_n"] = n
    res["values_bytes"] = nbytes
    res["rss_after_values"] = _maxrss_bytes()
    res["rss_anon_after_values"] = _rss_anon_bytes()


def phase_bystep(create_trial, path: str, res: dict) -> None:
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    n = nbytes = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for step in trial.steps():
        for name in names:
            v = trial.tensor(name).value(step)
            n += 1
            nbytes += v.nbytes
    res["bystep_s"] = time.perf_counter() - t0
    res["bystep_cpu"] = time.process_time() - c0
    res["bystep_n"] = n
    res["bystep_bytes"] = nbytes


def _finite_rule(impl: str):
    """The same rule class written against either package (a custom rule ports unchanged)."""
    if impl == "smdebug":
        from smdebug.rules import Rule, invoke_rule
    else:
        from tornasole.rules import Rule, invoke_rule

    class EveryValueFinite(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial, action_str="")
            self.checked = 0

        def set_required_tensors(self, step):
            for name in self.base_trial.tensor_names():
                self.req_tensors.add(name, steps=[step])

        def invoke_at_step(self, step):
            for tensor in self.req_tensors.get():
                value = tensor.value(step)
                self.checked += 1
                if not np.isfinite(value).all():
                    return True
            return False

    return EveryValueFinite, invoke_rule


def phase_rule(create_trial, path: str, res: dict, impl: str) -> None:
    rule_class, invoke_rule = _finite_rule(impl)
    t0 = time.perf_counter()
    c0 = time.process_time()
    trial = create_trial(path)
    steps = trial.steps()
    rule = rule_class(trial)
    invoke_rule(rule, start_step=0, end_step=steps[-1] + 1 if steps else 0)
    res["rule_s"] = time.perf_counter() - t0
    res["rule_cpu"] = time.process_time() - c0
    res["rule_n"] = rule.checked


def phase_bulk(create_trial, path: str, res: dict) -> None:
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    n = nbytes = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for name in names:
        for v in trial.tensor(name).values().values():
            n += 1
            nbytes += v.nbytes
    res["bulk_s"] = time.perf_counter() - t0
    res["bulk_cpu"] = time.process_time() - c0
    res["bulk_n"] = n
    res["bulk_bytes"] = nbytes
    res["rss_after_bulk"] = _maxrss_bytes()


def phase_reduce(create_trial, path: str, res: dict) -> None:
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    n = 0
    checksum = 0.0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for name in names:
        tensor = trial.tensor(name)
        for step in tensor.steps():
            checksum += float(tensor.reduction_value(step, "mean", abs=True).ravel()[0])
            n += 1
    res["reduce_s"] = time.perf_counter() - t0
    res["reduce_cpu"] = time.process_time() - c0
    res["reduce_n"] = n
    res["reduce_checksum"] = checksum
    res["rss_after_reduce"] = _maxrss_bytes()


def phase_memory(create_trial, path: str, res: dict, sample: int) -> None:
    sizes = _event_file_sizes(path)
    tracemalloc.start()
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    steps = trial.steps()
    pick = steps[:: max(1, len(steps) // max(1, sample // max(1, len(names))))]
    worst = {"peak": 0, "event_file": 0, "tensor": None, "step": None, "value_bytes": 0}
    worst_ratio = 0.0
    n = 0
    for step in pick:
        for name in names:
            if n >= sample:
                break
            _, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            v = trial.tensor(name).value(step)
            peak = tracemalloc.get_traced_memory()[1] - base
            n += 1
            ef = sizes.get(step, 0)
            ratio = peak / ef if ef else 0.0
            if peak > worst["peak"]:
                worst.update(peak=peak, event_file=ef, tensor=name, step=step, value_bytes=int(v.nbytes))
            worst_ratio = max(worst_ratio, ratio)
            del v
    tracemalloc.stop()
    res["memory_values_sampled"] = n
    res["memory_worst"] = worst
    res["memory_worst_ratio_to_event_file"] = worst_ratio
    res["largest_event_file"] = max(sizes.values()) if sizes else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--impl", required=True, choices=["tornasole", "smdebug"])
    p.add_argument("--path", required=True)
    p.add_argument("--phases", default="open,values,bystep,bulk,reduce,rule,memory")
    p.add_argument("--memory-sample", type=int, default=200)
    p.add_argument("--oracle-out", required=True, help="directory for result.json")
    p.add_argument("--oracle-in", help="ignored (passed by smdebug_runner)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    create_trial = _load(a.impl, a.path)
    res: dict = {
        "impl": a.impl,
        "path": a.path,
        "import_s": time.perf_counter() - t0,
        "rss_after_import": _maxrss_bytes(),
        "rss_anon_after_import": _rss_anon_bytes(),
    }
    for phase in [x for x in a.phases.split(",") if x]:
        if phase == "open":
            phase_open(create_trial, a.path, res)
        elif phase == "values":
            phase_values(create_trial, a.path, res)
        elif phase == "bystep":
            phase_bystep(create_trial, a.path, res)
        elif phase == "rule":
            phase_rule(create_trial, a.path, res, a.impl)
        elif phase == "bulk":
            phase_bulk(create_trial, a.path, res)
        elif phase == "reduce":
            phase_reduce(create_trial, a.path, res)
        elif phase == "memory":
            phase_memory(create_trial, a.path, res, a.memory_sample)
        else:
            raise SystemExit(f"unknown phase {phase!r}")
        print(f"[{a.impl}] {phase} done", file=sys.stderr, flush=True)
    with open(os.path.join(a.oracle_out, "result.json"), "w", encoding="utf-8") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
