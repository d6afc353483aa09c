"""How an EKS GPU group's capacity is bought (`gpuNodeGroups.<name>.capacityType`), and what each option needs.

One row per `capacityType` value (a test keeps the rows and the schema's Literal in step): which instance types the
option offers, whether it takes a capacity reservation (`capacityReservationId`), with each source. The rules that
read it are in cluster_targets/eks.py (`check_gpu_node_group`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Reservation = Literal["required", "optional", "refused"]


@dataclass(frozen=True)
class PurchaseOption:
    """What one `capacityType` needs."""

    name: str
    instance_types: frozenset[str] | None
    """The instance types the option is sold for; None: every type of the catalog."""
    reservation: Reservation
    """`required`: the group must name its reservation; `refused`: it can't target one."""
    source: str


# EC2 User Guide, "Capacity Blocks for ML" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html):
# "Capacity Blocks are currently available for p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p4d.24xlarge, trn1.32xlarge,
# and trn2.48xlarge instances" (the trn types are not GPU types of this catalog); P6-B200 since: "AWS PCS only
# supports Capacity Blocks with P6-B300, P6-B200, P5en, P5e, P5, and P4d instance families"
# (https://docs.aws.amazon.com/pcs/latest/userguide/capacity-blocks.html), whose one size is p6-b200.48xlarge.
# Other types of the catalog (p4de.24xlarge, p5.4xlarge, the g families) are not listed: a launch template with
# market type `capacity-block` for them has no Capacity Block to run in.
CAPACITY_BLOCK_INSTANCE_TYPES = frozenset({
    "p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
})

PURCHASE_OPTIONS: dict[str, PurchaseOption] = {
    "ON_DEMAND": PurchaseOption(
        "ON_DEMAND", None, "optional",
        "EKS API Nodegroup capacityType; an On-Demand Capacity Reservation is targeted through the launch template "
        "(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html)"),
    "SPOT": PurchaseOption(
        "SPOT", None, "refused",
        "\"With On-Demand Capacity Reservations, you can reserve compute capacity for your On-Demand Instances\" "
        "(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-on-demand-capacity-reservations.html); "
        "an instance that can't use the reservation \"runs as an On-Demand Instance\" (CapacityReservationSpecification"
        ", https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservationSpecification.html): a Spot "
        "group never runs in one"),
    "CAPACITY_BLOCK": PurchaseOption(
        "CAPACITY_BLOCK", CAPACITY_BLOCK_INSTANCE_TYPES, "required",
        "\"To run instances in a Capacity Block, you must specify the reservation ID when launching your instances\" "
        "(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html); the instance types: "
        "CAPACITY_BLOCK_INSTANCE_TYPES"),
}
"""`capacityType` → what it needs."""

# EC2 User Guide, "Launch instances into an existing Capacity Reservation"
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html): "You can only launch an
# instance into a Capacity Reservation that has matching attributes (instance type, platform, Availability Zone, and
# tenancy)". A reservation (a Capacity Block included) is of one instance type, so a group that targets one can list
# only that type: EKS would launch the others against a reservation they can't use.
RESERVATION_INSTANCE_TYPES = 1
"""Instance types a group that targets a capacity reservation may list."""
