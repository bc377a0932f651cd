"""One run of the families benchmark: a tiny PyTorch model of one family trained with a validation pass
per epoch, saved by the PyTorch hook (``tornasole.pytorch.Hook``: weights, gradients, the loss module's
output, activation inputs/outputs by module name) and labelled by :mod:`labels` while it trains.

What the hook saves: collections ``weights``, ``gradients``, ``losses``; ``activations`` (inputs of modules
named ``*_sigmoid``/``*_tanh``), ``relu_output`` (outputs of modules named ``*_relu``); the batch accuracy
(``accuracy``, collection ``metrics``) and the epoch's training accuracy (``epoch_accuracy``, collection
``epoch_end``, at the epoch's last TRAIN step) for classifiers (a regression or an autoencoder saves no
accuracy, as their loops do not); ``loss_inputs``: the registered loss module's first input
(``CrossEntropyLoss_input_0``, what the model feeds the loss); ``model_input``: the registered model's
own input (``Mlp_input_0``, ``ConvNet_input_0``: what the data pipeline feeds it). TRAIN steps every
``SAVE_INTERVAL``, EVAL steps every step.

Labels (:class:`labels.Monitor`) see what the optimiser applied: the trainable parameters (a layer frozen
on purpose with ``requires_grad=False`` is no layer the criteria judge), and not the gradients of a step a
loss scaler skipped. For an autoencoder the Monitor's "accuracy" is the R^2 of the reconstruction (0 at
chance, 1 exact), so AUTOTRAINER's "not converging" bound (0.6) reads as "explains less than 60% of the
variance"; for a regression it is R^2 / ``REGRESSION_REFERENCE_R2``. AUTOTRAINER's oscillation test (swings
of 0.03) is defined on a classifier's accuracy and is not applied to either.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from labels import Monitor

from families import data
from families.models import (
    AmpCnn,
    AttentionOnly,
    BiGruRows,
    Conv1dNet,
    ConvAutoencoder,
    ConvNet,
    DistillLoss,
    ElboLoss,
    GruNet,
    LstmNet,
    MixupCnn,
    Mlp,
    ResMlp,
    StackedGru,
    TinyTransformer,
    Vae,
)

SAVE_INTERVAL = 4
EVAL_BATCH = 64


@dataclass(frozen=True)
class Recipe:
    """A family's healthy defaults."""

    data: str
    task: str  # classify | binary | multilabel | regress | reconstruct | denoise | vae
    opt: str  # sgd | adam | adamw | rmsprop | nadam
    lr: float
    batch: int
    epochs: int
    momentum: float = 0.0
    weight_decay: float = 0.0
    #: "" | cosine | step | exponential | plateau (``ReduceLROnPlateau`` on the validation loss, per epoch) |
    #: sgdr | onecycle | cosine_step | linear_step | warmup_cosine_step | warmup_constant_step |
    #: flat_cosine_step (the last seven per optimiser step) | multistep (per epoch, ``MultiStepLR``) |
    #: piecewise | inverse_time (Keras's own schedules, :mod:`families.keras_training`)
    schedule: str = ""
    warmup_epochs: int = 0
    n_train: int | None = None  # cap on the training samples (None: all but the validation set)
    depth: int = 2  # hidden blocks (MLPs, residual blocks) or convolutions, unless a case sets its own
    label_smoothing: float = 0.0  # CrossEntropyLoss's label_smoothing
    nesterov: bool = False  # SGD's Nesterov momentum
    gamma: float = 1.0  # the exponential schedule's factor per epoch (PyTorch's ExponentialLR)
    clip_norm: float | None = None  # clip_grad_norm_ of the trainable parameters before each optimiser step
    #: Keras: the output layer is a softmax (probabilities) and the cross-entropy takes them
    #: (``from_logits=False``), the Keras idiom; otherwise logits and ``from_logits=True``
    softmax_output: bool = False
    #: the loss of a regression: "" (``MSELoss``) or "huber" (``HuberLoss(delta=1.0)``, squared below 1,
    #: linear above, on a target standardised to unit variance)
    loss: str = ""
    #: the sequence families' width (recurrent units, or the model dimension of an attention-only transformer)
    width: int = 0
    #: the ``poly`` schedule's power: the rate ``lr * (1 - (epoch - warmup) / (epochs - warmup)) ** power``
    power: float = 1.0
    #: mixup (Zhang et al., ICLR 2018): each training batch's inputs and one-hot targets mixed with a
    #: permutation of the batch by a weight drawn from Beta(alpha, alpha); 0: no mixup
    mixup_alpha: float = 0.0
    #: a VAE's KL annealing (Bowman et al. 2016): the KL term's weight rises linearly from 0 to 1 over this
    #: many epochs of training batches
    kl_anneal_epochs: int = 0
    #: a VAE's latent units
    latent: int = 0
    #: knowledge distillation (Hinton et al. 2015): the softening temperature of :class:`models.DistillLoss`
    #: (0: no teacher) and the weight of its KL term (the hard labels' cross-entropy takes ``1 - alpha``)
    distill_temperature: float = 0.0
    distill_alpha: float = 0.0
    #: CutMix (Yun et al., ICCV 2019; Keras, :func:`families.keras_training.cutmix`): each training batch
    #: gets a box of a shuffled copy of itself pasted in, one-hot targets mixed by the box's area; the box's
    #: area share drawn from Beta(alpha, alpha) (0: no CutMix)
    cutmix_alpha: float = 0.0
    #: the arithmetic of the training step (:func:`run`): "fp32" (no autocast, no scaler); "fp16" (PyTorch's
    #: AMP recipe: forward and loss under ``torch.autocast(device_type, dtype=torch.float16)``, backward
    #: through ``torch.amp.GradScaler(device_type)`` with its defaults, ``unscale_`` before clipping, then
    #: ``scaler.step`` and ``scaler.update``); "bf16" (autocast in bfloat16, no scaler); a Keras run's dtype
    #: policy (:data:`families.keras_training.KERAS_PRECISIONS`): "mixed_float16", "mixed_bfloat16", "float16"
    precision: str = "fp32"


FAMILIES: dict[str, Recipe] = {
    "cnn": Recipe("digits", "classify", "sgd", 0.05, 32, 6, momentum=0.9, schedule="step", n_train=960),
    "binary": Recipe("breast_cancer", "binary", "adam", 3e-3, 16, 12),
    "softmax": Recipe(
        "wine", "classify", "adamw", 1e-2, 8, 15, weight_decay=1e-2, schedule="cosine", warmup_epochs=2
    ),
    "regression": Recipe("diabetes", "regress", "sgd", 3e-2, 16, 12, momentum=0.9, schedule="step"),
    "rnn": Recipe("sum_sequences", "classify", "adam", 1e-2, 32, 8, n_train=640),
    "autoencoder": Recipe("digits_flat", "reconstruct", "adam", 1e-2, 32, 10, n_train=960),
    "transformer": Recipe(
        "first_token",
        "classify",
        "adamw",
        3e-3,
        32,
        10,
        weight_decay=1e-2,
        schedule="cosine",
        warmup_epochs=1,
        n_train=640,
    ),
    # Held-out families (branch newfam), defined before any rule was scored on them: a modern residual MLP
    # (pre-LayerNorm blocks, GELU, dropout, label smoothing, AdamW, warmup + cosine) on the digits' classes,
    # and a plain ReLU MLP under SGD with momentum on iris (150 samples, a 30-sample validation set).
    "resmlp": Recipe(
        "digits_flat_classes",
        "classify",
        "adamw",
        2e-3,
        32,
        8,
        weight_decay=0.05,
        schedule="cosine",
        warmup_epochs=1,
        n_train=960,
        depth=3,
        label_smoothing=0.1,
    ),
    "iris": Recipe("iris", "classify", "sgd", 0.05, 8, 30, momentum=0.9),
    # Held-out families (branch newfam2), defined before any rule was scored on them: a 1-D CNN (BatchNorm
    # after the first conv) on noisy sines under SGD with Nesterov momentum, weight decay and a step schedule,
    # and (Keras only, :data:`families.keras_training.KERAS_ONLY`) a 2-D CNN with BatchNorm after both convs,
    # global average pooling, Adam with warmup + cosine decay, on the digits as channels-last images.
    "conv1d": Recipe(
        "noisy_sines",
        "classify",
        "sgd",
        0.05,
        32,
        10,
        momentum=0.9,
        weight_decay=5e-4,
        schedule="step",
        n_train=640,
        nesterov=True,
    ),
    # Held-out family (branch lrhigh), defined before any rule was scored on it: a SiLU MLP [13, 64, 64, 3]
    # with BatchNorm after each hidden Linear and dropout 0.2, plain cross-entropy, Adam (weight decay 1e-4)
    # under OneCycleLR stepped per batch, on the wines with a stratified 40-sample validation set.
    "wine": Recipe(
        "wine_stratified", "classify", "adam", 3e-3, 16, 40, weight_decay=1e-4, schedule="onecycle"
    ),
    "convbn": Recipe(
        "digits_channels_last",
        "classify",
        "adam",
        2e-3,
        32,
        8,
        schedule="cosine",
        warmup_epochs=1,
        n_train=960,
    ),
    # Held-out families (branch heldout), defined before any rule was scored on them: a one-layer LSTM on
    # marked-sign sequences (after the adding problem) under SGD with Nesterov momentum, gradient clipping by
    # norm (1.0), an exponential schedule and dropout before the head; and (Keras only) a softmax-output MLP
    # [64, 128, 64, 10] with LayerNorm and dropout 0.2 on the digits' pixels, AdamW (weight decay 1e-2) under
    # CosineDecay with a one-epoch warmup from 0, the cross-entropy fed probabilities (``from_logits=False``).
    "lstm": Recipe(
        "marked_signs",
        "classify",
        "sgd",
        0.5,
        32,
        20,
        momentum=0.9,
        schedule="exponential",
        gamma=0.95,
        nesterov=True,
        clip_norm=1.0,
    ),
    "digits": Recipe(
        "digits_flat_stratified",
        "classify",
        "adamw",
        3e-3,
        64,
        12,
        weight_decay=1e-2,
        schedule="cosine",
        warmup_epochs=1,
        softmax_output=True,
    ),
    # Held-out families (branch heldout2), defined and trained before any rule was scored on them: the digits
    # read as sequences of 8 rows (8 pixels each) by a one-layer bidirectional GRU (48 units a direction) to
    # a linear head, RMSprop with gradient clipping by norm (1.0) and ReduceLROnPlateau on the validation
    # loss, on a stratified 360-digit validation set; and the diabetes regression with a Huber loss (delta 1
    # on the standardised target), an ELU MLP [10, 64, 64, 1] without normalisation layers, AdamW (weight
    # decay 1e-2) under a linear warmup (1 epoch) then a linear decay to 0, both per optimiser step.
    "digits_rows": Recipe(
        "digits_rows_stratified",
        "classify",
        "rmsprop",
        3e-3,
        32,
        15,
        schedule="plateau",
        clip_norm=1.0,
    ),
    "diabetes_huber": Recipe(
        "diabetes",
        "regress",
        "adamw",
        3e-3,
        16,
        15,
        weight_decay=1e-2,
        schedule="linear_step",
        warmup_epochs=1,
        loss="huber",
    ),
    # Held-out families (branch heldout3), defined and trained before any rule was scored on them: a two-layer
    # GRU on a delayed-recall task (the marked one of 30 symbols, read from the last state) under Adam with a
    # per-step linear warmup then a cosine decay to 0, label smoothing 0.1 and gradient clipping by norm 1.0;
    # and a two-layer attention-only pre-norm causal transformer on an induction task (the token that followed
    # the earlier copy of the last token), AdamW with weight decay and a per-step linear warmup.
    "recall_gru": Recipe(
        "delayed_recall",
        "classify",
        "adam",
        2e-2,
        32,
        12,
        schedule="warmup_cosine_step",
        warmup_epochs=1,
        label_smoothing=0.1,
        clip_norm=1.0,
        width=48,
    ),
    "induction_tf": Recipe(
        "induction_pairs",
        "classify",
        "adamw",
        5e-3,
        32,
        12,
        weight_decay=0.1,
        schedule="warmup_constant_step",
        warmup_epochs=1,
        width=32,
    ),
    # Held-out families (branch heldout4), defined and trained before any rule was scored on them: a
    # multi-label classifier (four independent sigmoid outputs, BCEWithLogitsLoss) of the digits' attributes
    # (even, >= 5, a closed loop, prime: data.DIGIT_ATTRIBUTES), a ReLU MLP [64, 64, 64, 4] with dropout 0.2
    # under NAdam and a per-epoch polynomial decay (power 2); and (Keras only) Keras's own GRU on the order of
    # three markers (data.marker_order) under Adam with Keras's clipnorm and PiecewiseConstantDecay
    # (families.keras_training.piecewise_schedule).
    "multilabel": Recipe("digit_attributes", "multilabel", "nadam", 5e-3, 32, 15, schedule="poly", power=2.0),
    "gru": Recipe(
        "marker_order", "classify", "adam", 2e-2, 32, 12, schedule="piecewise", clip_norm=1.0, width=32
    ),
    # Held-out families (branch heldout5), defined and trained before any rule was scored on them: (Keras
    # only) a post-norm transformer encoder of Keras's own layers (token and learned position embeddings,
    # MultiHeadAttention, LayerNormalization, a ReLU feed-forward block, dropout 0.1, average pooling to a
    # Dense head) counting which of four tokens occurs most often (data.majority_token), AdamW under a linear
    # warmup then Keras's InverseTimeDecay (families.keras_training.inverse_time_schedule); and a
    # convolutional denoising autoencoder of the digits (Conv2d, GroupNorm, SiLU, ConvTranspose2d, a sigmoid
    # output under BCELoss against the clean image; Gaussian noise on the input only), AdamW under OneCycleLR.
    "attention": Recipe(
        "majority_token",
        "classify",
        "adamw",
        3e-3,
        32,
        12,
        weight_decay=1e-2,
        schedule="inverse_time",
        warmup_epochs=1,
        depth=1,
        width=32,
    ),
    "conv_ae": Recipe(
        "digits_denoise", "denoise", "adamw", 1e-2, 32, 15, weight_decay=1e-4, schedule="onecycle"
    ),
    # Held-out families (branch heldout6), defined and trained before any rule was scored on them: a
    # variational autoencoder of the digits as 64-vectors (ReLU MLP encoder to a mean and log-variance, the
    # reparameterisation trick, a ReLU MLP decoder to sigmoid pixels) under the user's own loss module
    # (models.ElboLoss: summed BCE + beta * KL, beta annealed linearly from 0 to 1 over the first epochs),
    # Adam under a flat-then-cosine schedule per optimiser step; and a small CNN of the digits' 8x8 images
    # (conv-BatchNorm-ReLU x2, max pooling, global average pooling) trained with mixup (inputs and one-hot
    # targets mixed, CrossEntropyLoss on the soft targets), SGD with Nesterov momentum and weight decay, a
    # linear warmup then MultiStepLR (Goyal et al. 2017's recipe).
    "vae": Recipe(
        "digits_vae",
        "vae",
        "adam",
        5e-3,
        32,
        20,
        schedule="flat_cosine_step",
        kl_anneal_epochs=5,
        width=128,
        latent=8,
    ),
    "mixup_cnn": Recipe(
        "digits",
        "classify",
        "sgd",
        0.1,
        32,
        15,
        momentum=0.9,
        weight_decay=5e-4,
        nesterov=True,
        schedule="multistep",
        warmup_epochs=2,
        n_train=960,
        width=16,
        mixup_alpha=0.3,
    ),
    # Held-out families (branch heldout7), defined and trained before any rule was scored on them: knowledge
    # distillation of the digits (64 pixels) from a teacher MLP [64, 256, 256, 10] trained first, without the
    # hook (:func:`teacher`), into a student MLP [64, 64, 64, 10] with dropout 0.1, under the user's own loss
    # module (models.DistillLoss: alpha x KL at temperature T x T^2 + (1 - alpha) x the hard labels'
    # cross-entropy), RMSprop under a per-epoch cosine decay; and (Keras only) a small CNN of the 8x8 digits
    # (conv-ReLU x2, max pooling, a dense layer) trained with CutMix and label smoothing 0.1 on the mixed
    # one-hot targets, AdamW with weight decay under Keras's CosineDecay, validated on clean digits.
    "distill": Recipe(
        "digits_flat_classes",
        "classify",
        "rmsprop",
        3e-3,
        32,
        20,
        schedule="cosine",
        width=64,
        distill_temperature=4.0,
        distill_alpha=0.5,
    ),
    "cutmix": Recipe(
        "digits_channels_last",
        "classify",
        "adamw",
        5e-3,
        32,
        20,
        weight_decay=1e-2,
        schedule="cosine",
        n_train=960,
        label_smoothing=0.1,
        width=8,
        cutmix_alpha=1.0,
    ),
    # Held-out family (branch amp, issue 29), defined and trained before any rule was scored on it: a small
    # CNN of the digits' 8x8 images (conv-BatchNorm-ReLU 8 then 16 channels, max pooling, a third conv block
    # of 16, global average pooling: models.AmpCnn) trained with real automatic mixed precision, PyTorch's
    # AMP recipe (fp16 autocast around forward and loss, torch.amp.GradScaler with its defaults, unscale_
    # before clipping by norm 1.0), AdamW with weight decay 0.05 under a per-step linear warmup (1 epoch)
    # then a cosine decay to 0, on every training digit.
    "amp_cnn": Recipe(
        "digits",
        "classify",
        "adamw",
        3e-3,
        32,
        12,
        weight_decay=0.05,
        schedule="warmup_cosine_step",
        warmup_epochs=1,
        depth=3,
        clip_norm=1.0,
        width=8,
        precision="fp16",
    ),
    # Held-out family (branch ampkeras, issue 29), defined and trained before any rule was scored on it: the
    # Keras counterpart of amp_cnn in Keras's own way (keras.io's "Mixed precision" guide): a small CNN of the
    # digits' 8x8 images (conv-BatchNorm-ReLU, 8 then 16 channels, max pooling between, global average
    # pooling, a Dense(10) then its softmax kept in float32: families.keras_training.build_keras_amp) built
    # under the ``mixed_float16`` dtype policy, so that ``compile`` wraps the optimiser in a
    # LossScaleOptimizer (dynamic loss scale, Keras's defaults); Adam under Keras's CosineDecay with a 1-epoch
    # warmup; Keras only.
    "amp": Recipe(
        "digits_channels_last",
        "classify",
        "adam",
        3e-3,
        32,
        12,
        schedule="cosine",
        warmup_epochs=1,
        softmax_output=True,
        width=8,
        precision="mixed_float16",
    ),
}

#: The ``distill`` family's teacher: widths, epochs, Adam's rate and batch (trained without the hook)
TEACHER_SIZES = (256, 256)
TEACHER_EPOCHS = 15
TEACHER_LR = 1e-3
TEACHER_BATCH = 64
_TEACHERS: dict[tuple[str, int, int], Any] = {}


def teacher(recipe: Recipe, seed: int, n_train: int) -> Any:
    """The distillation teacher of a run of seed ``seed``: a ReLU MLP [in, 256, 256, classes] trained with
    Adam on the run's own training split (the recipe's data drawn with the seed, as :func:`run` draws it;
    clean inputs and labels: a teacher trained before, as a user loads one), without the hook, in eval mode
    and without gradients. Deterministic: seeded by its own generators (``torch.random.fork_rng``), so
    training it leaves the run's random state as it was; cached in the process, keyed by data, seed and
    training size, so the runs of one seed share one teacher."""
    import torch
    from torch import nn

    key = (recipe.data, seed, n_train)
    if key in _TEACHERS:
        return _TEACHERS[key]
    x, y, classes, _ = getattr(data, recipe.data)(np.random.default_rng(seed))
    xt = torch.from_numpy(np.ascontiguousarray(x[:n_train]))
    yt = torch.from_numpy(np.ascontiguousarray(y[:n_train]))
    rng = np.random.default_rng(10_000 + seed)
    with torch.random.fork_rng():
        torch.manual_seed(10_000 + seed)
        model = Mlp([x.shape[-1], *TEACHER_SIZES, classes], "relu")
        opt = torch.optim.Adam(model.parameters(), lr=TEACHER_LR)
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(TEACHER_EPOCHS):
            order = torch.from_numpy(rng.permutation(n_train))
            for b in range(0, n_train, TEACHER_BATCH):
                idx = order[b : b + TEACHER_BATCH]
                opt.zero_grad()
                loss_fn(model(xt[idx]), yt[idx]).backward()
                opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    _TEACHERS[key] = model
    return model


#: ReduceLROnPlateau's settings of the ``plateau`` schedule: halve the rate when the validation loss has not
#: improved (PyTorch's default relative threshold 1e-4) for 2 epochs
PLATEAU_FACTOR = 0.5
PLATEAU_PATIENCE = 2


@dataclass(frozen=True)
class FamilySpec:
    """How one case trains: a family, its recipe, and what differs (every field's default is healthy)."""

    family: str
    lr_mult: float = 1.0
    opt: str | None = None
    momentum: float | None = None
    epochs: int | None = None
    batch: int | None = None
    schedule: str | None = None
    warmup_epochs: int | None = None
    hidden_act: str | None = None  # DeepFD: change the activation function
    depth: int | None = None  # hidden blocks (MLPs, residual blocks) or convolutions; None: the recipe's
    width: int | None = None
    weight_scale: float = 1.0  # DeepFD: change the weight initialisation
    input_scale: float = 1.0  # DeepFD: drop the input normalisation (x this)
    label_noise: float = 0.0
    shuffle_labels: bool = False  # a data bug: training labels permuted (only an accuracy shows it)
    optimizer_skips_first: bool = False  # a bug: the first layer's parameters never reach the optimiser
    freeze_first: bool = False  # on purpose: the first layer has requires_grad=False
    lr_zero_after_epoch: int | None = None  # a scheduler bug
    accumulate: int = 1  # gradient accumulation: one optimiser step per this many batches
    skip_step: int | None = (
        None  # an fp16 loss scaler's overflow: this TRAIN step's gradients are Inf, skipped
    )
    double_softmax: bool = False  # DeepFD: change the loss (softmax applied before CrossEntropyLoss)
    dropout: float = 0.0
    cycle_epochs: int = 0  # SGDR (schedule "sgdr"): epochs of each cosine cycle before a warm restart
    relu_bias: float = 0.0  # added to the hidden layers' initial biases (< 0: sparse ReLU outputs)
    save_lr: bool = False  # save the learning rate every saved TRAIN step as ``scalar/lr/0``
    warmup_from_zero: bool = (
        False  # the warmup_epochs rise linearly from 0 per optimiser step (not per epoch)
    )
    framework: str = "pytorch"  # pytorch (this module) | keras (:mod:`families.keras_training`)
    #: the training step's arithmetic (None: the recipe's ``precision``): "fp32", "fp16" (autocast and a
    #: GradScaler), "bf16" (autocast in bfloat16, no scaler), and two mistakes of mixed precision:
    #: "fp16_no_scaler" (fp16 autocast, the loss's backward unscaled: small gradients underflow to 0) and
    #: "half" (the model and its inputs cast with ``.half()``, no autocast, no scaler: the optimiser's state
    #: and step in fp16, where Adam's eps 1e-8 is 0)
    precision: str | None = None
    #: the GradScaler's ``growth_interval`` (None: PyTorch's default, 2000 steps without an overflow); in
    #: Keras a LossScaleOptimizer's ``dynamic_growth_steps`` (None: Keras's default, 2000)
    scaler_growth_interval: int | None = None
    #: a mixed-precision bug: ``clip_grad_norm_`` applied to the scaled gradients, before ``scaler.unscale_``
    #: (the AMP examples' warning), so the clipping threshold is met by gradients ``scale`` times too large
    clip_before_unscale: bool = False
    #: Keras mixed precision (:func:`families.keras_training.run_keras`): a mistake of keras.io's guide, the
    #: output softmax left in the float16 policy instead of ``dtype="float32"``
    output_fp16: bool = False
    #: Keras's ``compile(auto_scale_loss=...)``: False under ``mixed_float16`` is fp16 without loss scaling
    #: (no LossScaleOptimizer: small gradients underflow to 0)
    auto_scale_loss: bool = True

    @property
    def blocks(self) -> int:
        """The number of hidden blocks this case trains: its own ``depth``, else its recipe's."""
        return FAMILIES[self.family].depth if self.depth is None else self.depth


@dataclass
class RunResult:
    case: str
    seed: int
    path: str
    labels: dict[str, int]
    onset: int | None
    established: int | None = None
    train_before: list[int] = field(default_factory=list)
    final_val_acc: float = float("nan")
    val_acc: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    variants: dict[str, int] = field(default_factory=dict)  # labels.Monitor.variants
    device: str = "cpu"  # where the run trained (``TORNASOLE_BENCH_DEVICE``, :func:`device_name`)
    torch_version: str = ""
    precision: str = "fp32"  # the arithmetic it trained in (:attr:`FamilySpec.precision`)
    #: optimiser steps a GradScaler skipped (an Inf or NaN among the unscaled gradients: its scale halved)
    scaler_skipped_steps: int = 0
    scaler_final_scale: float | None = None


def build(spec: FamilySpec, recipe: Recipe, in_dim: int, classes: int) -> Any:
    """The model of ``spec.family`` with the spec's mutations."""
    act = spec.hidden_act or {
        "softmax": "tanh",
        "resmlp": "gelu",
        "wine": "silu",
        "diabetes_huber": "elu",
        "conv_ae": "silu",
    }.get(spec.family, "relu")
    width = spec.width
    if spec.family == "distill":
        # the student: dropout 0.1 (or the case's), the recipe's width
        return Mlp(
            [in_dim, *([width or recipe.width] * spec.blocks), classes], act, dropout=spec.dropout or 0.1
        )
    if spec.family == "vae":
        return Vae(in_dim, act=act, width=width or recipe.width, depth=spec.blocks, latent=recipe.latent)
    if spec.family == "amp_cnn":
        return AmpCnn(act=act, width=width or recipe.width, depth=spec.blocks, classes=classes)
    if spec.family == "mixup_cnn":
        return MixupCnn(act=act, width=width or recipe.width, depth=spec.blocks, classes=classes)
    if spec.family == "cnn":
        return ConvNet(act=act, width=width or 8, depth=spec.blocks)
    if spec.family == "rnn":
        return GruNet(hidden=width or 24, classes=classes)
    if spec.family == "transformer":
        return TinyTransformer(d=width or 32, classes=classes)
    if spec.family == "resmlp":
        return ResMlp(
            in_dim, classes, hidden=width or 128, depth=spec.blocks, act=act, dropout=spec.dropout or 0.1
        )
    if spec.family == "lstm":
        return LstmNet(in_dim, hidden=width or 32, classes=classes, dropout=spec.dropout or 0.2)
    if spec.family == "digits_rows":
        return BiGruRows(in_dim, hidden=width or 48, classes=classes)
    if spec.family == "recall_gru":
        return StackedGru(in_dim, hidden=width or recipe.width, classes=classes)
    if spec.family == "induction_tf":
        return AttentionOnly(vocab=classes, length=in_dim, d=width or recipe.width, classes=classes)
    if spec.family == "diabetes_huber":
        return Mlp([in_dim, *([width or 64] * spec.blocks), 1], act, dropout=spec.dropout)
    if spec.family == "conv_ae":
        return ConvAutoencoder(act=act, width=width or recipe.width or 16, depth=spec.blocks)
    if spec.family == "conv1d":
        return Conv1dNet(act=act, width=width or 16, depth=spec.blocks, classes=classes)
    if spec.family == "wine":
        return Mlp(
            [in_dim, *([width or 64] * spec.blocks), classes], act, norm="batch", dropout=spec.dropout or 0.2
        )
    if spec.family == "iris":
        return Mlp([in_dim, *([width or 16] * spec.blocks), classes], act, dropout=spec.dropout)
    if spec.family == "multilabel":
        outputs = len(data.DIGIT_ATTRIBUTES)
        return Mlp([in_dim, *([width or 64] * spec.blocks), outputs], act, dropout=spec.dropout or 0.2)
    w = width or 32
    if spec.family == "binary":
        return Mlp([in_dim, *([w] * spec.blocks), 1], act, dropout=spec.dropout or 0.2, out_act="sigmoid")
    if spec.family == "softmax":
        return Mlp([in_dim, *([w] * spec.blocks), classes], act, norm="layer", dropout=spec.dropout)
    if spec.family == "regression":
        return Mlp([in_dim, *([w] * spec.blocks), 1], act, norm="batch", dropout=spec.dropout)
    # autoencoder: 64 -> w -> 16 -> w -> 64, sigmoid pixels
    return Mlp([in_dim, w, 16, w, in_dim], act, out_act="sigmoid")


#: R^2 that counts as a full score for a regression: what a least-squares linear fit of the diabetes data
#: explains on held-out patients (about 0.5), so AUTOTRAINER's "not converging" (< 0.6) reads as "explains
#: less than 60% of what a linear model does".
REGRESSION_REFERENCE_R2 = 0.5


def _score(task: str, out: Any, target: Any) -> float:
    """Accuracy for a classifier; R^2 for a reconstruction (of the clean image, for a denoiser); R^2 /
    REGRESSION_REFERENCE_R2 for a regression."""
    if task == "classify":
        return float((out.argmax(dim=1) == target).float().mean())
    if task == "binary":
        return float(((out > 0.5).float() == target).float().mean())
    if task == "multilabel":
        # logits: an attribute holds where its logit is positive; the accuracy of every (sample, attribute)
        # decision (Keras's ``binary_accuracy`` on a multi-label output)
        return float(((out > 0).float() == target).float().mean())
    sst = float(((target - target.mean(dim=0)) ** 2).sum())
    r2 = 1.0 - float(((out - target) ** 2).sum()) / max(sst, 1e-12)
    return r2 / REGRESSION_REFERENCE_R2 if task == "regress" else r2


def _zeroed(spec: FamilySpec, epoch: int) -> bool:
    """Whether the ``scheduler_zeroes_lr`` fault has set the rate to 0 in ``epoch`` (after
    ``lr_zero_after_epoch``)."""
    return spec.lr_zero_after_epoch is not None and epoch > spec.lr_zero_after_epoch


def _lr_at(spec: FamilySpec, recipe: Recipe, epoch: int, epochs: int) -> float:
    lr = recipe.lr * spec.lr_mult
    warm = recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs
    sched = recipe.schedule if spec.schedule is None else spec.schedule
    if _zeroed(spec, epoch):
        return 0.0
    if epoch < warm:
        return lr * (epoch + 1) / (warm + 1)
    if sched in (
        "sgdr",
        "onecycle",
        "linear_step",
        "warmup_cosine_step",
        "warmup_constant_step",
        "flat_cosine_step",
        "plateau",
    ):
        # the base rate; :func:`_step_scheduler` moves it every optimiser step, or (``plateau``) the run's
        # ReduceLROnPlateau after each validation pass
        return lr
    if sched == "cosine":
        return lr * 0.5 * (1 + math.cos(math.pi * (epoch - warm) / max(1, epochs - warm)))
    if sched == "step":
        return lr * (0.3 ** (epoch // max(1, epochs // 2)))
    if sched == "exponential":
        return lr * recipe.gamma ** (epoch - warm)
    if sched == "multistep":
        # PyTorch's MultiStepLR: x0.1 at half the run's epochs and again at three quarters
        return lr * 0.1 ** sum(epoch >= m for m in multistep_milestones(epochs))
    if sched == "poly":
        # PyTorch's PolynomialLR(total_iters=epochs - warmup, power) stepped per epoch: the last epoch's rate
        # is lr / (epochs - warmup) ** power, never 0
        return lr * (1 - (epoch - warm) / max(1, epochs - warm)) ** recipe.power
    return lr


def _step_scheduler(spec: FamilySpec, recipe: Recipe, opt: Any, steps_per_epoch: int, epochs: int) -> Any:
    """PyTorch's own per-step scheduler for ``sgdr`` (``CosineAnnealingWarmRestarts``: Loshchilov & Hutter,
    ICLR'17, a cosine cycle of ``cycle_epochs`` then a restart at the base rate) and ``onecycle``
    (``OneCycleLR``: Smith & Topin 2017, a rise to the base rate over 30% of the run, then a cosine anneal)
    and ``cosine_step`` (``CosineAnnealingLR(T_max=every optimiser step of the run)``, ``eta_min`` 0: the
    per-step cosine of today's recipes, whose last rates are ~0); None for the per-epoch schedules of
    :func:`_lr_at`."""
    import torch

    sched = recipe.schedule if spec.schedule is None else spec.schedule
    lr = recipe.lr * spec.lr_mult
    for group in opt.param_groups:
        group["lr"] = lr
    if sched == "sgdr":
        return torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
            opt, T_0=max(1, spec.cycle_epochs) * steps_per_epoch
        )
    if sched == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps_per_epoch * epochs)
    if sched == "cosine_step":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps_per_epoch * epochs)
    warm = max(0, recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs)
    factors = {
        "linear_step": _linear_factor,
        "warmup_cosine_step": _warmup_cosine_factor,
        "warmup_constant_step": _warmup_constant_factor,
        "flat_cosine_step": _flat_cosine_factor,
    }
    if sched in factors:
        return torch.optim.lr_scheduler.LambdaLR(
            opt, partial(factors[sched], warm * steps_per_epoch, steps_per_epoch * epochs)
        )
    return None


def _linear_factor(warm_steps: int, total_steps: int, step: int) -> float:
    """The ``linear_step`` schedule's factor of the base rate at optimiser step ``step``: a linear rise from
    0 over ``warm_steps``, then a linear decay to 0 at ``total_steps`` (Hugging Face's
    ``get_linear_schedule_with_warmup``, BERT's schedule).

    >>> [round(_linear_factor(2, 6, s), 2) for s in range(7)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]
    """
    if step < warm_steps:
        return step / warm_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warm_steps))


def _warmup_cosine_factor(warm_steps: int, total_steps: int, step: int) -> float:
    """The ``warmup_cosine_step`` schedule's factor at optimiser step ``step``: a linear rise from 0 over
    ``warm_steps``, then a half cosine to 0 at ``total_steps`` (Hugging Face's
    ``get_cosine_schedule_with_warmup``).

    >>> [round(_warmup_cosine_factor(2, 6, s), 2) for s in range(7)]
    [0.0, 0.5, 1.0, 0.85, 0.5, 0.15, 0.0]
    """
    if step < warm_steps:
        return step / warm_steps
    progress = min(1.0, (step - warm_steps) / max(1, total_steps - warm_steps))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def multistep_milestones(epochs: int) -> tuple[int, int]:
    """The ``multistep`` schedule's milestones (the epochs whose rate is 0.1x the one before): half and three
    quarters of the run.

    >>> multistep_milestones(20)
    (10, 15)
    """
    return epochs // 2, (3 * epochs) // 4


def _flat_cosine_factor(warm_steps: int, total_steps: int, step: int) -> float:
    """The ``flat_cosine_step`` schedule's factor at optimiser step ``step``: a linear rise from 0 over
    ``warm_steps`` (none in the recipe), the base rate until half the run, then a half cosine to 0 at
    ``total_steps`` (fastai's ``fit_flat_cos``).

    >>> [round(_flat_cosine_factor(0, 8, s), 2) for s in range(9)]
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.85, 0.5, 0.15, 0.0]
    """
    if step < warm_steps:
        return step / warm_steps
    flat = max(warm_steps, total_steps // 2)
    if step < flat:
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - flat) / max(1, total_steps - flat))))


def _warmup_constant_factor(warm_steps: int, _total_steps: int, step: int) -> float:
    """The ``warmup_constant_step`` schedule's factor at optimiser step ``step``: a linear rise from 0 over
    ``warm_steps``, then the base rate to the end (Hugging Face's ``get_constant_schedule_with_warmup``).

    >>> [round(_warmup_constant_factor(2, 6, s), 2) for s in range(7)]
    [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    return step / warm_steps if step < warm_steps else 1.0


def _warmup_from_zero(spec: FamilySpec, recipe: Recipe, opt_step: int, opt_steps_per_epoch: int) -> float:
    """The rate of optimiser step ``opt_step`` inside a linear warmup from exactly 0 to the recipe's rate over
    ``warmup_epochs`` epochs of optimiser steps (the first step's rate is 0), as transformers' recipes warm
    up (Goyal et al. 2017, "gradual warmup"; Keras's ``CosineDecay(warmup_steps=...)`` starts at 0 too)."""
    warm = recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs
    return recipe.lr * spec.lr_mult * opt_step / max(1, warm * opt_steps_per_epoch)


#: The environment variable that names the device the PyTorch runs train on (``score.py --device`` sets it
#: before its workers start): "cpu" (the default) or "cuda"
DEVICE_ENV = "TORNASOLE_BENCH_DEVICE"


def device_name() -> str:
    """The device of this process's PyTorch runs: ``$TORNASOLE_BENCH_DEVICE`` ("cpu" when unset)."""
    name = os.environ.get(DEVICE_ENV, "") or "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"{DEVICE_ENV}={name!r}: choose cpu or cuda")
    return name


#: the autocast dtype of each precision (:attr:`Recipe.precision`, :attr:`FamilySpec.precision`); "fp32"
#: and "half" (a model cast to fp16 whole) run without autocast
_AUTOCAST = {"fp16": "float16", "fp16_no_scaler": "float16", "bf16": "bfloat16"}
PRECISIONS = ("fp32", "fp16", "bf16", "fp16_no_scaler", "half")


def _host(t: Any) -> np.ndarray:
    """A tensor's values as a float32 NumPy copy on the host (a no-op conversion for a float32 CPU tensor,
    whose values are copied exactly as ``t.detach().numpy().copy()`` copies them)."""
    return t.detach().float().cpu().numpy().copy()


def _amp_step(scaler: Any, opt: Any, trainable: list[Any], clip_norm: float | None, clip_first: bool) -> bool:
    """One optimiser step of PyTorch's AMP recipe: ``scaler.unscale_(opt)``, ``clip_grad_norm_`` of the
    unscaled gradients, ``scaler.step(opt)`` (which skips the step if a gradient is Inf or NaN),
    ``scaler.update()``; with ``clip_first`` the bug of clipping the scaled gradients before ``unscale_``.
    True if the scaler skipped the step (it lowered its scale)."""
    import torch

    if clip_first and clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(trainable, clip_norm)
    scaler.unscale_(opt)
    if not clip_first and clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(trainable, clip_norm)
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    return scaler.get_scale() < before


def run(case: str, spec: FamilySpec, seed: int, out_dir: str) -> RunResult:
    import contextlib

    import torch
    from torch import nn

    from tornasole import SaveConfigMode, modes
    from tornasole.pytorch import Hook, SaveConfig
    from tornasole.pytorch.step_statistics import learning_rate_name

    recipe = FAMILIES[spec.family]
    device = torch.device(device_name())
    precision = spec.precision or recipe.precision
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: choose among {', '.join(PRECISIONS)}")
    half = precision == "half"
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x, y, classes, n_val = getattr(data, recipe.data)(rng)
    n_train = len(x) - n_val if recipe.n_train is None else min(recipe.n_train, len(x) - n_val)
    task = recipe.task
    # a denoiser's input is corrupted first, then scaled (``inputs_not_normalised``): its target stays clean
    scale = np.float32(spec.input_scale)
    if spec.input_scale != 1.0 and task != "denoise":
        x = x * scale
    xt, yt = x[:n_train], y[:n_train]
    xv, yv = x[-n_val:], y[-n_val:]
    if task == "reconstruct":
        yt, yv = xt, xv
    if task == "denoise":
        xv = data.add_noise(xv, rng) * scale  # one seeded corruption of the validation images
    if spec.label_noise and classes:
        flip = (rng.random(n_train) < spec.label_noise).reshape(-1, *([1] * (yt.ndim - 1)))
        yt = np.where(flip, rng.integers(0, classes, size=yt.shape).astype(yt.dtype), yt)
    if spec.shuffle_labels:
        yt = yt[rng.permutation(n_train)]
    xt, yt, xv, yv = (torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in (xt, yt, xv, yv))
    in_dim = x.shape[-1]
    model = build(spec, recipe, in_dim, classes).to(device)
    if half:
        model.half()  # the whole model in fp16 (a mixed-precision mistake: no fp32 master weights)
    params = list(model.named_parameters())
    with torch.no_grad():
        for _name, p in params:
            if p.dim() >= 2:
                p.mul_(spec.weight_scale)
            elif spec.relu_bias and _name.endswith(".bias") and not _name.startswith("out."):
                p.add_(spec.relu_bias)
    first = params[0][0].rsplit(".", 1)[0]  # the first layer's module
    if spec.freeze_first:
        for name, p in params:
            if name.rsplit(".", 1)[0] == first:
                p.requires_grad_(False)
    trainable = [
        p
        for name, p in params
        if p.requires_grad and not (spec.optimizer_skips_first and name.rsplit(".", 1)[0] == first)
    ]
    opt_name = spec.opt or recipe.opt
    momentum = recipe.momentum if spec.momentum is None else spec.momentum
    if opt_name == "sgd":
        opt = torch.optim.SGD(
            trainable,
            lr=recipe.lr,
            momentum=momentum,
            weight_decay=recipe.weight_decay,
            nesterov=recipe.nesterov and momentum > 0,
        )
    elif opt_name == "adamw":
        opt = torch.optim.AdamW(trainable, lr=recipe.lr, weight_decay=recipe.weight_decay)
    elif opt_name == "rmsprop":
        opt = torch.optim.RMSprop(trainable, lr=recipe.lr, weight_decay=recipe.weight_decay)
    elif opt_name == "nadam":
        opt = torch.optim.NAdam(trainable, lr=recipe.lr, weight_decay=recipe.weight_decay)
    else:
        opt = torch.optim.Adam(trainable, lr=recipe.lr, weight_decay=recipe.weight_decay)
    teach = teacher(recipe, seed, n_train) if recipe.distill_temperature else None
    if teach is not None:
        teach = teach.to(device)
    if teach is not None:
        # the user's own module: alpha * KL(teacher || student at T) * T^2 + (1 - alpha) * CE(hard labels)
        loss_mod: Any = DistillLoss(recipe.distill_temperature, recipe.distill_alpha)
    elif task == "classify":
        loss_mod = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    elif task == "binary":
        loss_mod = nn.BCELoss()
    elif task == "multilabel":
        loss_mod = nn.BCEWithLogitsLoss()
    elif task == "denoise":
        loss_mod = nn.BCELoss()  # sigmoid pixels against the clean image's pixels in [0, 1]
    elif task == "vae":
        loss_mod = ElboLoss()  # the user's own module: BCE summed over the pixels + beta * KL
    elif recipe.loss == "huber":
        loss_mod = nn.HuberLoss(delta=1.0)
    else:
        loss_mod = nn.MSELoss()

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
            "gradients",
            "losses",
            "activations",
            "relu_output",
            "metrics",
            "loss_inputs",
            "model_input",
            *(["scalars"] if spec.save_lr else []),
        ],
        stop_check_interval=None,
    )
    hook.get_collection("activations").include(".*(sigmoid|tanh)_input_0")
    hook.get_collection("relu_output").include(".*relu_output_0")
    hook.get_collection("epoch_end").save_config = SaveConfig(save_interval=1)
    # the registered loss module's inputs (_0 the prediction it is fed, _1 the target), as smdebug names them
    hook.get_collection("loss_inputs").include(r"[Ll]oss_input_[01]$")
    # what the model is fed (``<ModelClass>_input_0``), for InputsNotNormalized: its default regex
    hook.get_collection("model_input").include(r"^[A-Z]\w*(?<!Loss)_input_0$|^inputs(_\d+)?$")
    hook.register_module(model)
    hook.register_loss(loss_mod)

    # The Monitor's own view: pre-activations of hidden tanh/sigmoid modules (DeepDiagnosis's saturation is
    # about the units a layer passes on; an output layer a loss drives to confidence is not one).
    captured: dict[str, list[np.ndarray]] = {}
    for mname, module in model.named_modules():
        if isinstance(module, (nn.Tanh, nn.Sigmoid)) and not mname.startswith("out_"):

            def grab(_m: Any, inputs: Any, _o: Any, key: str = mname) -> None:
                if not model.training:
                    captured.setdefault(key, []).append(_host(inputs[0]))

            module.register_forward_hook(grab)

    kernels = [(n, p) for n, p in params if p.dim() >= 2 and p.requires_grad and n != "pos"]
    monitor = Monitor(
        epochs=spec.epochs or recipe.epochs, oscillation=task in ("classify", "binary", "multilabel")
    )
    result = RunResult(case, seed, out_dir, {}, None)
    epochs = spec.epochs or recipe.epochs
    batch = spec.batch or recipe.batch
    step = train_done = 0
    steps_per_epoch = math.ceil(n_train / batch)
    opt_steps_per_epoch = math.ceil(steps_per_epoch / spec.accumulate)
    per_step = _step_scheduler(spec, recipe, opt, opt_steps_per_epoch, epochs)
    warm_epochs = recipe.warmup_epochs if spec.warmup_epochs is None else spec.warmup_epochs
    plateau = (
        torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=PLATEAU_FACTOR, patience=PLATEAU_PATIENCE)
        if per_step is None and (recipe.schedule if spec.schedule is None else spec.schedule) == "plateau"
        else None
    )
    opt_steps = 0
    # mixed precision (PyTorch's AMP recipe, https://pytorch.org/docs/stable/notes/amp_examples.html):
    # autocast around the forward pass and the loss, and for fp16 a GradScaler with PyTorch's defaults
    # (init_scale 2**16, growth_factor 2, backoff_factor 0.5, growth_interval 2000) unless the case sets its
    # growth interval
    autocast_dtype = getattr(torch, _AUTOCAST[precision]) if precision in _AUTOCAST else None
    scaler = (
        torch.amp.GradScaler(
            device.type,
            **({"growth_interval": spec.scaler_growth_interval} if spec.scaler_growth_interval else {}),
        )
        if precision == "fp16"
        else None
    )

    def autocast() -> Any:
        if autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=autocast_dtype)

    def forward(xb: Any) -> Any:
        out = model(xb)
        if spec.double_softmax:
            out = torch.softmax(out, dim=1)
        return out

    def criterion(out: Any, target: Any, xb: Any) -> Any:
        # a VAE's model returns (reconstruction, mu, logvar), its loss takes them after the target
        if task == "vae":
            return loss_mod(out[0], target, *out[1:])
        if teach is not None:
            # the teacher's logits of the very batch the student is fed (the pipeline's inputs, scaled or not)
            with torch.no_grad():
                teacher_logits = teach(xb)
            return loss_mod(out, target, teacher_logits)
        return loss_mod(out, target)

    kl_steps = recipe.kl_anneal_epochs * steps_per_epoch

    for epoch in range(epochs):
        if per_step is None and (plateau is None or epoch <= warm_epochs or _zeroed(spec, epoch)):
            # (a plateau schedule owns the rate after the warmup: its reductions carry over)
            for group in opt.param_groups:
                group["lr"] = _lr_at(spec, recipe, epoch, epochs)
        model.train()
        hook.set_mode(modes.TRAIN)
        order = rng.permutation(n_train)
        losses, scores, weights_n = [], [], 0
        opt.zero_grad()
        for bi, b in enumerate(range(0, n_train, batch)):
            idx = torch.from_numpy(order[b : b + batch]).to(device)
            xb = xt[idx]
            if task == "denoise":  # a fresh corruption of each batch's input (Vincent et al. 2008)
                xb = torch.from_numpy(data.add_noise(xb.cpu().numpy(), rng) * scale).to(device)
            yb = yt[idx]
            scored = yb
            if recipe.mixup_alpha:
                # mixup: the batch mixed with a permutation of itself, inputs and one-hot targets alike; the
                # batch's accuracy is read against each mixed sample's dominant label
                lam = float(rng.beta(recipe.mixup_alpha, recipe.mixup_alpha))
                perm = torch.from_numpy(rng.permutation(len(idx))).to(device)
                xb = lam * xb + (1.0 - lam) * xb[perm]
                onehot = nn.functional.one_hot(yb, classes).float()
                yb = lam * onehot + (1.0 - lam) * onehot[perm]
                scored = yb.argmax(dim=1)
            if kl_steps:
                loss_mod.beta = min(1.0, train_done / kl_steps)  # KL annealing, per training batch
            if half:
                xb = xb.half()
            with autocast():
                out = forward(xb)
                loss = criterion(out, yb, xb)
            lv = float(loss.item())
            if task == "vae":
                out = out[0]
            sc = _score(task, out.detach(), scored)
            losses.append(lv)
            scores.append(sc * len(idx))
            weights_n += len(idx)
            if spec.warmup_from_zero and epoch < warm_epochs:
                for group in opt.param_groups:
                    group["lr"] = _warmup_from_zero(spec, recipe, opt_steps, opt_steps_per_epoch)
            if _zeroed(spec, epoch):
                # the bug holds whatever the schedule: a per-step scheduler (OneCycleLR, wine's recipe) sets
                # the rate after every optimiser step and would undo the epoch's 0 of :func:`_lr_at`
                for group in opt.param_groups:
                    group["lr"] = 0.0
            if spec.save_lr:
                hook.save_tensor(learning_rate_name(0, 0), np.float32(opt.param_groups[0]["lr"]), "scalars")
            if classes:
                hook.save_tensor("accuracy", np.float32(sc), "metrics")
                if b + len(idx) >= n_train:
                    hook.save_tensor("epoch_accuracy", np.float32(sum(scores) / weights_n), "epoch_end")
            skipped = spec.skip_step is not None and step == spec.skip_step
            # an overflowing loss scale (fp16): the scaled loss's gradients are Inf (NaN where Inf meets 0)
            if scaler is not None and not skipped:
                # the hook's gradient hooks see the scaled gradients, as in any AMP script
                scaler.scale(loss / spec.accumulate).backward()
            else:
                ((loss * float("inf")) if skipped else (loss / spec.accumulate)).backward()
            if not skipped:
                grads = {
                    n: (_host(p.grad) if p.grad is not None else np.zeros(tuple(p.shape))) for n, p in kernels
                }
                all_grads = {n: _host(p.grad) for n, p in params if p.requires_grad and p.grad is not None}
                if scaler is not None:
                    # the Monitor sees the gradients the optimiser would apply: unscaled, and none of a step
                    # the scaler skips (an Inf or NaN among them)
                    inv = np.float32(1.0 / scaler.get_scale())
                    grads = {n: g * inv for n, g in grads.items()}
                    all_grads = {n: g * inv for n, g in all_grads.items()}
                    skipped = not all(np.isfinite(g).all() for g in all_grads.values())
            if not skipped:
                weights = {n: _host(p) for n, p in kernels}
                monitor.train_step(step, lv, grads, weights, all_grads, {})
            boundary = (bi + 1) % spec.accumulate == 0 or b + batch >= n_train  # the epoch's remainder too
            if scaler is not None:
                # (between boundaries the scaled gradients accumulate; an Inf among them skips the step)
                if boundary:
                    if _amp_step(scaler, opt, trainable, recipe.clip_norm, spec.clip_before_unscale):
                        result.scaler_skipped_steps += 1
                    opt.zero_grad()
                    opt_steps += 1
                    if per_step is not None:
                        per_step.step()
            elif skipped:
                opt.zero_grad()  # the scaler skips the step and lowers its scale
            elif boundary:
                if recipe.clip_norm is not None:
                    torch.nn.utils.clip_grad_norm_(trainable, recipe.clip_norm)
                opt.step()
                opt.zero_grad()
                opt_steps += 1
                if per_step is not None:
                    per_step.step()
            result.train_before.append(train_done)
            step += 1
            train_done += 1
        last_train = step - 1
        model.eval()
        hook.set_mode(modes.EVAL)
        captured.clear()
        val_losses, outs = [], []
        with torch.no_grad(), autocast():
            for b in range(0, len(xv), EVAL_BATCH):
                xe = xv[b : b + EVAL_BATCH]
                if half:
                    xe = xe.half()
                out = forward(xe)
                lv = float(criterion(out, yv[b : b + EVAL_BATCH], xe).item())
                if task == "vae":
                    out = out[0]  # the reconstruction from the posterior mean (eval mode)
                val_losses.append(lv)
                outs.append(out)
                if classes:
                    hook.save_tensor(
                        "accuracy", np.float32(_score(task, out, yv[b : b + EVAL_BATCH])), "metrics"
                    )
                result.train_before.append(train_done)
                step += 1
        val_score = _score(task, torch.cat(outs), yv)
        vl = float(np.mean(val_losses))
        monitor.epoch_end(
            epoch,
            last_train,
            float(np.mean(losses)),
            vl if math.isfinite(vl) else float("inf"),
            val_score if math.isfinite(val_score) else 0.0,
            {k: np.concatenate(v) for k, v in captured.items()},
            sum(scores) / weights_n if math.isfinite(sum(scores)) else 0.0,
        )
        result.final_val_acc = val_score
        if plateau is not None and epoch >= warm_epochs:
            plateau.step(vl)
    hook.close()
    result.device, result.torch_version, result.precision = str(device), torch.__version__, precision
    result.scaler_final_scale = None if scaler is None else float(scaler.get_scale())
    result.labels = dict(monitor.labels)
    result.onset = monitor.onset
    result.established = monitor.established
    result.val_acc, result.train_acc = list(monitor.val_acc), list(monitor.train_acc)
    result.variants = dict(monitor.variants)
    return result


def with_family(spec: FamilySpec, family: str) -> FamilySpec:
    return replace(spec, family=family)
