"""Cluster stage: the stack's AWS provider (when it creates anything in AWS) and its cluster target's cluster."""

from __future__ import annotations

import pulumi

import cluster_targets
from cluster_targets import Cluster
from components.aws_provider import AwsProvider, AwsProviderArgs
from components.platform_priority import PlatformPriority, PlatformPriorityArgs
from stack_config import StackConfig


def uses_aws(config: StackConfig) -> bool:
    """Whether the stack creates anything in AWS: an EKS cluster, or an ECR repository it pushes to."""
    return (cluster_targets.for_config(config).provisions_in_aws
            or (config.image.registry == "ecr" and config.image.build))


def build_cluster(config: StackConfig) -> Cluster:
    aws_opts = pulumi.ResourceOptions()
    if uses_aws(config):
        provider = AwsProvider("cloud", AwsProviderArgs(region=config.region, tags=config.resource_tags())).provider
        aws_opts = pulumi.ResourceOptions(providers={"aws": provider})
    cluster = cluster_targets.for_config(config).provision(config, aws_opts)
    if cluster.target.platform == "kubernetes":
        # Once per cluster, before the GPU and workload stages' controllers that name it.
        cluster.platform_priority = PlatformPriority(
            "platform-priority", PlatformPriorityArgs(provider=cluster.kubernetes)).priority_class
    return cluster
