"""Issue 14: updates that AWS must replace or reject — add-on builds per Kubernetes version, one access entry
per principal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog import versions
from components.eks_cluster import principal_key
from stack_config import ConfigError
from tests.conftest import plan_modified, plan_stack
from verify import plan as gtp_plan
from verify.plan_record import COMPUTED


@pytest.mark.parametrize("kubernetes_version", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_supported_kubernetes_version_has_a_build_of_every_addon(kubernetes_version: str) -> None:
    for addon in (*versions.EKS_ADDONS, "kube-proxy"):
        assert versions.eks_addon_version(addon, kubernetes_version).startswith("v")
    # kube-proxy's minor is the cluster's own (version skew policy: never newer than the API server).
    assert versions.eks_addon_version("kube-proxy", kubernetes_version).startswith(f"v{kubernetes_version}.")


def test_kube_proxy_follows_the_stacks_kubernetes_version(tmp_path: Path) -> None:
    def kube_proxy(plan: gtp_plan.Plan) -> str:
        addons = {a.inputs["addonName"]: a for a in plan.by_type("aws:eks/addon:Addon")}
        return addons["kube-proxy"].inputs["addonVersion"]

    dev = plan_stack("dev")
    assert kube_proxy(dev).startswith("v" + dev.one("aws:eks/cluster:Cluster").inputs["version"] + ".")

    def older(config: dict[str, Any]) -> None:
        config["gtp:kubernetesVersion"] = "1.32"

    # An EKS stack on another minor than the autoscaler's is refused now (catalog/compatibility.py, issue 26);
    # kube-proxy's build per minor stays pinned for when the autoscaler's pin follows.
    with pytest.raises(ConfigError, match=r"compatibility row 'cluster-autoscaler-kubernetes'"):
        plan_modified(tmp_path, "dev", older)
    assert versions.eks_addon_version("kube-proxy", "1.32") == versions.EKS_KUBE_PROXY["1.32"]


def _admins(deployer: str | None, admins: list[str]):
    def edit(config: dict[str, Any]) -> None:
        cluster = config.setdefault("gtp:cluster", {})
        cluster["adminRoleArns"] = admins
        cluster.pop("previewRoleArns", None)
        if deployer is None:
            cluster.pop("deployerRoleArn", None)
        else:
            cluster["deployerRoleArn"] = deployer
    return edit


ROLE_A = "arn:aws:iam::123456789012:role/platform-admin"
ROLE_B = "arn:aws:iam::123456789012:role/gtp-deployer"


@pytest.mark.parametrize(("deployer", "admins", "expected"), [
    (ROLE_B, [ROLE_A, ROLE_B],
     r"cluster\.adminRoleArns\[1\]: .*already cluster\.deployerRoleArn.*second EKS access entry"),
    (ROLE_B, [ROLE_A, ROLE_A], r"cluster\.adminRoleArns\[1\]: .*listed twice \(also cluster\.adminRoleArns\[0\]\)"),
])
def test_a_principal_gets_one_access_entry(tmp_path: Path, deployer, admins, expected) -> None:
    with pytest.raises(ConfigError, match=expected):
        plan_modified(tmp_path, "dev", _admins(deployer, admins))


def test_distinct_principals_each_get_one_access_entry(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "dev", _admins(ROLE_B, [ROLE_A]))
    principals = [e.inputs["principalArn"] for e in plan.by_type("aws:eks/accessEntry:AccessEntry")]
    assert sorted(principals) == sorted([ROLE_A, ROLE_B])


def test_subnets_never_land_in_local_or_wavelength_zones() -> None:
    # The offline plan's zone list holds a Local Zone and a Wavelength Zone whose names sort first (see
    # verify.plan.fake_zones); the program must filter them out by zone type, as EC2 would on its answer.
    from verify.plan import fake_zones
    for stack in ("dev", "prod"):
        plan = plan_stack(stack)
        zones = {s.inputs["availabilityZone"] for s in plan.by_type("aws:ec2/subnet:Subnet")}
        regular = {zone["name"] for zone in fake_zones(plan.config.region) if zone["zoneType"] == "availability-zone"}
        assert zones and zones <= regular, (stack, zones - regular)


def test_keda_owns_the_scaled_worker_count_and_pulumi_ignores_it() -> None:
    from tests.conftest import plan_variant
    from workload_kinds.pytorchjob import SCALED_REPLICAS
    prod = plan_variant("prod-keda")
    scaled = prod.one("kubernetes:keda.sh/v1alpha1:ScaledObject")
    target = scaled.inputs["spec"]["scaleTargetRef"]
    job = next(r for r in prod.by_type(f"kubernetes:{target['apiVersion']}:{target['kind']}")
               if r.inputs["metadata"]["name"] == target["name"])
    assert SCALED_REPLICAS in job.options["ignoreChanges"]
    # The path names a field that exists in the body (a typo would silently ignore nothing).
    node: Any = job.inputs
    for key in SCALED_REPLICAS.split("."):
        node = node[key]
    assert isinstance(node, int)


def test_jobs_without_keda_ignore_nothing() -> None:
    for stack in ("dev", "edge", "prod"):
        for job in plan_stack(stack).resources:
            if (job.type.startswith("kubernetes:kubeflow.org/")
                    or job.type.startswith("kubernetes:elastic.iml.github.io/")):
                assert not job.options.get("ignoreChanges"), (stack, job.name)


def test_pulumi_owned_jobs_keep_their_finished_object(tmp_path: Path) -> None:
    prod = plan_stack("prod")
    job = next(r for r in prod.by_type("kubernetes:kubeflow.org/v1:PyTorchJob"))
    assert "ttlSecondsAfterFinished" not in job.inputs["spec"]["runPolicy"]

    def with_ttl(config: dict[str, Any]) -> None:
        config["gtp:workloads"]["gpt-pretrain"]["ttlSecondsAfterFinished"] = 3600

    with pytest.raises(ConfigError, match=r"workloads\.gpt-pretrain\.ttlSecondsAfterFinished: 3600 has no effect "
                                          r"here: only applies where workloads\.gpt-pretrain\.autoscaling\.mode is "
                                          r"'scaledjob' .*; it would let the operator delete the finished job"):
        plan_modified(tmp_path, "prod", with_ttl)


def test_keda_jobs_still_expire(tmp_path: Path) -> None:
    dev = plan_stack("dev")
    scaled_job = dev.one("kubernetes:keda.sh/v1alpha1:ScaledJob")
    assert scaled_job.inputs["spec"]["jobTargetRef"]["ttlSecondsAfterFinished"] == 86400

    def with_ttl(config: dict[str, Any]) -> None:
        config["gtp:workloads"]["mnist"]["ttlSecondsAfterFinished"] = 600

    assert plan_modified(tmp_path, "dev", with_ttl).one("kubernetes:keda.sh/v1alpha1:ScaledJob").inputs[
        "spec"]["jobTargetRef"]["ttlSecondsAfterFinished"] == 600


def _reserved_zone(zone: str | None, zones: int = 3):
    def edit(config: dict[str, Any]) -> None:
        config["gtp:network"]["numAvailabilityZones"] = zones
        group = config["gtp:gpuNodeGroups"]["h100"]
        if zone is None:
            group.pop("availabilityZone", None)
        else:
            group["availabilityZone"] = zone
    return edit


def test_a_reserved_group_must_name_its_zone(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.h100\.availabilityZone: is required with a capacity "
                                          r"reservation"):
        plan_modified(tmp_path, "prod", _reserved_zone(None))


@pytest.mark.parametrize("zone", ["us-east-1-bos-1a", "us-west-2a", "use1-az4"])
def test_the_zone_is_a_regular_zone_of_the_region(tmp_path: Path, zone: str) -> None:
    with pytest.raises(ConfigError, match=rf"gpuNodeGroups\.h100\.availabilityZone: '{zone}' is not a regular zone"):
        plan_modified(tmp_path, "prod", _reserved_zone(zone))


def test_a_reserved_group_launches_only_in_its_zone_even_beyond_the_spread(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "prod", _reserved_zone("us-east-1c", zones=2))
    private = {s.name: s for s in plan.by_type("aws:ec2/subnet:Subnet") if "private" in s.name}
    # The first two zones keep their CIDRs; the reservation's zone is appended with the next block.
    assert {s.inputs["availabilityZone"] for s in private.values()} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    base = plan_stack("prod")
    for name in ("network-private-us-east-1a", "network-private-us-east-1b"):
        assert private[name].inputs["cidrBlock"] == base.one("aws:ec2/subnet:Subnet", name).inputs["cidrBlock"]
    group = next(r for r in plan.by_type("aws:eks/nodeGroup:NodeGroup") if r.name == "h100-nodes")
    subnet_deps = [d for d in group.depends_on if "aws:ec2/subnet:Subnet" in d]
    assert [d.rsplit("::", 1)[-1] for d in subnet_deps] == ["network-private-us-east-1c"]


def test_node_groups_are_named_by_prefix_so_a_replacement_never_collides() -> None:
    prod = plan_stack("prod")
    for group in prod.by_type("aws:eks/nodeGroup:NodeGroup"):
        assert "nodeGroupName" not in group.inputs
        prefix = group.inputs["nodeGroupNamePrefix"]
        assert prefix.startswith("gtp-prod-") and prefix.endswith("-") and len(prefix) + 26 <= 63
    for placement in prod.by_type("aws:ec2/placementGroup:PlacementGroup"):
        assert "name" not in placement.inputs  # auto-named
    # Reserved capacity is released before the new group launches; other groups are replaced create-first.
    groups = {g.name: g for g in prod.by_type("aws:eks/nodeGroup:NodeGroup")}
    assert groups["h100-nodes"].options["deleteBeforeReplace"] is True
    assert groups["a100-nodes"].options["deleteBeforeReplace"] is False


def test_long_group_names_are_rejected_before_eks_does(tmp_path: Path) -> None:
    def long_name(config: dict[str, Any]) -> None:
        groups = config["gtp:gpuNodeGroups"]
        groups["a-very-long-node-group-name-for-h100s"] = groups.pop("h100")
        config["gtp:workloads"]["gpt-pretrain"]["nodeGroup"] = "a-very-long-node-group-name-for-h100s"

    with pytest.raises(ConfigError, match=r"gpuNodeGroups\.a-very-long-node-group-name-for-h100s: name prefix "
                                          r"'gtp-prod-a-very-long-node-group-name-for-h100s-' is 47 characters"):
        plan_modified(tmp_path, "prod", long_name)


# --- Names AWS would reject or that two resources could share ------------------------------------------------------
# Resources the program names explicitly, with the config rule that keeps each name valid (stack_config/rules.py,
# cluster_targets/eks.py). Every other AWS resource is auto-named by Pulumi (a random suffix), so it can't collide
# with anything, in this stack or another one. A new explicitly named type must be added here with its rule.
EXPLICIT_NAMES = {
    ("aws:eks/cluster:Cluster", "name"): "namePrefix (DNS label, <= 40 characters)",
    ("aws:ec2/launchTemplate:LaunchTemplate", "name"): "group names are DNS labels; 'system' is reserved",
    ("aws:eks/nodeGroup:NodeGroup", "nodeGroupNamePrefix"): "63 characters with the provider's 26-character suffix",
    ("aws:kms/alias:Alias", "name"): "derived from the cluster name",
    ("aws:cloudwatch/logGroup:LogGroup", "name"): "EKS's own /aws/eks/<cluster>/cluster",
    ("aws:ecr/repository:Repository", "name"): "image.repositoryName (ECR's pattern) or derived",
}
NAME_FIELDS = ("name", "namePrefix", "nodeGroupNamePrefix", "nodeGroupName", "bucket", "bucketPrefix", "roleName",
               "repositoryName", "queueName", "fileSystemName", "logGroupName", "clusterName")


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_every_explicit_aws_name_is_known_checked_and_unique(plans, stack):
    plan = plans(stack)
    seen: dict[tuple[str, str], str] = {}
    for resource in plan.resources:
        if not resource.custom or not resource.type.startswith("aws:"):
            continue
        for field in NAME_FIELDS:
            value = resource.inputs.get(field)
            if not isinstance(value, str) or value == COMPUTED or field == "clusterName":
                continue  # a reference to another resource (its computed name, or the cluster): names nothing new
            assert (resource.type, field) in EXPLICIT_NAMES, (
                f"{resource.type} {resource.name} sets {field}={value!r}: auto-name it, or add a config rule for it "
                "and an entry in EXPLICIT_NAMES")
            key = (resource.type, value)
            assert key not in seen, f"{resource.type} name {value!r} used by {seen.get(key)} and {resource.name}"
            seen[key] = resource.name


def test_an_eks_stack_names_its_deployer_role(tmp_path: Path) -> None:
    # Before: dev left it to "the caller", so a platform admin running `up` collided with its own admin entry
    # (ResourceInUseException) and a human and CI replaced each other's entry.
    with pytest.raises(ConfigError, match=r"cluster\.deployerRoleArn: is required for an EKS stack: the IAM role CI's "
                                          r"`pulumi up` runs as"):
        plan_modified(tmp_path, "dev", _admins(None, [ROLE_A]))


def test_every_eks_stack_and_the_bench_template_give_ci_roles_an_access_entry() -> None:
    import yaml

    from tests.conftest import ROOT

    for stack in ("dev", "prod"):
        cluster = plan_stack(stack).config.cluster
        assert cluster.deployer_role_arn
        assert any(role.endswith(":role/gtp-preview") for role in cluster.preview_role_arns)
        # PR code runs under the preview role: never cluster-admin (issue 41).
        assert not any(role.endswith(":role/gtp-preview") for role in cluster.admin_role_arns)
    template = yaml.safe_load((ROOT / "stacks" / "templates" / "bench.yaml").read_text())["config"]["gtp:cluster"]
    assert template["deployerRoleArn"].endswith(":role/gtp-bench-deployer")
    assert any(role.endswith(":role/gtp-reaper") for role in template["adminRoleArns"])


def test_a_caller_without_an_access_entry_is_refused_before_any_cloud_resource(monkeypatch) -> None:
    # Before: `up` as such a role created the cluster, then got 401 on every in-cluster resource.
    import stages.cluster

    intruder = "arn:aws:iam::123456789012:role/someone-else"
    monkeypatch.setattr(stages.cluster, "under_mocks", lambda: False)
    monkeypatch.setattr(stages.cluster, "caller_role", lambda provider: intruder)
    partial = gtp_plan.Plan(project="gtp", stack="dev")
    with pytest.raises(ConfigError, match=r"cluster\.adminRoleArns: the program runs as 'arn:aws:iam::123456789012:"
                                          r"role/someone-else', which is neither cluster\.deployerRoleArn \('arn:aws:"
                                          r"iam::123456789012:role/gtp-dev-deployer'\) nor listed here"):
        gtp_plan.run("dev", into=partial)
    assert {r.type for r in partial.resources} <= {"pulumi:providers:aws", "gtp:cloud:AwsProvider"}
    for allowed in ("arn:aws:iam::123456789012:role/gtp-dev-deployer", "arn:aws:iam::123456789012:role/gtp-preview"):
        monkeypatch.setattr(stages.cluster, "caller_role", lambda provider, allowed=allowed: allowed)
        assert gtp_plan.run("dev").by_type("aws:eks/cluster:Cluster")


def test_a_preview_role_previews_with_read_only_access_and_may_not_run_up(monkeypatch) -> None:
    import pulumi

    import stages.cluster

    preview = "arn:aws:iam::123456789012:role/gtp-preview"
    grants = {r.inputs["principalArn"]: r.inputs["policyArn"] for r in
              plan_stack("dev").by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    assert grants[preview] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
    assert sorted(set(grants.values()) - {grants[preview]}) == [
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"]
    monkeypatch.setattr(stages.cluster, "under_mocks", lambda: False)
    monkeypatch.setattr(stages.cluster, "caller_role", lambda provider: preview)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)  # `up`, not `preview`
    partial = gtp_plan.Plan(project="gtp", stack="dev")
    with pytest.raises(ConfigError, match=r"cluster\.previewRoleArns: the program runs as 'arn:aws:iam::123456789012:"
                                          r"role/gtp-preview', a preview role: its access entry reads, never writes"):
        gtp_plan.run("dev", into=partial)
    assert {r.type for r in partial.resources} <= {"pulumi:providers:aws", "gtp:cloud:AwsProvider"}


def test_a_reserved_group_updates_without_surge_and_others_may_choose(tmp_path: Path) -> None:
    # Before: every group surged (new nodes first), which a full reservation can't host, so its rolling update
    # could not progress.
    groups = {g.name: g.inputs["updateConfig"] for g in plan_stack("prod").by_type("aws:eks/nodeGroup:NodeGroup")
              if g.name in ("h100-nodes", "a100-nodes")}
    assert groups == {"h100-nodes": {"maxUnavailable": 1, "updateStrategy": "MINIMAL"},
                      "a100-nodes": {"maxUnavailable": 1, "updateStrategy": "DEFAULT"}}

    def minimal(config: dict[str, Any]) -> None:
        config["gtp:gpuNodeGroups"]["g6"]["updateStrategy"] = "minimal"

    (dev_group,) = [g for g in plan_modified(tmp_path, "dev", minimal).by_type("aws:eks/nodeGroup:NodeGroup")
                    if g.name == "g6-nodes"]
    assert dev_group.inputs["updateConfig"]["updateStrategy"] == "MINIMAL"


# --- Issue 41: access entries keyed by principal, every grant outliving what is deleted through it -------------------

ADMINS = ["arn:aws:iam::123456789012:role/platform-admins", "arn:aws:iam::123456789012:role/gtp-preview",
          "arn:aws:iam::123456789012:role/gtp-reaper"]
DEPLOYER = "arn:aws:iam::123456789012:role/gtp-dev-deployer"


def _sub(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def _access(plan: gtp_plan.Plan) -> dict[str, tuple[str, str]]:
    """Pulumi name → (type, principal) of every access entry and policy association."""
    return {f"{r.type} {r.name}": r.inputs.get("principalArn") for r in plan.resources
            if r.type in ("aws:eks/accessEntry:AccessEntry", "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}


def test_an_admin_keeps_its_resources_when_another_is_removed_or_the_list_reordered(tmp_path: Path) -> None:
    """EKS allows one access entry per principal: a resource keyed by list position changed principal when the list
    changed, and Pulumi's create-first replacement then collided with the entry it replaced."""
    base = _access(plan_modified(_sub(tmp_path, "a"), "dev", _admins(DEPLOYER, ADMINS)))
    reordered = _access(plan_modified(_sub(tmp_path, "b"), "dev", _admins(DEPLOYER, list(reversed(ADMINS)))))
    removed = _access(plan_modified(_sub(tmp_path, "c"), "dev", _admins(DEPLOYER, ADMINS[1:])))
    assert reordered == base
    assert removed == {name: principal for name, principal in base.items() if principal != ADMINS[0]}


def test_a_reorder_is_no_change_in_plan_diff(tmp_path: Path) -> None:
    from verify.plan_diff import PlanDiff

    base = json.loads(gtp_plan.render(plan_modified(_sub(tmp_path, "a"), "dev", _admins(DEPLOYER, ADMINS)))[0])
    head = json.loads(gtp_plan.render(plan_modified(_sub(tmp_path, "b"), "dev", _admins(DEPLOYER, ADMINS[::-1])))[0])
    diff = PlanDiff(base, head)
    assert (diff.added, diff.removed, diff.renamed, diff.changed) == ([], [], [], [])


def test_the_index_named_entries_of_a_stack_before_are_adopted_by_alias() -> None:
    """A stack deployed before keyed its admins by index (`eks-admin-0`): the alias makes its first `up` after the
    rename adopt them (no delete, no create), and plan-diff reads it the same way."""
    from verify.plan_diff import PlanDiff

    head = json.loads(gtp_plan.render(plan_stack("dev"))[0])
    base = json.loads(json.dumps(head))
    for resource in base["resources"]:
        for index, role in enumerate(plan_stack("dev").config.cluster.admin_role_arns):
            if resource["name"] == f"eks-access-{principal_key(role)}":
                resource["urn"] = resource["urn"].replace(resource["name"], f"eks-admin-{index}")
                resource["name"] = f"eks-admin-{index}"
                resource["options"].pop("aliases")
    assert base != head
    diff = PlanDiff(base, head)
    assert (diff.added, diff.removed, diff.renamed, diff.changed) == ([], [], [], [])


def test_principal_key_is_account_and_role_name() -> None:
    assert principal_key("arn:aws:iam::123456789012:role/platform-admins") == "123456789012-platform-admins"
    # IAM role names are unique in an account whatever their path.
    assert principal_key("arn:aws:iam::123456789012:role/teams/ml/platform-admins") == "123456789012-platform-admins"
    assert principal_key("arn:aws-cn:iam::210987654321:role/ops") == "210987654321-ops"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_access_grant_is_an_ancestor_of_the_kubernetes_provider(stack: str) -> None:
    from policy.gtp_policy.graph import StackIndex

    plan = plan_stack(stack)
    records = [r.as_json() for r in plan.resources]
    index = StackIndex(records)
    provider = next(r for r in records if r["type"] == "pulumi:providers:kubernetes")
    ancestors = {r["urn"] for r in index.upstream(provider)}
    grants = [r for r in records if r["type"] in ("aws:eks/accessEntry:AccessEntry",
                                                  "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")]
    cluster = plan.config.cluster
    assert len(grants) == 2 * (1 + len(cluster.admin_role_arns) + len(cluster.preview_role_arns))
    assert {g["urn"] for g in grants} <= ancestors


def test_a_grant_the_provider_does_not_wait_for_fails_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy rule runs in `make plan` (verify/validate.py run_policy_pack) and under `pulumi preview`: planted
    on the real program, an admin grant left out of the provider's ancestors fails it, naming the grant."""
    import components.eks_cluster as eks_cluster
    from verify.validate import Report, run_policy_pack

    original = eks_cluster.EksCluster.__init__

    def deployer_only(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.access_grants = [self.deployer_access]  # what the provider waited for before issue 41

    monkeypatch.setattr(eks_cluster.EksCluster, "__init__", deployer_only)
    report = Report()
    run_policy_pack(gtp_plan.run("dev"), report)
    assert [line for line in report.errors if "kubernetes-provider-depends-on-access-entry" in line
            and "not an ancestor: eks-access-123456789012-gtp-preview, eks-access-123456789012-gtp-preview, "
                "eks-access-123456789012-platform-admins, eks-access-123456789012-platform-admins" in line]


def test_dev_as_deployed_before_moves_its_preview_role_to_read_only_without_a_new_entry() -> None:
    """dev as committed before issue 41 (its golden plan at d83b049) named `gtp-preview` `eks-admin-1`, an admin.
    Now a preview role: the same entry is adopted (an entry created beside it for the same principal would collide,
    one entry per principal) and only its policy association is replaced, the new one created first."""
    import subprocess

    from tests.conftest import ROOT
    from verify.plan_diff import PlanDiff

    before = subprocess.run(["git", "show", "d83b049:tests/golden/dev/resources.json"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    access = ("aws:eks/accessEntry:AccessEntry", "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")

    def grants(document: dict[str, Any]) -> dict[str, Any]:
        return {**document, "resources": [r for r in document["resources"] if r["type"] in access]}

    diff = PlanDiff(grants(json.loads(before)), grants(json.loads(gtp_plan.render(plan_stack("dev"))[0])))
    assert (diff.added, diff.removed, diff.renamed) == ([], [], [])
    [(urn, props)] = diff.replaced.items()
    assert urn.endswith("AccessPolicyAssociation::eks-access-123456789012-gtp-preview") and props == ["policyArn"]
    assert urn not in diff.delete_first
