"""EarlyLossDivergence: a training loss that climbs far above its start (Bengio 2012: the learning rate too
high), on runs saved by the PyTorch hook (the fault, and the healthy schedules it must stay quiet on) and by
the numpy hook (what it does not judge)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule

CLASSES = 4


def _data():
    import torch

    g = torch.Generator().manual_seed(0)
    centres = torch.randn(CLASSES, 8, generator=g) * 2
    y = torch.randint(0, CLASSES, (512,), generator=g)
    x = centres[y] + torch.randn(512, 8, generator=g)
    return (x - x.mean(0)) / x.std(0), y


def _run(path, opt_name: str, lr: float, steps: int = 48, schedule: str = ""):
    """A residual LayerNorm MLP on four blobs, batches of 32, saved by the PyTorch hook every 2 steps (TRAIN)
    with a validation pass every 16 steps; ``schedule``: "" (constant), "warmup" (linear from 0 over 16
    steps) or "onecycle" (``OneCycleLR`` per step)."""
    import torch
    from torch import nn

    from tornasole import SaveConfigMode, modes
    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Linear(8, 32)
            self.norm = nn.LayerNorm(32)
            self.fc = nn.Linear(32, 32)
            self.out = nn.Linear(32, CLASSES)

        def forward(self, x):
            h = self.stem(x)
            h = h + self.fc(torch.relu(self.norm(h)))
            return self.out(h)

    model, loss_fn = Net(), nn.CrossEntropyLoss()
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    sched = None
    if schedule == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    elif schedule == "warmup":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 16))
    hook = Hook(
        str(path),
        save_config=SaveConfig(
            mode_save_configs={
                modes.TRAIN: SaveConfigMode(save_interval=2),
                modes.EVAL: SaveConfigMode(save_interval=1),
            }
        ),
        include_collections=["weights", "gradients", "losses"],
        stop_check_interval=None,
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x, y = _data()
    for s in range(steps):
        model.train()
        hook.set_mode(modes.TRAIN)
        idx = slice((s * 32) % 384, (s * 32) % 384 + 32)
        opt.zero_grad()
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
        if sched is not None:
            sched.step()
        if (s + 1) % 16 == 0:
            model.eval()
            hook.set_mode(modes.EVAL)
            with torch.no_grad():
                loss_fn(model(x[384:]), y[384:])
    hook.close()
    return create_trial(str(path), collections_timeout=0.1, poll_interval=0.01)


def _fired(trial, **params):
    return invoke_rule(create_rule("EarlyLossDivergence", trial, **params)).fired


def test_adamw_at_a_rate_far_too_high_fires_early_and_says_what_to_do(tmp_path):
    # this net's loss is still 7x chance at the second pass (9.5x, 7.0x, then 1.09x): not stalled at chance,
    # so only the first pass confirms it (stalled_passes=0); the default's stall is the synthetic tests' below
    fired = _fired(_run(tmp_path, "adamw", 1.0), stalled_passes="0")
    assert fired
    first = fired[0]
    assert first.step <= 20  # the first TRAIN step after the first validation pass (after step 15)
    assert "CrossEntropyLoss_output_0" in first.details
    assert f"chance level {math.log(CLASSES):.4g}" in first.details
    assert "learning rate is too high" in first.details
    assert "lower the learning rate" in first.details


@pytest.mark.parametrize(
    ("opt_name", "lr", "schedule"),
    [
        ("adamw", 3e-3, ""),  # the recipe's rate
        ("adamw", 3e-2, "warmup"),  # a linear warmup from 0
        ("adamw", 3e-2, "onecycle"),  # a one-cycle peak at 10x the usual rate
        ("sgd", 0.1, ""),  # SGD with momentum at 0.1: a rate UMLAUT's lr > 0.01 would flag
    ],
)
def test_healthy_schedules_stay_quiet(tmp_path, opt_name, lr, schedule):
    trial = _run(tmp_path, opt_name, lr, schedule=schedule)
    assert not _fired(trial)


def _ce(train: list[list[float]], passes: list[list[float]] | None = None) -> object:
    """Epochs of TRAIN steps saving ``loss`` and an output-layer gradient (``train[k]``), each followed by a
    validation pass of ``passes[k]`` (the numpy hook names the loss ``loss``, so the kind is given as
    ``num_classes``/``chance_loss``); written to the ``path`` the caller binds."""

    def step(v: float) -> dict:
        return {"loss": v, "gradients/out.bias": np.zeros(CLASSES)}

    passes = (passes or []) + [[] for _ in range(len(train) - len(passes or []))]
    return lambda path: epochs(
        path, [[step(v) for v in e] for e in train], [[{"loss": v} for v in p] for p in passes]
    )


CHANCE = math.log(CLASSES)
#: a climb to 2.3x chance at the second step, then back to chance
CLIMB = [CHANCE, 2.3 * CHANCE, 1.1 * CHANCE, CHANCE]


def test_a_divergence_that_stalls_at_chance_fires_after_the_pass_that_shows_the_stall(tmp_path):
    # resmlp's AdamW x100: the first pass 1.13x chance, the second 1.006x, the loss flat at chance between
    train = [CLIMB, [CHANCE, 1.02 * CHANCE, CHANCE, CHANCE], [CHANCE, 0.95 * CHANCE]]
    passes = [[1.15 * CHANCE, 1.1 * CHANCE], [1.01 * CHANCE, 0.99 * CHANCE]]
    stuck = _ce(train, passes)(str(tmp_path / "stuck"))
    (fired,) = _fired(stuck, num_classes=str(CLASSES))[:1]
    # TRAIN 0-3 are global steps 0-3, the first pass 4-5, TRAIN 4-7 are 6-9, the second pass 10-11, then 12
    assert fired.step == 12
    assert "is 2.3x its start" in fired.details
    assert "no better than chance" in fired.details
    assert "the model stalled" in fired.details
    # the previous criterion (the first pass alone) fires one epoch earlier, at the first TRAIN step after it
    (early,) = _fired(stuck, num_classes=str(CLASSES), stalled_passes="0")[:1]
    assert early.step == 6
    # a model still at chance needs two such passes after the confirming one with stalled_passes=2
    assert not _fired(stuck, num_classes=str(CLASSES), stalled_passes="2")


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (0.92, "below chance: it learns (run.py's hard_slow_sigmoid_sgd s1: 1.00x, then 0.92x)"),
        (1.74, "far above chance, still moving (hard_slow_sigmoid_sgd s0: 2.6x, 1.74x, then 0.95x)"),
    ],
)
def test_a_divergence_the_model_survives_stays_quiet(tmp_path, second, why):
    train = [CLIMB, [1.5 * CHANCE, 1.2 * CHANCE, CHANCE, 0.9 * CHANCE], [0.5 * CHANCE, 0.4 * CHANCE]]
    passes = [[1.05 * CHANCE, 1.0 * CHANCE], [second * CHANCE, second * CHANCE]]
    trial = _ce(train, passes)(str(tmp_path / "survived"))
    assert not _fired(trial, num_classes=str(CLASSES)), why
    # the previous criterion, the first pass alone (at chance), cried wolf on it
    assert _fired(trial, num_classes=str(CLASSES), stalled_passes="0")
    # a wider band would take 0.92x for a stall; 1.74x is never within it
    assert bool(_fired(trial, num_classes=str(CLASSES), chance_tolerance="0.1")) == (second < 1)


def test_a_model_better_than_chance_by_the_first_pass_is_quiet_and_bare_runs_need_no_pass(tmp_path):
    recovered = _ce([CLIMB, [CHANCE, CHANCE]], [[0.6 * CHANCE, 0.5 * CHANCE], [CHANCE]])(str(tmp_path / "r"))
    assert not _fired(recovered, num_classes=str(CLASSES))
    assert not _fired(recovered, num_classes=str(CLASSES), stalled_passes="0")
    # without a validation pass nothing confirms it, unless asked to fire at the divergence itself
    bare = _ce([CLIMB + [CHANCE, CHANCE]])(str(tmp_path / "bare"))
    assert not _fired(bare, num_classes=str(CLASSES))
    (at_once,) = _fired(bare, num_classes=str(CLASSES), confirm_by_validation="False")[:1]
    assert at_once.step == 1


def _stalled(train: list[float], split: int = 4) -> object:
    """``train`` split into an epoch of ``split`` steps and the rest, each followed by a pass at chance, and a
    last TRAIN step (where the rule judges the second pass)."""
    return _ce([train[:split], train[split:], [CHANCE]], [[CHANCE], [CHANCE]])


def test_the_start_is_the_larger_of_chance_and_the_first_loss(tmp_path):
    # a high start (He's output layer: 2.5x chance) that keeps climbing to 4x chance: 1.6x its start
    high_start = _stalled([2.5 * CHANCE, 4.0 * CHANCE, 2.0 * CHANCE, CHANCE, CHANCE])
    trial = high_start(str(tmp_path / "a"))
    assert not _fired(trial, num_classes=str(CLASSES))
    assert _fired(trial, num_classes=str(CLASSES), factor="1.5")
    rise = _stalled([CHANCE, 2.3 * CHANCE, CHANCE, CHANCE, CHANCE])(str(tmp_path / "b"))
    assert _fired(rise, num_classes=str(CLASSES))
    assert not _fired(rise, num_classes=str(CLASSES), factor="2.5")


def test_only_the_first_within_steps_are_judged(tmp_path):
    late = [CHANCE] + [0.9 * CHANCE] * 12 + [3 * CHANCE, CHANCE]  # a late spike is LossSpike's
    trial = _stalled(late, split=14)(str(tmp_path / "late"))
    assert not _fired(trial, num_classes=str(CLASSES), within_steps="12")
    assert _fired(trial, num_classes=str(CLASSES), within_steps="14")


def test_unknown_levels_and_non_finite_losses_are_not_judged(tmp_path):
    # a loss whose kind the name does not say (the numpy hook's ``loss``) and no num_classes: no chance level
    unknown = _ce([[1.0, 5.0, 5.0, 5.0], [5.0], [1.0]], [[1.0], [1.02]])(str(tmp_path / "u"))
    assert not _fired(unknown)
    assert _fired(unknown, chance_loss="1.0")
    nan = _ce([[1.0, float("nan"), float("inf"), 1.0], [1.0], [1.0]], [[1.0], [1.0]])(str(tmp_path / "n"))
    assert not _fired(nan, chance_loss="1.0")


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("factor", "1"),
        ("within_steps", "0"),
        ("num_classes", "1"),
        ("chance_loss", "0"),
        ("confirm_by_validation", "maybe"),
        ("stalled_passes", "-1"),
        ("chance_tolerance", "1"),
    ],
)
def test_bad_parameters_name_the_parameter(tmp_path, param, value):
    trial = _ce([[1.0, 1.0]])(str(tmp_path / "p"))
    with pytest.raises(RuleParameterError, match=param):
        create_rule("EarlyLossDivergence", trial, **{param: value})
