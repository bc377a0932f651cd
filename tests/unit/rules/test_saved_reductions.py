"""Rules read reductions saved from numpy (shape (1,), as smdebug's core writer and our numpy hook save them).

Why: numpy 2.4 refuses ``float()`` of a 1-d array, so a rule doing ``float(reduction_value(...))`` crashed
on every trial whose reductions were saved without the raw tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tornasole import Hook, ReductionConfig, SaveConfig
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.tensor_variance import TensorVariance
from tornasole.rules.builtin.vanishing_gradient import VanishingGradient
from tornasole.trials import create_trial


def _reductions_only_run(out: Path) -> None:
    hook = Hook(
        out_dir=str(out),
        save_config=SaveConfig(save_interval=1),
        reduction_config=ReductionConfig(
            reductions=["variance"], abs_reductions=["mean"], save_raw_tensor=False
        ),
    )
    rng = np.random.default_rng(0)
    for step in range(3):
        scale = 1e-9 if step == 2 else 1e-2  # the gradient vanishes at step 2
        hook.save_tensor("gradient/fc.weight", rng.normal(0, scale, (4, 4)).astype(np.float32), "gradients")
        hook.next_step()
    hook.close()


def test_rules_judge_reductions_saved_as_one_element_arrays(tmp_path: Path) -> None:
    _reductions_only_run(tmp_path)
    trial = create_trial(str(tmp_path))
    saved = trial.tensor("gradient/fc.weight").reduction_value(0, "mean", abs=True)
    assert np.asarray(saved).shape == (1,)
    assert invoke_rule(VanishingGradient(trial, threshold="1e-7")).fired_steps == [2]
    variance = TensorVariance(trial, collection_names="gradients", max_threshold="1.0", min_threshold="1e-12")
    assert invoke_rule(variance).fired_steps == [2]
