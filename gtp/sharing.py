"""Names shared between node groups (which label their nodes) and the device plugin (which reads the label)."""

from __future__ import annotations

DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
NODE_GROUP_LABEL = "gtp.dev/node-group"
GPU_TAINT_KEY = "nvidia.com/gpu"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
EFA_RESOURCE = "vpc.amazonaws.com/efa"


def config_name(mode: str, replicas: int) -> str:
    """Name of a device-plugin sharing config, e.g. `none`, `mps-4`, `time-slicing-2`."""
    return "none" if mode == "none" else f"{mode}-{replicas}"
