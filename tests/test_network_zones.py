"""Issue 25: zones. The control plane keeps its original zones, every private subnet gets an EFS mount target, and
zones EKS disallows for cluster subnets are never chosen (awsdocs/amazon-eks-user-guide network-reqs.adoc)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from catalog.aws_regions import EKS_DISALLOWED_ZONE_IDS
from tests.conftest import plan_modified


def _reserved_zone_appended(config: dict[str, Any]) -> None:
    # day 2: a reservation in a zone outside the stack's first two
    config["gtp:gpuNodeGroups"]["g6"]["availabilityZone"] = "us-west-2c"


def test_an_appended_reservation_zone_gets_node_subnets_but_stays_out_of_the_control_plane(tmp_path: Path) -> None:
    # Before: the cluster's subnets grew by the new zone's, which EKS refuses (subnets stay in the original zones).
    import yaml

    from verify import plan as gtp_plan

    document = yaml.safe_load((Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml").read_text())
    _reserved_zone_appended(document["config"])
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    plan = gtp_plan.run("dev", stack_file=path, known_outputs=True)
    private = sorted(s.inputs["availabilityZone"] for s in plan.by_type("aws:ec2/subnet:Subnet")
                     if s.name.startswith("network-private-"))
    assert private == ["us-west-2a", "us-west-2b", "us-west-2c"]
    control_plane = plan.one("aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"]
    assert control_plane == ["network-private-us-west-2a-id", "network-private-us-west-2b-id"]


def test_every_private_subnet_gets_an_efs_mount_target(tmp_path: Path) -> None:
    # Before: one per `numAvailabilityZones`, so pods on the appended zone's nodes had no mount target there.
    plan = plan_modified(tmp_path, "dev", _reserved_zone_appended)
    assert len(plan.by_type("aws:efs/mountTarget:MountTarget")) == 3


def test_zones_eks_disallows_are_never_control_plane_zones(tmp_path: Path, monkeypatch) -> None:
    # The offline plan's us-west-2a has zone ID usw2-az1: make it one EKS disallows, as use1-az3 is in us-east-1.
    monkeypatch.setitem(EKS_DISALLOWED_ZONE_IDS, "us-west-2", ("usw2-az1",))
    plan = plan_modified(tmp_path, "dev", lambda config: None)
    zones = sorted(s.inputs["availabilityZone"] for s in plan.by_type("aws:ec2/subnet:Subnet")
                   if s.name.startswith("network-private-"))
    assert zones == ["us-west-2b", "us-west-2c"]
