"""The serverless evaluator: DynamoDB state, exactly-once events, per-step rule evaluation.

Modules: ``state`` (the single table and its design), ``keys`` (its key layout),
``records`` (stored items <-> typed values), ``limits`` (DynamoDB / EventBridge
size limits), ``steps`` (per-step records),
``transitions`` (status changes + outbox, one transaction each), ``outbox``
(writing and publishing outbox items), ``events`` (EventBridge entries within
the size limit), ``registry`` (the one door for registering, updating,
describing and listing jobs: API, CLI, CreateTrainingJob requests and
``tornasole_job.json`` files), ``registration`` (its writes), ``job_request`` /
``job_config`` / ``job_limits`` / ``rule_checks`` (pure: a validated ``JobSpec``
from each door, rule shapes, every limit, built-in rule names and parameters), ``decisions`` (pure:
which change is next), ``runner`` (rules at one step), ``isolation`` (a rule's
run: exits, deadline, memory budget), ``failures`` (transient / data / rule),
``objects`` (key checks, capped reads), ``completion`` (end of training),
``details`` (the SageMaker-shaped dicts), ``service`` (``Evaluator``: the
handlers' entry points), ``schedule`` (the periodic check).
"""

from __future__ import annotations

__all__ = [
    "completion",
    "store",
    "decisions",
    "details",
    "failures",
    "models",
    "objects",
    "registration",
    "sandbox",
    "runner",
    "schedule",
    "service",
]
