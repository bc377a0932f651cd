"""bench/detection/labels.py follows the published detectors' code (issue #29, the label audit): UMLAUT's
overfitting is one epoch against the one before, AUTOTRAINER's gradient gate and slow convergence read the
training accuracy as well as the validation accuracy, DeepDiagnosis judges saturation every fifth epoch.
Each test fails on the labels before the audit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from labels import Monitor  # noqa: E402


def _epochs(monitor: Monitor, rows: list[tuple[float, float, float, float]], acts=None) -> None:
    """``rows``: (train loss, validation loss, validation accuracy, training accuracy) per epoch."""
    for epoch, (tl, vl, va, ta) in enumerate(rows):
        monitor.epoch_end(epoch, 10 * epoch + 9, tl, vl, va, (acts or {}), ta)


def test_umlaut_overfitting_is_one_epoch_of_rising_validation_loss():
    monitor = Monitor(epochs=10)
    _epochs(monitor, [(1.0, 1.0, 0.8, 0.8), (0.9, 0.8, 0.85, 0.85), (0.8, 0.85, 0.85, 0.9)])
    assert monitor.labels == {"overfit": 29}  # umlaut check_overfitting: d_val > 0 and d_train <= 0
    assert "overfit_3_epochs" not in monitor.variants


def test_the_three_epoch_reading_is_kept_as_a_variant_only():
    monitor = Monitor(epochs=10)
    _epochs(monitor, [(1.0, 0.5, 0.8, 0.8), (0.9, 0.6, 0.8, 0.8), (0.8, 0.7, 0.8, 0.8), (0.7, 0.8, 0.8, 0.8)])
    assert monitor.labels["overfit"] == 19
    assert monitor.variants == {"overfit_3_epochs": 39}


def _vanishing_pending(monitor: Monitor) -> None:
    grads = {"first": np.full(4, 1e-9), "last": np.ones(4)}
    monitor.train_step(0, 1.0, grads, {"first": np.zeros(4)}, grads, {})


def test_gradient_symptoms_wait_for_both_accuracies_to_stay_low():
    """AUTOTRAINER's not_converge needs the best validation AND training accuracy below 0.6; a run whose
    training accuracy climbs by more than 0.01 an epoch is not slow either."""
    monitor = Monitor(epochs=6)
    _vanishing_pending(monitor)
    _epochs(monitor, [(1.0, 1.0, 0.3, 0.5), (0.9, 0.9, 0.35, 0.7), (0.8, 0.8, 0.4, 0.9)])
    assert "vanishing" not in monitor.labels  # before: validation accuracy < 0.6 alone was enough
    assert "slow" not in monitor.labels


def test_a_flat_run_is_gated_and_slow():
    monitor = Monitor(epochs=6)
    _vanishing_pending(monitor)
    _epochs(monitor, [(1.0, 1.0, 0.3, 0.3), (1.0, 1.0, 0.3, 0.3), (1.0, 1.0, 0.3, 0.3)])
    assert monitor.labels["vanishing"] == 0
    assert monitor.held["vanishing"] == 29
    assert monitor.labels["slow"] == 29


def test_saturation_is_judged_every_fifth_epoch():
    monitor = Monitor(epochs=10)
    saturated = {"fc1_tanh": np.full(100, 9.0)}
    rows = [(1.0 - 0.01 * e, 1.0 - 0.01 * e, 0.9, 0.9) for e in range(5)]
    for epoch, (tl, vl, va, ta) in enumerate(rows):
        monitor.epoch_end(epoch, 10 * epoch + 9, tl, vl, va, saturated, ta)
        if epoch < 4:
            assert "saturation" not in monitor.labels  # before: labelled at the first epoch
    assert monitor.labels["saturation"] == 49
