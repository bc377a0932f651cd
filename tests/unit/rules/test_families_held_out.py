"""The families benchmark's two held-out families (branch newfam) build what their recipes say: ``resmlp``, a
pre-LayerNorm residual MLP (GELU, dropout 0.1, label smoothing 0.1, AdamW, warmup + cosine) on the digits'
classes, and ``iris``, a ReLU MLP [4, 16, 16, 3] under SGD with momentum; both take the generator's faults
and hard negatives. The data sets are replaced by synthetic ones of their shape (the test venv has no
scikit-learn); what is checked is the model, the cases and what the hook saves."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES  # noqa: E402
from families.training import FAMILIES, build, run  # noqa: E402
from family_cases import COMMON_BROKEN, PYTORCH_HEALTHY, cases_of, of_kind  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def _digits_shaped(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A 10-class task of the flat digits' shape (64 features in [0, 1], 360 held out), smaller."""
    y = rng.integers(0, 10, size=600).astype(np.int64)
    x = (rng.random((600, 64)) * 0.2 + np.eye(10, 64)[y] * 0.8).astype(np.float32)
    return x, y, 10, 360


def _iris_shaped(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Three standardised Gaussian blobs in 4 features, 150 samples, 30 held out."""
    y = rng.integers(0, 3, size=150).astype(np.int64)
    x = (rng.standard_normal((150, 4)) + 2.0 * np.eye(3, 4)[y]).astype(np.float32)
    return (x - x.mean(axis=0)) / x.std(axis=0), y, 3, 30


def test_the_held_out_families_take_the_generators_faults_and_hard_negatives():
    resmlp, iris = cases_of("resmlp"), cases_of("iris")
    assert of_kind(resmlp, "broken") == of_kind(iris, "broken") == COMMON_BROKEN
    assert of_kind(resmlp, "healthy") == PYTORCH_HEALTHY | {"warm_restarts", "heavy_dropout"}
    assert of_kind(iris, "healthy") == PYTORCH_HEALTHY | {"wide_sparse_relu"}
    assert CASES["resmlp/warm_restarts"][2].cycle_epochs == 3
    assert CASES["iris/wide_sparse_relu"][2].width == 128
    assert not any(name.startswith(("resmlp_keras/", "iris_keras/")) for name in CASES)  # PyTorch only


def test_resmlp_is_a_pre_layernorm_residual_mlp():
    nn = torch.nn
    recipe = FAMILIES["resmlp"]
    assert (recipe.opt, recipe.lr, recipe.weight_decay, recipe.batch, recipe.epochs) == (
        "adamw",
        2e-3,
        0.05,
        32,
        8,
    )
    assert (recipe.schedule, recipe.warmup_epochs, recipe.n_train, recipe.label_smoothing) == (
        "cosine",
        1,
        960,
        0.1,
    )
    model = build(CASES["resmlp/healthy"][2], recipe, 64, 10)
    assert type(model).__name__[0].isupper()  # the hook names its input <Class>_input_0
    assert next(iter(model.named_parameters()))[0] == "stem.weight"  # the first layer: Linear(64, 64)
    assert model.stem.in_features == model.stem.out_features == 64
    assert len(model.blocks) == 3
    assert [m.p for m in model.modules() if isinstance(m, nn.Dropout)] == [0.1] * 3
    assert sum(isinstance(m, nn.GELU) for m in model.modules()) == 3
    assert model.block1_fc1.out_features == 128
    assert model.out.out_features == 10
    model.eval()
    x = torch.randn(5, 64)
    with torch.no_grad():
        h = model.stem(x)
        for i in (1, 2, 3):
            b = lambda n, i=i: getattr(model, f"block{i}_{n}")  # noqa: E731
            h = h + b("fc2")(torch.nn.functional.gelu(b("fc1")(b("norm")(h))))
        assert torch.allclose(model(x), model.out(model.norm(h)), atol=1e-6)

    sigmoid = build(CASES["resmlp/deep_sigmoid"][2], recipe, 64, 10)
    assert len(sigmoid.blocks) == 6
    assert sigmoid.block6_fc1.out_features == 16
    assert sum(isinstance(m, nn.Sigmoid) for m in sigmoid.modules()) == 6
    assert {
        m.p
        for m in build(CASES["resmlp/heavy_dropout"][2], recipe, 64, 10).modules()
        if isinstance(m, nn.Dropout)
    } == {0.5}


def test_iris_is_a_relu_mlp_under_sgd_with_momentum():
    recipe = FAMILIES["iris"]
    assert (recipe.opt, recipe.lr, recipe.momentum, recipe.batch, recipe.epochs, recipe.schedule) == (
        "sgd",
        0.05,
        0.9,
        8,
        30,
        "",
    )
    model = build(CASES["iris/healthy"][2], recipe, 4, 3)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 16), (16, 16), (16, 3)]
    assert hasattr(model, "fc1_relu")
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())


def test_a_resmlp_run_saves_its_input_and_a_label_smoothed_loss(tmp_path, monkeypatch):
    from families import data

    monkeypatch.setattr(data, "digits_flat_classes", _digits_shaped)
    result = run("r", replace(CASES["resmlp/healthy"][2], epochs=1), 0, str(tmp_path))
    trial = create_trial(result.path)
    assert "ResMlp_input_0" in trial.tensor_names(collection="model_input")
    logits = trial.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN)
    target = trial.tensor("CrossEntropyLoss_input_1").value(0, mode=TRAIN)
    assert logits.shape == (32, 10)
    loss = float(np.ravel(trial.tensor("CrossEntropyLoss_output_0").value(0, mode=TRAIN))[0])
    ce = torch.nn.functional.cross_entropy
    smoothed = float(ce(torch.from_numpy(logits), torch.from_numpy(target), label_smoothing=0.1))
    assert loss == pytest.approx(smoothed, rel=1e-5)
    assert loss != pytest.approx(float(ce(torch.from_numpy(logits), torch.from_numpy(target))), rel=1e-3)
    # 240 training samples in batches of 32: 8 TRAIN steps, saved every 4 (and the epoch's last, 7, with its
    # epoch accuracy), then the 360-sample validation pass
    assert trial.steps(mode=TRAIN) == [0, 4, 7]
    assert trial.steps()[-1] == len(result.train_before) - 1


def test_an_iris_run_trains_its_relu_mlp_and_its_wide_case_is_sparse(tmp_path, monkeypatch):
    from families import data

    monkeypatch.setattr(data, "iris", _iris_shaped)
    healthy = run("h", CASES["iris/healthy"][2], 0, str(tmp_path / "healthy"))
    assert healthy.final_val_acc > 0.8  # three separable blobs
    assert "Mlp_input_0" in create_trial(healthy.path).tensor_names(collection="model_input")
    wide = run("w", replace(CASES["iris/wide_sparse_relu"][2], epochs=1), 0, str(tmp_path / "wide"))
    out = create_trial(wide.path).tensor("fc1_relu_output_0").value(0, mode=TRAIN)
    assert out.shape == (8, 128)
    assert (out <= 0).mean() > 0.6
