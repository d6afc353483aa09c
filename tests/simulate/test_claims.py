"""Claims bound (verify/simulate/claims.py): Prometheus' EBS claim on prod, and planted defects it must report."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from components.gpu_metrics import (
    PROMETHEUS_STORAGE_CLASS,
    duration_seconds,
    estimated_series,
    prometheus_storage_class,
    prometheus_values,
    prometheus_volume_gib,
)
from tests.conftest import plan_stack
from verify.plan_record import Plan
from verify.render import ClusterObject, render_cluster
from verify.simulate import simulate

pytestmark = pytest.mark.slow
CLAIM = ("gpu-metrics", "prometheus-server")


def _claims_check(edit: Callable[[list[ClusterObject]], None] | None = None,
                  edit_plan: Callable[[Plan], None] | None = None) -> dict:
    plan = plan_stack("prod")
    objects = copy.deepcopy(render_cluster(plan))
    if edit:
        edit(objects)
    if edit_plan:
        plan = copy.deepcopy(plan)
        edit_plan(plan)
    return simulate(plan, objects)["checks"]["claims bound"]


def _find(objects: list[ClusterObject], kind: str, name: str) -> ClusterObject:
    return next(o for o in objects if o.kind == kind and o.name == name)


def test_prod_prometheus_claim_binds_on_gp3_in_the_pods_zone() -> None:
    check = _claims_check()
    assert check["findings"] == [] and check["passed"] == check["total"] == 3
    assert ("PersistentVolumeClaim gpu-metrics/prometheus-server: ebs.csi.aws.com ['ReadWriteOnce'] in class "
            "gtp-prometheus (WaitForFirstConsumer), mounted by Deployment gpu-metrics/prometheus-server"
            in check["details"])


def _one_finding(check: dict) -> str:
    assert len(check["findings"]) == 1, check["findings"]
    return check["findings"][0]["rule"]


def test_a_missing_storage_class_leaves_the_claim_pending() -> None:
    check = _claims_check(lambda objects: objects.remove(_find(objects, "StorageClass", PROMETHEUS_STORAGE_CLASS)))
    assert _one_finding(check) == "StorageClass 'gtp-prometheus' is not in the cluster: the claim stays Pending"


def test_many_writers_on_ebs_are_refused() -> None:
    def edit(objects: list[ClusterObject]) -> None:
        _find(objects, "PersistentVolumeClaim", CLAIM[1]).obj["spec"]["accessModes"] = ["ReadWriteMany"]

    assert _one_finding(_claims_check(edit)).startswith(
        "asks ['ReadWriteMany'] of ebs.csi.aws.com, which provisions file systems only as ['ReadWriteOnce']")


def test_immediate_binding_of_a_zonal_volume_is_refused() -> None:
    def edit(objects: list[ClusterObject]) -> None:
        _find(objects, "StorageClass", PROMETHEUS_STORAGE_CLASS).obj["volumeBindingMode"] = "Immediate"

    assert _one_finding(_claims_check(edit)).startswith(
        "volumeBindingMode Immediate creates the zonal ebs.csi.aws.com volume before its pod is scheduled")


def _allow_zones(*zones: str) -> Callable[[list[ClusterObject]], None]:
    def edit(objects: list[ClusterObject]) -> None:
        _find(objects, "StorageClass", PROMETHEUS_STORAGE_CLASS).obj["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": "topology.ebs.csi.aws.com/zone", "values": list(zones)}]}]

    return edit


def test_the_volume_is_created_where_the_system_group_keeps_nodes() -> None:
    # Issue 41: the server lands on the system group only (the GPU groups' taints), whose subnets span 3 zones.
    check = _claims_check()
    assert ("PersistentVolumeClaim gpu-metrics/prometheus-server: its volume is created in one of ['us-east-1a', "
            "'us-east-1b', 'us-east-1c'], each a zone of a node group keeping nodes: system ['us-east-1a', "
            "'us-east-1b', 'us-east-1c'] (min 2); assumed: system (min 2 over 3 zones) has a node in the volume's "
            "zone when its pod is replaced" in check["details"])
    assert _claims_check(_allow_zones("us-east-1a", "us-east-1b"))["findings"] == []


def test_allowed_topologies_outside_the_system_groups_zones_are_refused() -> None:
    assert _one_finding(_claims_check(_allow_zones("us-east-1a", "us-east-1d"))) == (
        "allowedTopologies names zone(s) ['us-east-1d'] where no node group its pod lands on has a subnet (system "
        "['us-east-1a', 'us-east-1b', 'us-east-1c'] (min 2)): a ebs.csi.aws.com volume is zonal and the pod can't "
        "follow it there")


def test_a_volume_zone_only_a_scale_from_zero_group_reaches_is_refused() -> None:
    # Planted: the server also tolerates the GPU groups' taints (so it can land on a100, min 0), a100 sits in
    # us-east-1c, and the system group loses its us-east-1c subnet: a volume made while it ran on an a100 node in 1c
    # strands it.
    def tolerate_all(objects: list[ClusterObject]) -> None:
        _find(objects, "Deployment", "prometheus-server").obj["spec"]["template"]["spec"]["tolerations"] = [
            {"operator": "Exists"}]

    def two_zone_system(plan: Plan) -> None:
        system = next(r for r in plan.resources if r.type == "aws:eks/nodeGroup:NodeGroup" and r.name == "eks-system")
        system.depends_on = [urn for urn in system.depends_on if not urn.endswith("::network-private-us-east-1c")]
        a100 = next(r for r in plan.resources if r.type == "aws:eks/nodeGroup:NodeGroup" and r.name == "a100-nodes")
        a100.depends_on = [urn.replace("::network-private-us-east-1a", "::network-private-us-east-1c")
                           for urn in a100.depends_on]

    rule = _one_finding(_claims_check(tolerate_all, two_zone_system))
    assert rule.startswith("the ebs.csi.aws.com volume can be created in zone(s) ['us-east-1c'], where no node group "
                           "its pod lands on keeps a node (")
    assert "a100 ['us-east-1c'] (min 0)" in rule
    assert "system ['us-east-1a', 'us-east-1b'] (min 2)" in rule


def test_a_rolling_update_of_a_read_write_once_volume_is_refused() -> None:
    def edit(objects: list[ClusterObject]) -> None:
        _find(objects, "Deployment", "prometheus-server").obj["spec"]["strategy"] = {"type": "RollingUpdate"}

    assert "with strategy RollingUpdate and 1 replica(s): a second pod can't attach the volume" in _one_finding(
        _claims_check(edit))


def test_the_volume_is_sized_from_retention() -> None:
    assert duration_seconds("30d") == 30 * 86400 and duration_seconds("1y2w") == (365 + 14) * 86400
    assert prometheus_volume_gib("30d", estimated_series(gpus=64, trainer_pods=6)) == 10  # the floor
    # 200k series for a year at 1 sample/min, 2 bytes each, doubled: 391.6 GiB.
    assert prometheus_volume_gib("1y", 200_000) == 392
    assert prometheus_volume_gib("2y", 200_000) == 784  # 783.2 rounded up
    with pytest.raises(ValueError, match="'30 days' is not a Prometheus duration"):
        duration_seconds("30 days")


def test_prometheus_values_put_the_tsdb_on_the_claim_with_a_size_bound() -> None:
    server = prometheus_values("30d", volume_gib=40)["server"]
    assert server["persistentVolume"] == {"enabled": True, "storageClass": "gtp-prometheus", "size": "40Gi",
                                          "accessModes": ["ReadWriteOnce"]}
    assert server["retentionSize"] == "32GB" and "emptyDir" not in server
    plain = prometheus_values("30d")["server"]
    assert plain["persistentVolume"] == {"enabled": False} and plain["emptyDir"] == {"sizeLimit": "10Gi"}
    assert prometheus_storage_class()["parameters"] == {"type": "gp3", "encrypted": "true",
                                                        "csi.storage.k8s.io/fstype": "ext4"}


def test_the_volume_carries_the_stacks_tags_the_driver_accepts() -> None:
    # Issue 41: the orphan audit finds a leftover volume by `gtp:stack` (or `KubernetesCluster`); aws-ebs-csi-driver
    # v1.51.1 fails CreateVolume on a reserved key (pkg/driver/validation.go:44-58), so those are left out.
    spec = prometheus_storage_class({"gtp:stack": "prod", "KubernetesCluster": "gtp-prod", "team": "a b",
                                     "kubernetes.io/cluster/gtp-prod": "owned", "CSIVolumeName": "x", "k=v": "y"})
    assert spec["reclaimPolicy"] == "Delete" and spec["volumeBindingMode"] == "WaitForFirstConsumer"
    assert {k: v for k, v in spec["parameters"].items() if k.startswith("tag")} == {
        "tagSpecification_1": "KubernetesCluster=gtp-prod", "tagSpecification_2": "gtp:stack=prod",
        "tagSpecification_3": "team=a b"}


def test_only_eks_stacks_get_the_volume() -> None:
    from stages.gpu import prometheus_volume

    assert prometheus_volume(plan_stack("prod").config) == 10
    assert prometheus_volume(plan_stack("edge").config) is None
