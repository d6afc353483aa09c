"""ClusterAutoscaler: grows GPU node groups from zero when a GPU pod is pending, and shrinks them back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from catalog import versions
from components.helm import pinned_release
from conventions import iam
from conventions.kubernetes import restricted_container, restricted_pod
from conventions.names import SYSTEM_ROLE_LABEL

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"


def autoscaler_policy(cluster_name: str) -> str:
    """Least privilege for cluster-autoscaler on AWS: read-only discovery everywhere, and resizing only the
    Auto Scaling groups tagged as owned by this cluster. Every action is named; no wildcards."""
    return iam.document([
        {"Sid": "Discover", "Effect": "Allow", "Resource": "*", "Action": [
            "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
            "autoscaling:DescribeTags", "ec2:DescribeImages", "ec2:DescribeInstanceTypes",
            "ec2:DescribeLaunchTemplateVersions", "ec2:GetInstanceTypesFromInstanceRequirements",
            "eks:DescribeNodegroup",
        ]},
        {"Sid": "ResizeOwnGroups", "Effect": "Allow", "Resource": "*",
         "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
         "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}}},
    ])


def autoscaler_values(cluster_name: str, region: str) -> dict[str, Any]:
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "extraArgs": {
            "balance-similar-node-groups": True,
            "expander": "least-waste",
            "skip-nodes-with-system-pods": False,
            # GPU nodes are expensive: give them back soon after the last job ends.
            "scale-down-unneeded-time": "5m",
        },
        "nodeSelector": {SYSTEM_ROLE_LABEL: "system"},
        "securityContext": restricted_pod(user=65534),
        # The pod's securityContext already sets the seccomp profile.
        "containerSecurityContext": {key: value for key, value in restricted_container().items()
                                     if key != "seccompProfile"},
        # The chart's own suggestion (values.yaml of cluster-autoscaler 9.52.1, commented under `resources`);
        # the chart sets none, which leaves the autoscaler BestEffort (first evicted under memory pressure).
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"cpu": "100m", "memory": "300Mi"}},
    }


@dataclass
class ClusterAutoscalerArgs:
    cluster_name: pulumi.Input[str]
    cluster_name_plain: str
    region: str
    provider: k8s.Provider


class ClusterAutoscaler(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-role", assume_role_policy=iam.pod_identity_trust(),
                            description="cluster-autoscaler (Pod Identity)", opts=child)
        aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=autoscaler_policy(args.cluster_name_plain), opts=child)
        association = aws.eks.PodIdentityAssociation(
            f"{name}-identity", cluster_name=args.cluster_name, namespace=NAMESPACE, service_account=SERVICE_ACCOUNT,
            role_arn=role.arn, opts=child)
        chart = versions.CLUSTER_AUTOSCALER
        self.release = pinned_release(
            f"{name}-release", chart, release_name="cluster-autoscaler", namespace=NAMESPACE,
            values=autoscaler_values(args.cluster_name_plain, args.region),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[association]),
        )
        self.register_outputs({})


