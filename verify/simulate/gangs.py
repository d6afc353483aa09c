"""`provisioned` and `topology`: all-or-nothing capacity and network placement of Kueue's gangs (components/kueue.py).

`provisioned` N/N, per queued workload whose assigned flavor carries the ProvisioningRequest admission check
(ClusterQueue `admissionChecksStrategy.onFlavors`): the check is wired end to end — the AdmissionCheck names Kueue's
provisioning controller and a ProvisioningRequestConfig of the atomic class, the cluster installs the
`provisioningrequests.autoscaling.x-k8s.io` CRD, the cluster-autoscaler runs with `--enable-provisioning-requests`
and may read ProvisioningRequests and PodTemplates — and the gang, turned into the one ProvisioningRequest Kueue
creates for it (one pod set of N pods: pkg/controller/admissionchecks/provisioning/controller.go:335 creates a
PodTemplate per merged pod set), fits N pods onto template nodes of its group within `maxSize`: the
best-effort-atomic class refuses a request the group can't hold at all (cluster-autoscaler
core/scaleup/orchestrator/orchestrator.go:217, :500 at cluster-autoscaler-1.34.1). Such a gang can never be
provisioned, so Kueue retries and deactivates it.

`topology` N/N, per queued workload whose pods ask for a topology (`kueue.x-k8s.io/podset-required-topology` /
`-preferred-topology`): its flavor references an existing Topology that has the requested level, every node of the
group carries that label (the AWS cloud provider writes it only on the instance types EC2 has a topology for:
catalog/node_labels.py), and the gang is not left waiting for nodes that never come (Kueue's TAS counts only running
nodes; with the provisioning check it assigns the topology after the nodes came: Kueue v0.19.2
site/content/en/docs/concepts/topology_aware_scheduling.md:61-67, :124-137). Real domain sizes are known only on the
running nodes (DescribeInstanceTopology). A `preferred` gang that passes those checks is admitted whatever the
domains (wider if it must: apis/kueue/v1beta2/topology_types.go:30-39) and counts as a pass; a `required` one is
admitted only if one domain holds it (:24-28), which nothing AWS documents guarantees (docs/scheduling.md), so it is
an assumption, not a pass. Each names the level and how many nodes at the gang's largest.
"""

from __future__ import annotations

from typing import Any

from catalog import node_labels as nl
from components.cluster_autoscaler import PROVISIONING_RULES
from components.kueue import (
    ATOMIC_CLASS,
    PROVISIONING_CONTROLLER,
    QUEUE_LABEL,
    TOPOLOGY_LEVEL_ANNOTATIONS,
)
from verify.render import ClusterObject
from verify.simulate.autoscaler import template_node, with_daemons
from verify.simulate.model import Assumption, CheckResult, ExpandedPod, Finding, Modeled
from verify.simulate.nodes import NodeGroup
from verify.simulate.queue import _flavor_group, _labels, _unit_pods, fit
from verify.simulate.scheduling import placement_misses, pod_requests
from workload_kinds import KUEUE_INTEGRATIONS as INTEGRATIONS

MODELS = (Modeled("KUEUE_VERSION", "v0.19.2"),)
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

PROVISIONING_CRD = "provisioningrequests.autoscaling.x-k8s.io"


def _spec(item: ClusterObject | None) -> dict[str, Any]:
    return dict((item.obj.get("spec") or {}) if item is not None else {})


def _autoscaler_ready(objects: list[ClusterObject]) -> list[str]:
    """Why the cluster-autoscaler would not serve ProvisioningRequests (empty: it would)."""
    misses = []
    if not any(item.kind == "CustomResourceDefinition" and item.name == PROVISIONING_CRD for item in objects):
        misses.append(f"the cluster installs no {PROVISIONING_CRD} CRD (vendor/crds, catalog/versions.py)")
    deployments = [item for item in objects if item.kind == "Deployment" and "cluster-autoscaler" in (item.name or "")]
    args = [str(a) for item in deployments for c in (_spec(item).get("template") or {}).get("spec", {}).get(
        "containers") or [] for a in [*(c.get("command") or []), *(c.get("args") or [])]]
    if "--enable-provisioning-requests=true" not in args:
        misses.append("the cluster-autoscaler runs without --enable-provisioning-requests=true "
                      "(config/flags/flags.go:214: off by default)")
    rules = [rule for item in objects if item.kind == "ClusterRole" and "cluster-autoscaler" in (item.name or "")
             for rule in item.obj.get("rules") or []]
    for wanted in PROVISIONING_RULES:
        if not any(set(wanted["resources"]) <= set(rule.get("resources") or [])
                   and set(wanted["apiGroups"]) <= set(rule.get("apiGroups") or [])
                   and set(wanted["verbs"]) <= set(rule.get("verbs") or []) for rule in rules):
            misses.append(f"the cluster-autoscaler's ClusterRole lacks {wanted['resources']} "
                          "(cluster-autoscaler FAQ.md:581-597)")
    return misses


def _checked_flavors(cq: ClusterObject, objects: list[ClusterObject]) -> tuple[set[str], list[str]]:
    """Flavors of the ClusterQueue with an atomic ProvisioningRequest check, and what is wrong with the checks."""
    checks = {item.name: item for item in objects if item.kind == "AdmissionCheck"}
    configs = {item.name: item for item in objects if item.kind == "ProvisioningRequestConfig"}
    flavors: set[str] = set()
    misses: list[str] = []
    for rule in (_spec(cq).get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        check = checks.get(str(rule.get("name")))
        if check is None:
            misses.append(f"AdmissionCheck {rule.get('name')} does not exist (the ClusterQueue stays inactive)")
            continue
        spec = _spec(check)
        if spec.get("controllerName") != PROVISIONING_CONTROLLER:
            continue
        parameters = spec.get("parameters") or {}
        config = configs.get(str(parameters.get("name")))
        if parameters.get("kind") != "ProvisioningRequestConfig" or config is None:
            misses.append(f"AdmissionCheck {check.name} names no existing ProvisioningRequestConfig")
            continue
        if _spec(config).get("provisioningClassName") != ATOMIC_CLASS:
            misses.append(f"ProvisioningRequestConfig {config.name} uses class "
                          f"{_spec(config).get('provisioningClassName')!r}, not {ATOMIC_CLASS}")
            continue
        flavors |= {str(name) for name in rule.get("onFlavors") or []}
    return flavors, misses


def _nodes_needed(unit: list[tuple[ExpandedPod, int]], template: NodeGroup) -> tuple[int, int, list[str]]:
    """(pods, template nodes the gang needs, why a pod fits no template node at all)."""
    pods = sum(count for _, count in unit)
    nodes = 0
    misses: list[str] = []
    for pod, count in unit:
        requests = {k: v for k, v in pod_requests(pod.pod, pod.owner).items() if k != "pods"}
        placed = placement_misses(pod, template)
        per_node = min((int(template.free.get(name, 0.0) // value) for name, value in requests.items() if value > 0),
                       default=count)
        if placed or per_node < 1:
            misses.append(f"{pod.owner}: " + ("; ".join(placed) or "its requests exceed a template node's free "
                                              "resources"))
            continue
        nodes += -(-count // per_node)
    return pods, nodes, misses


def _requested_level(unit: list[tuple[ExpandedPod, int]]) -> tuple[str, str] | None:
    """(mode, node label) the gang's pods ask Kueue's TAS for; None when they ask nothing."""
    for pod, _ in unit:
        annotations = (pod.pod.get("metadata") or {}).get("annotations") or {}
        for mode, key in TOPOLOGY_LEVEL_ANNOTATIONS.items():
            if key in annotations:
                return mode, str(annotations[key])
    return None


def check(objects: list[ClusterObject], pods: list[ExpandedPod], groups: list[NodeGroup]) -> list[CheckResult]:
    cluster_queues = {item.name: item for item in objects if item.kind == "ClusterQueue"}
    local_queues = {(item.namespace, item.name): item for item in objects if item.kind == "LocalQueue"}
    flavors = {item.name: item for item in objects if item.kind == "ResourceFlavor"}
    topologies = {item.name: item for item in objects if item.kind == "Topology"}
    provisioned, topology = CheckResult("provisioned"), CheckResult("topology")
    autoscaler_misses = _autoscaler_ready(objects)
    for item in objects:
        if item.kind not in INTEGRATIONS or item.source != "stack" or QUEUE_LABEL not in _labels(item):
            continue
        local = local_queues.get((item.namespace, _labels(item)[QUEUE_LABEL]))
        cq = cluster_queues.get(str(_spec(local).get("clusterQueue"))) if local else None
        if cq is None:
            continue  # the `queued` check reports it
        unit = _unit_pods(item, pods)
        _, flavor, _ = fit(cq, flavors, unit)
        if flavor is None or not unit:
            continue  # the `queued` check reports it
        subject = f"{item.kind} {item.namespace}/{item.name}"
        group = _flavor_group(flavor.obj, groups)
        checked, check_misses = _checked_flavors(cq, objects)
        atomic = flavor.name in checked
        if atomic:
            misses = [*check_misses, *autoscaler_misses]
            if group is None:
                misses.append(f"flavor {flavor.name} selects no single GPU node group")
                pods_n = nodes = 0
            else:
                template = with_daemons(template_node(group), pods)
                pods_n, nodes, fit_misses = _nodes_needed(unit, template)
                misses += fit_misses
                if not fit_misses and nodes > group.max_size:
                    misses.append(f"one ProvisioningRequest of {pods_n} pods needs {nodes} template nodes of node "
                                  f"group {group.name}, whose maxSize is {group.max_size}: the atomic class never "
                                  "scales it up, so the gang can never be provisioned")
            provisioned.record(not misses, Finding(subject, "; ".join(misses),
                                                   "raise the group's maxSize or shrink the gang; wire the check "
                                                   "(components/kueue.py, components/cluster_autoscaler.py)")
                               if misses else None)
            if not misses and group is not None:
                provisioned.details.append(
                    f"{subject}: one ProvisioningRequest ({ATOMIC_CLASS}) of {pods_n} pods → {nodes} node(s) of "
                    f"group {group.name} (maxSize {group.max_size}), flavor {flavor.name}")
        requested = _requested_level(unit)
        if requested is None:
            continue
        mode, label = requested
        misses = []
        topology_name = _spec(flavor).get("topologyName")
        levels = [str(level.get("nodeLabel")) for level in _spec(topologies.get(str(topology_name))).get("levels")
                  or []]
        if topology_name is None:
            misses.append(f"flavor {flavor.name} references no Topology (spec.topologyName)")
        elif str(topology_name) not in topologies:
            misses.append(f"Topology {topology_name} does not exist")
        elif label not in levels:
            misses.append(f"Topology {topology_name} has no level {label} (levels {levels})")
        nodes = 0
        if group is not None:
            if label not in group.labels:
                lacking = [t for t in group.instance_types if nl.network_topology_layers(t) < 3] or group.instance_types
                misses.append(f"the nodes of group {group.name} ({'/'.join(lacking)}) carry no {label} label "
                              "(catalog/node_labels.py: EC2 has no topology for that type)")
            template = with_daemons(template_node(group), pods)
            _, nodes, fit_misses = _nodes_needed(unit, template)
            misses += fit_misses
            if not atomic and group.min_size < nodes:
                misses.append(f"group {group.name} runs {group.min_size} node(s) and the gang needs {nodes}: TAS "
                              "counts only running nodes and nothing provisions more before admission")
        else:
            misses.append(f"flavor {flavor.name} selects no single GPU node group")
        if misses:
            topology.record(False, Finding(subject, f"{mode} topology {label}: " + "; ".join(misses),
                                           "use instance types EC2 has a topology for, or kueue.topology / "
                                           "workloads.<name>.topology 'none'"))
            continue
        assert group is not None  # a flavor without a group is a miss above
        placed = "placed after provisioning" if atomic else "on running nodes"
        if mode == "required":
            topology.assume(Assumption(
                subject, f"one {label} domain holds the {nodes} node(s) of group {group.name} its required topology "
                         f"needs at its largest (Topology {topology_name}, {placed})",
                "ec2:DescribeInstanceTopology on the running instances: no placement group, reservation or Capacity "
                "Block is documented to keep a group under one network node, and Kueue never admits the gang if no "
                "domain holds it ('preferred' does not depend on it)"))
        else:
            topology.record(True)
            topology.details.append(f"{subject}: {mode} one {label} domain of Topology {topology_name}: {nodes} "
                                    f"node(s) of group {group.name} at its largest ({placed})")
    return [result for result in (provisioned, topology) if result.total or result.assumptions]
