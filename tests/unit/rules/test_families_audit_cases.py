"""The families benchmark's hard negatives of issue 29's audit build what they say: PyTorch's own SGDR and
one-cycle schedulers move the rate every optimiser step and the run saves it (``scalar/lr/0``), which
LearningRateDiscontinuity reads without firing; the wide sparse ReLU layer is mostly zeros; heavy dropout is
dropout 0.5. The transformer family needs no data set; the regression's is replaced by a synthetic one of
its shape (the test venv has no scikit-learn)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES  # noqa: E402
from families.training import FAMILIES, FamilySpec, build, run  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.rules import create_rule, invoke_rule  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402

LR = "scalar/lr/0"


def _saved_lrs(path: str) -> dict[int, float]:
    tensor = create_trial(path).tensor(LR)
    return {s: float(np.ravel(tensor.value(s, mode=TRAIN))[0]) for s in tensor.steps(mode=TRAIN)}


def test_the_audit_cases_are_healthy_pytorch_cases_where_they_apply():
    audit = {"warm_restarts", "one_cycle", "wide_sparse_relu", "heavy_dropout"}
    found = {name: kind for name, (kind, _, _) in CASES.items() if name.split("/", 1)[1] in audit}
    assert set(found.values()) == {"healthy"}
    # PyTorch only, bar the held-out Keras families' dropout at 0.5: convbn's one Dropout(0.5) before its
    # output (branch newfam2), digits's two (branch heldout), attention's three (branch heldout5)
    assert {name for name in found if "_keras/" in name} == {
        "convbn_keras/heavy_dropout",
        "digits_keras/heavy_dropout",
        "attention_keras/heavy_dropout",
    }
    assert {n for n in found if n.endswith("/warm_restarts")} == {
        "softmax/warm_restarts",
        "transformer/warm_restarts",
        "cnn/warm_restarts",
        "resmlp/warm_restarts",  # a held-out family (branch newfam)
        "wine/warm_restarts",  # a held-out family (branch lrhigh)
        "recall_gru/warm_restarts",  # a held-out family (branch heldout3): warmup + cosine per step
        "conv_ae/warm_restarts",  # a held-out family (branch heldout5): one-cycle
        "vae/warm_restarts",  # a held-out family (branch heldout6): flat then cosine per step
        "mixup_cnn/warm_restarts",  # a held-out family (branch heldout6): SGD momentum, as cnn
        "distill/warm_restarts",  # a held-out family (branch heldout7): RMSprop, a cosine per epoch
        "amp_cnn/warm_restarts",  # a held-out family (branch amp): AdamW under fp16 autocast, warmup + cosine
    }
    assert {n for n in found if n.endswith("/one_cycle")} == {"softmax/one_cycle", "transformer/one_cycle"}


def test_warm_restarts_restart_the_saved_rate_and_the_rule_stays_quiet(tmp_path):
    _, _, spec = CASES["transformer/warm_restarts"]
    result = run("w", replace(spec, epochs=4, cycle_epochs=2), 0, str(tmp_path))
    lrs = _saved_lrs(result.path)
    peak = FAMILIES["transformer"].lr
    values = list(lrs.values())
    assert max(values) <= peak * (1 + 1e-6)
    # 640 samples in batches of 32: 20 optimiser steps an epoch, a restart every 40; TRAIN steps are saved
    # every 4, so the rate falls below a tenth of the peak before each restart and is back near it after
    restart = next(i for i in range(1, len(values)) if values[i] > values[i - 1])
    assert values[restart - 1] < 0.1 * peak < 0.9 * peak < values[restart]
    assert invoke_rule(create_rule("LearningRateDiscontinuity", create_trial(result.path))).fired == []


def test_one_cycle_rises_to_the_peak_then_anneals(tmp_path):
    _, _, spec = CASES["transformer/one_cycle"]
    result = run("o", replace(spec, epochs=2), 0, str(tmp_path))
    values = list(_saved_lrs(result.path).values())
    peak = FAMILIES["transformer"].lr
    assert values[0] < 0.05 * peak  # OneCycleLR starts at max_lr / 25
    assert max(values) > 0.95 * peak
    assert values[-1] < 0.05 * peak  # the last saved step, a few steps before the end of the anneal
    assert invoke_rule(create_rule("LearningRateDiscontinuity", create_trial(result.path))).fired == []


def _diabetes_shaped(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    x = rng.standard_normal((442, 10)).astype(np.float32)
    y = (x @ rng.standard_normal(10) + 0.1 * rng.standard_normal(442)).astype(np.float32)[:, None]
    return x, y, 0, 112


def test_the_wide_sparse_relu_layer_is_mostly_zeros(tmp_path, monkeypatch):
    from families import data

    monkeypatch.setattr(data, "diabetes", _diabetes_shaped)
    _, _, spec = CASES["regression/wide_sparse_relu"]
    result = run("r", replace(spec, epochs=2), 0, str(tmp_path))
    trial = create_trial(result.path)
    out = trial.tensor("fc1_relu_output_0").value(0, mode=TRAIN)
    assert out.shape[1] == 256  # 8x the recipe's 32
    assert (out <= 0).mean() > 0.6


def test_heavy_dropout_is_dropout_one_half():
    import torch

    _, _, spec = CASES["regression/heavy_dropout"]
    model = build(spec, FAMILIES["regression"], 10, 0)
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert rates == [0.5, 0.5]
    assert isinstance(spec, FamilySpec)
    assert spec.dropout == 0.5
