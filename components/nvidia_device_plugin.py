"""NvidiaDevicePlugin: makes GPUs schedulable (and shareable) with NVIDIA's k8s-device-plugin Helm chart.

The chart (`catalog.versions.NVIDIA_DEVICE_PLUGIN`) installs the device plugin, GPU feature discovery (GFD) and,
as GFD's dependency, node feature discovery (NFD). Sharing is rendered as the plugin's own config file: one
named config per distinct sharing (`none`, `mps-4`, `time-slicing-2`, names from `conventions.names.config_name`),
chosen per node by the `nvidia.com/device-plugin.config` label. EKS node groups carry that label already
(`cluster_targets.eks.node_labels`); on an existing cluster, label every node whose sharing differs from
`gpu.sharing` yourself (`kubectl label node <n> nvidia.com/device-plugin.config=<name>`); unlabelled nodes
use the default config, the one of `gpu.sharing`.
Docs: https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus

The namespace created here is the only privileged one in the platform (see `privileged_namespace_labels`);
the EFA device plugin and dcgm-exporter, which need host access too, are installed into it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from catalog import versions
from components.helm import pinned_release
from conventions.kubernetes import platform_labels, pod_security_labels
from conventions.names import (
    DEVICE_PLUGIN_NAMESPACE,
    NODE_GROUP_LABEL,
    NVIDIA_RUNTIME_HANDLER,
    PLATFORM_PRIORITY_CLASS,
    WHOLE_GPU_RESOURCE,
    config_name,
)

RELEASE_NAME = "nvidia-device-plugin"


@dataclass(frozen=True)
class SharingSpec:
    """One named device-plugin config: how a node's GPUs are shared."""

    mode: str
    """`none`, `mps` or `time-slicing`."""
    replicas: int
    """Slices per GPU (1 for `none`)."""
    mig_strategy: str = "none"
    """The plugin's MIG strategy on nodes using this config (`none`, `single`, `mixed`)."""

    @property
    def name(self) -> str:
        return config_name(self.mode, self.replicas)


def sharing_config(spec: SharingSpec) -> dict[str, Any]:
    """The device plugin's config file (version v1) for one sharing.

    Shared slices are renamed (`renameByDefault: true` → `nvidia.com/gpu.shared`) so a pod asking for a whole
    `nvidia.com/gpu` never lands on a slice, and a pod may request one slice only
    (`failRequestsGreaterThanOne`): two slices of one GPU are not twice the GPU.
    """
    document: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": spec.mig_strategy}}
    if spec.mode != "none":
        key = "mps" if spec.mode == "mps" else "timeSlicing"
        document["sharing"] = {key: {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": WHOLE_GPU_RESOURCE, "replicas": spec.replicas}],
        }}
    return document


def sharing_config_map(specs: Iterable[SharingSpec]) -> dict[str, str]:
    """`config.map` of the chart: config name → YAML text, sorted by name (stable plans and goldens)."""
    rendered: dict[str, str] = {}
    for spec in specs:
        text = yaml.safe_dump(sharing_config(spec), sort_keys=False, default_flow_style=False)
        if rendered.setdefault(spec.name, text) != text:
            raise ValueError(f"two node groups use device-plugin config {spec.name!r} with different settings; "
                             "config validation should have rejected this")
    return dict(sorted(rendered.items()))


def gpu_node_affinity(selectors: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Required node affinity matching the nodes of any of the given groups (group → selector labels).

    Groups selected only by our node-group label collapse into one `In` expression; other selectors (an
    existing cluster's labels) become one term each (terms are ORed, expressions within a term ANDed).
    """
    by_group_label = sorted(sel[NODE_GROUP_LABEL] for sel in selectors.values() if set(sel) == {NODE_GROUP_LABEL})
    terms: list[dict[str, Any]] = []
    if by_group_label:
        terms.append({"matchExpressions": [{"key": NODE_GROUP_LABEL, "operator": "In", "values": by_group_label}]})
    seen: list[dict[str, Any]] = []
    for _, selector in sorted(selectors.items()):
        if set(selector) == {NODE_GROUP_LABEL}:
            continue
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}
                                     for key, value in sorted(selector.items())]}
        if term not in seen:
            seen.append(term)
    terms.extend(seen)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def merge_tolerations(*lists: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """Union of tolerations, first occurrence order, duplicates dropped."""
    merged: list[dict[str, str]] = []
    for entries in lists:
        for entry in entries:
            if dict(entry) not in merged:
                merged.append(dict(entry))
    return merged


# Kept from the chart's defaults: system-node-critical pods may be scheduled through this taint.
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}


DEVICE_PLUGIN_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"},
                           "limits": {"cpu": "500m", "memory": "256Mi"}}
MPS_SERVER_MEMORY_MIB_PER_GPU = 512
MPS_MEMORY_MIB_PER_CLIENT = 32
MPS_SERVER_CPU_MILLI_PER_GPU = 500


def mps_daemon_resources(num_gpus: int, num_clients: int) -> dict[str, Any]:
    """`resources` of the chart when a node group shares by MPS: the MPS control daemon forks the MPS server
    (`nvidia-cuda-mps-server`, one CUDA context per GPU) inside its own container, so the server counts against the
    daemon's limits (chart 0.20.0 templates/daemonset-mps-control-daemon.yml:191-193: the same `.Values.resources`
    as the plugin). `num_gpus`/`num_clients`: the largest MPS node's GPUs and GPUs x replicas. NVIDIA publishes no
    host-memory figure for the server; a CUDA context holds hundreds of MiB of host memory, so 512 MiB per GPU plus
    32 MiB per client on top of the plugin's own 256 MiB is our margin (not measured here), and half a core per GPU
    for the server's work. The chart has one value for the plugin, GFD and the daemon: they all get these limits;
    requests stay the plugin's."""
    memory = 256 + MPS_SERVER_MEMORY_MIB_PER_GPU * num_gpus + MPS_MEMORY_MIB_PER_CLIENT * num_clients
    cpu = 500 + MPS_SERVER_CPU_MILLI_PER_GPU * num_gpus
    return {"requests": dict(DEVICE_PLUGIN_RESOURCES["requests"]),
            "limits": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}
# NFD master, gc and worker: the chart already sets requests, memory limits, a read-only root, no capabilities and
# runAsNonRoot; it leaves the seccomp profile, the uid and the CPU limit open. The runtime's default seccomp profile
# fits them (API clients; the worker only reads /sys, /proc and /etc/os-release of the host); the uid/gid is the
# one the image already runs as (node-feature-discovery v0.19.0 Dockerfile: `USER 65534:65534` in both runtime
# stages); 300m is the CPU limit NFD's maintainers proposed for the chart (kubernetes-sigs/node-feature-discovery
# #1616). Helm merges these maps into the chart's `resources`, so its requests and memory limits stay.
NFD_UID = 65534
NFD_HARDENING: dict[str, Any] = {
    "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": NFD_UID, "runAsGroup": NFD_UID},
    "resources": {"limits": {"cpu": "300m"}},
}


NODE_CRITICAL = "system-node-critical"
"""The built-in class of the node agents without which a GPU node's devices can't be used: the device plugin, GFD
and the MPS control daemon (this chart), the EFA plugin (its chart hard-codes it: aws-efa-k8s-device-plugin v0.5.20
templates/daemonset.yaml). It is what upstream ships (nvidia-device-plugin 0.20.0 values.yaml `priorityClassName`)
and what Kubernetes documents for per-node add-ons ("Guaranteed Scheduling For Critical Add-On Pods"): the kubelet
admits a critical pod on a full node by evicting others (pkg/kubelet/preemption `CriticalPodAdmissionHandler`) and
ranks it last for node-pressure eviction (by usage above requests, then priority), so a training pod goes before
the plugin that advertises its GPU. The DaemonSets need no PodDisruptionBudget: `kubectl drain` and EKS node group
updates skip DaemonSet pods."""


def device_plugin_values(config_map: Mapping[str, str], default_config: str, affinity: Mapping[str, Any],
                         node_tolerations: list[Mapping[str, str]], install_nfd: bool,
                         priority_class: str | None = None, runtime_class: str | None = None,
                         mps_node: tuple[int, int] | None = None) -> dict[str, Any]:
    """Helm values of the nvidia-device-plugin chart 0.20. `priority_class`: the platform's class for NFD's
    master, gc and worker (None: the chart's default, none). `runtime_class`: the RuntimeClass of the plugin, GFD
    and MPS daemon pods (None: the node's default runtime). `mps_node`: (GPUs, clients) of the largest node that
    shares by MPS (`mps_daemon_resources`); None: no MPS."""
    nfd_priority = {"priorityClassName": priority_class} if priority_class else {}
    return {
        "config": {"map": dict(config_map), "default": default_config},
        # Where containerd's default runtime is runc (k3s: the NVIDIA runtime is only an extra handler), the
        # plugin would find no NVML/Tegra library and register nothing. One value for the plugin, GFD and MPS
        # daemon sets (chart 0.20.0 templates/daemonset-device-plugin.yml:46-47, daemonset-gfd.yml:46-47,
        # daemonset-mps-control-daemon.yml:46-47 `.Values.runtimeClassName`; values.yaml:101 default null).
        **({"runtimeClassName": runtime_class} if runtime_class else {}),
        # The chart's default, stated so that a chart bump can't drop it (see NODE_CRITICAL). One value for the
        # plugin, GFD and MPS daemon sets (templates/daemonset-*.yml `.Values.priorityClassName`).
        "priorityClassName": NODE_CRITICAL,
        # Our affinity replaces the chart's NFD-label affinity: it names exactly the GPU node groups, so the
        # plugin runs on them from their first boot (before NFD has labelled anything) and nowhere else.
        "affinity": dict(affinity),
        "tolerations": merge_tolerations([CRITICAL_ADDONS_TOLERATION], node_tolerations),
        # GFD labels nodes with GPU facts; MPS needs it: the MPS control daemon only runs on nodes GFD labelled
        # `nvidia.com/mps.capable=true`.
        "gfd": {"enabled": True},
        # One `resources` value bounds every container of the device plugin, GFD and MPS daemon sets (the chart
        # has no other knob). Kubernetes' own nvidia-gpu addon requested 50m CPU (kubernetes/kubernetes
        # cluster/addons/device-plugins/nvidia-gpu/daemonset.yaml); a running plugin holds ~25 MiB and was seen
        # OOM-killed under tighter limits (zalando-incubator/kubernetes-on-aws#7065): 64 Mi requested, 256 Mi cap.
        "resources": mps_daemon_resources(*mps_node) if mps_node else DEVICE_PLUGIN_RESOURCES,
        "nfd": {
            # The chart's condition is `nfd.enabled,gfd.enabled`: an explicit false skips NFD even with GFD on,
            # for clusters that already run NFD (two NFD masters fight over the same labels).
            "enabled": install_nfd,
            # NFD's top-level `priorityClassName` (node-feature-discovery chart templates master.yaml, nfd-gc.yaml
            # and worker.yaml `.Values.priorityClassName`) covers the master and gc Deployments and the worker
            # DaemonSet. `worker.priorityClassName` is left unset: worker.yaml renders both keys into the same pod
            # spec, and two would be a duplicate key. The worker only refreshes feature labels (our plugin's
            # affinity uses the node-group label, not NFD's), so the platform class, not a node-critical one.
            # Master and gc stay single-replica without a PodDisruptionBudget (the chart's `master.
            # podDisruptionBudget` is minAvailable 1, which on one replica would block every drain); losing
            # them for a reschedule only delays label updates.
            **nfd_priority,
            # NFD's worker tolerates `nvidia.com/gpu=present` by default; our taint value is `true`.
            "worker": {"tolerations": merge_tolerations(
                [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
                node_tolerations), **NFD_HARDENING},
            "master": dict(NFD_HARDENING),
            "gc": dict(NFD_HARDENING),
        },
    }


def privileged_namespace_labels() -> dict[str, str]:
    """Pod Security Admission labels of the device-plugin namespace.

    The one place privilege is allowed: the device plugin registers through the kubelet's device-plugin
    socket directory (`/var/lib/kubelet/device-plugins`, a hostPath), GFD reads host devices privileged,
    and the MPS control daemon runs privileged with host PID/IPC to serve CUDA clients of other pods; the EFA
    plugin (hostNetwork, /dev/infiniband) and dcgm-exporter (SYS_ADMIN, kubelet pod-resources socket) live here
    for the same reason. The policy pack allows privileged PSA on this namespace name only.
    """
    return pod_security_labels("privileged", warn_and_audit="privileged") | platform_labels("gpu-device-plugins")


@dataclass
class NvidiaDevicePluginArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider (depends on the cluster, its node groups and the deployer's access)."""
    sharing: list[SharingSpec]
    """Every device-plugin config to render (one per distinct sharing, including the default)."""
    default_config: str
    """Name of the config used by nodes without the `nvidia.com/device-plugin.config` label."""
    node_selectors: dict[str, dict[str, str]]
    """GPU node group → labels selecting its nodes. Empty: no plugin is installed (see `skipped_groups`)."""
    tolerations: list[dict[str, str]] = field(default_factory=list)
    """Tolerations for the GPU nodes' taints."""
    install_nfd: bool = True
    """Install node feature discovery with the chart (false when the cluster already runs NFD). Default true."""
    skipped_groups: dict[str, str] = field(default_factory=dict)
    """GPU node groups the plugin does not serve → why (logged)."""
    site_images: dict[str, str] = field(default_factory=dict)
    """Air-gapped stacks: upstream image → the site registry's copy (components.helm.pinned_release). Default: none."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (components/platform_priority.py): NFD's pods name it and the release
    waits for it. None: NFD runs without a class."""
    runtime_class_name: str | None = None
    """RuntimeClass of the plugin, GFD and MPS daemon pods (`gpu.runtimeClassName`). None: the node's default."""
    mps_node: tuple[int, int] | None = None
    """(GPUs, MPS clients) of the largest node that shares by MPS: sizes the MPS daemon (`mps_daemon_resources`).
    None: no node group uses MPS."""
    create_runtime_class: bool = False
    """Create RuntimeClass `runtime_class_name` (handler `nvidia`) before the release. Default false (k3s ships
    one)."""


def runtime_class(name: str) -> dict[str, Any]:
    """The RuntimeClass `name` for containerd's `nvidia` handler (node.k8s.io/v1; the same object k3s ships,
    k3s-io/k3s manifests/runtimes.yaml)."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
            "handler": NVIDIA_RUNTIME_HANDLER}


class NvidiaDevicePlugin(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release | None
    runtime_class: k8s.node.v1.RuntimeClass | None

    def __init__(self, name: str, args: NvidiaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:gpu:NvidiaDevicePlugin", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": DEVICE_PLUGIN_NAMESPACE, "labels": privileged_namespace_labels()},
            opts=k8s_opts,
        )
        for group, reason in sorted(args.skipped_groups.items()):
            pulumi.log.info(f"NVIDIA device plugin: not installed for node group '{group}': {reason}", self)
        self.release = None
        self.runtime_class = None
        waits: list[pulumi.Resource] = [args.platform_priority] if args.platform_priority else []
        if args.create_runtime_class and args.runtime_class_name:
            body = runtime_class(args.runtime_class_name)
            self.runtime_class = k8s.node.v1.RuntimeClass(
                f"{name}-runtime-class", metadata=body["metadata"], handler=body["handler"], opts=k8s_opts)
            waits.append(self.runtime_class)
        if args.node_selectors:
            chart = versions.NVIDIA_DEVICE_PLUGIN
            self.release = pinned_release(
                f"{name}-release", chart, release_name=RELEASE_NAME,
                namespace=self.namespace.metadata["name"],
                values=device_plugin_values(sharing_config_map(args.sharing), args.default_config,
                                            gpu_node_affinity(args.node_selectors), args.tolerations,
                                            args.install_nfd,
                                            PLATFORM_PRIORITY_CLASS if args.platform_priority else None,
                                            args.runtime_class_name, args.mps_node),
                opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=waits)),
                site_images=args.site_images, crds=[versions.NFD_CRDS] if args.install_nfd else [],
            )
        else:
            pulumi.log.info("NVIDIA device plugin: no node group needs it, so it is not installed", self)
        self.register_outputs({})
