"""What the scheduler can place on an EKS AL2023 node: capacity minus kube-reserved minus hard eviction thresholds.

nodeadm (awslabs/amazon-eks-ami, `nodeadm/internal/kubelet/config.go`) configures every AL2023 node with
- `maxPods` from the ENI table (catalog/eks_max_pods.py);
- `kubeReserved`: cpu 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% above
  (`getCPUMillicoresToReserve`), memory `11 MiB x maxPods + 255 MiB` (`getMemoryMebibytesToReserve`),
  ephemeral-storage 1Gi;
- `evictionHard`: memory.available 100Mi, nodefs.available 10%.
The kernel and firmware keep part of the nominal memory before the kubelet sees it; like Karpenter's default
`VM_MEMORY_OVERHEAD_PERCENT`, 7.5% of the nominal memory is taken off capacity, so the estimate errs small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

VM_MEMORY_OVERHEAD = 0.075
EVICTION_MEMORY_MIB = 100
EVICTION_NODEFS_FRACTION = 0.10
KUBE_RESERVED_EPHEMERAL_GIB = 1.0
_CPU_RANGES = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50))  # (from, to, parts per 10000)
_CPU_ABOVE_FOUR = 25


GPU_NODE_DAEMONS: dict[str, float] = {"cpu": 0.5, "memory": float(2**30)}
"""What the platform's DaemonSets request on every GPU node, as a bound (the sum today: 380m / 768 MiB on dev's
MPS group — aws-node, NFD's worker, the device plugin, GFD, the MPS daemon, dcgm-exporter — and 340m / 724 MiB on
prod's EFA groups): Kueue's quota leaves it out (stack_config/derived.py `group_quota`), and the simulation's
`queued` check fails when the DaemonSets that land on a group request more than it leaves."""


def kube_reserved_cpu_millicores(vcpus: int) -> int:
    total = vcpus * 1000
    reserved = sum((min(total, end) - start) * parts // 10000 for start, end, parts in _CPU_RANGES if total > start)
    if total > 4000:
        reserved += (total - 4000) * _CPU_ABOVE_FOUR // 10000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    return 11 * max_pods + 255


@dataclass(frozen=True)
class Allocatable:
    cpu_millicores: int
    memory_mib: int
    ephemeral_storage_gib: float
    pods: int


def allocatable(*, vcpus: int, memory_gib: float, max_pods: int, disk_size_gib: float) -> Allocatable:
    """Allocatable cpu, memory, ephemeral storage and pods of one node (the root volume is the node filesystem)."""
    capacity_mib = memory_gib * 1024 * (1 - VM_MEMORY_OVERHEAD)
    memory = int(capacity_mib) - kube_reserved_memory_mib(max_pods) - EVICTION_MEMORY_MIB
    ephemeral = disk_size_gib * (1 - EVICTION_NODEFS_FRACTION) - KUBE_RESERVED_EPHEMERAL_GIB
    return Allocatable(cpu_millicores=vcpus * 1000 - kube_reserved_cpu_millicores(vcpus), memory_mib=memory,
                       ephemeral_storage_gib=ephemeral, pods=max_pods)


def instance_allocatable(instance_type: str, disk_size_gib: float) -> dict[str, float]:
    """cpu (cores), memory and ephemeral-storage (bytes) and pods of one EKS AL2023 node of `instance_type`. The
    simulation's node groups (verify/simulate/nodes.py) and Kueue's derived quotas (components/kueue.py) both use
    it, so capacity and quota are computed once."""
    from catalog.cpu_instances import CPU_INSTANCE_TYPES
    from catalog.eks_max_pods import MAX_PODS
    from catalog.gpu_instances import GPU_INSTANCE_TYPES

    facts = GPU_INSTANCE_TYPES.get(instance_type) or CPU_INSTANCE_TYPES.get(instance_type)
    if facts is None:
        raise ValueError(f"instance type {instance_type!r} is in neither catalog/gpu_instances.py nor "
                         "catalog/cpu_instances.py")
    if instance_type not in MAX_PODS:
        raise ValueError(f"instance type {instance_type!r} has no max-pods row in catalog/eks_max_pods.py")
    alloc = allocatable(vcpus=facts.vcpus, memory_gib=facts.memory_gib, max_pods=MAX_PODS[instance_type],
                        disk_size_gib=disk_size_gib)
    return {"cpu": alloc.cpu_millicores / 1000, "memory": float(alloc.memory_mib * 2**20),
            "ephemeral-storage": alloc.ephemeral_storage_gib * 2**30, "pods": float(alloc.pods)}


def smallest(resources: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Per resource, the least any member offers (a resource some member lacks is 0)."""
    items = list(resources)
    names = {name for item in items for name in item}
    return {name: min(item.get(name, 0.0) for item in items) for name in names}
