"""`swarm`: a Docker Swarm of GPU servers (a small site: a few servers joined with `docker swarm init`), managed
through one manager over SSH.

Nothing is provisioned for the swarm itself; the stack needs from each GPU server what it can't check from here
(see docs/swarm.md, "Docker Swarm sites"): NVIDIA's container runtime as the daemon's default runtime, the server's GPUs
advertised as generic resources (`node-generic-resources`), and the node labels the placement uses. Every training
service waits to converge (`cluster.swarm.convergeTimeoutSeconds`), so a server that lacks them fails `pulumi up`
with the pending task named instead of hanging.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import ClassVar

import pulumi

from cluster_targets.base import Cluster, ClusterTarget
from components.swarm_access import SwarmAccess, SwarmAccessArgs
from stack_config import Problem, StackConfig
from stack_config.derived import configured_pods
from stack_config.storage_kinds import kinds_on
from stack_config.targets import TargetTraits

SSH_HOST = re.compile(r"^ssh://[A-Za-z0-9._-]+@[A-Za-z0-9.-]+(:\d{1,5})?$")
SECRET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SWARM_NODE_GROUP_LABEL = "gtp.dev.node-group"
"""The node label a group's servers carry by default. Not Kubernetes' `gtp.dev/node-group`: Swarm refuses a
placement constraint whose label key holds a `/` (measured on Engine 20.10.24 by `make swarm-test`: service create
answers `key 'node.labels.gtp.dev/node-group' is invalid`), although `docker node update --label-add` accepts it."""
SWARM_LABEL_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
"""Label keys a placement constraint accepts (letters, digits, '.', '_', '-'): no '/'."""


class SwarmTarget(ClusterTarget):
    mode: ClassVar[str] = "swarm"
    traits: ClassVar[TargetTraits] = TargetTraits(platform="swarm", air_gap=True, capacity_unit="server")

    def node_selector(self, config: StackConfig, group: str) -> dict[str, str]:
        """Swarm node labels of the group's servers (`docker node update --label-add <key>=<value> <node>`)."""
        return dict(config.gpu_node_groups[group].node_selector) or {SWARM_NODE_GROUP_LABEL: group}

    def tolerations(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        return []  # Swarm has no taints; placement constraints alone pick the servers

    def task_secrets(self, config: StackConfig) -> dict[str, str]:
        return swarm_secrets(config)

    def check(self, config: StackConfig) -> Iterator[Problem]:
        cluster = config.cluster
        if cluster.swarm is None or not cluster.swarm.manager_host:
            yield Problem("cluster.swarm.managerHost", "is required for mode 'swarm': the manager's Docker endpoint "
                                                       "over SSH, like 'ssh://deploy@gpu-manager.site.internal'")
        elif not SSH_HOST.match(cluster.swarm.manager_host):
            yield Problem("cluster.swarm.managerHost", f"{cluster.swarm.manager_host!r} is not an SSH endpoint like "
                          "'ssh://<user>@<host>[:<port>]' (the Docker API is only reached over SSH)")
        if config.kubeconfig is not None:
            yield Problem("kubeconfig", "is set, but mode 'swarm' reaches its manager over SSH: remove the secret")
        yield from self._check_gpus(config)
        yield from self._check_storage(config)
        yield from self._check_secrets(config)
        for name, workload in config.workloads.items():
            if workload.autoscaling.mode != "none":
                yield Problem(f"workloads.{name}.autoscaling.mode", f"{workload.autoscaling.mode!r} needs KEDA on "
                              "Kubernetes; a Swarm job has a fixed set of servers: use none")
        metrics = config.gpu.metrics
        enabled = [key for key, on in (("dcgmExporter", metrics.dcgm_exporter), ("prometheus", metrics.prometheus),
                                       ("grafana", metrics.grafana)) if on]
        if enabled:
            yield Problem("gpu.metrics", f"{', '.join(enabled)} run on Kubernetes; this platform installs no metrics "
                                         "on a Swarm: set them false (run dcgm-exporter on the servers yourself)")

    def _check_gpus(self, config: StackConfig) -> Iterator[Problem]:
        for name, group in config.gpu_node_groups.items():
            path = f"gpuNodeGroups.{name}"
            for key, value in (("gpusPerNode", group.gpus_per_node), ("gpuModel", group.gpu_model),
                               ("architecture", group.architecture)):
                if value is None:
                    yield Problem(f"{path}.{key}", "is required on a Swarm (the servers' GPUs can't be discovered "
                                                   "offline)")
            for key in group.node_selector:
                if not SWARM_LABEL_KEY.match(key):
                    yield Problem(f"{path}.nodeSelector.{key}", f"{key!r} can't be a Swarm placement constraint's "
                                  "label key (the manager refuses keys with '/' and other characters; allowed: "
                                  "letters, digits, '.', '_', '-'), like 'site.gpu'")
        for name, workload in config.workloads.items():
            path = f"workloads.{name}"
            group = config.gpu_node_groups.get(workload.node_group or "")
            if group is None:
                continue
            if workload.gpu_resource != "whole":
                yield Problem(f"{path}.gpuResource", "'shared': a Swarm task reserves all GPUs of its server; use "
                                                     "whole")
            if workload.gpus_per_node is not None and group.gpus_per_node is not None \
                    and workload.gpus_per_node != group.gpus_per_node:
                yield Problem(f"{path}.gpusPerNode", f"{workload.gpus_per_node}, but a '{workload.node_group}' "
                              f"server has {group.gpus_per_node} GPUs: one task per server uses all of them (omit "
                              "gpusPerNode)")
            tasks = configured_pods(workload)
            if tasks > group.max_size:
                key = f"{path}.elastic.maxNodes" if workload.elastic else f"{path}.numNodes"
                yield Problem(key, f"{tasks} tasks, but node group '{workload.node_group}' has {group.max_size} GPU "
                                   f"server(s) (maxSize) and a server runs one task: use at most {group.max_size}")

    def _check_storage(self, config: StackConfig) -> Iterator[Problem]:
        storage = config.storage
        if storage.kind not in kinds_on(self.mode):  # stack_config/storage_kinds.py
            yield Problem("storage.kind", f"{storage.kind!r} is not available on a Swarm; allowed: "
                                          f"{', '.join(kinds_on(self.mode))}")
        if storage.kind == "nfs":
            if not storage.nfs_server:
                yield Problem("storage.nfsServer", "is required for kind 'nfs': the NFS server every GPU server mounts")
            if not storage.nfs_path or not storage.nfs_path.startswith("/"):
                yield Problem("storage.nfsPath", f"{storage.nfs_path!r} must be the exported absolute path, like "
                                                 "'/export/training'")
        if storage.kind == "host-path" and (not storage.host_path or not storage.host_path.startswith("/")):
            yield Problem("storage.hostPath", f"{storage.host_path!r} must be an absolute directory present on every "
                                              "GPU server, like '/data/training'")

    def _check_secrets(self, config: StackConfig) -> Iterator[Problem]:
        if config.swarm_secrets is None:
            return
        try:
            secrets = json.loads(config.swarm_secrets.get_secret_value())
        except json.JSONDecodeError:
            secrets = None
        if not isinstance(secrets, dict) or not all(isinstance(v, str) for v in secrets.values()):
            yield Problem("swarmSecrets", "must be a JSON map of name to string value: `pulumi config set --secret "
                                          "swarmSecrets '{\"hf-token\": \"...\"}'`")
            return
        for secret_name in secrets:
            if not SECRET_NAME.match(secret_name):
                yield Problem(f"swarmSecrets.{secret_name}", "is not a secret name (letters, digits, '_', '.', '-'; "
                                                             "at most 64 characters)")

    def provision(self, config: StackConfig, aws_opts: pulumi.ResourceOptions) -> Cluster:
        swarm = config.cluster.swarm
        assert swarm is not None and swarm.manager_host  # check() rejects a swarm without a manager
        access = SwarmAccess("swarm", SwarmAccessArgs(manager_host=swarm.manager_host,
                                                      ssh_options=list(swarm.ssh_options)))
        return Cluster(target=self, provider=None, aws_opts=aws_opts, docker_provider=access.provider,
                       exports={"clusterName": config.cluster_name, "swarmManager": swarm.manager_host})


def swarm_secrets(config: StackConfig) -> dict[str, str]:
    """The `swarmSecrets` map (validated by `SwarmTarget.check`)."""
    return json.loads(config.swarm_secrets.get_secret_value()) if config.swarm_secrets else {}
