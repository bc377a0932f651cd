"""The serverless evaluator: DynamoDB state, exactly-once events, per-step rule evaluation.

Modules: ``state`` (the single table and its design), ``steps`` (per-step
records), ``transitions`` (status changes + outbox, one transaction each),
``registration`` (jobs and rule updates),
``decisions`` (pure: which change is next), ``runner`` (rules at one step),
``events`` (outbox publisher), ``details`` (the SageMaker-shaped dicts),
``service`` (``Evaluator``: the handlers' entry points), ``schedule`` (the periodic check).
"""

from __future__ import annotations

__all__ = [
    "decisions",
    "details",
    "events",
    "models",
    "registration",
    "runner",
    "schedule",
    "service",
    "state",
    "steps",
    "transitions",
]
