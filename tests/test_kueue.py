"""Kueue (components/kueue.py, verify/simulate/queue.py): derived quotas, integrations, the derived manifest,
the stack option and the `queued` simulation check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import workload_kinds
from catalog import versions
from catalog.node_allocatable import GPU_NODE_DAEMONS, instance_allocatable
from components import kueue
from components.kueue import QUEUE_LABEL, cluster_queue_spec, derive_manifest
from conventions.names import EFA_RESOURCE, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from stack_config.derived import group_quota, kueue_enabled
from tests.conftest import ROOT, plan_modified, plan_stack
from tests.test_config import BASE, EXISTING, parse, problems_of, with_
from verify import render as gtp_cluster
from verify.render import ClusterObject
from verify.simulate import expand_pods, nodes, simulate
from verify.simulate import queue as queue_check


# --- quota derivation -------------------------------------------------------------------------------------------
def test_quota_of_whole_gpus_is_max_nodes_times_gpus_plus_the_catalog_allocatable() -> None:
    config = parse(BASE)  # g6.xlarge (1 GPU), maxSize 2
    per_node = instance_allocatable("g6.xlarge", 200)
    quota = group_quota(config, "train")
    # less what the platform's DaemonSets request on each node (issue 26: quota vs DaemonSets)
    assert quota == {WHOLE_GPU_RESOURCE: 2.0, "cpu": 2 * (per_node["cpu"] - GPU_NODE_DAEMONS["cpu"]),
                     "memory": 2 * (per_node["memory"] - GPU_NODE_DAEMONS["memory"]),
                     "ephemeral-storage": 2 * per_node["ephemeral-storage"]}


@pytest.mark.parametrize(("mode", "replicas"), [("mps", 4), ("time-slicing", 3)])
def test_quota_of_shared_gpus_counts_slices_of_the_renamed_resource(mode: str, replicas: int) -> None:
    config = parse(with_(with_(BASE, "gpu.sharing", {"mode": mode, "replicas": replicas}),
                         "workloads.train.gpuResource", "shared"))
    quota = group_quota(config, "train")
    assert quota[SHARED_GPU_RESOURCE] == 2 * 1 * replicas
    assert WHOLE_GPU_RESOURCE not in quota


def test_quota_counts_efa_devices_of_efa_groups() -> None:
    raw = with_(BASE, "gpuNodeGroups", {"train": {"instanceTypes": ["p5.48xlarge"], "maxSize": 3,
                                                   "availabilityZone": "us-west-2a"}})
    quota = group_quota(parse(with_(raw, "workloads.train.cpu", "8")), "train")
    assert quota[WHOLE_GPU_RESOURCE] == 24 and quota[EFA_RESOURCE] == 96


def test_a_resource_one_group_lacks_gets_quota_zero_in_its_flavor() -> None:
    raw = with_(BASE, "gpuNodeGroups", {"train": {"instanceTypes": ["g6.xlarge"], "maxSize": 2},
                                         "shared": {"instanceTypes": ["g6.xlarge"], "maxSize": 1,
                                                    "sharing": {"mode": "mps", "replicas": 2}}})
    config = parse(raw)
    spec = cluster_queue_spec({group: group_quota(config, group) for group in config.gpu_node_groups}, ["training-t"])
    (group,) = spec["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "ephemeral-storage", WHOLE_GPU_RESOURCE,
                                         SHARED_GPU_RESOURCE]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas["gtp-shared"][WHOLE_GPU_RESOURCE] == "0" and quotas["gtp-shared"][SHARED_GPU_RESOURCE] == "2"
    assert quotas["gtp-train"][WHOLE_GPU_RESOURCE] == "2" and quotas["gtp-train"][SHARED_GPU_RESOURCE] == "0"


# --- integrations and the derived manifest ------------------------------------------------------------------------
def test_integrations_are_exactly_the_kinds_in_use() -> None:
    kinds = workload_kinds.KINDS
    assert workload_kinds.kueue_integrations_for([kinds["pytorchjob"]]) == ["kubeflow.org/pytorchjob"]
    assert workload_kinds.kueue_integrations_for([kinds["scaledjob"]]) == ["batch/job"]
    assert workload_kinds.kueue_integrations_for([kinds["scaledjob"], kinds["pytorchjob"],
                                                  kinds["pytorchjob"]]) == ["batch/job", "kubeflow.org/pytorchjob"]
    assert workload_kinds.kueue_integrations_for([kinds["trainjob"]]) == ["trainer.kubeflow.org/trainjob"]
    with pytest.raises(ValueError, match="'elasticjob' has no Kueue integration"):
        workload_kinds.kueue_integrations_for([kinds["elasticjob"]])
    assert workload_kinds.KUEUE_INTEGRATIONS == {"PyTorchJob": "kubeflow.org/pytorchjob", "ScaledJob": "batch/job",
                                                 "TrainJob": "trainer.kubeflow.org/trainjob"}


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.program
def test_derived_manifest_changes_only_the_config_the_deployment_and_the_webhooks() -> None:
    upstream = (ROOT / versions.KUEUE_MANIFEST).read_text()
    derived = derive_manifest(upstream, ["batch/job"], "7m", namespaces=["training-dev"])
    before, after = upstream.split("\n---\n"), derived.split("\n---\n")
    assert len(before) + 1 == len(after)  # + the manager's PodDisruptionBudget
    assert yaml.safe_load(after[-1])["kind"] == "PodDisruptionBudget"
    changed = [i for i, (a, b) in enumerate(zip(before, after[:-1], strict=True)) if a != b]
    kinds = sorted(yaml.safe_load(after[i])["kind"] for i in changed)
    assert kinds == ["ConfigMap", "Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in _documents(derived)}
    config = yaml.safe_load(docs[("ConfigMap", kueue.CONFIG_MAP)]["data"][kueue.CONFIG_KEY])
    assert config["integrations"] == {"frameworks": ["batch/job"]}
    assert config["waitForPodsReady"]["timeout"] == "7m"
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"  # the rest of upstream's config is kept
    pod = docs[("Deployment", "kueue-controller-manager")]["spec"]["template"]
    assert [c["imagePullPolicy"] for c in pod["spec"]["containers"]] == ["IfNotPresent"]
    # The config's hash rolls the manager (Kueue reads its config only at start).
    other = derive_manifest(upstream, ["kubeflow.org/pytorchjob"], "7m")
    other_pod = {(d["kind"], d["metadata"]["name"]): d for d in _documents(other)}[
        ("Deployment", "kueue-controller-manager")]["spec"]["template"]
    assert (pod["metadata"]["annotations"][kueue.CONFIG_HASH_ANNOTATION]
            != other_pod["metadata"]["annotations"][kueue.CONFIG_HASH_ANNOTATION])


def test_derived_manifest_refuses_a_render_without_the_config() -> None:
    upstream = (ROOT / versions.KUEUE_MANIFEST).read_text().replace("name: kueue-manager-config", "name: renamed")
    with pytest.raises(ValueError, match="expected ConfigMap kueue-manager-config"):
        derive_manifest(upstream, ["batch/job"], "5m")


# an elastic job resumes from checkpoints on shared storage (storage 'none' is refused for it)
ELASTIC = with_(with_(with_(BASE, "workloads.train.kind", "elasticjob"), "workloads.train.elastic",
                      {"minNodes": 1, "maxNodes": 2}), "storage", {"kind": "efs"})


# --- the stack option -----------------------------------------------------------------------------------------
def test_kueue_defaults_on_where_it_can_queue_and_off_elsewhere() -> None:
    assert kueue_enabled(parse(BASE))
    assert not kueue_enabled(parse(ELASTIC))
    assert not kueue_enabled(parse(EXISTING))
    assert not kueue_enabled(parse(with_(BASE, "kueue.enabled", False)))


@pytest.mark.parametrize(("raw", "expected"), [
    (with_(ELASTIC, "kueue.enabled", True),
     "kueue.enabled: true, but workloads.train.kind 'elasticjob': Kueue v0.19.2 has no integration"),
    (with_(EXISTING, "kueue.enabled", True), "kueue.enabled: true, but cluster.mode 'existing'"),
    (with_(BASE, "kueue.waitForPodsReadyTimeout", "10 minutes"),
     "kueue.waitForPodsReadyTimeout: '10 minutes' is not a duration"),
    (with_(BASE, "kueue.admissionBudget", "half an hour"),
     "kueue.admissionBudget: 'half an hour' is not a duration"),
])
def test_kueue_config_errors_name_the_key(raw: dict[str, Any], expected: str) -> None:
    assert any(problem.startswith(expected) for problem in problems_of(raw)), problems_of(raw)


# --- whole plans --------------------------------------------------------------------------------------------------
def _objects(plan: Any) -> list[ClusterObject]:
    return gtp_cluster.render_cluster(plan)


def test_dev_queues_its_scaled_jobs_and_simulates_clean() -> None:
    plan = plan_stack("dev")
    objects = _objects(plan)
    kinds = {item.kind for item in objects if item.source == "stack"}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue"} <= kinds
    (scaled,) = [item for item in objects if item.kind == "ScaledJob"]
    assert scaled.obj["metadata"]["labels"][QUEUE_LABEL] == kueue.LOCAL_QUEUE
    report = simulate(plan, objects)
    assert report["ok"] and report["checks"]["queued"]["passed"] == report["checks"]["queued"]["total"] == 2


@pytest.mark.program
def test_kueue_off_removes_it_and_the_label(tmp_path: Path) -> None:
    plan = plan_modified(tmp_path, "dev", lambda c: c.update({"gtp:kueue": {"enabled": False}}))
    objects = _objects(plan)
    assert not [item for item in objects if "kueue" in item.kind.lower() or item.kind in
                ("ClusterQueue", "LocalQueue", "ResourceFlavor") or item.namespace == "kueue-system"]
    (scaled,) = [item for item in objects if item.kind == "ScaledJob"]
    assert QUEUE_LABEL not in (scaled.obj["metadata"].get("labels") or {})
    assert "queued" not in simulate(plan, objects)["checks"]


def test_prod_queues_its_multi_node_efa_jobs() -> None:
    plan = plan_stack("prod")
    objects = _objects(plan)
    (job,) = [item for item in objects if item.kind == "PyTorchJob"]
    assert job.obj["metadata"]["labels"][QUEUE_LABEL] == kueue.LOCAL_QUEUE
    (config_map,) = [item for item in objects if item.kind == "ConfigMap" and item.name == kueue.CONFIG_MAP]
    config = yaml.safe_load(config_map.obj["data"][kueue.CONFIG_KEY])
    assert config["integrations"]["frameworks"] == ["kubeflow.org/pytorchjob", "trainer.kubeflow.org/trainjob"]
    (cq,) = [item for item in objects if item.kind == "ClusterQueue"]
    assert EFA_RESOURCE in cq.obj["spec"]["resourceGroups"][0]["coveredResources"]
    report = simulate(plan, objects)
    assert report["ok"], report["checks"].get("queued")


@pytest.mark.program
def test_prod_with_keda_scaling_has_no_kueue(tmp_path: Path) -> None:
    def scale(config: dict[str, Any]) -> None:
        config["gtp:workloads"]["gpt-pretrain"]["autoscaling"] = {"mode": "scaledobject", "minReplicas": 2,
                                                                   "maxReplicas": 4}

    objects = _objects(plan_modified(tmp_path, "prod", scale))
    assert not [item for item in objects if item.kind == "ClusterQueue"]


# --- the `queued` check fails --------------------------------------------------------------------------------------
def _dev_parts() -> tuple[Any, list[ClusterObject]]:
    plan = plan_stack("dev")
    return plan, copy.deepcopy(_objects(plan))


def _queued(plan: Any, objects: list[ClusterObject]) -> Any:
    pods = expand_pods(objects, plan)
    groups = nodes.node_groups(plan, objects, [*pods, *nodes.addon_pods(plan)])
    (result,) = queue_check.check(objects, pods, groups)
    return result


def test_a_quota_that_differs_from_the_node_groups_fails() -> None:
    plan, objects = _dev_parts()
    (cq,) = [item for item in objects if item.kind == "ClusterQueue"]
    for resource in cq.obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == SHARED_GPU_RESOURCE:
            resource["nominalQuota"] = "16"
    result = _queued(plan, objects)
    assert any("nvidia.com/gpu.shared nominalQuota 16, but node group g6 leaves training 8" in f.rule
               for f in result.findings), result.findings
    for resource in cq.obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == SHARED_GPU_RESOURCE:
            resource["nominalQuota"] = "4"
    result = _queued(plan, objects)
    assert any("nvidia.com/gpu.shared nominalQuota 4, but node group g6 provides 8" in f.rule
               for f in result.findings), result.findings


def test_a_workload_larger_than_its_queue_fails() -> None:
    plan, objects = _dev_parts()
    (scaled,) = [item for item in objects if item.kind == "ScaledJob"]
    container = scaled.obj["spec"]["jobTargetRef"]["template"]["spec"]["containers"][0]
    for key in ("requests", "limits"):
        container["resources"][key][SHARED_GPU_RESOURCE] = "9"
    result = _queued(plan, objects)
    assert any("does not fit ClusterQueue gtp-dev" in f.rule and "nvidia.com/gpu.shared 9 > quota 8" in f.rule
               for f in result.findings), result.findings


def test_an_unlabelled_workload_in_a_queued_namespace_fails() -> None:
    plan, objects = _dev_parts()
    (scaled,) = [item for item in objects if item.kind == "ScaledJob"]
    del scaled.obj["metadata"]["labels"][QUEUE_LABEL]
    result = _queued(plan, objects)
    assert any("bypasses the quota" in f.rule for f in result.findings), result.findings


def test_a_kind_whose_integration_is_off_fails() -> None:
    plan, objects = _dev_parts()
    (config_map,) = [item for item in objects if item.kind == "ConfigMap" and item.name == kueue.CONFIG_MAP]
    config = yaml.safe_load(config_map.obj["data"][kueue.CONFIG_KEY])
    config["integrations"]["frameworks"] = ["kubeflow.org/pytorchjob"]
    config_map.obj["data"][kueue.CONFIG_KEY] = yaml.safe_dump(config)
    result = _queued(plan, objects)
    assert any("does not enable integration batch/job" in f.rule for f in result.findings), result.findings


@pytest.mark.program
def test_offline_the_derived_manifest_runs_the_site_copy_of_kueue() -> None:
    upstream = (ROOT / versions.KUEUE_MANIFEST).read_text()
    site = "registry.site.internal/kueue/kueue@sha256:" + "0" * 64
    derived = derive_manifest(upstream, ["batch/job"], "5m", {"registry.k8s.io/kueue/kueue:v0.19.2": site})
    pod = {(d["kind"], d["metadata"]["name"]): d for d in _documents(derived)}[
        ("Deployment", "kueue-controller-manager")]["spec"]["template"]
    assert [c["image"] for c in pod["spec"]["containers"]] == [site]
    with pytest.raises(ValueError, match="no site image for registry.k8s.io/kueue/kueue:v0.19.2"):
        derive_manifest(upstream, ["batch/job"], "5m", {"other/image:1": site})
