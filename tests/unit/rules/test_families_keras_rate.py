"""The Keras families' traces carry the learning rate (issue 29): a convbn_keras run saves ``scalar/lr/0``
at every saved TRAIN step, equal to its ``CosineDecay`` (warmup from 0, then the decay) at that step, so
LossNotDecreasing can see the warmup. A small stand-in for the digits (no data set is loaded)."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES  # noqa: E402
from families.training import FAMILIES, SAVE_INTERVAL  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def _digit_images(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """10 classes of (8, 8, 1) images whose brightness is the class; 160 train, 40 held out."""
    y = rng.integers(0, 10, size=200).astype(np.int64)
    x = (y / 9 * 0.8)[:, None, None, None] + rng.random((200, 8, 8, 1)) * 0.2
    return x.astype(np.float32), y, 10, 40


def test_a_convbn_keras_run_saves_its_cosine_decay_rate_with_the_warmup(tmp_path, monkeypatch):
    import keras
    from families.keras_training import cosine_schedule, run_keras

    monkeypatch.setattr(data, "digits_channels_last", _digit_images)
    spec = replace(CASES["convbn_keras/healthy"][2], epochs=2)
    run_keras("k", spec, 0, str(tmp_path))
    trial = create_trial(str(tmp_path))
    tensor = trial.tensor("scalar/lr/0")
    steps = tensor.steps(mode=TRAIN)
    per_epoch = math.ceil(160 / FAMILIES["convbn"].batch)
    assert steps == list(range(0, 2 * per_epoch, SAVE_INTERVAL))
    schedule = cosine_schedule(keras, spec, per_epoch, 2)
    saved = [float(tensor.value(trial.global_step(TRAIN, s))) for s in steps]
    assert saved == pytest.approx([float(schedule(s)) for s in steps], rel=1e-5, abs=1e-9)
    assert saved[0] == 0.0  # the warmup starts at exactly 0
    peak = saved.index(max(saved))
    assert 0 < peak < len(saved) - 1  # rises (the warmup), then decays
    assert "scalar/lr/0" in trial.tensor_names(collection="scalars")
