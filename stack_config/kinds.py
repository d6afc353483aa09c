"""What the config rules may ask of a workload kind, by capability, never by its name.

Each kind declares its `KindTraits` beside its code (workload_kinds/<kind>.py `traits`) and the registry
(workload_kinds/__init__.py) registers them here under `workloads.<name>.kind`; like the targets' traits
(stack_config/targets.py), so a new kind fits every rule by what it declares.
"""

from __future__ import annotations

from dataclasses import dataclass

from stack_config.traits import Capable, TraitsRegistry


@dataclass(frozen=True)
class GeneratedName:
    """A name the kind's operator derives from the workload's name, which Kubernetes (or Swarm) caps at 63 characters
    (a DNS label, or a label value); declared once per kind, beside its code, with the upstream source."""

    template: str
    """`{job}` is the workload's name, `{index}` the largest replica index (its largest pod count less one)."""
    what: str
    """What carries the name, e.g. `each Worker's pod and Service`."""
    source: str
    """Where upstream builds it, at the pinned version."""
    autoscaling: tuple[str, ...] | None = None
    """Only with one of these `autoscaling.mode`s (None: always)."""
    single_pod: bool | None = None
    """Only for a non-elastic job of one pod (True), or only for every other job (False); None: both."""

    def longest(self, job: str, max_index: int) -> str:
        return self.template.format(job=job, index=max_index)


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
    generated_names: tuple[GeneratedName, ...] = ()
    """Names its operator (or KEDA, or Swarm) derives from the workload's name, each capped at 63 characters."""


KINDS: TraitsRegistry[KindTraits] = TraitsRegistry("workload kind", "workloads.<name>.kind", "workload_kinds")
"""`workloads.<name>.kind` → the kind's traits (workload_kinds/__init__.py registers them on import)."""
register = KINDS.register
kind_traits = KINDS.traits


def kinds_where(capable: Capable) -> str:
    """The kinds `capable` stands for, as a message writes them: `pytorchjob or trainjob`."""
    return " or ".join(capable.names)


KUEUE_ADMITTED = KINDS.capable(lambda traits: traits.kueue_admits)
"""Kinds Kueue admits (today: pytorchjob, trainjob)."""
KEDA_SCALED = KINDS.capable(lambda traits: traits.keda_scales)
"""Kinds KEDA can scale (today: pytorchjob)."""
WITH_CLEAN_POD_POLICY = KINDS.capable(lambda traits: traits.clean_pod_policy)
"""Kinds whose resource has runPolicy.cleanPodPolicy (today: pytorchjob)."""
