"""`swarm`: a Docker Swarm of GPU servers (a small site: a few servers joined with `docker swarm init`), managed
through one manager over SSH.

Nothing is provisioned for the swarm itself; the stack needs from each GPU server what it can't check from here
(see docs/swarm.md, "Docker Swarm sites"): NVIDIA's container runtime as the daemon's default runtime, the server's GPUs
advertised as generic resources (`node-generic-resources`), and the node labels the placement uses. Every training
service waits to converge (`cluster.swarm.convergeTimeoutSeconds`), so a server that lacks them fails `pulumi up`
with the pending task named instead of hanging.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from typing import ClassVar

import pulumi

from cluster_targets.base import Cluster, ClusterTarget
from components.swarm_access import SwarmAccess, SwarmAccessArgs
from conventions.names import CPU_STAND_IN_GPU_MODEL
from stack_config import Problem, StackConfig
from stack_config.derived import configured_pods
from stack_config.site_rules import clean_absolute, host_problem
from stack_config.storage_kinds import kinds_on
from stack_config.targets import TargetTraits

SSH_HOST = re.compile(r"^ssh://[A-Za-z0-9._-]+@(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?$")
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
        elif not ssh_endpoint(cluster.swarm.manager_host):
            yield Problem("cluster.swarm.managerHost", f"{cluster.swarm.manager_host!r} is not an SSH endpoint like "
                          "'ssh://<user>@<host>[:<port>]' (the Docker API is only reached over SSH): a DNS name, an "
                          "IPv4 address or a bracketed IPv6 one, a port of 1..65535, no path")
        if cluster.swarm is not None:
            yield from self._check_stand_in(config)
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

    def _check_stand_in(self, config: StackConfig) -> Iterator[Problem]:
        """`cpuStandIn` runs CPU processes and reserves no GPU: only on a site whose groups say they have none
        (gpuModel `cpu-stand-in`, what `make swarm-test` writes); a stand-in group without it would reserve GPUs
        its servers don't have."""
        swarm = config.cluster.swarm
        assert swarm is not None
        for name, group in config.gpu_node_groups.items():
            path = f"gpuNodeGroups.{name}.gpuModel"
            if swarm.cpu_stand_in and group.gpu_model is not None and group.gpu_model != CPU_STAND_IN_GPU_MODEL:
                yield Problem("cluster.swarm.cpuStandIn", f"true, but node group '{name}' declares gpuModel "
                              f"{group.gpu_model!r}: a stand-in runs CPU processes and reserves no GPU, so a site "
                              "with GPUs would train on CPUs; allowed: false on a site with GPUs, true only with "
                              f"gpuModel {CPU_STAND_IN_GPU_MODEL!r} (the CPU test Swarm of `make swarm-test`)")
            elif not swarm.cpu_stand_in and group.gpu_model == CPU_STAND_IN_GPU_MODEL:
                yield Problem(path, f"{CPU_STAND_IN_GPU_MODEL!r} marks servers without GPUs, but "
                                    "cluster.swarm.cpuStandIn is false: its tasks would reserve GPUs the servers "
                                    "don't have; set the servers' GPU model or cpuStandIn true")

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
        clean = "is not a clean absolute path (no '.', '..', '//' or trailing '/')"
        if storage.kind == "nfs":
            server = storage.nfs_server
            if not server:
                yield Problem("storage.nfsServer", "is required for kind 'nfs': the NFS server every GPU server mounts")
            elif re.fullmatch(r"[^:/]+:/(?!/).*", server):
                host, _, export = server.partition(":")
                yield Problem("storage.nfsServer", f"{server!r} is host:path, but the export path is storage.nfsPath: "
                                                   f"write nfsServer {host!r} and nfsPath {export!r}")
            elif host_problem(server):
                yield Problem("storage.nfsServer", f"{server!r} is not a host: an IP address or a DNS name, with no "
                                                   "scheme, port or path, like 'nfs.site.internal' (Docker's local "
                                                   "volume driver passes it as the mount's addr=)")
            if not storage.nfs_path or not storage.nfs_path.startswith("/"):
                yield Problem("storage.nfsPath", f"{storage.nfs_path!r} must be the exported absolute path, like "
                                                 "'/export/training'")
            elif not clean_absolute(storage.nfs_path):
                yield Problem("storage.nfsPath", f"{storage.nfs_path!r} {clean}, like '/export/training'")
        if storage.kind == "host-path":
            if not storage.host_path or not storage.host_path.startswith("/"):
                yield Problem("storage.hostPath", f"{storage.host_path!r} must be an absolute directory present on "
                                                  "every GPU server, like '/data/training'")
            elif not clean_absolute(storage.host_path):
                yield Problem("storage.hostPath", f"{storage.host_path!r} {clean}, like '/data/training'")

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


def ssh_endpoint(value: str) -> bool:
    """`ssh://<user>@<host>[:<port>]`: a DNS name or IP address (IPv6 in brackets), a port of 1..65535."""
    match = SSH_HOST.match(value)
    if match is None:
        return False
    host, port = match["host"], match["port"]
    if port is not None and not 1 <= int(port) <= 65535:
        return False
    if host.startswith("["):
        try:
            return ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            return False
    return not host_problem(host)


def swarm_secrets(config: StackConfig) -> dict[str, str]:
    """The `swarmSecrets` map (validated by `SwarmTarget.check`)."""
    return json.loads(config.swarm_secrets.get_secret_value()) if config.swarm_secrets else {}
