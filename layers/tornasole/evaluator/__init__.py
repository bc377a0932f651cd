"""The serverless evaluator: DynamoDB state, exactly-once events, per-step rule evaluation.

Floors, from the top (no module imports one above it; no import circle):

* the pipeline: ``service`` (``Evaluator``: the handlers' entry points; it wires the parts below
  to their collaborators and dispatches each S3 object to one of them), ``arrivals`` (job, index
  and collections files), ``step_evaluation`` (a step's attempts, rules and records),
  ``completion`` (end markers, SageMaker's end event, settling ended jobs), ``lifecycle`` (idle
  timeout, rewrites), ``schedule`` (the periodic check), ``decisions`` (pure: which change is
  next), ``workers`` (``num_workers`` from the collections file), ``runner`` (rules at one step)
  and ``rule_factory``;
* ``registration`` (every door's request into one validated ``JobSpec``, and its writes) and
  ``sandbox`` (where a custom rule's code runs, and what confines it), which never import each
  other;
* ``store`` (the persistence of a job's state: the single table, steps, transitions, outbox);
* the values every floor shares: ``models``, ``details`` (the SageMaker-shaped dicts),
  ``failures`` (transient / data / rule), ``objects`` (key checks, capped reads, a trial's files).

Outside the evaluator, ``lambda_support``, ``local``, ``jobs`` and ``cli`` import ``service``,
``registration.job_registry``, ``store`` and the values; the evaluator is otherwise internal.
"""

from __future__ import annotations

__all__ = [
    "arrivals",
    "completion",
    "decisions",
    "details",
    "failures",
    "lifecycle",
    "models",
    "objects",
    "registration",
    "rule_factory",
    "runner",
    "sandbox",
    "schedule",
    "service",
    "step_evaluation",
    "store",
    "workers",
]
