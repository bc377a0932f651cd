"""The families benchmark's two held-out families of branch heldout7 build what their recipes say:
``distill``, knowledge distillation (Hinton, Vinyals & Dean 2015) of the digits from a teacher MLP trained
first, without the hook, into a student MLP with dropout, under the user's own loss module ``DistillLoss``
(alpha x KL at temperature T x T^2 + (1 - alpha) x the hard labels' cross-entropy), RMSprop under a cosine
decay; and ``cutmix_keras``, a small Keras CNN of the 8x8 digits trained with CutMix (Yun et al. 2019) and
label smoothing, AdamW under Keras's CosineDecay, validated on clean digits with hard labels. Both take the
generator's faults and hard negatives that apply to them. No scikit-learn: the digits are
:data:`family_cases.DIGITS`; the runs here train on a few dozen images for two epochs."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families import training as family_training  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.keras_training import KERAS_ONLY, cutmix  # noqa: E402
from families.models import DistillLoss  # noqa: E402
from families.training import FAMILIES, build, run, teacher  # noqa: E402
from family_cases import (  # noqa: E402
    COMMON_BROKEN,
    COMMON_HEALTHY,
    KERAS_BROKEN,
    PYTORCH_HEALTHY,
    cases_of,
    of_kind,
    use_few_digit_images,
    with_stand_in_digits,
)

from tornasole.modes import EVAL, TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_that_apply():
    distill, mix = cases_of("distill"), cases_of("cutmix_keras")
    # the student: a 10-class classifier of pixels (every common fault: the double softmax before the
    # distillation loss), an MLP (six sigmoid blocks of 16), dropout (heavy_dropout), a cosine that anneals
    # (warm restarts of 5 epochs); no wide_sparse_relu (8x its width: disk)
    assert of_kind(distill, "broken") == COMMON_BROKEN
    assert of_kind(distill, "healthy") == PYTORCH_HEALTHY | {"warm_restarts", "heavy_dropout"}
    assert CASES["distill/warm_restarts"][2].cycle_epochs == 5
    assert CASES["distill/heavy_dropout"][2].dropout == 0.5
    assert CASES["distill/lr_too_high"][2].lr_mult == 100.0  # RMSprop: x100
    # the Keras CNN: Keras's cases (no double softmax, no fp16 step, no PyTorch-only audit cases; no dropout)
    assert of_kind(mix, "broken") == KERAS_BROKEN
    assert of_kind(mix, "healthy") == COMMON_HEALTHY
    assert {spec.framework for name, (_, _, spec) in CASES.items() if name.startswith("cutmix_keras/")} == {
        "keras"
    }
    assert "cutmix" in KERAS_ONLY
    assert {"distill", "cutmix_keras"} <= set(SCORED_FAMILIES)
    assert not any(name.startswith(("distill_keras/", "cutmix/")) for name in CASES)


def test_the_distillation_loss_is_the_hand_computed_one():
    s = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    t = torch.tensor([[2.0, 0.0, 1.0], [1.0, 1.0, 4.0]])
    y = torch.tensor([1, 2])
    temp, alpha = 4.0, 0.3

    def softmax(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - v.max())
        return e / e.sum()

    kl = ce = 0.0
    for i in range(2):
        p_t = softmax(t[i].numpy() / temp)
        p_s = softmax(s[i].numpy() / temp)
        kl += float(np.sum(p_t * (np.log(p_t) - np.log(p_s))))
        ce += -math.log(softmax(s[i].numpy())[int(y[i])])
    expected = alpha * (kl / 2) * temp**2 + (1 - alpha) * ce / 2
    assert float(DistillLoss(temp, alpha)(s, y, t)) == pytest.approx(expected, rel=1e-5)
    # the student that agrees with the teacher pays the hard labels' cross-entropy alone
    assert float(DistillLoss(temp, alpha)(t, y, t)) == pytest.approx(
        (1 - alpha) * float(torch.nn.functional.cross_entropy(t, y)), rel=1e-5
    )
    recipe = FAMILIES["distill"]
    assert (recipe.opt, recipe.schedule, recipe.distill_temperature, recipe.distill_alpha) == (
        "rmsprop",
        "cosine",
        4.0,
        0.5,
    )


def _small(monkeypatch, name: str) -> None:
    load = getattr(data, name)

    def small(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = with_stand_in_digits(lambda: load(rng))
        return x[:80], y[:80], classes, 16

    monkeypatch.setattr(data, name, small)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)


def test_the_teacher_is_trained_once_a_seed_deterministically_and_leaves_the_run_random_state(monkeypatch):
    _small(monkeypatch, "digits_flat_classes")
    monkeypatch.setattr(family_training, "TEACHER_EPOCHS", 2)
    monkeypatch.setattr(family_training, "_TEACHERS", {})
    recipe = FAMILIES["distill"]
    torch.manual_seed(3)
    first = teacher(recipe, 0, 64)
    after = torch.rand(3)
    torch.manual_seed(3)
    assert torch.equal(torch.rand(3), after)  # training the teacher drew nothing from the run's generator
    assert teacher(recipe, 0, 64) is first  # cached
    assert not first.training
    assert not any(p.requires_grad for p in first.parameters())
    assert [m.out_features for m in first.modules() if isinstance(m, torch.nn.Linear)] == [256, 256, 10]
    family_training._TEACHERS.clear()
    again = teacher(recipe, 0, 64)
    assert again is not first
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), again.parameters()))
    other = teacher(recipe, 1, 64)
    assert not torch.equal(other.out.weight, first.out.weight)


def test_the_student_is_a_dropout_mlp_and_a_run_saves_the_user_loss_module_not_the_teacher(
    tmp_path, monkeypatch
):
    recipe = FAMILIES["distill"]
    model = build(CASES["distill/healthy"][2], recipe, 64, 10)
    assert [name for name, _ in model.named_children()] == [
        "fc1",
        "fc1_relu",
        "fc1_drop",
        "fc2",
        "fc2_relu",
        "fc2_drop",
        "out",
    ]
    assert (model.fc1.out_features, model.fc1_drop.p) == (64, 0.1)
    deep = build(CASES["distill/deep_sigmoid"][2], recipe, 64, 10)
    assert sum(type(m).__name__ == "Sigmoid" for m in deep.children()) == 6

    _small(monkeypatch, "digits_flat_classes")
    monkeypatch.setattr(family_training, "TEACHER_EPOCHS", 2)
    monkeypatch.setattr(family_training, "_TEACHERS", {})
    spec = replace(CASES["distill/healthy"][2], epochs=2)
    result = run("distill", spec, 0, str(tmp_path))
    trial = create_trial(result.path)
    names = trial.tensor_names()
    assert "DistillLoss_output_0" in trial.tensor_names(collection="losses")
    assert trial.tensor("DistillLoss_input_0").value(0, mode=TRAIN).shape == (32, 10)  # the student's logits
    labels = trial.tensor("DistillLoss_input_1").value(0, mode=TRAIN)
    assert labels.shape == (32,)
    assert labels.dtype.kind == "i"  # the hard labels
    assert trial.tensor("Mlp_input_0").value(0, mode=EVAL).shape == (16, 64)
    assert not any("256" in n or "Teacher" in n for n in names)
    assert "epoch_accuracy" in names
    assert len(result.val_acc) == 2
    # the same run again: the same numbers (the teacher cached or not)
    family_training._TEACHERS.clear()
    again = run("distill", spec, 0, str(tmp_path / "again"))
    assert again.val_acc == result.val_acc


def _reference_cutmix(x, y, seed, alpha):
    """Yun et al.'s Algorithm A1 written out again for a check, drawing as :func:`cutmix` draws."""
    rng = np.random.default_rng(seed)
    lam = rng.beta(alpha, alpha)
    perm = rng.permutation(len(x))
    h, w = x.shape[1:3]
    cut_h, cut_w = int(h * np.sqrt(1 - lam)), int(w * np.sqrt(1 - lam))
    cy, cx = rng.integers(h), rng.integers(w)
    r1, r2 = np.clip(cy - cut_h // 2, 0, h), np.clip(cy + cut_h // 2, 0, h)
    c1, c2 = np.clip(cx - cut_w // 2, 0, w), np.clip(cx + cut_w // 2, 0, w)
    return perm, (int(r1), int(r2), int(c1), int(c2))


def test_cutmix_pastes_a_box_of_a_permuted_batch_and_mixes_the_targets_by_its_area():
    rng = np.random.default_rng(0)
    x = rng.random((16, 8, 8, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    boxes = 0
    for seed in range(20):
        mixed, targets, lam, (r1, r2, c1, c2) = cutmix(x, y, np.random.default_rng(seed), 1.0)
        perm, box = _reference_cutmix(x, y, seed, 1.0)
        assert (r1, r2, c1, c2) == box
        assert mixed.shape == x.shape
        assert targets.shape == y.shape
        inside = np.zeros((8, 8), dtype=bool)
        inside[r1:r2, c1:c2] = True
        assert np.array_equal(mixed[:, inside], x[perm][:, inside])  # the box from the permuted batch
        assert np.array_equal(mixed[:, ~inside], x[:, ~inside])  # the rest untouched
        assert lam == pytest.approx(1 - inside.sum() / 64)  # lam: the share left uncut
        assert np.allclose(targets, lam * y + (1 - lam) * y[perm])
        assert np.allclose(targets.sum(axis=1), 1.0)
        boxes += inside.any()
        again = cutmix(x, y, np.random.default_rng(seed), 1.0)
        assert np.array_equal(again[0], mixed)  # seeded
        assert np.array_equal(again[1], targets)
    assert boxes >= 15  # Beta(1, 1): most draws cut a box
    assert not np.shares_memory(mixed, x)


def test_a_cutmix_keras_run_feeds_mixed_images_and_soft_smoothed_targets_and_validates_on_clean_ones(
    tmp_path, monkeypatch
):
    import keras
    from families.keras_training import build_keras_cutmix, classification_loss, run_keras

    recipe = FAMILIES["cutmix"]
    assert (recipe.opt, recipe.schedule, recipe.label_smoothing, recipe.cutmix_alpha) == (
        "adamw",
        "cosine",
        0.1,
        1.0,
    )
    model = build_keras_cutmix(keras, CASES["cutmix_keras/healthy"][2])
    assert [layer.name for layer in model.layers] == [
        "conv1",
        "conv1_relu",
        "conv2",
        "conv2_relu",
        "pool",
        "flat",
        "fc",
        "fc_relu",
        "out",
    ]
    assert model.output_shape == (None, 10)
    deep = build_keras_cutmix(keras, CASES["cutmix_keras/deep_sigmoid"][2])
    assert sum(layer.name.endswith("_sigmoid") for layer in deep.layers) == 7  # six conv blocks and fc
    loss = classification_loss(keras, CASES["cutmix_keras/healthy"][2])
    assert isinstance(loss, keras.losses.CategoricalCrossentropy)
    assert loss.get_config()["label_smoothing"] == 0.1

    use_few_digit_images(monkeypatch)
    spec = replace(CASES["cutmix_keras/healthy"][2], epochs=2)
    result = run_keras("cutmix", spec, 0, str(tmp_path))
    trial = create_trial(result.path)
    soft = trial.tensor("labels").value(trial.tensor("labels").steps(mode=TRAIN)[0], mode=TRAIN)
    assert soft.shape == (32, 10)
    assert np.allclose(soft.sum(axis=1), 1.0)
    assert ((soft > 0) & (soft < 1)).any()  # two labels mixed by a box's area
    hard = trial.tensor("labels").value(trial.tensor("labels").steps(mode=EVAL)[0], mode=EVAL)
    assert set(np.unique(hard)) <= {0.0, 1.0}  # validation: clean digits, hard one-hot labels
    assert len(result.val_acc) == 2
    assert all(0.0 <= a <= 1.0 for a in result.train_acc)  # Keras's categorical accuracy on mixed targets
