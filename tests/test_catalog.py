"""The instance catalogs agree with each other and with themselves."""

from __future__ import annotations

from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.eks_max_pods import MAX_PODS
from catalog.gpu_instances import GPU_INSTANCE_TYPES


def test_every_catalogued_type_has_its_eks_max_pods() -> None:
    missing = [name for name in (*GPU_INSTANCE_TYPES, *CPU_INSTANCE_TYPES) if name not in MAX_PODS]
    assert missing == []
    assert all(pods >= 8 for pods in MAX_PODS.values())


def test_cpu_types_follow_their_family_ratios() -> None:
    assert CPU_INSTANCE_TYPES["m7i.large"].vcpus == 2 and CPU_INSTANCE_TYPES["m7i.large"].memory_gib == 8
    assert CPU_INSTANCE_TYPES["c7i.xlarge"].memory_gib == 8 and CPU_INSTANCE_TYPES["r7i.xlarge"].memory_gib == 32
    assert CPU_INSTANCE_TYPES["m7g.xlarge"].architecture == "arm64"
    assert not set(CPU_INSTANCE_TYPES) & set(GPU_INSTANCE_TYPES)


def test_kube_reserved_follows_nodeadm() -> None:
    from catalog.node_allocatable import allocatable, kube_reserved_cpu_millicores, kube_reserved_memory_mib

    # nodeadm's ranges: 60 + 10 + 2 x 5 millicores for the first four cores, 2.5 per core above.
    assert kube_reserved_cpu_millicores(1) == 60
    assert kube_reserved_cpu_millicores(2) == 70
    assert kube_reserved_cpu_millicores(4) == 80
    assert kube_reserved_cpu_millicores(16) == 110
    assert kube_reserved_memory_mib(29) == 574  # m7i.large
    node = allocatable(vcpus=2, memory_gib=8, max_pods=29, disk_size_gib=50)
    assert node.cpu_millicores == 1930 and node.pods == 29
    assert node.memory_mib == int(8 * 1024 * 0.925) - 574 - 100
    assert node.ephemeral_storage_gib == 50 * 0.9 - 1
