"""TrainingNamespace: the per-stack namespace training runs in, and its guard rails.

Pod Security labels, the training service account (on EKS the Pod Identity association binds it to the training
role), a ResourceQuota sized from the workload config, a LimitRange, a PriorityClass, and NetworkPolicies:
default deny, then DNS, all traffic among the pods of the job (NCCL and gloo use ephemeral ports), metrics
scraping, and HTTPS egress for AWS APIs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from components.training_pod import METRICS_PORT
from conventions.kubernetes import pod_security_labels
from conventions.names import EFA_RESOURCE
from conventions.quantities import cpu_cores, quantity_gib

POD_IDENTITY_AGENT = "169.254.170.23/32"
"""EKS Pod Identity agent (link-local, port 80): where the AWS SDK fetches the pod's credentials."""
TRAINING_PRIORITY = 1000
"""Value of every stack's training PriorityClass (below the platform's, components/platform_priority.py)."""
DLROVER_MASTER = {"cpu": 1.0, "memory_gib": 2.0, "ephemeral_gib": 2.0}
"""Resources DLRover 0.6.1's controller gives every job master pod (master.go: initMasterContainer*)."""


@dataclass(frozen=True)
class QuotaSize:
    """The most the namespace's workload can run at once; the quota is exactly that (plus DLRover's master)."""

    num_pods: int
    gpu_resource: str
    gpus_per_pod: int
    efa_per_pod: int
    cpu: str
    memory: str
    ephemeral_storage: str
    dlrover_master: bool = False


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.3f}".rstrip("0")


def quota_hard(size: QuotaSize) -> dict[str, str]:
    pods = size.num_pods + (1 if size.dlrover_master else 0)
    master = DLROVER_MASTER if size.dlrover_master else {"cpu": 0.0, "memory_gib": 0.0, "ephemeral_gib": 0.0}
    cpu = cpu_cores(size.cpu) * size.num_pods + master["cpu"]
    memory = math.ceil(quantity_gib(size.memory) * size.num_pods + master["memory_gib"])
    ephemeral = math.ceil(quantity_gib(size.ephemeral_storage) * size.num_pods + master["ephemeral_gib"])
    hard = {
        "pods": str(pods),
        "requests.cpu": _number(cpu), "limits.cpu": _number(cpu),
        "requests.memory": f"{memory}Gi", "limits.memory": f"{memory}Gi",
        "requests.ephemeral-storage": f"{ephemeral}Gi", "limits.ephemeral-storage": f"{ephemeral}Gi",
        # Whole GPUs are always capped, also to 0 for a shared-slice stack: a job can't take a whole GPU by
        # mistake. Extended resources are quota'd under `requests.` only (no overcommit exists for them).
        "requests.nvidia.com/gpu": "0",
    }
    hard[f"requests.{size.gpu_resource}"] = str(size.gpus_per_pod * size.num_pods)
    if size.efa_per_pod:
        hard[f"requests.{EFA_RESOURCE}"] = str(size.efa_per_pod * size.num_pods)
    return dict(sorted(hard.items()))


def limit_range_spec(cpu: str, memory: str, ephemeral_storage: str) -> dict[str, Any]:
    """Defaults for containers that state nothing (e.g. DLRover's master sets its own) and a per-container
    ceiling of one training pod."""
    default = {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}
    return {"limits": [{
        "type": "Container", "default": default, "defaultRequest": dict(default),
        "max": {"cpu": cpu, "memory": memory, "ephemeral-storage": ephemeral_storage},
    }]}


def namespace_labels(enforce: Literal["restricted", "baseline"]) -> dict[str, str]:
    """Enforce `enforce`; warn and audit `restricted` always, so every gap shows."""
    return pod_security_labels(enforce, pin_latest=True)


def network_policies(*, job_label: str, job_name: str, metrics_namespace: str, num_metrics_ports: int,
                     api_server_egress: bool) -> dict[str, dict[str, Any]]:
    """NetworkPolicy specs by name suffix. Policies are additive: the default deny closes everything, each other
    policy opens one documented path."""
    job = {"matchLabels": {job_label: job_name}}
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    https_ports = [{"protocol": "TCP", "port": 443}]
    if api_server_egress:
        # DLRover's job master creates and watches the job's pods through the API server: 443 on EKS, 6443 on
        # k3s (NetworkPolicy sees the endpoint port after the Service DNAT).
        https_ports.append({"protocol": "TCP", "port": 6443})
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "dns": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": dns_ports}]},
        # torchrun's rendezvous (c10d on 29400 / the operator's 23456), NCCL and gloo (ephemeral ports), DLRover's
        # master (gRPC 50001) and its workers: every port, but only between pods of this job.
        "same-job": {"podSelector": job, "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": [{"podSelector": job}]}], "egress": [{"to": [{"podSelector": job}]}]},
        "metrics": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": metrics_namespace}}}],
            "ports": [{"protocol": "TCP", "port": METRICS_PORT,
                       "endPort": METRICS_PORT + max(num_metrics_ports, 1) - 1}],
        }]},
        # HTTPS to AWS (S3 for artifacts, SQS for queue-driven jobs, STS): regional public endpoints have no
        # stable CIDRs, so the port is the boundary. Port 80 only to the node-local Pod Identity agent.
        "aws-egress": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [
            {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": https_ports},
            {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}], "ports": [{"protocol": "TCP", "port": 80}]},
        ]},
    }


@dataclass
class TrainingNamespaceArgs:
    namespace: str
    service_account: str
    priority_class: str
    """Cluster-scoped PriorityClass name for the stack's training pods."""
    quota: QuotaSize
    job_label: str
    """Label every pod of the job carries (training_job.job_pod_label)."""
    job_name: str
    metrics_namespace: str
    pod_security: Literal["restricted", "baseline"] = "restricted"
    """Enforced Pod Security level; warn/audit are always `restricted`. `baseline` only for DLRover, whose
    controller builds the job-master pod without any securityContext (v0.6.1 master.go)."""
    dlrover_master_role: str | None = None
    """ClusterRole (from DLRover's kustomization) bound to the namespace's `default` service account, which
    DLRover's job master runs as. None = no DLRover."""
    provider: k8s.Provider | None = None
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class TrainingNamespace(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    priority_class: k8s.scheduling.v1.PriorityClass
    ready: list[pulumi.Resource]
    """Everything a job in the namespace needs to exist first."""

    def __init__(self, name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:TrainingNamespace", name, None, opts)
        base = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": args.namespace, "labels": namespace_labels(args.pod_security)},
            opts=base)
        inside = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.namespace])
        metadata = {"namespace": args.namespace}
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account", metadata={**metadata, "name": args.service_account},
            automount_service_account_token=False, opts=inside)
        self.priority_class = k8s.scheduling.v1.PriorityClass(
            f"{name}-priority", metadata={"name": args.priority_class}, value=TRAINING_PRIORITY, global_default=False,
            preemption_policy="Never",
            description="Training pods: scheduled before best-effort work, never preempting running pods.",
            opts=base)
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota", metadata={**metadata, "name": "training"}, spec={"hard": quota_hard(args.quota)},
            opts=inside)
        limits = k8s.core.v1.LimitRange(
            f"{name}-limits", metadata={**metadata, "name": "training"},
            spec=limit_range_spec(args.quota.cpu, args.quota.memory, args.quota.ephemeral_storage), opts=inside)
        policies = [
            k8s.networking.v1.NetworkPolicy(f"{name}-netpol-{suffix}", metadata={**metadata, "name": suffix},
                                            spec=spec, opts=inside)
            for suffix, spec in network_policies(
                job_label=args.job_label, job_name=args.job_name, metrics_namespace=args.metrics_namespace,
                num_metrics_ports=args.quota.gpus_per_pod,
                api_server_egress=args.dlrover_master_role is not None).items()
        ]
        self.ready = [self.namespace, self.service_account, self.priority_class, quota, limits, *policies]
        if args.dlrover_master_role is not None:
            self.ready.append(k8s.rbac.v1.RoleBinding(
                f"{name}-dlrover-master",
                metadata={**metadata, "name": "dlrover-master", "annotations": {
                    "checkov.io/skip1": "CKV_K8S_42=DLRover 0.6.1 runs its job master as the default "
                                        "ServiceAccount; this binds only DLRover's role, in this namespace"}},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                          "name": args.dlrover_master_role},
                subjects=[{"kind": "ServiceAccount", "name": "default", "namespace": args.namespace}],
                opts=inside))
        self.register_outputs({"namespace": args.namespace})
