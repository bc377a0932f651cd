"""The families benchmark's held-out family of branch amp builds what its recipe says: ``amp_cnn``, a small
CNN of the 8x8 digits trained with real automatic mixed precision (PyTorch's AMP recipe: fp16
``torch.autocast`` around forward and loss, ``torch.amp.GradScaler`` with its defaults, ``unscale_`` before
clipping), on the device ``$TORNASOLE_BENCH_DEVICE`` names (``score.py --device``); and its mixed-precision
cases do what their names say. No scikit-learn: the digits are :data:`family_cases.DIGITS`; the runs here
train on a few dozen images for a few epochs, on the CPU."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import data  # noqa: E402
from families.cases import CASES, SCORED_FAMILIES  # noqa: E402
from families.models import AmpCnn  # noqa: E402
from families.training import (  # noqa: E402
    DEVICE_ENV,
    FAMILIES,
    _amp_step,
    build,
    device_name,
    run,
)
from family_cases import (  # noqa: E402
    COMMON_BROKEN,
    PYTORCH_HEALTHY,
    cases_of,
    of_kind,
    with_stand_in_digits,
)

from tornasole.modes import TRAIN  # noqa: E402
from tornasole.trials import create_trial  # noqa: E402

AMP_BROKEN = {"clip_before_unscale", "fp16_without_scaler", "half_model_adam"}
AMP_HEALTHY = {"bf16_autocast", "scaler_short_growth"}


def test_the_family_is_scored_and_takes_the_common_cases_and_the_mixed_precision_ones():
    amp = cases_of("amp_cnn")
    assert of_kind(amp, "broken") == COMMON_BROKEN | AMP_BROKEN
    # the simulated skipped step is left out: the real GradScaler skips its own; no dropout, no wide layer
    assert (
        of_kind(amp, "healthy") == (PYTORCH_HEALTHY - {"fp16_skipped_step"}) | {"warm_restarts"} | AMP_HEALTHY
    )
    assert "amp_cnn" in SCORED_FAMILIES
    recipe = FAMILIES["amp_cnn"]
    assert (recipe.precision, recipe.opt, recipe.clip_norm, recipe.schedule) == (
        "fp16",
        "adamw",
        1.0,
        "warmup_cosine_step",
    )
    specs = {name: spec for name, (_, fam, spec) in CASES.items() if fam == "amp_cnn"}
    assert specs["amp_cnn/bf16_autocast"].precision == "bf16"
    assert specs["amp_cnn/scaler_short_growth"].scaler_growth_interval == 25
    assert specs["amp_cnn/clip_before_unscale"].clip_before_unscale
    assert specs["amp_cnn/fp16_without_scaler"].precision == "fp16_no_scaler"
    assert specs["amp_cnn/half_model_adam"].precision == "half"
    # every other family keeps its arithmetic: fp32, no scaler, no clipping bug
    for name, (_, fam, spec) in CASES.items():
        if fam != "amp_cnn" and spec.framework == "pytorch":
            assert spec.precision is None, name
            assert FAMILIES[fam].precision == "fp32", name
            assert spec.scaler_growth_interval is None, name
            assert not spec.clip_before_unscale, name


def test_the_model_is_a_conv_bn_cnn_of_its_own_class():
    model = build(CASES["amp_cnn/healthy"][2], FAMILIES["amp_cnn"], 8, 10)
    assert isinstance(model, AmpCnn)
    assert [n for n in model.layers if not n.startswith("pool")] == [
        f"conv{i}{s}" for i in (1, 2, 3) for s in ("", "_bn", "_relu")
    ]
    assert model.conv1.out_channels == 8
    assert model.conv3.out_channels == 16
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 10)


def test_the_device_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert device_name() == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    assert device_name() == "cuda"
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="cpu or cuda"):
        device_name()


def test_score_takes_a_device_and_hands_it_to_its_workers():
    text = (Path(__file__).resolve().parents[3] / "bench/detection/families/score.py").read_text()
    assert '"--device",' in text
    assert 'choices=("cpu", "cuda")' in text
    assert "os.environ[DEVICE_ENV] = args.device" in text
    # set before the pool of workers starts
    assert text.index("os.environ[DEVICE_ENV] = args.device") < text.index("get_context(")


def _linear_step(clip_first: bool) -> tuple[float, float]:
    """A linear model whose true gradient norm is 2.0 (above the threshold 1.0) after one scaled backward and
    one ``_amp_step``: (the gradient norm the optimiser applied, the scale)."""
    w = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.SGD([w], lr=0.0)
    scaler = torch.amp.GradScaler("cpu")
    loss = (w * torch.tensor([1.0, 1.0, 1.0, 1.0])).sum()  # gradient (1, 1, 1, 1): norm 2
    scaler.scale(loss).backward()
    assert float(w.grad.norm()) == pytest.approx(2.0 * 65536.0)  # what the hook's gradient hook sees
    skipped = _amp_step(scaler, opt, [w], 1.0, clip_first)
    assert not skipped
    return float(w.grad.norm()), scaler.get_scale()


def test_clipping_before_unscale_clips_the_scaled_gradients():
    applied, scale = _linear_step(clip_first=False)
    assert scale == 65536.0
    assert applied == pytest.approx(1.0, rel=1e-6)  # the recipe: unscaled to 2.0, clipped to 1.0
    applied, _ = _linear_step(clip_first=True)
    # the bug: the scaled norm 131072 clipped to 1.0, then unscaled: 1.0 / 65536 of the threshold
    assert applied == pytest.approx(1.0 / 65536.0, rel=1e-5)


def test_the_scaler_skips_an_overflowing_step_and_halves_its_scale():
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((w * torch.tensor([float("inf"), 1.0])).sum()).backward()
    assert _amp_step(scaler, opt, [w], 1.0, False)
    assert scaler.get_scale() == 32768.0
    assert torch.equal(w.detach(), torch.ones(2))


def _small(monkeypatch, n: int = 96) -> None:
    load = data.digits

    def small(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y, classes, _ = with_stand_in_digits(lambda: load(rng))
        return x[:n], y[:n], classes, 32

    monkeypatch.setattr(data, "digits", small)
    monkeypatch.setattr("families.training.SAVE_INTERVAL", 1)


def _run(tmp_path, name: str, **change) -> tuple:
    spec = replace(CASES[f"amp_cnn/{name}"][2], **{"epochs": 2, **change})
    result = run(name, spec, 0, str(tmp_path / name))
    return result, create_trial(result.path)


def test_a_run_records_its_device_torch_and_precision_and_saves_fp16_logits(tmp_path, monkeypatch):
    _small(monkeypatch)
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    result, trial = _run(tmp_path, "healthy")
    assert (result.device, result.torch_version, result.precision) == ("cpu", torch.__version__, "fp16")
    assert result.scaler_final_scale == 65536.0
    assert result.scaler_skipped_steps == 0
    # autocast: the model's logits (the loss's input) are fp16, its weights fp32
    assert trial.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN).dtype == np.float16
    assert trial.tensor("AmpCnn_out.weight").value(0, mode=TRAIN).dtype == np.float32
    assert np.isfinite(result.final_val_acc)


def test_the_hook_saves_the_scaled_gradients_as_in_any_amp_script(tmp_path, monkeypatch):
    _small(monkeypatch)
    fp16, t16 = _run(tmp_path, "healthy")
    _, t32 = _run(tmp_path / "fp32", "healthy", precision="fp32")
    g16 = t16.tensor("gradient/AmpCnn_out.weight").value(0, mode=TRAIN)
    g32 = t32.tensor("gradient/AmpCnn_out.weight").value(0, mode=TRAIN)
    # the same weights and batch at step 0: the saved gradient is 2**16 times the fp32 one (fp16 rounding)
    assert np.linalg.norm(g16) / np.linalg.norm(g32) == pytest.approx(65536.0, rel=0.02)


def test_a_short_growth_interval_makes_the_scaler_overflow_and_back_off(tmp_path, monkeypatch):
    _small(monkeypatch)
    # growth every clean step: the scale doubles from 2**16 until the scaled gradients overflow fp16
    result, _ = _run(tmp_path, "scaler_short_growth", scaler_growth_interval=1, epochs=12)
    assert result.scaler_skipped_steps > 0
    assert "nan" not in result.labels  # the Monitor saw none of the skipped steps' gradients


def test_bf16_and_fp16_without_a_scaler_run_without_a_scaler(tmp_path, monkeypatch):
    _small(monkeypatch)
    bf16, t = _run(tmp_path, "bf16_autocast")
    assert (bf16.precision, bf16.scaler_final_scale) == ("bf16", None)
    assert t.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN).dtype != np.float16
    bare, t = _run(tmp_path, "fp16_without_scaler")
    assert (bare.precision, bare.scaler_final_scale) == ("fp16_no_scaler", None)
    assert t.tensor("CrossEntropyLoss_input_0").value(0, mode=TRAIN).dtype == np.float16
    # no scaler: the saved gradients are the loss's own, not 2**16 times them
    g = t.tensor("gradient/AmpCnn_out.weight").value(0, mode=TRAIN)
    assert np.linalg.norm(g) < 100.0


def test_a_half_model_under_adam_trains_in_fp16_and_turns_to_nan(tmp_path, monkeypatch):
    _small(monkeypatch)
    assert float(torch.tensor(1e-8, dtype=torch.float16)) == 0.0  # Adam's eps in fp16
    result, trial = _run(tmp_path, "half_model_adam")
    assert result.precision == "half"
    assert trial.tensor("AmpCnn_out.weight").value(0, mode=TRAIN).dtype == np.float16
    assert trial.tensor("AmpCnn_input_0").value(0, mode=TRAIN).dtype == np.float16
    last = trial.tensor("AmpCnn_conv1.weight").steps(mode=TRAIN)[-1]
    assert not np.isfinite(trial.tensor("AmpCnn_conv1.weight").value(last, mode=TRAIN)).all()
    assert "nan" in result.labels
