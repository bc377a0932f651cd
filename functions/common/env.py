"""Alias: the handlers' environment model lives in the layer (``tornasole.lambda_support.env``)."""

from __future__ import annotations

from tornasole.lambda_support.env import HandlerEnv

__all__ = ["HandlerEnv"]
