"""LossSpike on a Keras trial (issue #29, held-out family attention_keras): the Keras hook's ``loss`` is the
batch logs' running mean over the epoch, smooth within an epoch and one batch's value again at the next
epoch's first batch. Against a window of smooth means that one raw batch is many standard deviations out;
where the hook also saved the batch's own loss (``batch_loss/<Kind>``), the rule judges that series instead,
as the published criteria read each step's own loss. A real spike in the batch loss still fires; a trial
without a batch loss, or with two, is judged on ``loss`` as before.

Traces: epochs of 400 TRAIN steps saved every 4th (the families' save interval), each step one batch of 4
of a converged classifier (batch losses drawn from an exponential of mean 0.004: most samples near 0, one
harder now and then), ``loss`` their running mean as Keras reports it, plus the hook's epoch-end save of the
logs at each epoch's last step (no batch loss there).
"""

from __future__ import annotations

import numpy as np

from tornasole.modes import TRAIN
from tornasole.rules import create_rule, recommended_rules

EPOCHS, PER_EPOCH, SAVE_INTERVAL = 4, 400, 4
BATCH_LOSS = "batch_loss/SparseCategoricalCrossentropy_from_logits"
COLLS = {"losses": ["(^|_)loss$"], "loss_inputs": ["^batch_loss/"]}
(CONFIG,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "LossSpike"]
PARAMS = {k: v for k, v in CONFIG["RuleParameters"].items() if k != "rule_to_invoke"}


def _batch_losses(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).exponential(0.004, EPOCHS * PER_EPOCH)


def _running_means(batch: np.ndarray) -> np.ndarray:
    """Keras's ``loss``: the mean of the epoch's batches so far (equal batch sizes)."""
    per_epoch = batch.reshape(EPOCHS, PER_EPOCH)
    return (np.cumsum(per_epoch, axis=1) / np.arange(1, PER_EPOCH + 1)).ravel()


def _trial(trial_factory, batch: np.ndarray, saved: tuple[str, ...] = (BATCH_LOSS,)):
    running = _running_means(batch)
    steps = {}
    for s, (b, m) in enumerate(zip(batch, running)):
        epoch_end = s % PER_EPOCH == PER_EPOCH - 1
        if s % SAVE_INTERVAL and not epoch_end:
            continue
        tensors = {"loss": np.float32(m)}
        if not epoch_end:  # the epoch-end save of the logs holds no batch loss
            tensors.update({name: np.float32(b) for name in saved})
        steps[s] = (TRAIN, s, tensors)
    return trial_factory(steps, COLLS)


def _first_firing(trial) -> tuple[int | None, str]:
    rule = create_rule("LossSpike", trial, **PARAMS)
    for s in trial.steps():
        out = rule.evaluate(s)
        if out.fired:
            return s, out.details
    return None, ""


def test_an_epochs_first_batch_is_a_spike_only_against_running_means(trial_factory):
    batch = _batch_losses()
    at = 3 * PER_EPOCH  # the first batch of the fourth epoch: a batch twice the running mean
    batch[at] = 0.0072
    running = _running_means(batch)
    window = running[at - 128 * SAVE_INTERVAL : at : SAVE_INTERVAL]  # the saved running means before it
    # the premise: 0.0072 is far out against the running means (z > 6, 5x their largest rise), not against
    # the saved batches (below the window's largest batch loss)
    z = (running[at] - window.mean()) / window.std()
    assert z > 6, z
    assert running[at] - window.mean() > 5 * (window.max() - window.mean())
    assert batch[at] < batch[at - 128 * SAVE_INTERVAL : at : SAVE_INTERVAL].max()
    without = _trial(trial_factory, batch, saved=())
    assert _first_firing(without)[0] == at  # the running mean alone: the alarm the family saw
    assert _first_firing(_trial(trial_factory, batch)) == (None, "")


def test_a_real_spike_in_the_batch_loss_fires_and_names_it(trial_factory):
    batch = _batch_losses()
    at = 3 * PER_EPOCH + 8 * SAVE_INTERVAL
    batch[at] = 1.4  # back to chance (ln 4) on one batch: a bad batch
    step, details = _first_firing(_trial(trial_factory, batch))
    assert step == at
    assert details.startswith(f"LossSpike: condition met at step {at}")
    assert f"{BATCH_LOSS} = 1.4 at step {at}" in details


def test_two_batch_losses_leave_the_running_mean_judged(trial_factory):
    batch = _batch_losses()
    at = 3 * PER_EPOCH
    batch[at] = 0.0072
    two = _trial(trial_factory, batch, saved=(BATCH_LOSS, "batch_loss/MeanSquaredError"))
    assert _first_firing(two)[0] == at  # no one kind describes the step's loss: judged as saved
