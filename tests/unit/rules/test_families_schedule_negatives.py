"""The families benchmark's schedule hard negatives (issue 29, branch schedneg) build what they say:
``cosine_to_zero`` is PyTorch's per-step ``CosineAnnealingLR`` over every optimiser step with ``eta_min`` 0
(the last saved rates a tiny fraction of the peak), ``warmup_from_zero`` a linear warmup from exactly 0 per
optimiser step over the first 2 epochs, then the recipe's own schedule; both save the rate, both go to
every PyTorch family (at the recipe's batch and at batch 4) and to no Keras one. The transformer family
needs no data set."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FAMILIES, run  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402

NEGATIVES = (
    "cosine_to_zero",
    "warmup_from_zero",
    "cosine_to_zero_small_batch",
    "warmup_from_zero_small_batch",
)


def _saved_lrs(path: str) -> list[float]:
    tensor = create_trial(path).tensor("scalar/lr/0")
    return [float(np.ravel(tensor.value(s, mode=TRAIN))[0]) for s in tensor.steps(mode=TRAIN)]


def test_every_pytorch_family_and_no_keras_one_takes_the_schedule_negatives():
    pytorch = [f for f in SCORED_FAMILIES if not f.endswith("_keras")]
    for case in NEGATIVES:
        found = {
            name.split("/", 1)[0]: kind for name, (kind, _, _) in CASES.items() if name.endswith("/" + case)
        }
        assert found == dict.fromkeys(pytorch, "healthy"), case
    for case in ("cosine_to_zero_small_batch", "warmup_from_zero_small_batch"):
        _, _, spec = CASES[f"rnn/{case}"]
        assert (spec.batch, spec.lr_mult, spec.save_lr) == (4, 0.5, True)


def test_cosine_to_zero_anneals_every_optimiser_step_to_zero(tmp_path):
    _, _, spec = CASES["transformer/cosine_to_zero"]
    result = run("c", replace(spec, epochs=2), 0, str(tmp_path))
    values = _saved_lrs(result.path)
    peak = FAMILIES["transformer"].lr
    assert np.isclose(values[0], peak)  # no warmup (saved as float32)
    assert all(b < a for a, b in zip(values, values[1:]))  # falls at every saved step, not per epoch
    # 20 optimiser steps an epoch, 40 in all, saved every 4: the last saved rate is the cosine at 36 of 40
    assert np.isclose(values[-1], peak * 0.5 * (1 + np.cos(np.pi * 36 / 40)), rtol=1e-5)
    assert values[-1] < 0.03 * peak


def test_warmup_from_zero_rises_per_step_from_zero_then_follows_the_recipe(tmp_path):
    _, _, spec = CASES["transformer/warmup_from_zero"]
    result = run("w", replace(spec, epochs=4), 0, str(tmp_path))
    values = _saved_lrs(result.path)
    peak = FAMILIES["transformer"].lr
    assert values[0] == 0.0  # the first optimiser step's rate
    # 20 optimiser steps an epoch: over the warmup's 40 steps, saved every 4, the rate rises by peak / 10
    warm = values[:10]
    assert np.allclose(warm, [peak * 4 * i / 40 for i in range(10)])
    # then the recipe's per-epoch cosine from epoch 2 of 4: epoch 2 at the peak, epoch 3 at half of it
    assert np.allclose(values[10:15], peak)
    assert np.allclose(values[15:], peak * 0.5)
