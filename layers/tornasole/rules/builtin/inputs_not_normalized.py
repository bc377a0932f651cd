"""InputsNotNormalized: the data the model is fed are far off unit scale (the input normalisation is missing).

Published criteria this re-implements, and where it departs from them:

* LeCun, Bottou, Orr and Müller, "Efficient BackProp" (1998), section 4.3: each input variable should
  have a mean near zero and a variance near one (or at least comparable scales across variables);
* UMLAUT (Schoop et al., CHI'21), "data not normalised": flags inputs outside [-1, 1];
* SageMaker Debugger's ``CheckInputImages``: a channel's mean beyond 0.2 over 500 images.

UMLAUT's literal range fires on every standardised data set (a z-score lies outside [-1, 1] a third of the
time) and ``CheckInputImages``'s mean fires on images in [0, 1] (mean about 0.3-0.5), which train normally.
So this rule reads the inputs' *magnitude* and asks for an order of magnitude more than unit scale: it
fires when the ``percentile``-th percentile of |x| over the non-zero finite entries of the inputs seen so
far exceeds ``threshold``. Standardised features sit at 1.3-1.7 there (a Gaussian's 90th percentile of |z|
is 1.64), images in [0, 1] or [-1, 1] at 1 at most, one-hot and binary inputs at 1; raw 8-bit pixels sit at
about 200, raw physical measurements (areas, prices, years) in the hundreds or more, and DeepFD's "drop the
input normalisation" mutant (inputs x100) at 94-164 on the families benchmark's data.

Why a percentile of the non-zero magnitudes: a mean or a root mean square is moved by a few outliers in a
batch (2 samples in 500 at 100 put the RMS of z-scores at 6.4); a percentile is not. Zeros are left out so
that sparse inputs (raw pixels of digits, counts) are judged by the values they carry, not by their
background. What it does not see: a single unscaled feature among many standardised ones (pooled over
every entry, it moves the percentile little), inputs far *below* unit scale, and a mean offset smaller than
``threshold``.

What it reads: the tensors whose names ``regex`` matches, by default the model's own input as the hooks
name it: the PyTorch hook's ``<ModelClass>_input_0`` (the registered top-level module's first input: a
class name starts with a capital, its submodules' paths do not; a loss module's ``<...>Loss_input_0`` is
left out) and the Keras hook's ``inputs`` (``inputs_<i>`` per input). Inputs of every mode count (training
and validation data go through the same network). Non-float inputs are skipped (token ids into an
embedding, integer labels, masks), and so are non-finite entries (ExplodingTensor's concern). Samples are
counted along axis 0; the rule judges once ``threshold_samples`` samples were seen and from then on at
every step, over the newest saved steps that hold at least ``threshold_samples`` samples (so a long job
reads a bounded number of input tensors per evaluated step, and a pipeline that loses its normalisation
mid-run is seen). Each saved step's magnitudes are kept as a histogram of log10 |x| (40 bins a decade,
1e-8 to 1e12: a 6% resolution, memory bounded by the bins, not the data); the decision reads the lower
edge of the percentile's bin, so it never overstates the scale.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["InputsNotNormalized", "DEFAULT_MODEL_INPUT_REGEX", "magnitude_histogram", "magnitude_percentile"]

#: The model's own input as the PyTorch hook (``<ModelClass>_input_0``) and the Keras hook (``inputs``,
#: ``inputs_<i>``) name it; a loss module's ``<...>Loss_input_0`` is not the model's.
DEFAULT_MODEL_INPUT_REGEX = r"^[A-Z]\w*(?<!Loss)_input_0$|^inputs(_\d+)?$"

_LOW, _HIGH, _PER_DECADE = -8, 12, 40
_BINS = (_HIGH - _LOW) * _PER_DECADE


def magnitude_histogram(values: np.ndarray) -> np.ndarray:
    """Counts of log10 |x| over the non-zero finite entries of ``values`` in ``_BINS`` bins from 1e-8 to
    1e12 (entries beyond either end counted in the end bins).

    Examples
    --------
    >>> int(magnitude_histogram(np.array([0.0, 1.0, -2.0, np.inf])).sum())
    2
    """
    a = np.abs(np.asarray(values, dtype=np.float64).reshape(-1))
    a = a[np.isfinite(a) & (a > 0)]
    if not a.size:
        return np.zeros(_BINS, dtype=np.int64)
    idx = np.floor((np.log10(a) - _LOW) * _PER_DECADE).astype(np.int64)
    return np.bincount(np.clip(idx, 0, _BINS - 1), minlength=_BINS).astype(np.int64)


def magnitude_percentile(hist: np.ndarray, percent: float) -> float | None:
    """The lower edge of the bin of :func:`magnitude_histogram` that holds the ``percent``-th percentile;
    None for an empty histogram.

    Examples
    --------
    >>> h = magnitude_histogram(np.arange(1.0, 101.0))
    >>> round(magnitude_percentile(h, 90), 1)
    89.1
    """
    total = int(hist.sum())
    if total == 0:
        return None
    rank = int(np.ceil(total * percent / 100.0))
    b = int(np.searchsorted(np.cumsum(hist), max(rank, 1)))
    return float(10.0 ** (_LOW + b / _PER_DECADE))


class InputsNotNormalized(BuiltinRule):
    """Fires when the ``percentile``-th percentile of the inputs' non-zero |x| exceeds ``threshold``.

    Examples
    --------
    >>> # invoke_rule(InputsNotNormalized(trial, threshold="40", threshold_samples="100"))
    """

    LIKELY_CAUSE = (
        "{tensor}: the model's inputs are far off unit scale (raw pixels or raw measurements): the input "
        "normalisation is missing"
    )
    SUGGESTED_FIX = (
        "normalise the inputs: standardise each feature with the training set's mean and standard "
        "deviation (images: divide by 255, then subtract the channel means)"
    )

    PARAMETERS = (
        Param("threshold", "float", "40", "the percentile of |inputs| above this fires (unit scale: 1)"),
        Param("percentile", "float", "90", "which percentile of the non-zero |inputs| is judged"),
        Param("threshold_samples", "int", "100", "samples (axis 0) to see before judging"),
        Param("regex", "regex", DEFAULT_MODEL_INPUT_REGEX, "input tensors (re.match): the model's own input"),
    )
    #: Why the first four steps as well as every 100th: a missing normalisation is there from the first
    #: batch, and at every 100th step alone a short job of small batches never reaches
    #: ``threshold_samples`` (the families benchmark's 150-330-step runs of 8-32 samples a batch would see
    #: 24-96 TRAIN samples by their end); four batches of 25 or more judge it at the fourth step.
    COLLECTIONS = (
        (
            "model_input",
            {"include_regex": DEFAULT_MODEL_INPUT_REGEX, "save_interval": "100", "save_steps": "0,1,2,3"},
        ),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._memo: dict[tuple[str, int], tuple[int, np.ndarray] | None] = {}

    def check_params(self) -> None:
        self.require_at_least(1, "threshold_samples")
        if not 0 < self.percentile <= 100:
            raise self.param_error("percentile", f"value {self.percentile} must be in (0, 100]")
        if not self.threshold > 0:
            raise self.param_error("threshold", f"value {self.threshold} must be > 0")

    def _stats(self, name: str, step: int) -> tuple[int, np.ndarray] | None:
        """``(samples, histogram)`` of ``name`` at ``step``; None for a non-float or scalar tensor."""
        key = (name, step)
        if key not in self._memo:
            v = self.value(name, step)
            if v is None or v.ndim == 0 or not np.issubdtype(v.dtype, np.floating):
                self._memo[key] = None
            else:
                self._memo[key] = (int(v.shape[0]), magnitude_histogram(v))
        return self._memo[key]

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, regex=self.regex):
            samples, hist = 0, None
            for s in reversed(self.base_trial.tensor(name).prev_steps(step)):
                st = self._stats(name, s)
                if st is None:
                    continue
                samples += st[0]
                hist = st[1] if hist is None else hist + st[1]
                if samples >= self.threshold_samples:
                    break
            if hist is None or samples < self.threshold_samples:
                continue
            scale = magnitude_percentile(hist, self.percentile)
            if scale is not None and scale > self.threshold:
                self.report_issue(
                    f"{self.fmt(self.percentile)}th percentile of |{name}| over {samples} samples "
                    f">= {self.fmt(scale)} > threshold {self.fmt(self.threshold)}",
                    tensor=name,
                    value=scale,
                    samples=samples,
                    threshold=self.threshold,
                )
                return True
        return False
