"""Built-in rules on trials saved by our PyTorch hook from real (tiny, CPU) training runs."""

from __future__ import annotations

import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole import modes
from tornasole.rules import invoke_rule
from tornasole.rules.generic import DeadRelu, ExplodingTensor, LossNotDecreasing, Overfit, UnchangedTensor
from tornasole.trials import create_trial


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def train(out_dir, steps=5, lr=0.01, relu_bias=None, freeze_fc1=False, eval_steps=False, eval_flipped=False):
    """Fit y = sum(x) with SGD; optional EVAL steps after each TRAIN step, on -y if ``eval_flipped``."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Net()
    if relu_bias is not None:
        with torch.no_grad():
            model.fc1.bias.fill_(relu_bias)
    if freeze_fc1:
        model.fc1.requires_grad_(False)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    hook = ts.Hook(
        out_dir,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses", "relu_output"],
        stop_check_interval=None,
    )
    hook.get_collection("relu_output").include(".*relu_output")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.randn(32, 4)
    y = x.sum(dim=1, keepdim=True)
    for _ in range(steps):
        hook.set_mode(modes.TRAIN)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if eval_steps or eval_flipped:
            hook.set_mode(modes.EVAL)
            with torch.no_grad():
                loss_fn(model(x), -y if eval_flipped else y)
    hook.close()
    return create_trial(out_dir)


def test_dead_relu_on_large_negative_bias(tmp_path):
    trial = train(str(tmp_path / "dead"), steps=3, relu_bias=-50.0)
    assert invoke_rule(DeadRelu(trial)).first_step == 0
    healthy = train(str(tmp_path / "ok"), steps=3)
    assert invoke_rule(DeadRelu(healthy)).fired == []


def test_exploding_tensor_on_too_high_learning_rate(tmp_path):
    trial = train(str(tmp_path / "boom"), steps=8, lr=5.0)
    summary = invoke_rule(ExplodingTensor(trial, collection_names="gradients"))
    assert summary.first_step == 4
    assert (
        invoke_rule(ExplodingTensor(train(str(tmp_path / "ok"), steps=4), collection_names="gradients")).fired
        == []
    )


def test_unchanged_tensor_on_frozen_layer(tmp_path):
    trial = train(str(tmp_path / "frozen"), steps=4, freeze_fc1=True)
    summary = invoke_rule(UnchangedTensor(trial, tensor_regex="Net_fc1.weight"))
    assert summary.first_step == 2
    assert invoke_rule(UnchangedTensor(trial, tensor_regex="Net_fc2.weight")).fired == []


def test_loss_not_decreasing_when_learning_rate_is_zero(tmp_path):
    trial = train(str(tmp_path / "flat"), steps=4, lr=0.0)
    assert invoke_rule(LossNotDecreasing(trial, num_steps="1")).first_step == 1
    learning = train(str(tmp_path / "learn"), steps=4, lr=0.01)
    assert invoke_rule(LossNotDecreasing(learning, num_steps="1")).fired == []


def test_overfit_when_train_loss_falls_and_eval_loss_rises(tmp_path):
    # GIVEN eval on the flipped target: the better the fit, the worse the eval loss
    trial = train(str(tmp_path / "overfit"), steps=6, lr=0.05, eval_flipped=True)
    assert modes.EVAL in trial.modes()
    summary = invoke_rule(Overfit(trial, patience="2"))
    # global steps alternate TRAIN, EVAL; (val - train) / train passes 0.1 at EVAL steps 7 and 9
    assert summary.first_step == 9
    assert (summary.fired[0].mode, summary.fired[0].mode_step) == ("EVAL", 4)
    same = train(str(tmp_path / "fine"), steps=6, lr=0.05, eval_steps=True)
    assert invoke_rule(Overfit(same, patience="2")).fired == []
