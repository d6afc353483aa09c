"""The stack's node groups as the scheduler would see their nodes: labels, taints, allocatable, free.

EKS (`cluster.mode: eks`): every `aws:eks/nodeGroup:NodeGroup` of the plan (the system group and each GPU group):
its `labels`, `taints`, `instanceTypes`, `scalingConfig`, `capacityType`, `amiType`, the root volume of its launch
template (the node filesystem) and the EFA interfaces the template declares; allocatable per instance type from
catalog/gpu_instances.py + cpu_instances.py through catalog/node_allocatable.py (nodeadm's kube-reserved and
eviction thresholds) with catalog/eks_max_pods.py; a group mixing types is as small as its smallest member.
Existing clusters (`existing`): each configured GPU group's nodes carry what the stack declares (`nodeSelector`, or
`gtp.dev/node-group: <name>`), `kubernetes.io/arch` and the declared GPUs; their CPU, memory, disk and pod slots
can't be known offline and are not checked; a `site` group stands for the site's other nodes (no GPUs, no taints).

Labels written by add-ons come from catalog/node_labels.py, and only where the add-on's DaemonSet lands: NFD's
worker, then GFD (with the node's device-plugin config), in that order, since GFD's placement may use NFD's labels.
Extended resources come from the device plugins that land: the NVIDIA plugin advertises `nvidia.com/gpu` = GPUs,
or, under a config that shares with `renameByDefault` (api/config/v1/replicas.go `UnmarshalJSON` sets
`rename: <name>.shared`), `nvidia.com/gpu.shared` = GPUs × replicas and no whole GPU; the EFA plugin advertises
`vpc.amazonaws.com/efa` = the launch template's EFA interfaces. Bottlerocket NVIDIA AMIs run their own plugin
(whole GPUs). Finally every DaemonSet pod that lands takes its requests off `free`.
EKS-managed add-ons run DaemonSets that are not objects of cluster.yaml: the VPC CNI's `aws-node` is added on EKS
(`AWS_NODE`, from aws/amazon-vpc-cni-k8s v1.20.4 `charts/aws-vpc-cni/values.yaml`, the pinned add-on's build:
requests cpu 25m, tolerates everything, linux amd64/arm64); kube-proxy, the pod identity agent and the CSI node
plugins are not modelled (their manifests are EKS's; their requests are tens of millicores).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from catalog import node_labels as nl
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import GPU_INSTANCE_TYPES, bottlerocket
from catalog.node_allocatable import instance_allocatable, smallest
from conventions.kubernetes import EKS_TAINT_EFFECTS
from conventions.names import (
    EFA_RESOURCE,
    NODE_GROUP_LABEL,
    NVIDIA_RUNTIME_HANDLER,
    SHARED_GPU_RESOURCE,
    WHOLE_GPU_RESOURCE,
)
from stack_config.derived import node_default_runtime
from stack_config.targets import ADOPTED_KUBERNETES, IN_AWS
from verify.plan_record import COMPUTED, Plan, Resource
from verify.render import ClusterObject
from verify.simulate import runtime
from verify.simulate.model import ExpandedPod
from verify.simulate.scheduling import Resources, _show, placement_misses, pod_requests

NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG_TYPE = "aws:autoscaling/tag:Tag"
SUBNET_TYPE = "aws:ec2/subnet:Subnet"
DEFAULT_CONFIG_ENV = "DEFAULT_CONFIG"


@dataclass(frozen=True)
class Sharing:
    strategy: str
    """`none`, `mps`, `time-slicing`."""
    replicas: int
    renamed: bool
    resource: str
    """The resource the plugin advertises for the node's GPUs."""


@dataclass
class NodeGroup:
    """One node group: what each of its nodes offers."""

    name: str
    role: str
    """`gpu`, `system` or `site` (an existing cluster's other nodes)."""
    labels: dict[str, str]
    taints: list[dict[str, str]]
    """`{key, value, effect}` with Kubernetes effect names."""
    allocatable: Resources
    min_size: int = 0
    max_size: int = 1
    instance_types: tuple[str, ...] = ()
    capacity_type: str = ""
    ami_type: str = ""
    gpu_model: str | None = None
    num_gpus: int = 0
    gpu_memory_gib: float = 0.0
    num_efa: int = 0
    """EFA interfaces of the launch template (what the EFA plugin would advertise)."""
    asg_tags: dict[str, str] = field(default_factory=dict)
    """The Auto Scaling group's tags the plan creates (`aws:autoscaling/tag:Tag`), key → value."""
    region: str = nl.UNKNOWN
    zone: str = nl.UNKNOWN
    zones: tuple[str, ...] = ()
    """The availability zones of its subnets, where its nodes can start (EKS: the subnets it depends on); empty when
    unknown offline."""
    daemons: list[str] = field(default_factory=list)
    """Owners of the DaemonSet pods that land on its nodes."""
    free: Resources = field(default_factory=dict)
    """Allocatable minus the DaemonSet pods' requests."""
    notes: list[str] = field(default_factory=list)
    default_runtime: str = NVIDIA_RUNTIME_HANDLER
    """containerd's default runtime handler on its nodes (verify/simulate/runtime.py says whose)."""
    runtime_handlers: frozenset[str] = frozenset({"runc", NVIDIA_RUNTIME_HANDLER})
    """The handlers its containerd has."""
    sharing: Sharing | None = None
    """How the NVIDIA device plugin landing here shares its GPUs (None: no plugin of ours advertises them)."""

    def describe(self) -> str:
        shown = ", ".join(f"{name} {_show(name, value)}" for name, value in sorted(self.free.items()))
        types = f" {'/'.join(self.instance_types)}" if self.instance_types else ""
        return (f"node group {self.name} ({self.role}{types}, {self.min_size}-{self.max_size} nodes): free per node "
                f"{shown or 'nothing'}; {len(self.daemons)} DaemonSet pod(s)"
                + "".join(f"; {note}" for note in self.notes))


# --- per instance type: catalog/node_allocatable.py (shared with components/kueue.py's quotas) -----------------


def _launch_template(plan: Plan, node_group: Resource) -> Resource | None:
    for urn in node_group.depends_on:
        if f"${LAUNCH_TEMPLATE_TYPE}::" in urn:
            return plan.get(urn)
    return None


def _group_name(node_group: Resource) -> str:
    labels = node_group.inputs.get("labels") or {}
    if NODE_GROUP_LABEL in labels:
        return str(labels[NODE_GROUP_LABEL])
    return node_group.name.removeprefix("eks-").removesuffix("-nodes")


def eks_groups(plan: Plan) -> list[NodeGroup]:
    config = plan.config
    region = getattr(config, "region", nl.UNKNOWN)
    groups = []
    for resource in plan.by_type(NODE_GROUP_TYPE):
        inputs = resource.inputs
        name = _group_name(resource)
        template = _launch_template(plan, resource)
        template_inputs = template.inputs if template else {}
        mappings = template_inputs.get("blockDeviceMappings") or [{}]
        disk = float(((mappings[0] or {}).get("ebs") or {}).get("volumeSize") or inputs.get("diskSize") or 20)
        num_efa = sum(1 for nic in template_inputs.get("networkInterfaces") or [] if nic.get("interfaceType") == "efa")
        types = tuple(inputs.get("instanceTypes") or ())
        scaling = inputs.get("scalingConfig") or {}
        gpu = [GPU_INSTANCE_TYPES[t] for t in types if t in GPU_INSTANCE_TYPES]
        first = GPU_INSTANCE_TYPES.get(types[0]) if types else None
        group_config = (getattr(config, "gpu_node_groups", None) or {}).get(name)
        zone = getattr(group_config, "availability_zone", None) or nl.UNKNOWN
        architecture = first.architecture if first else (CPU_INSTANCE_TYPES[types[0]].architecture if types else
                                                         "amd64")
        labels = {**nl.kubernetes_labels(architecture=architecture),
                  **nl.eks_labels(node_group_name=nl.UNKNOWN,
                                  capacity_type=str(inputs.get("capacityType", "ON_DEMAND")),
                                  instance_type=types[0] if len(types) == 1 else nl.UNKNOWN, region=region, zone=zone),
                  **{str(k): str(v) for k, v in (inputs.get("labels") or {}).items()}}
        # The AWS cloud provider's network-topology labels, written at registration on the types EC2 has a topology
        # for (catalog/node_labels.py); a mixed group only when every type has them. Not on the autoscaler's
        # template node (verify/simulate/autoscaler.py `template_node`: ASG tags only), as upstream.
        if types and all(nl.network_topology_layers(t) >= 3 for t in types):
            labels.update(nl.topology_labels(types[0]))
        taints = [{"key": str(t["key"]), "value": str(t.get("value") or ""), "effect": EKS_TAINT_EFFECTS[t["effect"]]}
                  for t in inputs.get("taints") or []]
        tags = {str(tag.inputs["tag"]["key"]): str(tag.inputs["tag"]["value"]) for tag in plan.by_type(ASG_TAG_TYPE)
                if resource.urn in tag.depends_on}
        groups.append(NodeGroup(
            # The NVIDIA AMIs make `nvidia` containerd's default (verify/simulate/runtime.py); CPU AMIs have runc only.
            default_runtime=NVIDIA_RUNTIME_HANDLER if gpu else "runc",
            runtime_handlers=frozenset({"runc", NVIDIA_RUNTIME_HANDLER} if gpu else {"runc"}),
            name=name, role="gpu" if gpu else "system", labels=labels, taints=taints,
            allocatable=smallest(instance_allocatable(t, disk) for t in types),
            min_size=int(scaling.get("minSize", 0)), max_size=int(scaling.get("maxSize", 1)), instance_types=types,
            capacity_type=str(inputs.get("capacityType", "ON_DEMAND")), ami_type=str(inputs.get("amiType", "")),
            gpu_model=first.gpu_model if first else None, num_gpus=min((g.num_gpus for g in gpu), default=0),
            gpu_memory_gib=float(first.gpu_memory_gib) if first else 0.0, num_efa=num_efa, asg_tags=tags,
            region=region, zone=zone, zones=_subnet_zones(plan, resource)))
    return groups


def _subnet_zones(plan: Plan, node_group: Resource) -> tuple[str, ...]:
    """The zones of the subnets a node group depends on (its `subnetIds` are unknown in a preview, its dependencies
    are not); a subnet whose zone the plan doesn't know makes the whole answer unknown (empty)."""
    recorded = {resource.urn: resource for resource in plan.by_type(SUBNET_TYPE)}
    zones = [recorded[urn].inputs.get("availabilityZone") for urn in node_group.depends_on if urn in recorded]
    known = {zone for zone in zones if isinstance(zone, str) and zone and zone != COMPUTED}
    if not zones or len(known) != len(set(zones)):
        return ()
    return tuple(sorted(known))


# --- existing clusters from the stack config ------------------------------------------------------------------
def existing_groups(config: Any) -> list[NodeGroup]:
    unknown = {"cpu": math.inf, "memory": math.inf, "ephemeral-storage": math.inf, "pods": math.inf}
    note = "an adopted cluster: cpu, memory, disk and pod slots unknown offline, not checked"
    groups = []
    for name, group in sorted(config.gpu_node_groups.items()):
        selector = dict(group.node_selector) or {NODE_GROUP_LABEL: name}
        labels = {**nl.kubernetes_labels(architecture=group.architecture or "amd64"), **selector}
        groups.append(NodeGroup(
            default_runtime=node_default_runtime(config) or "runc",
            name=name, role="gpu", labels=labels, taints=[], allocatable=dict(unknown), min_size=group.min_size,
            max_size=group.max_size, gpu_model=group.gpu_model, num_gpus=group.gpus_per_node or 0,
            gpu_memory_gib=0.0, notes=[note + "; labels: the declared nodeSelector"]))
    groups.append(NodeGroup(name="site", role="site", labels=nl.kubernetes_labels(architecture=nl.UNKNOWN),
                            default_runtime="runc", runtime_handlers=frozenset({"runc"}),
                            taints=[], allocatable=dict(unknown), min_size=0, max_size=1,
                            notes=["the site's other nodes: no GPUs, no taints assumed; " + note]))
    return groups


# --- add-ons: who lands where, and what they add --------------------------------------------------------------
def _commands(pod: ExpandedPod) -> list[str]:
    spec = pod.pod.get("spec") or {}
    return [str((c.get("command") or [""])[0]) for c in spec.get("containers") or []]


def _images(pod: ExpandedPod) -> list[str]:
    spec = pod.pod.get("spec") or {}
    return [str(c.get("image") or "") for c in spec.get("containers") or []]


def daemon_named(pods: Iterable[ExpandedPod], command: str) -> list[ExpandedPod]:
    """DaemonSet pods whose app container runs `command` (GFD, the device plugin and NFD's worker share images)."""
    return [p for p in pods if p.daemon and command in _commands(p)]


def _lands(pod: ExpandedPod, group: NodeGroup) -> bool:
    return not placement_misses(pod, group)


def parse_sharing(text: str, where: str) -> Sharing:
    """One device-plugin config file (api/config/v1): how it shares `nvidia.com/gpu`."""
    document = yaml.safe_load(text) or {}
    sharing = document.get("sharing") or {}
    for key, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):
        block = sharing.get(key)
        if not block:
            continue
        for entry in block.get("resources") or []:
            if entry.get("name") != WHOLE_GPU_RESOURCE:
                continue
            replicas = int(entry.get("replicas", 1))
            rename = entry.get("rename") or (WHOLE_GPU_RESOURCE + ".shared" if block.get("renameByDefault") else "")
            return Sharing(strategy, replicas, bool(rename), str(rename or WHOLE_GPU_RESOURCE))
        raise ValueError(f"{where}: sharing.{key} does not replicate {WHOLE_GPU_RESOURCE}")
    return Sharing("none", 1, False, WHOLE_GPU_RESOURCE)


def plugin_configs(plugin: ExpandedPod, objects: list[ClusterObject]) -> tuple[dict[str, Sharing], str | None]:
    """The named configs the device-plugin pod mounts (its ConfigMap) and its default config name."""
    spec = plugin.pod.get("spec") or {}
    default = None
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for env in container.get("env") or []:
            if env.get("name") == DEFAULT_CONFIG_ENV and env.get("value"):
                default = str(env["value"])
    names = {str((v.get("configMap") or {}).get("name")) for v in spec.get("volumes") or [] if v.get("configMap")}
    configs: dict[str, Sharing] = {}
    for item in objects:
        if item.kind == "ConfigMap" and item.name in names and item.namespace == plugin.namespace:
            for key, text in sorted((item.obj.get("data") or {}).items()):
                configs[key] = parse_sharing(str(text), f"ConfigMap {item.namespace}/{item.name} data.{key}")
    return configs, default


def _node_sharing(group: NodeGroup, configs: Mapping[str, Sharing], default: str | None) -> Sharing:
    name = group.labels.get(nl.DEVICE_PLUGIN_CONFIG, default)
    if name is None or name not in configs:
        # config-manager without a usable name: the plugin runs on its flags alone (no sharing).
        return Sharing("none", 1, False, WHOLE_GPU_RESOURCE)
    return configs[name]


def enrich(groups: list[NodeGroup], pods: list[ExpandedPod], objects: list[ClusterObject], *,
           site_nfd: bool = False, classes: Mapping[str, str] | None = None) -> list[NodeGroup]:
    """Add the add-ons' labels and resources, then take the landing DaemonSets' requests off `free` (in place).

    `site_nfd`: an adopted cluster that runs its own NFD (gpu.nodeFeatureDiscovery: existing). `classes`: the
    RuntimeClasses that exist (name → handler); GFD and the device plugin do their work only under the NVIDIA
    runtime (verify/simulate/runtime.py)."""
    classes = dict(classes or {})
    nfd = daemon_named(pods, "nfd-worker")
    gfd = daemon_named(pods, "gpu-feature-discovery")
    plugins = daemon_named(pods, "nvidia-device-plugin")
    efa = [p for p in pods if p.daemon and any("aws-efa-k8s-device-plugin" in image for image in _images(p))]
    for group in groups:
        if group.role != "gpu":
            continue
        if site_nfd or any(_lands(p, group) for p in nfd):
            group.labels.update(nl.nfd_labels(gpu_model=group.gpu_model))
        landed_plugins = [p for p in plugins if _lands(p, group)]
        configs, default = plugin_configs(landed_plugins[0], objects) if landed_plugins else ({}, None)
        sharing = _node_sharing(group, configs, default)
        blind = [p for p in landed_plugins if not runtime.runs_nvidia(p.pod, group, classes)]
        if blind:
            # Without the NVIDIA runtime the plugin loads no NVML and registers no resource (device plugin
            # v0.20.0 internal/rm: no devices found), and GFD writes no GPU labels.
            group.notes.append("the NVIDIA device plugin runs without the NVIDIA runtime here: no GPU advertised")
            landed_plugins = []
        if any(_lands(p, group) and runtime.runs_nvidia(p.pod, group, classes) for p in gfd):
            group.labels.update(nl.gfd_labels(num_gpus=group.num_gpus, gpu_model=group.gpu_model or "",
                                              gpu_memory_gib=group.gpu_memory_gib, sharing_strategy=sharing.strategy,
                                              replicas=sharing.replicas, renamed=sharing.renamed))
        if bottlerocket(group.ami_type):
            group.allocatable[WHOLE_GPU_RESOURCE] = float(group.num_gpus)
            group.notes.append("Bottlerocket's own device plugin: whole GPUs")
        elif landed_plugins:
            group.sharing = sharing
            if sharing.resource == WHOLE_GPU_RESOURCE:
                group.allocatable[WHOLE_GPU_RESOURCE] = float(group.num_gpus * sharing.replicas)
            else:
                group.allocatable[sharing.resource] = float(group.num_gpus * sharing.replicas)
                group.allocatable[WHOLE_GPU_RESOURCE] = 0.0
        else:
            group.notes.append("no NVIDIA device plugin lands here: no GPU resource advertised")
        if group.num_efa and any(_lands(p, group) for p in efa):
            group.allocatable[EFA_RESOURCE] = float(group.num_efa)
    for group in groups:
        free = dict(group.allocatable)
        for pod in pods:
            if pod.daemon and _lands(pod, group):
                group.daemons.append(pod.owner)
                for name, value in pod_requests(pod.pod, pod.owner).items():
                    free[name] = free.get(name, 0.0) - value
        group.free = free
    return groups


AWS_NODE = ExpandedPod(
    owner="DaemonSet kube-system/aws-node (EKS add-on vpc-cni)", source="eks add-on", namespace="kube-system",
    daemon=True, pod={"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "kube-system"}, "spec": {
        "containers": [{"name": "aws-node", "resources": {"requests": {"cpu": "25m"}}},
                       {"name": "aws-eks-nodeagent", "resources": {}}],
        "tolerations": [{"operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": nl.OS, "operator": "In", "values": ["linux"]},
                                  {"key": nl.ARCH, "operator": "In", "values": ["amd64", "arm64"]},
                                  {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn",
                                   "values": ["fargate", "hybrid", "auto"]}]}]}}}}})
"""The VPC CNI's DaemonSet pod on every EKS node (see the module docstring)."""


def _mode(plan: Plan) -> str:
    return str(getattr(getattr(plan.config, "cluster", None), "mode", "eks"))


def addon_pods(plan: Plan) -> list[ExpandedPod]:
    """DaemonSet pods the cluster runs outside cluster.yaml (EKS-managed add-ons); pass them with the expanded pods
    to `node_groups` and the checks."""
    return [AWS_NODE] if _mode(plan) in IN_AWS else []


def node_groups(plan: Plan, objects: list[ClusterObject], pods: list[ExpandedPod],
                classes: Mapping[str, str] | None = None) -> list[NodeGroup]:
    """The stack's node groups (EKS from the plan, adopted clusters from the config), enriched; [] for a Swarm."""
    config = plan.config
    mode = _mode(plan)
    if mode in IN_AWS:
        groups = eks_groups(plan)
    elif mode in ADOPTED_KUBERNETES:
        groups = existing_groups(config)
    else:
        return []
    site_nfd = mode in ADOPTED_KUBERNETES and getattr(config.gpu, "node_feature_discovery", "install") == "existing"
    if classes is None:
        classes = runtime.runtime_classes(objects, mode)
    return enrich(groups, pods, objects, site_nfd=site_nfd, classes=classes)


__all__ = ["AWS_NODE", "SHARED_GPU_RESOURCE", "NodeGroup", "Sharing", "addon_pods", "enrich", "node_groups",
           "parse_sharing"]
