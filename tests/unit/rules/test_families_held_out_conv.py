"""The families benchmark's two held-out convolutional families (branch newfam2) build what their recipes
say: ``conv1d``, a 1-D CNN [Conv1d(1, 16, 5) -> BatchNorm1d -> ReLU -> Conv1d(16, 32, 5) -> ReLU -> average
pool -> Linear(32, 3)] on the synthetic ``noisy_sines`` under SGD with Nesterov momentum, and
``convbn_keras``, a Keras-only 2-D CNN [Conv2D(16) -> BatchNormalization -> ReLU -> Conv2D(32) -> BN -> ReLU
-> GlobalAveragePooling2D -> Dense(10) logits] under Adam with Keras's CosineDecay (one epoch of warmup).
Both take the generator's faults and hard negatives. The digits are replaced by synthetic images of their
shape (the test venv has no scikit-learn); the sines need no data set."""

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
from families.training import FAMILIES, build, run  # noqa: E402
from family_cases import (  # noqa: E402
    COMMON_BROKEN,
    COMMON_HEALTHY,
    KERAS_BROKEN,
    PYTORCH_HEALTHY,
    cases_of,
    of_kind,
)

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def test_the_conv_families_take_the_generators_faults_and_hard_negatives():
    conv1d, convbn = cases_of("conv1d"), cases_of("convbn_keras")
    assert of_kind(conv1d, "broken") == COMMON_BROKEN
    assert of_kind(convbn, "broken") == KERAS_BROKEN  # no double softmax: Keras undoes it
    assert of_kind(conv1d, "healthy") == PYTORCH_HEALTHY | {"wide_sparse_relu"}
    # Keras: no fp16 skipped step, no schedule case, no audit case but the one-layer dropout
    assert of_kind(convbn, "healthy") == COMMON_HEALTHY | {"heavy_dropout"}
    assert CASES["conv1d/wide_sparse_relu"][2].width == 64
    assert {spec.framework for name, (_, fam, spec) in CASES.items() if fam == "convbn_keras"} == {"keras"}
    # convbn is Keras only: no PyTorch run, not scored as a PyTorch family
    assert not any(name.startswith(("convbn/", "conv1d_keras/")) for name in CASES)
    assert "convbn" not in SCORED_FAMILIES
    assert {"conv1d", "convbn_keras"} <= set(SCORED_FAMILIES)


def test_noisy_sines_class_is_the_frequency():
    x, y, classes, n_val = data.noisy_sines(np.random.default_rng(0))
    assert x.shape == (1200, 1, 32)
    assert x.dtype == np.float32
    assert (classes, n_val) == (3, 256)
    assert set(np.unique(y)) == {0, 1, 2}
    # the strongest Fourier component (bins 1-3) is f = class + 1 on most sequences despite N(0, 0.5) noise
    spectrum = np.abs(np.fft.rfft(x[:, 0], axis=1))[:, 1:4]
    assert (spectrum.argmax(axis=1) == y).mean() > 0.95
    again, y_again, _, _ = data.noisy_sines(np.random.default_rng(0))
    assert np.array_equal(x, again)  # seeded
    assert np.array_equal(y, y_again)


def test_conv1d_is_a_1d_cnn_under_nesterov_sgd():
    nn = torch.nn
    recipe = FAMILIES["conv1d"]
    assert (recipe.data, recipe.opt, recipe.lr, recipe.momentum, recipe.nesterov) == (
        "noisy_sines",
        "sgd",
        0.05,
        0.9,
        True,
    )
    assert (recipe.weight_decay, recipe.batch, recipe.epochs, recipe.schedule, recipe.n_train) == (
        5e-4,
        32,
        10,
        "step",
        640,
    )
    model = build(CASES["conv1d/healthy"][2], recipe, 32, 3)
    assert type(model).__name__[0].isupper()  # the hook names its input <Class>_input_0
    assert next(iter(model.named_parameters()))[0] == "conv1.weight"  # the first layer
    convs = [m for m in model.modules() if isinstance(m, nn.Conv1d)]
    assert [(m.in_channels, m.out_channels, m.kernel_size, m.padding) for m in convs] == [
        (1, 16, (5,), (2,)),
        (16, 32, (5,), (2,)),
    ]
    assert [m.num_features for m in model.modules() if isinstance(m, nn.BatchNorm1d)] == [16]
    assert sum(isinstance(m, nn.ReLU) for m in model.modules()) == 2
    assert (model.out.in_features, model.out.out_features) == (32, 3)
    model.eval()
    x = torch.randn(5, 1, 32)
    with torch.no_grad():
        h = torch.relu(model.conv2(torch.relu(model.conv1_bn(model.conv1(x)))))
        assert torch.allclose(model(x), model.out(h.mean(dim=2)), atol=1e-6)

    sigmoid = build(CASES["conv1d/deep_sigmoid"][2], recipe, 32, 3)
    assert sum(isinstance(m, nn.Conv1d) for m in sigmoid.modules()) == 6
    assert sum(isinstance(m, nn.Sigmoid) for m in sigmoid.modules()) == 6
    assert not any(isinstance(m, nn.ReLU) for m in sigmoid.modules())
    assert build(CASES["conv1d/wide_sparse_relu"][2], recipe, 32, 3).conv1.out_channels == 64


def test_a_conv1d_run_trains_and_saves_its_input_and_nesterov_steps(tmp_path, monkeypatch):
    opts: list[torch.optim.Optimizer] = []
    real_sgd = torch.optim.SGD

    def recording_sgd(*args, **kwargs):
        opts.append(real_sgd(*args, **kwargs))
        return opts[-1]

    monkeypatch.setattr(torch.optim, "SGD", recording_sgd)
    result = run("c", CASES["conv1d/healthy"][2], 0, str(tmp_path))
    assert opts[0].defaults["nesterov"] is True
    assert opts[0].defaults["weight_decay"] == 5e-4
    assert result.final_val_acc > 0.9  # the frequency of a noisy sine is easy to read
    assert not result.labels  # no published criterion flags the healthy recipe
    trial = create_trial(result.path)
    assert trial.tensor("Conv1dNet_input_0").value(0, mode=TRAIN).shape == (32, 1, 32)
    assert "conv1_relu_output_0" in trial.tensor_names(collection="relu_output")
    assert trial.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN).shape == (32, 3)
    # 640 samples in batches of 32: 20 TRAIN steps an epoch, then 4 validation batches of 64
    assert trial.steps()[-1] == len(result.train_before) - 1 == 10 * (20 + 4) - 1


def _digit_images(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A 10-class task of the channels-last digits' shape ((N, 8, 8, 1) in [0, 1], 360 held out), smaller:
    class c is the images' brightness (c / 9 * 0.8, plus uniform noise up to 0.2)."""
    y = rng.integers(0, 10, size=600).astype(np.int64)
    x = (y / 9 * 0.8)[:, None, None, None] + rng.random((600, 8, 8, 1)) * 0.2
    return x.astype(np.float32), y, 10, 360


def test_convbn_keras_cosine_schedule_warms_up_decays_and_the_fault_zeroes_it():
    import keras
    from families.keras_training import cosine_schedule

    spec = CASES["convbn_keras/healthy"][2]
    steps, epochs = 30, 8  # 960 samples in batches of 32, 8 epochs
    lr = FAMILIES["convbn"].lr
    schedule = cosine_schedule(keras, spec, steps, epochs)
    at = lambda s: float(schedule(s))  # noqa: E731
    assert at(0) == 0.0
    assert at(15) == pytest.approx(lr / 2, rel=1e-5)  # half way through the one-epoch warmup
    assert at(30) == pytest.approx(lr, rel=1e-5)  # the peak, then the cosine
    assert at(30 + 105) == pytest.approx(lr / 2, rel=1e-4)  # half of the 210 decay steps
    assert at(240) == pytest.approx(0.0, abs=1e-9)
    zeroed = cosine_schedule(keras, CASES["convbn_keras/scheduler_zeroes_lr"][2], steps, epochs)
    assert float(zeroed(29)) == pytest.approx(at(29), rel=1e-6)
    assert [float(zeroed(s)) for s in (30, 100, 239)] == [0.0, 0.0, 0.0]


def test_a_convbn_keras_run_is_a_bn_cnn_saved_by_the_keras_hook(tmp_path, monkeypatch):
    import keras
    from families.keras_training import build_keras_convbn, run_keras

    monkeypatch.setattr(data, "digits_channels_last", _digit_images)
    model = build_keras_convbn(keras, CASES["convbn_keras/healthy"][2])
    assert [type(layer).__name__ for layer in model.layers] == [
        "Conv2D",
        "BatchNormalization",
        "Activation",
        "Conv2D",
        "BatchNormalization",
        "Activation",
        "GlobalAveragePooling2D",
        "Dense",
    ]
    assert [layer.filters for layer in model.layers if isinstance(layer, keras.layers.Conv2D)] == [16, 32]
    assert model.layers[-1].units == 10
    assert model.layers[-1].activation.__name__ == "linear"  # logits
    dropout = build_keras_convbn(keras, CASES["convbn_keras/heavy_dropout"][2])
    assert [(type(lr).__name__, getattr(lr, "rate", None)) for lr in dropout.layers[-2:]] == [
        ("Dropout", 0.5),
        ("Dense", None),
    ]
    deep = build_keras_convbn(keras, CASES["convbn_keras/deep_sigmoid"][2])
    assert sum(isinstance(lr, keras.layers.Conv2D) for lr in deep.layers) == 6
    assert [lr.name for lr in deep.layers if "sigmoid" in lr.name] == [
        f"conv{i}_sigmoid" for i in range(1, 7)
    ]

    result = run_keras("k", replace(CASES["convbn_keras/healthy"][2], epochs=6), 0, str(tmp_path))
    trial = create_trial(str(tmp_path))
    assert trial.steps()[-1] == len(result.train_before) - 1
    names = trial.tensor_names()
    assert "gradients/net/conv1/kernelGrad" in names
    assert "conv1_relu/outputs" in trial.tensor_names(collection="relu_output")
    assert "batch_loss/SparseCategoricalCrossentropy_from_logits" in names  # the loss kind, on logits
    # step 4: a full batch of 32 (Keras's PyDataset adapter does not feed item 0 first, so step 0 can be
    # the epoch's partial last batch: bench/journal/families.md, branch newfam2)
    assert trial.tensor("inputs").value(4, mode=TRAIN).shape == (32, 8, 8, 1)
    assert trial.tensor("predictions").value(4, mode=TRAIN).shape == (32, 10)
    # the validation accuracy Keras logs, per epoch: the BN CNN learns the brightness classes (chance 0.1)
    assert len(result.val_acc) == 6
    assert result.val_acc[-1] > 0.5
