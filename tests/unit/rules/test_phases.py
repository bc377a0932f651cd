"""Phases of a trial (runs of one mode) when some epochs have no saved TRAIN step."""

from __future__ import annotations

import numpy as np

from tornasole import Hook, SaveConfig, SaveConfigMode, modes
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.overfit import phases, trial_phases
from tornasole.rules.generic import StalledLoss
from tornasole.trials import create_trial


def _sparse_train_trial(path: str, train_loss: float, val_losses: list[float]):
    """4 epochs of 3 TRAIN steps (saved every 5th: TRAIN steps 0, 5, 10, so epoch 2 saves none) and a
    validation pass of 2 EVAL steps (all saved); global steps: epoch e is 5e..5e+2 TRAIN, 5e+3, 5e+4 EVAL."""
    save = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=5),
            modes.EVAL: SaveConfigMode(save_interval=1),
        }
    )
    with Hook(path, save_config=save, stop_check_interval=None) as hook:
        for val in val_losses:
            for mode, n, value in ((modes.TRAIN, 3, train_loss), (modes.EVAL, 2, val)):
                hook.set_mode(mode)
                for _ in range(n):
                    hook.save_tensor("loss", np.asarray(value, dtype=np.float32), "losses")
                    hook.next_step()
    return create_trial(path, collections_timeout=1.0, poll_interval=0.01)


def test_validation_passes_stay_apart_when_the_training_between_them_was_not_saved(tmp_path):
    trial = _sparse_train_trial(str(tmp_path / "a"), 0.5, [0.5, 0.5, 0.5, 0.5])
    steps = trial.tensor("loss").steps()
    assert steps == [0, 3, 4, 7, 8, 9, 13, 14, 16, 18, 19]
    # by saved modes alone, the passes of epochs 1 and 2 (steps 8, 9 and 13, 14) are one EVAL run
    assert [s for _, s in phases([(s, trial.mode(s)) for s in steps])][3] == [8, 9, 13, 14]
    # the global step advanced by 4 between 9 and 13 while the EVAL step advanced by 1: a new pass
    assert trial_phases(trial, steps) == [
        (modes.TRAIN, [0]),
        (modes.EVAL, [3, 4]),
        (modes.TRAIN, [7]),
        (modes.EVAL, [8, 9]),
        (modes.EVAL, [13, 14]),
        (modes.TRAIN, [16]),
        (modes.EVAL, [18, 19]),
    ]


def test_stalled_loss_counts_the_passes_apart(tmp_path):
    # the first pass is 2.0, the next three 1.0: the last three passes (epochs 1, 2, 3) are flat. Merging
    # the passes of epochs 1 and 2 would leave passes (3, 4), (8, 9, 13, 14), (18, 19): never three flat ones
    trial = _sparse_train_trial(str(tmp_path / "a"), 1.0, [2.0, 1.0, 1.0, 1.0])
    summary = invoke_rule(StalledLoss(trial, window="1"))
    first = summary.fired[0]
    assert first.step == 19  # the third flat pass, judged whole at its last step
    assert "(1 (steps 8..9), 1 (steps 13..14), 1 (steps 18..19); 2 saved step(s) each)" in first.details
