"""The handlers' settings: :class:`~tornasole.evaluator.handler_env.HandlerEnv`, under its old path.

It lives in the evaluator, whose ``from_env`` constructors take it (a lower layer never imports a
higher one); the handlers, their tests and notebooks import it from here as well.
"""

from __future__ import annotations

from tornasole.evaluator.handler_env import ENV_RULES_FROM_TRIALS, HandlerEnv

__all__ = ["ENV_RULES_FROM_TRIALS", "HandlerEnv"]
