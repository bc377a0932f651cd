"""Registering a job: every door's request parsed into one validated ``JobSpec``, then written.

``job_registry`` (``JobRegistry``: the one door for registering, updating, describing and listing
jobs: API, CLI, CreateTrainingJob requests and ``tornasole_job.json`` files), ``registrar`` (its
writes), ``job_request`` (a ``JobSpec`` from each door), ``job_config`` (rule configurations in
SageMaker's shapes), ``job_limits`` (every limit a registration is held to), ``rule_checks``
(built-in rule names and parameters).

Imports ``store`` and the evaluator's values; never the pipeline or ``sandbox``. ``tornasole.jobs``
and the CLI use ``job_registry``; the pipeline uses it for job files.
"""
