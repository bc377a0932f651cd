"""The seed loop of the initialisation studies (``init_ratios.py``, ``mse_init_ratios.py``): for each seed,
one untrained model and its first loss over the loss's chance level at each first-batch size.

Pure numpy, importable without PyTorch or TensorFlow: what a seed builds and how it scores a batch is the
caller's ``start``, so the cross-entropy study (Keras and PyTorch classifiers, its own permutation per seed)
and the squared-error study (PyTorch regressors, ``torch.randperm``) draw their random numbers in the order
they always did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["first_batch_ratios"]


def first_batch_ratios(
    seeds: int, batches: Iterable[int], start: Callable[[int], Callable[[int], float]]
) -> dict[int, np.ndarray]:
    """``{batch size: the ratio of every seed, in seed order}`` over seeds ``0 .. seeds - 1``.

    ``start(seed)`` seeds its framework, builds that seed's model (noting what it measures of the weights)
    and draws the seed's example order; it returns ``ratio(batch)``, the first loss on the first ``batch``
    examples of that order over the chance level, asked for each size in ``batches``' order.

    Examples
    --------
    >>> first_batch_ratios(2, (1, 3), lambda seed: lambda batch: seed + batch / 10)
    {1: array([0.1, 1.1]), 3: array([0.3, 1.3])}
    """
    batches = tuple(batches)
    ratios: dict[int, list[float]] = {b: [] for b in batches}
    for seed in range(seeds):
        ratio = start(seed)
        for b in batches:
            ratios[b].append(ratio(b))
    return {b: np.array(r) for b, r in ratios.items()}
