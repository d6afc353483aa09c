"""TrainingNamespace: the per-stack namespace training runs in, and its guard rails.

Pod Security labels, the training service account (on EKS the Pod Identity association binds it to the training
role), a ResourceQuota sized from the workload config, a LimitRange, a PriorityClass, and NetworkPolicies:
default deny, then DNS, all traffic among the pods of the job (NCCL and gloo use ephemeral ports), metrics
scraping, and HTTPS egress for AWS APIs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from components.kueue import quantity
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


def quota_hard(sizes: Sequence[QuotaSize]) -> dict[str, str]:
    """The namespace's quota: exactly what all its workloads run at once at their largest (plus one DLRover
    master per ElasticJob)."""
    pods = cpu = memory = ephemeral = 0.0
    extended: dict[str, int] = {}
    for size in sizes:
        master = DLROVER_MASTER if size.dlrover_master else {"cpu": 0.0, "memory_gib": 0.0, "ephemeral_gib": 0.0}
        pods += size.num_pods + (1 if size.dlrover_master else 0)
        cpu += cpu_cores(size.cpu) * size.num_pods + master["cpu"]
        memory += quantity_gib(size.memory) * size.num_pods + master["memory_gib"]
        ephemeral += quantity_gib(size.ephemeral_storage) * size.num_pods + master["ephemeral_gib"]
        extended[size.gpu_resource] = extended.get(size.gpu_resource, 0) + size.gpus_per_pod * size.num_pods
        if size.efa_per_pod:
            extended[EFA_RESOURCE] = extended.get(EFA_RESOURCE, 0) + size.efa_per_pod * size.num_pods
    hard = {
        "pods": str(int(pods)),
        "requests.cpu": _number(cpu), "limits.cpu": _number(cpu),
        "requests.memory": f"{math.ceil(memory)}Gi", "limits.memory": f"{math.ceil(memory)}Gi",
        "requests.ephemeral-storage": f"{math.ceil(ephemeral)}Gi",
        "limits.ephemeral-storage": f"{math.ceil(ephemeral)}Gi",
        # Whole GPUs are always capped, also to 0 for a shared-slice stack: a job can't take a whole GPU by
        # mistake. Extended resources are quota'd under `requests.` only (no overcommit exists for them).
        "requests.nvidia.com/gpu": "0",
    }
    hard.update({f"requests.{resource}": str(amount) for resource, amount in extended.items()})
    return dict(sorted(hard.items()))


def capacity_quota_hard(capacity: Mapping[str, float], max_pods: int) -> dict[str, str]:
    """The namespace's quota when Kueue admits its jobs: what the GPU node groups can provide (the ClusterQueue's
    nominal quota, `stack_config.derived.group_quota` summed), so that the queue, not this backstop, decides
    which job runs, and a job submitted outside the stack (the documented submit path) fits as the stack's own
    do. `capacity` is resource → amount (cpu cores, bytes, counts)."""
    hard = {"pods": str(max_pods), "requests.nvidia.com/gpu": "0"}
    for resource, amount in capacity.items():
        value = quantity(resource, amount)  # written exactly as the ClusterQueue's nominal quota
        hard[f"requests.{resource}"] = value
        if resource in ("cpu", "memory", "ephemeral-storage"):
            hard[f"limits.{resource}"] = value
    return dict(sorted(hard.items()))


def limit_range_spec(sizes: Sequence[QuotaSize]) -> dict[str, Any]:
    """Defaults for containers that state nothing and a per-container ceiling: the largest training pod, or DLRover's
    job master where a workload has one (its controller sizes it itself, DLROVER_MASTER), whichever is larger — a
    ceiling below the master's would make the API server refuse the master pod of a small ElasticJob."""
    parsers = (("cpu", "cpu", cpu_cores), ("memory", "memory", quantity_gib),
               ("ephemeral-storage", "ephemeral_storage", quantity_gib))
    master = {"cpu": _number(DLROVER_MASTER["cpu"]), "memory": f"{_number(DLROVER_MASTER['memory_gib'])}Gi",
              "ephemeral-storage": f"{_number(DLROVER_MASTER['ephemeral_gib'])}Gi"}
    masters = any(size.dlrover_master for size in sizes)
    largest = {key: max([getattr(size, attr) for size in sizes] + ([master[key]] if masters else []), key=parse)
               for key, attr, parse in parsers}
    # A default above `max` makes the API server refuse the LimitRange ("default value 1 is greater than max value
    # 900m": k8s.io/kubernetes@v1.34.12 pkg/apis/core/validation/validation.go:7294 and :7306), as the real
    # control plane of `make cluster-test` showed for a stack whose largest pod asks for 900m: cap it at `max`.
    default = {key: min(value, largest[key], key=parse) for (key, _, parse), value in
               zip(parsers, ("1", "2Gi", "2Gi"))}
    return {"limits": [{
        "type": "Container", "default": default, "defaultRequest": dict(default), "max": largest,
    }]}


def namespace_labels(enforce: Literal["restricted", "baseline"]) -> dict[str, str]:
    """Enforce `enforce`; warn and audit `restricted` always, so every gap shows."""
    return pod_security_labels(enforce, pin_latest=True)


def same_job_policy(job_label: str, job_name: str) -> dict[str, Any]:
    """torchrun's rendezvous (c10d on 29400 / the operator's 23456), NCCL and gloo (ephemeral ports), DLRover's
    master (gRPC 50001) and its workers: every port, but only between pods of one job (`job_label` is the label
    its controller puts on each of them)."""
    job = {"matchLabels": {job_label: job_name}}
    return {"podSelector": job, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": job}]}], "egress": [{"to": [{"podSelector": job}]}]}


def network_policies(*, jobs: Sequence[tuple[str, str]], metrics_namespace: str, num_metrics_ports: int,
                     api_server_egress: bool) -> dict[str, dict[str, Any]]:
    """NetworkPolicy specs by name suffix. Policies are additive: the default deny closes everything, each other
    policy opens one documented path. `jobs`: (pod label, job name) of every workload."""
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
        **{f"same-job-{name}": same_job_policy(label, name) for label, name in jobs},
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
    quotas: list[QuotaSize]
    """One per workload: the LimitRange's ceiling, and the quota unless `capacity` is set."""
    jobs: list[tuple[str, str]]
    """(label every pod of the job carries, job name) per workload: each gets its own same-job policy."""
    metrics_namespace: str
    capacity: dict[str, float] | None = None
    """With Kueue: the node groups' capacity (resource → amount), which the quota then equals."""
    max_pods: int = 0
    """With `capacity`: the most training pods the node groups hold (the `pods` quota)."""
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
            f"{name}-quota", metadata={**metadata, "name": "training"},
            spec={"hard": quota_hard(args.quotas) if args.capacity is None
                  else capacity_quota_hard(args.capacity, args.max_pods)},
            opts=inside)
        limits = k8s.core.v1.LimitRange(
            f"{name}-limits", metadata={**metadata, "name": "training"}, spec=limit_range_spec(args.quotas),
            opts=inside)
        policies = [
            k8s.networking.v1.NetworkPolicy(f"{name}-netpol-{suffix}", metadata={**metadata, "name": suffix},
                                            spec=spec, opts=inside)
            for suffix, spec in network_policies(
                jobs=args.jobs, metrics_namespace=args.metrics_namespace,
                num_metrics_ports=max(quota.gpus_per_pod for quota in args.quotas),
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
