"""Values in a stack file that only stand in for the real ones (documentation ranges and example ids).

The committed stacks carry a few so that they plan offline; a real `pulumi up` with them would fail late (a
reservation that doesn't exist) or, worse, succeed wrongly (an API endpoint open to a range nobody owns, an admin
role in someone else's account). The offline plan warns with each key path; the real engine refuses to run
(`stages.config.load_stack_config`) until every one is replaced.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from stack_config.problems import Problem
from stack_config.schema import StackConfig

# RFC 5737 documentation ranges (IPv4) and RFC 3849 (IPv6): never routed on the internet.
DOCUMENTATION_NETWORKS = tuple(ipaddress.ip_network(net) for net in
                               ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
# Account ids AWS's documentation uses in examples, and this project's own stand-in for prod's account.
EXAMPLE_ACCOUNTS = frozenset({"123456789012", "111122223333", "444455556666", "210987654321"})
# The capacity reservation id in AWS's documentation examples.
EXAMPLE_RESERVATIONS = frozenset({"cr-0123456789abcdef0", "cr-1234567890abcdef1"})
# Resource ids shaped like AWS documentation's examples (`tgw-0123456789abcdef0`, `vpc-1234567890abcdef0`,
# `...EXAMPLE`).
EXAMPLE_RESOURCE_ID = re.compile(r"^[a-z]+-(0123456789abcdef0|1234567890abcdef0|[0-9a-z]*EXAMPLE[0-9a-z]*)$")
# A runner label that says it is an example (`gtp-prod-example`): the runner must be registered under a real one.
EXAMPLE_LABEL = re.compile(r"(^|[-_.])example([-_.]|$)")
# RFC 2606 names reserved for examples.
EXAMPLE_HOST = re.compile(r"(^|[./@])(example\.(com|net|org)|[a-z0-9-]+\.example)([:/]|$)")


def _in_documentation_range(cidr: str) -> bool:
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
    return any(network.version == doc.version and network.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS)


def _account(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 else None


def find_placeholders(config: StackConfig) -> Iterator[Problem]:
    """Every stand-in value, as a Problem naming its key path (in file order of the sections)."""
    cluster = config.cluster
    for index, cidr in enumerate(cluster.public_access_cidrs):
        if _in_documentation_range(cidr):
            yield Problem(f"cluster.publicAccessCidrs[{index}]", f"{cidr!r} is a documentation range (RFC 5737): "
                          "put the CIDRs your deployer and engineers reach the API from")
    deployer = cluster.deployer
    if deployer is not None:
        for index, label in enumerate(deployer.runner_labels):
            if EXAMPLE_LABEL.search(label):
                yield Problem(f"cluster.deployer.runnerLabels[{index}]", f"{label!r} is an example label: register a "
                              "runner that can reach the API (docs/deploy.md, 'Where the deployer stands') and use "
                              "its label")
        for index, cidr in enumerate(deployer.cidrs):
            if _in_documentation_range(cidr):
                yield Problem(f"cluster.deployer.cidrs[{index}]", f"{cidr!r} is a documentation range (RFC 5737): put "
                              "the CIDRs your deployer's connections come from")
        if deployer.transit_gateway_id and EXAMPLE_RESOURCE_ID.match(deployer.transit_gateway_id):
            yield Problem("cluster.deployer.transitGatewayId", f"{deployer.transit_gateway_id!r} is an example id: use "
                          "the Transit Gateway your runners' network is attached to (aws ec2 "
                          "describe-transit-gateways)")
    if cluster.deployer_role_arn is not None and _account(cluster.deployer_role_arn) in EXAMPLE_ACCOUNTS:
        yield Problem("cluster.deployerRoleArn", f"{cluster.deployer_role_arn!r} is in an example account: use the "
                      "role your deployment runs as")
    for index, role in enumerate(cluster.admin_role_arns):
        if _account(role) in EXAMPLE_ACCOUNTS:
            yield Problem(f"cluster.adminRoleArns[{index}]", f"{role!r} is in an example account: use your "
                          "platform admins' role")
    for index, role in enumerate(cluster.preview_role_arns):
        if _account(role) in EXAMPLE_ACCOUNTS:
            yield Problem(f"cluster.previewRoleArns[{index}]", f"{role!r} is in an example account: use the role "
                          "your pull requests' `pulumi preview` runs as")
    for name, group in config.gpu_node_groups.items():
        if group.capacity_reservation_id in EXAMPLE_RESERVATIONS:
            yield Problem(f"gpuNodeGroups.{name}.capacityReservationId", f"{group.capacity_reservation_id!r} is AWS's "
                          "example id: use your reservation's id (aws ec2 describe-capacity-reservations)")
    registry = config.image.existing_registry
    if registry and EXAMPLE_HOST.search(registry):
        yield Problem("image.existingRegistry", f"{registry!r} is an example host (RFC 2606): use your registry")
    swarm = config.cluster.swarm
    if swarm is not None and swarm.manager_host and EXAMPLE_HOST.search(swarm.manager_host):
        yield Problem("cluster.swarm.managerHost", f"{swarm.manager_host!r} is an example host (RFC 2606)")
