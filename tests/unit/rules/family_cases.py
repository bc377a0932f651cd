"""The cases every family of the families benchmark takes from the generator (``bench/detection/families/
cases.py``), for the tests that check a held-out family was wired like the others: one list here, so that a
case added to the generator is added to every family's expectation at once."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES  # noqa: E402

#: DeepFD's and AUTOTRAINER's faults, built broken in every family.
COMMON_BROKEN = frozenset(
    {
        "lr_too_high",
        "lr_too_low",
        "init_too_large",
        "first_layer_not_optimised",
        "scheduler_zeroes_lr",
        "labels_shuffled",
        "softmax_before_cross_entropy",
        "inputs_not_normalised",
        "deep_sigmoid",
    }
)
#: What a multi-class Keras family takes: Keras 3's cross-entropy takes the logits back from a softmax output,
#: so the double softmax is not built there (``families.cases._NOT_IN_KERAS``).
KERAS_BROKEN = COMMON_BROKEN - {"softmax_before_cross_entropy"}
#: Hard negatives every family takes, Keras included.
COMMON_HEALTHY = frozenset(
    {
        "healthy",
        "healthy_long",
        "noisy_small_batch",
        "slow_warmup",
        "frozen_first_on_purpose",
        "grad_accumulation",
        "noisy_labels",
    }
)
#: What a PyTorch family takes besides: the fp16 skipped step and the schedule hard negatives.
PYTORCH_HEALTHY = COMMON_HEALTHY | {
    "fp16_skipped_step",
    "cosine_to_zero",
    "warmup_from_zero",
    "cosine_to_zero_small_batch",
    "warmup_from_zero_small_batch",
}


def cases_of(family: str) -> dict[str, str]:
    """``{case: kind}`` of ``family``'s cases, the family's prefix taken off."""
    return {name.split("/", 1)[1]: kind for name, (kind, fam, _) in CASES.items() if fam == family}


def of_kind(cases: dict[str, str], kind: str) -> set[str]:
    """The names of ``cases`` built ``kind`` (``"broken"`` or ``"healthy"``)."""
    return {name for name, k in cases.items() if k == kind}


#: ``sklearn.datasets.load_digits()`` as the families' loaders read it: 180 of each digit, 64 pixels in 0-16
#: (seeded), as ``data`` and as 8x8 ``images``. scikit-learn is a benchmark dependency, not a test one
#: (``make test`` does not install it): tests of a digits family load through :func:`with_stand_in_digits`.
_PIXELS = np.random.default_rng(7).integers(0, 17, size=(1800, 64)).astype(np.float64)
DIGITS = types.SimpleNamespace(
    data=_PIXELS, images=_PIXELS.reshape(1800, 8, 8), target=np.repeat(np.arange(10), 180)
)


def with_stand_in_digits(load):
    """``load()`` with :data:`DIGITS` standing in for scikit-learn's ``load_digits``, and ``sys.modules`` as
    it was afterwards (torch's lazy imports probe for the real package)."""
    names = ("sklearn", "sklearn.datasets")
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    datasets = types.ModuleType("sklearn.datasets")
    datasets.load_digits = lambda: DIGITS
    package = types.ModuleType("sklearn")
    package.datasets = datasets
    sys.modules.update({"sklearn": package, "sklearn.datasets": datasets})
    try:
        return load()
    finally:
        for name in names:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)


def use_few_digit_images(monkeypatch, n: int = 80, val_batch: int = 16) -> None:
    """The Keras image families' loader (``data.digits_channels_last``) cut to the first ``n`` stand-in digits
    (:func:`with_stand_in_digits`) and every step saved (``SAVE_INTERVAL`` 1), for a short real run."""
    from families import data

    load = data.digits_channels_last

    def few(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = with_stand_in_digits(lambda: load(rng))
        return x[:n], y[:n], classes, val_batch

    monkeypatch.setattr(data, "digits_channels_last", few)
    monkeypatch.setattr("families.keras_training.SAVE_INTERVAL", 1)
