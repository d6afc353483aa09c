"""Cluster targets: where a stack's Kubernetes cluster comes from (`cluster.mode`), as a registry.

A target turns the stack config into the `Cluster` the later stages build on: the Kubernetes provider every
in-cluster resource uses, the labels and taints of each GPU node group's nodes, and — for a cluster in AWS — the
network and identities that storage and queue-driven workloads attach to. The cluster stage
(stages/cluster.py) looks the stack's target up here and never branches on mode names.

Add a target: a new module with a `ClusterTarget` subclass, and one line in `TARGETS` below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from cluster_targets.base import AwsNetwork, Cluster, ClusterTarget
from cluster_targets.eks import EksTarget
from cluster_targets.existing import ExistingTarget
from cluster_targets.swarm import SwarmTarget
from stack_config import Problem, StackConfig
from stack_config.rules import Rule
from stack_config.targets import register

TARGETS: dict[str, ClusterTarget] = {target.mode: target for target in (
    EksTarget(),
    ExistingTarget(),
    SwarmTarget(),
)}
for _target in TARGETS.values():  # what the config rules may ask of each (stack_config/targets.py)
    register(_target.mode, _target.traits)

__all__ = ["RULES", "TARGETS", "AwsNetwork", "Cluster", "ClusterTarget", "check", "for_config"]


def for_config(config: StackConfig) -> ClusterTarget:
    return TARGETS[config.cluster.mode]


def check(config: StackConfig) -> Iterator[Problem]:
    """The target's own checks (the mode itself is validated as a choice while parsing)."""
    yield from for_config(config).check(config)


def _on_its_own_stacks(target: ClusterTarget, rule: Callable[[StackConfig], Iterable[Problem]]
                       ) -> Callable[[StackConfig], Iterable[Problem]]:
    return lambda config: rule(config) if for_config(config) is target else ()


RULES: tuple[Rule, ...] = tuple((_on_its_own_stacks(target, rule), needs)
                                for target in TARGETS.values() for rule, needs in target.rules)
"""Every target's own rules (`ClusterTarget.rules`), each run on that target's stacks only."""
