"""The families benchmark (bench/detection/families) builds what it says: the hook's global steps are the
trainer's, a skipped fp16 step saves Inf gradients under a finite loss, a frozen layer saves no gradient,
labels come from the published criteria. Uses the synthetic-sequence family (no data set to load)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.training import FamilySpec, run  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402


def _short(spec: FamilySpec) -> FamilySpec:
    return replace(spec, epochs=2)


def test_every_family_has_healthy_runs_hard_negatives_and_faults():
    families = {fam for _, fam, _ in CASES.values()}
    assert families == set(SCORED_FAMILIES)
    # twenty-two PyTorch families (fifteen held out: resmlp, iris, conv1d, wine, lstm, digits_rows,
    # diabetes_huber, recall_gru, induction_tf, multilabel, conv_ae, vae, mixup_cnn, distill, amp_cnn), two
    # again in Keras, six in Keras only (held out: convbn_keras, digits_keras, gru_keras, attention_keras,
    # cutmix_keras, amp_keras)
    assert len(families) == 30
    assert {spec.framework for name, (_, _, spec) in CASES.items() if "_keras/" in name} == {"keras"}
    for fam in families:
        kinds = [kind for kind, f, _ in CASES.values() if f == fam]
        assert kinds.count("healthy") >= (6 if fam.endswith("_keras") else 7)  # Keras: no fp16 skipped step
        assert kinds.count("broken") >= 5


def test_a_run_saves_the_steps_the_trainer_counted(tmp_path):
    _, _, spec = CASES["rnn/fp16_skipped_step"]
    result = run("rnn/fp16_skipped_step", _short(spec), 0, str(tmp_path))
    trial = create_trial(str(tmp_path))
    assert trial.steps()[-1] == len(result.train_before) - 1
    grad = trial.tensor("gradient/GruNet_out.weight").value(8)
    assert not np.all(np.isfinite(grad))  # the overflowed, skipped step
    assert np.isfinite(trial.tensor("CrossEntropyLoss_output_0").value(8)).all()
    assert "nan" not in result.labels  # the optimiser never applied it


def test_a_layer_frozen_on_purpose_saves_no_gradient_and_a_forgotten_one_does(tmp_path):
    # the mechanism, on the GRU family (no data set to load); the generator builds no frozen_first_on_purpose
    # for rnn, whose first layer is its only hidden layer (test_families_lstm_digits.py)
    frozen_spec = replace(CASES["rnn/healthy"][2], freeze_first=True)
    frozen = run("f", _short(frozen_spec), 0, str(tmp_path / "frozen"))
    forgotten = run("g", _short(CASES["rnn/first_layer_not_optimised"][2]), 0, str(tmp_path / "forgotten"))
    names = create_trial(frozen.path).tensor_names(step=0)
    assert "GruNet_gru.weight_ih_l0" in names
    assert "gradient/GruNet_gru.weight_ih_l0" not in names
    assert "gradient/GruNet_gru.weight_ih_l0" in create_trial(forgotten.path).tensor_names(step=0)
    assert "unchanged" not in frozen.labels
    assert forgotten.labels.get("unchanged") == 4  # DeepDiagnosis: constant over 5 training steps


def _diabetes_shaped(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A linear task of the diabetes set's shape (442 x 10, 112 held out): the test venv has no
    scikit-learn (a benchmark dependency, requirements/bench.txt), and what is checked here is the saving
    and the labels, not the data."""
    x = rng.standard_normal((442, 10)).astype(np.float32)
    y = (x @ rng.standard_normal(10) + 0.1 * rng.standard_normal(442)).astype(np.float32)[:, None]
    return x, y, 0, 112


def test_a_keras_run_is_saved_by_the_keras_hook_and_labelled_alike(tmp_path, monkeypatch):
    """The Keras variant: the hook's global steps are the trainer's (TRAIN and validation batches), names
    are the Keras hook's, the Monitor saw the gradients of the compiled step, a forgotten layer is labelled
    unchanged as in PyTorch."""
    from families import data
    from families.keras_training import run_keras

    monkeypatch.setattr(data, "diabetes", _diabetes_shaped)

    _, _, spec = CASES["regression_keras/first_layer_not_optimised"]
    result = run_keras("k", replace(spec, epochs=2), 0, str(tmp_path))
    trial = create_trial(str(tmp_path))
    assert trial.steps()[-1] == len(result.train_before) - 1
    names = trial.tensor_names()
    assert "gradients/net/fc1/kernelGrad" in names
    assert "gradients/net/fc1/biasGrad" in names
    assert "fc1_relu/outputs" in trial.tensor_names(collection="relu_output")
    assert result.labels.get("unchanged") == 4  # the first layer's kernel, constant over 5 training steps
    # never handed to the optimiser: the first layer's weights are the initial ones at every saved step,
    # while its gradients were computed and saved; the next layer trained
    for name in ("weights/net/fc1/kernel", "weights/net/fc1/bias"):
        tensor = trial.tensor(name)
        steps = tensor.steps(mode=TRAIN)
        first = tensor.value(steps[0], mode=TRAIN)
        assert len(steps) > 5
        assert all(np.array_equal(tensor.value(s, mode=TRAIN), first) for s in steps[1:]), name
    grad = trial.tensor("gradients/net/fc1/kernelGrad")
    assert np.any(grad.value(grad.steps(mode=TRAIN)[0], mode=TRAIN) != 0)
    fc2 = trial.tensor("weights/net/fc2/kernel")
    steps = fc2.steps(mode=TRAIN)
    assert not np.array_equal(fc2.value(steps[0], mode=TRAIN), fc2.value(steps[-1], mode=TRAIN))


@pytest.mark.parametrize("accumulate", [None, 2])
def test_a_layer_left_out_of_a_keras_optimizer_is_not_moved_by_adamws_weight_decay(accumulate):
    """``optimizer_skips_first`` in Keras hands ``optimizer.apply`` every variable but the first layer's
    (:func:`families.keras_training.leave_out`), so AdamW's decoupled weight decay cannot move them either;
    zeroing their gradients (the construction before 2026-11-29's correction) leaves the decay on. Keras
    accepts the subset after being built on every variable, with and without gradient accumulation."""
    import keras
    from families.keras_training import leave_out

    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4, name="fc1"), keras.layers.Dense(2, name="out")]
    )
    variables = list(model.trainable_weights)
    first = {id(v) for v in model.layers[0].trainable_weights}
    before = [v.numpy().copy() for v in variables]
    grads = [np.ones(v.shape, dtype="float32") for v in variables]

    left_out = keras.optimizers.AdamW(0.1, weight_decay=0.5, gradient_accumulation_steps=accumulate)
    left_out.build(variables)
    for _ in range(4):
        left_out.apply(*leave_out(grads, variables, first))
    moved = [not np.array_equal(b, v.numpy()) for b, v in zip(before, variables)]
    assert moved == [False, False, True, True]  # fc1 kernel and bias bit-identical; out trained

    zeroed = keras.optimizers.AdamW(0.1, weight_decay=0.5, gradient_accumulation_steps=accumulate)
    kernel = variables[0].numpy().copy()
    for _ in range(4):
        zeroed.apply([np.zeros_like(g) if id(v) in first else g for g, v in zip(grads, variables)], variables)
    assert not np.array_equal(variables[0].numpy(), kernel)  # the decay moved a kernel whose gradient is 0


def test_keras_runs_get_a_new_permutation_each_epoch_drawn_as_pytorch_draws_it():
    """Keras's ``fit(shuffle=True)`` fed the Keras regression twin batches that made its healthy runs
    overfit (bench/journal/families.md); the Keras runs now draw each epoch's permutation from the run's
    generator, as the PyTorch loop does, so the two frameworks see the same batches."""
    import keras
    from families.keras_training import epoch_shuffled

    x = np.arange(10, dtype=np.float32)[:, None]
    y = x * 2
    batches = epoch_shuffled(keras, x, y, 4, np.random.default_rng(3))
    expected = np.random.default_rng(3)
    assert len(batches) == 3  # 4 + 4 + 2
    seen = []
    for epoch in range(2):
        order = expected.permutation(10)  # what families.training draws at each epoch's start
        got = np.concatenate([batches[i][0][:, 0] for i in range(len(batches))])
        assert np.array_equal(got, order.astype(np.float32)), epoch
        assert np.array_equal(np.concatenate([batches[i][1] for i in range(3)])[:, 0], got * 2)
        seen.append(got)
        batches.on_epoch_end()
    assert not np.array_equal(seen[0], seen[1])
