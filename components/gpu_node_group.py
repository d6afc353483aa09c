"""GpuNodeGroup: one EKS managed GPU node group with its own hardened launch template."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.launch_template import launch_template_args
from conventions.kubernetes import EKS_TAINT_EFFECTS
from conventions.names import EFA_RESOURCE, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE


def autoscaler_tags(cluster_name: str, num_gpus: int, labels: dict[str, str], taints: dict[str, tuple[str, str]],
                    num_efa_interfaces: int = 0, *, disk_size_gib: int, gpu_slices_per_gpu: int = 0) -> dict[str, str]:
    """Auto Scaling group tags that let cluster-autoscaler scale a group up from zero.

    With no node running, the autoscaler can't see what a node would offer; these node-template tags tell it
    (GPUs, ephemeral storage, EFA devices, labels, taints), so a pending GPU pod makes the group grow from 0.
    https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md

    The AWS provider (cluster-autoscaler-1.34.x, chart 9.52.1: cluster-autoscaler/cloudprovider/aws/aws_manager.go,
    `buildNodeFromTemplate` and `extractAllocatableResourcesFromAsg`) starts the template node from the instance
    type (CPU, memory, `nvidia.com/gpu` = the type's GPU count) and then overwrites capacity with every
    `node-template/resources/<name>` tag, each value read with `resource.ParseQuantity` — so values are Kubernetes
    quantities (`200Gi`), and a resource no tag names is absent (ephemeral-storage: every training pod requests
    it, so without the tag no pod ever fits the template and a min-0 group never scales up).

    `gpu_slices_per_gpu` > 0 marks a shared group (MPS / time-slicing with `renameByDefault`, see
    components/nvidia_device_plugin.py): its nodes advertise `nvidia.com/gpu.shared` = GPUs × slices and no whole
    `nvidia.com/gpu`, so the template says so — `nvidia.com/gpu` is set to 0 explicitly to overwrite the
    instance type's GPU count.
    """
    prefix = "k8s.io/cluster-autoscaler/node-template"
    tags = {
        "k8s.io/cluster-autoscaler/enabled": "true",
        f"k8s.io/cluster-autoscaler/{cluster_name}": "owned",
        f"{prefix}/resources/ephemeral-storage": f"{disk_size_gib}Gi",
    }
    if gpu_slices_per_gpu:
        tags[f"{prefix}/resources/{WHOLE_GPU_RESOURCE}"] = "0"
        tags[f"{prefix}/resources/{SHARED_GPU_RESOURCE}"] = str(num_gpus * gpu_slices_per_gpu)
    else:
        tags[f"{prefix}/resources/{WHOLE_GPU_RESOURCE}"] = str(num_gpus)
    if num_efa_interfaces:
        tags[f"{prefix}/resources/{EFA_RESOURCE}"] = str(num_efa_interfaces)
    for key, value in sorted(labels.items()):
        tags[f"{prefix}/label/{key}"] = value
    for key, (value, effect) in sorted(taints.items()):
        tags[f"{prefix}/taint/{key}"] = f"{value}:{EKS_TAINT_EFFECTS[effect]}"
    return tags


GPU_NODE_REPAIR = {"enabled": True, "max_unhealthy_node_threshold_percentage": 50,
                   "max_parallel_nodes_repaired_count": 1}
"""EKS node auto repair of a GPU group (docs/operations.md, "Node health and repair"). With the
eks-node-monitoring-agent add-on a node whose GPU fails (AcceleratedHardwareReady false) is cordoned, then rebooted
or replaced after 10 minutes (EKS user guide, node-repair.html). The guard (aws_eks_node_group `node_repair_config`,
pulumi-aws 7.51.1 `NodeGroupNodeRepairConfigArgs`): repair stops while more than half the group is unhealthy (a
correlated failure — a network or AZ event — is not many GPU faults, and replacing a whole reserved fleet at once
loses every gang's nodes), and one node is repaired at a time (each replacement restarts the gangs on it once)."""


@dataclass
class GpuNodeGroupArgs:
    cluster_name: pulumi.Input[str]
    """The EKS cluster (its name output, so the group depends on it)."""
    cluster_name_plain: str
    """The cluster's name as plain text, for autoscaler tags and resource names."""
    node_role_arn: pulumi.Input[str]
    subnet_ids: pulumi.Input[list[str]]
    """Private subnets. EFA / placement-group groups use the first one only (a cluster placement group and
    low-latency EFA traffic live in one availability zone)."""
    security_group_id: pulumi.Input[str]
    """Cluster security group, used by EFA interfaces."""
    instance_types: list[str]
    capacity_type: str
    """ON_DEMAND, SPOT or CAPACITY_BLOCK."""
    ami_type: str
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gib: int
    num_gpus: int
    """GPUs per node (the smallest instance type's), for scale-from-zero tags."""
    gpu_slices_per_gpu: int = 0
    """Shared slices per GPU when the group's GPUs are shared (renamed to `nvidia.com/gpu.shared`); 0: whole GPUs."""
    labels: dict[str, str] = field(default_factory=dict)
    taints: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Taint key -> (value, EKS effect)."""
    num_efa_interfaces: int = 0
    placement_group: bool = False
    capacity_reservation_id: str | None = None
    update_strategy: str = "DEFAULT"
    """EKS `updateConfig.updateStrategy`: `DEFAULT` (surge: new nodes first) or `MINIMAL` (old nodes first)."""
    resource_tags: dict[str, str] = field(default_factory=dict)
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """What must exist before nodes join (core add-ons, node role policies)."""


class GpuNodeGroup(pulumi.ComponentResource):
    node_group: aws.eks.NodeGroup

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:GpuNodeGroup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        full_name = f"{args.cluster_name_plain}-{name}"
        placement = None
        if args.placement_group:
            # Auto-named (Pulumi appends a random suffix): a changed strategy replaces it without a name clash.
            placement = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", opts=child).name
        capacity_block = args.capacity_type == "CAPACITY_BLOCK"
        template = aws.ec2.LaunchTemplate(f"{name}-nodes", **launch_template_args(
            name=full_name, disk_size_gib=args.disk_size_gib, tags=args.resource_tags,
            num_efa_interfaces=args.num_efa_interfaces, security_group_id=args.security_group_id,
            placement_group=placement, capacity_reservation_id=args.capacity_reservation_id,
            capacity_block=capacity_block), opts=child)
        single_zone = args.num_efa_interfaces > 0 or args.placement_group
        subnets = pulumi.Output.from_input(args.subnet_ids).apply(lambda ids: ids[:1] if single_zone else ids)
        tags = autoscaler_tags(args.cluster_name_plain, args.num_gpus, args.labels, args.taints,
                               args.num_efa_interfaces, disk_size_gib=args.disk_size_gib,
                               gpu_slices_per_gpu=args.gpu_slices_per_gpu)
        self.node_group = aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=args.cluster_name,
            # A prefix, not a fixed name: instance types, capacity type, AMI type and subnets force replacement,
            # and a fixed name would collide with the group being replaced (EKS appends a 26-character suffix).
            node_group_name_prefix=f"{full_name}-",
            node_role_arn=args.node_role_arn,
            subnet_ids=subnets,
            instance_types=list(args.instance_types),
            capacity_type=args.capacity_type,
            ami_type=args.ami_type,
            scaling_config={"min_size": args.min_size, "desired_size": args.desired_size, "max_size": args.max_size},
            update_config={"max_unavailable": 1, "update_strategy": args.update_strategy},
            labels=dict(sorted(args.labels.items())),
            taints=[{"key": key, "value": value, "effect": effect}
                    for key, (value, effect) in sorted(args.taints.items())],
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            node_repair_config=GPU_NODE_REPAIR,
            tags=tags,
            # cluster-autoscaler owns the desired size once the group exists.
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on,
                                        ignore_changes=["scalingConfig.desiredSize"],
                                        # Reserved capacity (a reservation or Capacity Block) is sized for the
                                        # old group's nodes: the new group could not launch until the old one
                                        # released them, so it must be deleted first. On-demand and spot groups
                                        # are replaced create-first, keeping the jobs' capacity meanwhile.
                                        delete_before_replace=args.capacity_reservation_id is not None
                                        or args.capacity_type == "CAPACITY_BLOCK"),
        )
        # Node group tags don't reach its Auto Scaling group, and the autoscaler reads the ASG's tags.
        asg_name = self.node_group.resources.apply(lambda resources: resources[0].autoscaling_groups[0].name)
        for key, value in tags.items():
            if "/node-template/" in key:
                aws.autoscaling.Tag(f"{name}-asg-{key.split('/node-template/', 1)[1].replace('/', '-')}",
                                    autoscaling_group_name=asg_name,
                                    tag={"key": key, "value": value, "propagate_at_launch": False}, opts=child)
        self.register_outputs({"nodeGroupName": self.node_group.node_group_name})
