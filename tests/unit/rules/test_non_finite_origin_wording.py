"""NonFiniteOrigin says what the first non-finite tensor is: a parameter, a module input or output."""

from __future__ import annotations

import numpy as np

from tornasole.rules import create_rule


def test_a_non_finite_weight_is_reported_as_a_parameter_by_name(tmp_path):
    """A real PyTorch run whose first layer's weight holds a NaN (an update wrote it): the hook saves the
    parameters first at a step, so the weight is the first non-finite tensor; the finding must call it a
    parameter and name it, not a "forward output" (the wording before)."""
    import torch
    from torch import nn

    import tornasole.pytorch as ts
    from tornasole.trials import create_trial

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    hook = ts.Hook(
        str(tmp_path / "run"),
        save_config=ts.SaveConfig(save_interval=1),
        include_regex=[".*_output_0"],
        include_collections=["weights", "gradients", "losses"],
        stop_check_interval=None,
    )
    hook.register_module(model)
    loss = model(torch.randn(16, 4)).pow(2).mean()
    hook.record_tensor_value("loss", loss)
    loss.backward()
    hook.close()
    trial = create_trial(str(tmp_path / "run"), collections_timeout=1.0, poll_interval=0.01)
    out = create_rule("NonFiniteOrigin", trial).evaluate(0)
    assert out.fired
    assert out.values["tensor"] == "Sequential_0.weight", out.details
    assert "first non-finite parameter" in out.details
    assert "parameter Sequential_0.weight" in out.details
    assert "output" not in out.details.split(":")[0]


def test_parameter_named_without_collections_and_inputs_and_outputs_keep_their_words(trial_factory):
    trial = trial_factory({0: {"Net_fc1.bias": np.array([np.inf, 1.0]), "loss": np.float32(1)}})
    out = create_rule("NonFiniteOrigin", trial).evaluate(0)
    assert out.fired
    assert "first non-finite parameter" in out.details, out.details
    assert "(parameter Net_fc1.bias" in out.details
    trial = trial_factory({0: {"fc1_input_0": np.array([np.nan]), "loss": np.float32(1)}})
    out = create_rule("NonFiniteOrigin", trial).evaluate(0)
    assert "first non-finite input" in out.details, out.details
    assert "(module fc1" in out.details
    trial = trial_factory({0: {"fc1_output_0": np.array([np.nan]), "loss": np.float32(1)}})
    out = create_rule("NonFiniteOrigin", trial).evaluate(0)
    assert "first non-finite output" in out.details, out.details
    assert "(module fc1" in out.details
