"""The benchmark's cases: broken runs re-implemented (not copied) from published training-problem benchmarks,
each with a healthy twin, plus hard negatives. Each case is a function whose docstring cites its source;
``CASES`` maps its name to ``(kind, split, Spec)``.

``kind`` is what the case was built to be ("broken" or "healthy"); the *label* of each run still comes from
the published criteria measured while it trains (see :mod:`labels`), per seed. ``split`` says whether the
case is used to calibrate the recommended rules ("cal") or held out to report on them ("held"): variant A
of each problem (and its twin) calibrates, variant B is held out; hard negatives are split between both.
"""

from __future__ import annotations

from collections.abc import Callable

from training import Spec

CASES: dict[str, tuple[str, str, Spec]] = {}


def case(kind: str, split: str) -> Callable[[Callable[[], Spec]], Callable[[], Spec]]:
    def register(fn: Callable[[], Spec]) -> Callable[[], Spec]:
        CASES[fn.__name__] = (kind, split, fn())
        return fn

    return register


# -- vanishing gradients ---------------------------------------------------------------------------------
@case("broken", "cal")
def vanish_sigmoid_stack() -> Spec:
    """AUTOTRAINER (ICSE'21) ``Gradient_Vanish_Case``: 8 x Dense(5, sigmoid), Adam 1e-3, circles."""
    return Spec(dataset="circles", widths=(5,) * 8, act="sigmoid", opt="adam", lr=1e-3)


@case("healthy", "cal")
def vanish_sigmoid_stack_twin() -> Spec:
    """Twin of ``vanish_sigmoid_stack``: AUTOTRAINER's repairs (ReLU, a shallower, wider stack)."""
    return Spec(dataset="circles", widths=(16,) * 4, act="relu", opt="adam", lr=1e-2)


@case("broken", "held")
def vanish_deep_sigmoid_sgd() -> Spec:
    """AUTOTRAINER's vanishing-gradient mutants (deep sigmoid stacks, plain SGD), re-made on blobs."""
    return Spec(dataset="blobs", widths=(8,) * 10, act="sigmoid", opt="sgd", lr=0.05)


@case("healthy", "held")
def vanish_deep_sigmoid_sgd_twin() -> Spec:
    """Twin of ``vanish_deep_sigmoid_sgd``: two sigmoid layers instead of ten."""
    return Spec(dataset="blobs", widths=(8, 8), act="sigmoid", opt="sgd", lr=0.5)


# -- exploding / NaN -------------------------------------------------------------------------------------
@case("broken", "cal")
def explode_high_lr_unscaled() -> Spec:
    """DeepLocalize's Stack Overflow programs: unnormalised inputs with a large SGD step (loss to Inf/NaN)."""
    return Spec(dataset="blobs", widths=(32, 32), opt="sgd", lr=1.0, input_scale=20.0)


@case("healthy", "cal")
def explode_high_lr_unscaled_twin() -> Spec:
    """Twin of ``explode_high_lr_unscaled``: the fix from the answers (normalised inputs, smaller step)."""
    return Spec(dataset="blobs", widths=(32, 32), opt="sgd", lr=0.05)


@case("broken", "held")
def explode_large_init() -> Spec:
    """AUTOTRAINER's exploding-gradient mutants: a too-large weight initialisation in a deep ReLU net."""
    return Spec(dataset="blobs", widths=(32,) * 5, opt="sgd", lr=0.05, weight_scale=6.0)


@case("healthy", "held")
def explode_large_init_twin() -> Spec:
    """Twin of ``explode_large_init``: default (Kaiming-uniform) initialisation."""
    return Spec(dataset="blobs", widths=(32,) * 5, opt="sgd", lr=0.05)


@case("broken", "cal")
def nan_naive_log_softmax() -> Spec:
    """DeepLocalize / DeepDiagnosis NaN cases: log(softmax) without log-sum-exp, large logits."""
    return Spec(dataset="blobs", widths=(16, 16), naive_log_softmax=True, weight_scale=8.0, input_scale=5.0)


@case("healthy", "cal")
def nan_naive_log_softmax_twin() -> Spec:
    """Twin of ``nan_naive_log_softmax``: the library's cross-entropy."""
    return Spec(dataset="blobs", widths=(16, 16), weight_scale=8.0, input_scale=5.0, lr=1e-3)


@case("broken", "held")
def nan_huge_lr() -> Spec:
    """UMLAUT's learning-rate heuristic (lr > 0.01 flagged) at its extreme: Adam with lr 5."""
    return Spec(dataset="circles", widths=(16, 16), opt="adam", lr=5.0, input_scale=10.0)


@case("healthy", "held")
def nan_huge_lr_twin() -> Spec:
    """Twin of ``nan_huge_lr``: Adam's default-range step (1e-2)."""
    return Spec(dataset="circles", widths=(16, 16), opt="adam", lr=1e-2, input_scale=10.0)


# -- dying ReLU --------------------------------------------------------------------------------------------
@case("broken", "cal")
def dying_relu_negative_bias() -> Spec:
    """AUTOTRAINER's dying-ReLU mutants: hidden biases far below 0, every unit off from the start."""
    return Spec(dataset="blobs", widths=(16, 16, 16), bias_init=-4.0)


@case("healthy", "cal")
def dying_relu_negative_bias_twin() -> Spec:
    """Twin of ``dying_relu_negative_bias``: zero-ish default biases."""
    return Spec(dataset="blobs", widths=(16, 16, 16))


@case("broken", "held")
def dying_relu_high_lr() -> Spec:
    """AUTOTRAINER ``Motivation/``: a high learning rate kills ReLUs (in some seeds only: per-seed labels)."""
    return Spec(dataset="circles", widths=(16, 16, 16), opt="sgd", lr=2.0, momentum=0.9)


@case("healthy", "held")
def dying_relu_high_lr_twin() -> Spec:
    """Twin of ``dying_relu_high_lr``: the same net at lr 0.05."""
    return Spec(dataset="circles", widths=(16, 16, 16), opt="sgd", lr=0.05, momentum=0.9)


# -- oscillating loss ------------------------------------------------------------------------------------
@case("broken", "cal")
def oscillating_batch1_momentum() -> Spec:
    """AUTOTRAINER ``Oscillating_Loss_Case``: Dense(50, relu) -> Dense(3), SGD m=0.9, batch 1."""
    return Spec(
        dataset="blobs", widths=(50,), opt="sgd", lr=0.05, momentum=0.9, batch=1, n_train=96, noise=1.3
    )


@case("healthy", "cal")
def oscillating_batch1_momentum_twin() -> Spec:
    """Twin of ``oscillating_batch1_momentum``: the same net with batch 16 and lr 0.01."""
    return Spec(dataset="blobs", widths=(50,), opt="sgd", lr=0.01, momentum=0.9, batch=16, noise=1.3)


@case("broken", "held")
def oscillating_adam_high_lr() -> Spec:
    """AUTOTRAINER's oscillating-loss mutants: a learning rate well above the optimiser's range (Adam 0.3)."""
    return Spec(dataset="circles", widths=(32, 32), opt="adam", lr=0.3, batch=8)


@case("healthy", "held")
def oscillating_adam_high_lr_twin() -> Spec:
    """Twin of ``oscillating_adam_high_lr``: Adam 3e-3."""
    return Spec(dataset="circles", widths=(32, 32), opt="adam", lr=3e-3, batch=8)


# -- saturation ------------------------------------------------------------------------------------------
@case("broken", "cal")
def saturated_tanh_large_init() -> Spec:
    """DeepDiagnosis saturation: tanh layers with a large initialisation and unscaled inputs."""
    return Spec(dataset="blobs", widths=(32, 32, 32), act="tanh", weight_scale=4.0, input_scale=4.0, lr=1e-3)


@case("healthy", "cal")
def saturated_tanh_large_init_twin() -> Spec:
    """Twin of ``saturated_tanh_large_init``: default initialisation, inputs as generated."""
    return Spec(dataset="blobs", widths=(32, 32, 32), act="tanh", lr=1e-3)


@case("broken", "held")
def saturated_sigmoid_unscaled() -> Spec:
    """DeepDiagnosis / UMLAUT (inputs outside [-1, 1]): sigmoid layers fed unnormalised inputs."""
    return Spec(dataset="circles", widths=(16, 16), act="sigmoid", input_scale=40.0, lr=1e-3)


@case("healthy", "held")
def saturated_sigmoid_unscaled_twin() -> Spec:
    """Twin of ``saturated_sigmoid_unscaled``: inputs as generated (about [-2, 2])."""
    return Spec(dataset="circles", widths=(16, 16), act="sigmoid", lr=3e-2)


# -- slow convergence / no learning ------------------------------------------------------------------------
@case("broken", "cal")
def slow_tiny_lr() -> Spec:
    """AUTOTRAINER slow convergence: SGD with a learning rate 1000x too small."""
    return Spec(dataset="blobs", widths=(16, 16), opt="sgd", lr=1e-4)


@case("healthy", "cal")
def slow_tiny_lr_twin() -> Spec:
    """Twin of ``slow_tiny_lr``: SGD 0.1."""
    return Spec(dataset="blobs", widths=(16, 16), opt="sgd", lr=0.1)


@case("broken", "held")
def frozen_layers() -> Spec:
    """TrainCheck (OSDI'25) frozen-layers silent error: the optimiser is handed only the last layer's
    parameters, so the hidden layers never train (DeepDiagnosis "unchanged")."""
    return Spec(dataset="circles", widths=(16, 16), train_only_last=True)


@case("healthy", "held")
def frozen_layers_twin() -> Spec:
    """Twin of ``frozen_layers``: every parameter handed to the optimiser."""
    return Spec(dataset="circles", widths=(16, 16))


@case("broken", "cal")
def lr_scheduler_zero() -> Spec:
    """TrainCheck-style silent error: a scheduler bug sets the learning rate to 0 after the first epoch."""
    return Spec(dataset="circles", widths=(16, 16), lr_zero_after_epoch=0, lr=1e-3)


@case("healthy", "cal")
def lr_scheduler_zero_twin() -> Spec:
    """Twin of ``lr_scheduler_zero``: the schedule keeps the learning rate."""
    return Spec(dataset="circles", widths=(16, 16), lr=1e-2)


# -- overfitting -------------------------------------------------------------------------------------------
@case("broken", "cal")
def overfit_tiny_data() -> Spec:
    """UMLAUT (CHI'21) overfitting heuristic: a wide net on 24 noisy samples, trained on and on."""
    return Spec(
        dataset="blobs", widths=(128, 128), n_train=24, batch=8, noise=1.6, label_noise=0.3, epochs=14
    )


@case("healthy", "cal")
def overfit_tiny_data_twin() -> Spec:
    """Twin of ``overfit_tiny_data``: 256 samples and a smaller net."""
    return Spec(dataset="blobs", widths=(16, 16), noise=1.6, label_noise=0.3, epochs=14)


@case("broken", "held")
def overfit_label_noise() -> Spec:
    """UMLAUT overfitting on circles: half the labels random, a wide net memorising them."""
    return Spec(dataset="circles", widths=(128, 128), n_train=32, batch=8, label_noise=0.5, epochs=14)


@case("healthy", "held")
def overfit_label_noise_twin() -> Spec:
    """Twin of ``overfit_label_noise``: clean labels, 256 samples."""
    return Spec(dataset="circles", widths=(32, 32), epochs=14)


# -- hard negatives: healthy runs that look alarming -----------------------------------------------------
@case("healthy", "cal")
def hard_deep_tanh_trains() -> Spec:
    """Hard negative: a deep (6 x 16) tanh net that trains fine (Adam 1e-3)."""
    return Spec(dataset="blobs", widths=(16,) * 6, act="tanh", lr=3e-3)


@case("healthy", "held")
def hard_batch1_sgd() -> Spec:
    """Hard negative: batch-1 SGD with a sensible step (noisy batch losses, converging model)."""
    return Spec(dataset="blobs", widths=(16,), opt="sgd", lr=0.01, batch=1, n_train=96)


@case("healthy", "cal")
def hard_some_dead_units() -> Spec:
    """Hard negative: hidden biases at -0.5: some units dead, the net still converges."""
    return Spec(dataset="blobs", widths=(32, 32), bias_init=-0.5)


@case("healthy", "held")
def hard_slow_start() -> Spec:
    """Hard negative: a warm-up (lr / 100 for 3 epochs) then normal training: a flat start, then learning."""
    return Spec(dataset="circles", widths=(16, 16), warmup_epochs=3, lr=2e-2)


@case("healthy", "held")
def hard_narrow_layers() -> Spec:
    """Hard negative: narrow (3 x 4) ReLU layers that still learn the blobs."""
    return Spec(dataset="blobs", widths=(4, 4, 4))


@case("healthy", "cal")
def hard_sigmoid_shallow() -> Spec:
    """Hard negative: a shallow sigmoid net with small, healthy gradients."""
    return Spec(dataset="blobs", widths=(16,), act="sigmoid", lr=3e-2)


# -- hard negatives: healthy runs that start slowly (added in the third revision, both splits) -------------
# Early in a run these sit near the starting loss for an epoch or two, as a stalled run does, then learn;
# every seed is labelled healthy by the published criteria (measured, not assumed).
@case("healthy", "cal")
def hard_slow_sigmoid_wide() -> Spec:
    """Hard negative (slow start): one wide sigmoid layer on circles (Adam 2e-2): the loss stays near or
    above ln 2 for about three epochs, then the net learns (DeepDiagnosis's healthy sigmoid models)."""
    return Spec(dataset="circles", widths=(32,), act="sigmoid", lr=2e-2)


@case("healthy", "cal")
def hard_slow_small_init() -> Spec:
    """Hard negative (slow start): weights at 0.3x the default initialisation (AUTOTRAINER's small-init
    mutants, mild): near-zero signals for the first epoch, then normal training."""
    return Spec(dataset="circles", widths=(16, 16), weight_scale=0.3)


@case("healthy", "cal")
def hard_slow_warmup_blobs() -> Spec:
    """Hard negative (slow start): a two-epoch warm-up (lr / 100) on one wide ReLU layer, then Adam 1e-2."""
    return Spec(dataset="blobs", widths=(32,), warmup_epochs=2)


@case("healthy", "held")
def hard_slow_deep_narrow() -> Spec:
    """Hard negative (slow start): a deep, narrow ReLU stack (5 x 6 units, Adam 5e-3) on circles: two to
    three flat epochs before it finds the boundary."""
    return Spec(dataset="circles", widths=(6,) * 5, lr=5e-3)


@case("healthy", "held")
def hard_slow_warmup_sgd() -> Spec:
    """Hard negative (slow start): a two-epoch warm-up (lr / 100) with SGD 0.2, momentum 0.9 on circles."""
    return Spec(dataset="circles", widths=(32, 32), opt="sgd", lr=0.2, momentum=0.9, warmup_epochs=2)


@case("healthy", "held")
def hard_slow_sigmoid_sgd() -> Spec:
    """Hard negative (slow start): one wide sigmoid layer trained with SGD 0.5, momentum 0.9 on circles."""
    return Spec(dataset="circles", widths=(32,), act="sigmoid", opt="sgd", lr=0.5, momentum=0.9)
