"""One run of a family trained by Keras 3 ``fit`` (TensorFlow backend) and saved by the Keras hook
(``tornasole.keras.Hook`` as a ``fit`` callback), labelled by the same :class:`labels.Monitor` criteria as
the PyTorch runs of :mod:`families.training`.

Why a second framework: what the rules read differs between the hooks. Keras reports the loss and the
metrics of a batch as running means over the epoch, names tensors ``weights/<variable path>``,
``gradients/<variable path>Grad`` and ``<layer>/inputs``/``<layer>/outputs``, saves biases in their own
collection and BatchNorm's moving statistics as weights, and validates inside ``fit``. A rule calibrated on
PyTorch traces only is calibrated on one naming and one loss signal.

The families that have a Keras variant (:data:`KERAS_FAMILIES`) use the PyTorch family's recipe, data,
split, epochs, batch size, schedule and faults; the model is the same architecture built from Keras
layers, activation layers named ``<layer>_<fn>`` as in :mod:`families.models`. The held-out ``convbn`` and
``digits`` (:data:`KERAS_ONLY`) have no PyTorch twin: their recipes (in :data:`families.training.FAMILIES`)
are trained in Keras only, with Keras's own ``CosineDecay`` schedule; convbn's
``SparseCategoricalCrossentropy`` takes logits, digits's takes the probabilities of its softmax output layer
(``from_logits=False``, :func:`classification_loss`).

What the Monitor sees: the gradients Keras hands to ``optimizer.apply`` (copied into variables inside the
compiled step), the weights after each step, the loss of each batch (Keras's running mean is turned back into
the batch's own loss), the epoch's logs (``accuracy``, ``val_loss``, ``val_accuracy``) and, for the
saturation criterion, the validation set's pre-activations of hidden tanh/sigmoid layers. What the hook saves
for the loss rules, as the PyTorch recipe saves its loss module's inputs: ``predictions``, ``labels`` and the
batch's own compiled loss ``batch_loss/<Kind>`` (collection ``loss_inputs``), and what the model is fed,
``inputs`` (collection ``model_input``), and the learning rate every saved TRAIN step's update uses,
``scalar/lr/0`` (collection ``scalars``: the Keras hook reads it from the optimiser, as a Keras user's trace
carries it).

Not reproduced in Keras: the fp16 step a loss scaler skipped (Keras's ``LossScaleOptimizer`` decides
overflow from its own scale, which a benchmark cannot set to overflow at one chosen step).

Mixed precision (the held-out ``amp``, scored as ``amp_keras``): Keras's own way, keras.io's "Mixed precision"
guide. The run's dtype policy (:data:`KERAS_PRECISIONS`; the recipe's ``precision`` or the case's) is set as
the guide sets it, ``keras.mixed_precision.set_global_policy``, for the whole run (model, compile, fit) and
the previous global policy put back afterwards whatever happens (:func:`global_dtype_policy`: a worker trains
many runs in one process); a float32 run ("fp32", every other Keras family) never touches it. Under
``mixed_float16`` ``compile`` wraps the optimiser in a ``LossScaleOptimizer`` (dynamic scale, Keras's
defaults) unless the case wraps it itself (``scaler_growth_interval``) or turns it off (``auto_scale_loss``).
The hook is the same callback with the same collections as every Keras family: it taps
``model.optimizer.apply``, the LossScaleOptimizer's, so it saves the gradients as the scaler receives them,
scaled by the loss scale (Inf on a step that overflowed); the Monitor reads the inner optimiser's, unscaled
and only on the steps the scaler applied.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from labels import Monitor

from families import data
from families.training import (
    EVAL_BATCH,
    FAMILIES,
    REGRESSION_REFERENCE_R2,
    SAVE_INTERVAL,
    FamilySpec,
    RunResult,
    _lr_at,
)

#: Families with a Keras variant: scored as ``<family>_keras``, a family of its own (a user of one framework
#: meets the rules on that framework's traces).
KERAS_FAMILIES = ("binary", "regression", "convbn", "digits", "gru", "attention", "cutmix", "amp")
#: Families trained in Keras only (their recipe in :data:`families.training.FAMILIES` has no PyTorch run):
#: ``convbn``, held out (branch newfam2), ``digits``, held out (branch heldout), ``gru``, held out
#: (branch heldout4), ``attention``, held out (branch heldout5), ``cutmix``, held out (branch heldout7), and
#: ``amp``, held out (branch ampkeras: Keras mixed precision).
KERAS_ONLY = ("convbn", "digits", "gru", "attention", "cutmix", "amp")
#: A Keras run's arithmetic (:attr:`families.training.FamilySpec.precision`): "fp32" (Keras's default
#: ``float32`` policy, left untouched) or a Keras dtype policy set for the run (:func:`global_dtype_policy`):
#: ``mixed_float16`` (float16 compute, float32 variables, a LossScaleOptimizer from ``compile``),
#: ``mixed_bfloat16`` (bfloat16 compute, float32 variables, no loss scaling) and ``float16`` (float16
#: variables and compute: no float32 master weights, and ``compile`` adds no loss scaling).
KERAS_PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16", "float16")


@contextmanager
def global_dtype_policy(keras: Any, precision: str) -> Iterator[None]:
    """Keras's global dtype policy set to ``precision`` (:data:`KERAS_PRECISIONS`) inside the block, as the
    mixed-precision guide sets it (``keras.mixed_precision.set_global_policy``), and the previous policy put
    back when the block ends, also on an error: the policy is process-global and a worker trains many runs
    in one process. "fp32" leaves the policy alone."""
    if precision not in KERAS_PRECISIONS:
        raise ValueError(f"precision {precision!r}: a Keras run takes one of {', '.join(KERAS_PRECISIONS)}")
    if precision == "fp32":
        yield
        return
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def kernels_scaled(model: Any, scale: float) -> Any:
    """``model`` with every trainable weight of rank 2 or more (kernels, recurrent kernels, embedding tables)
    multiplied by ``scale`` (DeepFD's weight-initialisation mutation); biases and normalisation parameters
    are left as built. The same model, changed in place; nothing done at a scale of 1."""
    if scale != 1.0:
        for v in model.trainable_weights:
            if len(v.shape) >= 2:
                v.assign(v.numpy() * scale)
    return model


def conv_blocks(
    keras: Any,
    width: int,
    blocks: int,
    act: str,
    *,
    batch_norm: bool,
    pool_after: int | None = None,
    pool_name: str = "pool",
) -> list[Any]:
    """The image families' convolution blocks on (8, 8, 1) images: ``conv<i>`` (3x3, "same"; ``width``
    channels in the first, ``2 * width`` after) -> ``conv<i>_bn`` (``BatchNormalization``, momentum 0.9; with
    ``batch_norm``) -> ``conv<i>_<act>``, and a 2x2 ``MaxPooling2D`` named ``pool_name`` after block
    ``pool_after``. The input layer first."""
    layers: list[Any] = [keras.Input((8, 8, 1))]
    for i in range(1, blocks + 1):
        layers.append(keras.layers.Conv2D(width if i == 1 else 2 * width, 3, padding="same", name=f"conv{i}"))
        if batch_norm:
            layers.append(keras.layers.BatchNormalization(momentum=0.9, name=f"conv{i}_bn"))
        layers.append(keras.layers.Activation(act, name=f"conv{i}_{act}"))
        if i == pool_after:
            layers.append(keras.layers.MaxPooling2D(2, name=pool_name))
    return layers


def build_keras_convbn(keras: Any, spec: FamilySpec) -> Any:
    """The held-out ``convbn`` family on (8, 8, 1) images: ``depth`` blocks ``conv<i>`` (3x3, "same"; 16
    channels in the first, 32 after, or ``width`` and ``2 * width``) -> ``conv<i>_bn`` (Keras's
    BatchNormalization defaults) -> ``conv<i>_<act>``, then ``GlobalAveragePooling2D``, an optional
    ``Dropout`` (the ``heavy_dropout`` case) and ``out``, a ``Dense(10)`` of logits (``out_softmax`` after it
    under ``double_softmax``: Keras 3's loss takes the logits back from it, so the benchmark does not build
    that case in Keras, :data:`families.cases._NOT_IN_KERAS`). Keras's default initialisers: a Keras-native
    recipe."""
    act = spec.hidden_act or "relu"
    layers = conv_blocks(keras, spec.width or 16, spec.blocks, act, batch_norm=True)
    layers.append(keras.layers.GlobalAveragePooling2D(name="pool"))
    if spec.dropout:
        layers.append(keras.layers.Dropout(spec.dropout, name="drop"))
    layers.append(keras.layers.Dense(10, name="out"))
    if spec.double_softmax:
        layers.append(keras.layers.Softmax(name="out_softmax"))
    model = keras.Sequential(layers, name="net")
    # DeepFD: the kernels (conv and dense) x the scale
    return kernels_scaled(model, spec.weight_scale)


def build_keras_digits(keras: Any, spec: FamilySpec, in_dim: int) -> Any:
    """The held-out ``digits`` family on 64-pixel vectors: blocks ``fc<i>`` (``Dense``: 128 then 64 units,
    or ``width`` each) -> ``fc<i>_norm`` (``LayerNormalization``) -> ``fc<i>_<act>`` -> ``fc<i>_drop``
    (``Dropout``, 0.2 or ``dropout``), then ``out``, ``Dense(10, activation="softmax")``: the model outputs
    probabilities and the recipe's cross-entropy takes them (``from_logits=False``, Keras's idiom). Keras's
    default initialisers (Glorot-uniform kernels, zero biases)."""
    act = spec.hidden_act or "relu"
    blocks = spec.blocks
    widths = [128, 64] if spec.width is None and blocks == 2 else [spec.width or 64] * blocks
    layers: list[Any] = [keras.Input((in_dim,))]
    for i, units in enumerate(widths, start=1):
        layers += [
            keras.layers.Dense(units, name=f"fc{i}"),
            keras.layers.LayerNormalization(name=f"fc{i}_norm"),
            keras.layers.Activation(act, name=f"fc{i}_{act}"),
            keras.layers.Dropout(spec.dropout or 0.2, name=f"fc{i}_drop"),
        ]
    layers.append(keras.layers.Dense(10, activation="softmax", name="out"))
    model = keras.Sequential(layers, name="net")
    # DeepFD: the kernels x the scale
    return kernels_scaled(model, spec.weight_scale)


def build_keras_amp(keras: Any, spec: FamilySpec) -> Any:
    """The held-out ``amp`` family on (8, 8, 1) images, built under the run's dtype policy
    (:func:`global_dtype_policy`): ``depth`` blocks ``conv<i>`` (3x3, "same"; ``width`` channels in the first,
    ``2 * width`` after) -> ``conv<i>_bn`` (``BatchNormalization``, momentum 0.9) -> ``conv<i>_<act>``, a
    ``pool1`` (``MaxPooling2D``, 2x2: 4x4) after the first, then ``pool`` (``GlobalAveragePooling2D``),
    ``out`` (``Dense(10)``, logits in the policy's compute dtype) and ``out_softmax``, the softmax in float32
    (``dtype="float32"``), as keras.io's mixed-precision guide builds its output ("the last layer ... float32
    ... for numeric stability"); ``output_fp16`` leaves it in the policy (the guide's warning). The
    cross-entropy takes its probabilities (``softmax_output``). Keras's default initialisers."""
    act = spec.hidden_act or "relu"
    width = spec.width or FAMILIES[spec.family].width
    layers = conv_blocks(keras, width, spec.blocks, act, batch_norm=True, pool_after=1, pool_name="pool1")
    layers += [
        keras.layers.GlobalAveragePooling2D(name="pool"),
        keras.layers.Dense(10, name="out"),
        keras.layers.Activation("softmax", dtype=None if spec.output_fp16 else "float32", name="out_softmax"),
    ]
    model = keras.Sequential(layers, name="net")
    # DeepFD: the kernels (conv and dense) x the scale
    return kernels_scaled(model, spec.weight_scale)


def build_keras_cutmix(keras: Any, spec: FamilySpec) -> Any:
    """The held-out ``cutmix`` family on (8, 8, 1) images, without normalisation layers: ``depth`` blocks
    ``conv<i>`` (3x3, "same"; ``width`` channels in the first, ``2 * width`` after) -> ``conv<i>_<act>``, a
    ``pool`` (``MaxPooling2D``, 2x2: 4x4) after the second, then ``flat`` (``Flatten``), ``fc``
    (``Dense(64)``) -> ``fc_<act>`` and ``out``, a ``Dense(10)`` of logits. Keras's default initialisers
    (Glorot-uniform kernels, zero biases). ``depth`` 6 with ``act`` sigmoid is the deep sigmoid mutation."""
    act = spec.hidden_act or "relu"
    width = spec.width or FAMILIES[spec.family].width
    layers = conv_blocks(keras, width, max(2, spec.blocks), act, batch_norm=False, pool_after=2)
    layers += [
        keras.layers.Flatten(name="flat"),
        keras.layers.Dense(64, name="fc"),
        keras.layers.Activation(act, name=f"fc_{act}"),
        keras.layers.Dense(10, name="out"),
    ]
    model = keras.Sequential(layers, name="net")
    # DeepFD: the kernels (conv and dense) x the scale
    return kernels_scaled(model, spec.weight_scale)


def cutmix(
    x: np.ndarray, y: np.ndarray, rng: np.random.Generator, alpha: float
) -> tuple[np.ndarray, np.ndarray, float, tuple[int, int, int, int]]:
    """CutMix (Yun et al., ICCV 2019, their Algorithm A1) of a batch of (N, H, W, C) images ``x`` and their
    one-hot (or already soft) targets ``y``: ``lam ~ Beta(alpha, alpha)``; a box of ``int(H * sqrt(1 - lam))``
    x ``int(W * sqrt(1 - lam))`` pixels centred on a uniformly drawn pixel, clipped to the image; every
    image gets that box cut from the image a random permutation of the batch puts there; ``lam`` becomes the
    share of the image left uncut, and the targets ``lam * y + (1 - lam) * y[perm]``. Returns the mixed
    images and targets (new arrays), the final ``lam`` and the box (rows ``r1:r2``, columns ``c1:c2``)."""
    n, h, w = x.shape[:3]
    lam = float(rng.beta(alpha, alpha))
    perm = rng.permutation(n)
    cut = math.sqrt(1.0 - lam)
    ch, cw = int(h * cut), int(w * cut)
    cy, cx = int(rng.integers(h)), int(rng.integers(w))
    r1, r2 = max(cy - ch // 2, 0), min(cy + ch // 2, h)
    c1, c2 = max(cx - cw // 2, 0), min(cx + cw // 2, w)
    mixed = x.copy()
    mixed[:, r1:r2, c1:c2] = x[perm, r1:r2, c1:c2]
    lam = 1.0 - (r2 - r1) * (c2 - c1) / (h * w)
    targets = (lam * y + (1.0 - lam) * y[perm]).astype(y.dtype)
    return mixed, targets, lam, (r1, r2, c1, c2)


def cutmix_batches(
    keras: Any, x: np.ndarray, y: np.ndarray, batch: int, rng: np.random.Generator, alpha: float
) -> Any:
    """:func:`epoch_shuffled`'s batches (a new permutation each epoch from the run's ``rng``), each batch
    through :func:`cutmix` (a new box and permutation per batch, drawn from the same ``rng``) as a data
    pipeline feeds ``fit``: the model and the metrics see only the mixed images and targets."""
    plain = epoch_shuffled(keras, x, y, batch, rng)

    class _CutMixed(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()

        def __len__(self) -> int:
            return len(plain)

        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            xb, yb = plain[i]
            mixed, targets, _, _ = cutmix(xb, yb, rng, alpha)
            return mixed, targets

        def on_epoch_end(self) -> None:
            plain.on_epoch_end()

    return _CutMixed()


def build_keras_gru(keras: Any, spec: FamilySpec, steps: int, channels: int) -> Any:
    """The held-out ``gru`` family on (steps, channels) one-hot sequences: Keras's own ``GRU`` layer ``gru``
    (the recipe's ``width`` units, tanh/sigmoid, Keras's default initialisers: Glorot-uniform kernel,
    orthogonal recurrent kernel, zero biases; ``reset_after=True``), its last state to ``out``, a
    ``Dense(6)`` of logits. The GRU is the only hidden layer (:data:`families.cases._ONE_HIDDEN_LAYER`)."""
    recipe = FAMILIES[spec.family]
    model = keras.Sequential(
        [
            keras.Input((steps, channels)),
            keras.layers.GRU(spec.width or recipe.width, name="gru"),
            keras.layers.Dense(6, name="out"),
        ],
        name="net",
    )
    # DeepFD: the kernels (input and recurrent, and the head's) x the scale
    return kernels_scaled(model, spec.weight_scale)


def build_keras_attention(keras: Any, spec: FamilySpec, length: int, vocab: int, classes: int) -> Any:
    """The held-out ``attention`` family on (N, ``length``) token ids: a transformer encoder of Keras's own
    layers, post-norm as Keras's text-classification example writes it. ``embed`` (``Embedding(vocab, d)``)
    plus ``pos`` (a learned position embedding, one ``d``-vector per position, :func:`position_embedding`),
    then ``depth`` blocks: ``attn<i>`` (``MultiHeadAttention``, 2 heads of ``d / 2``, self-attention) ->
    ``attn<i>_drop`` -> ``attn<i>_add`` (the residual) -> ``attn<i>_norm`` (``LayerNormalization``), and
    ``ffn<i>_fc1`` (``Dense(2 d)``) -> ``ffn<i>_<act>`` -> ``ffn<i>_fc2`` (``Dense(d)``) -> ``ffn<i>_drop``
    -> ``ffn<i>_add`` -> ``ffn<i>_norm``; then ``pool`` (``GlobalAveragePooling1D``), ``head_drop`` and
    ``out``, a ``Dense(classes)`` of logits. Dropout 0.1 (or the case's ``dropout``) everywhere; ``d`` the
    recipe's ``width``. Keras's default initialisers."""
    recipe = FAMILIES[spec.family]
    d = spec.width or recipe.width
    act = spec.hidden_act or "relu"
    rate = spec.dropout or 0.1
    layers = keras.layers
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    h = layers.Embedding(vocab, d, name="embed")(tokens)
    h = position_embedding(keras, length, d)(h)
    for i in range(1, spec.blocks + 1):
        a = layers.MultiHeadAttention(2, d // 2, name=f"attn{i}")(h, h)
        a = layers.Dropout(rate, name=f"attn{i}_drop")(a)
        h = layers.LayerNormalization(epsilon=1e-6, name=f"attn{i}_norm")(
            layers.Add(name=f"attn{i}_add")([h, a])
        )
        f = layers.Dense(2 * d, name=f"ffn{i}_fc1")(h)
        f = layers.Activation(act, name=f"ffn{i}_{act}")(f)
        f = layers.Dense(d, name=f"ffn{i}_fc2")(f)
        f = layers.Dropout(rate, name=f"ffn{i}_drop")(f)
        h = layers.LayerNormalization(epsilon=1e-6, name=f"ffn{i}_norm")(
            layers.Add(name=f"ffn{i}_add")([h, f])
        )
    h = layers.GlobalAveragePooling1D(name="pool")(h)
    h = layers.Dropout(rate, name="head_drop")(h)
    model = keras.Model(tokens, layers.Dense(classes, name="out")(h), name="net")
    # DeepFD: every kernel and embedding table (rank 2 or more) x the scale
    return kernels_scaled(model, spec.weight_scale)


def position_embedding(keras: Any, length: int, d: int) -> Any:
    """A layer ``pos`` that adds a learned vector per position (a ``(length, d)`` table ``embeddings``,
    initialised as Keras's ``Embedding`` initialises its own: uniform in +-0.05) to its (N, length, d)
    input: BERT's learned positions, which Keras 3 itself does not ship (keras-hub's
    ``PositionEmbedding``)."""

    class PositionEmbedding(keras.layers.Layer):
        def build(self, input_shape: Any) -> None:
            self.embeddings = self.add_weight(shape=(length, d), initializer="uniform", name="embeddings")

        def call(self, x: Any) -> Any:
            return x + self.embeddings[None, : keras.ops.shape(x)[1]]

    return PositionEmbedding(name="pos")


def inverse_time_schedule(keras: Any, spec: FamilySpec, steps_per_epoch: int, epochs: int) -> Any:
    """The recipe's rate under ``keras.optimizers.schedules.InverseTimeDecay``: ``lr / (1 + 0.5 t)`` after
    ``t`` epochs of optimiser steps (continuous, not staircase; the rate at the last epoch is lr / 6.5 for
    12 epochs), multiplied by a linear rise from 0 over the ``warmup_epochs`` (a transformer's warmup);
    ``scheduler_zeroes_lr`` sets it to 0 after epoch ``lr_zero_after_epoch``, as :func:`cosine_schedule`
    does. Stepped by the optimiser's iteration counter."""
    recipe = FAMILIES[spec.family]
    lr = recipe.lr * spec.lr_mult
    inverse = keras.optimizers.schedules.InverseTimeDecay(lr, decay_steps=steps_per_epoch, decay_rate=0.5)
    warm = (recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs) * steps_per_epoch
    zero_from = None if spec.lr_zero_after_epoch is None else (spec.lr_zero_after_epoch + 1) * steps_per_epoch
    return _warmed_or_zeroed(keras, inverse, warm, zero_from)


def _warmed_or_zeroed(keras: Any, schedule: Any, warm: int, zero_from: int | None) -> Any:
    """``schedule`` times a linear rise from 0 over ``warm`` optimiser steps, and 0 from step ``zero_from``
    on (the ``scheduler_zeroes_lr`` bug); ``schedule`` itself when neither applies."""
    if not warm and zero_from is None:
        return schedule

    class WarmedOrZeroed(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step: Any) -> Any:
            rate = schedule(step)
            if warm:
                rate = rate * keras.ops.minimum(1.0, keras.ops.cast(step, rate.dtype) / warm)
            if zero_from is not None:
                rate = keras.ops.where(
                    keras.ops.greater_equal(step, zero_from), keras.ops.zeros_like(rate), rate
                )
            return rate

    return WarmedOrZeroed()


def piecewise_schedule(keras: Any, spec: FamilySpec, steps_per_epoch: int, epochs: int) -> Any:
    """The recipe's rate under ``keras.optimizers.schedules.PiecewiseConstantDecay`` over the run's optimiser
    steps: the base rate, a tenth of it from half the run, a hundredth from three quarters (the step schedule
    of He et al. 2016's ResNet recipe, in Keras's own schedule). A case's ``warmup_epochs`` multiply it by a
    linear rise from 0 over those epochs; ``scheduler_zeroes_lr`` sets it to 0 after epoch
    ``lr_zero_after_epoch``, as :func:`cosine_schedule` does. Stepped by the optimiser's iteration counter."""
    recipe = FAMILIES[spec.family]
    lr = recipe.lr * spec.lr_mult
    total = epochs * steps_per_epoch
    piecewise = keras.optimizers.schedules.PiecewiseConstantDecay(
        [total // 2, (3 * total) // 4], [lr, lr * 0.1, lr * 0.01]
    )
    warm = (recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs) * steps_per_epoch
    zero_from = None if spec.lr_zero_after_epoch is None else (spec.lr_zero_after_epoch + 1) * steps_per_epoch
    return _warmed_or_zeroed(keras, piecewise, warm, zero_from)


def classification_loss(keras: Any, spec: FamilySpec) -> Any:
    """A multi-class family's cross-entropy: on logits (``from_logits=True``), unless the recipe's model
    outputs probabilities (``softmax_output``, the held-out ``digits``), whose cross-entropy takes them;
    DeepFD's loss mutation on such a recipe is the Keras bug of a softmax output fed to a loss that applies
    its own softmax (``from_logits=True``), which Keras 3 undoes (the loss finds the softmax's logits), so the
    benchmark does not build it in Keras (:data:`families.cases._NOT_IN_KERAS`)."""
    recipe = FAMILIES[spec.family]
    softmax_output = recipe.softmax_output
    if recipe.cutmix_alpha:
        # CutMix's soft targets: the categorical cross-entropy on one-hot targets, smoothed as the recipe says
        return keras.losses.CategoricalCrossentropy(
            from_logits=not softmax_output or spec.double_softmax, label_smoothing=recipe.label_smoothing
        )
    return keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax_output or spec.double_softmax)


def cosine_schedule(keras: Any, spec: FamilySpec, steps_per_epoch: int, epochs: int) -> Any:
    """The recipe's rate under ``keras.optimizers.schedules.CosineDecay`` over the run: a linear warmup from 0
    over ``warmup_epochs`` (its ``warmup_steps``/``warmup_target``), then a cosine decay to 0 at the run's
    last step; the ``scheduler_zeroes_lr`` fault sets it to 0 after epoch ``lr_zero_after_epoch``, as
    :func:`families.training._lr_at` does. Stepped by the optimiser's own iteration counter."""
    recipe = FAMILIES[spec.family]
    lr = recipe.lr * spec.lr_mult
    warm = (recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs) * steps_per_epoch
    cosine = keras.optimizers.schedules.CosineDecay(
        0.0 if warm else lr,
        max(1, epochs * steps_per_epoch - warm),
        warmup_target=lr if warm else None,
        warmup_steps=warm,
    )
    if spec.lr_zero_after_epoch is None:
        return cosine
    zero_from = (spec.lr_zero_after_epoch + 1) * steps_per_epoch

    class ZeroedAfter(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step: Any) -> Any:
            rate = cosine(step)
            return keras.ops.where(keras.ops.greater_equal(step, zero_from), keras.ops.zeros_like(rate), rate)

    return ZeroedAfter()


def build_keras(keras: Any, spec: FamilySpec, in_dim: int) -> Any:
    """The MLP of ``spec.family`` (binary: dropout, sigmoid output; regression: BatchNorm) in Keras."""
    act = spec.hidden_act or "relu"
    w = spec.width or 32
    init_scale = spec.weight_scale
    layers: list[Any] = [keras.Input((in_dim,))]

    def dense(units: int, fan_in: int, name: str) -> Any:
        """PyTorch's nn.Linear initialisation (kernel and bias uniform in +-1/sqrt(fan_in)), so the two
        frameworks' families differ in what the hooks save, not in the recipe: with Keras's Glorot kernels
        and zero biases the regression family's healthy runs overfit (validation loss 2.5x the training
        loss on seed 0)."""
        bound = fan_in**-0.5
        return keras.layers.Dense(
            units,
            kernel_initializer=keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"),
            bias_initializer=keras.initializers.RandomUniform(-bound, bound),
            name=name,
        )

    fan_in = in_dim
    for i in range(1, spec.blocks + 1):
        layers.append(dense(w, fan_in, f"fc{i}"))
        fan_in = w
        if spec.family == "regression":
            # PyTorch's BatchNorm1d defaults (momentum 0.1 there is 0.9 here; epsilon 1e-5): Keras's 0.99
            # lags the batch statistics so far on 250 steps that validation drifts from training
            layers.append(keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name=f"fc{i}_norm"))
        layers.append(keras.layers.Activation(act, name=f"fc{i}_{act}"))
        dropout = spec.dropout or (0.2 if spec.family == "binary" else 0.0)
        if dropout:
            layers.append(keras.layers.Dropout(dropout, name=f"fc{i}_drop"))
    layers.append(dense(1, fan_in, "out"))
    if spec.family == "binary":
        layers.append(keras.layers.Activation("sigmoid", name="out_sigmoid"))
    model = keras.Sequential(layers, name="net")
    return kernels_scaled(model, init_scale)


def epoch_shuffled(keras: Any, x: np.ndarray, y: np.ndarray, batch: int, rng: np.random.Generator) -> Any:
    """The training batches, a new permutation of the samples each epoch drawn from the run's ``rng``, as
    the PyTorch runs of :mod:`families.training` draw theirs.

    Why not ``fit(shuffle=True)``: fed that way, the regression family's healthy runs overfit (without
    the hook, 4 seeds: validation MSE 0.59-0.79 against PyTorch's 0.44-0.58 at the same training MSE).
    The same model and optimiser fed a new permutation each epoch match PyTorch (0.58-0.63 against
    0.578 on one order), and an order kept fixed across epochs overfits in both frameworks (0.89 and
    0.77): the batches, not the framework. Which order Keras's shuffling feeds under
    ``keras.utils.set_random_seed`` was not isolated. The evidence: ``bench/journal/families.md``.
    """

    class _Batches(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()
            self.order = rng.permutation(len(x))

        def __len__(self) -> int:
            return math.ceil(len(x) / batch)

        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            idx = self.order[i * batch : (i + 1) * batch]
            return x[idx], y[idx]

        def on_epoch_end(self) -> None:
            self.order = rng.permutation(len(x))

    return _Batches()


def leave_out(grads: list[Any], variables: list[Any], left_out: set[int]) -> tuple[list[Any], list[Any]]:
    """The gradients and variables an optimiser is handed when the variables whose ``id`` is in ``left_out``
    never reach it (the bug ``optimizer_skips_first``, as the PyTorch runs leave the first layer out of the
    optimiser's parameter list): the others, in order. Zeroing their gradients instead is not the bug: a
    decoupled weight decay (AdamW's) still moves a variable whose gradient is 0, so that layer is optimised
    after all (``bench/journal/families.md``, branch heldout: digits_keras). Keras 3 accepts a subset of the
    variables it was built on, with and without ``gradient_accumulation_steps`` (its accumulators are
    looked up by variable), and builds on the subset when this is its first ``apply``."""
    kept = [(g, v) for g, v in zip(grads, variables) if id(v) not in left_out]
    return [g for g, _ in kept], [v for _, v in kept]


def _one_tensorflow_thread(tf) -> None:
    """One thread per run, as the PyTorch runs use: pool workers are separate processes. TensorFlow fixes
    its thread pools when its context starts, so in a process that already ran TensorFlow (a test suite)
    the setting is refused; the runs' values do not depend on it, only their time does."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass


def run_keras(case: str, spec: FamilySpec, seed: int, out_dir: str) -> RunResult:
    """One Keras run of ``spec``, under its dtype policy (:func:`global_dtype_policy`: the global policy put
    back afterwards)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    precision = spec.precision or FAMILIES[spec.family].precision
    with global_dtype_policy(keras, precision):
        result = _run_keras(case, spec, seed, out_dir)
    result.precision = precision
    return result


def _run_keras(case: str, spec: FamilySpec, seed: int, out_dir: str) -> RunResult:
    import keras
    import tensorflow as tf

    from tornasole import SaveConfigMode, modes
    from tornasole.keras import Hook
    from tornasole.pytorch import SaveConfig

    _one_tensorflow_thread(tf)
    recipe = FAMILIES[spec.family]
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x, y, classes, n_val = getattr(data, recipe.data)(rng)
    n_train = len(x) - n_val if recipe.n_train is None else min(recipe.n_train, len(x) - n_val)
    if spec.input_scale != 1.0:
        x = x * np.float32(spec.input_scale)
    xt, yt = x[:n_train], y[:n_train]
    xv, yv = x[-n_val:], y[-n_val:]
    task = recipe.task
    if spec.label_noise and classes:
        flip = (rng.random(n_train) < spec.label_noise).reshape(-1, *([1] * (yt.ndim - 1)))
        yt = np.where(flip, rng.integers(0, classes, size=yt.shape).astype(yt.dtype), yt)
    if spec.shuffle_labels:
        yt = yt[rng.permutation(n_train)]
    if recipe.cutmix_alpha:
        # one-hot targets (CutMix mixes them; validation's stay hard one-hot), after the label faults
        yt, yv = (np.eye(classes, dtype=np.float32)[a] for a in (yt, yv))
    if spec.family == "convbn":
        model = build_keras_convbn(keras, spec)
    elif spec.family == "cutmix":
        model = build_keras_cutmix(keras, spec)
    elif spec.family == "amp":
        model = build_keras_amp(keras, spec)
    elif spec.family == "digits":
        model = build_keras_digits(keras, spec, x.shape[-1])
    elif spec.family == "gru":
        model = build_keras_gru(keras, spec, x.shape[1], x.shape[2])
    elif spec.family == "attention":
        model = build_keras_attention(keras, spec, x.shape[1], data.MAJORITY_VOCAB, classes)
    else:
        model = build_keras(keras, spec, x.shape[-1])
    # the first layer with weights (a functional model's first layer is its ``InputLayer``)
    first = next(layer for layer in model.layers if layer.weights)
    if spec.freeze_first:
        first.trainable = False
    epochs = spec.epochs or recipe.epochs
    batch = spec.batch or recipe.batch
    # a cosine or piecewise recipe runs Keras's own schedule (CosineDecay, PiecewiseConstantDecay); the
    # others' rate is set each epoch by the Labeller
    keras_schedules = {
        "cosine": cosine_schedule,
        "piecewise": piecewise_schedule,
        "inverse_time": inverse_time_schedule,
    }
    schedule = (
        keras_schedules[recipe.schedule](keras, spec, math.ceil(n_train / batch), epochs)
        if recipe.schedule in keras_schedules
        else None
    )
    lr = recipe.lr * spec.lr_mult if schedule is None else schedule
    opt_name = spec.opt or recipe.opt
    momentum = recipe.momentum if spec.momentum is None else spec.momentum
    accumulate = spec.accumulate if spec.accumulate > 1 else None
    if opt_name == "sgd":
        opt = keras.optimizers.SGD(lr, momentum=momentum, gradient_accumulation_steps=accumulate)
    elif opt_name == "adamw":
        opt = keras.optimizers.AdamW(
            lr, weight_decay=recipe.weight_decay, gradient_accumulation_steps=accumulate
        )
    else:
        # the recipe's clipping by norm is Keras's own (``clipnorm``: each gradient's norm, not the global)
        opt = keras.optimizers.Adam(lr, clipnorm=recipe.clip_norm, gradient_accumulation_steps=accumulate)
    if task == "classify":
        loss: Any = classification_loss(keras, spec)
    else:
        loss = "binary_crossentropy" if task == "binary" else "mse"
    metrics = ["accuracy"] if task in ("binary", "classify") else []
    # mixed precision: compile wraps ``opt`` in a LossScaleOptimizer under ``mixed_float16`` (unless
    # ``auto_scale_loss`` is off); a case with its own growth interval wraps it itself, as the guide's custom
    # loops do. ``opt`` stays the inner optimiser (its ``apply`` gets the unscaled gradients).
    compiled_opt = (
        keras.optimizers.LossScaleOptimizer(opt, dynamic_growth_steps=spec.scaler_growth_interval)
        if spec.scaler_growth_interval
        else opt
    )
    model.compile(optimizer=compiled_opt, loss=loss, metrics=metrics, auto_scale_loss=spec.auto_scale_loss)
    scaler = model.optimizer if isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) else None

    monitor = Monitor(epochs=epochs, oscillation=task in ("binary", "classify"))
    result = RunResult(case, seed, out_dir, {}, None)
    first_vars = {id(v) for v in first.trainable_weights}
    kernels = [v for v in model.trainable_weights if len(v.shape) >= 2]
    state: dict[str, Any] = {"step": 0, "train_done": 0, "seen": 0}
    if scaler is not None:
        state["scale"] = float(scaler.initial_scale)

    original_apply = opt.apply
    # one slot per trainable variable: the compiled train step copies its gradients there (no second
    # backward pass, no eager mode), the Labeller reads them after the step
    slots = {
        v.path: tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in model.trainable_weights
    }

    def apply_for_the_monitor(grads: Any, trainable_variables: Any = None) -> Any:
        """Keep the step's gradients for the Monitor (every layer's, the first's included); under the bug
        ``optimizer_skips_first`` hand the optimiser every variable but the first layer's (computed, never
        applied: :func:`leave_out`)."""
        variables = list(trainable_variables if trainable_variables is not None else model.trainable_weights)
        grads = list(grads)
        for g, v in zip(grads, variables):
            slots[v.path].assign(g)
        if spec.optimizer_skips_first:
            grads, variables = leave_out(grads, variables, first_vars)
        return original_apply(grads, variables)

    object.__setattr__(opt, "apply", apply_for_the_monitor)
    kernel_paths = {v.path for v in kernels}

    hidden_pre = [
        layer
        for layer in model.layers
        if isinstance(layer, keras.layers.Activation)
        and not layer.name.startswith("out_")
        and any(fn in layer.name for fn in ("tanh", "sigmoid"))
    ]

    def pre_activations() -> dict[str, np.ndarray]:
        """Validation-set inputs of hidden tanh/sigmoid layers, layer by layer in inference mode."""
        out: dict[str, np.ndarray] = {}
        if not hidden_pre:
            return out
        h = tf.convert_to_tensor(xv)
        for layer in model.layers:
            if layer in hidden_pre:
                out[layer.name] = np.asarray(h)
            h = layer(h, training=False)
        return out

    sst = float(((yv - yv.mean(axis=0)) ** 2).mean())
    sst_train = float(((yt - yt.mean(axis=0)) ** 2).mean())

    class Labeller(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if schedule is None:
                opt.learning_rate.assign(_lr_at(spec, recipe, epoch, epochs))
            state["seen"], state["sum"] = 0, 0.0

        def on_train_batch_end(self, batch_i: int, logs: Any = None) -> None:
            # Keras's logged loss is the epoch's running mean: the batch's own loss is recovered from it
            running = float(logs["loss"])
            n = batch_i + 1
            lv = running * n - state["sum"]
            state["sum"] = running * n
            weights = {v.path: v.numpy().copy() for v in kernels}
            all_grads = {path: slot.numpy() for path, slot in slots.items()}
            grads = {path: g for path, g in all_grads.items() if path in kernel_paths}
            monitor.train_step(state["step"], lv, grads, weights, all_grads, {})
            if scaler is not None:
                # a LossScaleOptimizer halves its scale on the steps it skips (an Inf or NaN gradient)
                scale = float(scaler.dynamic_scale.numpy())
                result.scaler_skipped_steps += int(scale < state["scale"])
                state["scale"] = scale
            result.train_before.append(state["train_done"])
            state["step"] += 1
            state["train_done"] += 1
            state["last_train"] = state["step"] - 1

        def on_test_batch_end(self, batch_i: int, logs: Any = None) -> None:
            result.train_before.append(state["train_done"])
            state["step"] += 1

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            logs = logs or {}
            vl = float(logs.get("val_loss", float("inf")))
            if task in ("binary", "classify"):
                val_score = float(logs.get("val_accuracy", 0.0))
                train_acc = float(logs.get("accuracy", 0.0))
            else:
                # R^2 / REGRESSION_REFERENCE_R2 from the mean squared errors, as families.training scores
                val_score = (1.0 - vl / max(sst, 1e-12)) / REGRESSION_REFERENCE_R2
                train_mse = float(logs.get("loss", float("inf")))
                train_acc = (1.0 - train_mse / max(sst_train, 1e-12)) / REGRESSION_REFERENCE_R2
            monitor.epoch_end(
                epoch,
                state["last_train"],
                float(logs.get("loss", float("inf"))),
                vl if math.isfinite(vl) else float("inf"),
                val_score if math.isfinite(val_score) else 0.0,
                pre_activations(),
                train_acc if math.isfinite(train_acc) else 0.0,
            )
            result.final_val_acc = val_score

    save = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=SAVE_INTERVAL),
            modes.EVAL: SaveConfigMode(save_interval=1),
        }
    )
    hook = Hook(
        out_dir,
        save_config=save,
        include_collections=[
            "weights",
            "biases",
            "gradients",
            "losses",
            "metrics",
            "activations",
            "relu_output",
            "loss_inputs",
            "model_input",
            "scalars",  # the hook's ``scalar/lr/0``: the rate each saved TRAIN step's update uses
        ],
        stop_check_interval=None,
    )
    hook.get_collection("activations").include(r".*(sigmoid|tanh)/inputs$")
    hook.get_collection("relu_output").include(r".*relu/outputs$")
    # what the compiled loss is given and returns, as the PyTorch recipe saves its loss module's inputs
    hook.get_collection("loss_inputs").include(r"^(predictions|labels)$|^batch_loss/")
    # what the model is fed (``inputs``, smdebug's name), for InputsNotNormalized: its default regex
    hook.get_collection("model_input").include(r"^[A-Z]\w*(?<!Loss)_input_0$|^inputs(_\d+)?$")
    # the Labeller runs first: it sets the epoch's learning rate before the hook's epoch begins
    batches = (
        cutmix_batches(keras, xt, yt, batch, rng, recipe.cutmix_alpha)
        if recipe.cutmix_alpha
        else epoch_shuffled(keras, xt, yt, batch, rng)
    )
    model.fit(
        batches,
        epochs=epochs,
        validation_data=(xv, yv),
        validation_batch_size=EVAL_BATCH,
        verbose=0,
        callbacks=[Labeller(), hook],
    )
    hook.close()
    if scaler is not None:
        result.scaler_final_scale = float(scaler.dynamic_scale.numpy())
    result.labels = dict(monitor.labels)
    result.onset = monitor.onset
    result.established = monitor.established
    result.val_acc, result.train_acc = list(monitor.val_acc), list(monitor.train_acc)
    result.variants = dict(monitor.variants)
    return result
