"""The families benchmark's cases: per family, healthy runs (the recipe trained to the end, longer, and
hard negatives: noisy, slow, frozen on purpose, gradient accumulation, an fp16 step the loss scaler
skipped; warm restarts, one-cycle, a wide sparse ReLU layer, dropout 0.5 where they apply) and faults
re-implemented from the published taxonomies (not copied):

* DeepFD (Cao et al., ICSE'22) mutation operators: change the learning rate (x100, x1e-4), the
  activation function (deep sigmoid stacks), the weight initialisation (x8), the loss (softmax before the
  cross-entropy), drop the input normalisation (inputs x100).
* AUTOTRAINER (Zhang et al., ICSE'21) symptoms: vanishing/exploding gradients, dying ReLU, oscillating
  loss, slow convergence (the learning-rate and initialisation mutants produce them).
* DeepDiagnosis (Wardat et al., ICSE'22) / TrainCheck (OSDI'25) silent errors: parameters that never reach
  the optimiser, a scheduler that zeroes the learning rate, training labels permuted (a data bug only an
  accuracy shows).

``CASES`` maps ``<family>/<case>`` to ``(kind, family, FamilySpec)``; ``kind`` is what the case was built to
be, the label of each run still comes from the published criteria measured while it trains (per seed).
The families of :data:`families.keras_training.KERAS_FAMILIES` run again in Keras as ``<family>_keras``
(every case but the fp16 step a loss scaler skipped, the double softmax Keras undoes and the audit cases, bar
convbn's dropout), those of
``KERAS_ONLY`` in Keras only (``amp`` with Keras's mixed-precision cases,
:func:`_keras_mixed_precision_cases`); ``SCORED_FAMILIES`` lists every family scored.
"""

from __future__ import annotations

from dataclasses import replace

from families.keras_training import KERAS_FAMILIES, KERAS_ONLY
from families.training import FAMILIES, FamilySpec

CASES: dict[str, tuple[str, str, FamilySpec]] = {}
#: Keras cannot make one chosen step overflow its loss scale (see :mod:`families.keras_training`). Nor
#: can it feed a cross-entropy probabilities as logits: Keras 3's ``SparseCategoricalCrossentropy(
#: from_logits=True)`` takes the logits back from an output a softmax produced (the tensor's
#: ``_keras_logits``, TensorFlow backend's ``_get_logits``) and only warns, so
#: ``softmax_before_cross_entropy`` trained exactly its healthy twin (loss and weights bit-identical at every
#: saved step, convbn_keras and digits_keras, both seeds: ``bench/journal/families.md``, branch noop).
_NOT_IN_KERAS = {"fp16_skipped_step", "softmax_before_cross_entropy"}
#: Hard negatives of issue 29's audit (:func:`_audit_cases`), trained in PyTorch only.
_AUDIT_CASES = {
    "warm_restarts",
    "one_cycle",
    "wide_sparse_relu",
    "heavy_dropout",
    "cosine_to_zero",
    "warmup_from_zero",
    "cosine_to_zero_small_batch",
    "warmup_from_zero_small_batch",
}

#: Families whose inputs are real-valued features an unscaled pipeline could feed raw.
_SCALED_INPUTS = {
    "cnn",
    "binary",
    "softmax",
    "regression",
    "rnn",
    "autoencoder",
    "resmlp",
    "iris",
    "conv1d",
    "convbn",
    "wine",
    "lstm",
    "digits",
    "digits_rows",
    "diabetes_huber",
    "recall_gru",
    "multilabel",
    "gru",
    "conv_ae",
    "vae",
    "mixup_cnn",
    "distill",
    "cutmix",
    "amp_cnn",
    "amp",
}
#: Families that take the deep sigmoid stack (six hidden blocks of 16 sigmoid units; in resmlp six residual
#: blocks whose sigmoid branch is 16 wide; in conv1d and convbn six sigmoid conv blocks, 16 channels then 32;
#: in vae six blocks of 16 in the encoder and six in the decoder; in conv_ae and mixup_cnn six sigmoid conv
#: blocks behind their normalisation layers; in distill six sigmoid blocks of 16 in the student; in cutmix six
#: sigmoid conv blocks, 16 channels then 32, without normalisation, and its dense layer; in amp (Keras) six
#: sigmoid conv blocks behind their BatchNormalization, 16 channels then 32).
_MLPS = {
    "binary",
    "softmax",
    "regression",
    "autoencoder",
    "resmlp",
    "iris",
    "conv1d",
    "convbn",
    "wine",
    "digits",
    "diabetes_huber",
    "multilabel",
    "conv_ae",
    "vae",
    "mixup_cnn",
    "distill",
    "cutmix",
    "amp_cnn",
    "amp",
}
_CLASSIFIERS = {
    "cnn",
    "binary",
    "softmax",
    "rnn",
    "transformer",
    "resmlp",
    "iris",
    "conv1d",
    "convbn",
    "wine",
    "lstm",
    "digits",
    "digits_rows",
    "recall_gru",
    "induction_tf",
    "multilabel",
    "gru",
    "attention",
    "mixup_cnn",
    "distill",
    "cutmix",
    "amp_cnn",
    "amp",
}
#: The classifiers with more than two classes (binary has one sigmoid output; multilabel four independent
#: ones under BCEWithLogitsLoss: no softmax to put before its loss).
_MULTICLASS = _CLASSIFIERS - {"binary", "multilabel"}
#: Families whose first layer is their only hidden layer (``models.GruNet``, ``models.LstmNet``,
#: ``models.BiGruRows``: the recurrent layer, then the output layer; ``models.StackedGru``'s first module is
#: its whole two-layer ``nn.GRU``, so freezing it leaves the head alone to train). They take no
#: ``frozen_first_on_purpose``: freezing that layer leaves a linear readout of a random recurrent net, which
#: does not learn what the recipe learns (lstm 0.246 and 0.254 at chance 0.25, its other healthy runs
#: 0.81-1.00; rnn 0.617 and 0.504, its others 0.87-0.97), so a "healthy" label on it is wrong by the
#: benchmark's own harm criterion (:func:`families.counting.harmful`). Users freeze a layer on purpose to keep
#: what it already knows (a pretrained encoder or embedding under a new head), which a network of one hidden
#: layer trained from scratch does not have. In every other family the first layer is one of two or more
#: hidden layers (the transformer's is its position embedding ``pos``, induction_tf's its token embedding
#: ``embed``), and its frozen runs end within the family's healthy range (binary_keras s0 aside: 0.922
#: against 0.953).
_ONE_HIDDEN_LAYER = {"rnn", "lstm", "digits_rows", "recall_gru", "gru"}


def _cases_of(family: str) -> dict[str, tuple[str, FamilySpec]]:
    base = FamilySpec(family)
    epochs = FAMILIES[family].epochs
    high = 50.0 if FAMILIES[family].opt == "sgd" else 100.0
    out: dict[str, tuple[str, FamilySpec]] = {
        # healthy: the recipe to the end, and trained twice as long (confident outputs)
        "healthy": ("healthy", base),
        "healthy_long": ("healthy", replace(base, epochs=2 * epochs)),
        # hard negatives
        "noisy_small_batch": ("healthy", replace(base, batch=4, lr_mult=0.5)),
        "slow_warmup": ("healthy", replace(base, lr_mult=0.3, warmup_epochs=3)),
        "frozen_first_on_purpose": ("healthy", replace(base, freeze_first=True)),
        "grad_accumulation": ("healthy", replace(base, accumulate=4)),
        "fp16_skipped_step": ("healthy", replace(base, skip_step=8)),
        # faults
        "lr_too_high": ("broken", replace(base, lr_mult=high)),
        "lr_too_low": ("broken", replace(base, lr_mult=1e-4)),
        "init_too_large": ("broken", replace(base, weight_scale=8.0)),
        "first_layer_not_optimised": ("broken", replace(base, optimizer_skips_first=True)),
        "scheduler_zeroes_lr": ("broken", replace(base, lr_zero_after_epoch=0)),
    }
    if family in _ONE_HIDDEN_LAYER:
        del out["frozen_first_on_purpose"]
    if family in _CLASSIFIERS:
        out["noisy_labels"] = ("healthy", replace(base, label_noise=0.2))
        out["labels_shuffled"] = ("broken", replace(base, shuffle_labels=True))
    if family in _MULTICLASS:
        out["softmax_before_cross_entropy"] = ("broken", replace(base, double_softmax=True))
    if family in _SCALED_INPUTS:
        out["inputs_not_normalised"] = ("broken", replace(base, input_scale=100.0))
    if family in _MLPS:
        out["deep_sigmoid"] = ("broken", replace(base, hidden_act="sigmoid", depth=6, width=16))
    out.update(_audit_cases(family, base))
    if family in _MIXED_PRECISION:
        del out["fp16_skipped_step"]  # the real GradScaler's own skipped steps stand for it
        out.update(_mixed_precision_cases(base))
    if family in _KERAS_MIXED_PRECISION:
        out.update(_keras_mixed_precision_cases(base))
    return out


#: Families trained with real automatic mixed precision (``Recipe.precision`` "fp16": autocast and a
#: GradScaler), which take :func:`_mixed_precision_cases` instead of the simulated ``fp16_skipped_step``.
_MIXED_PRECISION = {"amp_cnn"}


def _mixed_precision_cases(base: FamilySpec) -> dict[str, tuple[str, FamilySpec]]:
    """Mixed-precision runs, healthy and broken, after PyTorch's AMP documentation and users' questions:

    * ``bf16_autocast`` (healthy): autocast in bfloat16 without a scaler, the documented alternative
      (https://pytorch.org/docs/stable/amp.html: bfloat16 has fp32's exponent range, so no loss scaling);
    * ``scaler_short_growth`` (healthy): a GradScaler whose ``growth_interval`` is 25 instead of 2000, so its
      scale doubles every 25 clean steps until a step overflows, is skipped and the scale halves, all run
      long, as the dynamic scaler does over a long real run (the scaler's own documentation,
      https://pytorch.org/docs/stable/amp.html#gradient-scaling: "skips the step ... and reduces the scale");
    * ``clip_before_unscale`` (broken): ``clip_grad_norm_`` on the scaled gradients, before
      ``scaler.unscale_`` (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping: the
      gradients must be unscaled first, or the threshold meets gradients ``scale`` times too large; asked as
      "gradient clipping with torch.cuda.amp", Stack Overflow and the PyTorch forums), so every step is
      clipped to 1.0 / 65536 of the threshold;
    * ``fp16_without_scaler`` (broken): fp16 autocast and the loss's backward unscaled, the scaler left out
      (the AMP documentation's reason for gradient scaling: small gradients underflow to 0 in fp16);
    * ``half_model_adam`` (broken): the model and its inputs cast with ``.half()`` and trained by the
      recipe's AdamW in fp16 (no fp32 master weights: Adam's eps 1e-8 is 0 in fp16, the second moment of
      small gradients underflows, the update divides by 0; Stack Overflow's "Adam optimizer NaN with half
      precision" / "model.half() loss nan" questions, Micikevicius et al. 2018's fp32 master copy).
    """
    return {
        "bf16_autocast": ("healthy", replace(base, precision="bf16")),
        "scaler_short_growth": ("healthy", replace(base, scaler_growth_interval=25)),
        "clip_before_unscale": ("broken", replace(base, clip_before_unscale=True)),
        "fp16_without_scaler": ("broken", replace(base, precision="fp16_no_scaler")),
        "half_model_adam": ("broken", replace(base, precision="half")),
    }


#: Keras families trained under Keras's mixed precision (``Recipe.precision`` "mixed_float16": a dtype policy
#: and compile's LossScaleOptimizer), which take :func:`_keras_mixed_precision_cases`.
_KERAS_MIXED_PRECISION = {"amp"}


def _keras_mixed_precision_cases(base: FamilySpec) -> dict[str, tuple[str, FamilySpec]]:
    """Keras mixed-precision runs, healthy and broken, after keras.io's "Mixed precision" guide
    (https://keras.io/guides/mixed_precision/), Keras's API reference and users' questions:

    * ``bf16_policy`` (healthy): the ``mixed_bfloat16`` policy, the guide's alternative ("bfloat16 ... has the
      same dynamic range as float32 ... does not require loss scaling"): no LossScaleOptimizer;
    * ``loss_scale_short_growth`` (healthy): the user wraps the optimiser in
      ``keras.optimizers.LossScaleOptimizer(opt, dynamic_growth_steps=25)`` (its documented argument,
      https://keras.io/api/mixed_precision/loss_scale_optimizer/, default 2000), so the dynamic scale doubles
      every 25 clean steps until a step overflows, is skipped and the scale halves, all run long, as the
      default does over a long real run;
    * ``softmax_output_fp16`` (broken): the final softmax left in the ``mixed_float16`` policy, without the
      guide's ``dtype="float32"`` ("the last layer of the model ... float32 ... Otherwise ... not be
      numerically stable"; its "Building the model" section), so the probabilities the cross-entropy takes
      are float16 (classes below float16's smallest subnormal are 0);
    * ``fp16_without_loss_scale`` (broken): ``mixed_float16`` compiled with ``auto_scale_loss=False``
      (``Model.compile``'s documented switch, https://keras.io/api/models/model_training_apis/): no
      LossScaleOptimizer, the guide's reason for loss scaling (float16 gradients "underflow" to 0);
    * ``float16_policy`` (broken): the ``float16`` policy (variables and compute in float16, no float32
      master weights; ``compile`` adds no loss scaling), the guide's "not recommended" choice and users'
      "Keras float16 loss nan" / ``set_floatx('float16')`` questions (Stack Overflow; Micikevicius et al.
      2018 on the float32 master copy).
    """
    return {
        "bf16_policy": ("healthy", replace(base, precision="mixed_bfloat16")),
        "loss_scale_short_growth": ("healthy", replace(base, scaler_growth_interval=25)),
        "softmax_output_fp16": ("broken", replace(base, output_fp16=True)),
        "fp16_without_loss_scale": ("broken", replace(base, auto_scale_loss=False)),
        "float16_policy": ("broken", replace(base, precision="float16")),
    }


#: Families whose recipe anneals its learning rate (cosine), where a warm-restart or one-cycle schedule is the
#: natural alternative; the cnn's SGD with momentum is SGDR's original setting.
_RESTARTS = {
    "softmax": 5,
    "transformer": 5,
    "cnn": 3,
    "resmlp": 3,
    "wine": 10,
    "recall_gru": 4,
    "conv_ae": 5,
    "vae": 5,
    "mixup_cnn": 3,
    "distill": 5,
    "amp_cnn": 4,
}
#: (vae is left out: 8x its 128 units is two 1024x1024 layers, 2.2M parameters, some 4 GB of saved weights and
#: gradients a run; the other MLP autoencoder takes none either; distill is left out for the disk: 8x its 64
#: units is two 512-unit layers, about 0.6 GB of saved weights and gradients a run, and the benchmark's trials
#: are held to 8 GB for its two families)
_WIDE_RELU = {
    "cnn": 64,
    "binary": 256,
    "regression": 256,
    "iris": 128,
    "conv1d": 64,
    "multilabel": 512,
    "mixup_cnn": 128,
}
_DROPOUT = {
    "binary",
    "softmax",
    "regression",
    "resmlp",
    "convbn",
    "wine",
    "lstm",
    "digits",
    "diabetes_huber",
    "multilabel",
    "attention",
    "distill",
}
#: Audit cases a Keras family takes after all: convbn's ``heavy_dropout`` (a ``Dropout(0.5)`` before its
#: output layer), digits's (its two ``Dropout`` layers at 0.5) and attention's (its attention, feed-forward
#: and head dropouts at 0.5) are one setting in Keras.
_KERAS_AUDIT = {"convbn": {"heavy_dropout"}, "digits": {"heavy_dropout"}, "attention": {"heavy_dropout"}}


def _audit_cases(family: str, base: FamilySpec) -> dict[str, tuple[str, FamilySpec]]:
    """Patterns normal in some family that a rule could read as a fault (issue 29's audit):

    * ``warm_restarts``: SGDR (Loshchilov & Hutter, ICLR'17, ``CosineAnnealingWarmRestarts``), a cosine
      cycle of a few epochs then the rate back at its peak: the loss bumps at each restart;
    * ``one_cycle``: the one-cycle policy (Smith & Topin 2017, ``OneCycleLR``), a rise then an anneal;
    * ``wide_sparse_relu``: a ReLU layer 8x the recipe's width whose hidden biases start at -0.5, so most
      outputs are 0 (a sparse representation) while the layer trains;
    * ``heavy_dropout``: dropout 0.5, so the training loss (with dropout) sits above the validation loss;
    * ``cosine_to_zero``: a per-step cosine to exactly 0 (``CosineAnnealingLR(T_max=every optimiser step)``,
      ``eta_min`` 0, no warmup), so the last steps' rates are ~0 and the weights stop moving at the end;
    * ``warmup_from_zero``: a linear warmup from 0 per optimiser step over the first 2 epochs, then the
      recipe's own schedule, so the loss barely moves at first.

    The last two go to every PyTorch family: any recipe may take a schedule (today's recipes warm up and
    anneal per step whatever the model), and the recipes here either have one (cnn, softmax, regression,
    transformer, resmlp, conv1d) or train at a constant rate a user could schedule (binary, rnn,
    autoencoder, iris).
    The schedule cases save their learning rate (``scalar/lr/0``) for the learning-rate rules.
    """
    out: dict[str, tuple[str, FamilySpec]] = {}
    if family in _RESTARTS:
        out["warm_restarts"] = (
            "healthy",
            replace(base, schedule="sgdr", cycle_epochs=_RESTARTS[family], warmup_epochs=0, save_lr=True),
        )
    if family in ("softmax", "transformer"):
        out["one_cycle"] = ("healthy", replace(base, schedule="onecycle", warmup_epochs=0, save_lr=True))
    if family in _WIDE_RELU:
        out["wide_sparse_relu"] = ("healthy", replace(base, width=_WIDE_RELU[family], relu_bias=-0.5))
    if family in _DROPOUT:
        out["heavy_dropout"] = ("healthy", replace(base, dropout=0.5))
    if family in FAMILIES and family not in KERAS_ONLY:
        # each at the recipe's batch and at noisy_small_batch's batch 4 (lr x0.5): 8x the optimiser steps, as
        # convbn_keras's noisy_small_batch, so the cosine's last rates fall to ~1e-7 and the warmup lasts
        # hundreds of steps
        for suffix, spec in (("", base), ("_small_batch", replace(base, batch=4, lr_mult=0.5))):
            out["cosine_to_zero" + suffix] = (
                "healthy",
                replace(spec, schedule="cosine_step", warmup_epochs=0, save_lr=True),
            )
            out["warmup_from_zero" + suffix] = (
                "healthy",
                replace(spec, warmup_epochs=2, warmup_from_zero=True, save_lr=True),
            )
    return out


for _family in FAMILIES:
    if _family in KERAS_ONLY:
        continue
    for _name, (_kind, _spec) in _cases_of(_family).items():
        CASES[f"{_family}/{_name}"] = (_kind, _family, _spec)
for _family in KERAS_FAMILIES:
    for _name, (_kind, _spec) in _cases_of(_family).items():
        if _name not in (_NOT_IN_KERAS | _AUDIT_CASES) - _KERAS_AUDIT.get(_family, set()):
            CASES[f"{_family}_keras/{_name}"] = (_kind, f"{_family}_keras", replace(_spec, framework="keras"))

SCORED_FAMILIES: tuple[str, ...] = (
    *(f for f in FAMILIES if f not in KERAS_ONLY),
    *(f"{f}_keras" for f in KERAS_FAMILIES),
)
