"""CheckInputImages: input images are not normalised.

Choices: images of the tensors matching ``regex`` are accumulated over saved
steps <= the evaluated step that the trial holds (axis 0 = images) until ``threshold_samples``
images were seen; from then on the rule fires when |mean| of any channel
(axis ``channel``: 1 for NCHW, 3 for NHWC) over all seen images exceeds
``threshold_mean``. Per-step channel sums are memoised. Images of every mode
count: training and validation inputs go through the same network, so both
must be normalised.
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["CheckInputImages"]


class CheckInputImages(BuiltinRule):
    """Fires when |mean| of an input channel > ``threshold_mean`` after ``threshold_samples`` images.

    Examples
    --------
    >>> # invoke_rule(CheckInputImages(trial, regex=".*input_0", channel="1"))
    """

    LIKELY_CAUSE = "the input images are not normalised (their mean is far from 0)"
    SUGGESTED_FIX = "normalise the inputs: subtract the data set's mean and divide by its standard deviation"

    PARAMETERS = (
        Param("threshold_mean", "float", "0.2", "|mean| of a channel above this fires"),
        Param("threshold_samples", "int", "500", "images to see before checking"),
        Param("regex", "regex", ".*hybridsequential0_input_0", "input image tensors (re.match)"),
        Param("channel", "int", "1", "channel axis of the image tensor"),
    )
    COLLECTIONS = (("input_image", {"include_regex": ".*hybridsequential0_input_0", "save_interval": "500"}),)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._memo: dict[tuple[str, int], tuple[int, np.ndarray, int]] = {}

    def _stats(self, name: str, step: int) -> tuple[int, np.ndarray, int] | None:
        key = (name, step)
        if key not in self._memo:
            v = self.value(name, step)
            if v is None or v.ndim <= self.channel:
                return None
            axes = tuple(i for i in range(v.ndim) if i != self.channel)
            per_channel = v.astype(np.float64).sum(axis=axes)
            self._memo[key] = (int(v.shape[0]), per_channel, int(v.size // v.shape[self.channel]))
        return self._memo[key]

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, regex=self.regex):
            images, sums, count = 0, None, 0
            for s in self.base_trial.tensor(name).prev_steps(step):
                st = self._stats(name, s)
                if st is None:
                    continue
                images += st[0]
                sums = st[1] if sums is None else sums + st[1]
                count += st[2]
            if sums is None or images < self.threshold_samples:
                continue
            means = sums / count
            worst = int(np.argmax(np.abs(means)))
            if abs(means[worst]) > self.threshold_mean:
                self.report_issue(
                    f"mean of channel {worst} of {name} over {images} images={self.fmt(means[worst])}, "
                    f"|mean| > threshold_mean {self.fmt(self.threshold_mean)}",
                    tensor=name,
                    value=float(means[worst]),
                    images=images,
                    threshold=self.threshold_mean,
                )
                return True
        return False
