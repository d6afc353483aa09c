"""The EKS target's preflight: what only the AWS account knows, asked at `preview`/`up` before anything is registered.

The config rules judge a stack by its file and the catalog; these facts differ per account and change over time:
which zones offer an instance type (zone names map to different zone IDs per account), the account's vCPU quotas,
EC2's own EFA data, whether the deployer's Transit Gateway exists. `ask_account` reads them with the AWS provider's
invokes (the engine's default provider, each invoke pinned to the stack's region); the `*_problems` functions judge
them as plain data, and `preflight` raises one `ConfigError` listing every problem, as the config parse does.
The offline plan answers the invokes from verify/plan.py's fakes. See docs/deploy.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from catalog.aws_regions import EKS_DISALLOWED_ZONE_IDS
from catalog.ec2_quotas import SERVICE_CODE, vcpu_quota
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from components.network import control_plane_zones
from stack_config import ConfigError, Problem, StackConfig

# The API is DescribeInstanceTypeOfferings: "Lists the instance types that are offered for the specified location
# type [...] You can also filter the results by location" (EC2 API Reference,
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html); pulumi-aws
# `aws.ec2.get_instance_type_offerings`. Zone *names* are asked for: the Network places subnets by name, and a name
# means this account's zone ("AZ names are mapped to AZ IDs independently for each account",
# https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html).
LOCATION_TYPE = "availability-zone"


@dataclass(frozen=True)
class InstanceTypeAnswer:
    """What `aws.ec2.get_instance_type` says of one type (DescribeInstanceTypes' NetworkInfo)."""

    efa_supported: bool
    efa_maximum_interfaces: int


@dataclass(frozen=True)
class AccountFacts:
    """The account's answers, as plain data (tests build them directly)."""

    region: str
    network_zones: tuple[str, ...]
    """The zones the stack's private subnets lie in (sorted)."""
    offered_in: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Instance type → the zones among `network_zones` that offer it."""
    instance_types: Mapping[str, InstanceTypeAnswer] = field(default_factory=dict)
    quotas: Mapping[str, float | str] = field(default_factory=dict)
    """Quota code → its value in vCPUs, or why Service Quotas gave none (the invoke's error)."""
    transit_gateway: tuple[str, str] | None = None
    """(id, state) of `cluster.deployer.transitGatewayId`, or (id, why it wasn't found); None: not asked."""


def single_zone_groups(config: StackConfig) -> list[str]:
    """GPU groups that must sit in one zone: EFA traffic does not cross zones and a cluster placement group lies in
    one (components/gpu_node_group.py), so their zone is a choice the stack file makes (stack_config rules:
    `availabilityZone` required), never one the program makes for it: a zone picked from today's offerings could be
    another at the next `up`, and a node group's subnets change only by replacing it."""
    groups = []
    for name, group in config.gpu_node_groups.items():
        rows = [GPU_INSTANCE_TYPES.get(t) for t in group.instance_types]
        # EFA as the catalog says the types have it (`efa: true` on a type without it is its own problem), unless off
        efa = group.efa is not False and bool(rows) and all(row is not None and row.num_efa_interfaces > 0
                                                            for row in rows)
        # ...and a placement group as the group decides it, by default with such EFA (placement_group_enabled)
        placement = (group.placement_group if group.placement_group is not None
                     else efa and group.capacity_reservation_id is None)
        if efa or placement:
            groups.append(name)
    return groups


def zone_problems(config: StackConfig, facts: AccountFacts) -> Iterator[Problem]:
    """A group's named zone (a reservation's, or a single-zone group's) offers every one of its instance types in
    this account, else the group is created and never gets a node there."""
    for name, group in config.gpu_node_groups.items():
        zone = group.availability_zone
        if zone is None:
            continue
        missing = [t for t in group.instance_types if zone not in facts.offered_in.get(t, frozenset())]
        if not missing:
            continue
        fitting = sorted(set(facts.network_zones).intersection(*(facts.offered_in.get(t, frozenset())
                                                                  for t in group.instance_types)))
        offered = "; ".join(f"{t} in {', '.join(sorted(facts.offered_in.get(t, ()))) or 'none of them'}"
                            for t in group.instance_types)
        yield Problem(f"gpuNodeGroups.{name}.availabilityZone",
                      f"{zone!r} does not offer {', '.join(missing)} in this account (EC2 "
                      f"DescribeInstanceTypeOfferings over the stack's zones {', '.join(facts.network_zones)}: "
                      f"{offered}); allowed: a zone that offers every type of the group "
                      f"({', '.join(fitting) or 'none of these'})"
                      + ("" if not group.reserved else ", and the reservation's own zone"))


def offering_problems(config: StackConfig, facts: AccountFacts) -> Iterator[Problem]:
    """A multi-zone group's type that no zone of the network offers never gets a node."""
    for name, group in config.gpu_node_groups.items():
        if group.availability_zone is not None:
            continue  # zone_problems
        for index, instance_type in enumerate(group.instance_types):
            if not facts.offered_in.get(instance_type):
                yield Problem(f"gpuNodeGroups.{name}.instanceTypes[{index}]",
                              f"{instance_type!r} is offered in none of the stack's zones "
                              f"({', '.join(facts.network_zones)}) of {facts.region} (EC2 "
                              "DescribeInstanceTypeOfferings): the group would never get such a node; choose another "
                              "type")


def quota_needs(config: StackConfig) -> dict[str, list[tuple[str, int, str, int]]]:
    """Quota code → (group, maxSize, its largest type, that type's vCPUs) of every GPU group counting against it."""
    needs: dict[str, list[tuple[str, int, str, int]]] = {}
    for name, group in config.gpu_node_groups.items():
        known = [GPU_INSTANCE_TYPES[t] for t in group.instance_types if t in GPU_INSTANCE_TYPES]
        if not known or group.max_size == 0:
            continue
        largest = max(known, key=lambda facts: facts.vcpus)
        quota = vcpu_quota(largest.name, group.capacity_type)
        if quota is not None:  # Capacity Blocks: not these quotas (catalog/ec2_quotas.py)
            needs.setdefault(quota.code, []).append((name, group.max_size, largest.name, largest.vcpus))
    return needs


def quota_problems(config: StackConfig, facts: AccountFacts) -> Iterator[Problem]:
    """Every GPU group at maxSize, its largest type's vCPUs, summed per quota, within the account's quota. The quota
    is the Region's whole allowance: what other stacks already run there is not subtracted (an assumption: passing
    this says the stack alone fits)."""
    for code, groups in sorted(quota_needs(config).items()):
        need = sum(size * vcpus for _, size, _, vcpus in groups)
        value = facts.quotas.get(code)
        path = (f"gpuNodeGroups.{groups[0][0]}.maxSize" if len(groups) == 1
                else f"gpuNodeGroups.{{{','.join(name for name, *_ in groups)}}}.maxSize")
        quota = vcpu_quota(groups[0][2], config.gpu_node_groups[groups[0][0]].capacity_type)
        label = f"{code} ({quota.name})" if quota else code
        if isinstance(value, str):
            yield Problem(path, f"Service Quotas has no value for quota {label}, service {SERVICE_CODE}, in "
                                f"{facts.region}: {value}; the deployer role needs servicequotas:GetServiceQuota")
            continue
        if value is None or need <= value:
            continue
        parts = " + ".join(f"{name} {size} × {vcpus} ({instance_type})" for name, size, instance_type, vcpus in groups)
        yield Problem(path, f"needs {need} vCPUs at maxSize ({parts}), but quota {label} is {value:g} vCPUs in "
                            f"{facts.region}: request an increase of quota code {code} (service {SERVICE_CODE}) in "
                            "Service Quotas, or lower maxSize")


def efa_problems(config: StackConfig, facts: AccountFacts) -> Iterator[Problem]:
    """The catalog's EFA count of each type whose EFA the catalog decides (every group but `efa: false`) agrees
    with EC2's: a type EC2 says lacks EFA would fail the launch template; one the catalog undercounts silently
    runs without it."""
    for name, group in config.gpu_node_groups.items():
        if group.efa is False:
            continue
        for index, instance_type in enumerate(group.instance_types):
            row, answer = GPU_INSTANCE_TYPES.get(instance_type), facts.instance_types.get(instance_type)
            if row is None or answer is None:
                continue
            ec2_count = answer.efa_maximum_interfaces if answer.efa_supported else 0
            if row.num_efa_interfaces != ec2_count:
                supported = str(answer.efa_supported).lower()
                yield Problem(f"gpuNodeGroups.{name}.instanceTypes[{index}]",
                              f"{instance_type!r}: catalog/gpu_instances.py says {row.num_efa_interfaces} EFA "
                              f"interface(s), EC2 DescribeInstanceTypes in {facts.region} says efaSupported="
                              f"{supported}, maximumEfaInterfaces={answer.efa_maximum_interfaces}: "
                              f"correct the catalog's {instance_type} row (with its source), or set "
                              f"gpuNodeGroups.{name}.efa: false")


def transit_gateway_problems(config: StackConfig, facts: AccountFacts) -> Iterator[Problem]:
    """The deployer's Transit Gateway exists in the stack's Region and is `available` (a VPC attachment to any
    other state fails after the VPC was made)."""
    if facts.transit_gateway is None:
        return
    gateway_id, state = facts.transit_gateway
    if state != "available":
        yield Problem("cluster.deployer.transitGatewayId",
                      f"{gateway_id!r} is not an available Transit Gateway in {facts.region} "
                      f"(EC2 DescribeTransitGateways: {state}); allowed: the id of an `available` gateway in this "
                      "Region that this account owns or that is shared with it")


def _invoke_error(error: Exception) -> str:
    return str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__


def network_zones(config: StackConfig, opts: pulumi.InvokeOptions) -> tuple[str, ...]:
    """The zones of the stack's private subnets: those the Network chooses (components/network.py, same rule and
    same invoke) plus the reserved groups' zones, or, in an adopted VPC, the zones its subnets lie in."""
    region = config.region
    if config.network.existing_vpc_id:
        return tuple(sorted({aws.ec2.get_subnet(id=subnet_id, region=region, opts=opts).availability_zone
                             for subnet_id in config.network.existing_private_subnet_ids}))
    zones = aws.get_availability_zones(state="available",
                                       filters=[{"name": "zone-type", "values": ["availability-zone"]}],
                                       region=region, opts=opts)
    chosen = control_plane_zones(zones.names, zones.zone_ids, EKS_DISALLOWED_ZONE_IDS.get(region, ()),
                                 config.network.num_availability_zones)
    reserved = {group.availability_zone for group in config.gpu_node_groups.values() if group.availability_zone}
    return tuple(sorted(set(chosen) | reserved))


def transit_gateway_state(gateway_id: str, region: str, opts: pulumi.InvokeOptions) -> str:
    """`available`, or why not. The data source has no `state` attribute, and fails when nothing matches ("no
    matching EC2 Transit Gateway found"): asked once by id, then with DescribeTransitGateways' `state` filter
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeTransitGateways.html)."""
    state_filter: list[aws.ec2transitgateway.GetTransitGatewayFilterArgsDict] = [
        {"name": "state", "values": ["available"]}]
    for filters, missing in ((None, "not found"), (state_filter, "not available")):
        try:
            aws.ec2transitgateway.get_transit_gateway(id=gateway_id, filters=filters, region=region, opts=opts)
        except Exception as error:  # the provider's error is the answer
            return f"{missing}: {_invoke_error(error)}"
    return "available"


def ask_account(config: StackConfig, opts: pulumi.InvokeOptions | None = None) -> AccountFacts:
    """Every invoke the preflight needs, synchronously. `opts`: default, the engine's default AWS provider (the
    program has registered nothing yet); every invoke names the stack's region (pulumi-aws v7's per-call `region`)."""
    opts = opts or pulumi.InvokeOptions()
    region = config.region
    zones = network_zones(config, opts)
    types = sorted({t for group in config.gpu_node_groups.values() for t in group.instance_types})
    offered_in: dict[str, set[str]] = {}
    if types and zones:
        offerings = aws.ec2.get_instance_type_offerings(
            location_type=LOCATION_TYPE, region=region, opts=opts,
            filters=[{"name": "instance-type", "values": types}, {"name": "location", "values": list(zones)}])
        for instance_type, location in zip(offerings.instance_types, offerings.locations):
            if location in zones:
                offered_in.setdefault(instance_type, set()).add(location)
    efa_types = sorted({t for group in config.gpu_node_groups.values() if group.efa is not False
                        for t in group.instance_types})
    instance_types = {}
    for instance_type in efa_types:
        answer = aws.ec2.get_instance_type(instance_type=instance_type, region=region, opts=opts)
        instance_types[instance_type] = InstanceTypeAnswer(bool(answer.efa_supported),
                                                           int(answer.efa_maximum_interfaces or 0))
    quotas: dict[str, float | str] = {}
    for code in sorted(quota_needs(config)):
        try:
            quota = aws.servicequotas.get_service_quota(service_code=SERVICE_CODE, quota_code=code, region=region,
                                                        opts=opts)
        except Exception as error:  # the provider's error is the answer: an unknown code, no permission
            quotas[code] = _invoke_error(error)
            continue
        quotas[code] = float(quota.value)
    transit_gateway = None
    deployer = config.cluster.deployer
    if deployer is not None and deployer.access == "transit-gateway" and deployer.transit_gateway_id:
        transit_gateway = (deployer.transit_gateway_id, transit_gateway_state(deployer.transit_gateway_id, region,
                                                                              opts))
    return AccountFacts(region=region, network_zones=zones,
                        offered_in={t: frozenset(z) for t, z in offered_in.items()},
                        instance_types=instance_types, quotas=quotas, transit_gateway=transit_gateway)


def judge(config: StackConfig, facts: AccountFacts) -> list[Problem]:
    """Every problem the account's answers show."""
    return [*zone_problems(config, facts), *offering_problems(config, facts), *quota_problems(config, facts),
            *efa_problems(config, facts), *transit_gateway_problems(config, facts)]


def preflight(config: StackConfig, opts: pulumi.InvokeOptions | None = None) -> None:
    """Ask the account, judge, and raise one ConfigError listing every problem."""
    problems = judge(config, ask_account(config, opts))
    if problems:
        raise ConfigError(config.stack, [Problem(p.path, f"preflight — {p.message}") for p in problems])
