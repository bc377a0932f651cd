"""Helpers shared by the loss rules: which tensors are losses, and their values by mode step."""

from __future__ import annotations

from typing import Any

from tornasole.modes import EVAL, GLOBAL, TRAIN, ModeKeys

__all__ = ["loss_names", "pick_mode", "at_mode_step"]


def loss_names(rule: Any, use_losses_collection: bool = True) -> list[str]:
    """Tensors of the ``losses`` collection (if asked), ``collection_names`` and ``tensor_regex``."""
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
    if regex is not None:
        chosen.update(n for n in trial.tensor_names() if regex.match(n))
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
