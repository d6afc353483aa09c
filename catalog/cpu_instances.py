"""CPU instance types for the system node group (controllers, operators, metrics), and what each one brings.

Feeds config validation of `cluster.systemNodeGroup.instanceTypes` and the scheduling simulation of the pods that
run there. Source: https://aws.amazon.com/ec2/instance-types/ (general purpose, compute and memory optimized);
sizes follow the families' fixed vCPU : memory ratios (m 1:4, c 1:2, r 1:8 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.gpu_instances import Architecture


@dataclass(frozen=True)
class CpuInstanceType:
    name: str
    vcpus: int
    memory_gib: int
    architecture: Architecture


_SIZES = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32}
_GIB_PER_VCPU = {"m": 4, "c": 2, "r": 8}
_FAMILIES: dict[str, Architecture] = {
    "m5": "amd64", "m6i": "amd64", "m6a": "amd64", "m7i": "amd64", "m7a": "amd64",
    "c6i": "amd64", "c7i": "amd64", "r6i": "amd64", "r7i": "amd64",
    "m6g": "arm64", "m7g": "arm64", "c7g": "arm64", "r7g": "arm64",
}

CPU_INSTANCE_TYPES: dict[str, CpuInstanceType] = {
    f"{family}.{size}": CpuInstanceType(f"{family}.{size}", vcpus, vcpus * _GIB_PER_VCPU[family[0]], arch)
    for family, arch in _FAMILIES.items() for size, vcpus in _SIZES.items()
}
