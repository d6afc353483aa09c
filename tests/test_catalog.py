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
