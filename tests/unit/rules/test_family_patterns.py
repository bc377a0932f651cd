"""Rules on patterns that are normal in some model family (bench/detection/families): each test fails on the
rule as it was before the change it covers."""

from __future__ import annotations

import numpy as np

from tornasole.rules import invoke_rule, recommended_rules
from tornasole.rules.generic import (
    ExplodingTensor,
    SaturatedActivation,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
)


def _bn_fed_bias_steps(weight_grad: float) -> dict[int, dict[str, np.ndarray]]:
    """A conv layer with a bias feeding a BatchNorm: its bias gradient ~1e-9, its weight gradient given."""
    rng = np.random.default_rng(0)
    return {
        s: {
            "gradients/conv1.weight": rng.normal(scale=weight_grad, size=(8, 9)).astype(np.float32),
            "gradients/conv1.bias": rng.normal(scale=1e-9, size=8).astype(np.float32),
            "gradients/out.weight": rng.normal(scale=1e-2, size=(3, 8)).astype(np.float32),
            "gradients/out.bias": rng.normal(scale=1e-2, size=3).astype(np.float32),
        }
        for s in range(3)
    }


def test_vanishing_gradient_passes_over_a_bias_feeding_batchnorm(trial_factory):
    trial = trial_factory(_bn_fed_bias_steps(weight_grad=1e-2))
    assert invoke_rule(VanishingGradient(trial)).fired  # SageMaker's reading: every tensor alone
    assert not invoke_rule(VanishingGradient(trial, bias_by_layer="True")).fired


def test_vanishing_gradient_bias_by_layer_still_fires_when_the_layer_vanishes(trial_factory):
    trial = trial_factory(_bn_fed_bias_steps(weight_grad=1e-9))
    summary = invoke_rule(VanishingGradient(trial, bias_by_layer="True"))
    assert summary.fired
    assert summary.fired[0].values["tensor"] == "gradients/conv1.bias"


def test_recommended_vanishing_gradient_judges_biases_with_their_layer():
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "VanishingGradient"]
    assert config["RuleParameters"]["bias_by_layer"] == "True"


def _sigmoid_net_trial(tmp_path, hidden_scale: float):
    """A real PyTorch run saved by the PyTorch hook: 4 -> 8 (sigmoid) -> 1 (sigmoid) with BCELoss. The output
    layer's logits are confident (|z| ~ 20); the hidden layer's pre-activations are scaled by hidden_scale."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc1_sigmoid = nn.Sigmoid()
            self.out = nn.Linear(8, 1)
            self.out_sigmoid = nn.Sigmoid()

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.out_sigmoid(self.out(self.fc1_sigmoid(self.fc1(x) * hidden_scale)) * 50)

    torch.manual_seed(0)
    model, loss_fn = Net(), nn.BCELoss()
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["losses", "activations"]
    )
    hook.get_collection("activations").include(".*sigmoid_input.*")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(2):
        x = torch.randn(32, 4)
        out = model(x)
        loss_fn(out, (out > 0.5).float().detach()).backward()
    hook.close()
    return create_trial(str(tmp_path), collections_timeout=0.1, poll_interval=0.01)


def test_saturated_activation_skips_the_layer_that_feeds_the_loss(tmp_path):
    trial = _sigmoid_net_trial(tmp_path, hidden_scale=1.0)
    params = {f"threshold_sigmoid_{k}": v for k, v in (("min", "-5"), ("max", "5"))}
    fired = invoke_rule(SaturatedActivation(trial, fraction_saturated="50", **params)).fired
    assert fired
    assert fired[0].values["tensor"] == "out_sigmoid_input_0"
    assert not invoke_rule(
        SaturatedActivation(trial, fraction_saturated="50", skip_output_layer="True", **params)
    ).fired


def test_saturated_activation_skip_output_layer_still_judges_hidden_layers(tmp_path):
    trial = _sigmoid_net_trial(tmp_path, hidden_scale=100.0)
    params = {f"threshold_sigmoid_{k}": v for k, v in (("min", "-5"), ("max", "5"))}
    fired = invoke_rule(
        SaturatedActivation(trial, fraction_saturated="50", skip_output_layer="True", **params)
    ).fired
    assert fired
    assert fired[0].values["tensor"] == "fc1_sigmoid_input_0"
    assert trial.saved_order(0).index("out_sigmoid_input_0") < trial.saved_order(0).index("BCELoss_output_0")


def test_saturated_activation_skip_output_layer_judges_a_tanh_layer_with_layers_after_it(tmp_path):
    """The demo's shape: a saturated tanh block, then a ReLU block and a linear head. The tanh input is the
    last tensor this rule reads before the loss, but other layers ran after it: it is hidden, and judged
    (it was skipped as "the output layer", leaving the rule nothing to read)."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.tanh = nn.Linear(4, 8), nn.Tanh()
            self.fc2, self.relu = nn.Linear(8, 8), nn.ReLU()
            self.head = nn.Linear(8, 2)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.head(self.relu(self.fc2(self.tanh(self.fc1(x) * 100))))

    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["losses", "activations"]
    )
    hook.get_collection("activations").include(".*tanh_input.*|.*relu_output.*")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(2):
        loss_fn(model(torch.randn(32, 4)), torch.randint(0, 2, (32,))).backward()
    hook.close()
    trial = create_trial(str(tmp_path), collections_timeout=0.1, poll_interval=0.01)
    order = trial.saved_order(0)
    loss_at = order.index("CrossEntropyLoss_output_0")
    assert order.index("tanh_input_0") < order.index("relu_output_0") < loss_at
    fired = invoke_rule(SaturatedActivation(trial, fraction_saturated="50", skip_output_layer="True")).fired
    assert fired
    assert fired[0].values["tensor"] == "tanh_input_0"


def test_recommended_saturated_activation_skips_the_output_layer():
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "SaturatedActivation"]
    assert config["RuleParameters"]["skip_output_layer"] == "True"


def _frozen_steps(with_gradient: bool) -> dict[int, dict[str, np.ndarray]]:
    """fc1 keeps its weights; fc2 learns. ``with_gradient``: fc1 has a gradient (a bug: its parameters
    never reach the optimiser); without, it was frozen on purpose (requires_grad=False: no gradient)."""
    out = {}
    for s in range(4):
        step = {
            "weights/fc1.weight": np.ones((2, 2), np.float32),
            "weights/fc2.weight": np.full((2, 2), 1.0 + 0.1 * s, np.float32),
            "gradients/fc2.weight": np.full((2, 2), 0.1, np.float32),
        }
        if with_gradient:
            step["gradients/fc1.weight"] = np.full((2, 2), 0.1, np.float32)
        out[s] = step
    return out


def test_weight_rules_pass_over_a_layer_frozen_on_purpose(trial_factory):
    trial = trial_factory(_frozen_steps(with_gradient=False))
    assert invoke_rule(WeightUpdateRatio(trial)).fired
    assert invoke_rule(UnchangedTensor(trial, collection_names="weights")).fired
    assert not invoke_rule(WeightUpdateRatio(trial, skip_frozen="True")).fired
    assert not invoke_rule(UnchangedTensor(trial, collection_names="weights", skip_frozen="True")).fired


def test_weight_rules_still_fire_on_a_layer_the_optimiser_never_sees(trial_factory):
    trial = trial_factory(_frozen_steps(with_gradient=True))
    fired = invoke_rule(WeightUpdateRatio(trial, skip_frozen="True")).fired
    assert fired
    assert fired[0].values["tensor"] == "weights/fc1.weight"
    fired = invoke_rule(UnchangedTensor(trial, collection_names="weights", skip_frozen="True")).fired
    assert fired
    assert fired[0].values["tensor"] == "weights/fc1.weight"


def test_recommended_weight_rules_skip_frozen_layers():
    by_name = {c["RuleConfigurationName"]: c["RuleParameters"] for c in recommended_rules()}
    assert by_name["UnchangedWeights"]["skip_frozen"] == "True"
    assert by_name["WeightUpdateRatio"]["skip_frozen"] == "True"


def _overflow_steps(
    loss: float, weight: float = 1.0, with_loss: bool = True
) -> dict[int, dict[str, np.ndarray]]:
    """Step 1's gradients overflowed (Inf, as a scaled fp16 loss's do); its loss and weights as given."""
    out = {}
    for s in range(3):
        step = {
            "weights/fc1.weight": np.full((2, 2), weight if s == 1 else 1.0, np.float32),
            "gradients/fc1.weight": np.full((2, 2), np.inf if s == 1 else 0.1, np.float32),
        }
        if with_loss:
            step["loss"] = np.float32(loss if s == 1 else 0.5)
        out[s] = step
    return out


def test_exploding_tensor_passes_over_a_step_the_loss_scaler_skipped(trial_factory):
    trial = trial_factory(_overflow_steps(loss=0.5))
    assert invoke_rule(ExplodingTensor(trial)).first_step == 1
    assert not invoke_rule(ExplodingTensor(trial, skip_scaler_overflow="True")).fired


def test_exploding_tensor_skip_scaler_overflow_still_fires_on_divergence(trial_factory):
    for steps in (
        _overflow_steps(loss=float("nan")),  # the loss diverged too
        _overflow_steps(loss=0.5, weight=float("inf")),  # the weights took the overflow
        _overflow_steps(loss=0.5, with_loss=False),  # no loss saved: nothing tells a skipped step
    ):
        summary = invoke_rule(ExplodingTensor(trial_factory(steps), skip_scaler_overflow="True"))
        assert summary.first_step == 1


def test_recommended_exploding_tensor_skips_scaler_overflow():
    (config,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "ExplodingTensor"]
    assert config["RuleParameters"]["skip_scaler_overflow"] == "True"


def _accumulation_steps(updates_every: int) -> dict[int, dict[str, np.ndarray]]:
    """Weights saved at 8 steps; they change only every ``updates_every`` saved steps (0: never)."""
    out, w = {}, 1.0
    for s in range(8):
        if updates_every and s and s % updates_every == 0:
            w += 0.1
        out[s] = {"weights/fc1.weight": np.full((2, 2), w, np.float32)}
    return out


def test_weight_update_ratio_small_window_tolerates_gradient_accumulation(trial_factory):
    trial = trial_factory(_accumulation_steps(updates_every=2))
    assert invoke_rule(WeightUpdateRatio(trial)).fired  # two saved steps inside one accumulation window
    assert not invoke_rule(WeightUpdateRatio(trial, small_window="3")).fired


def test_weight_update_ratio_small_window_still_fires_on_weights_that_never_move(trial_factory):
    summary = invoke_rule(
        WeightUpdateRatio(trial_factory(_accumulation_steps(updates_every=0)), small_window="3")
    )
    assert summary.first_step == 3  # the first step with 3 saved steps before it
