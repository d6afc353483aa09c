"""What the config rules may ask of a cluster target, by capability, never by its mode's name.

Each target declares its `TargetTraits` beside its code (cluster_targets/<target>.py `traits`) and the registry
(cluster_targets/__init__.py) registers them here under its `cluster.mode`. This package sits below the targets in
the layers (ARCHITECTURE.md), so it can't import them: it reads what they registered. A rule asks
`traits_of(config)`, the applicability table asks `capable(...)`, and a new target that declares its traits fits
every rule without an edit here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from conventions.names import Platform
from stack_config.traits import TraitsRegistry


class _ClusterSection(Protocol):
    @property
    def mode(self) -> str: ...


class _Config(Protocol):
    """A `StackConfig`, as far as this module reads it (stack_config/schema.py imports this module)."""

    @property
    def cluster(self) -> _ClusterSection: ...


@dataclass(frozen=True)
class TargetTraits:
    """A cluster target's capabilities, as the config rules, the derived facts and the applicability table see them."""

    platform: Platform
    """What runs the workloads: Kubernetes or a Docker Swarm (workload kinds declare the platform they need)."""
    provisions_in_aws: bool = False
    """The stack creates the cluster and its node groups in AWS: it has an AWS provider, the `network` section and
    the deployer's access, the cluster's Kubernetes version, the cluster-autoscaler, and a TTL the reaper keeps."""
    node_facts: Literal["catalog", "config"] = "config"
    """Where a GPU node's facts come from: `catalog`, the EC2 instance types the stack creates (GPUs, allocatable,
    EFA, topology labels, start-up times, prices); `config`, what the stack file declares of nodes it adopts
    (`gpusPerNode`, `gpuModel`, `architecture`), which can't be discovered offline."""
    kueue_quotas: bool = False
    """Kueue's quotas can be derived here (they need catalogued nodes: `KueueConfig.enabled`)."""
    air_gap: bool = False
    """The site can be air-gapped: its images come from a site registry (`image.airGap`)."""
    capacity_unit: Literal["gpu", "server"] = "gpu"
    """What one running pod holds of a node: the GPUs it requests (Kubernetes), or the whole server (a Swarm task:
    the NVIDIA runtime shows every GPU to every container)."""
    node_default_runtime: str | None = None
    """containerd's default handler on the GPU nodes when `cluster.nodeDefaultRuntime` is unset; None where the
    nodes don't run containerd's CRI (a Swarm's Docker)."""
    site_runtime_classes: tuple[tuple[str, str], ...] = ()
    """RuntimeClasses (name, handler) the cluster has before the stack adds any: what an adopted site ships (k3s'
    `nvidia` → handler `nvidia`, k3s-io/k3s manifests/runtimes.yaml). The config rule on `gpu.runtimeClassName`
    and the simulator (verify/simulate/runtime.py) both read it."""


TARGETS: TraitsRegistry[TargetTraits] = TraitsRegistry("cluster target", "cluster.mode", "cluster_targets")
"""`cluster.mode` → the target's traits (cluster_targets/__init__.py registers them on import)."""
register = TARGETS.register
traits_for = TARGETS.traits


def traits_of(config: _Config) -> TargetTraits:
    """The traits of the stack's cluster target."""
    return traits_for(config.cluster.mode)


def modes_where(predicate: Callable[[TargetTraits], bool]) -> tuple[str, ...]:
    """The registered modes whose traits satisfy `predicate`, sorted."""
    return TARGETS.capable(predicate).names


IN_AWS = TARGETS.capable(lambda traits: traits.provisions_in_aws)
"""Targets that create the cluster and its node groups in AWS (today: eks)."""
ON_KUBERNETES = TARGETS.capable(lambda traits: traits.platform == "kubernetes")
"""Targets whose workloads run on Kubernetes (today: eks, existing)."""
ON_SWARM = TARGETS.capable(lambda traits: traits.platform == "swarm")
"""Targets whose workloads are Swarm services (today: swarm)."""
ADOPTED_NODES = TARGETS.capable(lambda traits: traits.node_facts == "config")
"""Targets whose GPU nodes' facts come from the stack file (today: existing, swarm)."""
ADOPTED_KUBERNETES = TARGETS.capable(lambda traits: traits.platform == "kubernetes" and not traits.provisions_in_aws)
"""Kubernetes clusters someone else runs (today: existing)."""
AIR_GAP = TARGETS.capable(lambda traits: traits.air_gap)
"""Targets whose site can be air-gapped (today: existing, swarm)."""
ANY_TARGET = TARGETS.capable(lambda traits: True)
"""Every target."""
