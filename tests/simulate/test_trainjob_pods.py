"""TrainJob → JobSet → Job → Pod as Kubeflow Trainer v2.3.0 and JobSet v0.12.0 build them (verify/simulate/pods.py
`_trainjob`; every expectation below cites the upstream line it comes from). Each test fails on the expansion
written from memory before the sources were read at the tags."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from verify.render import ClusterObject
from verify.simulate.pods import TORCH_MASTER_PORT, _merge_resources, expand_pods
from workload_kinds.trainjob import ANCESTOR_LABEL, NODE

NS = "training"
JOBSET = "jobset.sigs.k8s.io/"


def node_container(**extra: Any) -> dict[str, Any]:
    return {"name": NODE, "image": "trainer:1", "command": ["torchrun"], **extra}


def replicated_job(name: str, containers: list[dict[str, Any]], ancestor: str | None = "trainer",
                   **extra: Any) -> dict[str, Any]:
    job_labels = {ANCESTOR_LABEL: ancestor} if ancestor else {}
    job_spec = {"template": {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": containers}}}
    job_spec.update(extra.pop("job_spec", {}))
    return {"name": name, "replicas": 1, **extra,
            "template": {"metadata": {"labels": job_labels}, "spec": job_spec}}


def runtime(jobs: list[dict[str, Any]] | None = None, ml_policy: dict[str, Any] | None = None,
            network: dict[str, Any] | None = None, kind: str = "ClusterTrainingRuntime") -> ClusterObject:
    jobset_spec: dict[str, Any] = {"replicatedJobs": jobs if jobs is not None else
                                   [replicated_job(NODE, [node_container()])]}
    if network is not None:
        jobset_spec["network"] = network
    spec: dict[str, Any] = {"template": {"spec": jobset_spec}}
    spec["mlPolicy"] = ml_policy if ml_policy is not None else {"numNodes": 1, "torch": {}}
    return ClusterObject("stack", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind,
                                   "metadata": {"name": "rt"}, "spec": spec})


def trainjob(trainer: dict[str, Any] | None = None, name: str = "train") -> ClusterObject:
    spec: dict[str, Any] = {"runtimeRef": {"name": "rt"}}
    if trainer is not None:
        spec["trainer"] = trainer
    return ClusterObject("stack", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                   "metadata": {"name": name, "namespace": NS}, "spec": spec})


def expand(job: ClusterObject, rt: ClusterObject) -> dict[str, Any]:
    return {pod.owner.rsplit(" ", 1)[1]: pod for pod in expand_pods([rt, job])}


def node_of(pod: Any) -> dict[str, Any]:
    return next(c for c in pod.pod["spec"]["containers"] if c["name"] == NODE)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


# --- PET_NPROC_PER_NODE (trainer@v2.3.0 torch.go:121-135) -----------------------------------------------------------

def test_nproc_per_node_without_gpu_is_the_cpu_count_not_auto():
    cpu_only = {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "4", "memory": "8Gi"}}}
    assert env_of(node_of(expand(trainjob(cpu_only), runtime())[NODE]))["PET_NPROC_PER_NODE"] == "4"
    # Quantity.Value() rounds up; at least 1
    fraction = {"resourcesPerNode": {"requests": {"cpu": "500m"}}}
    assert env_of(node_of(expand(trainjob(fraction), runtime())[NODE]))["PET_NPROC_PER_NODE"] == "1"
    limits_only = {"resourcesPerNode": {"limits": {"cpu": "6"}}}
    assert env_of(node_of(expand(trainjob(limits_only), runtime())[NODE]))["PET_NPROC_PER_NODE"] == "6"


def test_nproc_per_node_is_auto_with_a_gpu_and_the_given_number_when_set():
    gpu = {"resourcesPerNode": {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "8"}}}
    assert env_of(node_of(expand(trainjob(gpu), runtime())[NODE]))["PET_NPROC_PER_NODE"] == "auto"
    fixed = {"numProcPerNode": 3, "resourcesPerNode": {"requests": {"cpu": "4"}}}
    assert env_of(node_of(expand(trainjob(fixed), runtime())[NODE]))["PET_NPROC_PER_NODE"] == "3"


def test_nproc_per_node_reads_the_runtime_gpu_when_the_trainjob_sets_no_resources():
    with_gpu = runtime([replicated_job(NODE, [node_container(resources={"limits": {"nvidia.com/gpu": 8}})])])
    assert env_of(node_of(expand(trainjob({"numNodes": 1}), with_gpu)[NODE]))["PET_NPROC_PER_NODE"] == "auto"
    no_gpu = runtime([replicated_job(NODE, [node_container(resources={"requests": {"cpu": "2"}})])])
    assert env_of(node_of(expand(trainjob({"numNodes": 1}), no_gpu)[NODE]))["PET_NPROC_PER_NODE"] == "2"


# --- env and ports (torch.go:139-204, builder.go:142-153, apply.go upsert) ------------------------------------------

def test_env_is_upserted_by_name_keeping_other_pet_variables_of_the_runtime():
    runtime_env = [{"name": "PET_RDZV_BACKEND", "value": "c10d"}, {"name": "PET_NNODES", "value": "99"},
                   {"name": "LOG", "value": "info"}]
    rt = runtime([replicated_job(NODE, [node_container(env=runtime_env)])])
    job = trainjob({"numNodes": 2, "env": [{"name": "LOG", "value": "debug"}, {"name": "EXTRA", "value": "1"}],
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}})
    env = node_of(expand(job, rt)[NODE])["env"]
    names = [e["name"] for e in env]
    # runtime order kept, replaced in place; then the TrainJob's new names; then the PET_* the plugin adds
    assert names == ["PET_RDZV_BACKEND", "PET_NNODES", "LOG", "EXTRA", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                     "PET_MASTER_ADDR", "PET_MASTER_PORT"]
    values = env_of({"env": env})
    assert values["PET_RDZV_BACKEND"] == "c10d" and values["PET_NNODES"] == "2" and values["LOG"] == "debug"
    assert values["PET_NODE_RANK"] == {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert values["PET_MASTER_ADDR"] == "train-node-0-0.train" and values["PET_MASTER_PORT"] == "29500"


def test_master_port_is_added_to_the_node_container_ports():
    rt = runtime([replicated_job(NODE, [node_container(ports=[{"name": "metrics", "containerPort": 9400}])])])
    ports = node_of(expand(trainjob({"numNodes": 1}), rt)[NODE])["ports"]
    assert ports == [{"name": "metrics", "containerPort": 9400}, {"containerPort": TORCH_MASTER_PORT}]


def test_no_trainer_block_means_no_pet_env_and_the_runtime_node_count():
    pods = expand(trainjob(None), runtime(ml_policy={"numNodes": 3, "torch": {}}))
    assert pods[NODE].count == 3
    assert not any(name.startswith("PET_") for name in env_of(node_of(pods[NODE])))


def test_env_injection_targets_get_the_pet_and_master_env():
    init = {"name": "preflight", "image": "check:1"}
    rt = runtime([replicated_job(NODE, [node_container(), {"name": "sidecar", "image": "s:1"}],
                                 job_spec={})],
                 ml_policy={"numNodes": 2, "torch": {"envInjection": {"targets": [
                     {"jobName": NODE, "containerNames": ["sidecar", "preflight"]}]}}})
    rt.obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "initContainers"] = [init]
    pod = expand(trainjob({"numNodes": 2}), rt)[NODE].pod
    sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "sidecar")
    preflight = pod["spec"]["initContainers"][0]
    for container in (sidecar, preflight):
        env = env_of(container)
        assert env["PET_NNODES"] == "2" and env["PET_MASTER_ADDR"] == "train-node-0-0.train"


# --- resources (trainer@v2.3.0 pkg/util/trainingruntime MergeResourceRequirements) --------------------------------

def test_merge_is_a_strategic_merge_null_deletes_and_claims_merge_by_name():
    base = {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "8Gi"},
            "claims": [{"name": "gpu", "request": "a"}, {"name": "nic"}]}
    override = {"requests": {"cpu": "8", "memory": None}, "claims": [{"name": "gpu", "request": "b"}]}
    assert _merge_resources(base, override) == {
        "limits": {"memory": "8Gi"}, "requests": {"cpu": "8"},
        "claims": [{"name": "gpu", "request": "b"}, {"name": "nic"}]}


def test_resources_per_node_merges_into_the_node_container_only():
    rt = runtime([replicated_job(NODE, [node_container(resources={"requests": {"cpu": "4", "memory": "8Gi"}}),
                                        {"name": "sidecar", "image": "s:1", "resources": {"requests": {"cpu": "1"}}}])])
    job = trainjob({"resourcesPerNode": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}}})
    pod = expand(job, rt)[NODE].pod
    assert node_of(expand(job, rt)[NODE])["resources"] == {"requests": {"cpu": "8", "memory": "8Gi",
                                                                         "nvidia.com/gpu": "1"}}
    assert pod["spec"]["containers"][1]["resources"] == {"requests": {"cpu": "1"}}


# --- pod counts (trainingruntime.go newRuntimeInfo, builder.go Trainer, jobset.go SyncParallelCount) -------------

def test_trainer_job_is_one_job_whatever_the_runtime_replicas():
    rt = runtime([replicated_job(NODE, [node_container()], replicas=2)])
    pod = expand(trainjob({"numNodes": 4}), rt)[NODE]
    assert pod.count == 4  # one Job of numNodes pods (builder.go:123)
    assert pod.pod["metadata"]["labels"][f"{JOBSET}replicatedjob-replicas"] == "1"


def test_other_jobs_run_parallelism_pods_as_completions_follow_parallelism():
    aux = replicated_job("aux", [{"name": "aux", "image": "a:1"}], ancestor=None, replicas=2,
                         job_spec={"parallelism": 3, "completions": 1})
    init = replicated_job("dataset-initializer", [{"name": "dataset-initializer", "image": "d:1"}],
                          ancestor="dataset-initializer", replicas=2)
    pods = expand(trainjob({"numNodes": 2}), runtime([init, aux, replicated_job(NODE, [node_container()])]))
    assert pods["aux"].count == 2 * 3  # completions := parallelism (SyncParallelCount), 2 Jobs
    assert pods["dataset-initializer"].count == 1  # initializer ancestors: one Job (builder.go:52)
    assert pods[NODE].count == 2


# --- labels, annotations, network (JobSet v0.12.0 labelAndAnnotateObject, constructJob) ---------------------------

def test_every_pod_carries_the_jobset_labels_and_annotations_of_v0_12_0():
    aux = replicated_job("aux", [{"name": "aux", "image": "a:1"}], ancestor=None, replicas=2)
    pods = expand(trainjob({"numNodes": 2}), runtime([replicated_job(NODE, [node_container()]), aux]))
    labels = pods["aux"].pod["metadata"]["labels"]
    assert labels["app"] == "t"
    jobset_labels = {k: v for k, v in labels.items() if k.startswith(JOBSET)}
    uid = jobset_labels.pop(f"{JOBSET}jobset-uid")
    assert len(uid) == 36
    assert jobset_labels == {
        f"{JOBSET}jobset-name": "train", f"{JOBSET}replicatedjob-name": "aux",
        f"{JOBSET}restart-attempt": "0", f"{JOBSET}replicatedjob-replicas": "2",
        f"{JOBSET}global-replicas": "3", f"{JOBSET}job-index": "0",
        f"{JOBSET}job-key": hashlib.sha1(f"{NS}/train-aux-0".encode()).hexdigest(),
        f"{JOBSET}job-global-index": "1", f"{JOBSET}group-name": "default",
        f"{JOBSET}group-replicas": "3", f"{JOBSET}job-group-index": "1"}
    annotations = pods["aux"].pod["metadata"]["annotations"]
    assert {k: v for k, v in annotations.items() if k.startswith(JOBSET)} == {**jobset_labels,
                                                                              f"{JOBSET}jobset-uid": uid}
    assert annotations["batch.kubernetes.io/job-completion-index"] == "0"


def test_pods_get_hostname_and_the_jobset_subdomain_overriding_the_template():
    rt = runtime([replicated_job(NODE, [node_container()])])
    rt.obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "subdomain"] = "stale"
    spec = expand(trainjob({"numNodes": 2}), rt)[NODE].pod["spec"]
    assert spec["hostname"] == "train-node-0-0" and spec["subdomain"] == "train"
    assert spec["restartPolicy"] == "OnFailure"  # jobset_webhook.go:124-127


def test_network_subdomain_and_disabled_dns_hostnames():
    custom = expand(trainjob({"numNodes": 2}), runtime(network={"subdomain": "mesh"}))[NODE]
    assert custom.pod["spec"]["subdomain"] == "mesh"
    # Trainer's master address ignores network.subdomain (torch.go:162)
    assert env_of(node_of(custom))["PET_MASTER_ADDR"] == "train-node-0-0.train"
    off = expand(trainjob({"numNodes": 2}), runtime(network={"enableDNSHostnames": False}))[NODE]
    assert "subdomain" not in off.pod["spec"]


def test_a_namespaced_training_runtime_is_found_in_the_trainjob_namespace_only():
    rt = runtime(kind="TrainingRuntime")
    rt.obj["metadata"]["namespace"] = NS
    job = trainjob({"numNodes": 2})
    job.obj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert expand(job, rt)[NODE].count == 2
    elsewhere = copy.deepcopy(rt.obj)
    elsewhere["metadata"]["namespace"] = "other"
    assert expand_pods([ClusterObject("stack", elsewhere), job]) == []


def test_the_simulators_reading_of_trainer_agrees_with_the_kinds() -> None:
    """The simulator reads Trainer's constants on its own (a second opinion, not the kind's internals); where the
    two readings of trainer@v2.3.0 name the same thing, they agree."""
    from verify.simulate import pods as sim_pods
    from workload_kinds import trainjob

    assert sim_pods._NODE == trainjob.NODE
    assert sim_pods._ANCESTOR_LABEL == trainjob.ANCESTOR_LABEL
