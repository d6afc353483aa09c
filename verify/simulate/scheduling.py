"""Would every pod find a node? Each `ExpandedPod` against the stack's node groups (verify/simulate/nodes.py), with
the kube-scheduler's filters that decide placement here (Kubernetes 1.32-1.35, `pkg/scheduler/framework/plugins`):
- `nodeaffinity`: `spec.nodeSelector` (every pair equal) AND `requiredDuringSchedulingIgnoredDuringExecution`
  (`nodeSelectorTerms` ORed, `matchExpressions` within a term ANDed; In, NotIn, Exists, DoesNotExist, Gt, Lt as
  `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: NotIn and DoesNotExist match an absent label, Gt/Lt
  need an integer label; an empty term list or a term without requirements matches nothing);
- `tainttoleration`: every NoSchedule / NoExecute taint tolerated (PreferNoSchedule never blocks);
- `noderesources` (Fit): the pod's effective requests (`k8s.io/component-helpers/resource` `PodRequests`: the
  larger of the app containers' sum (plus restartable init "sidecar" containers) and each init container's own
  request plus the sidecars started before it; plus `spec.overhead`) within the node's allocatable minus the
  DaemonSet pods that land there, counting one `pods` slot.
A DaemonSet pod is checked on every node group it lands on; any other pod must fit at least one group, and all of
its `count` copies must fit the group's `maxSize` nodes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from catalog.node_labels import UNKNOWN
from verify.simulate.model import CheckResult, ExpandedPod, Finding

Resources = dict[str, float]
"""Resource name → amount: cpu in cores, memory and ephemeral-storage in bytes, everything else a count."""

_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")
_SUFFIX = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class NodeGroup(Protocol):
    """What the checks read of a node group (verify/simulate/nodes.py `NodeGroup`, which imports this module)."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, float]
    free: dict[str, float]
    max_size: int

    def describe(self) -> str: ...


def quantity(value: Any, *, where: str = "quantity") -> float:
    """A Kubernetes resource quantity (`500m`, `16Gi`, `1e3`, `2`) as a number (apimachinery `resource.ParseQuantity`
    forms); anything else raises ValueError naming `where`, the value and the accepted form."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not a quantity")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.fullmatch(str(value).strip())
    if not match:
        raise ValueError(f"{where}: {value!r} is not a Kubernetes quantity (a number with at most one suffix: "
                         f"{', '.join(str(s) for s in _SUFFIX if s)})")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _container_requests(container: Mapping[str, Any], where: str) -> Resources:
    resources = container.get("resources") or {}
    # A limit without a request defaults the request to the limit (API defaulting, `SetDefaults_ResourceList`).
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value, where=f"{where}.resources.requests.{name}") for name, value in merged.items()}


def _add(total: Resources, more: Mapping[str, float]) -> Resources:
    out = dict(total)
    for name, value in more.items():
        out[name] = out.get(name, 0.0) + value
    return out


def _max(left: Mapping[str, float], right: Mapping[str, float]) -> Resources:
    return {name: max(left.get(name, 0.0), right.get(name, 0.0)) for name in {*left, *right}}


def pod_requests(pod: Mapping[str, Any], owner: str = "pod") -> Resources:
    """The pod's effective requests, as the scheduler computes them (module docstring), plus one `pods` slot."""
    spec = pod.get("spec") or {}
    containers = Resources()
    for i, container in enumerate(spec.get("containers") or []):
        containers = _add(containers, _container_requests(container, f"{owner} containers[{i}]"))
    sidecars = Resources()
    init_peak = Resources()
    for i, container in enumerate(spec.get("initContainers") or []):
        own = _container_requests(container, f"{owner} initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    total = _max(_add(containers, sidecars), init_peak)
    overhead = {name: quantity(value, where=f"{owner} overhead.{name}")
                for name, value in (spec.get("overhead") or {}).items()}
    return {name: value for name, value in _add(_add(total, overhead), {"pods": 1.0}).items() if value > 0}


# --- node affinity --------------------------------------------------------------------------------------------
def _expression_matches(labels: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    value = labels.get(key)
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator == "In":
        return present and value != UNKNOWN and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator in ("Gt", "Lt"):
        if not present or value == UNKNOWN or len(values) != 1:
            return False
        try:
            have, bound = int(str(value)), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    raise ValueError(f"node selector operator {operator!r} (key {key!r}) is not one of In, NotIn, Exists, "
                     "DoesNotExist, Gt, Lt")


def _term_matches(labels: Mapping[str, str], term: Mapping[str, Any]) -> bool:
    expressions = list(term.get("matchExpressions") or [])
    # matchFields can only name the node (metadata.name), which no group knows before its nodes exist.
    fields = list(term.get("matchFields") or [])
    if not expressions and not fields:
        return False
    node_fields = {"metadata.name": labels.get("kubernetes.io/hostname", UNKNOWN)}
    return all(_expression_matches(labels, e) for e in expressions) and \
        all(_expression_matches(node_fields, f) for f in fields)


def selector_misses(labels: Mapping[str, str], pod: Mapping[str, Any]) -> list[str]:
    """Why the pod's nodeSelector / required node affinity rejects a node with `labels` (empty: it matches)."""
    spec = pod.get("spec") or {}
    misses = [f"nodeSelector {key}={value} (node has {labels.get(key, 'no such label')})"
              for key, value in sorted((spec.get("nodeSelector") or {}).items())
              if labels.get(key) != str(value) or labels.get(key) == UNKNOWN]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is not None:
        terms = list(required.get("nodeSelectorTerms") or [])
        if not any(_term_matches(labels, term) for term in terms):
            shown = " OR ".join(
                " AND ".join(f"{e.get('key')} {e.get('operator')} {e.get('values') or ''}".rstrip()
                             for e in term.get("matchExpressions") or []) or "(empty term)" for term in terms)
            misses.append(f"required node affinity [{shown or 'no terms'}] (no term matches the node's labels)")
    return misses


# --- taints ---------------------------------------------------------------------------------------------------
def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`v1.Toleration.ToleratesTaint` (k8s.io/api core/v1 toleration.go)."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if not toleration.get("key"):  # an empty key needs Exists (API validation); it tolerates nothing otherwise
        return False
    return str(toleration.get("value") or "") == str(taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]) -> list[str]:
    tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
    return [f"taint {t['key']}={t.get('value', '')}:{t['effect']} not tolerated" for t in taints
            if t.get("effect") in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)]


# --- resources ------------------------------------------------------------------------------------------------
def _show(name: str, value: float) -> str:
    if math.isinf(value):
        return "unknown"
    if name in ("memory", "ephemeral-storage"):
        return f"{value / 2**30:.2f}Gi"
    if name == "cpu":
        return f"{value * 1000:.0f}m"
    return f"{value:g}"


def resource_misses(requests: Mapping[str, float], free: Mapping[str, float]) -> list[str]:
    """Which requests exceed what is free on one node."""
    return [f"requests {name} {_show(name, value)} > free {_show(name, free.get(name, 0.0))}"
            for name, value in sorted(requests.items()) if value > free.get(name, 0.0) + 1e-9]


def per_node(requests: Mapping[str, float], free: Mapping[str, float]) -> float:
    """How many copies of a pod with `requests` one node holds."""
    return min((free.get(name, 0.0) / value for name, value in requests.items() if value > 0), default=math.inf)


def placement_misses(pod: ExpandedPod, group: NodeGroup) -> list[str]:
    """Why `pod` can't land on a node of `group` (labels, taints); empty when it could, resources aside."""
    return selector_misses(group.labels, pod.pod) + untolerated(group.taints, pod.pod)


def fit_misses(pod: ExpandedPod, group: NodeGroup, free: Mapping[str, float]) -> list[str]:
    """Every reason `pod` doesn't fit `group` (placement, then resources and the number of copies)."""
    misses = placement_misses(pod, group)
    requests = pod_requests(pod.pod, pod.owner)
    misses += resource_misses(requests, free)
    if not misses and not pod.daemon and pod.count > 1:
        capacity = math.floor(per_node(requests, free)) * group.max_size
        if capacity < pod.count:
            misses.append(f"{pod.count} copies need {pod.count} slots; {group.max_size} node(s) at maxSize hold "
                          f"{capacity}")
    return misses


@dataclass(frozen=True)
class _Why:
    group: str
    misses: list[str]


def _placed(miss: str) -> bool:
    return not miss.startswith(("nodeSelector", "required node affinity", "taint "))


def _fix(reasons: list[_Why]) -> str:
    """The fix for the closest group: one the pod lands on (only resources short), else the fewest misses."""
    if not reasons:
        return "the stack has no node group for this pod"
    closest = min(reasons, key=lambda r: (not all(_placed(m) for m in r.misses), len(r.misses)))
    text = " ".join(closest.misses)
    if "nodeSelector" in text or "node affinity" in text:
        return ("select a label the target group's nodes carry (catalog/node_labels.py lists who writes which: the "
                "group's own labels, EKS, GFD, NFD), or add it to the group's labels / nodeSelector in the stack")
    if "not tolerated" in text:
        return "add a toleration for the group's taint (cluster_targets tolerations) or target an untainted group"
    if "nvidia.com/gpu" in text:
        return ("request the resource the group advertises: nvidia.com/gpu on groups with sharing mode none, "
                "nvidia.com/gpu.shared (one slice) on MPS / time-slicing groups (workloads.<name>.gpuResource)")
    return "lower the pod's requests (workloads.<name>.cpu / memory / ephemeralStorage) or use a larger instance type"


def check(pods: list[ExpandedPod], groups: Sequence[NodeGroup]) -> CheckResult:
    """`scheduled` N/N: every non-DaemonSet pod fits a group; every DaemonSet pod fits every group it lands on."""
    result = CheckResult("scheduled")
    for group in groups:
        result.details.append(group.describe())
    for pod in pods:
        if pod.daemon:
            landed = [g for g in groups if not placement_misses(pod, g)]
            if not landed:
                result.details.append(f"{pod.owner}: runs on no node group (none matches its selectors and taints)")
            requests = pod_requests(pod.pod, pod.owner)
            for group in landed:
                # `free` already has every landing DaemonSet's requests taken off: a negative amount of a resource
                # this pod requests means the DaemonSets together don't fit the node.
                misses = resource_misses(requests, group.allocatable) + [
                    "the DaemonSets landing there together request "
                    f"{_show(name, group.allocatable.get(name, 0.0) - left)} {name}, "
                    f"allocatable {_show(name, group.allocatable.get(name, 0.0))}"
                    for name, left in sorted(group.free.items()) if left < -1e-9 and name in requests]
                result.record(not misses, Finding(
                    f"{pod.owner} on node group {group.name}", "; ".join(misses),
                    "lower the DaemonSet's requests or use a larger instance type for the group") if misses else None)
            continue
        reasons = [_Why(g.name, fit_misses(pod, g, g.free)) for g in groups]
        fits = [r.group for r in reasons if not r.misses]
        if fits:
            result.record(True)
            result.details.append(f"{pod.owner} ×{pod.count}: fits {', '.join(fits)}")
            continue
        why = "; ".join(f"{r.group}: {', '.join(r.misses)}" for r in reasons) or "the cluster has no node group"
        result.record(False, Finding(pod.owner, f"fits no node group ({why})", _fix(reasons)))
    return result
