"""Lambda entry point of the on_object_created function: the code lives in the package.

The CDK app ships this directory as the function's asset and the ``tornasole``
layer carries the package; see ``tornasole.lambda_support.handlers.on_object_created``.
"""

from tornasole.lambda_support.handlers.on_object_created import evaluator, handler

__all__ = ["handler", "evaluator"]
