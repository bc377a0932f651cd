"""Powertools Logger / Metrics / Tracer shared by the evaluator's handlers.

The library below logs with ``logging.getLogger(__name__)`` and structured
``extra`` keys (``job``, ``rule``, ``step``); ``copy_config_to_registered_loggers``
routes those records through the Powertools JSON formatter, so one CloudWatch
Logs filter (``{ ($.job = "my-job") && ($.rule = "VanishingGradient") }``, see
``tornasole.jobs.logs``) shows one rule's evaluation log for one job. Creating
these objects makes no AWS call.
"""

from __future__ import annotations

import logging
import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import utils as logging_utils

from tornasole.stack_spec import DEFAULT_SPEC

__all__ = ["logger", "metrics", "tracer"]

_SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SPEC.service_name

logger = Logger(service=_SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_SPEC.metrics_namespace)
tracer = Tracer(service=_SERVICE)

# The library's parent logger gets Powertools' handler; every ``tornasole.*`` logger (also those created
# later, e.g. ``tornasole.rules.<Rule>``) propagates to it, so its records are JSON with their extra keys.
logging.getLogger("tornasole")
logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"tornasole"})
