"""Lambda entry point of the publish_events function: the code lives in the package.

The CDK app ships this directory as the function's asset and the ``tornasole``
layer carries the package; see ``tornasole.lambda_support.handlers.publish_events``.
"""

from tornasole.lambda_support.handlers.publish_events import handler, publisher

__all__ = ["handler", "publisher"]
