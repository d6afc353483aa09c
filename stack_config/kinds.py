"""What the config rules may ask of a workload kind, by capability, never by its name.

Each kind declares its `KindTraits` beside its code (workload_kinds/<kind>.py `traits`) and the registry
(workload_kinds/__init__.py) registers them here under `workloads.<name>.kind`; like the targets' traits
(stack_config/targets.py), so a new kind fits every rule by what it declares.
"""

from __future__ import annotations

from dataclasses import dataclass

from stack_config.targets import Capable


@dataclass(frozen=True)
class KindTraits:
    """A configurable workload kind's capabilities, as the config rules and the applicability table see them."""

    operators: frozenset[str] = frozenset()
    """The operators (catalog/compatibility.py components) its standing job needs; KEDA, which an autoscaling
    mode adds, is decided from `autoscaling.mode`."""
    kueue_admits: bool = False
    """Kueue has an integration that admits its jobs as gangs (the kind's `kueue_integration`)."""
    keda_scales: bool = False
    """KEDA can scale it: a ScaledObject resizes its Worker replicas, a ScaledJob starts Jobs from its pod shape
    (`autoscaling.mode`)."""
    readiness_bounds_rendezvous: bool = False
    """Without Kueue, a multi-node job's workers wait `gpu.readinessTimeoutSeconds` for their rendezvous host (the
    PyTorchJob's elasticPolicy.rdzvConf), so that timeout must cover a pod's start-up."""
    clean_pod_policy: bool = False
    """Its resource has a runPolicy.cleanPodPolicy (`workloads.<name>.cleanPodPolicy`)."""


_REGISTERED: dict[str, KindTraits] = {}


def register(kind: str, traits: KindTraits) -> None:
    """Record the traits of `workloads.<name>.kind: kind` (workload_kinds/__init__.py, on import)."""
    if _REGISTERED.get(kind, traits) != traits:
        raise ValueError(f"workload kind {kind!r} is registered twice with different traits")
    _REGISTERED[kind] = traits


def kind_traits(kind: str) -> KindTraits:
    """The registered traits of `workloads.<name>.kind: kind`."""
    try:
        return _REGISTERED[kind]
    except KeyError:
        raise LookupError(f"no workload kind is registered as {kind!r} (registered: "
                          f"{', '.join(sorted(_REGISTERED)) or 'none'}; importing workload_kinds registers "
                          "them)") from None


def kinds_where(capable: Capable) -> str:
    """The kinds `capable` stands for, as a message writes them: `pytorchjob or trainjob`."""
    return " or ".join(capable.names)


KUEUE_ADMITTED = Capable(lambda traits: traits.kueue_admits, _REGISTERED)
"""Kinds Kueue admits (today: pytorchjob, trainjob)."""
KEDA_SCALED = Capable(lambda traits: traits.keda_scales, _REGISTERED)
"""Kinds KEDA can scale (today: pytorchjob)."""
WITH_CLEAN_POD_POLICY = Capable(lambda traits: traits.clean_pod_policy, _REGISTERED)
"""Kinds whose resource has runPolicy.cleanPodPolicy (today: pytorchjob)."""
