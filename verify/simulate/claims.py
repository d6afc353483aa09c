"""Claims bound: does every PersistentVolumeClaim a pod mounts get a volume that pod can use?

For each claim of the rendered cluster that some pod mounts:
- a claim naming a PersistentVolume (`volumeName`, static provisioning): the volume exists, has the claim's class,
  and offers every access mode the claim asks for (the PV controller binds only then: kubernetes
  pkg/controller/volume/persistentvolume/pv_controller.go `syncUnboundClaim` → `checkVolumeSatisfyClaim`);
- a dynamic claim: its StorageClass exists (on EKS no class is default since 1.30, so a claim without one, or naming
  one the stack doesn't create, stays Pending); the provisioner supports the access modes (aws-ebs-csi-driver
  v1.51.1 pkg/driver/controller.go:707-727 `isValidCapability`: SINGLE_NODE_WRITER — ReadWriteOnce — for file
  systems, MULTI_NODE_MULTI_WRITER only for raw block volumes); and the zone: an EBS volume lives in one zone, so
  with `volumeBindingMode: Immediate` it is created before the pod is scheduled, in a zone the pod may have no
  node in, unless every node group the pod can land on sits in one known zone (or `allowedTopologies` pins it
  there); `WaitForFirstConsumer` creates it in the zone of the node the scheduler picked (Kubernetes docs, Storage
  Classes, "Volume binding mode"). With `WaitForFirstConsumer` the volume is created in a zone of a node group the
  pod lands on (the zones of its subnets), and it stays there: its replacement pod can only run in that zone (the
  PV's node affinity). So the zones a class's `allowedTopologies` names must be zones of those groups' subnets,
  and every zone the volume can be created in must be one where a group the pod lands on keeps nodes
  (`minSize` >= 1): a volume made while the pod ran on a scale-from-zero group in a zone the system group lacks
  strands the next pod (issue 41);
- a ReadWriteOnce volume attaches to one node: a Deployment mounting it must replace its pod with `Recreate` (a
  rolling update starts the new pod first, which can't attach: "Multi-Attach error") and run one replica.
Claims of a class the site already has (an adopted cluster) can't be judged offline: recorded as assumptions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verify.plan_record import Plan
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding

NAME = "claims bound"
EBS = "ebs.csi.aws.com"
ACCESS_MODES: dict[str, frozenset[str]] = {EBS: frozenset({"ReadWriteOnce"})}
"""File-system access modes a dynamic provisioner supports (see the module docstring)."""
ZONAL = frozenset({EBS})
"""Provisioners whose volumes live in one availability zone."""
UNKNOWN_ZONE = "unknown"


def _claims_mounted(pods: Sequence[ExpandedPod]) -> dict[tuple[str, str], list[ExpandedPod]]:
    found: dict[tuple[str, str], list[ExpandedPod]] = {}
    for pod in pods:
        for volume in pod.pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                found.setdefault((pod.namespace, str(claim)), []).append(pod)
    return found


def _owner_object(objects: Sequence[ClusterObject], owner: str) -> ClusterObject | None:
    parts = owner.split()
    if len(parts) < 2 or "/" not in parts[1]:
        return None
    kind, (namespace, name) = parts[0], parts[1].split("/", 1)
    return next((o for o in objects if o.kind == kind and o.namespace == namespace and o.name == name), None)


def check(plan: Plan, objects: Sequence[ClusterObject], pods: Sequence[ExpandedPod], groups: Sequence[Any],
          lands: Callable[[ExpandedPod, Any], bool], eks: bool) -> list[CheckResult]:
    mounted = _claims_mounted(pods)
    if not mounted:
        return []
    result = CheckResult(NAME)
    claims = {(o.namespace, o.name): o.obj for o in objects if o.kind == "PersistentVolumeClaim"}
    classes = {o.name: o.obj for o in objects if o.kind == "StorageClass"}
    volumes = {o.name: o.obj for o in objects if o.kind == "PersistentVolume"}
    for (namespace, name), consumers in sorted(mounted.items()):
        subject = f"PersistentVolumeClaim {namespace}/{name}"
        claim = claims.get((namespace, name))
        if claim is None:  # volumes writable reports it (the pod stays Pending)
            continue
        problem = _problem(claim, classes, volumes, consumers, objects, groups, lands, eks, result.details, subject)
        result.record(problem is None, None if problem is None else Finding(subject, *problem))
    return [result]


def _problem(claim: Mapping[str, Any], classes: Mapping[str, Any], volumes: Mapping[str, Any],
             consumers: Sequence[ExpandedPod], objects: Sequence[ClusterObject], groups: Sequence[Any],
             lands: Callable[[ExpandedPod, Any], bool], eks: bool, details: list[str],
             subject: str) -> tuple[str, str] | None:
    spec = claim.get("spec") or {}
    modes = set(spec.get("accessModes") or [])
    class_name = spec.get("storageClassName")
    if spec.get("volumeName"):
        volume = volumes.get(str(spec["volumeName"]))
        if volume is None:
            return (f"names PersistentVolume {spec['volumeName']}, which is not in the cluster",
                    "create the PersistentVolume with the claim")
        pv_spec = volume.get("spec") or {}
        if class_name and pv_spec.get("storageClassName") != class_name:
            return (f"asks class {class_name!r}, PersistentVolume {spec['volumeName']} has "
                    f"{pv_spec.get('storageClassName')!r}", "give both the same storageClassName")
        missing = sorted(modes - set(pv_spec.get("accessModes") or []))
        if missing:
            return (f"asks access modes {missing} PersistentVolume {spec['volumeName']} doesn't offer",
                    "ask only the volume's access modes")
        details.append(f"{subject}: bound to PersistentVolume {spec['volumeName']} (static)")
        return None
    if not class_name:
        if eks:
            return ("names no StorageClass and EKS marks none default: the claim stays Pending",
                    "set storageClassName to a class the stack creates")
        details.append(f"{subject}: the site's default StorageClass (assumed to exist)")
        return None
    storage_class = classes.get(str(class_name))
    if storage_class is None:
        if eks:
            return (f"StorageClass {class_name!r} is not in the cluster: the claim stays Pending",
                    "create the StorageClass in the stack or name one it creates")
        details.append(f"{subject}: StorageClass {class_name} is the site's (assumed to exist)")
        return None
    provisioner = str(storage_class.get("provisioner"))
    supported = ACCESS_MODES.get(provisioner)
    if supported is not None and not modes <= supported:
        return (f"asks {sorted(modes)} of {provisioner}, which provisions file systems only as "
                f"{sorted(supported)}", f"ask {sorted(supported)} (or use a shared file system for many writers)")
    problem = _zone_problem(storage_class, provisioner, consumers, groups, lands, details, subject)
    if problem:
        return problem
    if "ReadWriteOnce" in modes:
        for pod in consumers:
            owner = _owner_object(objects, pod.owner)
            if owner is None or owner.kind != "Deployment":
                continue
            owner_spec = owner.obj.get("spec") or {}
            strategy = (owner_spec.get("strategy") or {}).get("type", "RollingUpdate")
            if strategy != "Recreate" or int(owner_spec.get("replicas", 1)) > 1:
                return (f"ReadWriteOnce, mounted by {pod.owner} with strategy {strategy} and "
                        f"{owner_spec.get('replicas', 1)} replica(s): a second pod can't attach the volume "
                        "(Multi-Attach error)", "run one replica with strategy Recreate")
    binding = storage_class.get("volumeBindingMode", "Immediate")
    details.append(f"{subject}: {provisioner} {sorted(modes)} in class {class_name} ({binding}), mounted by "
                   + ", ".join(sorted({pod.owner for pod in consumers})))
    return None


def _zone_problem(storage_class: Mapping[str, Any], provisioner: str, consumers: Sequence[ExpandedPod],
                  groups: Sequence[Any], lands: Callable[[ExpandedPod, Any], bool], details: list[str],
                  subject: str) -> tuple[str, str] | None:
    if provisioner not in ZONAL:
        return None
    allowed = {str(value) for term in storage_class.get("allowedTopologies") or []
               for expression in term.get("matchLabelExpressions") or []
               if str(expression.get("key", "")).endswith("zone") for value in expression.get("values") or []}
    if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
        landing = [group for group in groups if any(lands(pod, group) for pod in consumers)]
        return _replacement_zone_problem(allowed, landing, provisioner, details, subject)
    zones = {str(getattr(group, "zone", UNKNOWN_ZONE)) for pod in consumers for group in groups if lands(pod, group)}
    if len(allowed) == 1 and (not zones or zones == allowed):
        return None
    return (f"volumeBindingMode Immediate creates the zonal {provisioner} volume before its pod is scheduled; the "
            f"pod's node groups are in zone(s) {sorted(zones) or ['none']}"
            + (f", the class allows {sorted(allowed)}" if allowed else ""),
            "use volumeBindingMode WaitForFirstConsumer")


def _replacement_zone_problem(allowed: set[str], landing: Sequence[Any], provisioner: str, details: list[str],
                              subject: str) -> tuple[str, str] | None:
    """`WaitForFirstConsumer`: the zones the class allows and the zones the volume can be created in, against the
    zones of the node groups the pod lands on (see the module docstring)."""
    if not landing or any(not getattr(group, "zones", ()) for group in landing):
        details.append(f"{subject}: the zones of the node groups its pod lands on are unknown offline: assumed to "
                       "keep a node in the volume's zone")
        return None
    shown = ", ".join(f"{group.name} {list(group.zones)} (min {group.min_size})" for group in landing)
    reachable = {zone for group in landing for zone in group.zones}
    if allowed and not allowed <= reachable:
        return (f"allowedTopologies names zone(s) {sorted(allowed - reachable)} where no node group its pod lands on "
                f"has a subnet ({shown}): a {provisioner} volume is zonal and the pod can't follow it there",
                "allow only zones of those node groups' subnets (or drop allowedTopologies)")
    kept = {zone for group in landing if group.min_size >= 1 for zone in group.zones}
    stranded = (reachable & allowed if allowed else reachable) - kept
    if stranded:
        return (f"the {provisioner} volume can be created in zone(s) {sorted(stranded)}, where no node group its pod "
                f"lands on keeps a node ({shown}): once that node goes, the replacement pod can't run elsewhere "
                "(the volume's node affinity) and waits for a scale-up there",
                "keep the pod on node groups with minSize >= 1 (nodeSelector), spanning every zone it can land in, "
                "or limit the class's allowedTopologies to their zones")
    thin = [f"{group.name} (min {group.min_size} over {len(group.zones)} zones)" for group in landing
            if 1 <= group.min_size < len(group.zones)]
    details.append(f"{subject}: its volume is created in one of {sorted(reachable & allowed if allowed else reachable)}"
                   f", each a zone of a node group keeping nodes: {shown}"
                   + (f"; assumed: {', '.join(thin)} has a node in the volume's zone when its pod is replaced"
                      if thin else ""))
    return None
