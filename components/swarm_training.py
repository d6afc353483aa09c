"""SwarmTraining: distributed PyTorch training on a Docker Swarm of GPU servers.

One training task per GPU server, started by two replicated services on one encrypted, attachable overlay
network:

- `<job>-head` (1 replica): its torchrun hosts the c10d rendezvous store (`--rdzv-conf=is_host=true`); the service
  uses `dnsrr` endpoint mode, so its DNS name resolves straight to the task (no virtual IP in between) and the
  task's hostname is the same name;
- `<job>-worker` (max nodes - 1 replicas): torchrun joins the rendezvous at `<job>-head:29400` (`is_host=false`).

torch decides who hosts a c10d store by matching the endpoint against the machine's hostname and addresses
(`torch/distributed/elastic/rendezvous/utils.py` `_matches_machine_hostname`); through a service VIP that match
fails and nobody would host it, which is why `is_host` is stated explicitly and the head service uses `dnsrr`.
With `is_host` explicit the endpoint mode is not what makes it work: on the real Swarm of `make swarm-test` the
rendezvous formed with the head in `vip` mode too; `dnsrr` keeps the name on the task itself, with no IPVS between.

Each task reserves all GPUs of its server as Swarm generic resources (`NVIDIA-GPU=<n>`): a second task can't
land on a server whose GPUs are taken, and `max_replicas: 1` keeps one task of a service per server. When a task
fails, Swarm restarts it (`restart_policy`); torchrun's elastic agents re-form the rendezvous and the trainer
resumes from the newest valid checkpoint on the shared volume. What Swarm can't do: isolate GPUs between tasks
on one server (unless the server's NVIDIA runtime maps Swarm's `DOCKER_RESOURCE_<kind>` variable to visible
devices, it exposes every GPU of the server to every container), MPS, or gang-schedule the tasks — see docs/swarm.md
("Docker Swarm sites").

The spec functions below are pure (plain data) and unit-tested; the component only registers them.
"""

from __future__ import annotations

import base64
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_docker as docker

from components.training_pod import RUN_AS_USER
from conventions import container_paths
from conventions.quantities import cpu_cores, quantity_gib

RENDEZVOUS_PORT = 29400
OVERLAY_INTERFACE = "eth0"
"""The tasks attach one overlay network and publish no port (so they are not on the ingress network): the overlay
is their first interface. docker_gwbridge (the second) does not route between servers, so NCCL and gloo must not
pick it."""
SECRETS_DIR = container_paths.SECRETS_DIR


@dataclass(frozen=True)
class SwarmJobShape:
    """Everything that makes one Swarm training task."""

    job_name: str
    image: pulumi.Input[str]
    """The training image *by digest*."""
    min_nodes: int
    max_nodes: int
    """Tasks (= GPU servers) the job runs on: torchrun's `--nnodes=MIN:MAX`."""
    gpus_per_node: int
    """GPUs of each server, all reserved by its one task; torchrun starts one process per visible GPU."""
    gpu_resource_name: str
    """Generic resource kind the daemons advertise (`NVIDIA-GPU`)."""
    constraints: Sequence[str]
    """Placement constraints selecting the GPU servers (`node.labels.<key>==<value>`, `node.platform.arch==...`)."""
    module: str
    """`trainer.train` or `trainer.bench`."""
    trainer_args: Sequence[pulumi.Input[str]]
    cpu: str
    memory: str
    shm_size: str
    """Size of the tmpfs `/dev/shm` (NCCL, DataLoader workers)."""
    scratch_size: str
    """Size of the tmpfs `/tmp` (the root filesystem is read-only)."""
    storage_mount: Mapping[str, Any]
    """The shared volume's mount (see `storage_mount`)."""
    mount_path: str
    checkpoint_dir: str
    max_restarts: int
    """torchrun restarts of the worker group before the agent gives up (then Swarm restarts the task)."""
    restart_attempts: int
    """Swarm restarts of a failed task."""
    stop_grace_seconds: int
    """SIGTERM → SIGKILL: time to write a checkpoint."""
    extra_env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    cpu_stand_in: bool = False
    """`cluster.swarm.cpuStandIn`: `gpus_per_node` CPU processes per task, no GPU expected, no generic resource
    reserved (the CPU test Swarm)."""


def storage_mount(kind: str, *, job_name: str, mount_path: str, nfs_server: str | None = None,
                  nfs_path: str | None = None, nfs_options: str = "", host_path: str | None = None) -> dict[str, Any]:
    """The shared volume of every task: an NFS export mounted by Docker's `local` volume driver on each server
    (created at task start), a directory that exists on every server, or — `none` — a node-local volume that
    disappears with the task."""
    if kind == "nfs":
        return {"type": "volume", "target": mount_path, "source": f"{job_name}-shared",
                "volume_options": {"driver_name": "local", "driver_options": {
                    "type": "nfs", "o": f"addr={nfs_server},{nfs_options}", "device": f":{nfs_path}"}}}
    if kind == "host-path":
        return {"type": "bind", "target": mount_path, "source": host_path}
    if kind == "none":
        return {"type": "volume", "target": mount_path}
    raise ValueError(f"storage kind {kind!r} has no Swarm mount; config validation should have rejected it")


def torchrun_args(shape: SwarmJobShape, *, is_host: bool) -> list[str]:
    """torchrun on one server: every visible GPU, c10d rendezvous at the head service."""
    processes = str(shape.gpus_per_node) if shape.cpu_stand_in else "gpu"
    return [f"--nnodes={shape.min_nodes}:{shape.max_nodes}", f"--nproc-per-node={processes}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={head_service_name(shape.job_name)}:{RENDEZVOUS_PORT}",
            f"--rdzv-id={shape.job_name}", f"--rdzv-conf=is_host={str(is_host).lower()}",
            f"--max-restarts={shape.max_restarts}", "-m", shape.module]


def shell_command(shape: SwarmJobShape, trainer: Sequence[str], *, is_host: bool) -> list[str]:
    """`sh -c "python -m trainer.healthcheck ... && exec torchrun ..."`: Swarm has no init containers, so the node
    check runs first in the same task; `exec` makes torchrun the shell's successor (Docker's init, enabled on
    the task, forwards SIGTERM to it), so a stop reaches the trainer and it checkpoints."""
    check = shlex.join(["python", *healthcheck_args_for(shape)])
    launch = shlex.join(["torchrun", *torchrun_args(shape, is_host=is_host), *trainer])
    return ["sh", "-c", f"{check} && exec {launch}"]


def task_command(shape: SwarmJobShape, *, is_host: bool) -> list[str] | pulumi.Output[list[str]]:
    """`shell_command`, as plain data when every trainer argument is known, else once they are."""
    if all(isinstance(arg, str) for arg in shape.trainer_args):
        return shell_command(shape, [str(arg) for arg in shape.trainer_args], is_host=is_host)
    return pulumi.Output.all(*shape.trainer_args).apply(
        lambda trainer: shell_command(shape, [str(arg) for arg in trainer], is_host=is_host))


def healthcheck_args_for(shape: SwarmJobShape) -> list[str]:
    # 90 % of the tmpfs size: tmpfs reports its size rounded to pages, never more than the limit.
    gpus = 0 if shape.cpu_stand_in else shape.gpus_per_node
    return ["-m", "trainer.healthcheck", f"--expect-gpus={gpus}",
            f"--min-shm-gib={math.floor(quantity_gib(shape.shm_size) * 0.9 * 100) / 100:g}",
            f"--checkpoint-dir={shape.checkpoint_dir}"]


def task_env(shape: SwarmJobShape) -> dict[str, pulumi.Input[str]]:
    return {
        # torch >= 2.5 shares the agent's TCPStore with workers; restarts then hang or read the previous
        # attempt's address (pytorch#135712, #167288).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
        "XDG_CACHE_HOME": "/tmp/.cache",
        "TRITON_CACHE_DIR": "/tmp/.cache/triton",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/.cache/inductor",
        "NCCL_SOCKET_IFNAME": OVERLAY_INTERFACE,
        "GLOO_SOCKET_IFNAME": OVERLAY_INTERFACE,
        **shape.extra_env,
    }


def head_service_name(job_name: str) -> str:
    return f"{job_name}-head"


def worker_service_name(job_name: str) -> str:
    return f"{job_name}-worker"


def service_spec(shape: SwarmJobShape, *, role: str, network: pulumi.Input[str],
                 secrets: Mapping[str, pulumi.Input[str]] | None = None,
                 registry_auth: Mapping[str, pulumi.Input[str]] | None = None,
                 converge_timeout_seconds: int = 600) -> dict[str, Any]:
    """Keyword arguments of `docker.Service` for the `head` or `worker` role (`secrets`: name → Docker secret id)."""
    is_host = role == "head"
    name = head_service_name(shape.job_name) if is_host else worker_service_name(shape.job_name)
    replicas = 1 if is_host else shape.max_nodes - 1
    cores = cpu_cores(shape.cpu)
    amounts = {"nano_cpus": int(cores * 1e9), "memory_bytes": _bytes(shape.memory)}
    mounts = [
        dict(shape.storage_mount),
        # The root filesystem is read-only; shared memory and scratch are memory-backed and bounded.
        {"type": "tmpfs", "target": container_paths.SHM, "tmpfs_options": {"size_bytes": _bytes(shape.shm_size)}},
        {"type": "tmpfs", "target": container_paths.SCRATCH,
         "tmpfs_options": {"size_bytes": _bytes(shape.scratch_size)}},
    ]
    reservation: dict[str, Any] = dict(amounts)
    if not shape.cpu_stand_in:
        # A CPU stand-in reserves none: Debian's Engine 20.10 (the test Swarm's) rejects every task that reserves a
        # generic resource once its node is updated (moby/moby#44378; swarmkit bump_20.10 branch
        # manager/orchestrator/constraintenforcer/constraint_enforcer.go:177-182 removes a task whose assigned
        # resource *is* available; fixed by swarmkit 770a4d305, in v2.0.0 = Engine 23.0).
        reservation["generic_resources"] = {
            "discrete_resources_specs": [f"{shape.gpu_resource_name}={shape.gpus_per_node}"]}
    container: dict[str, Any] = {
        "image": shape.image,
        "commands": task_command(shape, is_host=is_host),
        "env": task_env(shape),
        # The head task's hostname is its service's DNS name (see the module docstring). Workers get one name per
        # task slot: torchrun tells rendezvous participants apart by hostname and pid (`_NodeDescGenerator` in
        # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), every task's torchrun has the same pid, so
        # identical hostnames would collide. Swarm expands `{{.Task.Slot}}` per task.
        "hostname": name if is_host else f"{name}-{{{{.Task.Slot}}}}",
        "user": f"{RUN_AS_USER}:{RUN_AS_USER}",
        "read_only": True,
        "cap_drops": ["ALL"],
        # Docker's init as PID 1: reaps zombies and forwards SIGTERM to the shell's exec'd torchrun.
        "init": True,
        "stop_signal": "SIGTERM",
        "stop_grace_period": f"{shape.stop_grace_seconds}s",
        "mounts": mounts,
        "secrets": [{"secret_id": secret_id, "secret_name": secret_name, "file_name": f"{SECRETS_DIR}/{secret_name}",
                     "file_uid": str(RUN_AS_USER), "file_gid": str(RUN_AS_USER), "file_mode": 0o400}
                    for secret_name, secret_id in sorted((secrets or {}).items())],
    }
    spec: dict[str, Any] = {
        "name": name,
        "labels": [{"label": "gtp.dev/job", "value": shape.job_name}, {"label": "gtp.dev/role", "value": role}],
        "mode": {"replicated": {"replicas": replicas}},
        "endpoint_spec": {"mode": "dnsrr"},
        "task_spec": {
            "container_spec": container,
            "networks_advanceds": [{"name": network}],
            "placement": {"constraints": list(shape.constraints), "max_replicas": 1},
            "resources": {"reservation": reservation, "limits": dict(amounts)},
            "restart_policy": {"condition": "on-failure", "delay": "10s", "max_attempts": shape.restart_attempts,
                               "window": "120s"},
        },
        # A rolling update would restart the tasks one by one, each time breaking the rendezvous: stop them all,
        # then start the new ones (the trainer resumes from its checkpoint).
        "update_config": {"parallelism": 0, "order": "stop-first", "failure_action": "pause"},
        # `pulumi up` waits until every task runs (image pulled, GPUs reserved) and fails after the timeout,
        # instead of leaving tasks pending on a server without the label, the runtime or free GPUs.
        "converge_config": {"delay": "5s", "timeout": f"{converge_timeout_seconds}s"},
    }
    if registry_auth:
        # Swarm keeps the credentials in its Raft store and hands them to the servers that pull the image
        # (what `docker service create --with-registry-auth` does).
        spec["auth"] = dict(registry_auth)
    return spec


def _bytes(quantity: str) -> int:
    return int(quantity_gib(quantity) * 2**30)


def network_args(job_name: str, *, encrypted: bool = True) -> dict[str, Any]:
    """The job's overlay network: encrypted (IPsec between servers; Docker's overlay driver turns it on when the
    `encrypted` option is present; off only by `cluster.swarm.encryptOverlay: false`) and attachable (a debugging
    container may join it)."""
    return {"name": f"{job_name}-net", "driver": "overlay", "attachable": True,
            "options": {"encrypted": ""} if encrypted else {},
            "labels": [{"label": "gtp.dev/job", "value": job_name}]}


def secret_data(value: str) -> str:
    """Docker secrets take base64 (URL-safe) data."""
    return base64.urlsafe_b64encode(value.encode()).decode()


@dataclass
class SwarmTrainingArgs:
    provider: docker.Provider
    """The Swarm manager's Docker provider."""
    shape: SwarmJobShape
    secrets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Name → value (Pulumi secrets); each becomes a Docker secret at `/run/secrets/<name>` (owner 10001, 0400)."""
    registry_auth: Mapping[str, pulumi.Input[str]] | None = None
    """`server_address`, `username`, `password` of the registry the servers pull the image from."""
    converge_timeout_seconds: int = 600
    encrypt_overlay: bool = True
    """`cluster.swarm.encryptOverlay`."""


class SwarmTraining(pulumi.ComponentResource):
    network: docker.Network
    services: list[docker.Service]

    def __init__(self, name: str, args: SwarmTrainingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:SwarmTraining", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        shape = args.shape
        self.network = docker.Network(f"{name}-network", **network_args(shape.job_name, encrypted=args.encrypt_overlay),
                                      opts=child)
        secret_ids: dict[str, pulumi.Input[str]] = {}
        for secret_name, value in sorted(args.secrets.items()):
            secret = docker.Secret(
                f"{name}-secret-{secret_name}", name=f"{shape.job_name}-{secret_name}",
                data=pulumi.Output.secret(pulumi.Output.from_input(value).apply(secret_data)), opts=child)
            secret_ids[secret_name] = secret.id
        roles = ["head"] + (["worker"] if shape.max_nodes > 1 else [])
        self.services = [
            docker.Service(f"{name}-{role}", **service_spec(
                shape, role=role, network=self.network.name, secrets=secret_ids, registry_auth=args.registry_auth,
                converge_timeout_seconds=args.converge_timeout_seconds), opts=child)
            for role in roles
        ]
        self.register_outputs({"services": [service.name for service in self.services]})


def constraints_for(selector: Mapping[str, str], architecture: str) -> list[str]:
    """Swarm placement constraints: every selector label, and the servers' CPU architecture."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}[architecture]
    return [*(f"node.labels.{key}=={value}" for key, value in sorted(selector.items())),
            f"node.platform.arch=={arch}"]


__all__ = ["RENDEZVOUS_PORT", "SwarmJobShape", "SwarmTraining", "SwarmTrainingArgs", "constraints_for",
           "healthcheck_args_for", "network_args", "secret_data", "service_spec", "shell_command", "storage_mount",
           "task_command",
           "torchrun_args"]
