"""Checks only an EKS stack has: how the deployer reaches the cluster's API, and the VPC the stack creates or
adopts (its `network` section). The EKS target runs them (`EksTarget.rules`), only on its own stacks."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator

from stack_config import Problem, StackConfig
from stack_config.site_rules import aws_id_problem

ALLOWED_ACCESS = ("public-endpoint (a public endpoint restricted to the deployer's CIDRs), in-vpc (a runner inside "
                  "an adopted VPC) or transit-gateway (a runner in a network attached to a Transit Gateway)")

# GitHub-hosted runner images (docs.github.com "GitHub-hosted runners" → "Standard GitHub-hosted runners"): they run
# in GitHub's network, outside every VPC, from addresses that change per job.
GITHUB_HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.-]*)$")


def _ipv4_cidrs(cidrs: Iterable[str]) -> list[ipaddress.IPv4Network] | None:
    """The CIDRs as networks, or None when any is invalid (reported by its own rule)."""
    networks = []
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            return None
        if network.version != 4 or network.prefixlen == 0:
            return None
        networks.append(network)
    return networks


def check_deployer(config: StackConfig) -> Iterator[Problem]:
    """The declared deployer can reach the Kubernetes API of the cluster it deploys into, before anything is
    registered: otherwise every in-cluster resource of the first `pulumi up` times out after the cluster was made.
    Its fields here; how it reaches the API in `check_deployer_route`."""
    deployer = config.cluster.deployer
    path = "cluster.deployer"
    if deployer is None:
        yield Problem(path, f"is required for mode 'eks': declare where `pulumi up` runs and how it reaches the API — "
                            f"access {ALLOWED_ACCESS}, with runnerLabels and cidrs")
        return
    if deployer.access is None:
        yield Problem(f"{path}.access", f"is required for mode 'eks'; allowed: {ALLOWED_ACCESS}")
    if not deployer.runner_labels:
        yield Problem(f"{path}.runnerLabels", "is required for mode 'eks': the GitHub Actions runs-on labels of a "
                                              "runner that can reach the API, e.g. [self-hosted, gtp-prod]")
    elif "self-hosted" not in deployer.runner_labels:
        for index, label in enumerate(deployer.runner_labels):
            if GITHUB_HOSTED_LABEL.match(label):
                yield Problem(f"{path}.runnerLabels[{index}]",
                              f"{label!r} is a GitHub-hosted runner: it runs outside every VPC from changing "
                              "addresses, so it reaches neither a private endpoint nor a CIDR-restricted public one; "
                              "allowed: a self-hosted runner's labels (including 'self-hosted') or a larger runner "
                              "with static IP addresses (its own label)")
    if not deployer.cidrs:
        yield Problem(f"{path}.cidrs", "is required for mode 'eks': the IPv4 CIDRs the deployer connects from")
    for index, cidr in enumerate(deployer.cidrs):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            yield Problem(f"{path}.cidrs[{index}]", f"{cidr!r} is not an IPv4 CIDR like '10.250.0.0/24' (host bits "
                                                    "unset)")
            continue
        if network.version != 4:
            yield Problem(f"{path}.cidrs[{index}]", f"{cidr!r} is IPv6; the cluster's endpoint is IPv4: list IPv4 "
                                                    "CIDRs")
        elif network.prefixlen == 0:
            yield Problem(f"{path}.cidrs[{index}]", f"{cidr!r} is every address: list the deployer's own CIDRs")


def check_deployer_route(config: StackConfig) -> Iterator[Problem]:
    """The deployer's access agrees with the endpoint and the VPC: a public endpoint that admits its CIDRs, a VPC
    it already stands in, or a Transit Gateway route that doesn't shadow the VPC."""
    cluster = config.cluster
    deployer = cluster.deployer
    path = "cluster.deployer"
    if deployer is None:
        return  # check_deployer says it is required
    deployer_networks = _ipv4_cidrs(deployer.cidrs)
    if deployer.access == "public-endpoint":
        if not cluster.endpoint_public_access:
            yield Problem(f"{path}.access", "'public-endpoint', but cluster.endpointPublicAccess is false: the API is "
                          "private-only, unreachable from outside the VPC; allowed: set cluster.endpointPublicAccess "
                          "true with publicAccessCidrs covering deployer.cidrs, or access in-vpc / transit-gateway")
        else:
            public = _ipv4_cidrs(cluster.public_access_cidrs)
            if public and deployer_networks:
                for index, network in enumerate(deployer_networks):
                    if not any(network.subnet_of(allowed_net) for allowed_net in public):
                        yield Problem(f"{path}.cidrs[{index}]",
                                      f"{deployer.cidrs[index]!r} is not within cluster.publicAccessCidrs "
                                      f"({', '.join(cluster.public_access_cidrs)}): the public endpoint would refuse "
                                      "the deployer; add it there")
    elif deployer.access == "in-vpc":
        if not config.network.existing_vpc_id:
            yield Problem(f"{path}.access", "'in-vpc', but this stack creates its VPC (network.existingVpcId is "
                          "unset): no runner stands in it before the first `pulumi up`; allowed: adopt the runner's "
                          "VPC (network.existingVpcId), access transit-gateway, or access public-endpoint")
    elif deployer.access == "transit-gateway":
        if config.network.existing_vpc_id:
            yield Problem(f"{path}.access", "'transit-gateway' attaches the VPC this stack creates, but "
                          f"network.existingVpcId adopts {config.network.existing_vpc_id!r}, whose routes the stack "
                          "doesn't own; allowed: in-vpc (route the runners to it yourself) or a stack-created VPC")
        if deployer.transit_gateway_id is None:
            yield Problem(f"{path}.transitGatewayId", "is required for access 'transit-gateway' (tgw-...)")
        elif problem := aws_id_problem(f"{path}.transitGatewayId", deployer.transit_gateway_id, "tgw",
                                       "Transit Gateway"):
            yield problem
        if deployer_networks and not config.network.existing_vpc_id:
            try:
                vpc = ipaddress.ip_network(config.network.vpc_cidr, strict=True)
            except ValueError:
                vpc = None  # reported by stack_config/rules.py _check_network
            for index, network in enumerate(deployer_networks):
                if vpc is not None and vpc.version == 4 and network.overlaps(vpc):
                    yield Problem(f"{path}.cidrs[{index}]", f"{deployer.cidrs[index]!r} overlaps network.vpcCidr "
                                  f"{config.network.vpc_cidr!r}: the route to the deployer would shadow the VPC's "
                                  "own; use the runners' CIDRs outside it")


def check_vpc(config: StackConfig) -> Iterator[Problem]:
    """An adopted VPC's subnets: two private ones at least, and none without the VPC; every id in EC2's shape."""
    network = config.network
    ids = [("network.existingVpcId", network.existing_vpc_id, "vpc", "VPC")] if network.existing_vpc_id else []
    for key, subnets in (("existingPrivateSubnetIds", network.existing_private_subnet_ids),
                         ("existingPublicSubnetIds", network.existing_public_subnet_ids)):
        ids += [(f"network.{key}[{index}]", subnet, "subnet", "subnet") for index, subnet in enumerate(subnets)]
    for path, value, prefix, what in ids:
        if problem := aws_id_problem(path, value, prefix, what):
            yield problem
    if network.existing_vpc_id and len(network.existing_private_subnet_ids) < 2:
        yield Problem("network.existingPrivateSubnetIds", "an adopted VPC needs at least two private subnets "
                                                          "(in different availability zones)")
    if not network.existing_vpc_id and (network.existing_private_subnet_ids or network.existing_public_subnet_ids):
        yield Problem("network.existingVpcId", "subnet ids are given but no existingVpcId")
