"""TrainingOperators: the controllers the stack's workloads need, from their vendored copies at pinned versions.

- Kubeflow training-operator v1 (PyTorchJob), the kustomize render of overlay `standalone` (namespace `kubeflow`);
- DLRover's ElasticJob controller, the kustomize render of `manifests/bases` with the newer CRD of the same tag
  (namespace `dlrover`; vendor/SOURCES.md);
- KEDA, Helm chart (namespace `keda`).

Only the operators a stack's workloads use are installed. Resource names contain `training-operator`,
`dlrover` and `keda`: the policy pack finds each custom resource's operator by that marker, and every custom
resource depends on its operator so that destroy deletes it while its controller can still remove finalizers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from catalog import versions
from components.helm import pinned_release
from conventions import iam
from conventions.kubernetes import restricted_pod
from conventions.names import SYSTEM_ROLE_LABEL

KEDA_NAMESPACE = "keda"
KEDA_OPERATOR_SERVICE_ACCOUNT = "keda-operator"
"""The chart's default operator service account (values `serviceAccount.operator.name`)."""


KEDA_UID = 65532


def keda_values() -> dict[str, Any]:
    """KEDA chart values: the operator on system nodes, restricted security context (the chart's defaults
    already drop ALL and run as non-root; they are stated here so a chart bump can't loosen them)."""
    return {
        "nodeSelector": {SYSTEM_ROLE_LABEL: "system"},
        # The uid/gid each KEDA image already runs as: kedacore/keda v2.20.2 Dockerfile, Dockerfile.adapter and
        # Dockerfile.webhooks end in `FROM gcr.io/distroless/static:nonroot` + `USER 65532:65532`. Stating it
        # pins a high uid (Checkov CKV_K8S_40) without changing who the processes run as.
        "podSecurityContext": {pod: restricted_pod(user=KEDA_UID, group=KEDA_UID)
                               for pod in ("operator", "metricServer", "webhooks")},
        "serviceAccount": {"operator": {"create": True, "name": KEDA_OPERATOR_SERVICE_ACCOUNT}},
    }


@dataclass
class TrainingOperatorsArgs:
    provider: k8s.Provider
    training_operator: bool = False
    """Install Kubeflow training-operator v1 (PyTorchJob). Default false."""
    dlrover: bool = False
    """Install DLRover's ElasticJob controller. Default false."""
    keda: bool = False
    """Install KEDA (ScaledObject / ScaledJob). Default false."""
    system_node_selector: dict[str, str] | None = None
    """Where KEDA runs; None on clusters without a labelled system group (edge)."""
    keda_identity_cluster: pulumi.Input[str] | None = None
    """EKS cluster name: give KEDA's operator a Pod Identity role (permissions are attached by whoever needs them,
    e.g. KedaScaling for its queue). None = no AWS identity (edge)."""
    aws_opts: pulumi.ResourceOptions | None = None


class TrainingOperators(pulumi.ComponentResource):
    training_operator: k8s.yaml.v2.ConfigFile | None = None
    dlrover: k8s.yaml.v2.ConfigFile | None = None
    keda: k8s.helm.v3.Release | None = None
    keda_operator_role: aws.iam.Role | None = None

    def __init__(self, name: str, args: TrainingOperatorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:TrainingOperators", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        if args.training_operator:
            # The vendored render, applied object by object by the provider (nothing fetched at deploy time; the
            # offline plan records the file and renders its objects into cluster.yaml).
            self.training_operator = k8s.yaml.v2.ConfigFile(
                f"{name}-training-operator", file=versions.TRAINING_OPERATOR_MANIFEST, opts=child)
        if args.dlrover:
            self.dlrover = k8s.yaml.v2.ConfigFile(f"{name}-dlrover", file=versions.DLROVER_MANIFEST, opts=child)
        if args.keda:
            values = keda_values()
            if args.system_node_selector is not None:
                values["nodeSelector"] = dict(args.system_node_selector)
            else:
                values.pop("nodeSelector")
            keda_after: list[pulumi.Resource] = []
            if args.keda_identity_cluster is not None:
                aws_child = pulumi.ResourceOptions.merge(args.aws_opts or pulumi.ResourceOptions(),
                                                         pulumi.ResourceOptions(parent=self))
                self.keda_operator_role = aws.iam.Role(
                    f"{name}-keda-operator", assume_role_policy=iam.pod_identity_trust(),
                    description="KEDA operator (Pod Identity); policies attached per scaler", opts=aws_child)
                # The Pod Identity webhook injects credentials when a pod is created, so the association must
                # exist before the operator's pod does.
                keda_after.append(aws.eks.PodIdentityAssociation(
                    f"{name}-keda-operator", cluster_name=args.keda_identity_cluster, namespace=KEDA_NAMESPACE,
                    service_account=KEDA_OPERATOR_SERVICE_ACCOUNT, role_arn=self.keda_operator_role.arn,
                    opts=aws_child))
            chart = versions.KEDA
            self.keda = pinned_release(
                f"{name}-keda", chart, release_name="keda", namespace=KEDA_NAMESPACE, create_namespace=True,
                values=values, opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=keda_after))
        self.register_outputs({})

    @property
    def installed(self) -> dict[str, pulumi.Resource]:
        """Operator name (`training-operator`, `dlrover`, `keda`) → what its custom resources depend on."""
        found = {"training-operator": self.training_operator, "dlrover": self.dlrover, "keda": self.keda}
        return {name: resource for name, resource in found.items() if resource is not None}
