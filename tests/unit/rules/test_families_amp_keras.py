"""The families benchmark's held-out family of branch ampkeras builds what its recipe says: ``amp_keras``, a
small Keras CNN of the 8x8 digits (conv-BatchNorm-ReLU, max pooling, global average pooling, a softmax kept
in float32) trained under Keras's mixed precision, keras.io's guide: the ``mixed_float16`` dtype policy, set
for the run and put back afterwards, and the ``LossScaleOptimizer`` that ``compile`` wraps the optimiser in.
Its mixed-precision cases do what their names say; every other family keeps its arithmetic. No
scikit-learn: the digits are :data:`family_cases.DIGITS`; the runs here train on 80 images."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.keras_training import KERAS_ONLY, KERAS_PRECISIONS, global_dtype_policy  # noqa: E402
from families.training import FAMILIES  # noqa: E402
from family_cases import COMMON_HEALTHY, KERAS_BROKEN, cases_of, of_kind, use_few_digit_images  # noqa: E402

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402

AMP_KERAS_BROKEN = {"softmax_output_fp16", "fp16_without_loss_scale", "float16_policy"}
AMP_KERAS_HEALTHY = {"bf16_policy", "loss_scale_short_growth"}


def test_the_family_is_scored_in_keras_only_with_the_common_cases_and_the_mixed_precision_ones():
    amp = cases_of("amp_keras")
    assert of_kind(amp, "broken") == KERAS_BROKEN | AMP_KERAS_BROKEN
    assert of_kind(amp, "healthy") == COMMON_HEALTHY | AMP_KERAS_HEALTHY  # no dropout, no fp16 skipped step
    assert "amp" in KERAS_ONLY
    assert "amp_keras" in SCORED_FAMILIES
    assert not any(name.startswith(("amp/", "amp_keras_keras/")) for name in CASES)
    recipe = FAMILIES["amp"]
    assert (recipe.precision, recipe.opt, recipe.schedule, recipe.softmax_output, recipe.width) == (
        "mixed_float16",
        "adam",
        "cosine",
        True,
        8,
    )
    specs = {name.split("/", 1)[1]: spec for name, (_, fam, spec) in CASES.items() if fam == "amp_keras"}
    assert {spec.framework for spec in specs.values()} == {"keras"}
    assert specs["bf16_policy"].precision == "mixed_bfloat16"
    assert specs["float16_policy"].precision == "float16"
    assert specs["loss_scale_short_growth"].scaler_growth_interval == 25
    assert specs["softmax_output_fp16"].output_fp16
    assert not specs["fp16_without_loss_scale"].auto_scale_loss
    # every other family keeps its arithmetic: no policy, no output or loss-scale change
    for name, (_, fam, spec) in CASES.items():
        if fam != "amp_keras":
            assert FAMILIES[spec.family].precision in ("fp32", "fp16"), name  # amp_cnn's PyTorch fp16
            assert not spec.output_fp16, name
            assert spec.auto_scale_loss, name
            if spec.framework == "keras":
                assert spec.precision is None, name
                assert spec.scaler_growth_interval is None, name
                assert FAMILIES[spec.family].precision == "fp32", name


def test_the_global_policy_is_set_for_the_block_and_put_back_even_on_an_error():
    import keras

    before = keras.mixed_precision.global_policy().name
    assert before == "float32"
    assert KERAS_PRECISIONS == ("fp32", "mixed_float16", "mixed_bfloat16", "float16")
    for precision in ("mixed_float16", "mixed_bfloat16", "float16"):
        with global_dtype_policy(keras, precision):
            assert keras.mixed_precision.global_policy().name == precision
        assert keras.mixed_precision.global_policy().name == before
    with pytest.raises(RuntimeError, match="inside"), global_dtype_policy(keras, "mixed_float16"):
        raise RuntimeError("inside")
    assert keras.mixed_precision.global_policy().name == before
    with global_dtype_policy(keras, "fp32"):  # a float32 run leaves the policy alone
        assert keras.mixed_precision.global_policy().name == before
    # PyTorch's name is not a Keras policy
    with pytest.raises(ValueError, match="Keras run takes"), global_dtype_policy(keras, "fp16"):
        pass


def test_the_model_keeps_float32_variables_and_a_float32_softmax_under_mixed_float16():
    import keras
    from families.keras_training import build_keras_amp

    spec = CASES["amp_keras/healthy"][2]
    with global_dtype_policy(keras, "mixed_float16"):
        model = build_keras_amp(keras, spec)
        fp16_out = build_keras_amp(keras, CASES["amp_keras/softmax_output_fp16"][2])
    assert [layer.name for layer in model.layers] == [
        "conv1",
        "conv1_bn",
        "conv1_relu",
        "pool1",
        "conv2",
        "conv2_bn",
        "conv2_relu",
        "pool",
        "out",
        "out_softmax",
    ]
    assert model.get_layer("conv1").filters == 8
    assert model.get_layer("conv2").filters == 16
    assert model.dtype_policy.name == "mixed_float16"
    assert model.get_layer("conv1").compute_dtype == "float16"
    assert {v.dtype for v in model.weights} == {"float32"}  # float32 master weights
    assert model.get_layer("out_softmax").compute_dtype == "float32"
    assert model(np.zeros((2, 8, 8, 1), "float32")).dtype == "float32"
    assert fp16_out.get_layer("out_softmax").compute_dtype == "float16"
    assert fp16_out(np.zeros((2, 8, 8, 1), "float32")).dtype == "float16"
    deep = build_keras_amp(keras, CASES["amp_keras/deep_sigmoid"][2])
    assert sum(layer.name.endswith("_sigmoid") for layer in deep.layers) == 6
    # built after the block: float32 again
    assert deep.get_layer("conv1").compute_dtype == "float32"


def _run(tmp_path, monkeypatch, case: str, **change):
    from families.keras_training import run_keras

    use_few_digit_images(monkeypatch)
    spec = replace(CASES[f"amp_keras/{case}"][2], **{"epochs": 2, **change})
    result = run_keras(case, spec, 0, str(tmp_path / case))
    return result, create_trial(result.path)


def _first(trial, name: str) -> np.ndarray:
    tensor = trial.tensor(name)
    return tensor.value(tensor.steps(mode=TRAIN)[0], mode=TRAIN)


def test_a_mixed_float16_run_loss_scales_saves_scaled_gradients_and_leaves_float32_behind(
    tmp_path, monkeypatch
):
    import keras

    result, trial = _run(tmp_path, monkeypatch, "healthy")
    assert result.precision == "mixed_float16"
    assert result.scaler_final_scale == 2.0**15  # compile's LossScaleOptimizer, Keras's initial scale
    assert keras.mixed_precision.global_policy().name == "float32"
    assert _first(trial, "conv1_relu/outputs").dtype == np.float16  # the policy's compute dtype
    assert _first(trial, "predictions").dtype == np.float32  # the float32 softmax
    assert _first(trial, "weights/net/conv1/kernel").dtype == np.float32
    scaled = np.abs(_first(trial, "gradients/net/out/kernelGrad")).max()
    # the same run in bfloat16 (no loss scaling): the hook saves the gradients the optimiser receives
    bf16, bf16_trial = _run(tmp_path, monkeypatch, "bf16_policy")
    assert (bf16.precision, bf16.scaler_final_scale) == ("mixed_bfloat16", None)
    unscaled = np.abs(_first(bf16_trial, "gradients/net/out/kernelGrad")).max()
    assert scaled / unscaled > 2.0**10  # scaled by 2**15 (bfloat16's own rounding aside)
    # a float32 family trained after it is float32 throughout
    from families.keras_training import run_keras

    spec = replace(CASES["cutmix_keras/healthy"][2], epochs=1)
    after = run_keras("after", spec, 0, str(tmp_path / "after"))
    assert after.precision == "fp32"
    assert after.scaler_final_scale is None
    assert _first(create_trial(after.path), "conv1_relu/outputs").dtype == np.float32


def test_the_broken_mixed_precision_cases_build_what_they_say(tmp_path, monkeypatch):
    no_scale, trial = _run(tmp_path, monkeypatch, "fp16_without_loss_scale")
    assert (no_scale.precision, no_scale.scaler_final_scale) == (
        "mixed_float16",
        None,
    )  # no LossScaleOptimizer
    assert _first(trial, "conv1_relu/outputs").dtype == np.float16
    half, trial = _run(tmp_path, monkeypatch, "float16_policy")
    assert (half.precision, half.scaler_final_scale) == ("float16", None)
    assert _first(trial, "weights/net/conv1/kernel").dtype == np.float16  # no float32 master weights
    soft, trial = _run(tmp_path, monkeypatch, "softmax_output_fp16")
    assert soft.scaler_final_scale == 2.0**15
    assert _first(trial, "predictions").dtype == np.float16


def test_a_short_growth_interval_doubles_the_scale_after_25_clean_steps(tmp_path, monkeypatch):
    # 64 training images in batches of 4: 32 steps; the default interval (2000) never grows
    grown, _ = _run(tmp_path, monkeypatch, "loss_scale_short_growth", batch=4)
    default, _ = _run(tmp_path, monkeypatch, "healthy", batch=4)
    assert default.scaler_final_scale == 2.0**15
    assert grown.scaler_final_scale == 2.0**16 * 0.5**grown.scaler_skipped_steps
