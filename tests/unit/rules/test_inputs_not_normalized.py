"""Issue #29: InputsNotNormalized, the model's inputs far off unit scale (DeepFD's "drop the input
normalisation", raw pixels, raw measurements). Traces are tiny PyTorch runs saved by the PyTorch hook
(the registered model's ``<ModelClass>_input_0``), or written with the format writer where an input's
distribution must be exact; each firing case has the healthy patterns it must stay quiet on next to it.
The Keras hook's ``inputs``: ``tests/frameworks/test_keras_model_inputs.py``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule
from tornasole.rules import rule_configs as rc
from tornasole.rules.builtin.inputs_not_normalized import (
    DEFAULT_MODEL_INPUT_REGEX,
    InputsNotNormalized,
    magnitude_histogram,
    magnitude_percentile,
)
from tornasole.rules.inputs import rule_needs, unreadable_rules

RNG = np.random.default_rng(0)


def _torch_run(tmp_path, kind: str, scale: float = 1.0, steps: int = 12):
    """A tiny model of ``kind`` trained ``steps`` steps of 16 samples on inputs times ``scale``, with the
    rule's own collection (``model_input``, its declared regex) saved at every step by the PyTorch hook."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(0)
    rng = np.random.default_rng(1)

    class Tabular(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.fc1_relu = nn.ReLU()
            self.out = nn.Linear(8, 3)

        def forward(self, x: Any) -> Any:
            return self.out(self.fc1_relu(self.fc1(x)))

    class Images(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.out = nn.Linear(4 * 8 * 8, 3)

        def forward(self, x: Any) -> Any:
            return self.out(torch.flatten(torch.relu(self.conv(x)), 1))

    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(50, 8)
            self.out = nn.Linear(8, 3)

        def forward(self, x: Any) -> Any:
            return self.out(self.embed(x).mean(dim=1))

    class Sequences(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(3, 8, batch_first=True)
            self.out = nn.Linear(8, 3)

        def forward(self, x: Any) -> Any:
            return self.out(self.gru(x)[0][:, -1])

    if kind == "images":  # pixels in [0, 1], mostly background, as digits
        model: nn.Module = Images()
        data = (rng.random((steps * 16, 1, 8, 8)) * (rng.random((steps * 16, 1, 8, 8)) < 0.4)).astype("f4")
    elif kind == "tokens":
        model = Tokens()
        data = rng.integers(0, 50, size=(steps * 16, 5))
    elif kind == "onehot":
        model = Tabular()
        data = np.eye(6, dtype="f4")[rng.integers(0, 6, size=steps * 16)]
    elif kind == "sequences":
        model = Sequences()
        data = rng.normal(size=(steps * 16, 7, 3)).astype("f4")
    else:  # standardised features
        model = Tabular()
        data = rng.normal(size=(steps * 16, 6)).astype("f4")
    if kind != "tokens":
        data = data * np.float32(scale)
    path = str(tmp_path / f"{kind}-{scale}")
    hook = Hook(path, save_config=SaveConfig(save_interval=1), include_collections=["model_input", "losses"])
    ((coll, params),) = InputsNotNormalized.COLLECTIONS
    hook.get_collection(coll).include(params["include_regex"])
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for b in range(steps):
        xb = torch.from_numpy(data[b * 16 : (b + 1) * 16])
        loss = loss_fn(model(xb), torch.from_numpy(rng.integers(0, 3, size=16)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    return create_trial(path, collections_timeout=0.1, poll_interval=0.01)


def test_standardised_features_times_100_fire_naming_the_models_input(tmp_path):
    trial = _torch_run(tmp_path, "tabular", scale=100.0)
    summary = invoke_rule(InputsNotNormalized(trial))
    assert summary.fired
    finding = summary.fired[0]
    assert finding.values["tensor"] == "Tabular_input_0"
    assert finding.step == 6  # 100 samples (threshold_samples) seen at the seventh step of 16
    assert finding.values["samples"] == 112
    assert 100 < finding.values["value"] < 200  # a Gaussian's 90th percentile of |x| is 1.64, x100
    assert "normalise the inputs" in finding.advice
    assert "input normalisation is missing" in finding.advice
    # the loss module's input (logits, saved by nothing here) is not the model's: the regex leaves it out
    assert not re.match(DEFAULT_MODEL_INPUT_REGEX, "CrossEntropyLoss_input_0")


@pytest.mark.parametrize("kind", ["tabular", "images", "onehot", "sequences"])
def test_inputs_at_unit_scale_are_judged_and_quiet(tmp_path, kind):
    trial = _torch_run(tmp_path, kind)
    rule = InputsNotNormalized(trial)
    summary = invoke_rule(rule)
    assert summary.fired == [], kind
    assert summary.status == "NoIssuesFound"
    assert any(name.endswith("_input_0") for name, _ in rule._memo), "it read the model's input"


def test_raw_pixels_fire(tmp_path):
    """Digits-like images in [0, 255]: the percentile of the non-zero pixels, not of the background."""
    trial = _torch_run(tmp_path, "images", scale=255.0)
    summary = invoke_rule(InputsNotNormalized(trial))
    assert summary.fired
    assert summary.fired[0].values["tensor"] == "Images_input_0"


def test_integer_token_ids_into_an_embedding_are_not_judged(tmp_path):
    trial = _torch_run(tmp_path, "tokens")
    assert trial.tensor("Tokens_input_0").value(0).dtype.kind == "i"
    summary = invoke_rule(InputsNotNormalized(trial))
    assert summary.fired == []


def test_a_batch_with_a_few_outliers_stays_quiet(trial_factory):
    """Two samples of 200 at 100 put the RMS of these z-scores near 10; the percentile stays at 1.6."""
    steps = {}
    for s in range(2):
        x = RNG.normal(size=(100, 8)).astype(np.float32)
        x[:1] = 100.0
        steps[s] = {"Net_input_0": x}
    trial = trial_factory(steps)
    seen = np.concatenate([steps[0]["Net_input_0"], steps[1]["Net_input_0"]])
    assert float(np.sqrt(np.mean(seen**2))) > 9
    assert invoke_rule(InputsNotNormalized(trial)).fired == []


def test_images_in_minus_one_to_one_and_binary_inputs_stay_quiet(trial_factory):
    trial = trial_factory(
        {
            0: {"inputs": RNG.uniform(-1, 1, size=(120, 3, 4, 4)).astype(np.float32)},
            1: {"inputs": (RNG.random((120, 10)) < 0.5).astype(np.float32)},
        }
    )
    assert invoke_rule(InputsNotNormalized(trial)).fired == []


def test_it_waits_for_threshold_samples(trial_factory):
    x = RNG.normal(size=(40, 4)).astype(np.float32) * 100
    trial = trial_factory({s: {"Net_input_0": x} for s in range(4)})
    summary = invoke_rule(InputsNotNormalized(trial, threshold_samples="100"))
    assert summary.first_step == 2  # 120 samples by then
    assert invoke_rule(InputsNotNormalized(trial, threshold_samples="1000")).fired == []


def test_a_large_offset_fires_and_the_threshold_is_a_parameter(trial_factory):
    """Years as a raw feature (about 2000): the mean is what is far off unit scale."""
    x = (2000 + RNG.normal(size=(128, 3))).astype(np.float32)
    trial = trial_factory({0: {"Net_input_0": x}})
    assert invoke_rule(InputsNotNormalized(trial)).first_step == 0
    assert invoke_rule(InputsNotNormalized(trial, threshold="5000")).fired == []


def test_tensors_other_than_the_models_input_are_not_read(trial_factory):
    big = RNG.normal(size=(128, 4)).astype(np.float32) * 100
    trial = trial_factory({0: {"fc1_input_0": big, "CrossEntropyLoss_input_0": big, "fc1/inputs": big}})
    assert invoke_rule(InputsNotNormalized(trial)).fired == []
    assert invoke_rule(InputsNotNormalized(trial, regex="fc1_input_0")).first_step == 0


def test_non_finite_and_zero_entries_are_left_out():
    h = magnitude_histogram(np.array([np.nan, np.inf, 0.0, 2.0, -3.0]))
    assert int(h.sum()) == 2
    assert 2.8 < magnitude_percentile(h, 100) <= 3.0
    assert magnitude_percentile(magnitude_histogram(np.zeros(4)), 90) is None
    assert magnitude_percentile(magnitude_histogram(np.array([1e30])), 50) == pytest.approx(10.0**11.975)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"percentile": "0"}, "percentile"),
        ({"percentile": "101"}, "percentile"),
        ({"threshold": "0"}, "threshold"),
        ({"threshold_samples": "0"}, "threshold_samples"),
        ({"regex": "(a+)+"}, "regex"),
    ],
)
def test_bad_parameters_are_refused_naming_them(trial_factory, params, parameter):
    trial = trial_factory({0: {"Net_input_0": np.ones((2, 2), np.float32)}})
    with pytest.raises(RuleParameterError, match=parameter):
        InputsNotNormalized(trial, **params)


def test_the_rule_configuration_asks_the_hook_for_the_models_input_sparsely():
    conf = rc.inputs_not_normalized()
    (coll,) = conf["CollectionConfigurations"]
    assert coll["CollectionName"] == "model_input"
    expected = {"include_regex": DEFAULT_MODEL_INPUT_REGEX, "save_interval": "100", "save_steps": "0,1,2,3"}
    assert coll["CollectionParameters"] == expected
    assert conf["DebugRuleConfiguration"]["RuleParameters"] == {"rule_to_invoke": "InputsNotNormalized"}


def test_registration_says_what_to_save_when_nothing_saves_the_input():
    needs = rule_needs("InputsNotNormalized", {})
    assert repr(DEFAULT_MODEL_INPUT_REGEX) in needs.reads  # rules.inputs spells the rule's default out
    assert "model_input" in needs.how
    assert "_input_0" in needs.reads
    rules = [("InputsNotNormalized", "InputsNotNormalized", {})]
    hook = {"CollectionConfigurations": [{"CollectionName": "weights"}]}
    assert [r["RuleConfigurationName"] for r in unreadable_rules(rules, hook)] == ["InputsNotNormalized"]
    saved = {"CollectionConfigurations": [{"CollectionName": "model_input"}]}
    assert unreadable_rules(rules, saved) == []


def test_the_registry_builds_it_from_string_parameters(trial_factory):
    trial = trial_factory({0: {"inputs": np.full((128, 2), 300.0, np.float32)}})
    rule = create_rule("InputsNotNormalized", trial, threshold="40", percentile="90", threshold_samples="100")
    assert invoke_rule(rule).first_step == 0


def test_saving_the_models_input_keeps_the_output_layer_found_from_the_saved_order(tmp_path):
    """The PyTorch hook writes the model's own input as its forward pass begins, so the layer that feeds the
    loss is still the activation saved last before it: SaturatedActivation's ``skip_output_layer`` finds
    it. Written after the forward pass (as a module's post-forward hook), the model's input came between
    the output sigmoid and the loss, every layer was judged, and a confident BCE classifier alarmed."""
    import torch
    from torch import nn

    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.rules.builtin.saturated_activation import SaturatedActivation
    from tornasole.trials import create_trial

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc1_tanh = nn.Tanh()
            self.out = nn.Linear(8, 1)
            self.out_sigmoid = nn.Sigmoid()

        def forward(self, x: Any) -> Any:
            return self.out_sigmoid(self.out(self.fc1_tanh(self.fc1(x))))

    torch.manual_seed(0)
    model = Classifier()
    with torch.no_grad():
        model.out.weight.mul_(400.0)  # a confident output layer: most logits beyond +-5
    path = str(tmp_path / "confident")
    hook = Hook(
        path,
        save_config=SaveConfig(save_interval=1),
        include_collections=["losses", "activations", "model_input"],
    )
    hook.get_collection("activations").include(".*(sigmoid|tanh)_input_0")
    hook.get_collection("model_input").include(DEFAULT_MODEL_INPUT_REGEX)
    loss_fn = nn.BCELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.randn(64, 4)
    loss_fn(model(x), (x[:, :1] > 0).float())
    hook.close()
    trial = create_trial(path, collections_timeout=0.1, poll_interval=0.01)
    order = [n for n in trial.saved_order(0) if not n.startswith("Classifier_fc") and "." not in n]
    assert order.index("Classifier_input_0") < order.index("fc1_tanh_input_0")
    rule = SaturatedActivation(trial, skip_output_layer="True", fraction_saturated="50")
    names = rule.selected(0)
    assert rule.output_layer(0, names) == "out_sigmoid_input_0"
    assert invoke_rule(rule).fired == []


def test_the_rules_collection_configuration_saves_the_input_at_the_first_steps_and_every_100th(tmp_path):
    """SageMaker's payload: the rule configuration's CollectionConfigurations become the job's
    DebugHookConfig; a hook created from it saves the model's input (and no submodule's) at steps 0-3,
    100 and 200 only, and the rule judges that trial from its third step. At every 100th step alone (the
    configuration before steps 0-3 were added) it judged at step 200, and a run of 150 steps of 32-sample
    batches would never have reached threshold_samples."""
    import json

    import torch
    from torch import nn

    from tornasole.pytorch import Hook
    from tornasole.trials import create_trial

    out = tmp_path / "tensors"
    config = {
        "LocalPath": str(out),
        "CollectionConfigurations": rc.inputs_not_normalized()["CollectionConfigurations"],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    hook = Hook.create_from_json_file(str(path), stop_check_interval=None)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    hook.register_module(model)
    torch.manual_seed(0)
    for _ in range(201):
        model(torch.randn(40, 3) * 100)
    hook.close()
    trial = create_trial(str(out), collections_timeout=0.1, poll_interval=0.01)
    saved = {n for n in trial.tensor_names() if "_input_" in n}
    assert saved == {"Sequential_input_0"}
    assert trial.tensor("Sequential_input_0").steps() == [0, 1, 2, 3, 100, 200]
    summary = invoke_rule(InputsNotNormalized(trial))
    assert summary.first_step == 2  # 40 samples a saved step: 120 by step 2 (threshold_samples 100)


def test_it_judges_the_newest_samples_so_a_normalisation_lost_mid_run_is_seen(trial_factory):
    """19 saved steps of standardised batches, then batches x100: judged over everything seen, the x100
    entries would be 5% of them, under the 90th percentile; judged over the newest 100 samples, they fire."""
    steps = {s: {"Net_input_0": RNG.normal(size=(100, 4)).astype(np.float32)} for s in range(19)}
    steps[19] = {"Net_input_0": (RNG.normal(size=(100, 4)) * 100).astype(np.float32)}
    summary = invoke_rule(InputsNotNormalized(trial_factory(steps)))
    assert summary.first_step == 19
    assert summary.fired[0].values["samples"] == 100
