"""LearningRateDiscontinuity on step schedules (issue #29, families benchmark: the cnn, regression and conv1d
recipes' step drop after a warmup fired on all 12 of their saved-rate runs). ``StepLR``, ``MultiStepLR``
and ``ReduceLROnPlateau`` multiply the rate by ``gamma`` and hold it; a resume that lost the scheduler's
state restarts the warmup, whose rate climbs again. The drop is judged at the rate's next change: a
restart fires one saved step after its drop (at the end of the held epoch for a warmup stepped per
epoch), never at the drop itself, which the rule cannot tell from a milestone until then. A rate zeroed
by a bug still fires at the drop. The "quiet" tests fail on the rule before the change, which fired on
every drop by more than 3x."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rules_helpers import torch_lrs
from torch import nn

import tornasole.pytorch as ts
from tornasole.rules import create_rule, invoke_rule
from tornasole.trials import create_trial

RULE = "LearningRateDiscontinuity"


def _first_firing(rule, steps) -> int | None:
    return next((s for s in steps if rule.evaluate(s).fired), None)


def _trial(trial_factory, lrs: list[float], every: int = 1, end: bool = True):
    """``scalar/lr/0`` (the PyTorch hook's name for the first group's rate) saved every ``every`` steps."""
    return trial_factory(
        {s: {"scalar/lr/0": np.float32(v)} for s, v in enumerate(lrs) if s % every == 0}, end=end
    )


def _warmup_then_cosine(steps: int, warmup: int = 10, peak: float = 1e-3) -> list[float]:
    """Linear warmup from ``peak / warmup`` (Megatron-LM's and the LM families' shape), then a cosine."""
    return [
        peak * (s + 1) / warmup
        if s < warmup
        else peak * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup)))
        for s in range(steps)
    ]


@pytest.mark.parametrize("every", [1, 5])
@pytest.mark.parametrize(
    "make_scheduler",
    [
        lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1),
        lambda opt: torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[40, 70, 90], gamma=0.1),
        lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=25, gamma=0.3),  # the families' gamma
    ],
    ids=["StepLR-0.1", "MultiStepLR-0.1", "StepLR-0.3"],
)
def test_step_schedule_drops_are_quiet(trial_factory, make_scheduler, every):
    lrs = torch_lrs(make_scheduler, 120, peak=0.1)
    assert max(a / b for a, b in zip(lrs, lrs[1:])) > 3  # the premise: a drop by more than 3x
    trial = _trial(trial_factory, lrs, every)
    assert _first_firing(create_rule(RULE, trial), range(0, 120, every)) is None


def test_reduce_on_plateau_drops_are_quiet(trial_factory):
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.1, patience=5)
    lrs = []
    for _ in range(60):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step(1.0)  # a loss that never improves: the rate falls 10x every 6 steps
    assert lrs[-1] < 1e-4
    assert _first_firing(create_rule(RULE, _trial(trial_factory, lrs)), range(60)) is None


@pytest.mark.parametrize("every", [1, 4])
def test_a_warmup_from_zero_then_a_step_drop_is_quiet(trial_factory, every):
    # the families' warmup_from_zero recipe: 0 to 0.05 over 72 optimiser steps, held, x0.3 at step 110
    lrs = [0.05 * min(s, 72) / 72 for s in range(110)] + [0.015] * 100
    rule = create_rule(RULE, _trial(trial_factory, lrs, every))
    assert _first_firing(rule, range(0, 210, every)) is None


@pytest.mark.parametrize(("every", "fires_at"), [(1, 61), (4, 64)])
def test_a_resume_that_restarts_the_warmup_fires_at_the_next_saved_step(trial_factory, every, fires_at):
    # resumed at step 60 without the scheduler's state: the warmup starts over at peak / 10 and climbs
    lrs = _warmup_then_cosine(100)[:60] + _warmup_then_cosine(100)[:40]
    rule = create_rule(RULE, _trial(trial_factory, lrs, every))
    assert _first_firing(rule, range(0, 100, every)) == fires_at
    outcome = rule.evaluate(fires_at)
    assert outcome.values["criterion"] == "drop"
    assert outcome.values["drop_step"] == 60
    assert "climbed again" in outcome.details


def test_a_restart_is_not_judged_before_its_next_step_lands(trial_factory):
    """As the serverless evaluator sees a run: the drop's step is evaluated before the next one is written.
    It does not fire there (a milestone looks the same); once the next step lands, that step fires, as
    over the whole trial."""
    lrs = _warmup_then_cosine(100)[:60] + _warmup_then_cosine(100)[:40]
    so_far = _trial(trial_factory, lrs[:61], end=False)  # steps 0..60: the drop has landed, nothing after
    assert _first_firing(create_rule(RULE, so_far), range(61)) is None
    one_more = _trial(trial_factory, lrs[:62], end=False)
    assert _first_firing(create_rule(RULE, one_more), range(62)) == 61
    whole = _trial(trial_factory, lrs)
    assert invoke_rule(create_rule(RULE, whole)).first_step == 61


def test_a_rate_zeroed_by_a_bug_fires_at_the_drop(trial_factory):
    lrs = _warmup_then_cosine(100)[:40] + [0.0] * 20
    rule = create_rule(RULE, _trial(trial_factory, lrs))
    assert _first_firing(rule, range(60)) == 40
    assert "zeroed" in rule.evaluate(40).details
    # a drop to a small rate that stays there reads as a milestone: the loss and update rules' to see
    held = _warmup_then_cosine(100)[:40] + [1e-7] * 20
    assert _first_firing(create_rule(RULE, _trial(trial_factory, held)), range(60)) is None


def test_a_planned_restart_is_quiet_through_its_warmup(trial_factory):
    lrs = _warmup_then_cosine(100)[:60] + _warmup_then_cosine(100)[:40]
    trial = _trial(trial_factory, lrs)
    # without the declaration the climb past 0.1 of the peak would also read as a rise after the peak
    assert _first_firing(create_rule(RULE, trial, allow_drops="true"), range(100)) == 62
    assert _first_firing(create_rule(RULE, trial, planned_steps="60"), range(100)) is None


def _hook_run(path, scheduler, restart_at: int | None = None, steps: int = 40) -> None:
    """A real model trained with the PyTorch hook in statistics mode (it saves ``scalar/lr/<group>`` of the
    registered optimiser every step); ``restart_at``: the scheduler is rebuilt there, as a resume that did
    not load its state_dict does."""
    torch.manual_seed(0)
    model, loss_fn = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = scheduler(opt)
    hook = ts.Hook(str(path), statistics=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        if step == restart_at:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"]
            sched = scheduler(opt)
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    hook.close()


def _warmup(opt):  # linear warmup over 10 steps from a tenth of the rate, then held
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))


def _warmup_then_steps(opt):  # the same warmup, then x0.1 every 8 steps
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 10) * 0.1 ** (max(0, s - 9) // 8)
    )


def test_the_pytorch_hook_s_saved_rate_step_drops_quiet_restart_fires(tmp_path):
    _hook_run(tmp_path / "steps", _warmup_then_steps)
    trial = create_trial(str(tmp_path / "steps"))
    saved = [float(trial.tensor("scalar/lr/0").value(s)) for s in trial.steps()]
    assert any(b > 3 * a for a, b in zip(saved[1:], saved))  # the hook saw the 10x drops
    assert invoke_rule(create_rule(RULE, trial)).fired == []

    _hook_run(tmp_path / "restart", _warmup, restart_at=25)
    trial = create_trial(str(tmp_path / "restart"))
    saved = {s: float(trial.tensor("scalar/lr/0").value(s)) for s in trial.steps()}
    drop = next(s for s in sorted(saved)[1:] if saved[s] * 3 < saved[s - 1])
    outcome = invoke_rule(create_rule(RULE, trial))
    assert outcome.first_step == drop + 1
    assert f"at step {drop} " in outcome.fired[0].details
