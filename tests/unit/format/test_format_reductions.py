"""Reduction tags and numpy reductions."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.format.reductions import (
    ALL_REDUCTIONS,
    NORMS,
    REDUCTIONS,
    canonical_reduction,
    compute,
    parse_reduction_tag,
    reduction_tag,
)

X = np.float32([[1, -2], [3, -4]])
# Values smdebug 1.0.34's get_numpy_reduction returns for X.ravel() (all numpy float32 scalars).
SMDEBUG_VALUES = {
    ("min", False): -4.0, ("min", True): 1.0, ("max", False): 3.0, ("max", True): 4.0,
    ("mean", False): -0.5, ("mean", True): 2.5, ("std", False): 2.692582368850708,
    ("std", True): 1.1180340051651, ("variance", False): 7.25, ("variance", True): 1.25,
    ("sum", False): -2.0, ("sum", True): 10.0, ("prod", False): 24.0, ("prod", True): 24.0,
    ("l1", False): 10.0, ("l1", True): 10.0,
    ("l2", False): 5.4772257804870605, ("l2", True): 5.4772257804870605,
}  # fmt: skip


def test_names() -> None:
    assert REDUCTIONS == ("min", "max", "mean", "std", "variance", "sum", "prod")
    assert NORMS == ("l1", "l2")
    assert canonical_reduction("l1_norm") == "l1"
    assert canonical_reduction("l2_norm") == "l2"
    with pytest.raises(ValueError, match="unknown reduction 'median'"):
        canonical_reduction("median")


@pytest.mark.parametrize(("reduction", "absolute"), sorted(SMDEBUG_VALUES))
def test_compute_matches_smdebug_numpy_values(reduction: str, absolute: bool) -> None:
    got = compute(X, reduction, absolute)
    assert got.shape == ()
    assert got.dtype == np.float32
    assert got.item() == pytest.approx(SMDEBUG_VALUES[(reduction, absolute)], rel=1e-6)


def test_norms_are_vector_norms_of_the_flattened_tensor() -> None:
    # smdebug's numpy path would give the spectral norm (5.46) for a 2-D l2; hooks save the vector norm.
    assert compute(X, "l2").item() == pytest.approx(np.sqrt(30), rel=1e-6)
    assert compute(np.ones((2, 3, 4)), "l1_norm").item() == 24.0


def test_compute_dtype_follows_numpy_rules() -> None:
    assert compute(np.int32([1, 2]), "mean").dtype == np.float64
    assert compute(np.int32([1, 2]), "sum").dtype == np.int64
    assert compute(np.float64([1, 2]), "max").dtype == np.float64


def test_reduction_tag_strips_tf_output_index_and_prefixes_abs() -> None:
    assert reduction_tag("relu_output_0", "l2") == "smdebug/reductions/l2/relu_output_0"
    assert reduction_tag("gradient/Net_fc1.weight", "mean", True) == (
        "smdebug/reductions/abs_mean/gradient/Net_fc1.weight"
    )
    assert reduction_tag("dense/kernel:0", "l2_norm", True) == "smdebug/reductions/abs_l2/dense/kernel"


@pytest.mark.parametrize("reduction", ALL_REDUCTIONS)
@pytest.mark.parametrize("absolute", [False, True])
def test_parse_reverses_reduction_tag(reduction: str, absolute: bool) -> None:
    name = "gradient/Net_fc1.weight"
    assert parse_reduction_tag(reduction_tag(name, reduction, absolute)) == (name, reduction, absolute)


def test_parse_rejects_non_reduction_tags() -> None:
    assert parse_reduction_tag("Net_fc1.weight") is None
    assert parse_reduction_tag("smdebug/reductions/mean") is None
    assert parse_reduction_tag("smdebug/reductions/median/x") is None


_NUMPY_REDUCTIONS = {"mean": np.mean, "sum": np.sum, "min": np.amin, "max": np.amax}


@pytest.mark.parametrize("reduction", sorted(_NUMPY_REDUCTIONS))
@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize(
    "array",
    [
        np.random.default_rng(0).standard_normal(10_001).astype(np.float32),
        np.random.default_rng(1).standard_normal((37, 41)),
        np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)[:, ::2],  # not contiguous
        np.float32([np.nan, 1.0]),
        np.float64([np.inf, -np.inf]),
        np.float32([7.0]).reshape(()),
        np.linspace(-3, 3, 101).astype(">f4"),
    ],
    ids=["f32-flat", "f64-2d", "f32-strided", "nan", "inf", "0-d", "big-endian"],
)
def test_fast_reductions_are_bit_identical_to_numpy(array: np.ndarray, reduction: str, absolute: bool):
    """float32/float64 mean, sum, min and max skip numpy's wrappers: same dtype, same bits."""
    data = np.absolute(array) if absolute else array
    with np.errstate(invalid="ignore"):
        expected = np.asarray(_NUMPY_REDUCTIONS[reduction](data))
        got = compute(array, reduction, absolute)
    assert got.dtype == expected.dtype
    assert got.shape == ()
    assert got.tobytes() == expected.tobytes()


def test_reductions_of_a_read_only_view_leave_it_alone() -> None:
    raw = np.arange(-5, 5, dtype=np.float32).tobytes()
    view = np.frombuffer(raw, np.float32)
    assert compute(view, "mean", True).item() == pytest.approx(2.5)
    assert view.tolist() == list(range(-5, 5))


def test_empty_arrays_keep_numpy_behaviour() -> None:
    with pytest.raises(ValueError, match="zero-size"):
        compute(np.zeros(0, np.float32), "max")
    assert compute(np.zeros(0, np.float32), "sum").item() == 0.0
