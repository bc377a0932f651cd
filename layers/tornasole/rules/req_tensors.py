"""The tensors a rule needs at a step, fetched in bulk before ``invoke_at_step``.

Same surface as smdebug's ``RequiredTensors`` (``add``, ``fetch``,
``get_names``, ``get_tensor_steps``, ``get``, ``clear``) so custom rules port
unchanged. The difference is :meth:`RequiredTensors.fetch`: instead of reading
one value at a time it hands every (tensor, step) pair of a trial to
``trial.prefetch`` in one call, which reads them concurrently (ranged reads on
S3) and caches them; ``invoke_at_step`` then reads from the cache.

After prefetching, each requested value is checked so that a tensor that was
not saved for a requested step raises
:class:`~tornasole.exceptions.TensorUnavailableForStep` exactly as smdebug's
``fetch`` does (``invoke_rule`` then skips the step).
"""

from __future__ import annotations

from typing import Any

from tornasole.exceptions import TensorUnavailable

__all__ = ["RequiredTensors", "RequiredTensorsForTrial"]


class RequiredTensorsForTrial:
    """Required tensors of one trial: ``{name: [steps]}`` plus their Tensor objects."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._tensor_steps: dict[str, list[int]] = {}
        self._tensors: dict[str, Any] = {}

    def _add_steps(self, name: str, steps: list[int]) -> None:
        self._tensor_steps.setdefault(name, []).extend(int(s) for s in steps)
        if name not in self._tensors:
            self._tensors[name] = self.trial.tensor(name)

    def add(self, name: str, steps: list[int], should_match_regex: bool = False) -> None:
        if should_match_regex:
            for n in self.trial.tensor_names(regex=[name]):
                self._add_steps(n, steps)
            return
        if not self.trial.has_tensor(name):
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

    def fetch(self) -> None:
        if not self._tensor_steps:
            return
        wanted = sorted({s for steps in self._tensor_steps.values() for s in steps})
        self.trial.wait_for_steps(wanted)
        by_steps: dict[tuple[int, ...], list[str]] = {}
        for name, steps in self._tensor_steps.items():
            by_steps.setdefault(tuple(sorted(set(steps))), []).append(name)
        prefetch = getattr(self.trial, "prefetch", None)
        if prefetch is not None:
            for steps, names in by_steps.items():
                prefetch(names, list(steps))
        for name, steps in self._tensor_steps.items():
            t = self._tensors[name]
            for s in steps:
                t.value(s)  # cached after prefetch; raises TensorUnavailableForStep if never saved


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
        self._per_trial: dict[int, RequiredTensorsForTrial] = {
            id(base_trial): RequiredTensorsForTrial(base_trial)
        }
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
        self._for(trial).add(name, list(steps), should_match_regex=should_match_regex)

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

    def fetch(self) -> None:
        """Wait for the required steps and bulk-read every required value, per trial."""
        for rt in self._per_trial.values():
            rt.fetch()
