"""Scale from zero: for every EKS node group at `minSize` 0, the node cluster-autoscaler imagines before it adds
one, and whether every pod meant for that group fits it. A pod that fits the real node but not the imagined one
stays Pending forever: the autoscaler never grows the group.

The template node, as cluster-autoscaler 1.34 (chart 9.52.1, appVersion 1.34.1; tag cluster-autoscaler-1.34.1,
`cluster-autoscaler/cloudprovider/aws/`) builds it:
- `auto_scaling_groups.go` / `aws_wrapper.go` `getInstanceTypesForAsgs`: the instance type is the mixed instances
  policy's first override — an EKS managed group's first `instanceTypes` entry;
- `aws_manager.go` `buildNodeFromTemplate`: capacity pods 110, cpu = the type's vCPUs, `nvidia.com/gpu` = its GPUs,
  memory = its memory, then every `k8s.io/cluster-autoscaler/node-template/resources/<name>` tag overwrites or adds
  capacity (`extractAllocatableResourcesFromAsg`, values through `resource.ParseQuantity`; an unparsable value is
  skipped); allocatable = capacity ("TODO: use proper allocatable"); no ephemeral-storage unless a tag says so;
- labels: `buildGenericLabels` (arch, os linux, instance type, region, zone, EBS CSI zone, hostname) joined with
  the `node-template/label/<key>` tags (`extractLabelsFromAsg`); taints from the `node-template/taint/<key>` tags
  whose value matches `(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)` (`extractTaintsFromAsg`);
- `simulator/node_info_utils.go` `SanitizedTemplateNodeInfoFromNodeGroup`: the DaemonSet pods that would run on the
  template node are added to it (`daemonset.GetDaemonSetPodsForNode`), so they take their share first.
Only the instance type and the ASG tags the plan creates (`aws:autoscaling/tag:Tag`, components/gpu_node_group.py
`autoscaler_tags`) are used. `buildNodeFromTemplate` may also merge the labels and taints of EKS's
DescribeNodegroup for managed groups, but only when that call succeeds (errors are logged and ignored), and it
never adds GFD's or NFD's labels: the tags must make the template right on their own.
EKS tags a managed group's ASG with `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`
itself ("Managed node groups", EKS user guide), which is what the chart's `--node-group-auto-discovery` matches.

Pods meant for a min-0 group: every non-DaemonSet pod whose selectors and tolerations admit the group's real
nodes and that fits no group with `minSize` ≥ 1 (else the scheduler places it without a scale-up).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from catalog import node_labels as nl
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from conventions.names import WHOLE_GPU_RESOURCE
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding, Modeled
from verify.simulate.nodes import NodeGroup
from verify.simulate.scheduling import fit_misses, placement_misses, pod_requests, quantity

MODELS = (Modeled("CLUSTER_AUTOSCALER_VERSION", "1.34.1"),)
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

PREFIX = "k8s.io/cluster-autoscaler/node-template/"
TEMPLATE_PODS = 110
_TAINT_VALUE = re.compile(r"(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)")


def template_node(group: NodeGroup, tags: Mapping[str, str] | None = None) -> NodeGroup:
    """The node cluster-autoscaler builds for `group` from its first instance type and its ASG `tags`
    (default: the group's own), with the landing DaemonSets not yet taken off (see `with_daemons`)."""
    tags = dict(group.asg_tags if tags is None else tags)
    instance_type = group.instance_types[0]
    facts = GPU_INSTANCE_TYPES.get(instance_type) or CPU_INSTANCE_TYPES.get(instance_type)
    if facts is None:
        raise ValueError(f"node group {group.name}: instance type {instance_type!r} is in no catalog")
    gpus = getattr(facts, "num_gpus", 0)
    capacity = {"pods": float(TEMPLATE_PODS), "cpu": float(facts.vcpus), WHOLE_GPU_RESOURCE: float(gpus),
                "memory": float(facts.memory_gib) * 2**30}
    for key, value in tags.items():
        if key.startswith(PREFIX + "resources/") and key != PREFIX + "resources/":
            try:
                capacity[key.removeprefix(PREFIX + "resources/")] = quantity(value)
            except ValueError:
                continue  # extractAllocatableResourcesFromAsg skips what ParseQuantity rejects
    labels = {nl.ARCH: facts.architecture, nl.OS: "linux", nl.INSTANCE_TYPE: instance_type, nl.REGION: group.region,
              nl.ZONE: group.zone, nl.EBS_CSI_ZONE: group.zone, nl.HOSTNAME: nl.UNKNOWN}
    labels |= {key.removeprefix(PREFIX + "label/"): value for key, value in tags.items()
               if key.startswith(PREFIX + "label/") and key != PREFIX + "label/"}
    taints = []
    for key, value in tags.items():
        if key.startswith(PREFIX + "taint/") and _TAINT_VALUE.search(value):
            taint_value, effect = value.split(":", 1)
            taints.append({"key": key.removeprefix(PREFIX + "taint/"), "value": taint_value, "effect": effect})
    return NodeGroup(name=f"{group.name} (autoscaler template)", role="template", labels=labels, taints=taints,
                     allocatable=capacity, min_size=0, max_size=group.max_size, instance_types=(instance_type,),
                     region=group.region, zone=group.zone)


def with_daemons(template: NodeGroup, pods: list[ExpandedPod]) -> NodeGroup:
    """Take the requests of the DaemonSet pods that would run on the template node off its `free`."""
    free = dict(template.allocatable)
    for pod in pods:
        if pod.daemon and not placement_misses(pod, template):
            template.daemons.append(pod.owner)
            for name, value in pod_requests(pod.pod, pod.owner).items():
                free[name] = free.get(name, 0.0) - value
    template.free = free
    return template


def autoscaler_present(objects: list[ClusterObject]) -> bool:
    """A cluster-autoscaler Deployment runs with the AWS cloud provider."""
    for item in objects:
        if item.kind != "Deployment":
            continue
        for container in ((item.obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
            words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
            if any(w.endswith("cluster-autoscaler") for w in words) and "--cloud-provider=aws" in words:
                return True
    return False


def meant_for(pod: ExpandedPod, group: NodeGroup, groups: list[NodeGroup]) -> bool:
    if pod.daemon or placement_misses(pod, group):
        return False
    return not any(g.min_size >= 1 and not fit_misses(pod, g, g.free) for g in groups)


def _fix(misses: list[str], group: NodeGroup) -> str:
    text = " ".join(misses)
    if "requests" in text:
        return (f"give node group {group.name}'s Auto Scaling group a `{PREFIX}resources/<resource>` tag for each "
                "resource the pod requests (components/gpu_node_group.py autoscaler_tags)")
    return (f"give node group {group.name}'s Auto Scaling group `{PREFIX}label/<key>` / `taint/<key>` tags for every "
            "label the pod selects and taint it must see (GFD/NFD labels never reach the template), or select the "
            "group's own labels")


def check(pods: list[ExpandedPod], groups: list[NodeGroup], objects: list[ClusterObject]) -> CheckResult:
    """`scale-from-zero` N/N: every pod meant for a min-0 EKS group fits that group's template node."""
    result = CheckResult("scale-from-zero")
    has_autoscaler = autoscaler_present(objects)
    for group in groups:
        if group.min_size > 0 or group.role not in ("gpu", "system") or not group.instance_types:
            continue
        template = with_daemons(template_node(group), pods)
        taints = ", ".join(f"{t['key']}={t['value']}:{t['effect']}" for t in template.taints) or "none"
        result.details.append(template.describe() + f"; labels {dict(sorted(template.labels.items()))}; taints "
                              + taints)
        meant = [pod for pod in pods if meant_for(pod, group, groups)]
        if not meant:
            result.details.append(f"node group {group.name}: no pod is meant for it")
        for pod in meant:
            if not has_autoscaler:
                result.record(False, Finding(f"{pod.owner} on node group {group.name}",
                                             "the group has minSize 0 and no cluster-autoscaler runs to add a node",
                                             "set the group's minSize to 1 or install the cluster-autoscaler"))
                continue
            misses = fit_misses(pod, template, template.free)
            result.record(not misses, Finding(
                f"{pod.owner} on node group {group.name}",
                "does not fit the autoscaler's template node: " + "; ".join(misses), _fix(misses, group))
                if misses else None)
    return result
