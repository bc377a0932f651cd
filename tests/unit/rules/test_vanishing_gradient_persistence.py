"""VanishingGradient's ``persist_steps``: an epoch's last batch of two samples through a BatchNorm zeroes
every gradient before it for that one batch (a healthy pattern of the families benchmark's batch-4
regressions);
gradients that vanish for good are still reported, at step 0 when they vanish from the start."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.rules.generic import VanishingGradient


def _two_sample_tail_batch_run(tmp_path):
    """A real PyTorch run saved by the PyTorch hook at every step: Linear -> BatchNorm -> ReLU -> Linear, MSE,
    18 samples in batches of 4 (each epoch ends on a batch of 2), 3 epochs. Its inputs are unscaled (x30), so
    the two samples of a tail batch lie far apart before the BatchNorm, as in the benchmark: its eps (1e-5)
    then leaves that layer a gradient below 1e-7."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(9)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    loss_fn = nn.MSELoss()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = (
        30 * torch.randn(18, 4),
        torch.randn(18, 1),
    )  # features far apart: the eps of the BatchNorm negligible
    tails = []
    step = 0
    for _ in range(3):
        for b in range(0, 18, 4):
            opt.zero_grad()
            loss_fn(model(x[b : b + 4]), y[b : b + 4]).backward()
            opt.step()
            if b + 4 >= 18:
                tails.append(step)
            step += 1
    hook.close()
    return create_trial(str(tmp_path), collections_timeout=0.1, poll_interval=0.01), tails


def test_a_two_sample_batch_through_batchnorm_is_not_a_vanishing_gradient(tmp_path):
    trial, tails = _two_sample_tail_batch_run(tmp_path)
    first = "gradient/Sequential_0.weight"
    assert first in trial.tensor_names()
    # the pattern: the layer before the BatchNorm, weight and bias, gets ~0 on the two-sample batch only
    for tail in tails:
        assert np.abs(trial.tensor(first).value(tail)).mean() < 1e-7
        assert np.abs(trial.tensor(first).value(tail - 1)).mean() > 1e-4
    fired = invoke_rule(VanishingGradient(trial, bias_by_layer="True")).fired
    assert fired  # each step alone: the one batch alarms
    assert fired[0].step in tails
    assert not invoke_rule(VanishingGradient(trial, bias_by_layer="True", persist_steps="2")).fired
    # the network has a BatchNorm (a 1-D gradient not named bias): the gated persistence applies
    gated = VanishingGradient(trial, bias_by_layer="True", persist_steps="2", persist_only_with_norm="True")
    assert not invoke_rule(gated).fired


def _steps(vanished: set[int], n: int = 6, extra: tuple[str, ...] = ()) -> dict[int, dict[str, np.ndarray]]:
    """Gradients of fc1 (vanished at the steps given) and out, plus 1-D gradients named in ``extra``."""
    rng = np.random.default_rng(0)
    return {
        s: {
            "gradients/fc1.weight": rng.normal(scale=1e-9 if s in vanished else 1e-2, size=(8, 4)).astype(
                np.float32
            ),
            "gradients/out.weight": rng.normal(scale=1e-2, size=(1, 8)).astype(np.float32),
            **{name: rng.normal(scale=1e-2, size=8).astype(np.float32) for name in extra},
        }
        for s in range(n)
    }


def test_persist_steps_reports_gradients_that_stay_vanished(trial_factory):
    from_step_2 = trial_factory(_steps({2, 3, 4, 5}))
    fired = invoke_rule(VanishingGradient(from_step_2, persist_steps="2")).fired
    assert fired[0].step == 3  # one saved step after it began
    assert "saved step(s) before" in fired[0].details
    assert invoke_rule(VanishingGradient(from_step_2, persist_steps="3")).fired[0].step == 4


def test_persist_steps_reports_at_step_zero_gradients_vanished_from_the_start(trial_factory):
    trial = trial_factory(_steps({0, 1, 2, 3, 4, 5}))
    assert invoke_rule(VanishingGradient(trial, persist_steps="2")).fired[0].step == 0


def test_persist_steps_passes_over_isolated_steps_and_checks_its_value(trial_factory):
    trial = trial_factory(_steps({2, 4}))
    assert invoke_rule(VanishingGradient(trial)).fired[0].step == 2  # SageMaker's per-step reading
    assert not invoke_rule(VanishingGradient(trial, persist_steps="2")).fired
    rule = VanishingGradient(trial, persist_steps="2")
    assert rule.history_steps() is None  # the serverless evaluator gives it its whole window
    assert VanishingGradient(trial).history_steps() == 0
    with pytest.raises(RuleParameterError, match="persist_steps"):
        VanishingGradient(trial, persist_steps="0")


def test_persistence_is_asked_only_of_a_network_with_a_normalisation_layer(trial_factory):
    gated = {"persist_steps": "2", "persist_only_with_norm": "True"}
    # no normalisation layer (an MLP, or a GRU whose 1-D gradients are biases): each step alone
    for extra in ((), ("gradients/gru.bias_ih_l0",), ("gradients/net/fc1/biasGrad",)):
        trial = trial_factory(_steps({2, 4}, extra=extra))
        assert invoke_rule(VanishingGradient(trial, **gated)).fired[0].step == 2
    # a BatchNorm/LayerNorm scale (PyTorch's weight, Keras's gamma): the isolated steps are passed over
    for scale in ("gradients/fc1_norm.weight", "gradients/net/fc1_norm/gammaGrad"):
        trial = trial_factory(_steps({2, 4}, extra=(scale,)))
        assert not invoke_rule(VanishingGradient(trial, **gated)).fired
        assert invoke_rule(VanishingGradient(trial, persist_steps="2")).fired == []
        assert invoke_rule(VanishingGradient(trial)).fired[0].step == 2
    # and gradients that stay vanished in a network with one are still reported
    trial = trial_factory(_steps({2, 3, 4, 5}, extra=("gradients/fc1_norm.weight",)))
    assert invoke_rule(VanishingGradient(trial, **gated)).fired[0].step == 3


def test_the_recommended_set_asks_persistence_of_networks_with_a_normalisation_layer(trial_factory):
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "VanishingGradient"]
    params = {k: v for k, v in config["RuleParameters"].items() if k != "rule_to_invoke"}
    assert params["persist_steps"] == "2"
    assert params["persist_only_with_norm"] == "True"
    with_norm = trial_factory(_steps({2, 4}, extra=("gradients/fc1_norm.weight",)))
    assert not invoke_rule(create_rule("VanishingGradient", with_norm, **params)).fired
    without = trial_factory(_steps({2, 4}))
    assert invoke_rule(create_rule("VanishingGradient", without, **params)).fired[0].step == 2
