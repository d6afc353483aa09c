"""Facts derived from the whole stack config: what a workload's pods need, what a node group's nodes carry."""

from __future__ import annotations

from conventions.names import DEVICE_PLUGIN_CONFIG_LABEL, GPU_TAINT_KEY, NODE_GROUP_LABEL, config_name
from stack_config.schema import StackConfig


def num_ranks(config: StackConfig) -> int:
    """Most ranks the workload can run with (pods x processes per pod)."""
    workload = config.workload
    pods = workload.elastic.max_nodes if workload.elastic else workload.num_nodes
    if config.autoscaling.mode == "scaledobject":
        pods = max(pods, config.autoscaling.max_replicas)
    return pods * gpus_per_pod(config)


def gpus_per_pod(config: StackConfig) -> int:
    workload = config.workload
    if workload.gpus_per_node is not None:
        return workload.gpus_per_node
    assert workload.node_group is not None
    return config.node_facts(workload.node_group).num_gpus


GPU_TAINT = (GPU_TAINT_KEY, "true", "NO_SCHEDULE")


def node_labels(config: StackConfig, group: str) -> dict[str, str]:
    """Labels of an EKS GPU group's nodes: its name (for affinity), the device-plugin sharing config it uses,
    and the user's labels."""
    sharing = config.sharing_for(group)
    return dict(sorted({
        **config.gpu_node_groups[group].labels,
        NODE_GROUP_LABEL: group,
        DEVICE_PLUGIN_CONFIG_LABEL: config_name(sharing.mode, sharing.replicas),
    }.items()))


def node_selector(config: StackConfig, group: str) -> dict[str, str]:
    """Labels that select a group's nodes: ours on EKS, the configured ones on an existing cluster."""
    if config.cluster.mode == "existing":
        return dict(config.gpu_node_groups[group].node_selector) or {NODE_GROUP_LABEL: group}
    return {NODE_GROUP_LABEL: group}


def node_taints(config: StackConfig, group: str) -> dict[str, tuple[str, str]]:
    """Taint key -> (value, EKS effect). Default: `nvidia.com/gpu=true:NoSchedule` when `cluster.gpuNodeTaint`."""
    taints = config.gpu_node_groups[group].taints
    if taints is None:
        return {GPU_TAINT[0]: (GPU_TAINT[1], GPU_TAINT[2])} if config.cluster.gpu_node_taint else {}
    return {key: (taint.value, taint.effect) for key, taint in sorted(taints.items())}


def tolerations(config: StackConfig, group: str) -> list[dict[str, str]]:
    """Kubernetes tolerations for a group's taints (on an existing cluster: the GPU taint, if nodes carry it)."""
    effects = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
    if config.cluster.mode == "existing":
        return [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    return [{"key": key, "operator": "Equal", "value": value, "effect": effects[effect]}
            for key, (value, effect) in node_taints(config, group).items()]
