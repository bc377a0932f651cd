"""Issue #29: the loss's input read from the trial (SoftmaxBeforeCrossEntropy), and a parameter the optimiser
never sees whose name says neither weight nor bias (the PyTorch hook files it into ``weights``, so
UnchangedWeights sees it). Traces are real PyTorch runs saved by the PyTorch hook, or written with the
format writer; every firing case has the healthy patterns it must stay quiet on next to it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.rules import rule_configs as rc
from tornasole.rules.generic import SoftmaxBeforeCrossEntropy, UnchangedTensor
from tornasole.rules.inputs import rule_needs


def _run(tmp_path, head: str, loss_name: str, classes: int = 3, steps: int = 6, save_inputs: bool = True):
    """A 4 -> 8 -> ``classes`` net trained ``steps`` steps with Adam, saved every step by the PyTorch hook
    (weights, gradients, losses and, with ``save_inputs``, the loss module's inputs). ``head``: what the
    model's output goes through before the loss (``logits``, ``softmax``, ``log_softmax``, ``sigmoid``)."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, classes))
    loss_fn = {"CrossEntropyLoss": nn.CrossEntropyLoss, "NLLLoss": nn.NLLLoss, "BCELoss": nn.BCELoss}[
        loss_name
    ]()
    path = str(tmp_path / f"{head}-{loss_name}-{classes}")
    collections = ["weights", "gradients", "losses"] + (["loss_inputs"] if save_inputs else [])
    hook = Hook(path, save_config=SaveConfig(save_interval=1), include_collections=collections)
    if save_inputs:
        hook.get_collection("loss_inputs").include(r"[Ll]oss_input_0$")
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.randn(16, 4)
    y = torch.randint(0, classes, (16,))
    for _ in range(steps):
        out = net(x)
        if head == "softmax":
            out = torch.softmax(out, dim=1)
        elif head == "log_softmax":
            out = torch.log_softmax(out, dim=1)
        elif head == "sigmoid":
            out = torch.sigmoid(out)
        target: Any = y
        if loss_name == "BCELoss":  # binary (one column) or multi-label (several independent sigmoids)
            target = (torch.rand(16, classes) > 0.5).float()
        loss = loss_fn(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    return create_trial(path, collections_timeout=0.1, poll_interval=0.01)


def test_softmax_into_cross_entropy_fires_naming_the_loss_input(tmp_path):
    trial = _run(tmp_path, "softmax", "CrossEntropyLoss")
    summary = invoke_rule(SoftmaxBeforeCrossEntropy(trial))
    assert summary.fired
    finding = summary.fired[0]
    assert finding.values["tensor"] == "CrossEntropyLoss_input_0"
    assert finding.step == 2  # the third saved step: num_steps=3
    assert "CrossEntropyLoss_input_0 feeds the loss rows that are already probabilities" in finding.advice
    assert "drop the final softmax" in finding.advice


def test_softmax_into_nll_loss_fires_too(tmp_path):
    """NLLLoss expects log-probabilities: probabilities there are the same bug (softmax for log_softmax)."""
    assert invoke_rule(SoftmaxBeforeCrossEntropy(_run(tmp_path, "softmax", "NLLLoss"))).fired


@pytest.mark.parametrize(
    ("head", "loss_name", "classes"),
    [
        ("logits", "CrossEntropyLoss", 3),  # the healthy recipe
        ("log_softmax", "NLLLoss", 3),  # rows of log-probabilities, not probabilities
        ("sigmoid", "BCELoss", 1),  # a sigmoid+BCE binary classifier
        ("sigmoid", "BCELoss", 3),  # a multi-label sigmoid output: not a distribution
    ],
)
def test_healthy_loss_inputs_stay_quiet(tmp_path, head, loss_name, classes):
    trial = _run(tmp_path, head, loss_name, classes)
    assert (
        "CrossEntropyLoss_input_0" in trial.tensor_names() or f"{loss_name}_input_0" in trial.tensor_names()
    )
    assert not invoke_rule(SoftmaxBeforeCrossEntropy(trial)).fired
    # not only because loss_regex passes BCELoss over: the rows themselves are no distributions
    assert not invoke_rule(SoftmaxBeforeCrossEntropy(trial, loss_regex=".*")).fired


def test_a_run_without_the_loss_input_is_not_judged(tmp_path):
    trial = _run(tmp_path, "softmax", "CrossEntropyLoss", save_inputs=False)
    summary = invoke_rule(SoftmaxBeforeCrossEntropy(trial))
    assert not summary.fired
    assert summary.status == "NothingEvaluated"


def test_rows_must_be_distributions_at_every_one_of_num_steps(trial_factory):
    """One step of probabilities among logits (or too few saved steps) is no finding."""
    probs = np.full((4, 3), 1 / 3, np.float32)
    logits = np.array([[2.0, -1.0, 0.5]] * 4, np.float32)
    steps = {
        s: {"CrossEntropyLoss_output_0": np.float32(1.0), "CrossEntropyLoss_input_0": v}
        for s, v in enumerate([probs, logits, probs, probs])
    }
    colls = {"losses": ["[Ll]oss_(?!input).*output"], "loss_inputs": ["[Ll]oss_input_0$"]}
    trial = trial_factory(steps, colls)
    assert [f.step for f in invoke_rule(SoftmaxBeforeCrossEntropy(trial)).fired] == []
    assert [f.step for f in invoke_rule(SoftmaxBeforeCrossEntropy(trial, num_steps="2")).fired] == [3]
    # a row that sums to 1 only within a loose tolerance
    off = {s: {**v, "CrossEntropyLoss_input_0": probs * 1.01} for s, v in steps.items()}
    trial = trial_factory(off, colls)
    assert not invoke_rule(SoftmaxBeforeCrossEntropy(trial, num_steps="2")).fired
    assert invoke_rule(SoftmaxBeforeCrossEntropy(trial, num_steps="2", tolerance="0.05")).fired


def test_parameters_are_checked_by_name(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(Exception, match="min_classes"):
        create_rule("SoftmaxBeforeCrossEntropy", trial, min_classes="1")
    with pytest.raises(Exception, match="tolerance"):
        create_rule("SoftmaxBeforeCrossEntropy", trial, tolerance="0")


def test_in_the_recommended_set_and_its_configuration_saves_the_loss_input():
    names = {c["RuleConfigurationName"] for c in recommended_rules()}
    assert "SoftmaxBeforeCrossEntropy" in names
    cfg = rc.softmax_before_cross_entropy()
    colls = {c["CollectionName"]: c["CollectionParameters"] for c in cfg["CollectionConfigurations"]}
    assert colls["loss_inputs"]["include_regex"] == "[Ll]oss_input_0$|^predictions$|^batch_loss/"
    needs = rule_needs("SoftmaxBeforeCrossEntropy", {})
    assert needs is not None
    assert "loss_inputs" in needs.how


# -- a parameter the optimiser never sees ------------------------------------------------------------


def _pos_run(tmp_path, case: str, steps: int = 5):
    """A model with a learned position vector ``pos`` (a name with neither weight nor bias), saved by the
    PyTorch hook. ``case``: ``healthy`` (every parameter optimised), ``not_optimised`` (``pos`` left out of
    the optimiser: it has a gradient, its value never changes), ``frozen`` (``pos.requires_grad=False``)."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos = nn.Parameter(torch.randn(4) * 0.1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x: Any) -> Any:
            return self.fc(x + self.pos)

    torch.manual_seed(0)
    net = Net()
    if case == "frozen":
        net.pos.requires_grad_(False)
    params = [p for n, p in net.named_parameters() if not (case == "not_optimised" and n == "pos")]
    opt = torch.optim.SGD([p for p in params if p.requires_grad], lr=0.1)
    path = str(tmp_path / case)
    hook = Hook(path, save_config=SaveConfig(save_interval=1), include_collections=["weights", "gradients"])
    hook.register_module(net)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()
    hook.close()
    return create_trial(path, collections_timeout=0.1, poll_interval=0.01)


def _unchanged_weights(trial):
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "UnchangedWeights"]
    params = {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}
    return UnchangedTensor(trial, **params)


def test_the_hook_files_a_parameter_named_neither_weight_nor_bias_into_weights(tmp_path):
    trial = _pos_run(tmp_path, "healthy")
    assert "Net_pos" in trial.tensor_names(collection="weights")
    assert "Net_fc.bias" not in trial.tensor_names(collection="weights")  # biases stay biases


def test_unchanged_weights_fires_on_a_position_vector_the_optimiser_never_sees(tmp_path):
    summary = invoke_rule(_unchanged_weights(_pos_run(tmp_path, "not_optimised")))
    assert summary.fired
    assert summary.fired[0].values["tensor"] == "Net_pos"


@pytest.mark.parametrize("case", ["healthy", "frozen"])
def test_unchanged_weights_stays_quiet_when_it_learns_or_is_frozen_on_purpose(tmp_path, case):
    assert not invoke_rule(_unchanged_weights(_pos_run(tmp_path, case))).fired


def test_saturated_activation_still_finds_the_output_layer_when_the_loss_input_is_saved(tmp_path):
    """Saving ``BCELoss_input_0`` puts the loss module's input between the output sigmoid and the loss's
    output in the saved order; SaturatedActivation's skip_output_layer took it for another layer and judged
    the confident output sigmoid (14 of 16 healthy binary runs alarmed on the families benchmark)."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.rules.generic import SaturatedActivation
    from tornasole.trials import create_trial

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc1_relu = nn.ReLU()
            self.out = nn.Linear(8, 1)
            self.out_sigmoid = nn.Sigmoid()

        def forward(self, x: Any) -> Any:
            return self.out_sigmoid(self.out(self.fc1_relu(self.fc1(x))) * 50)

    torch.manual_seed(0)
    model, loss_fn = Net(), nn.BCELoss()
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        include_collections=["losses", "activations", "loss_inputs"],
    )
    hook.get_collection("activations").include(".*sigmoid_input.*")
    hook.get_collection("loss_inputs").include(r"[Ll]oss_input_0$")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(2):
        out = model(torch.randn(32, 4))
        loss_fn(out, (out > 0.5).float().detach()).backward()
    hook.close()
    trial = create_trial(str(tmp_path), collections_timeout=0.1, poll_interval=0.01)
    order = trial.saved_order(0)
    assert (
        order.index("out_sigmoid_input_0") < order.index("BCELoss_input_0") < order.index("BCELoss_output_0")
    )
    params = {"threshold_sigmoid_min": "-5", "threshold_sigmoid_max": "5", "fraction_saturated": "50"}
    assert invoke_rule(SaturatedActivation(trial, **params)).fired  # the output layer is saturated
    assert not invoke_rule(SaturatedActivation(trial, skip_output_layer="True", **params)).fired
