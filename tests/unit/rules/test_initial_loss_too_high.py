"""InitialLossTooHigh: Karpathy's "verify loss @ init" on runs saved by the PyTorch and numpy hooks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hook_trials import epochs

from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.rules.generic import InitialLossTooHigh

CLASSES = 4


def _data(seed: int = 0):
    """Four Gaussian blobs in 8 standardised dimensions."""
    import torch

    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, 8, generator=g) * 2
    y = torch.randint(0, CLASSES, (512,), generator=g)
    x = centres[y] + torch.randn(512, 8, generator=g)
    return (x - x.mean(0)) / x.std(0), y


def _model(weight_scale: float = 1.0, seed: int = 0):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.mul_(weight_scale)  # DeepFD's initialisation mutant at 8
    return model


def _train(model, steps: int, path=None, loss_fn=None, target=None):
    """``steps`` Adam steps on batches of 32, saved by the PyTorch hook at every step if ``path`` is set."""
    import torch
    from torch import nn

    from tornasole import modes
    from tornasole.pytorch import Hook, SaveConfig

    x, y = _data()
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = None
    if path is not None:
        hook = Hook(
            str(path),
            save_config=SaveConfig(save_interval=1),
            include_collections=["weights", "gradients", "losses"],
            stop_check_interval=None,
        )
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.set_mode(modes.TRAIN)
    for s in range(steps):
        idx = slice((s * 32) % 512, (s * 32) % 512 + 32)
        opt.zero_grad()
        loss_fn(model(x[idx]), target(y[idx]) if target else y[idx]).backward()
        opt.step()
    if hook is None:
        return None
    hook.close()
    from tornasole.trials import create_trial

    return create_trial(str(path), collections_timeout=0.1, poll_interval=0.01)


def _weight_scale(model) -> float:
    """The largest std x sqrt(fan-in) of the model's 2-D weights (PyTorch's default init: 1/sqrt(3))."""
    return max(float(p.detach().std()) * math.sqrt(p.shape[1]) for p in model.parameters() if p.dim() == 2)


def test_fires_on_a_classifier_initialised_at_eight_times_the_default_scale(tmp_path):
    trial = _train(_model(weight_scale=8.0), 3, tmp_path / "x8")
    summary = invoke_rule(InitialLossTooHigh(trial))
    (first,) = summary.fired
    assert first.step == 0
    assert first.values["tensor"] == "CrossEntropyLoss_output_0"
    # the chance level is read from the trial: ln 4, four classes (the output layer's width); this start is
    # above any_init_factor (8) x chance, so it fires whatever the weights
    assert first.values["threshold"] == pytest.approx(8 * math.log(CLASSES), rel=1e-6)
    assert first.values["value"] > 8 * math.log(CLASSES)
    assert "ln 4: 4 classes, the width of the output layer" in first.details


def test_quiet_on_the_default_initialisation(tmp_path):
    trial = _train(_model(), 3, tmp_path / "x1")
    assert invoke_rule(InitialLossTooHigh(trial)).fired == []
    first = float(trial.tensor("CrossEntropyLoss_output_0").value(0))
    assert first == pytest.approx(math.log(CLASSES), rel=0.2)  # Karpathy's expectation: about ln C


def test_quiet_on_a_fine_tune_from_weights_a_scale_rule_would_flag(tmp_path):
    # a model initialised at x8 that then trained well: its weights keep a scale no initialisation has
    # (std x sqrt(fan-in) ~4.6 against 0.58), the reason a weight-scale rule cannot tell a fine-tune from
    # a bad start; a new run starting from them (step 0 = the pretrained weights) begins below chance
    pretrained = _model(weight_scale=8.0)
    _train(pretrained, 300)
    assert _weight_scale(pretrained) > 3.0
    trial = _train(pretrained, 3, tmp_path / "fine_tune")
    first = float(trial.tensor("CrossEntropyLoss_output_0").value(0))
    assert first < math.log(CLASSES)
    assert invoke_rule(InitialLossTooHigh(trial)).fired == []


def test_a_binary_cross_entropy_is_judged_against_ln_2(tmp_path):
    import torch
    from torch import nn

    class Binary(nn.Module):
        def __init__(self, scale: float) -> None:
            super().__init__()
            self.body = _model(weight_scale=scale)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.body(x)[:, 0]

    summaries = {}
    for scale in (1.0, 8.0):
        torch.manual_seed(0)
        trial = _train(
            Binary(scale), 2, tmp_path / f"bce{scale}", nn.BCEWithLogitsLoss(), lambda y: (y % 2).float()
        )
        summaries[scale] = invoke_rule(InitialLossTooHigh(trial)).fired
    assert summaries[1.0] == []
    # 1.4-8x ln 2 at x8 here: the weights (median std x sqrt(fan-in) ~4.6) make it fire at factor 1.4
    assert summaries[8.0][0].values["threshold"] == pytest.approx(1.4 * math.log(2), rel=1e-6)
    assert "ln 2, a binary cross-entropy" in summaries[8.0][0].details


def _numpy_run(path, losses: list[float]):
    """A numpy-hook trial: one TRAIN step per loss, then a validation step whose loss is 100."""
    return epochs(str(path), [[{"loss": v} for v in losses]], [[{"loss": 100.0}]])


def test_a_loss_with_no_chance_level_is_not_judged_until_one_is_given(tmp_path):
    trial = _numpy_run(tmp_path / "a", [9.0, 3.0, 2.0, 1.0])  # an MSE of 9 at init, say
    assert invoke_rule(InitialLossTooHigh(trial)).fired == []  # "loss" names no kind
    assert invoke_rule(InitialLossTooHigh(trial, chance_loss="1.0")).first_step == 0
    assert invoke_rule(InitialLossTooHigh(trial, num_classes="1000")).fired == []  # ln 1000 = 6.9
    assert invoke_rule(InitialLossTooHigh(trial, num_classes="10")).fired == []  # 3.9x: no weights saved
    assert invoke_rule(InitialLossTooHigh(trial, num_classes="10", any_init_factor="1.4")).first_step == 0


def test_steps_averages_the_first_losses_and_judges_once(tmp_path):
    trial = _numpy_run(tmp_path / "a", [2.0, 5.0, 5.0, 50.0])
    # the first loss alone is below 1.4 x 2; the first two average 3.5, above: judged at the second step
    # (no weights saved: any_init_factor alone judges, set to 1.4 here)
    one = {"chance_loss": "2", "any_init_factor": "1.4"}
    assert invoke_rule(InitialLossTooHigh(trial, **one)).fired == []
    assert invoke_rule(InitialLossTooHigh(trial, steps="2", **one)).first_step == 1
    # a later rise (step 3) is never this rule's: the validation loss of 100 is not judged either
    assert [o.step for o in invoke_rule(InitialLossTooHigh(trial, steps="2", **one)).fired] == [1]


def test_non_finite_first_losses_are_left_to_exploding_tensor(tmp_path):
    trial = _numpy_run(tmp_path / "a", [float("inf"), 1.0])
    assert invoke_rule(InitialLossTooHigh(trial, chance_loss="1")).fired == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("factor", "1"), ("steps", "0"), ("num_classes", "1"), ("chance_loss", "0"), ("chance_loss", "nan")],
)
def test_bad_parameters_name_the_parameter(name, value):
    with pytest.raises(RuleParameterError, match=name):
        InitialLossTooHigh(None, **{name: value})


def test_the_recommended_set_runs_it_with_string_parameters(tmp_path):
    (conf,) = [c for c in recommended_rules() if c["RuleConfigurationName"] == "InitialLossTooHigh"]
    params = {k: v for k, v in conf["RuleParameters"].items() if k != "rule_to_invoke"}
    assert params == {"factor": "1.4", "any_init_factor": "8", "init_scale": "3", "squared_error_factor": "2"}
    trial = _numpy_run(tmp_path / "a", [10.0, 1.0])  # 9.1x ln 3: above any_init_factor, no weights needed
    assert invoke_rule(create_rule("InitialLossTooHigh", trial, num_classes="3", **params)).first_step == 0
    assert invoke_rule(create_rule("InitialLossTooHigh", trial, num_classes="50", **params)).fired == []


def test_it_asks_the_serverless_evaluator_for_the_runs_first_steps(tmp_path):
    trial = _numpy_run(tmp_path / "a", [1.0])
    rule = InitialLossTooHigh(trial, steps="3")
    assert rule.history_steps() == 0
    assert rule.leading_steps() == 16
    assert np.isfinite(rule.factor)


def test_the_serverless_evaluator_fires_at_the_first_step_and_judges_no_later_one(tmp_path):
    from tornasole.evaluator.models import RuleConfig
    from tornasole.evaluator.runner import StepFiles, StepRunner

    _numpy_run(tmp_path / "a", [10.0, 1.0, 1.0])  # global steps 0-2 TRAIN, 3 EVAL
    rules = [RuleConfig(name="Init", rule_to_invoke="InitialLossTooHigh", parameters={"num_classes": "3"})]
    asked: list[tuple[int, int]] = []

    def history(depth: int, lead: int) -> list[tuple[int, tuple[str, ...]]]:
        asked.append((depth, lead))
        return [(s, ("worker_0",)) for s in range(lead)]

    runner = StepRunner()
    (first,) = runner.run("job", str(tmp_path / "a"), StepFiles(0, ("worker_0",)), rules, history)
    assert first.error is None
    assert first.fired
    assert "is 9.102x the chance level 1.099 (ln 3, num_classes) (> any_init_factor 8)" in first.details
    (later,) = runner.run("job", str(tmp_path / "a"), StepFiles(2, ("worker_0",)), rules, history)
    assert later.error is None
    assert not later.fired
    assert asked[-1] == (0, 8)  # only the run's first steps, never a recent window


def test_a_later_loss_is_never_taken_for_the_first(tmp_path):
    # WHY: the serverless evaluator builds a step's trial from its own index files and the run's first
    # steps; when those are missing (not yet listed, or a save configuration that starts later), the
    # earliest loss it holds is a later step's, which says nothing about the initialisation
    from tornasole.evaluator.models import RuleConfig
    from tornasole.evaluator.runner import StepFiles, StepRunner

    _numpy_run(tmp_path / "a", [1.0, 10.0])  # a healthy start, then a jump at TRAIN step 1
    rules = [RuleConfig(name="Init", rule_to_invoke="InitialLossTooHigh", parameters={"num_classes": "3"})]
    (outcome,) = StepRunner().run(
        "job", str(tmp_path / "a"), StepFiles(1, ("worker_0",)), rules, lambda depth, lead: []
    )
    assert outcome.error is None
    assert not outcome.fired
