"""Workload kinds: the ways a stack runs training, as a registry.

Each kind is one module implementing `WorkloadKind` (workload_kinds/base.py): the operators it needs, what its
controller adds to the namespace, its config checks, how it deploys from the shared pod shape, where its pod
templates are, how to watch it. The workloads stage (stages/workloads.py) looks the stack's kind up here and
never branches on kind names.

Add a kind: a new module with a `WorkloadKind` subclass, and one line in `KINDS` below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.kinds import register
from workload_kinds.base import (
    Deployment,
    JobMaster,
    KubernetesWorkloadKind,
    SwarmContext,
    SwarmWorkloadKind,
    WorkloadContext,
    WorkloadKind,
)
from workload_kinds.elasticjob import ElasticJobKind
from workload_kinds.pytorchjob import PyTorchJobKind
from workload_kinds.scaledjob import ScaledJobKind
from workload_kinds.swarm import SwarmKind
from workload_kinds.trainjob import TrainJobKind

KINDS: dict[str, WorkloadKind] = {kind.name: kind for kind in (
    PyTorchJobKind(),
    ElasticJobKind(),
    ScaledJobKind(),
    SwarmKind(),
    TrainJobKind(),
)}
SELECTED_BY_AUTOSCALING = {"scaledjob": "scaledjob"}
"""`autoscaling.mode` values that replace the standing job with a kind of their own."""
CONFIGURABLE = sorted({*KINDS} - set(SELECTED_BY_AUTOSCALING.values()))
"""Values `workloads.<name>.kind` accepts."""
for _name in CONFIGURABLE:  # what the config rules may ask of each (stack_config/kinds.py)
    register(_name, KINDS[_name].traits)

__all__ = [
    "CONFIGURABLE",
    "KINDS",
    "KUEUE_INTEGRATIONS",
    "Deployment",
    "JobMaster",
    "KubernetesWorkloadKind",
    "SwarmContext",
    "SwarmWorkloadKind",
    "WorkloadContext",
    "WorkloadKind",
    "check",
    "kind_of",
    "kind_of_resource",
    "kinds_of",
    "kueue_integrations_for",
]


def kind_of(workload: WorkloadConfig) -> WorkloadKind:
    """The kind that runs one workload (`kind`, unless its `autoscaling.mode` selects one of its own)."""
    selected = SELECTED_BY_AUTOSCALING.get(workload.autoscaling.mode)
    return KINDS[selected or workload.kind]


def kinds_of(config: StackConfig) -> dict[str, WorkloadKind]:
    """Workload name → its kind, for every workload of the stack (empty: platform only)."""
    return {name: kind_of(workload) for name, workload in config.workloads.items()}


def check(config: StackConfig) -> Iterator[Problem]:
    """Each workload's kind can run its entrypoint (and its own image) and passes the kind's own checks (the kind
    itself is validated as a choice while parsing)."""
    for name, workload in config.workloads.items():
        path = f"workloads.{name}"
        kind = kind_of(workload)
        if workload.entrypoint not in kind.entrypoints:
            yield Problem(f"{path}.entrypoint", f"{workload.entrypoint!r} runs as one PyTorchJob on a fixed set of "
                          "nodes: use kind pytorchjob with autoscaling.mode none")
        if workload.image is not None and not kind.own_image:
            yield Problem(f"{path}.image", f"kind {kind.name!r} runs only our trainer; a team's own image runs as "
                          "kind pytorchjob, trainjob or elasticjob")
        yield from kind.check(config, workload, path)


KUEUE_INTEGRATIONS: dict[str, str] = {
    kind.resource_kind: kind.kueue_integration for kind in KINDS.values()
    if isinstance(kind, KubernetesWorkloadKind) and kind.kueue_integration is not None}
"""Custom resource kind → the Kueue integration that admits it, from each kind's `kueue_integration`."""


def kueue_integrations_for(kinds: Iterable[WorkloadKind]) -> list[str]:
    """The Kueue integrations for the stack's workload kinds, sorted; a kind Kueue can't admit is an error."""
    found = set()
    for kind in kinds:
        integration = getattr(kind, "kueue_integration", None)
        if integration is None:
            raise ValueError(f"workload kind {kind.name!r} has no Kueue integration; Kueue admits "
                             f"{', '.join(sorted(KUEUE_INTEGRATIONS))} (turn Kueue off with kueue.enabled: false)")
        found.add(integration)
    return sorted(found)


def kind_of_resource(body: Mapping[str, Any]) -> KubernetesWorkloadKind | None:
    """The workload kind whose custom resource `body` is (by its `kind`: the job, or an object holding its pod
    templates such as Trainer's ClusterTrainingRuntime), if any."""
    for kind in KINDS.values():
        if isinstance(kind, KubernetesWorkloadKind) and body.get("kind") in {kind.resource_kind,
                                                                              *kind.template_kinds}:
            return kind
    return None
