"""Workload kinds: the ways a stack runs training, as a registry.

Each kind is one module implementing `WorkloadKind` (workload_kinds/base.py): the operators it needs, what its
controller adds to the namespace, its config checks, how it deploys from the shared pod shape, where its pod
templates are, how to watch it. The workloads stage (stages/workloads.py) looks the stack's kind up here and
never branches on kind names.

Add a kind: a new module with a `WorkloadKind` subclass, and one line in `KINDS` below.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from stack_config import Problem, StackConfig
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
NO_WORKLOAD = "none"
SELECTED_BY_AUTOSCALING = {"scaledjob": "scaledjob"}
"""`autoscaling.mode` values that replace the standing job with a kind of their own."""
CONFIGURABLE = sorted({*KINDS} - set(SELECTED_BY_AUTOSCALING.values()) | {NO_WORKLOAD})
"""Values `workload.kind` accepts."""

__all__ = ["CONFIGURABLE", "KINDS", "Deployment", "JobMaster", "KubernetesWorkloadKind", "SwarmContext",
           "SwarmWorkloadKind", "WorkloadContext", "WorkloadKind", "check", "for_config", "kind_of_resource"]


def for_config(config: StackConfig) -> WorkloadKind | None:
    """The kind that runs this stack's training, or None for a platform-only stack (`workload.kind: none`)."""
    if config.workload.kind == NO_WORKLOAD:
        return None
    selected = SELECTED_BY_AUTOSCALING.get(config.autoscaling.mode)
    return KINDS[selected or config.workload.kind]


def check(config: StackConfig) -> Iterator[Problem]:
    """The kind can run the entrypoint and passes its own checks (the kind itself is validated as a choice
    while parsing)."""
    workload = config.workload
    kind = for_config(config)
    if kind is None:
        return
    if workload.entrypoint not in kind.entrypoints:
        yield Problem("workload.entrypoint", f"{workload.entrypoint!r} runs as one PyTorchJob on a fixed set of "
                      "nodes: use kind pytorchjob with autoscaling.mode none")
    yield from kind.check(config)


def kind_of_resource(body: Mapping[str, Any]) -> KubernetesWorkloadKind | None:
    """The workload kind whose custom resource `body` is (by its `kind`: the job, or an object holding its pod
    templates such as Trainer's ClusterTrainingRuntime), if any."""
    for kind in KINDS.values():
        if isinstance(kind, KubernetesWorkloadKind) and body.get("kind") in {kind.resource_kind,
                                                                              *kind.template_kinds}:
            return kind
    return None
