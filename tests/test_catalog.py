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


def _family_and_size(name: str) -> tuple[str, str]:
    family, size = name.split(".", 1)
    return family, size


def test_every_gpu_entry_is_internally_consistent() -> None:
    import re

    by_family: dict[str, set[tuple[str, int, str]]] = {}
    for name, facts in GPU_INSTANCE_TYPES.items():
        assert facts.name == name
        family, size = _family_and_size(name)
        assert 1 <= facts.num_gpus <= 8 and facts.gpu_memory_gib > 0, name
        assert 0 <= facts.num_efa_interfaces <= 32, name
        assert facts.memory_gib >= facts.vcpus, name  # every GPU family has >= 1 GiB per vCPU
        # Graviton families (a 'g' after the generation, e.g. g5g) are arm64, the others x86_64.
        assert facts.architecture == ("arm64" if re.fullmatch(r"[a-z]+\d+g", family) else "amd64"), name
        # AWS sizes: 'xlarge' is 4 vCPUs, '<n>xlarge' is 4n (metal: the whole host, any count)
        if size != "metal":
            multiple = int(size[:-len("xlarge")] or 1)
            assert facts.vcpus == 4 * multiple, name
        # Multi-GPU sizes carry every GPU's memory: per-GPU memory stays that of the one model.
        by_family.setdefault(family, set()).add((facts.gpu_model, facts.gpu_memory_gib, facts.architecture))
    assert {family: len(models) for family, models in by_family.items() if len(models) > 1} == {}


def test_the_gpu_catalog_covers_the_current_nvidia_families() -> None:
    families = {_family_and_size(name)[0] for name in GPU_INSTANCE_TYPES}
    assert {"g4dn", "g5", "g5g", "g6", "g6e", "gr6", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"} <= families
    assert GPU_INSTANCE_TYPES["g6e.2xlarge"].num_gpus == 1 and GPU_INSTANCE_TYPES["g6e.2xlarge"].memory_gib == 64


def test_the_efa_installer_bundles_a_plugin_that_supports_torchs_nccl() -> None:
    # The EFA variant loads AWS's aws-ofi-nccl into torch's NCCL: the bundled plugin's documented range must hold
    # the NCCL torch's CUDA 13 wheels require (read from torch's own metadata, not restated here).
    import importlib.metadata
    import re

    from catalog import versions

    def parsed(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("."))

    assert importlib.metadata.version("torch") == versions.TORCH_VERSION
    nccl = [requirement for requirement in importlib.metadata.requires("torch") or []
            if requirement.startswith("nvidia-nccl-cu13==")]
    assert len(nccl) == 1, nccl
    torch_nccl = re.match(r"nvidia-nccl-cu13==([0-9.]+)", nccl[0]).group(1)
    oldest, newest_tested = versions.EFA_INSTALLER.nccl_range
    assert parsed(oldest) <= parsed(torch_nccl) <= parsed(newest_tested), (torch_nccl, versions.EFA_INSTALLER)
    sha = versions.EFA_INSTALLER.sha256
    assert sha is None or re.fullmatch(r"[0-9a-f]{64}", sha)
