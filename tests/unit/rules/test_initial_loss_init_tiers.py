"""InitialLossTooHigh's two tiers: a first loss above ``factor`` (1.4) x chance fires only with weights beyond
any standard initialisation (their median std x sqrt(fan-in) above ``init_scale``); above
``any_init_factor`` (8) it fires whatever the weights. Glorot and He on every layer start up to ~5x chance
on small classifiers (bench/detection/families/init_ratios.py), healthy runs the single factor flagged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hook_trials import epochs
from test_initial_loss_too_high import CLASSES, _data, _train

from tornasole.exceptions import RuleParameterError
from tornasole.rules import invoke_rule
from tornasole.rules.builtin.initial_loss_too_high import weight_scale
from tornasole.rules.generic import InitialLossTooHigh


def _mlp(init: str, seed: int):
    """8 -> 16 -> 4 ReLU MLP with ``init`` on every layer (the output layer too), biases zero (Glorot starts
    a deeper one nearer chance)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, CLASSES))
    for layer in model:
        if isinstance(layer, nn.Linear):
            if init == "xavier_uniform":
                nn.init.xavier_uniform_(layer.weight)
            else:
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return model


def _first_ratio(model) -> float:
    """The model's cross-entropy on the first batch ``_train`` feeds it, over ln C."""
    import torch

    x, y = _data()
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(x[:32]), y[:32])) / math.log(CLASSES)


@pytest.mark.parametrize("init", ["xavier_uniform", "kaiming_normal"])
def test_a_glorot_or_he_start_above_the_factor_stays_quiet(tmp_path, init):
    # the first seed whose standard start is above 1.45x chance: a healthy run the single factor flagged
    seed = next(s for s in range(300) if 1.45 < _first_ratio(_mlp(init, s)) < 8)
    trial = _train(_mlp(init, seed), 2, tmp_path / init)
    assert invoke_rule(InitialLossTooHigh(trial, any_init_factor="1.4")).first_step == 0  # the old verdict
    assert invoke_rule(InitialLossTooHigh(trial)).fired == []
    median, tensors = InitialLossTooHigh(trial).weights_scale(0)
    assert tensors == 2
    assert median < 2.0  # Glorot at most sqrt(2) x its fan-in share, He sqrt(2)


def _normed(scale: float):
    """A BatchNorm classifier with every weight x ``scale``: the norm absorbs the hidden layers' scale, so
    DeepFD's x8 starts only a few times chance (the families' cnn, rnn and transformer: 1.6-2.8x)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, CLASSES))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.mul_(scale)
    return model


def test_initialisation_x8_below_any_init_factor_is_caught_by_its_weights(tmp_path):
    ratio = _first_ratio(_normed(8.0))
    assert 1.4 < ratio < 8
    trial = _train(_normed(8.0), 2, tmp_path / "x8")
    (first,) = invoke_rule(InitialLossTooHigh(trial)).fired
    assert first.step == 0
    assert first.values["threshold"] == pytest.approx(1.4 * math.log(CLASSES), rel=1e-6)
    assert "weights beyond any standard initialisation" in first.details
    assert "> init_scale 3" in first.details
    median, _ = InitialLossTooHigh(trial).weights_scale(0)
    assert median > 4  # PyTorch's default 1/sqrt(3) x 8
    assert invoke_rule(InitialLossTooHigh(trial, init_scale="6")).fired == []  # the gate decides

    healthy = _train(_normed(1.0), 2, tmp_path / "x1")
    assert invoke_rule(InitialLossTooHigh(healthy)).fired == []


def _dense(fan_in: int, fan_out: int, scale: float, seed: int = 0) -> np.ndarray:
    """A Keras-layout kernel ``(in, out)`` whose std x sqrt(fan-in) is ``scale``."""
    w = np.random.default_rng(seed).standard_normal((fan_in, fan_out))
    return w / w.std() * scale / math.sqrt(fan_in)


def _run(path, loss: float, weights: dict[str, np.ndarray]):
    return epochs(str(path), [[{"loss": loss, **weights}, {"loss": 1.0, **weights}]])


def test_without_weights_only_any_init_factor_judges(tmp_path):
    level = math.log(3)
    trial = _run(tmp_path / "a", 2 * level, {})
    assert invoke_rule(InitialLossTooHigh(trial, num_classes="3")).fired == []
    assert InitialLossTooHigh(trial).weights_scale(0) is None
    trial = _run(tmp_path / "b", 9 * level, {})
    (first,) = invoke_rule(InitialLossTooHigh(trial, num_classes="3")).fired
    assert "(> any_init_factor 8)" in first.details
    assert first.values["threshold"] == pytest.approx(8 * level, rel=1e-6)


@pytest.mark.parametrize(("scale", "fires"), [(1.41, False), (2.9, False), (3.2, True), (4.6, True)])
def test_between_the_factors_the_weights_scale_decides(tmp_path, scale, fires):
    weights = {f"weights/net/fc{i}/kernel": _dense(64, 64, scale, seed=i) for i in range(3)}
    weights["weights/net/fc0/bias"] = np.full(64, 100.0)  # a bias has no fan-in: never read
    trial = _run(tmp_path / "a", 2 * math.log(3), weights)
    fired = invoke_rule(InitialLossTooHigh(trial, num_classes="3")).fired
    assert bool(fired) is fires
    assert InitialLossTooHigh(trial).weights_scale(0) == (pytest.approx(scale, rel=1e-5), 3)


def test_embeddings_are_left_out_of_the_weights_scale(tmp_path):
    # an embedding table at N(0, 1) (PyTorch's default) reads far above any dense init by its row count
    weights = {
        "weights/net/embedding/embeddings": np.random.default_rng(0).standard_normal((1000, 16)),
        "weights/net/wte.weight": np.random.default_rng(1).standard_normal((1000, 16)),
        "weights/net/fc/kernel": _dense(16, 4, 1.0),
    }
    trial = _run(tmp_path / "a", 2 * math.log(4), weights)
    assert InitialLossTooHigh(trial).weights_scale(0) == (pytest.approx(1.0, rel=1e-5), 1)
    assert invoke_rule(InitialLossTooHigh(trial, num_classes="4")).fired == []
    keep_all = InitialLossTooHigh(trial, num_classes="4", scale_exclude_regex="^$")
    assert invoke_rule(keep_all).first_step == 0


def test_weight_scale_reads_each_frameworks_layout():
    rng = np.random.default_rng(0)
    conv = rng.standard_normal((16, 3, 3, 3))  # PyTorch (out, in, kh, kw): fan-in 27
    assert weight_scale("Net_conv.weight", conv) == pytest.approx(conv.std() * math.sqrt(27))
    kernel = rng.standard_normal((3, 3, 3, 16))  # Keras (kh, kw, in, out): fan-in 27
    assert weight_scale("weights/net/conv/kernel", kernel) == pytest.approx(kernel.std() * math.sqrt(27))
    dense = rng.standard_normal((10, 40))
    # PyTorch (out, in), Keras (in, out)
    assert weight_scale("Net_fc.weight", dense) == pytest.approx(dense.std() * math.sqrt(40))
    assert weight_scale("weights/net/fc/kernel", dense) == pytest.approx(dense.std() * math.sqrt(10))
    assert weight_scale("Net_fc.bias", rng.standard_normal(10)) is None


@pytest.mark.parametrize(("name", "value"), [("any_init_factor", "1"), ("init_scale", "-1")])
def test_bad_tier_parameters_name_the_parameter(name, value):
    with pytest.raises(RuleParameterError, match=name):
        InitialLossTooHigh(None, **{name: value})
