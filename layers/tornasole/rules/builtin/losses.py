"""Helpers shared by the loss rules: which tensors are losses, what kind, what they were fed, and their
values by mode step.

Two hooks name a loss and its inputs differently:

* PyTorch (a registered loss module, as smdebug's PyTorch hook names it): the loss ``<Loss>_output_<i>``
  in the ``losses`` collection, its prediction ``<Loss>_input_0`` and target ``<Loss>_input_1``; the
  module's class says the kind (``BCELoss``, ``CrossEntropyLoss``, ``MSELoss`` ...);
* Keras (:mod:`tornasole.keras.loss_tap`): the batch's own compiled loss ``batch_loss/<Kind>`` (``Kind``
  the Keras loss class, ``_from_logits`` appended when it takes logits), its prediction ``predictions``
  and target ``labels`` (smdebug's names for a Keras model's outputs). Keras's ``loss`` is a running
  mean over the epoch and names no kind: it is no :class:`LossFeed`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tornasole.modes import EVAL, GLOBAL, TRAIN, ModeKeys

__all__ = [
    "loss_names",
    "pick_mode",
    "at_mode_step",
    "BINARY_CROSS_ENTROPY",
    "CROSS_ENTROPY",
    "KERAS_BATCH_LOSS",
    "LossFeed",
    "feed_batches",
    "loss_feeds",
]

#: A Keras hook's batch loss: ``batch_loss/<Kind>`` (see the module docstring).
KERAS_BATCH_LOSS = re.compile(r"^batch_loss/(?P<kind>\w+?)(?P<logits>_from_logits)?$")
#: Binary cross-entropy losses (chance level ln 2): PyTorch's modules, Keras's classes.
BINARY_CROSS_ENTROPY = re.compile(
    r"(^|.*[/_])BCE(WithLogits)?Loss(_output_0)?$|^batch_loss/BinaryCrossentropy(_from_logits)?$"
)
#: Categorical cross-entropy losses (chance level ln C): PyTorch's modules, Keras's classes.
CROSS_ENTROPY = re.compile(
    r"(^|.*[/_])(CrossEntropy|NLL)Loss(_output_0)?$|^batch_loss/(Sparse)?CategoricalCrossentropy(_from_logits)?$"
)
_TORCH_OUTPUT = re.compile(r"^(?P<loss>.+)_output_\d+$")
_KERAS_PREDICTION, _KERAS_TARGET = "predictions", "labels"


@dataclass(frozen=True)
class LossFeed:
    """A loss tensor and the names of what it was fed (saved or not: check before reading).

    Attributes
    ----------
    loss, prediction, target : str
        Tensor names: the loss, its first input (the model's output) and its second (the target).
    probabilities : bool
        The loss takes probabilities: a Keras cross-entropy without ``from_logits`` (Keras's idiom, a
        softmax or sigmoid output). PyTorch's cross-entropy losses take logits (log-probabilities for
        ``NLLLoss``).
    class_axis : int
        The class axis of a batched prediction: 1 in PyTorch, -1 (channels last) in Keras.
    same_rank : bool
        The loss brings a target one trailing axis of size 1 short of the prediction to its rank (Keras's
        losses: a ``(N,)`` target against a ``(N, 1)`` output); PyTorch's broadcast it instead.
    """

    loss: str
    prediction: str
    target: str
    probabilities: bool = False
    class_axis: int = 1
    same_rank: bool = False


def loss_feed(name: str) -> LossFeed | None:
    """The :class:`LossFeed` of loss tensor ``name``, or None when its name tells no inputs.

    Examples
    --------
    >>> loss_feed("CrossEntropyLoss_output_0").prediction
    'CrossEntropyLoss_input_0'
    >>> f = loss_feed("batch_loss/CategoricalCrossentropy")
    >>> f.prediction, f.target, f.probabilities, f.class_axis
    ('predictions', 'labels', True, -1)
    >>> loss_feed("batch_loss/CategoricalCrossentropy_from_logits").probabilities
    False
    """
    keras = KERAS_BATCH_LOSS.match(name)
    if keras is not None:
        probabilities = "Crossentropy" in keras.group("kind") and not keras.group("logits")
        return LossFeed(name, _KERAS_PREDICTION, _KERAS_TARGET, probabilities, -1, same_rank=True)
    torch = _TORCH_OUTPUT.match(name)
    if torch is not None:
        return LossFeed(name, f"{torch.group('loss')}_input_0", f"{torch.group('loss')}_input_1")
    return None


def loss_feeds(rule: Any, step: int, loss_regex: re.Pattern | None = None) -> list[LossFeed]:
    """The losses saved at ``step`` whose name ``loss_regex`` matches (``re.match``; None: any), with what
    they were fed: PyTorch's ``<Loss>_output_<i>`` of the ``losses`` collection, Keras's
    ``batch_loss/<Kind>`` of any collection (the hook saves it where a collection asks for it)."""
    out: list[LossFeed] = []
    for name in rule.names_at(step, ["losses"], regex=KERAS_BATCH_LOSS):
        feed = loss_feed(name)
        if feed is None or (loss_regex is not None and not loss_regex.match(name)) or feed in out:
            continue
        out.append(feed)
    return out


def feed_batches(rule: Any, feed: LossFeed, steps: list[int]) -> Iterator[tuple[Any, Any]]:
    """``(prediction, target)`` of ``feed`` at each of ``steps`` at which both were saved, as ``rule`` reads
    them (``rule.value``: None when a value is missing)."""
    for s in steps:
        p, t = rule.value(feed.prediction, s), rule.value(feed.target, s)
        if p is not None and t is not None:
            yield p, t


def loss_names(rule: Any, use_losses_collection: bool = True, batch_losses: bool = False) -> list[str]:
    """Tensors of the ``losses`` collection (if asked), ``collection_names`` and ``tensor_regex``; with
    ``batch_losses`` also the Keras hook's ``batch_loss/<Kind>`` (any collection), for rules that must
    know a loss's kind."""
    trial = rule.base_trial
    chosen: set[str] = set()
    colls = list(rule.params.get("collection_names") or [])
    if use_losses_collection:
        colls.append("losses")
    for c in colls:
        try:
            chosen.update(trial.tensor_names(collection=c))
        except (KeyError, ValueError):
            continue
    regex = rule.params.get("tensor_regex")
    if regex is not None or batch_losses:
        for n in trial.tensor_names():
            if (regex is not None and regex.match(n)) or (batch_losses and KERAS_BATCH_LOSS.match(n)):
                chosen.add(n)
    return sorted(chosen)


def pick_mode(tensor: Any, mode: ModeKeys | None) -> ModeKeys | None:
    """``mode`` if given, else the first of EVAL, TRAIN, GLOBAL in which ``tensor`` has steps."""
    if mode is not None:
        return mode
    for m in (EVAL, TRAIN, GLOBAL):
        if tensor.steps(mode=m):
            return m
    return None


def at_mode_step(trial: Any, step: int, mode: ModeKeys) -> int | None:
    """The mode step of global ``step`` if it belongs to ``mode`` (GLOBAL: the step itself)."""
    if mode == GLOBAL:
        return step
    if trial.mode(step) != mode:
        return None
    return trial.mode_step(step)
