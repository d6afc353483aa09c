"""`eks`: a new EKS cluster in a VPC of its own (or an adopted one), with GPU node groups and the autoscaler.

Network → EksCluster (control plane, KMS, logs, access entries, add-ons, system node group) → one GpuNodeGroup per
`gpuNodeGroups` entry → ClusterAccess (the Kubernetes provider, after the cluster, its node groups and the
deployer's access entry) → ClusterAutoscaler and TrainingIdentity.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import ClassVar

import pulumi

from catalog import ec2_offerings
from catalog.aws_regions import EKS_DISALLOWED_ZONE_IDS, REGIONS, partition
from catalog.cpu_instances import CPU_INSTANCE_TYPES
from catalog.gpu_instances import AMI_TYPE_ARCHITECTURE, GPU_INSTANCE_TYPES, bottlerocket
from catalog.purchase_options import PURCHASE_OPTIONS, RESERVATION_INSTANCE_TYPES
from cluster_targets import eks_preflight
from cluster_targets.base import AwsNetwork, Cluster, ClusterTarget
from cluster_targets.eks_network import check_deployer, check_deployer_route, check_vpc
from components.cluster_access import ClusterAccess, ClusterAccessArgs
from components.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.eks_cluster import EksCluster, EksClusterArgs
from components.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from components.network import Network, NetworkArgs
from components.training_identity import TrainingIdentity, TrainingIdentityArgs
from conventions.kubernetes import EKS_TAINT_EFFECTS
from conventions.names import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_TAINT_KEY,
    NODE_GROUP_LABEL,
    NVIDIA_RUNTIME_HANDLER,
    SYSTEM_ROLE_LABEL,
    TRAINING_SERVICE_ACCOUNT,
    config_name,
    training_namespace,
)
from stack_config import Problem, StackConfig, ami_type, placement_group_enabled
from stack_config.derived import node_update_strategy, provisioning_groups
from stack_config.problems import did_you_mean
from stack_config.rules import Rule, check_sizes
from stack_config.schema import GpuNodeGroupConfig
from stack_config.site_rules import aws_id_problem
from stack_config.storage_kinds import kinds_on
from stack_config.targets import TargetTraits

CLOUDWATCH_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                             2922, 3288, 3653)
GPU_TAINT = (GPU_TAINT_KEY, "true", "NO_SCHEDULE")


def node_labels(config: StackConfig, group: str) -> dict[str, str]:
    """Labels of an EKS GPU group's nodes: its name (for affinity), the device-plugin sharing config it uses,
    and the user's labels."""
    sharing = config.sharing_for(group)
    return dict(sorted({
        **config.gpu_node_groups[group].labels,
        NODE_GROUP_LABEL: group,
        DEVICE_PLUGIN_CONFIG_LABEL: config_name(sharing.mode, sharing.replicas),
    }.items()))


def node_taints(config: StackConfig, group: str) -> dict[str, tuple[str, str]]:
    """Taint key -> (value, EKS effect). Default: `nvidia.com/gpu=true:NoSchedule` when `cluster.gpuNodeTaint`."""
    taints = config.gpu_node_groups[group].taints
    if taints is None:
        return {GPU_TAINT[0]: (GPU_TAINT[1], GPU_TAINT[2])} if config.cluster.gpu_node_taint else {}
    return {key: (taint.value, taint.effect) for key, taint in sorted(taints.items())}


SYSTEM_NODE_GROUP = "system"  # the system node group is `<cluster>-system` (components/eks_cluster.py)


class EksTarget(ClusterTarget):
    mode: ClassVar[str] = "eks"
    traits: ClassVar[TargetTraits] = TargetTraits(
        platform="kubernetes", provisions_in_aws=True, node_facts="catalog", kueue_quotas=True,
        # The EKS-optimized NVIDIA AMIs make the NVIDIA runtime containerd's default.
        node_default_runtime=NVIDIA_RUNTIME_HANDLER)
    rules: ClassVar[tuple[Rule, ...]] = (
        (check_deployer, ("cluster",)),
        (check_deployer_route, ("cluster", "network")),
        (check_vpc, ("network", "cluster")),
    )

    def node_selector(self, config: StackConfig, group: str) -> dict[str, str]:
        return {NODE_GROUP_LABEL: group}

    def tolerations(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        return [{"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]}
                for taint in self.node_taints(config, group)]

    def node_taints(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        return [{"key": key, "value": value, "effect": EKS_TAINT_EFFECTS[effect]}
                for key, (value, effect) in node_taints(config, group).items()]

    def check(self, config: StackConfig) -> Iterator[Problem]:
        cluster = config.cluster
        yield from check_node_group_names(config)
        if cluster.deployer_role_arn is None:
            # Left to "whoever runs up", the one implicit entry follows the caller: an admin running `up` collides
            # with its own admin entry (ResourceInUseException), a human and CI replace each other's entry, and the
            # reaper or a PR preview under its own role gets 401 from the API.
            yield Problem("cluster.deployerRoleArn", "is required for an EKS stack: the IAM role CI's `pulumi up` "
                                                     "runs as (it gets the deployer's access entry); list people "
                                                     "and other automation (the reaper, PR previews) in "
                                                     "cluster.adminRoleArns")
        if cluster.endpoint_public_access and not cluster.public_access_cidrs:
            yield Problem("cluster.publicAccessCidrs", "is empty, but endpointPublicAccess is true: list the CIDRs "
                                                       "allowed to reach the API (never 0.0.0.0/0)")
        if cluster.public_access_cidrs and not cluster.endpoint_public_access:
            yield Problem("cluster.publicAccessCidrs", "is set, but endpointPublicAccess is false: remove it or "
                                                       "enable the public endpoint")
        for index, cidr in enumerate(cluster.public_access_cidrs):
            path = f"cluster.publicAccessCidrs[{index}]"
            try:
                network = ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                yield Problem(path, f"{cidr!r} is not a CIDR like '203.0.113.0/24'")
                continue
            if network.prefixlen == 0:
                yield Problem(path, f"{cidr!r} opens the API server to the whole internet; list specific CIDRs")
            elif network.version != 4:
                yield Problem(path, f"{cidr!r} is an IPv6 CIDR, but the cluster is IPv4 (EKS public access CIDRs are "
                                    "IPv4 here); list IPv4 CIDRs like '203.0.113.0/24'")
        if cluster.log_retention_days not in CLOUDWATCH_RETENTION_DAYS:
            yield Problem("cluster.logRetentionDays", f"{cluster.log_retention_days} is not a CloudWatch retention; "
                                                      f"allowed: {', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))}")
        sng = cluster.system_node_group
        for index, instance_type in enumerate(sng.instance_types):
            if instance_type not in CPU_INSTANCE_TYPES:
                yield Problem(f"cluster.systemNodeGroup.instanceTypes[{index}]",
                              f"{instance_type!r} is not a supported system instance type"
                              f"{did_you_mean(instance_type, CPU_INSTANCE_TYPES)}; allowed: "
                              f"{', '.join(CPU_INSTANCE_TYPES)}")
        if not sng.instance_types:
            yield Problem("cluster.systemNodeGroup.instanceTypes", "is empty: list at least one CPU instance type")
        yield from check_sizes("cluster.systemNodeGroup", sng.min_size, sng.desired_size, sng.max_size)
        yield from check_offerings(config)
        if config.storage.kind not in kinds_on(self.mode):  # stack_config/storage_kinds.py: nfs, host-path
            yield Problem("storage.kind", f"{config.storage.kind!r} is for a Docker Swarm; on Kubernetes shared "
                                          "storage comes through a StorageClass (efs, fsx-lustre, existing), and Pod "
                                          "Security 'restricted' forbids nfs and hostPath volumes")
        single_zone = set(eks_preflight.single_zone_groups(config))
        for name, group in config.gpu_node_groups.items():
            yield from check_gpu_node_group(f"gpuNodeGroups.{name}", group)
            yield from check_zone(f"gpuNodeGroups.{name}", config.region, group, single_zone=name in single_zone)
            full_name = f"{config.cluster_name}-{name}"
            if name == SYSTEM_NODE_GROUP:
                yield Problem(f"gpuNodeGroups.{name}", f"name {name!r} collides with the system node group "
                              f"({full_name!r}: one EKS node group and launch template name for both); rename it, "
                              "e.g. 'gpu'")
            if group.instance_types and group.instance_types[0] in GPU_INSTANCE_TYPES:
                sharing = config.sharing_for(name)
                if bottlerocket(ami_type(group)) and sharing.mode != "none":
                    yield Problem(f"gpuNodeGroups.{name}.amiType", f"{ami_type(group)!r} runs its own device plugin, "
                                  f"so sharing {sharing.mode!r} can't be configured here; use an AL2023 NVIDIA AMI or "
                                  "configure sharing through Bottlerocket settings and set sharing none")

    def preflight(self, config: StackConfig) -> None:
        eks_preflight.preflight(config)  # zone offerings, vCPU quotas, EFA, the Transit Gateway

    def provision(self, config: StackConfig, aws_opts: pulumi.ResourceOptions) -> Cluster:
        lifecycle = config.lifecycle
        deployer = config.cluster.deployer
        assert deployer is not None  # required for mode eks (stack_config.rules._check_deployer)
        network = Network("network", NetworkArgs(
            cluster_name=config.cluster_name,
            vpc_cidr=config.network.vpc_cidr,
            num_availability_zones=config.network.num_availability_zones,
            required_zones=sorted({group.availability_zone for group in config.gpu_node_groups.values()
                                   if group.availability_zone is not None}),
            single_nat_gateway=config.network.nat_gateways == "single",
            existing_vpc_id=config.network.existing_vpc_id,
            existing_private_subnet_ids=list(config.network.existing_private_subnet_ids),
            existing_public_subnet_ids=list(config.network.existing_public_subnet_ids),
            transit_gateway_id=deployer.transit_gateway_id if deployer.access == "transit-gateway" else None,
            transit_gateway_cidrs=list(deployer.cidrs) if deployer.access == "transit-gateway" else [],
            excluded_zone_ids=list(EKS_DISALLOWED_ZONE_IDS.get(config.region, ())),
        ), opts=aws_opts)
        system = config.cluster.system_node_group
        eks = EksCluster("eks", EksClusterArgs(
            cluster_name=config.cluster_name,
            kubernetes_version=config.kubernetes_version,
            region=config.region,
            private_subnet_ids=network.private_subnet_ids,
            control_plane_subnet_ids=network.control_plane_subnet_ids,
            endpoint_public_access=config.cluster.endpoint_public_access,
            public_access_cidrs=list(config.cluster.public_access_cidrs),
            private_endpoint_cidrs=list(deployer.cidrs) if deployer.access in ("in-vpc", "transit-gateway") else [],
            deployer_role_arn=config.cluster.deployer_role_arn,
            admin_role_arns=list(config.cluster.admin_role_arns),
            preview_role_arns=list(config.cluster.preview_role_arns),
            addon_versions=dict(config.cluster.addon_versions),
            log_retention_days=config.cluster.log_retention_days,
            kms_deletion_window_days=lifecycle.kms_deletion_window,
            system_instance_types=list(system.instance_types),
            system_min_size=system.min_size,
            system_desired_size=system.desired,
            system_max_size=system.max_size,
            system_disk_size_gib=system.disk_size_gib,
            protect=lifecycle.protect,
            resource_tags=config.resource_tags(),
        ), opts=aws_opts)
        node_groups = []
        for group_name, group in config.gpu_node_groups.items():
            facts = config.node_facts(group_name)
            node_groups.append(GpuNodeGroup(group_name, GpuNodeGroupArgs(
                cluster_name=eks.cluster.name,
                cluster_name_plain=config.cluster_name,
                node_role_arn=eks.node_role.arn,
                # The group's zone (required for a reservation, EFA or a placement group; the preflight checks
                # that it offers the group's types); otherwise every private subnet.
                subnet_ids=(network.private_subnet_ids if group.availability_zone is None
                            else network.private_subnets_in(group.availability_zone)),
                security_group_id=eks.security_group_id,
                instance_types=list(group.instance_types),
                capacity_type=group.capacity_type,
                ami_type=ami_type(group),
                min_size=group.min_size,
                desired_size=group.min_size if group.desired_size is None else group.desired_size,
                max_size=group.max_size,
                disk_size_gib=group.disk_size_gib,
                num_gpus=facts.num_gpus,
                gpu_slices_per_gpu=(0 if config.sharing_for(group_name).mode == "none"
                                    else config.sharing_for(group_name).replicas),
                labels=node_labels(config, group_name),
                taints=node_taints(config, group_name),
                num_efa_interfaces=facts.num_efa_interfaces,
                placement_group=placement_group_enabled(group),
                capacity_reservation_id=group.capacity_reservation_id,
                update_strategy=node_update_strategy(group),
                resource_tags=config.resource_tags(),
                depends_on=[eks.system_node_group],
            ), opts=aws_opts))
        access = ClusterAccess("cluster", ClusterAccessArgs(
            kubeconfig=eks.kubeconfig,
            # ...and on the deployer's path to the API: the attachment and routes, the endpoint's ingress rules.
            depends_on=[eks.cluster, eks.system_node_group, *eks.access_grants, *eks.addons_after_nodes,
                        *[group.node_group for group in node_groups], *eks.private_endpoint_ingress,
                        *network.deployer_path],
        ))
        autoscaler = ClusterAutoscaler("autoscaler", ClusterAutoscalerArgs(
            cluster_name=eks.cluster.name, cluster_name_plain=config.cluster_name, region=config.region,
            provider=access.provider, provisioning_requests=bool(provisioning_groups(config)),
        ), opts=aws_opts)
        identity = TrainingIdentity("training", TrainingIdentityArgs(
            cluster_name=eks.cluster.name, stack=config.stack, namespace=training_namespace(config.stack),
            service_account=TRAINING_SERVICE_ACCOUNT, force_destroy=lifecycle.ephemeral, protect=lifecycle.protect,
        ), opts=aws_opts)
        return Cluster(
            target=self, provider=access.provider, aws_opts=aws_opts, provisioning_crd=autoscaler.provisioning_crd,
            system_node_selector={SYSTEM_ROLE_LABEL: "system"},
            aws=AwsNetwork(
                cluster_name=eks.cluster.name, vpc_id=network.vpc_id, private_subnet_ids=network.private_subnet_ids,
                private_subnet_keys=network.private_subnet_keys,
                cluster_security_group_id=eks.security_group_id, system_node_group=eks.system_node_group,
                training_identity=identity),
            exports={
                "clusterName": eks.cluster.name,
                "endpoint": eks.cluster.endpoint,
                "oidcIssuer": eks.cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer),
                "kubeconfig": eks.kubeconfig,
                "artifactsBucket": identity.bucket.bucket,
                # What each managed add-on got: the catalog's build, the stack's pin, or EKS's default (recorded
                # here so `cluster.addonVersions` can pin it).
                "eksAddonVersions": eks.addon_versions,
            },
        )


# EKS node group names are at most 63 characters; with `node_group_name_prefix` the provider appends a
# 26-character unique suffix (terraform-plugin-sdk helper/id: UniqueIDSuffixLength = 26).
NODE_GROUP_NAME_MAX = 63
UNIQUE_SUFFIX_LENGTH = 26


def check_node_group_names(config: StackConfig) -> Iterator[Problem]:
    room = NODE_GROUP_NAME_MAX - UNIQUE_SUFFIX_LENGTH
    system_prefix = f"{config.cluster_name}-system-"
    if len(system_prefix) > room:
        yield Problem("namePrefix", f"{config.name_prefix!r} makes the system node group's name prefix "
                      f"{system_prefix!r} {len(system_prefix)} characters long; EKS allows {NODE_GROUP_NAME_MAX} "
                      f"including a {UNIQUE_SUFFIX_LENGTH}-character suffix, so at most {room}: shorten namePrefix "
                      f"by {len(system_prefix) - room}")
    for name in config.gpu_node_groups:
        prefix = f"{config.cluster_name}-{name}-"
        if len(prefix) > room:
            yield Problem(f"gpuNodeGroups.{name}", f"name prefix {prefix!r} is {len(prefix)} characters; EKS "
                          f"allows {NODE_GROUP_NAME_MAX} including a {UNIQUE_SUFFIX_LENGTH}-character suffix: "
                          f"use a group name of at most {max(1, room - len(config.cluster_name) - 2)} characters")


def check_zone(path: str, region: str, group: GpuNodeGroupConfig, single_zone: bool = False) -> Iterator[Problem]:
    """A reservation's capacity exists in one zone only, and a group with EFA or a cluster placement group must sit
    in one (`single_zone`): EKS places nodes in any subnet it is given. The zone is the stack's choice, checked by
    the preflight against the account's offerings (cluster_targets/eks_preflight.py)."""
    if group.availability_zone is None:
        if group.reserved:
            yield Problem(f"{path}.availabilityZone", "is required with a capacity reservation or Capacity Block: "
                          "set the reservation's zone (aws ec2 describe-capacity-reservations "
                          "--capacity-reservation-ids <id> --query 'CapacityReservations[0].AvailabilityZone')")
        elif single_zone:
            types = ",".join(group.instance_types)
            yield Problem(f"{path}.availabilityZone", "is required: the group uses EFA or a cluster placement group, "
                          "which work within one zone; name a zone of the Region that offers every one of its "
                          f"instance types (aws ec2 describe-instance-type-offerings --region {region} --location-type "
                          f"availability-zone --filters Name=instance-type,Values={types}); `preview` checks it "
                          "against the account's offerings")
        return
    if region not in REGIONS:
        return  # `region` itself is reported; judging the zone against it would only repeat that
    if not re.fullmatch(re.escape(region) + r"[a-z]", group.availability_zone):
        yield Problem(f"{path}.availabilityZone", f"{group.availability_zone!r} is not a regular zone of region "
                      f"{region!r} (like '{region}a'); Local and Wavelength Zones are not supported")


def check_offerings(config: StackConfig) -> Iterator[Problem]:
    """Every instance type of each GPU group must be offered in `region`.

    "The instance types that are available vary by Region"
    (https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-regions.html; the API is
    DescribeInstanceTypeOfferings, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html):
    a node group of a type the Region lacks is created and never gets a node. The data is catalog/ec2_offerings.py
    (generated, cited and dated there; `python -m tools.offerings` refreshes it). A Region the catalog doesn't
    know, or an instance type it has no row for, is not judged: absence of data is not evidence. Zones are not
    checked (see tools/offerings.py).
    """
    region = config.region
    if region not in REGIONS or region not in ec2_offerings.KNOWN_REGIONS:
        return  # an unknown `region` is reported by itself; a Region newer than the catalog is not judged
    fields = []  # the system group's general-purpose types are not in the catalog (tools/offerings.py)
    for name, group in config.gpu_node_groups.items():
        # Capacity Blocks sell types that have no on-demand price in a Region (the price tables' meaning of
        # "offered"), so a CAPACITY_BLOCK group's types are left to the reservation itself.
        if group.capacity_type != "CAPACITY_BLOCK":
            fields.append((f"gpuNodeGroups.{name}.instanceTypes", group.instance_types))
    for path, instance_types in fields:
        for index, instance_type in enumerate(instance_types):
            offered_in = ec2_offerings.OFFERED_IN.get(instance_type)
            if offered_in is None or region in offered_in:
                continue  # not a catalogued type (reported by the type rules), or offered
            yield Problem(f"{path}[{index}]", f"{instance_type!r} is not offered in region {region!r} "
                          f"(catalog/ec2_offerings.py, as of {ec2_offerings.REGION_AS_OF[region]}); "
                          f"{_offered_elsewhere(instance_type, region)}")


def _offered_elsewhere(instance_type: str, region: str, shown: int = 5) -> str:
    """The known Regions that offer it, nearest first (same partition, then same area: `eu-`, `us-`...)."""
    offered_in = ec2_offerings.OFFERED_IN[instance_type]
    if not offered_in:
        return (f"none of the {len(ec2_offerings.KNOWN_REGIONS)} Regions the catalog knows offers it: choose "
                "another instance type")

    def distance(other: str) -> tuple[int, int, str]:
        same_partition = other in REGIONS and partition(other) == partition(region)
        return (not same_partition, other.split("-")[0] != region.split("-")[0], other)

    nearest = sorted(offered_in, key=distance)
    more = f" and {len(nearest) - shown} more" if len(nearest) > shown else ""
    return f"offered in {', '.join(nearest[:shown])}{more}: move the stack or choose another instance type"


def check_purchase_option(path: str, group: GpuNodeGroupConfig) -> Iterator[Problem]:
    """The group's capacityType against catalog/purchase_options.py (each row cites its source): the instance types
    it is sold for, whether it needs or refuses a capacity reservation, and one instance type per reservation."""
    option = PURCHASE_OPTIONS[group.capacity_type]
    with_reservation = [name for name, row in PURCHASE_OPTIONS.items() if row.reservation != "refused"]
    # Each branch's source is its row's `source` and the comments in catalog/purchase_options.py.
    if option.reservation == "refused" and group.capacity_reservation_id:
        yield Problem(f"{path}.capacityReservationId", f"a {option.name} group can't target a capacity reservation "
                                                       f"(it reserves On-Demand capacity); use "
                                                       f"{' or '.join(with_reservation)}")
    if option.reservation == "required" and not group.capacity_reservation_id:
        yield Problem(f"{path}.capacityReservationId", f"is required for capacityType {option.name}: the Capacity "
                                                       "Block's reservation id (cr-...)")
    if option.instance_types is not None:
        for index, instance_type in enumerate(group.instance_types):
            if instance_type in GPU_INSTANCE_TYPES and instance_type not in option.instance_types:
                yield Problem(f"{path}.instanceTypes[{index}]",
                              f"{instance_type!r} is not offered as capacityType {option.name} (EC2 Capacity Blocks "
                              f"for ML); allowed: {', '.join(sorted(option.instance_types))}, or capacityType "
                              "ON_DEMAND / SPOT for this type")
    # "You can only launch an instance into a Capacity Reservation that has matching attributes (instance type,
    # platform, Availability Zone, and tenancy)" (EC2 User Guide, capacity-reservations-launch.html).
    if (group.capacity_reservation_id and option.reservation != "refused"
            and len(group.instance_types) > RESERVATION_INSTANCE_TYPES):
        yield Problem(f"{path}.instanceTypes", f"{list(group.instance_types)} with capacityReservationId "
                      f"{group.capacity_reservation_id!r}: a reservation is of one instance type and EC2 launches only "
                      "that type into it (instance type, platform, zone and tenancy must match); list only the "
                      "reservation's instance type")


def check_gpu_node_group(path: str, group: GpuNodeGroupConfig) -> Iterator[Problem]:
    if not group.instance_types:
        yield Problem(f"{path}.instanceTypes", "is required in EKS mode: list GPU instance types")
        return
    known = []
    for index, instance_type in enumerate(group.instance_types):
        facts = GPU_INSTANCE_TYPES.get(instance_type)
        if facts is None:
            yield Problem(f"{path}.instanceTypes[{index}]", f"{instance_type!r} is not a supported GPU instance "
                          f"type{did_you_mean(instance_type, GPU_INSTANCE_TYPES)}; allowed: "
                          f"{', '.join(GPU_INSTANCE_TYPES)}")
        else:
            known.append(facts)
    if not known:
        return
    architectures = {facts.architecture for facts in known}
    if len(architectures) > 1:
        yield Problem(f"{path}.instanceTypes", f"{list(group.instance_types)} mixes architectures "
                                               f"{sorted(architectures)}; one node group has one AMI")
    if group.ami_type is not None and AMI_TYPE_ARCHITECTURE[group.ami_type] not in architectures:
        yield Problem(f"{path}.amiType", f"{group.ami_type!r} is for {AMI_TYPE_ARCHITECTURE[group.ami_type]}, but "
                                         f"the instance types are {'/'.join(sorted(architectures))}")
    if group.efa and any(facts.num_efa_interfaces == 0 for facts in known):
        without = [facts.name for facts in known if facts.num_efa_interfaces == 0]
        yield Problem(f"{path}.efa", f"true, but {', '.join(without)} has no EFA support")
    yield from check_purchase_option(path, group)
    if group.capacity_reservation_id and (problem := aws_id_problem(f"{path}.capacityReservationId",
                                                                    group.capacity_reservation_id, "cr",
                                                                    "reservation")):
        yield problem
    # "By default, Capacity Blocks deliver low-latency, high-throughput network connectivity between the instances
    # inside the Capacity Block, so there is no need to use a cluster placement group with a Capacity Block" (EC2
    # User Guide, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html); for a reservation,
    # DESIGN.md: a placement group can shrink the usable reservation.
    if group.placement_group and group.capacity_reservation_id:
        yield Problem(f"{path}.placementGroup", "true, but a capacity reservation is targeted: a placement group "
                                                "can shrink the usable reservation, so it is never forced there")
