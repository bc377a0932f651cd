"""The serverless evaluator: DynamoDB state, exactly-once events, per-step rule evaluation.

Modules: ``state`` (the single table and its design), ``steps`` (per-step
records), ``transitions`` (status changes + outbox, one transaction each),
``registry`` (the one door for registering, updating, describing and listing
jobs: API, CLI, CreateTrainingJob requests and ``tornasole_job.json`` files),
``registration`` (its writes: one transaction per registration or rule update),
``job_request`` / ``job_config`` / ``job_limits`` / ``rule_checks`` (pure: a
validated ``JobSpec`` from each door, rule shapes, every limit, built-in rule
names and parameters),
``decisions`` (pure: which change is next), ``runner`` (rules at one step),
``events`` (outbox publisher), ``details`` (the SageMaker-shaped dicts),
``service`` (``Evaluator``: the handlers' entry points), ``schedule`` (the periodic check).
"""

from __future__ import annotations

__all__ = [
    "decisions",
    "details",
    "events",
    "job_config",
    "job_limits",
    "job_request",
    "models",
    "registration",
    "registry",
    "rule_checks",
    "runner",
    "schedule",
    "service",
    "state",
    "steps",
    "transitions",
]
