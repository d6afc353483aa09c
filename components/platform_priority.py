"""PlatformPriority: the PriorityClass of the platform's long-running controllers (`gtp-platform`).

Why: a node that runs out of memory evicts by priority first, and a pending pod only preempts pods of lower
priority. Without a class the platform's controllers (Prometheus, Grafana, KEDA, the training operators, Kueue,
NFD) have priority 0, below every training pod (`gtp-training-<stack>`, 1000), so a full node would keep the
scaler or the operator pending while the jobs it serves run. The class sits between the training class and
Kubernetes' built-in ones: `system-cluster-critical` (2000000000) and `system-node-critical` (2000001000) stay
reserved for what the cluster can't run without (cluster-autoscaler and the node agents keep those, see
components/nvidia_device_plugin.py), and user-defined classes may not exceed 1000000000 anyway
(kubernetes pkg/apis/scheduling `HighestUserDefinablePriority`).

A pod naming a PriorityClass that does not exist is rejected by the Priority admission plugin, so every release and
manifest that names this class depends on this component's resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.training_namespace import TRAINING_PRIORITY
from conventions.names import PLATFORM_PRIORITY_CLASS

PLATFORM_PRIORITY = 1_000_000
"""Far above training (`TRAINING_PRIORITY`, 1000), far below the user-definable ceiling (1000000000)."""
HIGHEST_USER_DEFINABLE = 1_000_000_000
"""kubernetes pkg/apis/scheduling/types.go `HighestUserDefinablePriority`: a larger value is rejected."""


def platform_priority_class(name: str = PLATFORM_PRIORITY_CLASS, value: int = PLATFORM_PRIORITY) -> dict[str, Any]:
    """The PriorityClass's fields (`metadata`, `value`, ...); refuses a value that would not sit strictly between
    the training class and the user-definable ceiling."""
    if not TRAINING_PRIORITY < value <= HIGHEST_USER_DEFINABLE:
        raise ValueError(f"platform priority {value}: must be above the training class ({TRAINING_PRIORITY}) "
                         f"and at most {HIGHEST_USER_DEFINABLE} (Kubernetes' highest user-definable priority)")
    return {
        "metadata": {"name": name},
        "value": value,
        "global_default": False,
        # PreemptLowerPriority (the default, stated): a rescheduled controller may preempt a training pod when no
        # node has room (on the edge stack training and controllers share nodes); the job restarts from its last
        # checkpoint, whereas a pending scaler or operator stalls every job of the cluster.
        "preemption_policy": "PreemptLowerPriority",
        "description": "GPU training platform controllers (metrics, scalers, operators, queues): "
                       "before training pods, after the cluster's system-critical pods.",
    }


@dataclass
class PlatformPriorityArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class PlatformPriority(pulumi.ComponentResource):
    priority_class: k8s.scheduling.v1.PriorityClass
    """What every release or manifest naming `gtp-platform` depends on."""

    def __init__(self, name: str, args: PlatformPriorityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:PlatformPriority", name, None, opts)
        self.priority_class = k8s.scheduling.v1.PriorityClass(
            f"{name}-class", **platform_priority_class(),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider))
        self.register_outputs({"name": PLATFORM_PRIORITY_CLASS})
