"""The job-scoped credentials a sandboxed custom rule gets: an STS session policy and session name.

Why a session policy: the reader role may read every trial (and the rule prefix); the credentials
handed to one job's rule must read only that job's trial and its rule file. STS grants the
intersection of the role's permissions and the inline session policy passed to ``AssumeRole``, so
the policy built here is the whole of what the rule can do: ``s3:GetObject`` on the trial's keys and
on the one rule source object, ``s3:ListBucket`` with an ``s3:prefix`` condition on the trial's
prefix. No write, no DynamoDB, no events, no other prefix.

Everything that goes into the document comes from a job registration, so it is hostile: IAM
resource ARNs treat ``*`` and ``?`` as wildcards and ``${...}`` as a policy variable, so a key
holding any of them (or a ``..`` segment, or a control character) would widen the grant; such
paths are refused, never escaped. Unicode is allowed (S3 keys are UTF-8, IAM matches them as is).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from tornasole.storage.paths import split_s3

__all__ = [
    "MAX_SESSION_POLICY_CHARS",
    "SESSION_SECONDS",
    "policy_text",
    "session_name",
    "session_policy",
]

#: STS: "the plaintext of inline session policies can't exceed 2,048 characters".
MAX_SESSION_POLICY_CHARS = 2048
#: The shortest duration STS grants: the credentials live for one rule run at one step.
SESSION_SECONDS = 900
#: STS's ``RoleSessionName``: ``[\w+=,.@-]{2,64}`` (ASCII word characters).
_SESSION_CHARS = re.compile(r"[^A-Za-z0-9+=,.@_-]")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# IAM wildcards and policy variables, and what would make a key mean another folder.
_FORBIDDEN = ("*", "?", "$", "\\")


def session_name(job: str) -> str:
    """A ``RoleSessionName`` naming ``job`` (CloudTrail shows it): its STS-safe characters, at most
    64, with a hash of the full name so two jobs never share one.

    Examples
    --------
    >>> session_name("my-job")
    'tornasole-my-job-69bd8cf1'
    >>> len(session_name("é" * 500)) <= 64
    True
    """
    digest = hashlib.sha256(job.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    safe = _SESSION_CHARS.sub("-", job)[:44]
    return f"tornasole-{safe}-{digest}"


def _checked(path: str, what: str) -> tuple[str, str]:
    bucket, key = split_s3(path)
    if not _BUCKET.match(bucket):
        raise ValueError(f"{what} {path!r}: {bucket!r} is not an S3 bucket name")
    if any(c in key for c in _FORBIDDEN) or any(not c.isprintable() for c in key):
        raise ValueError(
            f"{what} {path!r} holds a character IAM would read as a wildcard or variable "
            f"({' '.join(_FORBIDDEN)}) or a control character"
        )
    parts = key.split("/")
    if any(p in (".", "..") for p in parts) or "" in parts[:-1] or key.startswith("/"):
        raise ValueError(f"{what} {path!r} has an empty, '.' or '..' path segment")
    return bucket, key


def session_policy(trial_paths: Iterable[str], rule_source: str) -> dict[str, Any]:
    """The session policy letting a rule read ``trial_paths`` (its job's trial, then any other trials
    the rule compares with) and the rule file ``rule_source``, and nothing else.

    Raises ``ValueError`` naming the path when one cannot be granted exactly (see the module doc),
    or when the policy would exceed STS's size limit.

    Examples
    --------
    >>> p = session_policy(["s3://b-1/trials/job"], "s3://b-1/rules/r.py")
    >>> [s["Resource"] for s in p["Statement"]]
    [['arn:aws:s3:::b-1/trials/job/*', 'arn:aws:s3:::b-1/rules/r.py'], 'arn:aws:s3:::b-1']
    >>> p["Statement"][1]["Condition"]
    {'StringLike': {'s3:prefix': ['trials/job/*']}}
    """
    trials = tuple(trial_paths)
    objects: list[str] = []
    listing: dict[str, list[str]] = {}
    for path in trials:
        bucket, key = _checked(path.rstrip("/"), "trial")
        if not key:
            raise ValueError(f"trial {path!r} is a whole bucket; a rule may read only its job's prefix")
        folder = key + "/"
        objects.append(f"arn:aws:s3:::{bucket}/{folder}*")
        listing.setdefault(bucket, []).append(f"{folder}*")
    bucket, key = _checked(rule_source, "rule source")
    if not key or key.endswith("/"):
        raise ValueError(f"rule source {rule_source!r} is not an object")
    objects.append(f"arn:aws:s3:::{bucket}/{key}")
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadTrialAndRule", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects}
    ]
    for i, (name, prefixes) in enumerate(sorted(listing.items())):
        statements.append(
            {
                "Sid": f"ListTrial{i}",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{name}",
                "Condition": {"StringLike": {"s3:prefix": prefixes}},
            }
        )
    policy = {"Version": "2012-10-17", "Statement": statements}
    size = len(policy_text(policy))
    if size > MAX_SESSION_POLICY_CHARS:
        raise ValueError(
            f"the session policy for trials {list(trials)} is {size} characters; "
            f"STS takes at most {MAX_SESSION_POLICY_CHARS}"
        )
    return policy


def policy_text(policy: dict[str, Any]) -> str:
    """The policy as STS receives it (compact JSON, non-ASCII kept: STS counts characters)."""
    return json.dumps(policy, separators=(",", ":"), ensure_ascii=False)
