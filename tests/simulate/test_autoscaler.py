"""Scale-from-zero simulation: cluster-autoscaler 1.34's AWS template node (verify/simulate/autoscaler.py)."""

from __future__ import annotations

from typing import Any

import pytest

from catalog import node_labels as nl
from components.gpu_node_group import autoscaler_tags
from conventions.names import NODE_GROUP_LABEL, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from tests.conftest import plan_stack
from verify import render as gtp_cluster
from verify.simulate import autoscaler, simulate
from verify.simulate.model import ExpandedPod
from verify.simulate.nodes import NodeGroup

PREFIX = "k8s.io/cluster-autoscaler/node-template/"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GIB = 2**30
AUTOSCALER = gtp_cluster.ClusterObject("chart", {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ca", "namespace": "kube-system"},
    "spec": {"template": {"spec": {"containers": [{"name": "ca", "command": [
        "./cluster-autoscaler", "--cloud-provider=aws"]}]}}}})


def training_pod(resource: str, *, gpus: str = "1", selector: dict | None = None) -> ExpandedPod:
    spec: dict[str, Any] = {
        "containers": [{"name": "pytorch", "resources": {"requests": {
            "cpu": "2", "memory": "8Gi", "ephemeral-storage": "20Gi", resource: gpus}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": NODE_GROUP_LABEL, "operator": "In", "values": ["g6"]}]}]}}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}
    if selector:
        spec["nodeSelector"] = selector
    return ExpandedPod(owner="ScaledJob training-dev/mnist job", source="stack", namespace="training-dev",
                       pod={"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec})


def g6_group(tags: dict[str, str], *, shared: bool = True, min_size: int = 0) -> NodeGroup:
    """The real g6 group (what its nodes offer once running) with the given ASG tags."""
    alloc = {"cpu": 3.92, "memory": 13.0 * GIB, "ephemeral-storage": 179.0 * GIB, "pods": 58.0,
             SHARED_GPU_RESOURCE if shared else WHOLE_GPU_RESOURCE: 4.0 if shared else 1.0}
    group = NodeGroup(name="g6", role="gpu", labels={NODE_GROUP_LABEL: "g6"},
                      taints=[GPU_TAINT], allocatable=alloc, min_size=min_size, max_size=2,
                      instance_types=("g6.xlarge", "g6.2xlarge"), gpu_model="L4", num_gpus=1, asg_tags=tags,
                      region="us-west-2")
    group.free = dict(alloc)
    return group


def current_tags(shared: bool = True) -> dict[str, str]:
    return {key: value for key, value in autoscaler_tags(
        "gtp-dev", 1, {NODE_GROUP_LABEL: "g6"}, {"nvidia.com/gpu": ("true", "NO_SCHEDULE")},
        disk_size_gib=200, gpu_slices_per_gpu=4 if shared else 0).items() if "/node-template/" in key}


def check(group: NodeGroup, pods: list[ExpandedPod], objects: list | None = None) -> Any:
    return autoscaler.check(pods, [group], [AUTOSCALER] if objects is None else objects)


# --- the template node ----------------------------------------------------------------------------------------
def test_the_template_starts_from_the_first_instance_type_and_tags_overwrite_capacity() -> None:
    template = autoscaler.template_node(g6_group(current_tags()))
    assert template.instance_types == ("g6.xlarge",)
    assert template.allocatable == {"pods": 110.0, "cpu": 4.0, "memory": 16.0 * GIB, WHOLE_GPU_RESOURCE: 0.0,
                                    SHARED_GPU_RESOURCE: 4.0, "ephemeral-storage": 200.0 * GIB}
    assert template.labels[NODE_GROUP_LABEL] == "g6" and template.labels[nl.INSTANCE_TYPE] == "g6.xlarge"
    assert template.labels[nl.ARCH] == "amd64" and template.taints == [GPU_TAINT]


def test_without_tags_the_template_has_the_types_gpus_and_no_disk() -> None:
    template = autoscaler.template_node(g6_group({}))
    assert template.allocatable[WHOLE_GPU_RESOURCE] == 1.0 and "ephemeral-storage" not in template.allocatable
    assert NODE_GROUP_LABEL not in template.labels and template.taints == []


def test_unparsable_resource_tags_and_taints_without_an_effect_are_skipped_as_upstream_does() -> None:
    template = autoscaler.template_node(g6_group({PREFIX + "resources/ephemeral-storage": "200 GiB",
                                                  PREFIX + "taint/nvidia.com/gpu": "true",
                                                  PREFIX + "taint/dedicated": "ml:NoExecute"}))
    assert "ephemeral-storage" not in template.allocatable
    assert template.taints == [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]


# --- old failure #1: tags that never let a min-0 group grow ---------------------------------------------------
def test_old_failure_1_no_ephemeral_storage_tag_means_no_scale_up() -> None:
    tags = {k: v for k, v in current_tags().items() if not k.endswith("ephemeral-storage")}
    result = check(g6_group(tags), [training_pod(SHARED_GPU_RESOURCE)])
    assert (result.passed, result.total) == (0, 1)
    assert "requests ephemeral-storage 20.00Gi > free 0.00Gi" in result.findings[0].rule
    assert "resources/<resource>" in result.findings[0].fix


def test_old_failure_1_no_shared_gpu_tag_means_no_scale_up() -> None:
    tags = {k: v for k, v in current_tags().items() if not k.endswith("gpu.shared")}
    result = check(g6_group(tags), [training_pod(SHARED_GPU_RESOURCE)])
    assert result.passed == 0 and "requests nvidia.com/gpu.shared 1 > free 0" in result.findings[0].rule


def test_current_tags_let_the_group_scale_from_zero() -> None:
    result = check(g6_group(current_tags()), [training_pod(SHARED_GPU_RESOURCE)])
    assert (result.passed, result.total, result.findings) == (1, 1, [])
    whole = check(g6_group(current_tags(shared=False), shared=False), [training_pod(WHOLE_GPU_RESOURCE)])
    assert (whole.passed, whole.total) == (1, 1)


def test_a_label_only_gfd_writes_never_reaches_the_template() -> None:
    group = g6_group(current_tags())
    group.labels[nl.GPU_PRODUCT] = "NVIDIA-L4"
    result = check(group, [training_pod(SHARED_GPU_RESOURCE, selector={nl.GPU_PRODUCT: "NVIDIA-L4"})])
    assert result.passed == 0 and "nodeSelector nvidia.com/gpu.product=NVIDIA-L4" in result.findings[0].rule
    assert "label/<key>" in result.findings[0].fix


def test_daemonsets_on_the_template_take_their_share() -> None:
    daemon = ExpandedPod(owner="DaemonSet ns/hog", source="chart", namespace="ns", daemon=True, pod={
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
                 "tolerations": [{"operator": "Exists"}]}})
    result = check(g6_group(current_tags()), [daemon, training_pod(SHARED_GPU_RESOURCE)])
    assert result.passed == 0 and "requests cpu 2000m > free 1000m" in result.findings[0].rule


def test_pods_an_always_present_group_takes_are_not_meant_for_the_min_zero_group() -> None:
    present = g6_group(current_tags(), min_size=1)
    present.name = "g6-warm"
    cold = g6_group({})
    result = autoscaler.check([training_pod(SHARED_GPU_RESOURCE)], [present, cold], [AUTOSCALER])
    assert result.total == 0 and "no pod is meant for it" in "\n".join(result.details)


def test_a_min_zero_group_without_an_autoscaler_never_grows() -> None:
    result = check(g6_group(current_tags()), [training_pod(SHARED_GPU_RESOURCE)], objects=[])
    assert result.passed == 0 and "no cluster-autoscaler runs" in result.findings[0].rule


@pytest.mark.slow
def test_dev_scales_from_zero() -> None:
    plan = plan_stack("dev")
    checks = simulate(plan, gtp_cluster.render_cluster(plan))["checks"]
    result = checks["scale-from-zero"]
    assert result["findings"] == [] and result["passed"] == result["total"] >= 1
