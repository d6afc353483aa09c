"""The Docker Swarm target: rendered services, network, mounts, env, constraints and rendezvous arguments (pure
specs and the whole edge-swarm plan), and the config errors of inconsistent Swarm stacks."""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import pytest
import yaml

from components.swarm_training import (
    RENDEZVOUS_PORT,
    SwarmJobShape,
    constraints_for,
    network_args,
    secret_data,
    service_spec,
    shell_command,
    storage_mount,
    torchrun_args,
)
from stack_config import ConfigError
from stages.config import parse_stack_config
from tests.conftest import ROOT, plan_stack

DIGEST = "registry.example.invalid:5000/gtp/trainer@sha256:" + "b" * 64


def shape(**overrides: Any) -> SwarmJobShape:
    values: dict[str, Any] = {
        "job_name": "job", "image": DIGEST, "min_nodes": 2, "max_nodes": 3, "gpus_per_node": 4,
        "gpu_resource_name": "NVIDIA-GPU",
        "constraints": ["node.labels.gtp.dev/node-group==gpu", "node.platform.arch==x86_64"], "module": "trainer.train",
        "trainer_args": ["--model=gpt"], "cpu": "16", "memory": "64Gi", "shm_size": "8Gi", "scratch_size": "20Gi",
        "storage_mount": storage_mount("host-path", job_name="job", mount_path="/mnt/shared", host_path="/data"),
        "mount_path": "/mnt/shared", "checkpoint_dir": "/mnt/shared/checkpoints/job", "max_restarts": 5,
        "restart_attempts": 3, "stop_grace_seconds": 300}
    values.update(overrides)
    return SwarmJobShape(**values)


# --- pure specs --------------------------------------------------------------------------------------------------


def test_head_hosts_the_rendezvous_and_workers_join_it() -> None:
    head, worker = torchrun_args(shape(), is_host=True), torchrun_args(shape(), is_host=False)
    endpoint = f"--rdzv-endpoint=job-head:{RENDEZVOUS_PORT}"
    assert endpoint in head and endpoint in worker
    assert "--rdzv-conf=is_host=true" in head and "--rdzv-conf=is_host=false" in worker
    assert {"--nnodes=2:3", "--nproc-per-node=gpu", "--rdzv-backend=c10d", "--rdzv-id=job",
            "--max-restarts=5"} <= set(head)
    assert head[-2:] == ["-m", "trainer.train"]


def test_task_runs_the_health_check_then_execs_torchrun() -> None:
    command = shell_command(shape(), ["--model=gpt", "--note=two words"], is_host=False)
    assert command[:2] == ["sh", "-c"]
    check, launch = command[2].split(" && exec ")
    assert shlex.split(check) == ["python", "-m", "trainer.healthcheck", "--expect-gpus=4", "--min-shm-gib=7.2",
                                  "--checkpoint-dir=/mnt/shared/checkpoints/job"]
    words = shlex.split(launch)
    assert words[0] == "torchrun" and words[-1] == "--note=two words"  # quoted, not split


def test_service_spec_reserves_the_whole_server_once() -> None:
    head = service_spec(shape(), role="head", network="job-net")
    worker = service_spec(shape(), role="worker", network="job-net")
    assert head["name"] == "job-head" and worker["name"] == "job-worker"
    assert head["mode"] == {"replicated": {"replicas": 1}} and worker["mode"] == {"replicated": {"replicas": 2}}
    for spec in (head, worker):
        task = spec["task_spec"]
        assert spec["endpoint_spec"] == {"mode": "dnsrr"}
        assert task["placement"] == {
            "constraints": ["node.labels.gtp.dev/node-group==gpu", "node.platform.arch==x86_64"], "max_replicas": 1}
        reservation = task["resources"]["reservation"]
        assert reservation["generic_resources"] == {"discrete_resources_specs": ["NVIDIA-GPU=4"]}
        assert reservation["nano_cpus"] == 16 * 10**9 and reservation["memory_bytes"] == 64 * 2**30
        assert task["resources"]["limits"] == {"nano_cpus": 16 * 10**9, "memory_bytes": 64 * 2**30}
        assert task["restart_policy"]["condition"] == "on-failure" and task["restart_policy"]["max_attempts"] == 3
        assert task["networks_advanceds"] == [{"name": "job-net"}]
        assert spec["update_config"]["order"] == "stop-first" and spec["converge_config"]["timeout"] == "600s"
        assert "auth" not in spec


def test_tasks_run_non_root_read_only_without_capabilities() -> None:
    container = service_spec(shape(), role="worker", network="n")["task_spec"]["container_spec"]
    assert container["user"] == "10001:10001" and container["read_only"] is True
    assert container["cap_drops"] == ["ALL"] and container["init"] is True
    assert container["stop_grace_period"] == "300s"
    mounts = {mount["target"]: mount for mount in container["mounts"]}
    assert mounts["/mnt/shared"] == {"type": "bind", "target": "/mnt/shared", "source": "/data"}
    assert mounts["/dev/shm"]["tmpfs_options"] == {"size_bytes": 8 * 2**30}
    assert mounts["/tmp"]["tmpfs_options"] == {"size_bytes": 20 * 2**30}
    env = container["env"]
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_head_hostname_is_its_dns_name_and_workers_are_unique_per_slot() -> None:
    assert service_spec(shape(), role="head", network="n")["task_spec"]["container_spec"]["hostname"] == "job-head"
    worker = service_spec(shape(), role="worker", network="n")["task_spec"]["container_spec"]["hostname"]
    assert worker == "job-worker-{{.Task.Slot}}"


def test_registry_auth_and_secrets_are_passed_to_the_tasks() -> None:
    auth = {"server_address": "registry.example.invalid:5000", "username": "u", "password": "p"}
    spec = service_spec(shape(), role="head", network="n", secrets={"hf-token": "secret-id"}, registry_auth=auth)
    assert spec["auth"] == auth
    assert spec["task_spec"]["container_spec"]["secrets"] == [{
        "secret_id": "secret-id", "secret_name": "hf-token", "file_name": "/run/secrets/hf-token",
        "file_uid": "10001", "file_gid": "10001", "file_mode": 0o400}]
    assert secret_data("a b?") == "YSBiPw=="


def test_storage_mounts() -> None:
    nfs = storage_mount("nfs", job_name="job", mount_path="/mnt/shared", nfs_server="10.1.2.3", nfs_path="/export/t",
                        nfs_options="nfsvers=4.1,rw")
    assert nfs == {"type": "volume", "target": "/mnt/shared", "source": "job-shared", "volume_options": {
        "driver_name": "local", "driver_options": {"type": "nfs", "o": "addr=10.1.2.3,nfsvers=4.1,rw",
                                                   "device": ":/export/t"}}}
    assert storage_mount("none", job_name="job", mount_path="/m") == {"type": "volume", "target": "/m"}
    with pytest.raises(ValueError, match="storage kind 'efs' has no Swarm mount"):
        storage_mount("efs", job_name="job", mount_path="/m")


def test_network_is_an_encrypted_attachable_overlay() -> None:
    args = network_args("job")
    assert args["driver"] == "overlay" and args["attachable"] is True and "encrypted" in args["options"]


def test_encryption_is_off_only_when_the_config_says_so() -> None:
    assert network_args("job", encrypted=False)["options"] == {}
    assert network_args("job", encrypted=True)["options"] == {"encrypted": ""}


def test_a_cpu_stand_in_runs_one_process_per_reserved_gpu_and_expects_no_gpu() -> None:
    stand_in = shape(cpu_stand_in=True, gpus_per_node=2)
    assert "--nproc-per-node=2" in torchrun_args(stand_in, is_host=False)
    check = shlex.split(shell_command(stand_in, [], is_host=False)[2].split(" && exec ")[0])
    assert "--expect-gpus=0" in check
    spec = service_spec(stand_in, role="worker", network="job-net")
    # Engine 20.10 (the test Swarm's) rejects tasks reserving generic resources: a stand-in reserves none.
    assert "generic_resources" not in spec["task_spec"]["resources"]["reservation"]
    site = service_spec(shape(gpus_per_node=2), role="worker", network="job-net")
    assert site["task_spec"]["resources"]["reservation"]["generic_resources"] == {
        "discrete_resources_specs": ["NVIDIA-GPU=2"]}


def test_constraints_select_the_group_and_the_architecture() -> None:
    assert constraints_for({"site/gpu": "orin"}, "arm64") == ["node.labels.site/gpu==orin",
                                                              "node.platform.arch==aarch64"]


# --- the edge-swarm stack ---------------------------------------------------------------------------------------


def test_edge_swarm_plan_has_services_not_kubernetes() -> None:
    plan = plan_stack("edge-swarm")
    types = {resource.type for resource in plan.resources}
    assert not any(t.startswith(("kubernetes:", "aws:")) for t in types)
    assert "pulumi:providers:kubernetes" not in types and "pulumi:providers:aws" not in types
    provider = plan.one("pulumi:providers:docker")
    assert provider.inputs["host"] == "ssh://deploy@gpu-manager.site.internal"
    network = plan.one("docker:index/network:Network")
    assert network.inputs["driver"] == "overlay" and network.inputs["options"] == {"encrypted": ""}
    head = plan.one("docker:index/service:Service", "job-swarm-finetune-head")
    worker = plan.one("docker:index/service:Service", "job-swarm-finetune-worker")
    for service in (head, worker):
        assert service.provider == provider.urn  # every service is created through the manager
        assert service.inputs["auth"] == "[secret]"  # the registry password stays a secret
        command = service.inputs["taskSpec"]["containerSpec"]["commands"][2]
        assert "--nnodes=2:3" in command and "--rdzv-endpoint=swarm-finetune-head:29400" in command
        mount = service.inputs["taskSpec"]["containerSpec"]["mounts"][0]
        assert mount["volumeOptions"]["driverOptions"]["device"] == ":/export/training"
    assert worker.inputs["mode"] == {"replicated": {"replicas": 2}}
    # The label docs/swarm.md tells sites to set, in a key the manager accepts (no '/': make swarm-test found it
    # refused).
    assert head.inputs["taskSpec"]["placement"]["constraints"][0] == "node.labels.gtp.dev.node-group==gpu"
    assert plan.outputs["watch"]["swarm-finetune"]["tasks"] == (
        "docker service ps --no-trunc swarm-finetune-head swarm-finetune-worker")


def test_swarm_secrets_become_docker_secrets(tmp_path) -> None:
    from tests.conftest import plan_modified

    def add_secret(config: dict) -> None:
        config["gtp:swarmSecrets"] = {"secure": "v1:placeholder"}

    # Offline, a secure value becomes a placeholder string that is not JSON: the config step says so.
    with pytest.raises(ConfigError, match="swarmSecrets: must be a JSON map of name to string value"):
        plan_modified(tmp_path, "edge-swarm", add_secret)


# --- config errors ----------------------------------------------------------------------------------------------


def swarm_raw() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.edge-swarm.yaml").read_text())
    raw = {key.split(":", 1)[1]: value for key, value in document["config"].items()}
    raw["registryPassword"] = "fake"
    return raw


def problems(edit) -> list[str]:
    raw = copy.deepcopy(swarm_raw())
    edit(raw)
    secrets = [key for key in ("registryPassword", "swarmSecrets", "kubeconfig") if key in raw]
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, stack="t", secret_keys=secrets)
    return [str(problem) for problem in caught.value.problems]


def test_the_committed_swarm_stack_is_valid() -> None:
    raw = swarm_raw()
    config = parse_stack_config(raw, stack="edge-swarm", secret_keys=["registryPassword"])
    assert config.cluster.swarm is not None and config.cluster.swarm.manager_host.startswith("ssh://")


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda raw: raw["workloads"]["swarm-finetune"]["elastic"].update(maxNodes=4),
     "workloads.swarm-finetune.elastic.maxNodes: 4 tasks, but node group 'gpu' has 3 GPU server(s) (maxSize) "
     "and a server runs one task: use at most 3"),
    (lambda raw: raw["workloads"]["swarm-finetune"].update(gpuResource="shared"),
     "workloads.swarm-finetune.gpuResource: 'shared': a Swarm task reserves all GPUs of its server; use whole"),
    (lambda raw: raw["gpu"].update(sharing={"mode": "mps", "replicas": 2}),
     "gpu.sharing: this section has no effect here: only applies where cluster.mode is 'eks' or 'existing' (here "
     "cluster.mode is 'swarm'); a Swarm task owns whole servers"),
    (lambda raw: raw["workloads"]["swarm-finetune"].update(gpusPerNode=2),
     "workloads.swarm-finetune.gpusPerNode: 2, but a 'gpu' server has 4 GPUs"),
    (lambda raw: raw["cluster"]["swarm"].update(managerHost="tcp://10.0.0.1:2375"),
     "cluster.swarm.managerHost: 'tcp://10.0.0.1:2375' is not an SSH endpoint"),
    (lambda raw: raw["cluster"].pop("swarm"), "cluster.swarm.managerHost: is required for mode 'swarm'"),
    (lambda raw: raw["storage"].update(kind="efs"), "storage.kind: 'efs' is not available on a Swarm"),
    (lambda raw: raw["storage"].pop("nfsServer"), "storage.nfsServer: is required for kind 'nfs'"),
    (lambda raw: raw["storage"].update(kind="host-path"), "storage.hostPath: None must be an absolute directory"),
    (lambda raw: raw["workloads"]["swarm-finetune"].update(kind="pytorchjob"),
     "workloads.swarm-finetune.kind: 'pytorchjob' runs on kubernetes, but cluster.mode 'swarm' is a swarm "
     "cluster; use swarm"),
    (lambda raw: raw["gpu"]["metrics"].update(prometheus=True), "gpu.metrics: prometheus run on Kubernetes"),
    (lambda raw: raw["workloads"]["swarm-finetune"].update(autoscaling={"mode": "scaledobject"}),
     "workloads.swarm-finetune.autoscaling.mode: 'scaledobject' needs KEDA"),
    (lambda raw: raw["gpuNodeGroups"]["gpu"].update(instanceTypes=["g6.xlarge"]),
     "gpuNodeGroups.gpu.instanceTypes: ['g6.xlarge'] has no effect here: only applies where cluster.mode is 'eks' "
     "(here cluster.mode is 'swarm')"),
    (lambda raw: raw["gpuNodeGroups"]["gpu"].pop("gpusPerNode"),
     "gpuNodeGroups.gpu.gpusPerNode: is required on a Swarm"),
    (lambda raw: raw.update(kubeconfig="x"), "kubeconfig: is set, but mode 'swarm' reaches its manager over SSH"),
    (lambda raw: raw["gpuNodeGroups"]["gpu"].update(nodeSelector={"site/gpu": "l4"}),
     "gpuNodeGroups.gpu.nodeSelector.site/gpu: 'site/gpu' can't be a Swarm placement constraint's label key"),
    (lambda raw: raw.update(swarmSecrets=json.dumps({"bad name": "v"})),
     "swarmSecrets.bad name: is not a secret name"),
])
def test_inconsistent_swarm_configs_are_rejected(edit, expected: str) -> None:
    found = problems(edit)
    assert any(problem.startswith(expected) for problem in found), found


def test_swarm_kind_and_storage_are_rejected_on_kubernetes() -> None:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    raw = {key.split(":", 1)[1]: value for key, value in document["config"].items()}
    raw["workloads"]["mnist"]["kind"] = "swarm"
    raw["workloads"]["mnist"]["autoscaling"] = {"mode": "none"}
    raw["storage"] = {"kind": "nfs", "nfsServer": "10.0.0.5", "nfsPath": "/export"}
    raw["cluster"]["swarm"] = {"managerHost": "ssh://a@b"}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, stack="t")
    found = [str(problem) for problem in caught.value.problems]
    for expected in ("workloads.mnist.kind: 'swarm' runs on swarm, but cluster.mode 'eks' is a kubernetes cluster",
                     "storage.kind: 'nfs' is for a Docker Swarm",
                     "cluster.swarm: this section has no effect here: only applies where cluster.mode is 'swarm'"):
        assert any(problem.startswith(expected) for problem in found), found
