"""Issue 13: every workload expanded into the Pods its controller creates (pinned upstream behaviour), at the
largest scale the stack allows."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import plan_stack
from verify.render import ClusterObject, render_cluster
from verify.simulate.pods import (
    DLROVER_MASTER_IMAGE_DEFAULT,
    KEDA_DEFAULT_MAX_REPLICAS,
    PYTORCH_INIT_IMAGE_DEFAULT,
    expand_pods,
)

NS = "training"


def container(name: str = "pytorch", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "trainer:1", **extra}


def template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": [container()], **spec}}


def obj(kind: str, name: str, spec: dict[str, Any], api: str = "v1", namespace: str | None = NS,
        **metadata: Any) -> ClusterObject:
    meta = {"name": name, **metadata}
    if namespace:
        meta["namespace"] = namespace
    return ClusterObject("stack", {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec})


def pytorchjob(replicas: dict[str, Any], **spec: Any) -> ClusterObject:
    return obj("PyTorchJob", "bench", {"pytorchReplicaSpecs": replicas, **spec}, api="kubeflow.org/v1")


def by_owner(pods: list[Any]) -> dict[str, Any]:
    return {pod.owner: pod for pod in pods}


def env(pod_container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in pod_container.get("env") or []}


# --- PyTorchJob (training-operator v1.9.4) ---------------------------------------------------------------------


def test_pytorchjob_workers_get_init_pytorch_only_when_a_master_exists() -> None:
    pods = by_owner(expand_pods([pytorchjob({"Master": {"replicas": 1, "template": template()},
                                             "Worker": {"replicas": 3, "template": template()}})]))
    worker, master = pods["PyTorchJob training/bench Worker"], pods["PyTorchJob training/bench Master"]
    init = worker.pod["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["init-pytorch"]
    assert init[0]["image"] == PYTORCH_INIT_IMAGE_DEFAULT and "securityContext" not in init[0]
    assert "nslookup bench-master-0" in init[0]["command"][2]
    assert "initContainers" not in master.pod["spec"]
    assert (worker.count, master.count) == (3, 1)
    values = env(worker.pod["spec"]["containers"][0])
    assert values["MASTER_ADDR"] == "bench-master-0" and values["MASTER_PORT"] == "23456"
    assert values["WORLD_SIZE"] == "4" and values["RANK"] == "1" and values["PET_NNODES"] == "4"
    assert master.pod["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert worker.pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"

    workers_only = expand_pods([pytorchjob({"Worker": {"replicas": 2, "template": template()}})])
    assert len(workers_only) == 1 and "initContainers" not in workers_only[0].pod["spec"]
    # Worker 0 is the master role when there is no Master (pytorchjob_controller.go IsMasterRole)
    assert workers_only[0].pod["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


def test_pytorchjob_init_image_comes_from_the_operator_flag() -> None:
    operator = obj("Deployment", "training-operator", {"template": {"spec": {"containers": [container(
        "training-operator", image="ghcr.io/kubeflow/training-v1/training-operator:v1",
        command=["/manager"], args=["--pytorch-init-container-image=registry.local/busybox:1",
                                    "--pytorch-init-container-max-tries=7"])]}}}, namespace="kubeflow")
    job = pytorchjob({"Master": {"template": template()}, "Worker": {"template": template()}})
    worker = by_owner(expand_pods([operator, job]))["PyTorchJob training/bench Worker"]
    init = worker.pod["spec"]["initContainers"][0]
    assert init["image"] == "registry.local/busybox:1" and "seq 7" in init["command"][2]


def test_pytorchjob_defaults_port_restart_policy_and_camel_case() -> None:
    job = pytorchjob({"worker": {"restartPolicy": "ExitCode", "template": template()}})
    (pod,) = expand_pods([job])
    assert pod.owner == "PyTorchJob training/bench Worker" and pod.count == 1
    ports = pod.pod["spec"]["containers"][0]["ports"]
    assert {"name": "pytorchjob-port", "containerPort": 23456} in ports
    assert pod.pod["spec"]["restartPolicy"] == "Never"           # ExitCode → Never (pkg/core/pod.go)
    (default,) = expand_pods([pytorchjob({"Worker": {"template": template(restartPolicy="Always")}})])
    assert default.pod["spec"]["restartPolicy"] == "OnFailure"   # the replica's default wins over the template


def test_pytorchjob_worker_count_is_the_largest_scale() -> None:
    job = pytorchjob({"Worker": {"replicas": 2, "template": template()}},
                     elasticPolicy={"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d"}, nprocPerNode="8")
    (pod,) = expand_pods([job])
    assert pod.count == 4
    values = env(pod.pod["spec"]["containers"][0])
    assert values["PET_NNODES"] == "2:4" and values["PET_RDZV_ENDPOINT"] == "bench-worker-0:23456"
    assert values["PET_NPROC_PER_NODE"] == "8" and values["PYTHONUNBUFFERED"] == "1"
    scaler = obj("ScaledObject", "bench-scaler", {"maxReplicaCount": 6, "scaleTargetRef": {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bench"}}, api="keda.sh/v1alpha1")
    (scaled,) = expand_pods([job, scaler])
    assert scaled.count == 6
    elsewhere = obj("ScaledObject", "other", {"maxReplicaCount": 9, "scaleTargetRef": {
        "kind": "PyTorchJob", "name": "bench"}}, api="keda.sh/v1alpha1", namespace="elsewhere")
    assert expand_pods([job, elsewhere])[0].count == 4         # another namespace's scaler doesn't count


# --- ElasticJob (DLRover v0.6.1) ------------------------------------------------------------------------------


def dlrover_controller(flag: str | None) -> ClusterObject:
    args = ["--leader-elect"] + ([f"--master-image={flag}"] if flag else [])
    return obj("Deployment", "dlrover-controller-manager", {"template": {"spec": {"containers": [container(
        "manager", image="easydl/elasticjob-controller:master", command=["/manager"], args=args)]}}},
        namespace="dlrover")


def elasticjob(replicas: int = 3, args: list[str] | None = None, **replica: Any) -> ClusterObject:
    worker = template(priorityClassName="gtp-training", terminationGracePeriodSeconds=300)
    worker["spec"]["containers"][0].update(
        args=args or ["--nnodes=1:3"],
        resources={"requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
                   "limits": {"cpu": "6", "memory": "12Gi", "nvidia.com/gpu": "1"}})
    return obj("ElasticJob", "ft", {"replicaSpecs": {"worker": {"replicas": replicas, "template": worker,
                                                                **replica}}},
               api="elastic.iml.github.io/v1alpha1", labels={"team": "a"})


def test_elasticjob_master_pod_is_the_controllers_default_without_security_context() -> None:
    pods = by_owner(expand_pods([dlrover_controller("registry.local/dlrover:0.6.1"), elasticjob()]))
    master = pods["ElasticJob training/ft dlrover-master"]
    assert master.namespace == "training" and master.count == 1
    (main,) = master.pod["spec"]["containers"]
    assert main["image"] == "registry.local/dlrover:0.6.1"
    assert "securityContext" not in main and "securityContext" not in master.pod["spec"]
    assert main["resources"]["requests"] == {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}
    assert main["resources"]["limits"] == main["resources"]["requests"]
    assert "--namespace training --job_name ft" in main["command"][2]
    assert master.pod["metadata"]["labels"]["team"] == "a"
    assert master.pod["metadata"]["labels"]["elasticjob.dlrover/replica-type"] == "dlrover-master"
    no_flag = by_owner(expand_pods([dlrover_controller(None), elasticjob()]))
    assert no_flag["ElasticJob training/ft dlrover-master"].pod["spec"]["containers"][0]["image"] == \
        DLROVER_MASTER_IMAGE_DEFAULT


def test_elasticjob_workers_as_the_master_creates_them() -> None:
    worker = by_owner(expand_pods([elasticjob()]))["ElasticJob training/ft worker"]
    assert worker.count == 3
    spec = worker.pod["spec"]
    resources = spec["containers"][0]["resources"]
    # pod_scaler.py _create_pod_obj → set_container_resource: limits.cpu/memory become the requests
    assert resources["limits"] == {"cpu": "4", "memory": "8192Mi", "nvidia.com/gpu": "1"}
    assert resources["requests"] == {"cpu": "4", "memory": "8192Mi", "nvidia.com/gpu": "1"}
    assert spec["restartPolicy"] == "Never"
    assert "priorityClassName" not in spec and "terminationGracePeriodSeconds" not in spec
    assert env(spec["containers"][0])["DLROVER_MASTER_ADDR"] == "elasticjob-ft-dlrover-master:50001"
    high = by_owner(expand_pods([elasticjob(priority="high")]))["ElasticJob training/ft worker"]
    assert high.pod["spec"]["priorityClassName"] == "high"
    # the largest of replicas and dlrover-run's --nnodes MAX
    wider = by_owner(expand_pods([elasticjob(replicas=2, args=["--nnodes=2:5"])]))
    assert wider["ElasticJob training/ft worker"].count == 5


# --- KEDA ScaledJob and built-in controllers -------------------------------------------------------------------


def test_scaledjob_runs_max_replica_count_jobs_of_parallelism_pods() -> None:
    job_template = {"parallelism": 2, "completions": 4, "template": template()}
    scaled = obj("ScaledJob", "mnist", {"maxReplicaCount": 3, "jobTargetRef": job_template}, api="keda.sh/v1alpha1")
    (pod,) = expand_pods([scaled])
    assert pod.owner == "ScaledJob training/mnist Job" and pod.count == 6
    assert pod.pod["metadata"]["labels"]["scaledjob.keda.sh/name"] == "mnist"
    assert pod.pod["spec"]["restartPolicy"] == "OnFailure"
    unbounded = obj("ScaledJob", "mnist", {"jobTargetRef": {"template": template()}}, api="keda.sh/v1alpha1")
    assert expand_pods([unbounded])[0].count == KEDA_DEFAULT_MAX_REPLICAS


@pytest.mark.parametrize(("kind", "spec", "count", "daemon"), [
    ("Deployment", {"replicas": 3, "template": template()}, 3, False),
    ("StatefulSet", {"template": template()}, 1, False),
    ("DaemonSet", {"template": template()}, 1, True),
    ("Job", {"parallelism": 5, "completions": 2, "template": template()}, 2, False),
    ("CronJob", {"jobTemplate": {"spec": {"parallelism": 3, "template": template()}}}, 3, False),
])
def test_builtin_controllers_copy_their_template(kind: str, spec: dict[str, Any], count: int, daemon: bool) -> None:
    (pod,) = expand_pods([obj(kind, "w", copy.deepcopy(spec))])
    assert (pod.count, pod.daemon, pod.owner) == (count, daemon, f"{kind} training/w")
    assert pod.pod["kind"] == "Pod" and pod.pod["metadata"]["namespace"] == "training"
    assert pod.pod["spec"]["containers"][0]["name"] == "pytorch"


def test_autoscalers_raise_a_deployment_to_their_maximum_and_auto_named_objects_are_named() -> None:
    deployment = obj("Deployment", "api", {"replicas": 2, "template": template()})
    hpa = obj("HorizontalPodAutoscaler", "api", {"maxReplicas": 7, "scaleTargetRef": {
        "kind": "Deployment", "name": "api"}}, api="autoscaling/v2")
    assert expand_pods([deployment, hpa])[0].count == 7
    anonymous = ClusterObject("stack", {"kind": "Job", "metadata": {"namespace": "gate"},
                                        "spec": {"template": template()}})
    assert expand_pods([anonymous])[0].owner == "Job gate/<auto-named>"
    bare = obj("Pod", "debug", {"containers": [container()]})
    (pod,) = expand_pods([bare])
    assert (pod.owner, pod.count, pod.pod["spec"]["containers"][0]["name"]) == ("Pod training/debug", 1, "pytorch")


def test_the_stacks_expand_to_their_training_pods_at_the_largest_scale() -> None:
    prod = by_owner(expand_pods(render_cluster(plan_stack("prod"))))
    assert prod["PyTorchJob training-prod/gpt-pretrain Worker"].count == 4          # maxReplicas / ScaledObject
    assert "initContainers" in prod["PyTorchJob training-prod/gpt-pretrain Worker"].pod["spec"]
    assert [c["name"] for c in prod["PyTorchJob training-prod/gpt-pretrain Worker"].pod["spec"]["initContainers"]] \
        == ["healthcheck"]                                                           # Workers only: no init-pytorch
    edge = by_owner(expand_pods(render_cluster(plan_stack("edge"))))
    assert edge["ElasticJob training-edge/edge-finetune dlrover-master"].count == 1
    assert edge["ElasticJob training-edge/edge-finetune worker"].count == 3
    dev = by_owner(expand_pods(render_cluster(plan_stack("dev"))))
    assert dev["ScaledJob training-dev/mnist Job"].count == 4
