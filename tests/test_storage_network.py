"""Issue 25: FSx for Lustre's security groups pass LNET both ways, checked on an apply-like plan (known group ids)."""

from __future__ import annotations

from verify import plan as gtp_plan
from verify.validate import file_system_access_problems, file_system_rule_order_problems

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


def test_the_file_system_waits_for_every_rule_of_its_security_group() -> None:
    # Issue 41. Before: the file system depended on the group only (its `securityGroupIds` input), so Pulumi could
    # create it while the LNET rules were still being created, and FSx's create-time check would fail.
    plan = gtp_plan.run("prod", known_outputs=True)
    (file_system,) = plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    own_rules = [r for r in plan.resources if r.type.startswith("aws:vpc/securityGroup")
                 and r.inputs.get("securityGroupId") in file_system.inputs["securityGroupIds"]]
    # 988 and 1018-1023 in from the cluster and in and out within the group, and the egress to the nodes
    assert len(own_rules) == 7
    assert file_system_rule_order_problems(plan) == []


def test_the_order_check_names_a_rule_the_file_system_does_not_wait_for() -> None:
    plan = gtp_plan.run("prod", known_outputs=True)
    (file_system,) = plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    rule = next(r for r in plan.resources if r.name == "storage-to-self-988")
    file_system.depends_on = [urn for urn in file_system.depends_on if urn != rule.urn]
    assert file_system_rule_order_problems(plan) == [
        "storage-fsx: created without waiting for rule storage-to-self-988 of its security group "
        "storage-security-group-id"]
