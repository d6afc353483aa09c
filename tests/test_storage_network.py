"""Issue 25: FSx for Lustre's security groups pass LNET both ways, checked on an apply-like plan (known group ids)."""

from __future__ import annotations

from verify import plan as gtp_plan
from verify.validate import file_system_access_problems

CLUSTER_GROUP = gtp_plan.FAKE_OUTPUTS["aws:eks/cluster:Cluster"]["vpcConfig"]["clusterSecurityGroupId"]


def test_every_lustre_file_system_allows_lnet_in_both_directions() -> None:
    # Before: no egress within the file system's group and nothing admitting the servers into the nodes' group.
    plan = gtp_plan.run("prod", known_outputs=True)
    assert plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert file_system_access_problems(plan, CLUSTER_GROUP) == []


def test_the_check_names_each_missing_direction() -> None:
    plan = gtp_plan.run("prod", known_outputs=True)
    plan.resources = [r for r in plan.resources if not r.name.startswith("storage-to-self-")]
    assert file_system_access_problems(plan, CLUSTER_GROUP) == [
        "storage-fsx: security group storage-security-group-id lacks LNET 988/tcp with its own group out",
        "storage-fsx: security group storage-security-group-id lacks LNET 1018-1023/tcp with its own group out"]
