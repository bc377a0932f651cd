"""The tensors a rule needs at a step, fetched in bulk before ``invoke_at_step``.

Same surface as smdebug's ``RequiredTensors`` (``add``, ``fetch``,
``get_names``, ``get_tensor_steps``, ``get``, ``clear``) so custom rules port
unchanged. The difference is :meth:`RequiredTensors.fetch`, which smdebug
implements as one blocking read per value:

* on S3 (``s3://`` trials) every (tensor, step) pair of a trial goes to
  ``trial.prefetch`` in one call, which reads them concurrently (ranged reads)
  and caches them; ``invoke_at_step`` then reads from the cache, and each value
  is checked so that a tensor not saved at a requested step raises
  :class:`~tornasole.exceptions.TensorUnavailableForStep` exactly as smdebug's
  ``fetch`` does (``invoke_rule`` then skips the step);
* on a local trial a read costs no round trip (the file is in the page cache)
  and decoding values the rule never looks at is the dominant cost (the
  documentation's ``VanishingGradientRule`` requires every gradient but reads
  one), so ``fetch`` only checks, from the index, that every required tensor
  was saved at its steps (same ``TensorUnavailableForStep``) and values are
  read on first use. A tensor saved only as reductions passes this check;
  ``value()`` on it raises ``TensorUnavailableForStep`` inside ``invoke_at_step``,
  which skips the step just the same.
"""

from __future__ import annotations

from typing import Any

from tornasole.exceptions import TensorUnavailable, TensorUnavailableForStep

__all__ = ["RequiredTensors", "RequiredTensorsForTrial", "is_remote"]


def is_remote(trial: Any) -> bool:
    """Whether reads of ``trial`` cost a network round trip (``s3://``): then bulk prefetching pays."""
    return str(getattr(trial, "path", "")).startswith("s3://")


class RequiredTensorsForTrial:
    """Required tensors of one trial: ``{name: [steps]}`` plus their Tensor objects."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._tensor_steps: dict[str, list[int]] = {}
        self._tensors: dict[str, Any] = {}
        self._available: set[int] = set()
        self._known: dict[str, Any] = {}  # Tensor handles seen so far (a saved tensor never disappears)
        self.prefetched: set[tuple[str, int]] = set()  # pairs a look-ahead already asked the trial for

    def _add_steps(self, name: str, steps: list[int]) -> None:
        have = self._tensor_steps.get(name)
        if have is not None:
            have.extend(steps)
            return
        self._tensor_steps[name] = list(steps)
        t = self._known.get(name)
        if t is None:
            t = self._known[name] = self.trial.tensor(name)
        self._tensors[name] = t

    def add(self, name: str, steps: list[int], should_match_regex: bool = False) -> None:
        if should_match_regex:
            for n in self.trial.tensor_names(regex=[name]):
                self._add_steps(n, steps)
            return
        if name not in self._known and not self.trial.has_tensor(name):
            raise TensorUnavailable(name)
        self._add_steps(name, steps)

    def get_tensor_steps(self, name: str) -> list[int]:
        return self._tensor_steps[name]

    def get_names(self):
        return self._tensor_steps.keys()

    def get(self):
        return self._tensors.values()

    def clear(self) -> None:
        self._tensor_steps.clear()
        self._tensors.clear()
        self._available.clear()

    def steps_by_name(self) -> dict[str, list[int]]:
        return self._tensor_steps

    def fetch(self) -> None:
        if not self._tensor_steps:
            return
        wanted = sorted({s for steps in self._tensor_steps.values() for s in steps} - self._available)
        if wanted:
            self.trial.wait_for_steps(wanted)
        prefetch = getattr(self.trial, "prefetch", None)
        if prefetch is None or not is_remote(self.trial):
            self._check_saved()
            return
        by_steps: dict[tuple[int, ...], list[str]] = {}
        for name, steps in self._tensor_steps.items():
            todo = tuple(sorted({s for s in steps if (name, s) not in self.prefetched}))
            if todo:
                by_steps.setdefault(todo, []).append(name)
        for steps, names in by_steps.items():
            prefetch(names, list(steps))
        for name, steps in self._tensor_steps.items():
            t = self._tensors[name]
            for s in steps:
                t.value(s)  # cached after prefetch; raises TensorUnavailableForStep if never saved

    def _check_saved(self) -> None:
        """Local trial: raise as smdebug's fetch would for a tensor not saved at a step, read nothing."""
        saved: dict[int, set[str]] = {}
        for name, steps in self._tensor_steps.items():
            for s in steps:
                if s not in saved:
                    saved[s] = set(self.trial.tensor_names(step=s))
                if name not in saved[s]:
                    raise TensorUnavailableForStep(name, s)


class RequiredTensors:
    """What a rule declares in ``set_required_tensors``; fetched by :meth:`fetch` before ``invoke_at_step``.

    Parameters
    ----------
    base_trial : Trial
    other_trials : list of Trial, optional

    Examples
    --------
    Inside a rule::

        def set_required_tensors(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                self.req_tensors.add(name, steps=[step])

        def invoke_at_step(self, step):
            for tensor in self.req_tensors.get():
                ...
    """

    def __init__(self, base_trial: Any, other_trials: list | None = None) -> None:
        self.base_trial = base_trial
        self._base = RequiredTensorsForTrial(base_trial)
        self._per_trial: dict[int, RequiredTensorsForTrial] = {id(base_trial): self._base}
        for t in other_trials or ():
            self._per_trial.setdefault(id(t), RequiredTensorsForTrial(t))

    def _for(self, trial: Any) -> RequiredTensorsForTrial:
        trial = self.base_trial if trial is None else trial
        try:
            return self._per_trial[id(trial)]
        except KeyError:
            raise ValueError(
                f"trial {getattr(trial, 'name', trial)!r} is neither the rule's base trial nor one of its "
                "other_trials"
            ) from None

    def add(self, name: str, steps: list[int], trial: Any = None, should_match_regex: bool = False) -> None:
        """Require tensor ``name`` (or every tensor matching it as a regex) at ``steps``.

        Raises :class:`~tornasole.exceptions.TensorUnavailable` if the trial has no such tensor.
        """
        rt = self._base if trial is None else self._for(trial)
        rt.add(name, steps, should_match_regex=should_match_regex)

    def get_tensor_steps(self, name: str, trial: Any = None) -> list[int]:
        """The steps required for ``name``."""
        return self._for(trial).get_tensor_steps(name)

    def get_names(self, trial: Any = None):
        """Names of the required tensors of ``trial`` (base trial by default)."""
        return self._for(trial).get_names()

    def get(self, trial: Any = None):
        """The required Tensor objects of ``trial`` (base trial by default)."""
        return self._for(trial).get()

    def clear(self) -> None:
        """Forget everything (done before each step)."""
        for rt in self._per_trial.values():
            rt.clear()

    def mark_available(self, trial: Any, steps: list[int]) -> None:
        """Steps of ``trial`` already waited for in this evaluation: :meth:`fetch` does not wait again."""
        self._for(trial)._available.update(steps)

    def plan(self) -> list[tuple[Any, dict[str, list[int]]]]:
        """``(trial, {name: steps})`` for each trial with something required (used for look-ahead)."""
        return [(rt.trial, rt.steps_by_name()) for rt in self._per_trial.values() if rt.steps_by_name()]

    def set_prefetched(self, trial: Any, pairs: set[tuple[str, int]]) -> None:
        """Record the (name, step) pairs a look-ahead prefetched (:meth:`fetch` skips asking again)."""
        self._for(trial).prefetched = pairs

    def fetch(self) -> None:
        """Wait for the required steps and bulk-read every required value, per trial."""
        for rt in self._per_trial.values():
            rt.fetch()
