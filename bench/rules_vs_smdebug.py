"""Benchmark: the documentation's VanishingGradientRule under smdebug's invoke_rule and ours.

    .venv/bin/python bench/rules_vs_smdebug.py                 # 1000 steps x 10 gradients (~1-2 min)
    .venv/bin/python bench/rules_vs_smdebug.py --steps 100     # quick

What it does:

1. writes one run with OUR writer (``tornasole.format.writer``): ``--steps``
   saved steps, each with ``--tensors`` float32 gradients of ``--size``
   elements in the ``gradients`` collection, in a temp dir removed at the end;
2. writes ONE rule file, the documentation's ``VanishingGradientRule``
   (``set_required_tensors`` + ``req_tensors.get()`` +
   ``reduction_value(step, 'mean', abs=True)``) importing from ``smdebug``;
3. runs it with smdebug 1.0.34's ``invoke_rule`` in the smdebug venv (through
   ``tests/oracle/smdebug_runner.py``: clean environment, end-of-training
   delay 0) and with ours in a fresh interpreter of our venv, loading the very
   same file through ``tornasole.rules.loader`` (smdebug imports mapped). Each
   side times ``create_trial`` + ``invoke_rule(rule, 0, steps)`` only, not the
   interpreter start;
4. repeats each side ``--repeat`` times (default 3; each repeat opens a fresh
   trial) and keeps the best wall time and the best CPU time (``process_time``,
   all threads): on a shared machine the wall time of one run mostly measures
   the neighbours;
5. checks both fired at the same steps, prints
   ``rules: ours X s, smdebug Y s, ratio Y/X (CPU time ratio Z)`` (target >= 10x;
   reported, not asserted).

The rule's constructor calls ``super().__init__(base_trial, action_str="")``:
smdebug 1.0.34 requires ``action_str`` (its docs' one-argument call fails
there); Tornasole accepts both forms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "oracle"))

from smdebug_runner import check_smdebug_venv, child_env, run_smdebug  # noqa: E402

RULE_FILE = textwrap.dedent(
    """
    from smdebug.rules import Rule


    class VanishingGradientRule(Rule):
        def __init__(self, base_trial, threshold=0.0000001):
            super().__init__(base_trial, action_str="")
            self.threshold = float(threshold)

        def set_required_tensors(self, step):
            for tname in self.base_trial.tensor_names(collection="gradients"):
                self.req_tensors.add(tname, steps=[step])

        def invoke_at_step(self, step):
            for tensor in self.req_tensors.get():
                abs_mean = tensor.reduction_value(step, "mean", abs=True)
                if abs_mean < self.threshold:
                    return True
                else:
                    return False
    """
)

SMDEBUG_SIDE = """
import importlib.util, time
from smdebug.trials import create_trial
from smdebug.rules import invoke_rule
from smdebug.exceptions import RuleEvaluationConditionMet

spec = importlib.util.spec_from_file_location("vg_rule", INPUT["rule_file"])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
walls, cpus = [], []
for _ in range(INPUT["repeat"]):
    t0, c0 = time.perf_counter(), time.process_time()
    trial = create_trial(INPUT["trial"])
    rule = mod.VanishingGradientRule(trial, threshold=INPUT["threshold"])
    fired = []
    step = 0
    while step < INPUT["steps"]:  # invoke_rule with raise_eval_cond=True stops at a fire: resume after it
        try:
            invoke_rule(rule, start_step=step, end_step=INPUT["steps"], raise_eval_cond=True)
            break
        except RuleEvaluationConditionMet as e:
            fired.append(e.step)
            step = e.step + 1
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
emit({"seconds": min(walls), "cpu": min(cpus), "fired": fired})
"""

OURS_SIDE = """
import json, sys, time
from tornasole.rules import invoke_rule
from tornasole.rules.loader import create_custom_rule
from tornasole.trials import create_trial

args = json.loads(sys.argv[1])
walls, cpus = [], []
for _ in range(args["repeat"]):
    t0, c0 = time.perf_counter(), time.process_time()
    trial = create_trial(args["trial"])
    rule = create_custom_rule(args["rule_file"], "VanishingGradientRule", trial, threshold=args["threshold"])
    summary = invoke_rule(rule, start_step=0, end_step=args["steps"])
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
print(json.dumps({"seconds": min(walls), "cpu": min(cpus), "fired": summary.fired_steps}))
"""


def generate(trial_dir: str, steps: int, tensors: int, size: int, vanish_at: int) -> None:
    from tornasole.core.collection import Collection
    from tornasole.format.writer import TrialWriter
    from tornasole.modes import TRAIN

    rng = np.random.default_rng(0)
    base = [rng.normal(0, 1e-2, size).astype(np.float32) for _ in range(tensors)]
    tw = TrialWriter(trial_dir)
    tw.write_collections(
        {"gradients": Collection("gradients", include_regex=["^gradients/"]).to_json_dict()}, 1
    )
    for step in range(steps):
        sw = tw.step_writer(step, mode=TRAIN, mode_step=step)
        scale = 1e-9 if step >= vanish_at else 1.0
        for i, g in enumerate(base):
            sw.add_tensor(f"gradients/layer{i}.weight", g * scale, wall_time=1.7e9 + step)
        tw.write_step(sw)
    tw.write_end_marker()


def run_ours(inputs: dict, timeout: float) -> dict:
    env = child_env()
    env.update({"TORNASOLE_TRAINING_END_DELAY_REFRESH": "0", "PYTHONPATH": str(REPO / "layers")})
    proc = subprocess.run(
        [sys.executable, "-c", OURS_SIDE, json.dumps(inputs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"our side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--tensors", type=int, default=10)
    ap.add_argument("--size", type=int, default=1000, help="elements per gradient tensor")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side; the best is reported")
    ap.add_argument("--timeout", type=float, default=170, help="seconds per side")
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args(argv)

    check_smdebug_venv()
    tmp = tempfile.mkdtemp(prefix="rules-bench-", dir=args.tmp)
    try:
        trial_dir = os.path.join(tmp, "run")
        rule_file = os.path.join(tmp, "vanishing_gradient_rule.py")
        Path(rule_file).write_text(RULE_FILE, encoding="utf-8")
        vanish_at = int(args.steps * 0.9)
        t0 = time.perf_counter()
        generate(trial_dir, args.steps, args.tensors, args.size, vanish_at)
        print(
            f"wrote {args.steps} steps x {args.tensors} gradients of {args.size} float32 in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        inputs = {
            "trial": trial_dir,
            "rule_file": rule_file,
            "threshold": "0.0001",
            "steps": args.steps,
            "repeat": args.repeat,
        }
        ours = run_ours(inputs, args.timeout)
        theirs = run_smdebug(SMDEBUG_SIDE, inputs, timeout=args.timeout).data
        for name, res in (("ours", ours), ("smdebug", theirs)):
            first = res["fired"][0] if res["fired"] else None
            print(
                f"{name}: best of {args.repeat}: {res['seconds']:.2f} s wall, {res['cpu']:.2f} s CPU, "
                f"fired at {len(res['fired'])} steps, first {first}"
            )
        if ours["fired"] != theirs["fired"]:
            print("MISMATCH: the two implementations fired at different steps", file=sys.stderr)
            return 1
        ratio = theirs["seconds"] / ours["seconds"]
        cpu_ratio = theirs["cpu"] / ours["cpu"]
        print(
            f"rules: ours {ours['seconds']:.2f} s, smdebug {theirs['seconds']:.2f} s, ratio {ratio:.1f}x "
            f"(CPU time ratio {cpu_ratio:.1f}x; target >= 10x)"
        )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
