"""Reading trials: ``create_trial`` and the Trial / Tensor analysis API (smdebug's names).

Floor plan: imported by rules, the evaluator, pytorch, cli and demo; imports format, core, storage
and below, never hooks.

Examples
--------
>>> from tornasole.trials import create_trial
>>> trial = create_trial("/tmp/run")  # doctest: +SKIP
>>> trial.tensor("CrossEntropyLoss_output_0").values()  # doctest: +SKIP
"""

from __future__ import annotations

from tornasole.trials.create import LocalTrial, S3Trial, create_trial
from tornasole.trials.step_index import StepState
from tornasole.trials.tensor import Tensor
from tornasole.trials.trial import Trial

__all__ = ["create_trial", "Trial", "LocalTrial", "S3Trial", "StepState", "Tensor"]
