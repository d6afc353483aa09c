"""`queued`: Kueue admission of the training workloads (Kueue v0.19.2, components/kueue.py).

Per rendered cluster:
- every ClusterQueue flavor's nominal quota is what its node group can give training at maxSize (the node group as
  the simulation sees it: allocatable from the launch template's instance types and the device plugin's advertised
  GPU resource, less the requests of the DaemonSets that land there, × maxSize; cpu and memory within `SLACK`
  below it, never above), and its ResourceFlavor's node labels and taints are the group's;
- every workload Kueue can admit (an object of a kind in `workload_kinds.KUEUE_INTEGRATIONS`) in a namespace with a
  LocalQueue carries `kueue.x-k8s.io/queue-name` naming it (an unlabelled one bypasses the quota), its integration
  is enabled in `kueue-manager-config`, its LocalQueue's ClusterQueue exists and selects the namespace;
- every queued workload fits its ClusterQueue at its largest scale: the sum of its pods' requests (one Kueue
  Workload: the whole PyTorchJob, one Job of a ScaledJob) fits one flavor whose node labels and taints its pods
  accept (Kueue assigns one flavor per resource group to a pod set: pkg/scheduler/flavorassigner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from components.kueue import CONFIG_KEY, CONFIG_MAP, QUEUE_LABEL
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding, Modeled
from verify.simulate.nodes import NodeGroup
from verify.simulate.scheduling import _show, pod_requests, quantity, selector_misses, untolerated
from workload_kinds import KUEUE_INTEGRATIONS as INTEGRATIONS

MODELS = (Modeled("KUEUE_VERSION", "v0.19.2"),)
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

TOLERANCE = {"cpu": 0.001, "memory": 2**20, "ephemeral-storage": 2**20}
SLACK = {"cpu": 0.15, "memory": 0.15}
"""cpu and memory quotas leave the DaemonSets a bound (catalog/node_allocatable.py GPU_NODE_DAEMONS), so they may
sit below what the DaemonSets leave free, by at most this share; GPUs, EFA devices and disk must be exact."""
"""Quotas are written in whole millicores and MiB (components/kueue.py `quantity`): a difference below one unit
is rounding."""


def _labels(item: ClusterObject) -> dict[str, str]:
    return dict((item.obj.get("metadata") or {}).get("labels") or {})


def _selects(selector: Mapping[str, Any], namespace: str) -> bool:
    """A ClusterQueue namespaceSelector (matchLabels / matchExpressions on the namespace's name label only)."""
    labels = {"kubernetes.io/metadata.name": namespace}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        present, values = expression.get("key") in labels, expression.get("values") or []
        value = labels.get(expression.get("key"))
        match expression.get("operator"):
            case "In":
                ok = value in values
            case "NotIn":
                ok = value not in values
            case "Exists":
                ok = present
            case "DoesNotExist":
                ok = not present
            case _:
                ok = False
        if not ok:
            return False
    return True


def _frameworks(objects: list[ClusterObject]) -> set[str] | None:
    for item in objects:
        if item.kind == "ConfigMap" and item.name == CONFIG_MAP:
            config = yaml.safe_load(((item.obj.get("data") or {}).get(CONFIG_KEY)) or "") or {}
            return set(((config.get("integrations") or {}).get("frameworks")) or [])
    return None


def _flavor_group(flavor: Mapping[str, Any], groups: list[NodeGroup]) -> NodeGroup | None:
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    matched = [g for g in groups if g.role == "gpu" and labels and all(g.labels.get(k) == v for k, v in labels.items())]
    return matched[0] if len(matched) == 1 else None


def _taints(taints: list[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    return {(str(t.get("key")), str(t.get("value", "")), str(t.get("effect"))) for t in taints}


def flavor_selector(pod: Mapping[str, Any], keys: set[str]) -> dict[str, Any]:
    """The pod's nodeSelector and required node affinity restricted to a flavor's label keys, as Kueue v0.19.2
    matches them (pkg/scheduler/flavorassigner/flavorassigner.go:1278-1321 `flavorSelector`): other keys are
    dropped; a term left without expressions drops the whole affinity (terms are ORed, so it matches any flavor)."""
    spec = pod.get("spec") or {}
    restricted: dict[str, Any] = {}
    selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k in keys}
    if selector:
        restricted["nodeSelector"] = selector
    required = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        expressions = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not expressions:
            terms = []
            break
        terms.append({"matchExpressions": expressions})
    if terms:
        restricted["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return {"spec": restricted}


def _flavor_selector_misses(flavor: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """Why Kueue would not assign this flavor to the pod set (flavorassigner.go:1208-1256
    `checkFlavorForPodSets`): a NoSchedule/NoExecute taint of the flavor that neither the pod's nor the flavor's
    own tolerations tolerate, or the pod's node selection (restricted to the flavor's keys) against the flavor's
    nodeLabels."""
    spec = flavor.get("spec") or {}
    labels = dict(spec.get("nodeLabels") or {})
    taints = [t for t in spec.get("nodeTaints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    with_flavor_tolerations = {"spec": {"tolerations": [*((pod.get("spec") or {}).get("tolerations") or []),
                                                        *(spec.get("tolerations") or [])]}}
    misses = [f"untolerated flavor taint {t}" for t in untolerated(taints, with_flavor_tolerations)]
    misses += [f"{miss} (flavor nodeLabels {labels})"
               for miss in selector_misses(labels, flavor_selector(pod, set(labels)))]
    return misses


def inject_flavor(pod: Mapping[str, Any], flavor: Mapping[str, Any]) -> dict[str, Any]:
    """The pod after Kueue admitted its job to `flavor`: the flavor's nodeLabels merged into its nodeSelector and
    the flavor's tolerations appended (pkg/podset/podset.go:87-88 `FromAssignment`, :181 `Merge`, called by each
    integration's `RunWithPodSetsInfo`, e.g. pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go:72)."""
    spec = dict(pod.get("spec") or {})
    flavor_spec = flavor.get("spec") or {}
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **(flavor_spec.get("nodeLabels") or {})}
    tolerations = [*(spec.get("tolerations") or [])]
    tolerations += [t for t in flavor_spec.get("tolerations") or [] if t not in tolerations]
    if tolerations:
        spec["tolerations"] = tolerations
    return {**pod, "spec": spec}


def _unit_pods(item: ClusterObject, pods: list[ExpandedPod]) -> list[tuple[ExpandedPod, int]]:
    """The pods of one Kueue Workload of `item`, with their count: a ScaledJob's Workload is one of its Jobs."""
    prefix = f"{item.kind} {item.namespace}/{item.name} "
    mine = [pod for pod in pods if pod.owner.startswith(prefix)]
    if item.kind == "ScaledJob":
        job = (item.obj.get("spec") or {}).get("jobTargetRef") or {}
        return [(pod, int(job.get("parallelism") or 1)) for pod in mine]
    return [(pod, pod.count) for pod in mine]


def fit(cq: ClusterObject, flavors: Mapping[str, ClusterObject],
        unit: list[tuple[ExpandedPod, int]]) -> tuple[dict[str, float], ClusterObject | None, list[str]]:
    """(the Workload's total requests, the first flavor Kueue would assign, why the others don't fit)."""
    total: dict[str, float] = {}
    for pod, count in unit:
        for name, value in pod_requests(pod.pod, pod.owner).items():
            if name != "pods":
                total[name] = total.get(name, 0.0) + value * count
    why: list[str] = []
    for resource_group in (cq.obj.get("spec") or {}).get("resourceGroups") or []:
        covered = set(resource_group.get("coveredResources") or [])
        undeclared = sorted(set(total) - covered)
        if undeclared:
            why.append(f"requests {', '.join(undeclared)}, which the ClusterQueue does not cover")
            continue
        for flavor_quota in resource_group.get("flavors") or []:
            flavor = flavors.get(str(flavor_quota.get("name")))
            spec = (flavor.obj.get("spec") or {}) if flavor else {}
            placement = [m for pod, _ in unit for m in _flavor_selector_misses({"spec": spec}, pod.pod)]
            quotas = {str(r.get("name")): quantity(r.get("nominalQuota"), where=str(r.get("name")))
                      for r in flavor_quota.get("resources") or []}
            short = [f"{name} {_show(name, value)} > quota {_show(name, quotas.get(name, 0.0))}"
                     for name, value in sorted(total.items()) if value > quotas.get(name, 0.0) + 1e-9]
            if flavor is not None and not placement and not short:
                return total, flavor, why
            why.append(f"flavor {flavor_quota.get('name')}: {', '.join(placement + short)}")
    return total, None, why


def admitted_pods(objects: list[ClusterObject], pods: list[ExpandedPod]) -> list[ExpandedPod]:
    """The pods as they are created once Kueue admitted their job: the assigned flavor's node labels and
    tolerations injected (`inject_flavor`), so scheduling and scale-from-zero judge what the nodes really see.
    Pods of jobs Kueue would not admit, or not queued, are returned unchanged."""
    cluster_queues = {item.name: item for item in objects if item.kind == "ClusterQueue"}
    local_queues = {(item.namespace, item.name): item for item in objects if item.kind == "LocalQueue"}
    flavors = {item.name: item for item in objects if item.kind == "ResourceFlavor"}
    assigned: dict[str, ClusterObject] = {}
    for item in objects:
        if item.kind not in INTEGRATIONS or item.source != "stack" or QUEUE_LABEL not in _labels(item):
            continue
        local = local_queues.get((item.namespace, _labels(item)[QUEUE_LABEL]))
        cq = cluster_queues.get(str((local.obj.get("spec") or {}).get("clusterQueue"))) if local else None
        if cq is None:
            continue
        _, flavor, _ = fit(cq, flavors, _unit_pods(item, pods))
        if flavor is not None:
            assigned[f"{item.kind} {item.namespace}/{item.name}"] = flavor
    return [dataclasses.replace(pod, pod=inject_flavor(pod.pod, assigned[pod.queued_job].obj))
            if pod.queued_job in assigned else pod for pod in pods]


def check(objects: list[ClusterObject], pods: list[ExpandedPod], groups: list[NodeGroup]) -> list[CheckResult]:
    cluster_queues = {item.name: item for item in objects if item.kind == "ClusterQueue"}
    local_queues = {(item.namespace, item.name): item for item in objects if item.kind == "LocalQueue"}
    flavors = {item.name: item for item in objects if item.kind == "ResourceFlavor"}
    workloads = [item for item in objects if item.kind in INTEGRATIONS and item.source == "stack"]
    queued_namespaces = {namespace for namespace, _ in local_queues}
    labelled = [item for item in workloads if QUEUE_LABEL in _labels(item)]
    if not cluster_queues and not local_queues and not labelled:
        return []
    result = CheckResult("queued")
    frameworks = _frameworks(objects)

    # Quota == what the node groups provide.
    for cq in cluster_queues.values():
        for resource_group in (cq.obj.get("spec") or {}).get("resourceGroups") or []:
            covered = list(resource_group.get("coveredResources") or [])
            for flavor_quota in resource_group.get("flavors") or []:
                subject = f"ClusterQueue {cq.name} flavor {flavor_quota.get('name')}"
                flavor = flavors.get(str(flavor_quota.get("name")))
                group = _flavor_group(flavor.obj, groups) if flavor is not None else None
                if group is None:
                    result.record(False, Finding(subject, "no ResourceFlavor of that name whose nodeLabels select "
                                                          "exactly one GPU node group",
                                                 "give each flavor its node group's labels (components/kueue.py)"))
                    continue
                misses = []
                spec = flavor.obj.get("spec") or {}
                if _taints(spec.get("nodeTaints") or []) != _taints(group.taints):
                    misses.append(f"ResourceFlavor taints {sorted(_taints(spec.get('nodeTaints') or []))} are not "
                                  f"node group {group.name}'s {sorted(_taints(group.taints))}")
                quotas = {str(r.get("name")): quantity(r.get("nominalQuota"), where=f"{subject} {r.get('name')}")
                          for r in flavor_quota.get("resources") or []}
                for name in covered:
                    # What training can get: allocatable less the DaemonSets that land on the group.
                    free = max(group.free.get(name, 0.0), 0.0)
                    expected = free * group.max_size
                    got = quotas.get(name, 0.0)
                    tolerance = TOLERANCE.get(name, 0.5)
                    taken = group.allocatable.get(name, 0.0) - free
                    if got > expected + tolerance:
                        misses.append(f"{name} nominalQuota {_show(name, got)}, but node group {group.name} leaves "
                                      f"training {_show(name, expected)} ({group.max_size} node(s) × "
                                      f"{_show(name, free)}; its DaemonSets take {_show(name, taken)} per node): "
                                      "Kueue would admit jobs the nodes can't hold")
                    elif name not in SLACK and got < expected - tolerance:
                        misses.append(f"{name} nominalQuota {_show(name, got)}, but node group {group.name} provides "
                                      f"{_show(name, expected)} ({group.max_size} node(s) × {_show(name, free)})")
                    elif name in SLACK and got < expected * (1 - SLACK[name]) - tolerance:
                        misses.append(f"{name} nominalQuota {_show(name, got)} leaves more than "
                                      f"{SLACK[name]:.0%} of node group {group.name}'s {_show(name, expected)} unused")
                result.record(not misses, Finding(subject, "; ".join(misses),
                                                  "derive the quota from the node groups (stack_config/derived.py "
                                                  "`group_quota`)") if misses else None)
                if not misses:
                    result.details.append(f"{subject}: quota = node group {group.name} × {group.max_size}")

    # Every admissible workload queued, and fitting its queue.
    for item in workloads:
        subject = f"{item.kind} {item.namespace}/{item.name}"
        queue_name = _labels(item).get(QUEUE_LABEL)
        if queue_name is None:
            if item.namespace in queued_namespaces:
                result.record(False, Finding(subject, f"no {QUEUE_LABEL} label in a namespace with a LocalQueue: "
                                                      "Kueue never sees it, so it bypasses the quota",
                                             f"label it {QUEUE_LABEL}: <LocalQueue>"))
            continue
        misses = []
        integration = INTEGRATIONS[item.kind]
        if frameworks is None or integration not in frameworks:
            misses.append(f"Kueue's config does not enable integration {integration} (enabled: "
                          f"{', '.join(sorted(frameworks or [])) or 'Kueue not installed'})")
        local = local_queues.get((item.namespace, queue_name))
        cq = cluster_queues.get(str((local.obj.get("spec") or {}).get("clusterQueue"))) if local else None
        if local is None:
            misses.append(f"no LocalQueue {item.namespace}/{queue_name}")
        elif cq is None:
            misses.append(f"LocalQueue {item.namespace}/{queue_name} names no existing ClusterQueue")
        elif not _selects((cq.obj.get("spec") or {}).get("namespaceSelector") or {}, item.namespace or ""):
            misses.append(f"ClusterQueue {cq.name}'s namespaceSelector does not select {item.namespace}")
        if misses:
            result.record(False, Finding(subject, "; ".join(misses), "enable Kueue for the stack's kind "
                                                                     "(stages/workloads.py build_kueue)"))
            continue
        assert cq is not None
        unit = _unit_pods(item, pods)
        total, assigned, why = fit(cq, flavors, unit)
        fitted = assigned.name if assigned is not None else None
        if not unit:
            why.append("no pods expanded for it")
            fitted = None
        result.record(fitted is not None, None if fitted is not None else Finding(
            f"{subject} (queue {item.namespace}/{queue_name})",
            f"does not fit ClusterQueue {cq.name} at its largest scale: {'; '.join(why) or 'no flavor'} — Kueue "
            "would keep it pending forever",
            "shrink the workload (nodes, GPUs, cpu, memory) or raise the node group's maxSize"))
        if fitted is not None:
            shown = ", ".join(f"{name} {_show(name, value)}" for name, value in sorted(total.items()))
            result.details.append(f"{subject}: one Workload ({shown}) fits flavor {fitted} of {cq.name}")
    return [result]
