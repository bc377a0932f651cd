"""``save_scalar`` at a step the save config does not save: kept until the step ends, and written at that
step when it is the last one of its mode (a mode switch or ``close`` ends it).

smdebug never drops a ``save_scalar`` value (it caches them into the next writer, at the wrong step,
FORMAT.md 7.4). Sampling per-step scalars like any other collection is fine, but a value given after the
last saved step of a phase (an end-of-training metric, before ``set_mode(EVAL)`` or ``close``) would never
be written at all: those are written at the step and mode they were given in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole import Hook, SaveConfig, SaveConfigMode, modes
from tornasole.trials import create_trial


def _train(hook: ts.Hook, model: nn.Module, steps: int) -> None:
    for _ in range(steps):
        model(torch.ones(2, 3)).sum().backward()


@pytest.mark.parametrize(
    "save_config",
    [
        SaveConfig(save_steps=[0, 2, 4, 6, 8]),
        SaveConfig(
            mode_save_configs={
                modes.TRAIN: SaveConfigMode(save_interval=2),
                modes.GLOBAL: SaveConfigMode(save_interval=3),
                modes.EVAL: SaveConfigMode(save_interval=1),
            }
        ),
    ],
)
def test_pytorch_scalar_after_the_last_saved_train_step_is_written_at_its_step(tmp_path: Path, save_config):
    model = nn.Linear(3, 1)
    hook = ts.Hook(str(tmp_path), save_config=save_config, include_collections=["scalars"])
    hook.register_module(model)
    hook.save_scalar("before_train", 1.0)
    hook.set_mode(modes.TRAIN)
    _train(hook, model, 10)
    hook.save_scalar("after_train", 2.0, timestamp=1234.5)
    hook.set_mode(modes.EVAL)
    with torch.no_grad():
        for _ in range(3):
            model(torch.ones(2, 3))
    hook.close()

    trial = create_trial(str(tmp_path))
    after = trial.tensor("scalar/after_train")
    # the last TRAIN step (mode step 9, global step 9), not an EVAL step
    assert after.steps() == [9]
    assert after.steps(mode=modes.TRAIN) == [9]
    assert float(after.value(9)[0]) == 2.0
    assert trial.tensor("scalar/before_train").steps(mode=modes.TRAIN) == [0]
    assert set(trial.tensor_names(regex="^scalar")) == {"scalar/before_train", "scalar/after_train"}


def test_scalar_given_at_an_unsaved_step_in_mid_run_is_still_sampled(tmp_path: Path):
    # per-step values keep following the save config: only the last step of a mode keeps its own
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=3)) as hook:
        hook.set_mode(modes.TRAIN)
        for i in range(5):
            hook.save_scalar("lr", float(i))
            hook.next_step()
        hook.save_scalar("lr", 50.0)  # TRAIN step 5: the last of its mode
        hook.set_mode(modes.EVAL)
        hook.save_scalar("acc", 0.5)  # EVAL step 0: saved anyway
        hook.next_step()
        hook.save_scalar("acc", 0.7)  # EVAL step 1, ended by close
    lr = create_trial(str(tmp_path)).tensor("scalar/lr")
    assert lr.steps(mode=modes.TRAIN) == [0, 3, 5]
    assert float(lr.value(5)[0]) == 50.0
    acc = create_trial(str(tmp_path)).tensor("scalar/acc")
    assert acc.steps(mode=modes.EVAL) == [0, 1]
    assert [float(acc.value(s, mode=modes.EVAL)[0]) for s in (0, 1)] == [0.5, 0.7]


def test_the_latest_value_of_a_name_is_the_one_kept(tmp_path: Path):
    with Hook(str(tmp_path), save_config=SaveConfig(save_interval=10)) as hook:
        hook.next_step()
        hook.save_scalar("x", 1.0)
        hook.save_scalar("x", np.float32(3.0))
    x = create_trial(str(tmp_path)).tensor("scalar/x")
    assert x.steps() == [1]
    assert float(x.value(1)[0]) == 3.0


def test_pytorch_scalar_after_set_mode_without_another_forward_is_written_at_close(tmp_path: Path):
    # no step is open after set_mode: the value joins the step that would have come next (EVAL step 0)
    model = nn.Linear(3, 1)
    hook = ts.Hook(str(tmp_path), save_config=SaveConfig(save_interval=2))
    hook.register_module(model)
    hook.set_mode(modes.TRAIN)
    _train(hook, model, 3)
    hook.set_mode(modes.EVAL)
    hook.save_scalar("final_accuracy", 0.9)
    hook.close()
    trial = create_trial(str(tmp_path))
    acc = trial.tensor("scalar/final_accuracy")
    assert acc.steps() == [3]
    assert acc.steps(mode=modes.EVAL) == [0]
    assert float(acc.value(0, mode=modes.EVAL)[0]) == pytest.approx(0.9)


def test_pytorch_deferred_scalar_at_an_unsaved_last_step_of_its_mode_is_written(tmp_path: Path):
    # given before the first EVAL forward, it joins EVAL step 0; the save config skips EVAL step 0..2,
    # but the run closes after EVAL step 0: written there
    model = nn.Linear(3, 1)
    cfg = SaveConfig(mode_save_configs={modes.EVAL: SaveConfigMode(save_steps=[3])})
    hook = ts.Hook(str(tmp_path), save_config=cfg)
    hook.register_module(model)
    hook.set_mode(modes.EVAL)
    hook.save_scalar("eval_started", 1.0)
    with torch.no_grad():
        model(torch.ones(2, 3))
    hook.close()
    assert create_trial(str(tmp_path)).tensor("scalar/eval_started").steps(mode=modes.EVAL) == [0]
