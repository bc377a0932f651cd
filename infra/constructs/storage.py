"""The trial bucket: where training jobs write steps, and the notifications that announce them."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from constructs import Construct

__all__ = ["NONCURRENT_VERSION_DAYS", "TrialStorage"]

#: How long an overwritten or deleted trial object's previous version is kept (the bucket is versioned).
NONCURRENT_VERSION_DAYS = 30


class TrialStorage(Construct):
    """The bucket the hooks write trials to (created, or imported by name).

    A created bucket blocks public access, refuses plain HTTP, is encrypted with S3-managed keys, is
    versioned (previous versions kept ``NONCURRENT_VERSION_DAYS``), aborts stale multipart uploads
    and, when ``trial_expiration_days`` > 0, expires old trials.
    An imported bucket keeps its own settings; the stack only adds notifications and grants.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        trial_prefix: str,
        bucket_name: str | None = None,
        existing_bucket_name: str | None = None,
        trial_expiration_days: int = 0,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id_)
        self.trial_prefix = trial_prefix
        self.imported = existing_bucket_name is not None
        if existing_bucket_name is not None:
            self.bucket: s3.IBucket = s3.Bucket.from_bucket_name(self, "TrialBucket", existing_bucket_name)
            return
        rules = [
            s3.LifecycleRule(
                id="abort-incomplete-uploads",
                abort_incomplete_multipart_upload_after=Duration.days(7),
            ),
            # versioned: an overwritten or deleted step file (what a rule found its issue in) can be
            # recovered for this long; trials are written once, so old versions are rare
            s3.LifecycleRule(
                id="expire-noncurrent-versions",
                noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
                expired_object_delete_marker=True,
            ),
        ]
        if trial_expiration_days > 0:
            rules.append(
                s3.LifecycleRule(
                    id="expire-old-trials",
                    prefix=trial_prefix or None,
                    expiration=Duration.days(trial_expiration_days),
                )
            )
        self.bucket = s3.Bucket(
            self,
            "TrialBucket",
            bucket_name=bucket_name,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            lifecycle_rules=rules,
            removal_policy=removal_policy,
        )

    def notify_on_step_files(self, fn: lambda_.IFunction, *, suffixes: tuple[str, ...]) -> None:
        """Send ObjectCreated events for keys under the trial prefix ending in one of ``suffixes`` to ``fn``.

        S3 allows one prefix and one suffix per configuration, so there is one per suffix (index and
        collections JSON, the job configuration file, the end marker); the handler checks the exact key.
        """
        for suffix in suffixes:
            self.bucket.add_event_notification(
                s3.EventType.OBJECT_CREATED,
                s3n.LambdaDestination(fn),
                s3.NotificationKeyFilter(prefix=self.trial_prefix or None, suffix=suffix),
            )
