"""The whole program under Pulumi mocks: what each stack installs to make GPUs usable, and in which order."""

from __future__ import annotations

import json

import pytest
import yaml

from catalog import versions
from conventions.names import DEVICE_PLUGIN_NAMESPACE, METRICS_NAMESPACE, PROMETHEUS_RELEASE

RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"
NAMESPACE = "kubernetes:core/v1:Namespace"
K8S_PROVIDER = "pulumi:providers:kubernetes"
WORKLOAD_TYPES = ("kubernetes:kubeflow.org/v1:PyTorchJob", "kubernetes:elastic.iml.github.io/v1alpha1:ElasticJob",
                  "kubernetes:keda.sh/v1alpha1:ScaledJob")

pytestmark = pytest.mark.slow


def sharing_of(release):
    return {name: yaml.safe_load(text) for name, text in release.inputs["values"]["config"]["map"].items()}


def node_affinity_terms(values):
    return values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_dev_device_plugin_mps_4_with_gfd_on_gpu_nodes(plans):
    plan = plans("dev")
    release = plan.one(RELEASE, "nvidia-release")
    # The vendored chart, not a repository: nothing is fetched at `pulumi up`.
    assert release.inputs["chart"] == "vendor/charts/nvidia-device-plugin-0.20.0" == versions.NVIDIA_DEVICE_PLUGIN.path
    assert release.inputs["version"] == "0.20.0"
    assert "repositoryOpts" not in release.inputs
    assert release.inputs["namespace"] == DEVICE_PLUGIN_NAMESPACE
    values = release.inputs["values"]
    assert values["config"]["default"] == "mps-4"
    assert sharing_of(release)["mps-4"]["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert values["gfd"]["enabled"] is True and values["nfd"]["enabled"] is True
    assert node_affinity_terms(values) == [
        {"matchExpressions": [{"key": "gtp.dev/node-group", "operator": "In", "values": ["g6"]}]}]
    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert gpu_taint in values["tolerations"]


def test_node_groups_are_labelled_with_a_config_the_plugin_renders(plans):
    plan = plans("dev")
    rendered = set(plan.one(RELEASE, "nvidia-release").inputs["values"]["config"]["map"])
    for group in plan.by_type("aws:eks/nodeGroup:NodeGroup"):
        label = group.inputs.get("labels", {}).get("nvidia.com/device-plugin.config")
        if label is not None:
            assert label in rendered


def test_prod_no_sharing_and_efa_plugin_on_efa_groups(plans):
    plan = plans("prod")
    release = plan.one(RELEASE, "nvidia-release")
    assert release.inputs["values"]["config"]["default"] == "none"
    assert sharing_of(release) == {"none": {"version": "v1", "flags": {"migStrategy": "none"}}}
    efa = plan.one(RELEASE, "efa-release")
    assert efa.inputs["chart"] == versions.EFA_DEVICE_PLUGIN.path
    assert efa.inputs["namespace"] == DEVICE_PLUGIN_NAMESPACE
    assert efa.inputs["values"]["supportedInstanceLabels"] == {"keys": ["gtp.dev/node-group"],
                                                                 "values": ["a100", "h100"]}
    assert any(t["key"] == "nvidia.com/gpu" for t in efa.inputs["values"]["tolerations"])


def test_edge_whole_gpus_on_existing_cluster_nodes(plans):
    # Edge's DLRover job runs several ranks, which need whole GPUs (NCCL refuses two ranks on one GPU).
    plan = plans("edge")
    release = plan.one(RELEASE, "nvidia-release")
    values = release.inputs["values"]
    assert values["config"]["default"] == "none"
    assert sharing_of(release) == {"none": {"version": "v1", "flags": {"migStrategy": "none"}}}
    assert node_affinity_terms(values) == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
    assert values["nfd"]["enabled"] is True
    assert not [r for r in plan.by_type(RELEASE) if r.name == "efa-release"]


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_metrics_in_every_stack(plans, stack):
    plan = plans(stack)
    if stack == "edge":  # Jetson: DCGM does not support it (catalog/gpu_instances.py DCGM_UNSUPPORTED_MODELS)
        assert not [r for r in plan.by_type(RELEASE) if r.name == "gpu-metrics-dcgm-exporter"]
    else:
        dcgm = plan.one(RELEASE, "gpu-metrics-dcgm-exporter")
        assert dcgm.inputs["chart"] == versions.DCGM_EXPORTER.path
        assert dcgm.inputs["namespace"] == DEVICE_PLUGIN_NAMESPACE  # privileged: root, SYS_ADMIN, hostPath
        assert node_affinity_terms(dcgm.inputs["values"])
    prometheus = plan.one(RELEASE, "gpu-metrics-prometheus")
    assert (prometheus.inputs["name"], prometheus.inputs["namespace"]) == (PROMETHEUS_RELEASE, METRICS_NAMESPACE)
    grafana = [r for r in plan.by_type(RELEASE) if r.name == "gpu-metrics-grafana"]
    assert bool(grafana) == plan.config.gpu.metrics.grafana


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_readiness_gate_precedes_every_workload(plans, stack):
    plan = plans(stack)
    gate = plan.one(JOB, "gpu-readiness-job")
    assert plan.depends_transitively(gate, plan.one(RELEASE, "nvidia-release"))
    if stack == "prod":
        assert plan.depends_transitively(gate, plan.one(RELEASE, "efa-release"))
    workloads = [r for r in plan.resources if r.type in WORKLOAD_TYPES]
    assert workloads, f"stack {stack} has a workload, so the plan must contain it"
    for workload in workloads:
        assert plan.depends_transitively(workload, gate), f"{workload.name} must wait for the GPU readiness gate"
    expectations = json.loads(plan.one("kubernetes:core/v1:ConfigMap", "gpu-readiness-script")
                              .inputs["data"]["expectations.json"])
    assert expectations["timeoutSeconds"] == plan.config.gpu.readiness_timeout_seconds


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_gpu_objects_use_the_cluster_provider(plans, stack):
    plan = plans(stack)
    providers = {r.urn for r in plan.by_type(K8S_PROVIDER)}
    gpu = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")
           and any(part in r.name for part in ("nvidia", "efa", "gpu-metrics", "gpu-readiness"))]
    assert len(gpu) >= 8
    for resource in gpu:
        assert resource.provider in providers, resource.name


def test_only_the_device_plugin_namespace_is_privileged(plans):
    for stack in ("dev", "prod", "edge"):
        privileged = [r.inputs["metadata"]["name"] for r in plans(stack).by_type(NAMESPACE)
                      if r.inputs["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce")
                      == "privileged"]
        assert privileged == [DEVICE_PLUGIN_NAMESPACE]


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_gpu_objects_pass_the_policy_pack(plans, stack):
    from policy.gtp_policy.offline import run_policies
    from verify.validate import policy_facts

    plan = plans(stack)
    ours = ("nvidia", "efa", "gpu-metrics", "gpu-readiness")
    violations = [v for v in run_policies(plan.as_json()["resources"], policy_facts(plan))
                  if v.urn and any(f"::{part}" in v.urn for part in ours)]
    assert violations == []


def test_bottlerocket_only_cluster_skips_our_device_plugin(modified_plan):
    def edit(config):
        config["gtp:gpuNodeGroups"]["a100"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
        config["gtp:gpuNodeGroups"]["h100"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    plan = modified_plan("prod", edit)
    assert not [r for r in plan.by_type(RELEASE) if r.name == "nvidia-release"]
    gate = plan.one(JOB, "gpu-readiness-job")  # Bottlerocket's own plugin still has to advertise the GPUs
    assert plan.depends_transitively(gate, plan.one(RELEASE, "efa-release"))


def test_existing_nfd_is_not_installed_again(modified_plan):
    def edit(config):
        config["gtp:gpu"]["nodeFeatureDiscovery"] = "existing"

    values = modified_plan("edge", edit).one(RELEASE, "nvidia-release").inputs["values"]
    assert values["nfd"]["enabled"] is False
    assert values["gfd"]["enabled"] is True


@pytest.mark.parametrize("stack", ["dev", "prod", "edge"])
def test_gpu_objects_pass_kubernetes_validation(plans, stack):
    from verify.validate import Report, validate_objects

    plan = plans(stack)
    ours = [obj for obj in plan.kubernetes_objects()
            if obj["metadata"].get("namespace") in (DEVICE_PLUGIN_NAMESPACE, METRICS_NAMESPACE, "gpu-readiness")
            or obj["metadata"].get("name") in (DEVICE_PLUGIN_NAMESPACE, METRICS_NAMESPACE, "gpu-readiness",
                                               "gtp-gpu-readiness")]
    assert {obj["kind"] for obj in ours} >= {"Namespace", "ServiceAccount", "ConfigMap", "ClusterRole",
                                              "ClusterRoleBinding", "Job"}
    report = Report()
    validate_objects(ours, plan.config.kubernetes_version, report)
    assert report.errors == []
