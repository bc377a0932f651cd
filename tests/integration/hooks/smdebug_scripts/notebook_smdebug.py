"""Notebook-style analysis and a rule run, written against smdebug (run with the alias)."""

import json
import sys

from smdebug import modes
from smdebug.exceptions import RuleEvaluationConditionMet, StepUnavailable
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.trials import create_trial

sys.path.insert(0, sys.argv[2])
from loss_rule import LossAboveThreshold  # noqa: E402

trial = create_trial(sys.argv[1])
loss_name = trial.tensor_names(collection="losses")[0]
loss = trial.tensor(loss_name)
result = {
    "steps": trial.steps(),
    "train_steps": trial.steps(mode=modes.TRAIN),
    "eval_steps": trial.steps(mode=modes.EVAL),
    "loss_name": loss_name,
    "weights": sorted(trial.tensor_names(collection="weights")),
    "has_gradients": bool(trial.tensor_names(regex="^gradient/")),
}
try:
    loss.value(1)
    result["step1"] = "saved"
except StepUnavailable:
    result["step1"] = "unavailable"
try:
    invoke_rule(
        LossAboveThreshold(trial, threshold=1000.0), start_step=0, end_step=None, raise_eval_cond=True
    )
    result["fired_at"] = None
except RuleEvaluationConditionMet as exc:
    result["fired_at"] = exc.step
print(json.dumps(result))
