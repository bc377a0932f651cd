"""How the evaluator builds a rule object and sizes the trial window it reads.

Split from ``runner`` (which runs the rules of a step): a built-in rule is built by name, a custom
rule loaded from ``source_s3_uri`` (through an injected storage in the rule sandbox, so its source
and other trials are read with the job-scoped credentials only); ``history_window`` and
``leading_window`` turn a rule's declarations into how many earlier saved steps its trial holds.
"""

from __future__ import annotations

import logging
from typing import Any

from tornasole.evaluator.models import MAX_HISTORY_STEPS, RuleConfig
from tornasole.format import paths

__all__ = [
    "DEFAULT_HISTORY_STEPS",
    "MAX_HISTORY_STEPS",
    "default_rule_factory",
    "history_window",
    "leading_window",
]

log = logging.getLogger(__name__)

# The window of a rule that does not declare ``history_steps()`` (custom rules).
DEFAULT_HISTORY_STEPS = 10


def _other_trials(config: RuleConfig, step: int, storage: Any = None) -> list[Any] | None:
    """Other trials hold only the same step's index files (found by a one-step prefix listing)."""
    if not config.other_trials:
        return None
    from tornasole.storage import get_storage, join
    from tornasole.trials import create_trial

    trials = []
    for i, path in enumerate(config.other_trials):
        store = storage or get_storage(path)
        trial = create_trial(path, name=f"other_trial_{i}", listing=False, storage=store)
        prefix = join(path, paths.index_prefix_for_step(step) + paths.step_str(step) + "_")
        keys = [k for k in store.list(prefix) if paths.parse_index_file_name(k)]
        trial.load_index_files(keys)
        trials.append(trial)
    return trials


def default_rule_factory(config: RuleConfig, trial: Any, step: int = 0, storage: Any = None) -> Any:
    """Build the rule object: a built-in by name, or a custom rule loaded from ``source_s3_uri``.

    ``storage``: read the rule source and other trials through it (the rule sandbox's job-scoped
    storage) instead of the process-wide storage of their scheme.
    """
    others = _other_trials(config, step, storage)
    if config.source_s3_uri:
        from tornasole.rules.loader import create_custom_rule

        return create_custom_rule(
            config.source_s3_uri,
            config.rule_to_invoke,
            trial,
            others,
            source_storage=storage,
            **config.parameters,
        )
    from tornasole.rules import create_rule

    return create_rule(config.rule_to_invoke, trial, other_trials=others, **config.parameters)


def history_window(rule: Any, cap: int = MAX_HISTORY_STEPS, default: int = DEFAULT_HISTORY_STEPS) -> int:
    """Earlier saved steps ``rule`` needs in its trial: its ``history_steps()``, at most ``cap``.

    ``None`` (the rule accumulates over the whole run) gets ``cap``; a rule without the method
    (a custom rule written for smdebug) gets ``default``.
    """
    declared = getattr(rule, "history_steps", None)
    try:
        wanted = declared() if callable(declared) else default
    except Exception:  # noqa: BLE001 - a broken custom declaration only sizes the window; the rule still runs
        log.warning("%s.history_steps() raised; using %d", type(rule).__name__, default, exc_info=True)
        wanted = default
    return cap if wanted is None else max(0, min(int(wanted), cap))


def leading_window(rule: Any, cap: int = MAX_HISTORY_STEPS) -> int:
    """The run's first saved steps ``rule`` reads besides its recent window (``leading_steps()``, at most
    ``cap``; 0 for rules that do not declare it). Why: a rule comparing with the start of training
    (LossNotDecreasing ``reference=first``, PoorWeightInitialization's first steps) must see the same first
    steps at step 5,000 as ``invoke_rule`` over the whole run does, not the last ``cap`` steps."""
    declared = getattr(rule, "leading_steps", None)
    try:
        wanted = declared() if callable(declared) else 0
    except Exception:  # noqa: BLE001 - a broken custom declaration only sizes the window; the rule still runs
        log.warning("%s.leading_steps() raised; using 0", type(rule).__name__, exc_info=True)
        wanted = 0
    return max(0, min(int(wanted), cap))
