"""The training pod shape as pure data: the invariants every PyTorchJob / ElasticJob / ScaledJob pod keeps."""

from __future__ import annotations

import dataclasses

import pytest

from components.keda_scaling import gpu_utilization_query, scaled_job_body, scaled_object_body
from components.training_pod import (
    CONTAINER_NAME,
    ElasticRange,
    PodShape,
    RunPolicy,
    pod_template,
    torchrun_args,
    trainer_args,
)
from conventions.quantities import quantity_gib
from verify.check import pod_templates_for_checkov
from workload_kinds.elasticjob import dlrover_run_args, elastic_job_body
from workload_kinds.pytorchjob import pytorch_job_body

DIGEST = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gtp-dev-trainer@sha256:" + "a" * 64


def make_shape(**changes) -> PodShape:
    shape = PodShape(
        image=DIGEST, namespace="training-test", service_account="trainer", priority_class="gtp-training-test",
        gpu_resource="nvidia.com/gpu", num_gpus=8, cpu="180", memory="1800Gi", ephemeral_storage="20Gi",
        shm_size="256Gi", node_selector={"gtp.dev/node-group": "h100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        termination_grace_period_seconds=900, storage_volume={"persistentVolumeClaim": {"claimName": "shared"}},
        mount_path="/mnt/shared", checkpoint_dir="/mnt/shared/checkpoints/job",
        trainer_args=trainer_args(model="gpt", max_steps=10, batch_size=4, checkpoint_dir="/mnt/shared/checkpoints/job",
                                  checkpoint_every=5),
        num_efa=32,
    )
    return dataclasses.replace(shape, **changes)


def spec_of(shape: PodShape) -> dict:
    return pod_template(shape, command=["torchrun"], args=torchrun_args(shape.num_gpus, shape.trainer_args))["spec"]


def test_container_named_pytorch_with_digest_image_and_exec_form_torchrun():
    container = spec_of(make_shape())["containers"][0]
    assert container["name"] == CONTAINER_NAME == "pytorch"
    assert container["image"] == DIGEST
    assert container["command"] == ["torchrun"]
    assert container["args"][:3] == ["--nproc-per-node=8", "-m", "trainer.train"]
    assert "--checkpoint-dir=/mnt/shared/checkpoints/job" in container["args"]


def test_restricted_security_context_on_every_container():
    spec = spec_of(make_shape())
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["initContainers"] + spec["containers"]:
        security = container["securityContext"]
        assert security["runAsUser"] == 10001 and security["runAsNonRoot"] is True
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}


def test_guaranteed_qos_requests_equal_limits_including_gpu_efa_and_ephemeral_storage():
    spec = spec_of(make_shape())
    for container in spec["initContainers"] + spec["containers"]:
        resources = container["resources"]
        assert resources["requests"] == resources["limits"]
        assert resources["limits"] == {"cpu": "180", "memory": "1800Gi", "ephemeral-storage": "20Gi",
                                       "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}


def test_shared_gpu_slice_is_requested_under_its_own_name():
    limits = spec_of(make_shape(gpu_resource="nvidia.com/gpu.shared", num_gpus=1, num_efa=0))["containers"][0][
        "resources"]["limits"]
    assert limits["nvidia.com/gpu.shared"] == "1"
    assert "nvidia.com/gpu" not in limits and "vpc.amazonaws.com/efa" not in limits


def test_shm_is_memory_backed_with_size_limit_and_tmp_is_an_emptydir():
    volumes = {v["name"]: v for v in spec_of(make_shape())["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Gi"}
    assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "20Gi"}
    assert volumes["shared"]["persistentVolumeClaim"] == {"claimName": "shared"}
    mounts = {m["name"]: m["mountPath"] for m in spec_of(make_shape())["containers"][0]["volumeMounts"]}
    assert mounts == {"dshm": "/dev/shm", "tmp": "/tmp", "shared": "/mnt/shared"}


def test_gpu_taint_is_tolerated_and_node_group_required():
    spec = spec_of(make_shape())
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert toleration in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gtp.dev/node-group", "operator": "In", "values": ["h100"]}]}]


def env_of(shape: PodShape) -> dict[str, str]:
    return {e["name"]: e["value"] for e in spec_of(shape)["containers"][0]["env"]}


def test_env_contract_torch_restart_fix_always_efa_only_with_efa():
    with_efa, without = env_of(make_shape()), env_of(make_shape(num_efa=0))
    assert with_efa["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == without["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert with_efa["FI_PROVIDER"] == "efa" and with_efa["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "NCCL_SOCKET_IFNAME" in with_efa
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"} & set(without)


def test_healthcheck_init_container_matches_the_main_container():
    spec = spec_of(make_shape())
    init, main = spec["initContainers"][0], spec["containers"][0]
    assert init["command"] == ["python"]
    assert init["args"][:3] == ["-m", "trainer.healthcheck", "--expect-gpus=8"]
    assert "--checkpoint-dir=/mnt/shared/checkpoints/job" in init["args"]
    assert "--min-shm-gib=230.4" in init["args"]  # 90 % of 256Gi
    for key in ("image", "resources", "securityContext", "volumeMounts"):
        assert init[key] == main[key]


def test_pod_level_settings():
    spec = spec_of(make_shape())
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["terminationGracePeriodSeconds"] == 900
    assert spec["priorityClassName"] == "gtp-training-test"
    assert spec["serviceAccountName"] == "trainer"
    assert spec["automountServiceAccountToken"] is False


def test_quantity_gib_rejects_nonsense():
    assert quantity_gib("512Mi") == 0.5
    with pytest.raises(ValueError, match="'lots' is not a memory quantity like '16Gi'"):
        quantity_gib("lots")


POLICY = RunPolicy(backoff_limit=3, ttl_seconds_after_finished=60, clean_pod_policy="None")


def test_multi_node_pytorch_job_is_workers_only_so_the_operator_injects_no_init_container():
    """training-operator v1.9.4 adds `init-pytorch` (no securityContext: refused by a `restricted` namespace)
    to Worker pods whenever a Master replica exists (pkg/controller.v1/pytorch/initcontainer.go)."""
    body = pytorch_job_body("job", make_shape(), num_nodes=3, elastic=None, run_policy=POLICY,
                            rendezvous_timeout_seconds=900)
    replicas = body["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Worker"} and replicas["Worker"]["replicas"] == 3
    assert body["spec"]["elasticPolicy"] == {"minReplicas": 3, "maxReplicas": 3, "rdzvBackend": "c10d",
                                             "rdzvConf": [{"key": "read_timeout", "value": "900"},
                                                          {"key": "join_timeout", "value": "900"}]}
    assert body["spec"]["nprocPerNode"] == "8"
    # backoffLimit per worker: the operator sums the restarts of all pods (issue 26 finding 3)
    assert body["spec"]["runPolicy"] == {"backoffLimit": 9, "ttlSecondsAfterFinished": 60, "cleanPodPolicy": "None"}
    assert all(r["restartPolicy"] == "OnFailure" for r in replicas.values())


def test_single_node_pytorch_job_has_no_worker_replica():
    body = pytorch_job_body("job", make_shape(), num_nodes=1, elastic=None, run_policy=POLICY)
    assert set(body["spec"]["pytorchReplicaSpecs"]) == {"Master"}
    assert body["spec"]["runPolicy"]["backoffLimit"] == 3 and "elasticPolicy" not in body["spec"]


def test_elastic_pytorch_job_is_workers_only_with_c10d_and_no_metrics():
    body = pytorch_job_body("job", make_shape(), num_nodes=1, elastic=ElasticRange(2, 4, 10), run_policy=POLICY)
    assert set(body["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    assert body["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d",
                                             "maxRestarts": 10,
                                             "rdzvConf": [{"key": "read_timeout", "value": "60"},
                                                          {"key": "join_timeout", "value": "600"}]}
    assert body["spec"]["runPolicy"]["backoffLimit"] == 3 * 4
    assert "metrics" not in body["spec"]["elasticPolicy"]  # KEDA is the only autoscaler


def test_dlrover_run_command_line():
    assert dlrover_run_args(1, 3, 2, 20, ["--model=cnn"]) == [
        "--nnodes=1:3", "--nproc-per-node=2", "--max-restarts=20", "-m", "trainer.train", "--model=cnn"]
    body = elastic_job_body("edge", make_shape(num_gpus=1, num_efa=0), elastic=ElasticRange(1, 3, 20))
    worker = body["spec"]["replicaSpecs"]["worker"]
    container = worker["template"]["spec"]["containers"][0]
    assert worker["replicas"] == 3
    assert container["command"] == ["dlrover-run"]
    assert container["args"][:5] == ["--nnodes=1:3", "--nproc-per-node=1", "--max-restarts=20", "-m", "trainer.train"]
    assert body["spec"]["resourceLimits"]["gpu"] == "3"


def test_scaled_object_never_scales_the_pytorchjob_to_zero():
    target = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"}
    kwargs = {"job_name": "job", "namespace": "ns", "scale_target": target, "prometheus_url": "http://p",
              "max_replicas": 4, "threshold": 80, "polling_interval": 30, "cooldown_period": 300}
    body = scaled_object_body(min_replicas=1, **kwargs)
    assert body["spec"]["minReplicaCount"] == 1
    assert body["spec"]["scaleTargetRef"] == {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"}
    with pytest.raises(ValueError, match="minReplicaCount 0 would scale the PyTorchJob to 0 workers"):
        scaled_object_body(min_replicas=0, **kwargs)


def test_gpu_utilization_query_uses_the_exporters_pod_labels():
    query = gpu_utilization_query("training-prod", "gpt")
    assert query.startswith("avg(DCGM_FI_DEV_GPU_UTIL{")
    assert 'namespace="training-prod"' in query and 'pod=~"gpt-worker-[0-9]+"' in query
    assert "exported_" not in query


def test_scaled_job_runs_the_same_pod_shape_standalone():
    shape = make_shape(num_gpus=1, num_efa=0, gpu_resource="nvidia.com/gpu.shared")
    body = scaled_job_body(job_name="mnist", shape=shape, queue_url="https://sqs/q", region="us-west-2",
                           max_replicas=4, polling_interval=30, backoff_limit=3, ttl_seconds_after_finished=60)
    spec = body["spec"]
    container = spec["jobTargetRef"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    # trainer.queue consumes the message that started the Job (deleted only when torchrun exits 0), then torchrun.
    assert container["command"] == ["python"]
    # Each request trains in <checkpoint_dir>/<message id>, so a new request never resumes the previous one's run.
    root = [f"--checkpoint-root={shape.checkpoint_dir}"] if shape.checkpoint_dir else []
    assert container["args"] == ["-m", "trainer.queue", *root, "--", "torchrun", "--standalone", "--nnodes=1",
                                 "--nproc-per-node=1", "-m", "trainer.train", *shape.trainer_args]
    assert spec["minReplicaCount"] == 0
    trigger = spec["triggers"][0]
    assert trigger["type"] == "aws-sqs-queue" and trigger["metadata"]["identityOwner"] == "operator"


def test_checkov_pod_templates_one_per_replica_role():
    objects = [pytorch_job_body("one", make_shape(), num_nodes=1, elastic=None, run_policy=POLICY),
               pytorch_job_body("job", make_shape(), num_nodes=2, elastic=None, run_policy=POLICY),
               elastic_job_body("edge", make_shape(), elastic=ElasticRange(1, 2, 3)),
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]
    documents = pod_templates_for_checkov(objects)
    assert [d["metadata"]["name"] for d in documents] == ["one-master", "job-worker", "edge-worker"]
    assert all(d["kind"] == "PodTemplate" and d["template"]["spec"]["containers"][0]["name"] == "pytorch"
               for d in documents)
