"""Alias: Powertools objects live in the layer (``tornasole.lambda_support.observability``)."""

from __future__ import annotations

from tornasole.lambda_support.observability import logger, metrics, tracer

__all__ = ["logger", "metrics", "tracer"]
