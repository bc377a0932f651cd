"""The families benchmark's two held-out families of branch heldout6 build what their recipes say: ``vae``, a
variational autoencoder of the digits as 64-vectors (ReLU MLP encoder to a mean and log-variance, the
reparameterisation trick, a ReLU MLP decoder to sigmoid pixels) under the user's own loss module
``ElboLoss`` (summed BCE + beta * KL, beta annealed from 0 to 1), Adam under a flat-then-cosine schedule;
and ``mixup_cnn``, a small CNN of the digits' images trained with mixup (soft targets under
CrossEntropyLoss), SGD with Nesterov momentum and weight decay, a warmup then MultiStepLR. Both take the
generator's faults and hard negatives that apply to their architecture. No scikit-learn: the digits are
:data:`family_cases.DIGITS`; the runs here train on a few dozen images for two epochs."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.counting import null_score  # noqa: E402
from families.models import ElboLoss  # noqa: E402
from families.training import (  # noqa: E402
    FAMILIES,
    _flat_cosine_factor,
    _lr_at,
    _score,
    build,
    multistep_milestones,
    run,
)
from family_cases import COMMON_BROKEN, PYTORCH_HEALTHY, cases_of, of_kind, with_stand_in_digits  # noqa: E402

from tornasole.modes import EVAL, TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_two_families_are_scored_and_take_the_faults_and_hard_negatives_of_their_architecture():
    vae, mix = cases_of("vae"), cases_of("mixup_cnn")
    # the VAE: no labels (no label noise, no permuted labels), no classes to put a softmax before; real-valued
    # pixels (inputs x100, on the encoder's input only); MLPs (six sigmoid blocks each side); its schedule
    # anneals (warm restarts of 5 epochs); no dropout; no wide ReLU (8x its width is 2.2M parameters)
    assert of_kind(vae, "broken") == COMMON_BROKEN - {"labels_shuffled", "softmax_before_cross_entropy"}
    assert of_kind(vae, "healthy") == PYTORCH_HEALTHY - {"noisy_labels"} | {"warm_restarts"}
    # the mixup CNN: a 10-class classifier of pixels, six sigmoid conv blocks, SGD momentum as cnn (SGDR's
    # setting, cycles of 3 epochs), a ReLU layer 8x wide, no dropout
    assert of_kind(mix, "broken") == COMMON_BROKEN
    assert of_kind(mix, "healthy") == PYTORCH_HEALTHY | {"warm_restarts", "wide_sparse_relu"}
    assert CASES["vae/warm_restarts"][2].cycle_epochs == 5
    assert CASES["mixup_cnn/warm_restarts"][2].cycle_epochs == 3
    assert CASES["mixup_cnn/wide_sparse_relu"][2].width == 128
    assert CASES["vae/lr_too_high"][2].lr_mult == 100.0  # Adam: x100
    assert CASES["mixup_cnn/lr_too_high"][2].lr_mult == 50.0  # SGD: x50
    assert {"vae", "mixup_cnn"} <= set(SCORED_FAMILIES)
    assert not any(name.startswith(("vae_keras/", "mixup_cnn_keras/")) for name in CASES)
    assert null_score("vae", np.zeros(1)) == 0.0  # an R^2: the mean image explains nothing


def test_digits_vae_gives_the_same_clean_pixels_as_input_and_target():
    x, y, classes, n_val = with_stand_in_digits(lambda: data.digits_vae(np.random.default_rng(0)))
    assert (x.shape, x.dtype, classes, n_val) == ((1800, 64), np.float32, 0, 360)
    assert np.array_equal(x, y)
    assert x is not y
    assert 0.0 <= x.min() <= x.max() <= 1.0


def test_the_vae_samples_while_training_decodes_the_mean_in_eval_and_its_loss_is_bce_plus_beta_kl():
    recipe = FAMILIES["vae"]
    assert (recipe.task, recipe.opt, recipe.schedule, recipe.kl_anneal_epochs, recipe.latent) == (
        "vae",
        "adam",
        "flat_cosine_step",
        5,
        8,
    )
    model = build(CASES["vae/healthy"][2], recipe, 64, 0)
    names = [name for name, _ in model.named_children()]
    assert names == ["fc1", "fc1_relu", "fc2", "fc2_relu", "mu", "logvar"] + [
        "dec1",
        "dec1_relu",
        "dec2",
        "dec2_relu",
        "out",
        "out_sigmoid",
    ]
    assert (model.fc1.out_features, model.mu.out_features, model.out.out_features) == (128, 8, 64)
    x = torch.rand(5, 64)
    torch.manual_seed(0)
    recon, mu, logvar = model(x)
    assert recon.shape == (5, 64)
    assert mu.shape == logvar.shape == (5, 8)
    assert float(recon.min()) > 0.0
    assert float(recon.max()) < 1.0
    again, _, _ = model(x)
    assert not torch.allclose(recon, again)  # z drawn anew while training
    model.eval()
    with torch.no_grad():
        first, second = model(x)[0], model(x)[0]
    assert torch.equal(first, second)  # eval mode: the posterior mean
    loss = ElboLoss()
    bce = torch.nn.functional.binary_cross_entropy(recon, x, reduction="sum") / 5
    kl = -0.5 * torch.sum(1 + logvar - mu**2 - logvar.exp()) / 5
    assert float(kl) > 0.0
    loss.beta = 0.0
    assert float(loss(recon, x, mu, logvar)) == pytest.approx(float(bce))
    loss.beta = 0.5
    assert float(loss(recon, x, mu, logvar)) == pytest.approx(float(bce + 0.5 * kl))
    # a diverged decoder's NaN pixels give a NaN loss (the run goes on), where F.binary_cross_entropy raises
    diverged = recon.detach().clone()
    diverged[0, 0] = float("nan")
    assert torch.isnan(loss(diverged, x, mu, logvar))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(diverged, x)
    deep = build(CASES["vae/deep_sigmoid"][2], recipe, 64, 0)
    assert sum(type(m).__name__ == "Sigmoid" for m in deep.children()) == 13  # 6 + 6 blocks and the output
    assert _score("vae", x, x) == pytest.approx(1.0)


def test_the_mixup_cnn_and_its_schedules():
    recipe = FAMILIES["mixup_cnn"]
    assert (recipe.opt, recipe.nesterov, recipe.schedule, recipe.warmup_epochs, recipe.mixup_alpha) == (
        "sgd",
        True,
        "multistep",
        2,
        0.3,
    )
    model = build(CASES["mixup_cnn/healthy"][2], recipe, 8, 10)
    kinds = [type(m).__name__ for m in model.children()]
    assert kinds == [
        *["Conv2d", "BatchNorm2d", "ReLU"] * 2,
        "MaxPool2d",
        "AdaptiveAvgPool2d",
        "Linear",
    ]
    assert model(torch.rand(3, 1, 8, 8)).shape == (3, 10)
    deep = build(CASES["mixup_cnn/deep_sigmoid"][2], recipe, 8, 10)
    assert sum(type(m).__name__ == "Sigmoid" for m in deep.children()) == 6
    assert deep(torch.rand(3, 1, 8, 8)).shape == (3, 10)
    # a linear warmup over 2 epochs, then x0.1 at half the run and again at three quarters
    spec, lr = CASES["mixup_cnn/healthy"][2], recipe.lr
    assert multistep_milestones(15) == (7, 11)
    rates = [_lr_at(spec, recipe, e, 15) for e in range(15)]
    assert rates[:3] == pytest.approx([lr / 3, 2 * lr / 3, lr])
    assert rates[6:8] == pytest.approx([lr, lr / 10])
    assert rates[10:12] == pytest.approx([lr / 10, lr / 100])
    # the VAE's flat then cosine per optimiser step, honouring a case's warmup
    assert [_flat_cosine_factor(2, 8, s) for s in (0, 1, 2, 4)] == [0.0, 0.5, 1.0, 1.0]
    assert _flat_cosine_factor(0, 8, 8) == pytest.approx(0.0)


def _small(monkeypatch, name: str) -> None:
    load = getattr(data, name)

    def small(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = with_stand_in_digits(lambda: load(rng))
        return x[:80], y[:80], classes, 16

    monkeypatch.setattr(data, name, small)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)


def test_a_vae_run_saves_the_user_loss_module_and_anneals_beta(tmp_path, monkeypatch):
    betas: list[float] = []
    real_forward = ElboLoss.forward

    def recording(self, *args):
        betas.append(self.beta)
        return real_forward(self, *args)

    monkeypatch.setattr(ElboLoss, "forward", recording)
    _small(monkeypatch, "digits_vae")
    spec = replace(CASES["vae/healthy"][2], epochs=2)
    result = run("vae", spec, 0, str(tmp_path))
    # 64 training vectors in batches of 32: 2 a epoch, beta rising over 5 epochs (10 batches), the validation
    # pass at the last batch's beta
    assert betas == pytest.approx([0.0, 0.1, 0.1, 0.2, 0.3, 0.3])
    trial = create_trial(result.path)
    assert "ElboLoss_output_0" in trial.tensor_names(collection="losses")
    fed = trial.tensor("ElboLoss_input_0").value(0, mode=TRAIN)
    target = trial.tensor("ElboLoss_input_1").value(0, mode=TRAIN)
    assert fed.shape == target.shape == (32, 64)
    assert trial.tensor("Vae_input_0").value(0, mode=EVAL).shape == (16, 64)
    assert len(result.val_acc) == 2


def test_a_mixup_run_feeds_mixed_inputs_and_soft_targets(tmp_path, monkeypatch):
    _small(monkeypatch, "digits")
    spec = replace(CASES["mixup_cnn/healthy"][2], epochs=2)
    result = run("mix", spec, 0, str(tmp_path))
    trial = create_trial(result.path)
    target = trial.tensor("CrossEntropyLoss_input_1").value(0, mode=TRAIN)
    assert target.shape == (32, 10)
    assert np.allclose(target.sum(axis=1), 1.0)
    assert ((target > 0) & (target < 1)).any()  # soft: two labels mixed
    fed = trial.tensor("MixupCnn_input_0").value(0, mode=TRAIN)
    assert not set(np.unique(fed * 16).round(4)) <= set(range(17))  # mixed pixels, not the raw ones
    assert trial.tensor("CrossEntropyLoss_input_1").value(0, mode=EVAL).shape == (16,)  # clean, hard labels
    assert len(result.val_acc) == 2
