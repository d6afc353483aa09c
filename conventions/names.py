"""Names that several parts of the platform agree on: label keys, resource names, namespaces, in-cluster addresses.

Node groups label their nodes and the device plugin reads those labels; one component serves an address that
another consumes. Each name is defined once here.
"""

from __future__ import annotations

from typing import Literal

Platform = Literal["kubernetes", "swarm"]
"""What runs a stack's workloads: a Kubernetes API (EKS, an existing cluster) or a Docker Swarm manager. Cluster
targets say which one they provide, workload kinds which one they need."""

# --- node labels, taints and extended resources ---------------------------------------------------------------
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
NODE_GROUP_LABEL = "gtp.dev/node-group"
SYSTEM_ROLE_LABEL = "gtp.dev/role"
"""Label of the CPU system node group's nodes (value `system`): where controllers and operators run."""
PLATFORM_NODE_LABELS: tuple[str, ...] = (NODE_GROUP_LABEL, DEVICE_PLUGIN_CONFIG_LABEL, SYSTEM_ROLE_LABEL)
"""Node labels the platform sets itself (cluster_targets/eks.py `node_labels`, the system node group): a node group's
own `labels` may not set them (the platform's value would silently win, or a GPU node would pass for a system one)."""
CPU_STAND_IN_GPU_MODEL = "cpu-stand-in"
"""The `gpuModel` of a node group whose servers have no GPU (the CPU test Swarm of `make swarm-test`,
tools/swarm_harness.py `cpu_stack`): the one model `cluster.swarm.cpuStandIn` runs on."""
GPU_TAINT_KEY = "nvidia.com/gpu"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
NVIDIA_RUNTIME_HANDLER = "nvidia"
"""containerd's handler for the NVIDIA container runtime, as k3s names the one it detects (k3s-io/k3s@080ec81
pkg/agent/containerd/runtimes.go `findNvidiaContainerRuntimes`: an extra runtime `nvidia`, not the default; the
RuntimeClass `nvidia` k3s ships, manifests/runtimes.yaml, points at it)."""


def config_name(mode: str, replicas: int) -> str:
    """Name of a device-plugin sharing config, e.g. `none`, `mps-4`, `time-slicing-2`."""
    return "none" if mode == "none" else f"{mode}-{replicas}"


# --- namespaces and in-cluster addresses ----------------------------------------------------------------------
METRICS_NAMESPACE = "gpu-metrics"
PROMETHEUS_RELEASE = "prometheus"
# The prometheus chart names its server Service "<release>-server" and serves on port 80.
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-server.{METRICS_NAMESPACE}.svc.cluster.local:80"
DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"

# --- training ----------------------------------------------------------------------------------------------------
TRAINING_SERVICE_ACCOUNT = "trainer"


def training_namespace(stack: str) -> str:
    """The per-stack training namespace."""
    return f"training-{stack}"


PLATFORM_PRIORITY_CLASS = "gtp-platform"
"""The cluster-scoped PriorityClass of the platform's long-running controllers (Prometheus, Grafana, KEDA, the
training operators, Kueue, NFD): above every stack's training class, below Kubernetes' built-in `system-*` ones.
One per cluster (the releases that use it are cluster-wide singletons too)."""


def training_priority_class(stack: str) -> str:
    """The cluster-scoped PriorityClass of a stack's training pods."""
    return f"gtp-training-{stack}"
