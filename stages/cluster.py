"""Cluster stage: the stack's AWS provider (when it creates anything in AWS) and its cluster target's cluster."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

import cluster_targets
from cluster_targets import Cluster
from components.aws_provider import AwsProvider, AwsProviderArgs
from components.platform_priority import PlatformPriority, PlatformPriorityArgs
from stack_config import ConfigError, Problem, StackConfig
from stages.config import under_mocks


def uses_aws(config: StackConfig) -> bool:
    """Whether the stack creates anything in AWS: an EKS cluster, or an ECR repository it pushes to."""
    return (cluster_targets.for_config(config).provisions_in_aws
            or (config.image.registry == "ecr" and config.image.build))


def caller_access_problem(config: StackConfig, caller_role: str) -> Problem | None:
    """Why the role running the program can't manage this EKS stack's cluster (no access entry), or None."""
    cluster = config.cluster
    if caller_role == cluster.deployer_role_arn or caller_role in cluster.admin_role_arns:
        return None
    if caller_role in cluster.preview_role_arns:
        if pulumi.runtime.is_dry_run():
            return None
        return Problem("cluster.previewRoleArns", f"the program runs as {caller_role!r}, a preview role: its access "
                                                  "entry reads, never writes, so `up` and `destroy` would fail on "
                                                  "the first in-cluster object; run them as cluster.deployerRoleArn "
                                                  "or a role in cluster.adminRoleArns")
    return Problem("cluster.adminRoleArns", f"the program runs as {caller_role!r}, which is neither "
                                            f"cluster.deployerRoleArn ({cluster.deployer_role_arn!r}) nor listed "
                                            "here: it has no EKS access entry, so every in-cluster resource (and a "
                                            "later destroy) would get 401 from the API; run as the deployer role, "
                                            "or add this role to cluster.adminRoleArns")


def caller_role(provider: pulumi.ProviderResource) -> str:
    """The IAM role behind the program's (assumed-role) session, as EKS access entries name it."""
    identity = aws.get_caller_identity(opts=pulumi.InvokeOptions(provider=provider))
    return aws.iam.get_session_context(arn=identity.arn, opts=pulumi.InvokeOptions(provider=provider)).issuer_arn


def build_cluster(config: StackConfig) -> Cluster:
    target = cluster_targets.for_config(config)
    # What only the cloud account knows (zone offerings, quotas), asked before anything is registered.
    target.preflight(config)
    aws_opts = pulumi.ResourceOptions()
    if uses_aws(config):
        provider = AwsProvider("cloud", AwsProviderArgs(region=config.region, tags=config.resource_tags())).provider
        aws_opts = pulumi.ResourceOptions(providers={"aws": provider})
        if cluster_targets.for_config(config).provisions_in_aws and not under_mocks():
            # Before the first cloud resource (only the provider is registered): a caller without an access entry
            # would create the cluster and then time out on every in-cluster resource.
            problem = caller_access_problem(config, caller_role(provider))
            if problem is not None:
                raise ConfigError(config.stack, [problem])
    cluster = target.provision(config, aws_opts)
    if cluster.target.platform == "kubernetes":
        # Once per cluster, before the GPU and workload stages' controllers that name it.
        cluster.platform_priority = PlatformPriority(
            "platform-priority", PlatformPriorityArgs(provider=cluster.kubernetes)).priority_class
    return cluster
