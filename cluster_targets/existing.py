"""`existing`: adopt a cluster someone else runs (an edge site's k3s), reached by a kubeconfig secret or a context.

Nothing is provisioned for the cluster; what can't be discovered offline about its GPU nodes (GPUs per node, GPU
model, architecture, the labels that select them) comes from config.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pulumi

from cluster_targets.base import Cluster, ClusterTarget
from components.cluster_access import ClusterAccess, ClusterAccessArgs
from conventions.names import GPU_TAINT_KEY, NODE_GROUP_LABEL, NVIDIA_RUNTIME_HANDLER
from stack_config import Problem, StackConfig
from stack_config.storage_kinds import STORAGE_KINDS, kinds_on
from stack_config.targets import IN_AWS, TargetTraits


class ExistingTarget(ClusterTarget):
    mode: ClassVar[str] = "existing"
    traits: ClassVar[TargetTraits] = TargetTraits(
        platform="kubernetes", air_gap=True,
        # k3s keeps runc as containerd's default (k3s-io/k3s#8700): GPU pods need the nvidia RuntimeClass.
        node_default_runtime="runc",
        # k3s ships RuntimeClass `nvidia` with handler `nvidia` (k3s-io/k3s manifests/runtimes.yaml), the site
        # precondition of docs/edge.md, "Edge on k3s / Jetson".
        site_runtime_classes=((NVIDIA_RUNTIME_HANDLER, NVIDIA_RUNTIME_HANDLER),))

    def node_selector(self, config: StackConfig, group: str) -> dict[str, str]:
        return dict(config.gpu_node_groups[group].node_selector) or {NODE_GROUP_LABEL: group}

    def tolerations(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        # The GPU taint, if the site's nodes carry it (whatever its value).
        return [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]

    def check(self, config: StackConfig) -> Iterator[Problem]:
        cluster = config.cluster
        if config.kubeconfig is None and cluster.context is None:
            yield Problem("kubeconfig", "mode 'existing' needs the cluster's kubeconfig: run `pulumi config set "
                                        "--secret kubeconfig \"$(cat kubeconfig.yaml)\"` (or set cluster.context)")
        if config.kubeconfig is not None and cluster.context is not None:
            yield Problem("cluster.context", "set either the kubeconfig secret or cluster.context, not both")
        for name, group in config.gpu_node_groups.items():
            path = f"gpuNodeGroups.{name}"
            for key, value in (("gpusPerNode", group.gpus_per_node), ("gpuModel", group.gpu_model),
                               ("architecture", group.architecture)):
                if value is None:
                    yield Problem(f"{path}.{key}", "is required for an existing cluster (it can't be discovered "
                                                   "offline)")
        kind = config.storage.kind
        if kind not in kinds_on(self.mode):  # stack_config/storage_kinds.py
            if STORAGE_KINDS[kind].targets == IN_AWS:
                yield Problem("storage.kind", f"{kind!r} is created in AWS next to an EKS cluster; an existing cluster "
                                              "uses kind 'existing' with its StorageClass")
            else:
                yield Problem("storage.kind", f"{kind!r} is for a Docker Swarm; on Kubernetes shared storage comes "
                                              "through a StorageClass (efs, fsx-lustre, existing), and Pod Security "
                                              "'restricted' forbids nfs and hostPath volumes")

    def provision(self, config: StackConfig, aws_opts: pulumi.ResourceOptions) -> Cluster:
        access = ClusterAccess("cluster", ClusterAccessArgs(
            kubeconfig=pulumi.Output.secret(config.kubeconfig.get_secret_value()) if config.kubeconfig else None,
            context=config.cluster.context,
        ))
        return Cluster(target=self, provider=access.provider, aws_opts=aws_opts,
                       exports={"clusterName": config.cluster_name})
