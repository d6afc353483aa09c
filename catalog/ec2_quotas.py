"""EC2's vCPU quotas for the GPU instance families of catalog/gpu_instances.py, by purchase option.

EC2 limits running On-Demand Instances and Spot requests per Region in vCPUs, one quota per group of instance
families ("Amazon EC2 service quotas", https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html;
Spot: "Spot Instance quotas", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html, which lists
"All G and VT Spot Instance Requests" and "All P Spot Instance Requests"). Service Quotas names each by a code under
service `ec2` (`aws service-quotas get-service-quota --service-code ec2 --quota-code <code>`): L-1216C47A is the
"Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" quota in the AWS CLI's Service Quotas examples
(https://docs.aws.amazon.com/cli/latest/userguide/cli_service-quotas_code_examples.html); the G and P codes below
are those the Service Quotas console shows for the quotas named beside them. A wrong code is not silent: the
preflight (cluster_targets/eks_preflight.py) refuses when Service Quotas doesn't know it.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE_CODE = "ec2"


@dataclass(frozen=True)
class VcpuQuota:
    code: str
    name: str


# Family letter (the instance type's first letter: g4dn, g5, g5g, g6, g6e, gr6 → G; p4d, p5, p5en, p6-b200 → P) →
# purchase option → quota. `ON_DEMAND` covers instances launched into an On-Demand Capacity Reservation too (the
# reservation's instances run On-Demand). Capacity Blocks are not listed: their limits are not these quotas.
VCPU_QUOTAS: dict[str, dict[str, VcpuQuota]] = {
    "g": {
        "ON_DEMAND": VcpuQuota("L-DB2E81BA", "Running On-Demand G and VT instances"),
        "SPOT": VcpuQuota("L-3819A6DF", "All G and VT Spot Instance Requests"),
    },
    "p": {
        "ON_DEMAND": VcpuQuota("L-417A185B", "Running On-Demand P instances"),
        "SPOT": VcpuQuota("L-7212CCBC", "All P Spot Instance Requests"),
    },
}


def vcpu_quota(instance_type: str, capacity_type: str) -> VcpuQuota | None:
    """The quota an instance of this type and purchase option counts against; None where the table has none."""
    return VCPU_QUOTAS.get(instance_type[:1], {}).get(capacity_type)
