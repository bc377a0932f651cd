"""The recommended set on a harmful run of the families benchmark it used to miss (issue 29): a deep sigmoid
stack behind LayerNorms (softmax family, seed 0), and the family's own recipe, which must stay quiet.
Traces written by the PyTorch hook."""

from __future__ import annotations

import numpy as np

from tornasole.rules import create_rule, invoke_rule, recommended_rules


def _recommended(name: str) -> tuple[str, dict[str, str]]:
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == name]
    params = dict(conf["RuleParameters"])
    return params.pop("rule_to_invoke"), params


def _layer_norm_mlp_run(path: str, act: str, depth: int, width: int, seed: int = 0):
    """A real PyTorch run saved by the PyTorch hook at every step: ``depth`` blocks of Linear -> LayerNorm
    -> ``act`` then a linear output, cross-entropy on three Gaussian classes in 13 dimensions (the wine
    data's shape), AdamW at 3e-3, twelve batches of 8."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 13)) * 1.5
    labels = rng.integers(0, 3, size=120)
    x = torch.from_numpy((centres[labels] + rng.normal(size=(120, 13))).astype(np.float32))
    y = torch.from_numpy(labels)
    layers: list = []
    fan_in = 13
    activation = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[act]
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.LayerNorm(width), activation()]
        fan_in = width
    model = nn.Sequential(*layers, nn.Linear(fan_in, 3))
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(path, save_config=SaveConfig(save_interval=1), include_collections=["gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    for step in range(12):
        b = step * 8
        opt.zero_grad()
        loss_fn(model(x[b : b + 8]), y[b : b + 8]).backward()
        opt.step()
    hook.close()
    return create_trial(path, collections_timeout=0.1, poll_interval=0.01)


def _norm_ratios(trial, last: str) -> list[tuple[float, float]]:
    """(first/last gradient-norm ratio, first norm) at each saved step, as VanishingGradient reads them: the
    first linear layer's weight gradient against the output layer's (``last``)."""
    first = "gradient/Sequential_0.weight"
    out = []
    for s in trial.tensor(first).steps():
        f = float(np.linalg.norm(trial.tensor(first).value(s)))
        out.append((f / float(np.linalg.norm(trial.tensor(last).value(s))), f))
    return out


def test_a_deep_sigmoid_stack_behind_layer_norms_is_a_vanishing_gradient(tmp_path):
    trial = _layer_norm_mlp_run(str(tmp_path / "sigmoid"), "sigmoid", depth=6, width=16)
    ratios = _norm_ratios(trial, "gradient/Sequential_18.weight")
    # the pattern: the LayerNorms keep the first layer's gradient near 1e-3 (never AUTOTRAINER's 1e-4) while
    # it stays about 1/500 of the output layer's, step after step
    assert all(f > 1e-4 for _, f in ratios)
    assert sum(r < 2e-3 for r, _ in ratios) >= 4
    rule, params = _recommended("VanishingGradient")
    fired = invoke_rule(create_rule(rule, trial, **params)).fired
    assert fired
    assert "norm_ratio_threshold" in fired[0].details
    # AUTOTRAINER's thresholds (1e-3, first norm 1e-4; the set's before) see nothing here
    old = {**params, "norm_ratio_threshold": "0.001", "first_norm_threshold": "0.0001"}
    assert invoke_rule(create_rule(rule, trial, **old)).fired == []


def test_the_families_recipe_behind_layer_norms_is_not(tmp_path):
    # the softmax family's own recipe: two tanh blocks of 32 behind LayerNorms; first/last ratios 0.4-1
    trial = _layer_norm_mlp_run(str(tmp_path / "tanh"), "tanh", depth=2, width=32)
    assert min(r for r, _ in _norm_ratios(trial, "gradient/Sequential_6.weight")) > 0.1
    rule, params = _recommended("VanishingGradient")
    assert invoke_rule(create_rule(rule, trial, **params)).fired == []
