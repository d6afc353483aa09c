"""GPU stage: make the GPUs schedulable (device plugins), observable (DCGM, Prometheus, Grafana) and proven
(the readiness gate), from the stack config. The only reader of `gpu` and of the node groups' sharing here.

`Gpu.ready` lists what every training workload must wait for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import cluster_targets
from catalog.gpu_instances import bottlerocket
from cluster_targets import Cluster
from components.alert_rules import AlertInputs, GpuGroupExpectation, TrainedWorkload, alert_rules
from components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from components.gpu_metrics import GpuMetrics, GpuMetricsArgs, estimated_series, prometheus_volume_gib
from components.gpu_readiness import POLL_SECONDS, GpuReadiness, GpuReadinessArgs
from components.kueue import cluster_queue_name
from components.nvidia_device_plugin import (
    NvidiaDevicePlugin,
    NvidiaDevicePluginArgs,
    SharingSpec,
    gpu_node_affinity,
    merge_tolerations,
)
from conventions.names import EFA_RESOURCE, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE, config_name, training_namespace
from stack_config import StackConfig, ami_type
from stack_config.derived import (
    installed_parts,
    kueue_enabled,
    max_running_pods,
    node_default_runtime,
    runtime_class_name,
)
from stages.air_gap import site_images


@dataclass
class Gpu:
    ready: list[pulumi.Resource]
    """What workloads wait for: the metrics releases (KEDA's triggers query Prometheus) and the readiness gate."""


def build_gpu(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str]) -> Gpu:
    if cluster.target.platform != "kubernetes":
        # A Swarm's servers advertise their GPUs as generic resources in the daemons' own config: nothing to
        # install, and each training service waits until its tasks run (components/swarm_training.py).
        return Gpu(ready=[])
    device_plugin = NvidiaDevicePlugin("nvidia", device_plugin_args(config, cluster.provider,
                                                                    cluster.platform_priority))
    device_plugin_namespace = device_plugin.namespace.metadata["name"]
    gpu_plugins: list[pulumi.Resource] = [device_plugin.release] if device_plugin.release else []
    if efa_node_groups(config):
        gpu_plugins.append(EfaDevicePlugin("efa", efa_plugin_args(config, cluster.provider,
                                                                  device_plugin_namespace)).release)
    metrics = GpuMetrics("gpu-metrics", gpu_metrics_args(config, cluster.provider, device_plugin_namespace,
                                                         cluster.platform_priority))
    ready: list[pulumi.Resource] = list(metrics.releases)
    if config.gpu_node_groups:
        ready.append(GpuReadiness("gpu-readiness", GpuReadinessArgs(
            provider=cluster.provider, image=image_ref, expectations=readiness_expectations(config),
            depends_on=gpu_plugins,
        )).job)
    return Gpu(ready=ready)


def _node_selector(config: StackConfig, group: str) -> dict[str, str]:
    return cluster_targets.for_config(config).node_selector(config, group)


def _tolerations(config: StackConfig, groups: Iterable[str]) -> list[dict[str, str]]:
    target = cluster_targets.for_config(config)
    return merge_tolerations(*(target.tolerations(config, group) for group in groups))


# --- NVIDIA device plugin -----------------------------------------------------------------------------------


def plugin_node_groups(config: StackConfig) -> tuple[list[str], dict[str, str]]:
    """(groups our plugin serves, groups skipped → why). Bottlerocket NVIDIA AMIs ship their own plugin."""
    served, skipped = [], {}
    for name, group in config.gpu_node_groups.items():
        # Only EKS groups have instance types (and so an AMI type); validation rejects them elsewhere.
        if group.instance_types and bottlerocket(ami_type(group)):
            skipped[name] = (f"{ami_type(group)} runs its own NVIDIA device plugin; a second one would "
                             "conflict over nvidia.com/gpu")
        else:
            served.append(name)
    return served, skipped


def sharing_specs(config: StackConfig, groups: Iterable[str]) -> list[SharingSpec]:
    """One spec per served group, plus the default (`gpu.sharing`) that unlabelled nodes fall back to.

    Groups with the same sharing share one named config, so they must agree on `migStrategy` (config
    validation checks it; `sharing_config_map` refuses a conflict).
    """
    specs = []
    for group in groups:
        sharing = config.sharing_for(group)
        specs.append(SharingSpec(sharing.mode, sharing.replicas, config.gpu_node_groups[group].mig_strategy))
    default = SharingSpec(config.gpu.sharing.mode, config.gpu.sharing.replicas)
    if default.name not in {spec.name for spec in specs}:
        specs.append(default)
    return specs


def device_plugin_args(config: StackConfig, provider: k8s.Provider,
                       platform_priority: pulumi.Resource | None = None) -> NvidiaDevicePluginArgs:
    served, skipped = plugin_node_groups(config)
    return NvidiaDevicePluginArgs(
        provider=provider,
        sharing=sharing_specs(config, served),
        default_config=config_name(config.gpu.sharing.mode, config.gpu.sharing.replicas),
        node_selectors={group: _node_selector(config, group) for group in served},
        tolerations=_tolerations(config, served),
        install_nfd=config.gpu.node_feature_discovery == "install",
        skipped_groups=skipped,
        site_images=site_images(config).refs,
        platform_priority=platform_priority,
        runtime_class_name=runtime_class_name(config),
        create_runtime_class=config.gpu.create_runtime_class,
        mps_node=mps_node(config, served),
    )


def mps_node(config: StackConfig, groups: Iterable[str]) -> tuple[int, int] | None:
    """(GPUs, MPS clients = GPUs x replicas) of the largest node among `groups` that shares by MPS."""
    sizes = [(config.node_facts(group).num_gpus, config.node_facts(group).num_gpus * config.sharing_for(group).replicas)
             for group in groups if config.sharing_for(group).mode == "mps"]
    return max(sizes) if sizes else None


# --- EFA device plugin --------------------------------------------------------------------------------------


def efa_node_groups(config: StackConfig) -> list[str]:
    """GPU node groups whose nodes carry EFA interfaces."""
    return [name for name in config.gpu_node_groups if config.node_facts(name).num_efa_interfaces > 0]


def efa_plugin_args(config: StackConfig, provider: k8s.Provider, namespace: pulumi.Input[str]) -> EfaDevicePluginArgs:
    groups = efa_node_groups(config)
    return EfaDevicePluginArgs(provider=provider, namespace=namespace, node_groups=groups,
                               tolerations=_tolerations(config, groups))


# --- metrics ------------------------------------------------------------------------------------------------


def gpu_metrics_args(config: StackConfig, provider: k8s.Provider, device_plugin_namespace: pulumi.Input[str],
                     platform_priority: pulumi.Resource | None = None) -> GpuMetricsArgs:
    """dcgm-exporter runs on every GPU node group (Bottlerocket ones too: its plugin doesn't export metrics)."""
    metrics = config.gpu.metrics
    groups = list(config.gpu_node_groups)
    parts = installed_parts(config)  # what the stack installs, decided once (stack_config/derived.py)
    return GpuMetricsArgs(
        provider=provider,
        device_plugin_namespace=device_plugin_namespace,
        gpu_affinity=gpu_node_affinity({group: _node_selector(config, group) for group in groups}),
        gpu_tolerations=_tolerations(config, groups),
        dcgm_exporter="dcgm-exporter" in parts,
        prometheus="prometheus" in parts,
        grafana="grafana" in parts,
        retention=metrics.retention,
        site_images=site_images(config).refs,
        platform_priority=platform_priority,
        runtime_class_name=runtime_class_name(config),
        alert_rules=alert_rules(alert_inputs(config)) if metrics.prometheus else None,
        scrape_kueue=metrics.prometheus and kueue_enabled(config),
        volume_gib=prometheus_volume(config),
        volume_tags=prometheus_volume_tags(config),
    )


def prometheus_volume_tags(config: StackConfig) -> dict[str, str]:
    """The tags of Prometheus' EBS volume: the stack's resource tags (what the orphan audit looks for, tools/orphans.py
    `ownership_reason`) and `KubernetesCluster`, the driver's own cluster tag (aws-ebs-csi-driver v1.51.1
    pkg/driver/controller.go:272-277), which it sets only with `--k8s-tag-cluster-id`."""
    return {**config.resource_tags(), "KubernetesCluster": config.cluster_name}


def prometheus_volume(config: StackConfig) -> int | None:
    """Prometheus' volume on EKS (its EBS CSI add-on provisions it), sized from `metrics.retention` for the
    stack's largest size; None elsewhere (an adopted cluster's storage classes are unknown offline)."""
    if not cluster_targets.for_config(config).provisions_in_aws or not config.gpu.metrics.prometheus:
        return None
    gpus = sum(group.max_size * config.node_facts(name).num_gpus for name, group in config.gpu_node_groups.items())
    pods = sum(max_running_pods(workload) for workload in config.workloads.values())
    return prometheus_volume_gib(config.gpu.metrics.retention, estimated_series(gpus, pods))


def alert_inputs(config: StackConfig) -> AlertInputs:
    """The alert rules' thresholds from the stack: each GPU group's GPUs per node, each trainer workload's
    `checkpointEvery`, the ClusterQueue and `kueue.admissionBudget` (when Kueue runs)."""
    groups = [GpuGroupExpectation(name, config.node_facts(name).gpu_model, config.node_facts(name).num_gpus)
              for name in sorted(config.gpu_node_groups) if config.node_facts(name).num_gpus]
    # Only our trainer exports trainer_* metrics (a team's own `command` doesn't; a bench job doesn't checkpoint).
    trained = [TrainedWorkload(name, workload.checkpoint_every) for name, workload in sorted(config.workloads.items())
               if workload.image is None and workload.entrypoint == "train"]
    queue = cluster_queue_name(config.stack) if kueue_enabled(config) else None
    return AlertInputs(training_namespace=training_namespace(config.stack), gpu_groups=groups, workloads=trained,
                       cluster_queue=queue, admission_budget=config.kueue.admission_budget,
                       extra_labels={"stack": config.stack})


# --- readiness gate -----------------------------------------------------------------------------------------


def readiness_expectations(config: StackConfig, timeout_seconds: int | None = None) -> dict[str, Any]:
    """What the gate waits for, per node group: minSize nodes' worth of GPUs (or slices) and EFA devices."""
    groups, skipped = [], []
    for name, group in sorted(config.gpu_node_groups.items()):
        facts = config.node_facts(name)
        if group.min_size == 0:
            skipped.append({"name": name, "reason": "minSize is 0: no node is guaranteed to exist (the autoscaler "
                                                    "adds nodes when a job asks)"})
            continue
        sharing = config.sharing_for(name)
        resources: dict[str, int] = {}
        if sharing.mode == "none":
            resources[WHOLE_GPU_RESOURCE] = facts.num_gpus * group.min_size
        else:
            resources[SHARED_GPU_RESOURCE] = facts.num_gpus * sharing.replicas * group.min_size
        if facts.num_efa_interfaces:
            resources[EFA_RESOURCE] = facts.num_efa_interfaces * group.min_size
        groups.append({"name": name, "selector": _node_selector(config, name), "minNodes": group.min_size,
                       "resources": resources})
    return {
        "timeoutSeconds": config.gpu.readiness_timeout_seconds if timeout_seconds is None else timeout_seconds,
        "pollSeconds": POLL_SECONDS, "groups": groups, "skipped": skipped,
        "noGpuHint": no_gpu_hint(config),
    }


def no_gpu_hint(config: StackConfig) -> str:
    """What the gate says when Ready GPU nodes advertise no GPU at all: the likeliest cause for this cluster."""
    name = runtime_class_name(config)
    if node_default_runtime(config) == "runc":
        if name is None:
            return ("the GPU nodes' default container runtime is runc (cluster.nodeDefaultRuntime) and "
                    "gpu.runtimeClassName is empty: the device plugin runs without the NVIDIA runtime, finds no "
                    "NVML library and registers nothing; set gpu.runtimeClassName: nvidia")
        return (f"the device plugin runs under RuntimeClass '{name}'; check that it exists (`kubectl get "
                f"runtimeclass {name}`: k3s ships it when it found nvidia-container-runtime at start) and that the "
                "node's containerd config has the 'nvidia' runtime (k3s: `grep nvidia /var/lib/rancher/k3s/agent/"
                "etc/containerd/config.toml`; install the NVIDIA container toolkit, then restart k3s)")
    if cluster_targets.for_config(config).provisions_in_aws:
        return ("the device plugin registered no GPU: check its logs for 'could not load NVML' (the node's AMI must "
                "be an NVIDIA one, whose containerd defaults to the NVIDIA runtime: gpuNodeGroups.<name>.amiType)")
    return ("the device plugin registered no GPU: check its logs for 'could not load NVML' (if the nodes' default "
            "runtime is not NVIDIA's, set cluster.nodeDefaultRuntime: runc so the pods get gpu.runtimeClassName)")
