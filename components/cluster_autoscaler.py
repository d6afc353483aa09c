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


PROVISIONING_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests", "provisioningrequests/status"],
     "verbs": ["watch", "list", "get", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["watch", "list", "get"]},
]
"""What the autoscaler needs to serve ProvisioningRequests: cluster-autoscaler/FAQ.md:581-597 at tag
cluster-autoscaler-1.34.1 (the ClusterRole of step 4, verbatim). The 9.52.1 chart's ClusterRole has no rule for
either (templates/clusterrole.yaml); it appends `rbac.additionalRules` (:112-114), so they go there."""

PROVISIONING_ARGS: dict[str, Any] = {
    # config/flags/flags.go:214 at cluster-autoscaler-1.34.1: off by default.
    "enable-provisioning-requests": True,
    # FAQ.md:579 step 3: the ProvisioningRequest client needs JSON (the CRD has no protobuf); flags.go:67 defaults
    # to application/vnd.kubernetes.protobuf.
    "kube-api-content-type": "application/json",
}


def autoscaler_values(cluster_name: str, region: str, provisioning_requests: bool = False) -> dict[str, Any]:
    """The chart's values; `provisioning_requests` turns on the ProvisioningRequest support Kueue's atomic
    admission check relies on (its flag, the JSON content type and the RBAC: `PROVISIONING_ARGS`,
    `PROVISIONING_RULES`)."""
    values = _base_values(cluster_name, region)
    if provisioning_requests:
        values["extraArgs"] = {**values["extraArgs"], **PROVISIONING_ARGS}
        values["rbac"] = {**values["rbac"], "additionalRules": [dict(rule) for rule in PROVISIONING_RULES]}
    return values


def _base_values(cluster_name: str, region: str) -> dict[str, Any]:
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
    provisioning_requests: bool = False
    """Serve ProvisioningRequests (Kueue's `kueue.x-k8s.io/provisioning-request` admission check,
    `kueue.atomicProvisioning`): install the vendored CRD first, then the autoscaler with the flag and RBAC."""


class ClusterAutoscaler(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-role", assume_role_policy=iam.pod_identity_trust(),
                            description="cluster-autoscaler (Pod Identity)", opts=child)
        aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=autoscaler_policy(args.cluster_name_plain),
                           opts=child)
        association = aws.eks.PodIdentityAssociation(
            f"{name}-identity", cluster_name=args.cluster_name, namespace=NAMESPACE, service_account=SERVICE_ACCOUNT,
            role_arn=role.arn, opts=child)
        chart = versions.CLUSTER_AUTOSCALER
        self.provisioning_crd: k8s.yaml.v2.ConfigFile | None = None
        if args.provisioning_requests:
            # Before the autoscaler (its ProvisioningRequest informers) and before Kueue, which sets up its
            # provisioning controller only when the API server already serves the kind (cmd/kueue/main.go:
            # 513-517 at v0.19.2, `ServerSupportsProvisioningRequest`; otherwise the check stays inactive).
            self.provisioning_crd = k8s.yaml.v2.ConfigFile(
                f"{name}-provisioning-request-crd", file=versions.PROVISIONING_REQUEST_CRD,
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider))
        self.release = pinned_release(
            f"{name}-release", chart, release_name="cluster-autoscaler", namespace=NAMESPACE,
            values=autoscaler_values(args.cluster_name_plain, args.region, args.provisioning_requests),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[
                association, *([self.provisioning_crd] if self.provisioning_crd else [])]),
        )
        self.register_outputs({})


