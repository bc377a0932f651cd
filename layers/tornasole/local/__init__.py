"""Local mode: the serverless pipeline on one machine, against an embedded moto server.

Floor plan: imported by cli and demo only; imports the evaluator, lambda_support, storage, aws and below.

moto cannot run Lambda functions without Docker and its EventBridge cannot
target SNS or Lambda, so the local mode wires what moto does support (S3 ->
SQS notifications, DynamoDB streams, EventBridge -> SQS, SNS -> SQS) and its
dispatcher gives each function its own worker thread(s), as Lambda gives each
function its own concurrency, handing the real payloads to the same handler
functions the CDK stack deploys (``tornasole.lambda_support.handlers``; the
``functions/*/handler.py`` assets re-export them). ``--state-dir`` keeps the
trial bucket and the state table across restarts (``state_store``). What it
changes in moto, why, and on which moto releases: ``moto_patches``.
"""

from __future__ import annotations

from tornasole.local.mode import LocalMode, LocalSettings

__all__ = ["LocalMode", "LocalSettings"]
