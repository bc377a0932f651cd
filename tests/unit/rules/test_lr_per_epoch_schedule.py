"""LearningRateDiscontinuity on a schedule stepped once per epoch (issue #29, families benchmark:
``warmup_from_zero`` in the softmax, transformer and resmlp families, whose recipes anneal per epoch): the
rate is held for an epoch's saved steps, and the cosine's last epochs fall by more than 3x each, by less
than the epoch before. That is a healthy tail, not a restart; a warmup restarted after a resume still
fires, mid-decay and after a flat stretch, once its held first epoch ends and the rate climbs again (a
drop alone is a step schedule's). The "quiet" test fails on the rule before the change, which
compared a fall with the zero change inside the held epoch."""

from __future__ import annotations

import math

import numpy as np

from tornasole.rules import create_rule

PER_EPOCH = 8  # saved steps per epoch


def _first_firing(rule, steps) -> int | None:
    return next((s for s in steps if rule.evaluate(s).fired), None)


def _per_epoch_cosine(epochs: int = 15, warmup: int = 2, peak: float = 1e-2) -> list[float]:
    """As the families' ``_lr_at``: a warmup of ``warmup`` epochs, then a cosine, held per epoch."""
    out = []
    for epoch in range(epochs):
        if epoch < warmup:
            lr = peak * (epoch + 1) / (warmup + 1)
        else:
            lr = peak * 0.5 * (1 + math.cos(math.pi * (epoch - warmup) / (epochs - warmup)))
        out += [lr] * PER_EPOCH
    return out


def _trial(trial_factory, lrs: list[float]):
    return trial_factory({s: {"scalar/lr/0": np.float32(v)} for s, v in enumerate(lrs)})


def test_a_cosine_stepped_per_epoch_is_quiet_to_its_last_epoch(trial_factory):
    lrs = _per_epoch_cosine()
    last, before = lrs[-1], lrs[-1 - PER_EPOCH]
    assert last * 3 < before  # the premise: the last epoch falls by more than max_drop_factor
    rule = create_rule("LearningRateDiscontinuity", _trial(trial_factory, lrs))
    assert _first_firing(rule, range(len(lrs))) is None


def test_a_warmup_restarted_mid_decay_of_a_per_epoch_cosine_still_fires(trial_factory):
    healthy = _per_epoch_cosine(warmup=5)  # the warmup starts at a sixth of the peak
    lrs = healthy[: 7 * PER_EPOCH] + healthy[: 8 * PER_EPOCH]  # resumed at epoch 7 without the scheduler
    rule = create_rule("LearningRateDiscontinuity", _trial(trial_factory, lrs))
    # the drop at epoch 7 is held for the epoch: judged when the restarted warmup climbs at epoch 8
    assert _first_firing(rule, range(len(lrs))) == 8 * PER_EPOCH
    outcome = rule.evaluate(8 * PER_EPOCH)
    assert outcome.values["criterion"] == "drop"
    assert outcome.values["drop_step"] == 7 * PER_EPOCH


def test_a_warmup_restarted_after_a_constant_rate_still_fires(trial_factory):
    # a warmup of 5 epochs then a constant rate; the resume restarts the warmup: the previous change was
    # the warmup's rise, so there is no previous fall to compare with
    warm = [1e-2 * (e + 1) / 6 for e in range(5) for _ in range(PER_EPOCH)]
    lrs = warm + [1e-2] * (4 * PER_EPOCH) + warm
    rule = create_rule("LearningRateDiscontinuity", _trial(trial_factory, lrs))
    assert _first_firing(rule, range(len(lrs))) == 10 * PER_EPOCH
    outcome = rule.evaluate(10 * PER_EPOCH)
    assert outcome.values["criterion"] == "drop"
    assert outcome.values["drop_step"] == 9 * PER_EPOCH
