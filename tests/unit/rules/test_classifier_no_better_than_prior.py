"""Issue #29: ClassifierNoBetterThanPrior, a cross-entropy classifier whose validation pseudo-R^2 (McFadden)
stays at or below the null model that predicts the class frequencies. Traces are real PyTorch runs saved by
the PyTorch hook (the loss module's prediction and target), or written with the format writer where a
pass's pseudo-R^2 must be exact; every firing case has the healthy patterns it must stay quiet on next to
it. The helpers are checked against values computed by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tornasole.exceptions import RuleParameterError
from tornasole.modes import EVAL, TRAIN
from tornasole.rules import create_rule, invoke_rule, recommended_rules
from tornasole.rules import rule_configs as rc
from tornasole.rules.builtin.classifier_no_better_than_prior import (
    ClassifierNoBetterThanPrior,
    binary_cross_entropies,
    binary_null_entropy,
    categorical_cross_entropies,
    categorical_null_entropy,
    cross_entropy_kind,
    pooled_pseudo_r2,
)
from tornasole.rules.inputs import rule_needs

COLLS = {"losses": ["[Ll]oss_(?!input).*output"], "loss_inputs": ["[Ll]oss_input_[01]$"]}
KERAS_COLLS = {"losses": ["(^|_)loss$"], "loss_inputs": ["^(predictions|labels)$|^batch_loss/"]}
#: Validation targets of every pass: 12 of class 1, 4 of class 0 (prior 0.75, entropy 0.5623 nats).
TARGET = np.array([1.0] * 12 + [0.0] * 4, dtype=np.float32).reshape(16, 1)


def _recommended_params() -> dict[str, str]:
    (params,) = [
        c["RuleParameters"]
        for c in recommended_rules()
        if c["RuleConfigurationName"] == "ClassifierNoBetterThanPrior"
    ]
    return {k: v for k, v in params.items() if k != "rule_to_invoke"}


# --- the helpers, against hand-computed values ---------------------------------------------------------


def test_null_entropies_are_those_of_the_class_frequencies():
    # a column 3 of 4 ones: -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.562335; a constant column: 0
    t = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    assert binary_null_entropy(t).tolist() == pytest.approx([0.5623351446, 0.0])
    # soft targets: the entropy of their mean (0.5): ln 2
    assert binary_null_entropy(np.array([[0.2], [0.8]])).tolist() == pytest.approx([math.log(2)])
    # classes 0, 0, 1, 2: -(0.5 ln 0.5 + 2 x 0.25 ln 0.25) = 1.039721
    assert categorical_null_entropy(np.array([2, 1, 1])) == pytest.approx(1.0397207708)


def test_binary_cross_entropies_read_probabilities_and_logits_as_the_losses_do():
    ce, t = binary_cross_entropies(np.array([[0.8], [0.4]]), np.array([[1.0], [0.0]]), "probabilities")
    assert ce[:, 0].tolist() == pytest.approx([-math.log(0.8), -math.log(0.6)])
    assert t.shape == (2, 1)
    logits = np.log(np.array([[0.8], [0.4]]) / (1 - np.array([[0.8], [0.4]])))
    ce_l, _ = binary_cross_entropies(logits, np.array([[1.0], [0.0]]), "logits")
    assert ce_l[:, 0].tolist() == pytest.approx(ce[:, 0].tolist())
    # a probability of exactly 0 for a positive: PyTorch floors the log at -100, Keras clips at 1e-7
    torch, _ = binary_cross_entropies(np.array([[0.0]]), np.array([[1.0]]), "probabilities")
    keras, _ = binary_cross_entropies(np.array([[0.0]]), np.array([[1.0]]), "probabilities", keras=True)
    assert torch[0, 0] == pytest.approx(100.0)
    assert keras[0, 0] == pytest.approx(-math.log(1e-7))
    # multi-label: a column each
    ce_m, t_m = binary_cross_entropies(np.full((3, 2), 0.5), np.array([[1, 0], [0, 1], [1, 1]]), "logits")
    assert ce_m.shape == t_m.shape == (3, 2)


@pytest.mark.parametrize(
    ("prediction", "target", "inputs"),
    [
        (np.zeros((4, 1)), np.zeros(4), "logits"),  # shapes differ (a broadcasting loss)
        (np.array([[np.nan]]), np.array([[1.0]]), "logits"),  # not finite
        (np.array([[0.5]]), np.array([[1.5]]), "probabilities"),  # a target outside [0, 1]
        (np.array([[1.5]]), np.array([[1.0]]), "probabilities"),  # a probability outside [0, 1]
    ],
)
def test_binary_batches_that_cannot_be_read_are_none(prediction, target, inputs):
    assert binary_cross_entropies(prediction, target, inputs) is None


def test_categorical_cross_entropies_read_each_kind_and_target_form():
    probs = np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]])
    want = [-math.log(0.5), -math.log(0.8)]
    for pred, inputs in [(np.log(probs) + 3.0, "logits"), (np.log(probs), "log_probabilities")]:
        ce, t = categorical_cross_entropies(pred, np.array([0, 1]), inputs, 1)
        assert ce.tolist() == pytest.approx(want)
        assert t.tolist() == [1, 1, 0]  # the class totals
    # Keras: probabilities (class axis -1), one-hot targets or sparse ids with a trailing axis of 1
    onehot = np.eye(3)[[0, 1]]
    ce, _ = categorical_cross_entropies(probs, onehot, "probabilities", -1, keras=True)
    assert ce.tolist() == pytest.approx(want)
    ce, _ = categorical_cross_entropies(probs, np.array([[0], [1]]), "probabilities", -1, keras=True)
    assert ce.tolist() == pytest.approx(want)
    # a sequence (batch, classes, time) in PyTorch: every position a sample
    seq = np.log(np.stack([probs.T, probs.T]))  # (2, 3, 2)
    ce, t = categorical_cross_entropies(seq, np.array([[0, 1], [0, 1]]), "log_probabilities", 1)
    assert ce.tolist() == pytest.approx(want * 2)
    assert t.tolist() == [2, 2, 0]
    # PyTorch's ignore_index -100 counts in no loss
    ce, t = categorical_cross_entropies(np.log(probs), np.array([0, -100]), "log_probabilities", 1)
    assert ce.tolist() == pytest.approx(want[:1])
    assert t.tolist() == [1, 0, 0]
    # soft targets: their sums per class
    ce, t = categorical_cross_entropies(np.log(probs), np.array([[0.5, 0.5, 0], [0, 1, 0]]), "logits", 1)
    assert ce.tolist() == pytest.approx([-(0.5 * math.log(0.5) + 0.5 * math.log(0.25)), -math.log(0.8)])
    assert t.tolist() == [0.5, 1.5, 0.0]


@pytest.mark.parametrize(
    "target",
    [
        np.array([0, 3]),  # a class id out of range (3 classes)
        np.array([0.0, 1.5]),  # not a whole class id
        np.array([[0.5, 0.5, 0.5], [2.0, 0.0, 0.0]]),  # a distribution target outside [0, 1]
        np.array([0, 1, 2]),  # three ids for two rows
        np.array([0.0, 1e30]),  # an id beyond int64 (it would wrap to a negative if cast first)
        np.array([0.0, -1e30]),
    ],
)
@pytest.mark.filterwarnings("error::RuntimeWarning")  # no wrapped cast on the way to None
def test_categorical_targets_not_valid_for_the_loss_are_none(target):
    assert categorical_cross_entropies(np.zeros((2, 3)), target, "logits", 1) is None


def test_pooled_pseudo_r2_is_one_minus_the_ratio_to_the_prior():
    # predicting the pass's class frequency scores 0; the same batches split in two pool to the same value
    prior = binary_cross_entropies(np.full((16, 1), 0.75), TARGET, "probabilities")
    assert pooled_pseudo_r2([prior], binary=True) == pytest.approx(0.0, abs=1e-12)
    good = binary_cross_entropies(np.where(TARGET > 0, 0.9, 0.1), TARGET, "probabilities")
    # CE = -ln 0.9 = 0.1053605 per sample; null 0.5623351: 1 - 0.1053605 / 0.5623351 = 0.8126375
    assert pooled_pseudo_r2([good], binary=True) == pytest.approx(0.8126375, rel=1e-6)
    halves = [(good[0][:8], good[1][:8]), (good[0][8:], good[1][8:])]
    assert pooled_pseudo_r2(halves, binary=True) == pytest.approx(0.8126375, rel=1e-6)
    # one class only: nothing to beat
    one = binary_cross_entropies(np.full((4, 1), 0.5), np.ones((4, 1)), "probabilities")
    assert pooled_pseudo_r2([one], binary=True) is None
    assert pooled_pseudo_r2([], binary=True) is None
    # categorical: uniform logits over 4 classes seen once each: CE = ln 4 = the null entropy
    ce = categorical_cross_entropies(np.zeros((4, 4)), np.arange(4), "logits", 1)
    assert pooled_pseudo_r2([ce], binary=False) == pytest.approx(0.0, abs=1e-12)


def test_cross_entropy_kind_reads_the_loss_name():
    assert cross_entropy_kind("BCELoss_output_0") == (True, "probabilities")
    assert cross_entropy_kind("BCEWithLogitsLoss_output_0") == (True, "logits")
    assert cross_entropy_kind("CrossEntropyLoss_output_0") == (False, "logits")
    assert cross_entropy_kind("NLLLoss_output_0") == (False, "log_probabilities")
    assert cross_entropy_kind("batch_loss/BinaryCrossentropy_from_logits") == (True, "logits")
    assert cross_entropy_kind("batch_loss/SparseCategoricalCrossentropy") == (False, "probabilities")
    assert cross_entropy_kind("MSELoss_output_0") is None


# --- traces written with the format writer ------------------------------------------------------------


def _binary_pred(skill: float) -> np.ndarray:
    """A probability for :data:`TARGET` that moves ``skill`` of the way from the class prior to the target
    (0: the prior itself, pseudo-R^2 0)."""
    return (0.75 + skill * (np.clip(TARGET, 0.05, 0.95) - 0.75)).astype(np.float32)


def _trace(
    trial_factory,
    skills: list[float],
    loss: str = "BCELoss",
    target: np.ndarray = TARGET,
    pred=_binary_pred,
    batches: int = 2,
):
    """Epochs of 2 TRAIN steps then a validation pass of ``batches`` EVAL steps, every batch the
    prediction ``pred(skill)`` of the pass against ``target``."""
    steps: dict[int, Any] = {}
    g = tr = ev = 0
    for skill in skills:
        for _ in range(2):
            steps[g] = (TRAIN, tr, {f"{loss}_output_0": np.float32(0.5)})
            g, tr = g + 1, tr + 1
        for _ in range(batches):
            tensors = {
                f"{loss}_output_0": np.float32(0.5),
                f"{loss}_input_0": pred(skill),
                f"{loss}_input_1": target,
            }
            steps[g] = (EVAL, ev, tensors)
            g, ev = g + 1, ev + 1
    return trial_factory(steps, COLLS)


def _fired_passes(trial, loss: str = "BCELoss", batches: int = 2, **params: str) -> list[int]:
    """The validation passes (1-based) at whose last step the rule fired."""
    eval_steps = [s for s in trial.tensor(f"{loss}_input_0").steps() if trial.mode(s) == EVAL]
    fired = invoke_rule(ClassifierNoBetterThanPrior(trial, **params)).fired
    return [eval_steps.index(f.step) // batches + 1 for f in fired]


def test_fires_once_min_passes_are_in_and_the_newest_two_are_at_the_prior(trial_factory):
    trial = _trace(trial_factory, [0.0, 0.0, 0.0, 0.0, 0.0, 0.6])
    assert _fired_passes(trial) == [4, 5]  # never before the fourth pass, and not once it learns
    summary = invoke_rule(ClassifierNoBetterThanPrior(trial))
    finding = summary.fired[0]
    assert finding.values["tensor"] == "BCELoss_input_0"
    assert "BCELoss_input_0 against BCELoss_input_1 (BCELoss_output_0)" in finding.details
    assert "predicts no better than the class frequencies" in finding.advice
    assert "pairs each input with its own label" in finding.advice
    # the held-out lstm family's healthy runs sit at chance for epochs before they learn (RESULTS.md)
    assert "sit at chance for several epochs first" in finding.advice


@pytest.mark.parametrize(
    "skills",
    [
        [0.0, 0.0, 0.4, 0.7, 0.8],  # a slow warmup: at the prior for its first two passes only
        [0.0, 0.0, 0.0, 0.5, 0.0, 0.6, 0.0],  # single passes at the prior, never two in a row
        [0.5, 0.7, 0.8, 0.8, 0.8],  # a learnt classifier
    ],
)
def test_slow_starters_and_single_bad_passes_stay_quiet(trial_factory, skills):
    summary = invoke_rule(ClassifierNoBetterThanPrior(_trace(trial_factory, skills)))
    assert summary.status == "NoIssuesFound"  # judged, not merely unread
    assert not summary.fired


def test_the_recommended_margin_flags_a_classifier_a_few_percent_above_the_prior(trial_factory):
    """The recommended set judges at 5% of the prior's entropy: a run that barely moves off the prior
    (binary labels_shuffled seed 0 sits at 0-0.06) fires there, not at the textbook 0; a run at 0.10 (the
    rnn family's healthy embedding frozen on purpose) is quiet."""
    params = _recommended_params()
    barely = _trace(trial_factory, [0.02] * 5)
    assert _fired_passes(barely) == []
    assert _fired_passes(barely, **params) == [4, 5]
    pr2 = pooled_pseudo_r2([binary_cross_entropies(_binary_pred(0.02), TARGET, "probabilities")], True)
    assert 0 < pr2 < float(params["max_pseudo_r2"])
    slow = _trace(trial_factory, [0.1] * 5)
    assert _fired_passes(slow, **params) == []


def test_a_pass_of_one_class_is_not_judged(trial_factory):
    trial = _trace(trial_factory, [0.0] * 5, target=np.ones((16, 1), np.float32))
    summary = invoke_rule(ClassifierNoBetterThanPrior(trial))
    assert not summary.fired


def test_a_prediction_that_does_not_match_its_target_in_shape_is_left_out(trial_factory):
    """(16, 1) probabilities against a (16,) target: a broadcasting loss; its cross-entropy would pair every
    prediction with every target, so those batches are left out and nothing is judged."""
    trial = _trace(trial_factory, [0.0] * 5, target=TARGET[:, 0])
    assert not invoke_rule(ClassifierNoBetterThanPrior(trial)).fired


def test_invalid_class_ids_are_left_out(trial_factory):
    ids = np.array([0, 1, 2, 7] * 4)  # class 7 of 3

    def uniform(_skill):
        return np.zeros((16, 3), np.float32)

    trial = _trace(trial_factory, [0.0] * 5, loss="CrossEntropyLoss", target=ids, pred=uniform)
    assert not invoke_rule(ClassifierNoBetterThanPrior(trial)).fired
    valid = _trace(trial_factory, [0.0] * 5, loss="CrossEntropyLoss", target=ids % 3, pred=uniform)
    assert _fired_passes(valid, loss="CrossEntropyLoss") == [4, 5]  # uniform logits, three equal classes


def test_a_squared_error_is_not_judged(trial_factory):
    trial = _trace(trial_factory, [0.0] * 5, loss="MSELoss")
    summary = invoke_rule(ClassifierNoBetterThanPrior(trial))
    assert not summary.fired
    assert summary.status == "NothingEvaluated"


def _keras_trace(trial_factory, loss: str, pred: np.ndarray, labels: np.ndarray, passes: int = 5):
    """Keras hook names: ``batch_loss/<Kind>``, ``predictions``, ``labels``; 2 TRAIN then 2 EVAL steps."""
    steps: dict[int, Any] = {}
    counts = {TRAIN: 0, EVAL: 0}
    for s in range(4 * passes):
        mode = TRAIN if s % 4 < 2 else EVAL
        steps[s] = (
            mode,
            counts[mode],
            {"loss": np.float32(0.5), loss: np.float32(0.5), "predictions": pred, "labels": labels},
        )
        counts[mode] += 1
    return trial_factory(steps, KERAS_COLLS)


def test_keras_traces_are_read_with_their_class_axis_and_target_rank(trial_factory):
    # a sigmoid output (16, 1) at the prior against (16,) labels: Keras brings them to one rank
    fired = invoke_rule(
        ClassifierNoBetterThanPrior(
            _keras_trace(trial_factory, "batch_loss/BinaryCrossentropy", _binary_pred(0.0), TARGET[:, 0])
        )
    ).fired
    assert [f.step for f in fired] == [15, 19]
    assert "predictions against labels (batch_loss/BinaryCrossentropy)" in fired[0].details
    # softmax probabilities over 3 classes against sparse ids (16, 1): at the prior, then learnt
    ids = np.array([0, 1, 2, 2] * 4)
    prior = np.tile(np.array([0.25, 0.25, 0.5], np.float32), (16, 1))
    learnt = np.eye(3, dtype=np.float32)[ids] * 0.9 + 0.1 / 3
    loss = "batch_loss/SparseCategoricalCrossentropy"
    at_prior = _keras_trace(trial_factory, loss, prior, ids[:, None])
    assert invoke_rule(ClassifierNoBetterThanPrior(at_prior)).fired
    summary = invoke_rule(
        ClassifierNoBetterThanPrior(_keras_trace(trial_factory, loss, learnt, ids[:, None]))
    )
    assert summary.status == "NoIssuesFound"


# --- real PyTorch runs -------------------------------------------------------------------------------


def _torch_run(tmp_path, loss: str, shuffled: bool, reduction: str = "mean", epochs: int = 6):
    """A 4 -> 16 -> out classifier trained with Adam for ``epochs`` epochs of 8 steps, each followed by a
    validation pass of 2 batches; the PyTorch hook saves every step (losses and the loss module's inputs).
    ``loss``: ``"bce"`` (a sigmoid output, BCELoss) or ``"ce"`` (3-class logits, CrossEntropyLoss, class
    ids). ``shuffled``: the training labels permuted against the inputs (validation keeps its own)."""
    import torch
    from torch import nn

    from tornasole import modes
    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.trials import create_trial

    torch.manual_seed(0)
    x, xv = torch.randn(128, 4), torch.randn(64, 4)
    if loss == "bce":
        net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
        loss_fn: nn.Module = nn.BCELoss(reduction=reduction)

        def label(z):
            return (z[:, :1] + 0.5 * z[:, 1:2] > -0.3).float()
    else:
        net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
        loss_fn = nn.CrossEntropyLoss(reduction=reduction)

        def label(z):
            return torch.argmax(z[:, :3], dim=1)

    y, yv = label(x), label(xv)
    if shuffled:
        y = y[torch.randperm(len(y))]
    path = str(tmp_path / f"{loss}-{shuffled}-{reduction}")
    hook = Hook(path, save_config=SaveConfig(save_interval=1), include_collections=["losses", "loss_inputs"])
    hook.get_collection("loss_inputs").include(r"[Ll]oss_input_[01]$")
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(epochs):
        hook.set_mode(modes.TRAIN)
        net.train()
        for b in range(8):
            out = loss_fn(net(x[b * 16 : b * 16 + 16]), y[b * 16 : b * 16 + 16])
            opt.zero_grad()
            out.backward()
            opt.step()
        hook.set_mode(modes.EVAL)
        net.eval()
        with torch.no_grad():
            for b in range(2):
                loss_fn(net(xv[b * 32 : b * 32 + 32]), yv[b * 32 : b * 32 + 32])
    hook.close()
    return create_trial(path, collections_timeout=0.1, poll_interval=0.01)


@pytest.mark.parametrize(("loss", "name"), [("bce", "BCELoss"), ("ce", "CrossEntropyLoss")])
def test_shuffled_labels_fire_and_the_learnt_twin_stays_quiet(tmp_path, loss, name):
    params = _recommended_params()
    broken = _torch_run(tmp_path, loss, shuffled=True)
    fired = invoke_rule(ClassifierNoBetterThanPrior(broken, **params)).fired
    assert fired
    assert fired[0].values["tensor"] == f"{name}_input_0"
    assert broken.mode(fired[0].step) == EVAL
    healthy = invoke_rule(ClassifierNoBetterThanPrior(_torch_run(tmp_path, loss, shuffled=False), **params))
    assert healthy.status == "NoIssuesFound"
    assert not healthy.fired


def test_a_summed_loss_is_judged_by_its_predictions_not_its_value(tmp_path):
    """``reduction="sum"`` makes every saved loss 32 x the mean; the rule computes the cross-entropy from
    the prediction and target, so a learnt classifier stays quiet and a shuffled one still fires."""
    params = _recommended_params()
    summed = _torch_run(tmp_path, "bce", False, "sum")
    last_eval = [s for s in summed.tensor("BCELoss_output_0").steps() if summed.mode(s) == EVAL][-1]
    assert float(np.asarray(summed.tensor("BCELoss_output_0").value(last_eval)).reshape(-1)[0]) > 2.0
    learnt = invoke_rule(ClassifierNoBetterThanPrior(summed, **params))
    assert learnt.status == "NoIssuesFound"
    assert not learnt.fired
    shuffled = _torch_run(tmp_path, "bce", True, "sum")
    assert invoke_rule(ClassifierNoBetterThanPrior(shuffled, **params)).fired


# --- parameters, configuration, registry -------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"consecutive": "5", "min_passes": "4"}, "consecutive"),
        ({"max_pseudo_r2": "1"}, "max_pseudo_r2"),
        ({"min_passes": "0"}, "min_passes"),
    ],
)
def test_bad_parameters_name_the_parameter(trial_factory, params, parameter):
    with pytest.raises(RuleParameterError, match=parameter):
        ClassifierNoBetterThanPrior(_trace(trial_factory, [0.5]), **params)


def test_configuration_builder_registry_and_inputs():
    conf = rc.classifier_no_better_than_prior(max_pseudo_r2="0.05")
    rule = conf["DebugRuleConfiguration"]["RuleParameters"]
    assert rule == {"rule_to_invoke": "ClassifierNoBetterThanPrior", "max_pseudo_r2": "0.05"}
    colls = {c["CollectionName"]: c["CollectionParameters"] for c in conf["CollectionConfigurations"]}
    assert colls["loss_inputs"]["include_regex"] == "[Ll]oss_input_[01]$|^(predictions|labels)$|^batch_loss/"
    needs = rule_needs("ClassifierNoBetterThanPrior", {})
    assert "<Loss>_input_1" in needs.reads
    assert "[Ll]oss_input_[01]$" in needs.how


def test_create_rule_takes_sagemaker_style_string_parameters(trial_factory):
    trial = _trace(trial_factory, [0.0] * 4)
    rule = create_rule(
        "ClassifierNoBetterThanPrior", trial, min_passes="3", max_pseudo_r2="0.1", consecutive="3"
    )
    assert [f.step for f in invoke_rule(rule).fired]
