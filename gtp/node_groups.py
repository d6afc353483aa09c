"""Node labels and taints of GPU node groups: what nodes carry, and so what pods select and tolerate."""

from __future__ import annotations

from gtp.config import StackConfig
from gtp.sharing import DEVICE_PLUGIN_CONFIG_LABEL, GPU_TAINT_KEY, NODE_GROUP_LABEL, config_name

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
