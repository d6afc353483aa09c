"""The GPU instance types this platform supports, and what each one brings.

One table feeds config validation (is this a GPU type, which architecture, does it have EFA), the
cluster-autoscaler scale-from-zero tags (GPU count per node) and workload sizing (nprocPerNode, EFA
devices per pod). Sources: "Specifications for Amazon EC2 accelerated computing instances"
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html: GPUs, GPU memory, vCPUs, memory, network cards),
https://aws.amazon.com/ec2/instance-types/ (accelerated computing) and
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types (EFA interface counts).
Rows are grouped by family; a committed stack's row is never changed without refreshing its golden plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Architecture = Literal["amd64", "arm64"]


@dataclass(frozen=True)
class GpuInstanceType:
    """Facts about one GPU instance type."""

    name: str
    num_gpus: int
    gpu_model: str
    gpu_memory_gib: int
    """Memory of one GPU."""
    architecture: Architecture
    num_efa_interfaces: int
    """Network cards that can carry an EFA interface; 0 means no EFA."""
    vcpus: int
    memory_gib: int


def _types(rows: list[tuple[str, int, str, int, Architecture, int, int, int]]) -> dict[str, GpuInstanceType]:
    return {row[0]: GpuInstanceType(*row) for row in rows}


GPU_INSTANCE_TYPES: dict[str, GpuInstanceType] = _types(
    [
        # name, GPUs, model, GPU GiB, arch, EFA interfaces, vCPUs, memory GiB
        ("g5.xlarge", 1, "A10G", 24, "amd64", 0, 4, 16),
        ("g5.2xlarge", 1, "A10G", 24, "amd64", 0, 8, 32),
        ("g5.4xlarge", 1, "A10G", 24, "amd64", 0, 16, 64),
        ("g5.8xlarge", 1, "A10G", 24, "amd64", 1, 32, 128),
        ("g5.12xlarge", 4, "A10G", 24, "amd64", 1, 48, 192),
        ("g5.16xlarge", 1, "A10G", 24, "amd64", 1, 64, 256),
        ("g5.24xlarge", 4, "A10G", 24, "amd64", 1, 96, 384),
        ("g5.48xlarge", 8, "A10G", 24, "amd64", 1, 192, 768),
        ("g6.xlarge", 1, "L4", 24, "amd64", 0, 4, 16),
        ("g6.2xlarge", 1, "L4", 24, "amd64", 0, 8, 32),
        ("g6.4xlarge", 1, "L4", 24, "amd64", 0, 16, 64),
        # EFA on both (they were 0 here, unlike the family's other sizes from 8xlarge): EC2 DescribeInstanceTypes
        # says EfaSupported, as eksctl's table generated from it records (eksctl-io/eksctl
        # pkg/utils/instance/instance_types.go at 99984adb, 2026-08-21); one network card, so one EFA interface.
        # The preflight compares every EFA group's rows with DescribeInstanceTypes at `preview`
        # (cluster_targets/eks_preflight.py efa_problems).
        ("g6.12xlarge", 4, "L4", 24, "amd64", 1, 48, 192),
        ("g6.48xlarge", 8, "L4", 24, "amd64", 1, 192, 768),
        ("g6e.xlarge", 1, "L40S", 48, "amd64", 0, 4, 32),
        ("g6e.12xlarge", 4, "L40S", 48, "amd64", 1, 48, 384),
        ("g6e.48xlarge", 8, "L40S", 48, "amd64", 4, 192, 1536),
        ("g5g.xlarge", 1, "T4G", 16, "arm64", 0, 4, 8),
        ("g5g.2xlarge", 1, "T4G", 16, "arm64", 0, 8, 16),
        ("g5g.16xlarge", 2, "T4G", 16, "arm64", 0, 64, 128),
        ("p4d.24xlarge", 8, "A100", 40, "amd64", 4, 96, 1152),
        ("p4de.24xlarge", 8, "A100", 80, "amd64", 4, 96, 1152),
        ("p5.48xlarge", 8, "H100", 80, "amd64", 32, 192, 2048),
        ("p5e.48xlarge", 8, "H200", 141, "amd64", 32, 192, 2048),
        ("p5en.48xlarge", 8, "H200", 141, "amd64", 16, 192, 2048),
        # Added with the families' remaining sizes (same sources).
        ("g4dn.xlarge", 1, "T4", 16, "amd64", 0, 4, 16),
        ("g4dn.2xlarge", 1, "T4", 16, "amd64", 0, 8, 32),
        ("g4dn.4xlarge", 1, "T4", 16, "amd64", 0, 16, 64),
        ("g4dn.8xlarge", 1, "T4", 16, "amd64", 1, 32, 128),
        ("g4dn.12xlarge", 4, "T4", 16, "amd64", 1, 48, 192),
        ("g4dn.16xlarge", 1, "T4", 16, "amd64", 1, 64, 256),
        ("g4dn.metal", 8, "T4", 16, "amd64", 1, 96, 384),
        ("g5g.4xlarge", 1, "T4G", 16, "arm64", 0, 16, 32),
        ("g5g.8xlarge", 1, "T4G", 16, "arm64", 0, 32, 64),
        ("g5g.metal", 2, "T4G", 16, "arm64", 0, 64, 128),
        ("g6.8xlarge", 1, "L4", 24, "amd64", 1, 32, 128),
        ("g6.16xlarge", 1, "L4", 24, "amd64", 1, 64, 256),
        ("g6.24xlarge", 4, "L4", 24, "amd64", 1, 96, 384),
        ("g6e.2xlarge", 1, "L40S", 48, "amd64", 0, 8, 64),
        ("g6e.4xlarge", 1, "L40S", 48, "amd64", 0, 16, 128),
        ("g6e.8xlarge", 1, "L40S", 48, "amd64", 1, 32, 256),
        ("g6e.16xlarge", 1, "L40S", 48, "amd64", 1, 64, 512),
        ("g6e.24xlarge", 4, "L40S", 48, "amd64", 2, 96, 768),
        ("gr6.4xlarge", 1, "L4", 24, "amd64", 0, 16, 128),
        ("gr6.8xlarge", 1, "L4", 24, "amd64", 1, 32, 256),
        ("p5.4xlarge", 1, "H100", 80, "amd64", 1, 16, 256),
        ("p6-b200.48xlarge", 8, "B200", 179, "amd64", 8, 192, 2048),
    ]
)

# NVIDIA AMI types of EKS managed node groups, by architecture. Bottlerocket ships its own device plugin.
AMI_TYPE_ARCHITECTURE: dict[str, Architecture] = {
    "AL2023_x86_64_NVIDIA": "amd64",
    "AL2023_ARM_64_NVIDIA": "arm64",
    "BOTTLEROCKET_x86_64_NVIDIA": "amd64",
    "BOTTLEROCKET_ARM_64_NVIDIA": "arm64",
}
# GPU models of NVIDIA Jetson modules (adopted nodes name their model in config): their images need an
# L4T/JetPack base, not the server (SBSA) CUDA stack.
JETSON_GPU_MODELS = ("Orin", "Xavier", "Thor")
# GPU sharing verified on Jetson's integrated (Tegra) GPUs: whole GPUs, and time-slicing (the device plugin's
# replicas of one device, no daemon on the node). MPS is not: the plugin's MPS mode runs NVIDIA's MPS control daemon
# and reads the GPU through NVML, which Jetson's driver exposes only partly (nvidia-smi shows no device there), and
# nobody has run it on these boards here. Add "mps" for a model once it is verified on one.
JETSON_SHARING_MODES: tuple[str, ...] = ("none", "time-slicing")
# DCGM (and so dcgm-exporter) does not support Jetson: its supported platforms are datacenter GPUs and Maxwell-or-newer
# GeForce/Quadro GPUs, bare metal or full passthrough (DCGM docs, "Install DCGM", Supported Platforms), and NVIDIA's
# maintainer answered "The Jetson GPUs are not supported by DCGM at this moment" (NVIDIA/dcgm-exporter issue #101).
DCGM_UNSUPPORTED_MODELS: tuple[str, ...] = JETSON_GPU_MODELS

DEFAULT_AMI_TYPE: dict[Architecture, str] = {"amd64": "AL2023_x86_64_NVIDIA", "arm64": "AL2023_ARM_64_NVIDIA"}


def bottlerocket(ami_type: str) -> bool:
    """Bottlerocket NVIDIA AMIs run NVIDIA's device plugin themselves; installing ours would conflict."""
    return ami_type.startswith("BOTTLEROCKET")
