"""The session policy a sandboxed rule's credentials carry: exactly its job's trial and rule file."""

from __future__ import annotations

import json
import re

import pytest

from tornasole.evaluator.sandbox.session_policy import (
    MAX_SESSION_POLICY_CHARS,
    policy_text,
    session_name,
    session_policy,
)


def test_the_policy_grants_reads_of_the_trial_and_the_rule_file_and_nothing_else() -> None:
    policy = session_policy(["s3://trials-bkt/trials/job-1"], "s3://rules-bkt/custom-rules/r.py")
    assert policy == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadTrialAndRule",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": [
                    "arn:aws:s3:::trials-bkt/trials/job-1/*",
                    "arn:aws:s3:::rules-bkt/custom-rules/r.py",
                ],
            },
            {
                "Sid": "ListTrial0",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": "arn:aws:s3:::trials-bkt",
                "Condition": {"StringLike": {"s3:prefix": ["trials/job-1/*"]}},
            },
        ],
    }


def test_a_trial_is_a_folder_never_a_name_prefix() -> None:
    """``trials/job`` must not grant ``trials/job-2``: the grant ends in ``/*``."""
    policy = session_policy(["s3://b-1/trials/job/"], "s3://b-1/rules/r.py")
    (read, listing) = policy["Statement"]
    assert read["Resource"][0] == "arn:aws:s3:::b-1/trials/job/*"
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["trials/job/*"]


def test_other_trials_are_granted_each_and_listed_per_bucket() -> None:
    policy = session_policy(["s3://b-1/t/a", "s3://b-1/t/b", "s3://b-2/c"], "s3://b-1/rules/r.py")
    read, list1, list2 = policy["Statement"]
    assert read["Resource"][:3] == [
        "arn:aws:s3:::b-1/t/a/*",
        "arn:aws:s3:::b-1/t/b/*",
        "arn:aws:s3:::b-2/c/*",
    ]
    assert (list1["Resource"], list1["Condition"]["StringLike"]["s3:prefix"]) == (
        "arn:aws:s3:::b-1",
        ["t/a/*", "t/b/*"],
    )
    assert (list2["Resource"], list2["Condition"]["StringLike"]["s3:prefix"]) == ("arn:aws:s3:::b-2", ["c/*"])


def test_no_action_but_reads_and_listing_is_ever_granted() -> None:
    policy = session_policy(["s3://b-1/t/a"], "s3://b-1/rules/r.py")
    assert {st["Action"] for st in policy["Statement"]} == {"s3:GetObject", "s3:ListBucket"}
    assert {st["Effect"] for st in policy["Statement"]} == {"Allow"}


@pytest.mark.parametrize(
    "trial",
    [
        "s3://b-1/trials/*",  # every job
        "s3://b-1/trials/jo?",  # a one-character wildcard
        "s3://b-1/trials/${aws:username}",  # a policy variable
        "s3://b-1/trials/../other",  # a parent segment
        "s3://b-1/trials/./job",
        "s3://b-1/trials//job",  # an empty segment
        "s3://b-1/trials/job\x00",  # control characters
        "s3://b-1/trials/job\n",
        "s3://b-1/trials/a\\b",
        "s3://b-1",  # a whole bucket
        "s3://B_AD/trials/job",  # not a bucket name
        "s3://b-1/" + "k" * 1900,  # over STS's size limit
        "file:///tmp/trial",
    ],
)
def test_a_hostile_trial_is_refused_never_widened(trial: str) -> None:
    with pytest.raises(ValueError):
        session_policy([trial], "s3://b-1/rules/r.py")


@pytest.mark.parametrize(
    "source", ["s3://b-1/rules/*", "s3://b-1/rules/", "s3://b-1/rules/../trials/x.py", "s3://b-1/r?.py"]
)
def test_a_hostile_rule_source_is_refused(source: str) -> None:
    with pytest.raises(ValueError):
        session_policy(["s3://b-1/trials/job"], source)


def test_unicode_keys_are_granted_as_they_are() -> None:
    policy = session_policy(["s3://b-1/trials/jöb-日本"], "s3://b-1/rules/r.py")
    assert policy["Statement"][0]["Resource"][0] == "arn:aws:s3:::b-1/trials/jöb-日本/*"
    assert len(policy_text(policy)) <= MAX_SESSION_POLICY_CHARS
    assert json.loads(policy_text(policy)) == policy


@pytest.mark.parametrize(
    "job", ["my-job", "a" * 500, "../../etc", "job*?", "jöb 日本", "x", "", "\x00\n\u202e", "a/b:c"]
)
def test_the_session_name_is_sts_safe_and_unique_per_job(job: str) -> None:
    name = session_name(job)
    assert re.fullmatch(r"[A-Za-z0-9+=,.@_-]{2,64}", name), name
    assert session_name(job + "x") != name
