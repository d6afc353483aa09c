"""TrainingIdentity: the artifacts bucket and the Pod Identity role training pods use, scoped to one prefix."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from conventions import iam


def training_policy(bucket_arn: str, prefix: str) -> str:
    """Read and write objects under `<prefix>/` of the artifacts bucket (checkpoints, data, benchmark results),
    list only that prefix. Nothing else: every action is named."""
    return iam.document([
        {"Sid": "ObjectsUnderPrefix", "Effect": "Allow", "Resource": f"{bucket_arn}/{prefix}/*",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]},
        {"Sid": "ListPrefix", "Effect": "Allow", "Resource": bucket_arn, "Action": ["s3:ListBucket"],
         "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}},
    ])


@dataclass
class TrainingIdentityArgs:
    cluster_name: pulumi.Input[str]
    stack: str
    """Objects live under `<stack>/` of the bucket."""
    namespace: str
    """Namespace of the training service account (exactly one)."""
    service_account: str
    """The one service account allowed to use the role."""
    force_destroy: bool = False
    """Empty the bucket on destroy (ephemeral stacks only)."""
    protect: bool = False


class TrainingIdentity(pulumi.ComponentResource):
    bucket: aws.s3.Bucket
    role: aws.iam.Role

    def __init__(self, name: str, args: TrainingIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:TrainingIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = aws.s3.Bucket(f"{name}-artifacts", force_destroy=args.force_destroy,
                                    opts=pulumi.ResourceOptions(parent=self, protect=args.protect))
        aws.s3.BucketPublicAccessBlock(f"{name}-artifacts", bucket=self.bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
                                       opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-artifacts", bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"},
                    "bucket_key_enabled": True}],
            opts=child)
        aws.s3.BucketVersioning(f"{name}-artifacts", bucket=self.bucket.id,
                                versioning_configuration={"status": "Enabled"}, opts=child)
        aws.s3.BucketOwnershipControls(f"{name}-artifacts", bucket=self.bucket.id,
                                       rule={"object_ownership": "BucketOwnerEnforced"}, opts=child)
        self.role = aws.iam.Role(f"{name}-training", assume_role_policy=iam.pod_identity_trust(),
                                 description=f"Training pods of {args.stack} (Pod Identity)", opts=child)
        aws.iam.RolePolicy(f"{name}-training", role=self.role.id,
                           policy=self.bucket.arn.apply(lambda arn: training_policy(arn, args.stack)), opts=child)
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-training", cluster_name=args.cluster_name, namespace=args.namespace,
            service_account=args.service_account, role_arn=self.role.arn, opts=child)
        self.register_outputs({"bucket": self.bucket.bucket})
