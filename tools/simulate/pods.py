"""Every Pod the rendered cluster's controllers would create, as `ExpandedPod`s.

Built-in controllers (Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob) copy their pod template;
training custom resources (PyTorchJob, ElasticJob, ScaledJob) give theirs through the workload-kind registry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import workload_kinds
from tools.cluster import ClusterObject
from tools.plan_record import Plan
from tools.simulate.model import ExpandedPod

_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def _get(node: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def pod_from_template(template: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A v1 Pod with the template's metadata and spec (what a controller posts before any admission)."""
    metadata = copy.deepcopy(dict(template.get("metadata") or {}))
    metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": copy.deepcopy(dict(template.get("spec") or {}))}


def _count(item: ClusterObject) -> int:
    spec = item.obj.get("spec") or {}
    if item.kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return int(spec.get("replicas", 1))
    if item.kind == "Job":
        return int(spec.get("parallelism", 1))
    return 1


def expand_pods(objects: list[ClusterObject], plan: Plan | None = None) -> list[ExpandedPod]:
    """Every pod of every workload object, in object order."""
    pods: list[ExpandedPod] = []
    for item in objects:
        namespace = item.namespace or "default"
        path = _TEMPLATE_PATHS.get(item.kind)
        if path is not None:
            template = _get(item.obj, path)
            if isinstance(template, Mapping):
                pods.append(ExpandedPod(owner=f"{item.kind} {namespace}/{item.name}", source=item.source,
                                        namespace=namespace, pod=pod_from_template(template, namespace),
                                        count=_count(item), daemon=item.kind == "DaemonSet"))
            continue
        kind = workload_kinds.kind_of_resource(item.obj)
        if kind is None:
            continue
        for role, template in sorted(kind.pod_templates(item.obj).items()):
            if isinstance(template, Mapping):
                pods.append(ExpandedPod(owner=f"{item.kind} {namespace}/{item.name} {role}", source=item.source,
                                        namespace=namespace, pod=pod_from_template(template, namespace)))
    return pods
