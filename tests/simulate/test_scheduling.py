"""Scheduling simulation: node labels, node groups, and the kube-scheduler filters (verify/simulate/scheduling.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from catalog import node_labels as nl
from components.nvidia_device_plugin import SharingSpec, sharing_config
from conventions.names import NODE_GROUP_LABEL, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from tests.conftest import plan_stack
from verify import render as gtp_cluster
from verify.simulate import nodes, scheduling, simulate
from verify.simulate.model import ExpandedPod
from verify.simulate.nodes import NodeGroup

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GIB = 2**30


def pod(owner: str = "Deployment ns/p", *, requests: dict[str, Any] | None = None, selector: dict | None = None,
        expressions: list[list[dict]] | None = None, tolerations: list[dict] | None = None, daemon: bool = False,
        count: int = 1, init: list[dict] | None = None, overhead: dict | None = None,
        command: str = "app", image: str = "app:1", env: list[dict] | None = None,
        volumes: list[dict] | None = None) -> ExpandedPod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image, "command": [command],
                                            "resources": {"requests": dict(requests or {})}, "env": env or []}]}
    if selector:
        spec["nodeSelector"] = selector
    if expressions is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in expressions]}}}
    if tolerations:
        spec["tolerations"] = tolerations
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    if volumes:
        spec["volumes"] = volumes
    return ExpandedPod(owner=owner, source="stack", namespace="ns",
                       pod={"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec},
                       count=count, daemon=daemon)


def group(name: str = "g", *, labels: dict | None = None, taints: list | None = None, role: str = "gpu",
          allocatable: dict | None = None, min_size: int = 1, max_size: int = 2, **kwargs: Any) -> NodeGroup:
    alloc = {"cpu": 4.0, "memory": 16.0 * GIB, "ephemeral-storage": 100.0 * GIB, "pods": 50.0, **(allocatable or {})}
    made = NodeGroup(name=name, role=role, labels={NODE_GROUP_LABEL: name, **(labels or {})},
                     taints=list(taints or []), allocatable=alloc, min_size=min_size, max_size=max_size, **kwargs)
    made.free = dict(made.allocatable)
    return made


# --- quantities and requests ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [("500m", 0.5), ("2", 2.0), ("16Gi", 16 * GIB), ("1e3", 1000.0),
                                             ("128M", 128e6), (".5", 0.5), (3, 3.0)])
def test_quantities_parse_like_apimachinery(text: Any, value: float) -> None:
    assert scheduling.quantity(text) == pytest.approx(value)


def test_a_bad_quantity_names_where_and_what_is_allowed() -> None:
    with pytest.raises(ValueError, match=r"x\.requests\.cpu: '2 cores' is not a Kubernetes quantity.*Gi"):
        scheduling.quantity("2 cores", where="x.requests.cpu")


def test_requests_take_the_larger_of_app_containers_and_each_init_container_plus_overhead() -> None:
    p = pod(requests={"cpu": "1", "memory": "1Gi"},
            init=[{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}}],
            overhead={"cpu": "250m"})
    assert scheduling.pod_requests(p.pod) == {"cpu": 3.25, "memory": GIB, "pods": 1.0}


def test_sidecar_init_containers_add_to_the_app_containers() -> None:
    p = pod(requests={"cpu": "1"},
            init=[{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                  {"name": "once", "resources": {"requests": {"cpu": "1"}}}])
    # app 1 + sidecar 0.5 = 1.5 vs. the plain init container 1 + the sidecar started before it 0.5 = 1.5
    assert scheduling.pod_requests(p.pod)["cpu"] == pytest.approx(1.5)
    heavier = pod(requests={"cpu": "1"},
                  init=[{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                        {"name": "once", "resources": {"requests": {"cpu": "2"}}}])
    assert scheduling.pod_requests(heavier.pod)["cpu"] == pytest.approx(2.5)


def test_a_limit_without_a_request_is_the_request() -> None:
    p = pod()
    p.pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    assert scheduling.pod_requests(p.pod)[WHOLE_GPU_RESOURCE] == 1.0


# --- node affinity --------------------------------------------------------------------------------------------
LABELS = {"a": "1", "b": "x", "n": "7", nl.HOSTNAME: nl.UNKNOWN}


@pytest.mark.parametrize(("expression", "matches"), [
    ({"key": "a", "operator": "In", "values": ["1", "2"]}, True),
    ({"key": "a", "operator": "In", "values": ["2"]}, False),
    ({"key": "missing", "operator": "In", "values": ["1"]}, False),
    ({"key": "a", "operator": "NotIn", "values": ["2"]}, True),
    ({"key": "a", "operator": "NotIn", "values": ["1"]}, False),
    ({"key": "missing", "operator": "NotIn", "values": ["1"]}, True),
    ({"key": "b", "operator": "Exists"}, True),
    ({"key": "missing", "operator": "Exists"}, False),
    ({"key": "missing", "operator": "DoesNotExist"}, True),
    ({"key": "b", "operator": "DoesNotExist"}, False),
    ({"key": "n", "operator": "Gt", "values": ["6"]}, True),
    ({"key": "n", "operator": "Gt", "values": ["7"]}, False),
    ({"key": "b", "operator": "Gt", "values": ["1"]}, False),
    ({"key": "n", "operator": "Lt", "values": ["8"]}, True),
    ({"key": "n", "operator": "Lt", "values": ["7"]}, False),
    ({"key": nl.HOSTNAME, "operator": "In", "values": ["node-1"]}, False),
    ({"key": nl.HOSTNAME, "operator": "Exists"}, True),
])
def test_node_affinity_operators(expression: dict, matches: bool) -> None:
    assert (not scheduling.selector_misses(LABELS, pod(expressions=[[expression]]).pod)) is matches


def test_terms_are_ored_and_expressions_anded() -> None:
    in_a = {"key": "a", "operator": "In", "values": ["1"]}
    not_b = {"key": "b", "operator": "In", "values": ["y"]}
    assert scheduling.selector_misses(LABELS, pod(expressions=[[in_a, not_b]]).pod)
    assert not scheduling.selector_misses(LABELS, pod(expressions=[[not_b], [in_a]]).pod)


def test_an_empty_term_list_or_term_matches_nothing() -> None:
    assert scheduling.selector_misses(LABELS, pod(expressions=[]).pod)
    assert scheduling.selector_misses(LABELS, pod(expressions=[[]]).pod)


def test_node_selector_needs_every_pair() -> None:
    assert not scheduling.selector_misses(LABELS, pod(selector={"a": "1", "b": "x"}).pod)
    assert scheduling.selector_misses(LABELS, pod(selector={"a": "1", "b": "y"}).pod) == [
        "nodeSelector b=y (node has x)"]


def test_an_unknown_operator_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'Near'.*In, NotIn, Exists, DoesNotExist, Gt, Lt"):
        scheduling.selector_misses(LABELS, pod(expressions=[[{"key": "a", "operator": "Near"}]]).pod)


# --- taints ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("toleration", "ok"), [
    (None, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, False),
    ({"operator": "Exists"}, True),
    ({"key": "other", "operator": "Exists"}, False),
])
def test_tolerations(toleration: dict | None, ok: bool) -> None:
    p = pod(tolerations=[toleration] if toleration else None)
    assert (not scheduling.untolerated([GPU_TAINT], p.pod)) is ok


def test_prefer_no_schedule_never_blocks_and_no_execute_does() -> None:
    assert not scheduling.untolerated([{**GPU_TAINT, "effect": "PreferNoSchedule"}], pod().pod)
    assert scheduling.untolerated([{**GPU_TAINT, "effect": "NoExecute"}], pod().pod)


# --- the check ------------------------------------------------------------------------------------------------
def test_a_pod_fits_a_group_it_selects_tolerates_and_has_room_on() -> None:
    g = group(taints=[GPU_TAINT])
    ok = pod(selector={NODE_GROUP_LABEL: "g"}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
             requests={"cpu": "2", "memory": "8Gi"})
    result = scheduling.check([ok], [g])
    assert (result.passed, result.total, result.findings) == (1, 1, [])


def test_a_pod_that_fits_nowhere_is_a_finding_naming_each_groups_reason_and_a_fix() -> None:
    gpu = group("gpu", taints=[GPU_TAINT])
    system = group("system", role="system")
    too_big = pod("Job ns/big", requests={"cpu": "8"}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    result = scheduling.check([too_big], [gpu, system])
    assert (result.passed, result.total) == (0, 1)
    [finding] = result.findings
    assert finding.subject == "Job ns/big"
    assert "gpu: requests cpu 8000m > free 4000m" in finding.rule and "system: requests cpu" in finding.rule
    assert "lower the pod's requests" in finding.fix


def test_an_untolerated_taint_and_a_missing_label_are_findings() -> None:
    g = group(taints=[GPU_TAINT])
    untolerating = pod("Deployment ns/a", selector={NODE_GROUP_LABEL: "g"})
    unlabelled = pod("Deployment ns/b", selector={"nvidia.com/gpu.present": "true"},
                     tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    result = scheduling.check([untolerating, unlabelled], [g])
    assert result.passed == 0 and len(result.findings) == 2
    assert "taint nvidia.com/gpu=true:NoSchedule not tolerated" in result.findings[0].rule
    assert "nodeSelector nvidia.com/gpu.present=true (node has no such label)" in result.findings[1].rule


def test_all_copies_must_fit_the_groups_max_size() -> None:
    g = group(max_size=2)
    fits = pod("Deployment ns/four", requests={"cpu": "2"}, count=4)   # 2 per node (4 cpu) x 2 nodes
    too_many = pod("Deployment ns/five", requests={"cpu": "2"}, count=5)
    result = scheduling.check([fits, too_many], [g])
    assert result.passed == 1
    assert "5 copies need 5 slots; 2 node(s) at maxSize hold 4" in result.findings[0].rule


def test_daemonsets_are_checked_on_every_group_they_land_on_and_overcommit_fails() -> None:
    big = group("big", allocatable={"cpu": 8.0})
    small = group("small", allocatable={"cpu": 1.0})
    ds = pod("DaemonSet ns/agent", requests={"cpu": "700m"}, daemon=True)
    ds2 = pod("DaemonSet ns/other", requests={"cpu": "700m"}, daemon=True)
    nodes.enrich([big, small], [ds, ds2], [])
    result = scheduling.check([ds, ds2], [big, small])
    assert (result.passed, result.total) == (2, 4)
    assert {f.subject for f in result.findings} == {"DaemonSet ns/agent on node group small",
                                                   "DaemonSet ns/other on node group small"}
    assert "together request 1400m cpu, allocatable 1000m" in result.findings[0].rule


def test_daemonset_requests_come_off_free() -> None:
    g = group(allocatable={"cpu": 4.0})
    nodes.enrich([g], [pod("DaemonSet ns/agent", requests={"cpu": "1500m"}, daemon=True)], [])
    assert g.free["cpu"] == pytest.approx(2.5) and g.daemons == ["DaemonSet ns/agent"]
    assert scheduling.check([pod(requests={"cpu": "3"})], [g]).findings


# --- node groups: labels and resources from the add-ons that land ---------------------------------------------
def _plugin_objects(default: str, configs: dict[str, SharingSpec]) -> tuple[list[ExpandedPod], list]:
    volume = [{"name": "available-configs", "configMap": {"name": "plugin-configs"}}]
    env = [{"name": "DEFAULT_CONFIG", "value": default}]
    gpu_only = [[{"key": NODE_GROUP_LABEL, "operator": "In", "values": ["g"]}]]
    tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    pods = [pod("DaemonSet ns/plugin", daemon=True, command="nvidia-device-plugin", env=env, volumes=volume,
                expressions=gpu_only, tolerations=tolerate),
            pod("DaemonSet ns/gfd", daemon=True, command="gpu-feature-discovery", env=env, volumes=volume,
                expressions=gpu_only, tolerations=tolerate),
            pod("DaemonSet ns/nfd", daemon=True, command="nfd-worker", tolerations=tolerate)]
    data = {name: yaml.safe_dump(sharing_config(spec)) for name, spec in configs.items()}
    objects = [gtp_cluster.ClusterObject("stack", {"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": "plugin-configs", "namespace": "ns"},
                                                   "data": data})]
    return pods, objects


def test_a_shared_group_advertises_slices_and_no_whole_gpu_and_gfd_labels_it() -> None:
    g = group(taints=[GPU_TAINT], gpu_model="L4", num_gpus=2, gpu_memory_gib=24,
              labels={nl.DEVICE_PLUGIN_CONFIG: "mps-4"})
    pods, objects = _plugin_objects("none", {"mps-4": SharingSpec("mps", 4), "none": SharingSpec("none", 1)})
    nodes.enrich([g], pods, objects)
    assert g.allocatable[SHARED_GPU_RESOURCE] == 8 and g.allocatable[WHOLE_GPU_RESOURCE] == 0
    assert g.labels[nl.GPU_SHARING_STRATEGY] == "mps" and g.labels[nl.GPU_REPLICAS] == "4"
    assert g.labels[nl.MPS_CAPABLE] == "true" and g.labels[nl.GPU_PRODUCT] == "NVIDIA-L4"
    assert g.labels[nl.NFD_NVIDIA_PCI] == "true" and nl.GPU_PRESENT not in g.labels


def test_the_default_config_applies_without_the_node_label() -> None:
    g = group(taints=[GPU_TAINT], gpu_model="A10G", num_gpus=1, gpu_memory_gib=24)
    pods, objects = _plugin_objects("none", {"mps-4": SharingSpec("mps", 4), "none": SharingSpec("none", 1)})
    nodes.enrich([g], pods, objects)
    assert g.allocatable[WHOLE_GPU_RESOURCE] == 1 and SHARED_GPU_RESOURCE not in g.allocatable
    assert g.labels[nl.GPU_SHARING_STRATEGY] == "none" and g.labels[nl.MPS_CAPABLE] == "false"


def test_no_gpu_resource_where_the_device_plugin_does_not_land() -> None:
    g = group("other", taints=[GPU_TAINT], gpu_model="L4", num_gpus=1)
    pods, objects = _plugin_objects("none", {"none": SharingSpec("none", 1)})
    nodes.enrich([g], pods, objects)
    assert WHOLE_GPU_RESOURCE not in g.allocatable and nl.GPU_PRODUCT not in g.labels
    assert "no NVIDIA device plugin lands here" in g.describe()


def test_gfd_labels_follow_the_device_plugin_source() -> None:
    shared_unrenamed = nl.gfd_labels(num_gpus=8, gpu_model="H100", gpu_memory_gib=80, sharing_strategy="time-slicing",
                                     replicas=2, renamed=False)
    assert shared_unrenamed[nl.GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert shared_unrenamed[nl.GPU_FAMILY] == "hopper" and shared_unrenamed[nl.GPU_COUNT] == "8"
    assert nl.gfd_labels(num_gpus=1, gpu_model="L40S", gpu_memory_gib=48)[nl.GPU_FAMILY] == "ada-lovelace"
    assert nl.gfd_labels(num_gpus=0, gpu_model="L4", gpu_memory_gib=24) == {}
    assert nl.nfd_labels(gpu_model="Orin") == {} and nl.nfd_labels(gpu_model="A10G") == {nl.NFD_NVIDIA_PCI: "true"}
    assert nl.sanitise("Orin (nvgpu)") == "Orin-nvgpu"


def test_eks_groups_from_the_plan_have_the_catalogs_allocatable_and_the_launch_templates_disk() -> None:
    plan = plan_stack("dev")
    groups = {g.name: g for g in nodes.eks_groups(plan)}
    assert set(groups) == {"system", "g6"}
    g6 = groups["g6"]
    assert g6.instance_types == ("g6.xlarge", "g6.2xlarge") and (g6.min_size, g6.max_size) == (0, 2)
    assert g6.taints == [GPU_TAINT] and g6.labels[nl.EKS_CAPACITY_TYPE] == "SPOT"
    # g6.xlarge (4 vCPU, 16 GiB, 58 pods) is the smaller member: 4000m - 60 - 10 - 10 = 3920m
    assert g6.allocatable["cpu"] == pytest.approx(3.92)
    assert g6.allocatable["ephemeral-storage"] == pytest.approx((200 * 0.9 - 1) * GIB)
    assert g6.asg_tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu.shared"] == "4"


# --- old failure #3: whole GPUs requested on shared edge nodes ------------------------------------------------
def _edge_worker(resource: str) -> ExpandedPod:
    return pod("ElasticJob training-edge/edge-finetune worker", requests={"cpu": "4", resource: "1"},
               expressions=[[{"key": nl.GPU_PRESENT, "operator": "In", "values": ["true"]}]],
               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])


def _edge_group(node_selector: dict[str, str]) -> NodeGroup:
    g = NodeGroup(name="orin", role="gpu", labels={**nl.kubernetes_labels(architecture="arm64"), **node_selector},
                  taints=[], allocatable={"cpu": math.inf, "memory": math.inf, "pods": math.inf}, min_size=1,
                  max_size=3, gpu_model="Orin", num_gpus=1)
    plugin = pod("DaemonSet nvidia-device-plugin/nvidia-device-plugin", daemon=True, command="nvidia-device-plugin",
                 env=[{"name": "DEFAULT_CONFIG", "value": "mps-4"}],
                 volumes=[{"name": "c", "configMap": {"name": "plugin-configs"}}],
                 expressions=[[{"key": nl.GPU_PRESENT, "operator": "In", "values": ["true"]}]])
    _, objects = _plugin_objects("mps-4", {"mps-4": SharingSpec("mps", 4)})
    nodes.enrich([g], [plugin], objects)
    return g


def test_old_failure_3_whole_gpus_on_shared_edge_nodes_do_not_schedule() -> None:
    g = _edge_group({nl.GPU_PRESENT: "true"})
    site = group("site", role="site")
    result = scheduling.check([_edge_worker(WHOLE_GPU_RESOURCE)], [site, g])
    assert result.passed == 0
    # the fix is the closest group's (orin: placed, one resource short), not the site nodes' missing label
    assert "requests nvidia.com/gpu 1 > free 0" in result.findings[0].rule
    assert "nvidia.com/gpu.shared (one slice) on MPS" in result.findings[0].fix
    assert scheduling.check([_edge_worker(SHARED_GPU_RESOURCE)], [g]).passed == 1


def test_old_failure_3_selecting_gpu_present_needs_a_node_that_declares_it() -> None:
    # nothing the platform installs writes nvidia.com/gpu.present: without the site's label the worker has no node
    g = _edge_group({NODE_GROUP_LABEL: "orin"})
    result = scheduling.check([_edge_worker(SHARED_GPU_RESOURCE)], [g])
    assert result.passed == 0 and "required node affinity" in result.findings[0].rule


def _simulated(stack: str) -> dict[str, Any]:
    plan = plan_stack(stack)
    return simulate(plan, gtp_cluster.render_cluster(plan))


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["dev", "edge", "prod"])
def test_the_checked_in_stacks_schedule(stack: str) -> None:
    checks = _simulated(stack)["checks"]
    scheduled = checks["scheduled"]
    assert scheduled["findings"] == [] and scheduled["passed"] == scheduled["total"] > 3
    details = "\n".join(scheduled["details"])
    if stack == "edge":
        # the current edge stack: whole GPUs (sharing none) on nodes the site labels nvidia.com/gpu.present, all
        # three workers (elastic --nnodes=1:3) at once
        assert "ElasticJob training-edge/edge-finetune worker ×3: fits orin" in details


def test_efa_devices_only_where_the_efa_plugin_lands() -> None:
    efa_plugin = pod("DaemonSet ns/efa", daemon=True, image="602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/"
                     "aws-efa-k8s-device-plugin:v0.5.13", selector={NODE_GROUP_LABEL: "p5"},
                     tolerations=[{"operator": "Exists"}])
    p5 = group("p5", taints=[GPU_TAINT], num_efa=32)
    other = group("other", taints=[GPU_TAINT], num_efa=4)
    nodes.enrich([p5, other], [efa_plugin], [])
    assert p5.allocatable["vpc.amazonaws.com/efa"] == 32 and "vpc.amazonaws.com/efa" not in other.allocatable


def test_bottlerocket_groups_have_whole_gpus_from_their_own_plugin() -> None:
    g = group(taints=[GPU_TAINT], gpu_model="A10G", num_gpus=4, ami_type="BOTTLEROCKET_x86_64_NVIDIA")
    nodes.enrich([g], [], [])
    assert g.allocatable[WHOLE_GPU_RESOURCE] == 4


def test_a_device_plugin_config_that_does_not_replicate_gpus_is_an_error_naming_it() -> None:
    text = yaml.safe_dump({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/mig-1g.5gb",
                                                                               "replicas": 2}]}}})
    with pytest.raises(ValueError, match="ConfigMap ns/c data.x: sharing.mps does not replicate nvidia.com/gpu"):
        nodes.parse_sharing(text, "ConfigMap ns/c data.x")
    assert nodes.parse_sharing(yaml.safe_dump(sharing_config(SharingSpec("time-slicing", 3))), "x") == \
        nodes.Sharing("time-slicing", 3, True, SHARED_GPU_RESOURCE)


def test_an_instance_type_missing_from_the_catalogs_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'x9.huge' is in neither catalog/gpu_instances.py nor"):
        nodes.instance_allocatable("x9.huge", 100)


def test_an_adopted_clusters_groups_carry_the_declared_selector_and_gpus_only() -> None:
    groups = {g.name: g for g in nodes.existing_groups(plan_stack("edge").config)}
    orin = groups["orin"]
    assert orin.labels[nl.GPU_PRESENT] == "true" and orin.labels[nl.ARCH] == "arm64"
    assert orin.num_gpus == 1 and orin.taints == [] and math.isinf(orin.allocatable["cpu"])
    assert groups["site"].role == "site" and groups["site"].num_gpus == 0


def test_eks_nodes_run_the_vpc_cni_daemonset_outside_cluster_yaml() -> None:
    assert nodes.addon_pods(plan_stack("dev")) == [nodes.AWS_NODE] and nodes.addon_pods(plan_stack("edge")) == []
    tainted = group(taints=[GPU_TAINT], labels=nl.kubernetes_labels(architecture="arm64"))
    nodes.enrich([tainted], [nodes.AWS_NODE], [])
    assert tainted.free["cpu"] == pytest.approx(4.0 - 0.025) and tainted.daemons == [nodes.AWS_NODE.owner]
