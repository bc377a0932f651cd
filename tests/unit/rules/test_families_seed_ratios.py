"""The initialisation studies' shared seed loop (bench/detection/families/seed_ratios.py): every seed's model
is started once, in seed order, before its batches are scored in the order given, so the studies' random
draws (a framework's seed, then the seed's example order) happen as they did when each had its own loop."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection"
sys.path.insert(0, str(BENCH))

from families.seed_ratios import first_batch_ratios  # noqa: E402


def test_each_batch_size_gets_every_seeds_ratio_in_seed_order():
    ratios = first_batch_ratios(3, (4, 16), lambda seed: lambda batch: seed * 100 + batch)
    assert list(ratios) == [4, 16]
    np.testing.assert_array_equal(ratios[4], [4, 104, 204])
    np.testing.assert_array_equal(ratios[16], [16, 116, 216])


def test_a_seed_is_started_once_and_scored_before_the_next_starts():
    calls = []

    def start(seed):
        calls.append(("start", seed))

        def ratio(batch):
            calls.append(("ratio", seed, batch))
            return 1.0

        return ratio

    first_batch_ratios(2, iter((8, 2)), start)  # any iterable of sizes, taken in its order
    assert calls == [
        ("start", 0),
        ("ratio", 0, 8),
        ("ratio", 0, 2),
        ("start", 1),
        ("ratio", 1, 8),
        ("ratio", 1, 2),
    ]


def test_no_seeds_give_empty_arrays_a_study_can_still_ask_for():
    ratios = first_batch_ratios(0, (4,), lambda seed: lambda batch: 1.0)
    assert ratios[4].shape == (0,)
