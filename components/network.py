"""Network: a VPC with private node subnets in several zones and public subnets only for NAT and load balancers."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class SubnetPlan:
    availability_zone: str
    private_cidr: str
    public_cidr: str


def subnet_layout(vpc_cidr: str, zones: list[str]) -> list[SubnetPlan]:
    """Carve the VPC: per zone one large private subnet (pods take VPC IPs with the VPC CNI) and one small
    public subnet. Private subnets are the first /19s (of a /16), public ones /22s from the top quarter."""
    vpc = ipaddress.ip_network(vpc_cidr)
    private = list(vpc.subnets(new_prefix=vpc.prefixlen + 3))
    public = list(private[-1].subnets(new_prefix=vpc.prefixlen + 6))
    if len(zones) > len(private) - 1 or len(zones) > len(public):
        raise ValueError(f"{vpc_cidr} has no room for {len(zones)} zones")
    return [SubnetPlan(zone, str(private[i]), str(public[i])) for i, zone in enumerate(zones)]


def control_plane_zones(names: Sequence[str], zone_ids: Sequence[str], excluded_zone_ids: Iterable[str],
                        num_zones: int) -> list[str]:
    """The first `num_zones` zones by name (the control plane's and the first subnets'), never one EKS disallows
    for cluster subnets (by zone ID). The EKS target's preflight reads the same rule."""
    excluded = set(excluded_zone_ids)
    return sorted(name for name, zone_id in zip(names, zone_ids) if zone_id not in excluded)[:num_zones]


@dataclass
class NetworkArgs:
    cluster_name: str
    """Used in the Kubernetes subnet discovery tags."""
    vpc_cidr: str = "10.0.0.0/16"
    """CIDR of the created VPC."""
    num_availability_zones: int = 2
    """Zones to spread subnets over (>= 2)."""
    single_nat_gateway: bool = True
    """One NAT gateway for all zones (cheap) instead of one per zone (zone-failure tolerant)."""
    existing_vpc_id: str | None = None
    """Adopt this VPC: nothing is created."""
    required_zones: list[str] = field(default_factory=list)
    """Zones that must have a private subnet (node groups pinned to a reservation's zone), added after the first
    `num_availability_zones` zones if missing there — appended, so existing subnets keep their CIDRs."""
    existing_private_subnet_ids: list[str] = field(default_factory=list)
    existing_public_subnet_ids: list[str] = field(default_factory=list)
    transit_gateway_id: str | None = None
    """Attach the created VPC (its private subnets) to this Transit Gateway: the deployer's network lies behind it."""
    transit_gateway_cidrs: list[str] = field(default_factory=list)
    """Routed from the private subnets through `transit_gateway_id` (the deployer's runners)."""
    excluded_zone_ids: list[str] = field(default_factory=list)
    """Availability Zone IDs never chosen for the first `num_availability_zones` zones (those carry the EKS control
    plane: catalog.aws_regions.EKS_DISALLOWED_ZONE_IDS). A `required_zones` zone may still lie there (nodes only)."""


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    transit_gateway_attachment: aws.ec2transitgateway.VpcAttachment | None
    deployer_path: list[pulumi.Resource]
    """What the deployer's route to the private endpoint needs (the attachment and the routes through it)."""
    public_subnet_ids: pulumi.Output[list[str]]
    control_plane_subnet_ids: pulumi.Output[list[str]]
    """The private subnets of the first `num_availability_zones` zones only: EKS keeps a cluster's subnets in the
    zones it was created with, so a reservation's zone appended later gets node subnets, never control-plane ones."""
    private_subnet_keys: list[str]
    """What identifies each private subnet, in `private_subnet_ids`' order, known when the program runs: its zone
    (the stack's own subnets, one per zone, appended reservation zones included) or its id (an adopted VPC's). EFS
    allows one mount target per zone, so the mount targets are keyed by these, never by position."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:Network", name, None, opts)
        if args.existing_vpc_id:
            self.vpc_id = pulumi.Output.from_input(args.existing_vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(list(args.existing_private_subnet_ids))
            self.public_subnet_ids = pulumi.Output.from_input(list(args.existing_public_subnet_ids))
            self.control_plane_subnet_ids = self.private_subnet_ids
            self.private_subnet_keys = list(args.existing_private_subnet_ids)
            self._existing_private = list(args.existing_private_subnet_ids)
            self._private_by_zone: dict[str, pulumi.Output[str]] = {}
            self.transit_gateway_attachment = None
            self.deployer_path = []
            self.register_outputs({"vpcId": self.vpc_id})
            return
        child = pulumi.ResourceOptions(parent=self)
        # Regular zones only: Local and Wavelength Zones (listed once opted in) offer few instance types, no EKS
        # control-plane ENIs and no FSx/EFS mount targets, and their names sort before the regular zones'.
        zones = aws.get_availability_zones(state="available",
                                           filters=[{"name": "zone-type", "values": ["availability-zone"]}],
                                           opts=pulumi.InvokeOptions(parent=self))
        chosen = control_plane_zones(zones.names, zones.zone_ids, args.excluded_zone_ids, args.num_availability_zones)
        layout = subnet_layout(args.vpc_cidr, chosen + [zone for zone in args.required_zones if zone not in chosen])

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.vpc_cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={"Name": f"{args.cluster_name}"}, opts=child)
        # The default security group allows all traffic among its members; nothing should use it.
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=vpc.id, ingress=[], egress=[], opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": args.cluster_name}, opts=child)
        public_rt = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id,
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
                                       tags={"Name": f"{args.cluster_name}-public"}, opts=child)
        public_subnets, private_subnets, nat_ids = [], [], []
        deferred: list[tuple[str, aws.ec2.Subnet, pulumi.Output[str]]] = []
        for index, plan in enumerate(layout):
            zone = plan.availability_zone
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}", vpc_id=vpc.id, cidr_block=plan.public_cidr, availability_zone=zone,
                # Nothing launched here needs a public IP: NAT gateways use Elastic IPs, load balancers their own.
                map_public_ip_on_launch=False,
                tags={"Name": f"{args.cluster_name}-public-{zone}", "kubernetes.io/role/elb": "1"}, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id,
                                          opts=child)
            public_subnets.append(public)
            if index == 0 or not args.single_nat_gateway:
                eip = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags={"Name": f"{args.cluster_name}-nat-{zone}"},
                                  opts=child)
                nat = aws.ec2.NatGateway(f"{name}-nat-{zone}", allocation_id=eip.id, subnet_id=public.id,
                                         tags={"Name": f"{args.cluster_name}-{zone}"},
                                         opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
                nat_ids.append(nat.id)
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}", vpc_id=vpc.id, cidr_block=plan.private_cidr, availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={"Name": f"{args.cluster_name}-private-{zone}", "kubernetes.io/role/internal-elb": "1",
                      f"kubernetes.io/cluster/{args.cluster_name}": "shared"}, opts=child)
            private_subnets.append(private)
            if args.transit_gateway_id:
                deferred.append((zone, private, nat_ids[-1]))  # routed after the attachment exists, below
            else:
                self._private_route_table(name, args, vpc, zone, private, nat_ids[-1], [])
        self.transit_gateway_attachment = None
        self.deployer_path = []
        if args.transit_gateway_id:
            # One attachment in the private subnets (one per zone, as the attachment requires); routes to the
            # deployer's CIDRs need it to exist. Inline routes only: the route table's inline `routes` would remove
            # a separate aws.ec2.Route on the next update.
            self.transit_gateway_attachment = aws.ec2transitgateway.VpcAttachment(
                f"{name}-deployer", transit_gateway_id=args.transit_gateway_id, vpc_id=vpc.id,
                subnet_ids=[subnet.id for subnet in private_subnets],
                tags={"Name": f"{args.cluster_name}-deployer"}, opts=child)
            gateway = self.transit_gateway_attachment.transit_gateway_id
            to_deployer = [{"cidr_block": cidr, "transit_gateway_id": gateway} for cidr in args.transit_gateway_cidrs]
            self.deployer_path = [self.transit_gateway_attachment, *[
                self._private_route_table(name, args, vpc, zone, private, nat_id, to_deployer)
                for zone, private, nat_id in deferred]]

        self.vpc_id = vpc.id
        self._existing_private = []
        self._private_by_zone = {plan.availability_zone: subnet.id for plan, subnet in zip(layout, private_subnets)}
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets])
        # "All subnets that you add must be in the same set of AZs as originally provided when you created the
        # cluster" (awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc @101184ec, "VPC
        # requirements and considerations"): the appended zones' subnets stay out of the control plane.
        self.control_plane_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets[: len(chosen)]])
        self.private_subnet_keys = [plan.availability_zone for plan in layout]
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _private_route_table(self, name: str, args: NetworkArgs, vpc: aws.ec2.Vpc, zone: str, subnet: aws.ec2.Subnet,
                             nat_id: pulumi.Output[str], extra_routes: list[dict]) -> aws.ec2.RouteTable:
        child = pulumi.ResourceOptions(parent=self)
        private_rt = aws.ec2.RouteTable(f"{name}-private-{zone}", vpc_id=vpc.id,
                                        routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat_id}, *extra_routes],
                                        tags={"Name": f"{args.cluster_name}-private-{zone}"}, opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-private-{zone}", subnet_id=subnet.id,
                                      route_table_id=private_rt.id, opts=child)
        return private_rt

    def private_subnets_in(self, zone: str) -> pulumi.Output[list[str]]:
        """The private subnet(s) in `zone`: the stack's own, or those of the adopted VPC's subnets that EC2 says
        lie there (an error at `up` when none does, rather than nodes launched outside the reservation)."""
        if zone in self._private_by_zone:
            return self._private_by_zone[zone].apply(lambda subnet: [subnet])
        found = aws.ec2.get_subnets_output(
            filters=[{"name": "subnet-id", "values": self._existing_private},
                     {"name": "availability-zone", "values": [zone]}],
            opts=pulumi.InvokeOptions(parent=self))

        def require(ids: list[str]) -> list[str]:
            if not ids:
                raise ValueError(f"no private subnet of the adopted VPC lies in {zone}: add one there to "
                                 "network.existingPrivateSubnetIds")
            return sorted(ids)
        return found.ids.apply(require)

