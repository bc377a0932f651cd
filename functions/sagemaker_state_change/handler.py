"""Lambda entry point of the sagemaker_state_change function: the code lives in the package.

The CDK app ships this directory as the function's asset and the ``tornasole``
layer carries the package; see ``tornasole.lambda_support.handlers.sagemaker_state_change``.
"""

from tornasole.lambda_support.handlers.sagemaker_state_change import evaluator, handler

__all__ = ["handler", "evaluator"]
