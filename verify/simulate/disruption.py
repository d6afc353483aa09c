"""Priorities and disruption budgets, as the API server and a node drain see them.

- `priority classes`: the Priority admission plugin rejects a pod that names a PriorityClass the cluster lacks
  (kubernetes plugin/pkg/admission/priority/admission.go `admitPod`: "no PriorityClass with name ... was found");
  the built-in `system-cluster-critical` and `system-node-critical` always exist (pkg/apis/scheduling
  `SystemPriorityClasses`). Every pod of the rendered cluster is checked, controllers' pods included.
- `drains`: a PodDisruptionBudget that allows no eviction when every pod it selects is healthy blocks every node
  drain — `kubectl drain` retries forever, and an EKS managed node group update fails with PodEvictionFailure. The
  disruption controller (pkg/controller/disruption/disruption.go `getExpectedPodCount`, `trySync`) allows
  `healthy − desiredHealthy` evictions, with desiredHealthy = minAvailable, or expected − maxUnavailable (a
  percentage scaled to the expected count, rounded up). Expected is the selected controllers' `spec.replicas` (the
  smallest scale: a budget that blocks at the minimum blocks). A budget that selects no pod of a
  Deployment/StatefulSet/ReplicaSet protects nothing (DaemonSet pods are skipped by drains anyway) and is a
  finding too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding

BUILT_IN_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SCALED = ("Deployment", "StatefulSet", "ReplicaSet")
"""Controllers whose pods a drain evicts through the eviction API (DaemonSet pods are skipped)."""


def check(objects: list[ClusterObject], pods: list[ExpandedPod]) -> list[CheckResult]:
    return [priority_classes(objects, pods), drains(objects)]


def priority_classes(objects: list[ClusterObject], pods: list[ExpandedPod]) -> CheckResult:
    result = CheckResult("priority classes")
    known = BUILT_IN_PRIORITY_CLASSES | {item.name for item in objects if item.kind == "PriorityClass"}
    for pod in pods:
        name = (pod.pod.get("spec") or {}).get("priorityClassName")
        ok = not name or name in known
        result.record(ok, None if ok else Finding(
            pod.owner, f"names PriorityClass {name!r}, which the cluster does not have: the Priority admission "
                       "plugin rejects the pod",
            f"create PriorityClass {name!r} before it (and depend on it), or name one of {sorted(known)}"))
        if name:
            result.details.append(f"{pod.owner}: {name}")
    return result


def _expression(labels: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = {str(v) for v in expression.get("values") or []}
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise ValueError(f"label selector operator {operator!r} (key {key!r}) is not one of In, NotIn, Exists, "
                     "DoesNotExist")


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; a policy/v1 PodDisruptionBudget with an empty selector selects every pod of
    its namespace (an absent one selects none)."""
    if selector is None:
        return False
    return (all(labels.get(key) == str(value) for key, value in (selector.get("matchLabels") or {}).items())
            and all(_expression(labels, e) for e in selector.get("matchExpressions") or []))


def _scaled(value: Any, expected: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, expected, roundUp=true)."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * expected / 100)
    return int(value)


def allowed_evictions(spec: Mapping[str, Any], expected: int) -> int:
    """Evictions a budget with `spec` allows with all `expected` pods healthy (`maxUnavailable` or
    `minAvailable`; the API accepts only one of them)."""
    if spec.get("maxUnavailable") is not None:
        return max(0, min(expected, _scaled(spec["maxUnavailable"], expected)))
    return max(0, expected - _scaled(spec["minAvailable"], expected))


def drains(objects: list[ClusterObject]) -> CheckResult:
    result = CheckResult("drains")
    for budget in (item for item in objects if item.kind == "PodDisruptionBudget"):
        namespace = budget.namespace or "default"
        selector = (budget.obj.get("spec") or {}).get("selector")
        owners = [item for item in objects if item.kind in SCALED and (item.namespace or "default") == namespace
                  and selects(selector, ((item.obj.get("spec") or {}).get("template") or {}).get("metadata", {})
                              .get("labels") or {})]
        expected = sum(int((item.obj.get("spec") or {}).get("replicas", 1)) for item in owners)
        subject = budget.describe()
        if not owners:
            result.record(False, Finding(
                subject, "selects no pod of a Deployment, StatefulSet or ReplicaSet: it protects nothing",
                "fix its selector or drop it"))
            continue
        spec = budget.obj.get("spec") or {}
        if spec.get("minAvailable") is None and spec.get("maxUnavailable") is None:
            result.record(False, Finding(subject, "states neither minAvailable nor maxUnavailable",
                                         "state maxUnavailable: 1 (what the budget is for)"))
            continue
        allowed = allowed_evictions(spec, expected)
        names = ", ".join(f"{item.kind} {item.name}" for item in owners)
        ok = allowed >= 1
        result.record(ok, None if ok else Finding(
            subject, f"allows no eviction with all {expected} pod(s) of {names} healthy: every node drain (and an "
                     "EKS node group update) that reaches one of them fails",
            "use maxUnavailable: 1, or run more replicas than minAvailable"))
        result.details.append(f"{subject}: {allowed} of {expected} pod(s) of {names} may be evicted at a time")
    return result
