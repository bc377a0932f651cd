"""Lambda entry point of the custom_rule function (the rule sandbox): the code lives in the package.

The CDK app ships this directory as the function's asset and the ``tornasole``
layer carries the package; see ``tornasole.lambda_support.handlers.custom_rule``.
"""

from tornasole.lambda_support.handlers.custom_rule import handler

__all__ = ["handler"]
