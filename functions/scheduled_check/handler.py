"""Lambda entry point of the scheduled_check function: the code lives in the package.

The CDK app ships this directory as the function's asset and the ``tornasole``
layer carries the package; see ``tornasole.lambda_support.handlers.scheduled_check``.
"""

from tornasole.lambda_support.handlers.scheduled_check import evaluator, handler

__all__ = ["handler", "evaluator"]
