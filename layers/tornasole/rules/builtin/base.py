"""Shared machinery of the built-in rules: declared parameters and tensor selection.

A built-in rule subclasses :class:`BuiltinRule`, declares ``PARAMETERS`` (see
:mod:`tornasole.rules.params`) and, for ``rule_configs``, the ``COLLECTIONS``
``smdebug_rulesconfig`` bundles with it. Its constructor takes the trial(s) and
keyword parameters, as strings or typed values; parsed values become
attributes (``self.threshold``). ``check_params`` validates combinations.

Choices common to all built-ins:

* Tensors are selected among those saved **at the evaluated step** (a tensor
  saved on another schedule is simply not looked at), as the union of
  ``collection_names`` and ``tensor_regex`` when a rule has both.
* ``tensor_regex`` matches from the start of the name (``re.match``, as
  smdebug's ``include_regex`` does); use ``.*`` to match anywhere.
* A rule that finds nothing to inspect at a step returns False (no issue):
  a rule must not fire on absent data.
* Rules that compare steps compare like with like: a step is compared only
  with earlier steps of **its own mode** (TRAIN with TRAIN, EVAL with EVAL;
  a trial saved without modes is all GLOBAL), and "the first N steps" or
  "N steps apart" are counted in that mode (:meth:`BuiltinRule.same_mode_steps`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any, ClassVar

import numpy as np

from tornasole.exceptions import RuleParameterError, TensorUnavailableForStep
from tornasole.modes import GLOBAL, ModeKeys
from tornasole.rules.params import Param, parse_params
from tornasole.rules.rule import Rule

__all__ = ["BuiltinRule", "COLLECTION_NAMES", "TENSOR_REGEX", "as_float"]


def as_float(value: Any) -> float:
    """A reduction as a Python float. Why not ``float(value)``: a reduction saved from numpy (smdebug's core
    writer, our numpy hook) is shape ``(1,)``, and numpy 2.4 refuses ``float()`` of a 1-d array."""
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


COLLECTION_NAMES = Param("collection_names", "str_list", None, "collections whose tensors are inspected")
TENSOR_REGEX = Param("tensor_regex", "regex", None, "regex (re.match) selecting tensors to inspect")


class BuiltinRule(Rule):
    """Base of the rules in :mod:`tornasole.rules.generic` (parameters declared in ``PARAMETERS``)."""

    PARAMETERS: ClassVar[tuple[Param, ...]] = ()
    #: Whether evaluating a step reads earlier steps (the serverless evaluator then loads their index
    #: files too); rules that only look at the evaluated step set False.
    READS_EARLIER_STEPS: ClassVar[bool] = True
    #: ``(collection name, {parameter: value})`` pairs written into ``rule_configs`` dicts.
    COLLECTIONS: ClassVar[tuple[tuple[str, dict[str, str]], ...]] = ()
    #: What a firing most likely means and what to try (one line each; ``{tensor}`` is replaced by the
    #: tensor the finding names). Every built-in rule defines both; :meth:`advice` may refine them.
    LIKELY_CAUSE: ClassVar[str] = ""
    SUGGESTED_FIX: ClassVar[str] = ""

    def __init__(self, base_trial: Any, other_trials: Any = None, **params: Any) -> None:
        parsed = parse_params(type(self), params)
        action = parsed.pop("action_json", None)
        super().__init__(base_trial, other_trials=other_trials, action_json=action)
        self.params = parsed
        for key, value in parsed.items():
            setattr(self, key, value)
        self.check_params()

    def check_params(self) -> None:
        """Validate combinations of parameters; raise :meth:`param_error`."""

    def advice(self) -> tuple[str, str] | None:
        """``(LIKELY_CAUSE, SUGGESTED_FIX)`` with ``{tensor}`` filled from the finding (None when unset)."""
        if not self.LIKELY_CAUSE:
            return None
        tensor = str(getattr(self, "_values", {}).get("tensor") or "the layer")
        return self.LIKELY_CAUSE.replace("{tensor}", tensor), self.SUGGESTED_FIX.replace("{tensor}", tensor)

    def history_steps(self) -> int | None:
        """How many saved steps before the evaluated one this rule reads at most (None: all).

        For the serverless evaluator, which loads only that many earlier index files for a step.
        Rules accumulating over the whole run (ClassImbalance, CheckInputImages) say None.
        """
        return 0 if not self.READS_EARLIER_STEPS else None

    def leading_steps(self) -> int:
        """How many of the run's first saved steps this rule reads besides ``history_steps()`` (0: none).

        For the serverless evaluator, which otherwise loads only the recent window: a rule comparing
        with the start of training says how many first steps that comparison needs.
        """
        return 0

    def param_error(self, parameter: str | None, message: str) -> RuleParameterError:
        return RuleParameterError(self.rule_name, parameter, message)

    def require_at_least(self, minimum: float, *names: str) -> None:
        """Raise :meth:`param_error` for the first of ``names`` below ``minimum`` (an unset one passes)."""
        for name in names:
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise self.param_error(name, f"value {value} must be >= {minimum}")

    def require_selection(self) -> None:
        """For rules where one of ``collection_names``/``tensor_regex`` is required."""
        if not self.params.get("collection_names") and self.params.get("tensor_regex") is None:
            raise self.param_error("collection_names", "one of collection_names or tensor_regex is required")

    # -- tensor access ---------------------------------------------------------------------------
    def names_at(
        self,
        step: int,
        collections: list[str] | None = None,
        regex: re.Pattern | None = None,
        trial: Any = None,
        mode: ModeKeys = GLOBAL,
    ) -> list[str]:
        """Tensors saved at ``step`` that are in ``collections`` or match ``regex`` (union)."""
        trial = self.base_trial if trial is None else trial
        names = trial.tensor_names(step=step, mode=mode)
        chosen: set[str] = set()
        for coll in collections or ():
            try:
                chosen.update(trial.tensor_names(step=step, mode=mode, collection=coll))
            except (KeyError, ValueError):
                continue  # a collection the trial does not have selects nothing
        if regex is not None:
            chosen.update(n for n in names if regex.match(n))
        return sorted(chosen)

    def selected(self, step: int, trial: Any = None) -> list[str]:
        """Names chosen by this rule's ``collection_names``/``tensor_regex`` at ``step``."""
        return self.names_at(
            step, self.params.get("collection_names"), self.params.get("tensor_regex"), trial
        )

    def frozen_on_purpose(self, step: int, weights: list[str]) -> set[str]:
        """Of ``weights``, those saved at ``step`` with no gradient while the step saved other gradients.

        Why: a layer frozen on purpose (``requires_grad=False``, fine-tuning) gets no gradient, so a hook
        saves none for it; a layer that should learn and does not (its parameters never reach the optimiser,
        a zero learning rate) still gets one. A weight matches a gradient whose name ends with ``/<weight>``
        or equals it past the first ``/`` (``gradient/Net_fc1.weight``, ``gradients/fc1.weight`` for
        ``weights/fc1.weight``), a ``Grad`` suffix aside (the Keras hook's ``gradients/net/fc1/kernelGrad``
        for ``weights/net/fc1/kernel``). A step that saved no gradient says nothing: the empty set.
        """
        if not self.names_at(step, ["gradients"]):
            return set()
        found = self.gradients_of(step, weights)
        return {w for w in weights if w not in found}

    def gradients_of(self, step: int, weights: list[str]) -> dict[str, str]:
        """Each of ``weights`` with a gradient saved at ``step`` -> that gradient's name, matched as
        :meth:`frozen_on_purpose` says; the step's gradient names are read once (a rule asks this every
        saved step, of every weight of the model)."""
        pairs = [
            (g[: -len("Grad")] if g.endswith("Grad") else g, g) for g in self.names_at(step, ["gradients"])
        ]
        by_tail: dict[str, str] = {}
        for bare, g in pairs:
            if "/" in bare:
                by_tail.setdefault(bare.split("/", 1)[1], g)
        found: dict[str, str] = {}
        for w in weights:
            g = next((g for bare, g in pairs if bare.endswith("/" + w)), None) or by_tail.get(
                w.split("/", 1)[-1]
            )
            if g is not None:
                found[w] = g
        return found

    def step_mode(self, step: int, trial: Any = None) -> ModeKeys:
        """Mode of global ``step`` (GLOBAL when the trial does not know it)."""
        trial = self.base_trial if trial is None else trial
        mode = trial.mode(step)
        return GLOBAL if mode is None else mode

    def same_mode_steps(
        self, name: str, step: int, mode: ModeKeys | None = None, trial: Any = None
    ) -> list[int]:
        """Global steps <= ``step`` at which ``name`` was saved in ``mode`` (default: ``step``'s mode).

        Why: weights saved at an EVAL step equal those of the next TRAIN step, and a validation
        loss is not comparable with a training batch loss; rules that look back use this so they
        only ever compare a step with earlier steps of the same mode.
        """
        trial = self.base_trial if trial is None else trial
        mode = self.step_mode(step, trial) if mode is None else mode
        tensor = trial.tensor(name)
        if mode == GLOBAL:
            saved = tensor.steps()
            return saved[: bisect_right(saved, step)]
        mapped = self._global_steps_of_mode(trial, name, mode, tensor.steps(mode=mode))
        return mapped[: bisect_right(mapped, step)]

    def _global_steps_of_mode(
        self, trial: Any, name: str, mode: ModeKeys, mode_steps: list[int]
    ) -> list[int]:
        """The sorted global steps of ``mode_steps``, mapped once per new mode step.

        Why a cache: rules that look back call :meth:`same_mode_steps` at every step for every tensor,
        and mapping the whole history each time made a rule over a 10,000-step trial quadratic (1.6 M
        ``global_step`` lookups at 1,000 steps). Mode steps only ever grow at the end; anything else
        (a refresh that inserted one earlier, a step not yet mapped) maps the whole list again.
        """
        cache: dict[tuple[int, str, ModeKeys], tuple[int, int, list[int]]] = self.__dict__.setdefault(
            "_mode_steps_cache", {}
        )
        key = (id(trial), name, mode)
        count, last, mapped = cache.get(key, (0, -1, []))
        if count > len(mode_steps) or (count and mode_steps[count - 1] != last):
            count, mapped = 0, []
        if count == len(mode_steps):
            return mapped
        fresh = [trial.global_step(mode, ms) for ms in mode_steps[count:]]
        if None in fresh:
            cache.pop(key, None)
            return sorted(g for g in mapped + fresh if g is not None)
        mapped.extend(fresh)  # the cache's own list: callers get slices of it
        if len(mapped) > len(fresh) and min(fresh) < mapped[-len(fresh) - 1]:
            mapped.sort()
        else:
            mapped[-len(fresh) :] = sorted(fresh)
        cache[key] = (len(mode_steps), mode_steps[-1], mapped)
        return mapped

    def value(self, name: str, step: int, trial: Any = None, mode: ModeKeys = GLOBAL) -> np.ndarray | None:
        """The value of ``name`` at ``step``, or None when only reductions (or nothing) were saved."""
        trial = self.base_trial if trial is None else trial
        try:
            return np.asarray(trial.tensor(name).value(step, mode=mode))
        except TensorUnavailableForStep:
            return None

    def scalar(self, name: str, step: int, trial: Any = None, mode: ModeKeys = GLOBAL) -> float | None:
        """Mean of the value (a loss saved as a 1-element tensor gives that element)."""
        v = self.value(name, step, trial, mode)
        if v is None or v.size == 0:
            return None
        return float(np.mean(v))
