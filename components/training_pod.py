"""The one training pod: every pod the platform runs for training is built here from one `PodShape`.

PyTorchJob Master/Worker, ElasticJob worker, TrainJob node, the Job a KEDA ScaledJob starts: each workload kind
(`workload_kinds/`) wraps `pod_template(shape, ...)` in its own custom resource. Pure functions returning plain
data, unit-tested without Pulumi (tests/workloads/).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi

from conventions import container_paths
from conventions.kubernetes import restricted_container, restricted_pod
from conventions.names import EFA_RESOURCE
from conventions.quantities import quantity_gib
from conventions.trainer_cli import platform_flags

CONTAINER_NAME = "pytorch"
"""The training-operator finds the training container by this name (every replica needs one)."""
RUN_AS_USER = 10001
"""The image's `USER 10001:10001` (images/trainer/Dockerfile)."""
METRICS_PORT = 9464
"""The trainer serves Prometheus metrics on METRICS_PORT + LOCAL_RANK (`--metrics-port`)."""
EFA_ENV = {
    # libfabric's EFA provider with GPUDirect RDMA (p4d/p5); NCCL finds it through the aws-ofi-nccl plugin.
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    # DataLoader workers fork; libfabric must then not share registered memory with the child.
    "FI_EFA_FORK_SAFE": "1",
    # NCCL's bootstrap and fallback socket traffic uses the pod interface, never loopback or bridges.
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth",
}


@dataclass(frozen=True)
class PodShape:
    """Everything that makes one training pod; shared by PyTorchJob, ElasticJob and ScaledJob."""

    image: pulumi.Input[str]
    """The training image *by digest*."""
    namespace: str
    service_account: str
    priority_class: str
    gpu_resource: str
    """`nvidia.com/gpu` (whole GPUs) or `nvidia.com/gpu.shared` (an MPS / time-slicing slice)."""
    num_gpus: int
    """GPUs (or slices) per pod = processes per pod."""
    cpu: str
    memory: str
    ephemeral_storage: str
    shm_size: str
    node_selector: Mapping[str, str]
    """Labels of the GPU node group's nodes; rendered as required node affinity."""
    tolerations: Sequence[Mapping[str, str]]
    termination_grace_period_seconds: int
    storage_volume: Mapping[str, Any]
    """Volume source of the shared storage: `{"persistentVolumeClaim": {...}}` or `{"emptyDir": {...}}`."""
    mount_path: str
    """Where the shared storage is mounted (checkpoints under `<mount_path>/checkpoints/<job>`)."""
    trainer_args: Sequence[pulumi.Input[str]]
    """Flags of `module` (see `trainer_args`, `bench_args`)."""
    module: str = "trainer.train"
    """What each process runs: `trainer.train`, or `trainer.bench` for a benchmark job."""
    num_efa: int = 0
    """EFA devices per pod (`vpc.amazonaws.com/efa`); 0 = EFA off, no EFA env."""
    extra_env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    checkpoint_dir: str | None = None
    device_shm: bool = False
    """The device plugin mounts the MPS daemon's shared memory at `/dev/shm` (an MPS slice: device plugin v0.20.0
    internal/plugin/mps.go:86-89 `ContainerPath: /dev/shm`): the pod gets no `dshm` emptyDir there. Kubelet
    appends the pod's own mounts after the device plugin's (kubernetes pkg/kubelet/kubelet_pods.go
    `GenerateRunContainerOptions`: `containerManager.GetResources` first, then `opts.Mounts = append(opts.Mounts,
    mounts...)`), so an emptyDir at /dev/shm would hide the MPS server's and the client could not attach. Its size
    is the daemon's tmpfs (half the node's memory: cmd/mps-control-daemon/mount/mount-shm.go:74-106), not
    `shm_size`. Default false: an emptyDir of `shm_size`."""
    runtime_class_name: str | None = None
    """RuntimeClass of the pod (the NVIDIA runtime where it isn't the GPU nodes' default, `gpu.runtimeClassName`):
    without it a GPU pod on k3s gets no driver libraries. None: the node's default runtime."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Extra pod-template annotations (Kueue's PodSet topology request, components/kueue.py)."""
    program: tuple[str, ...] | None = None
    """A team's own program (`workloads.<name>.command`, in their own `image`) in place of `-m module
    trainer_args`. Such an image has no `trainer` package: no healthcheck init container, no trainer metrics
    ports; it finds its directories in `GTP_CHECKPOINT_DIR` / `GTP_DATA_DIR`."""


def trainer_args(*, model: str, max_steps: int, batch_size: int, checkpoint_dir: str, checkpoint_every: int,
                 extra: Sequence[str] = (), metrics: bool = True) -> list[str]:
    """Flags of `python -m trainer.train` (the trainer's own CLI, images/trainer/trainer/config.py): the platform's
    own (conventions/trainer_cli.py `PLATFORM_OWNED`), then the workload's `extraArgs`."""
    own = platform_flags(model=model, max_steps=max_steps, batch_size=batch_size, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, metrics_port=METRICS_PORT if metrics else None)
    return own + list(extra)


def bench_args(*, model: str, steps: int, batch_size: int, sizes: str,
               output: pulumi.Input[str]) -> list[pulumi.Input[str]]:
    """Flags of `python -m trainer.bench`: the all-reduce size sweep, timed training steps, and where the one
    JSON result of the run goes (an `s3://bucket/prefix/` of the artifacts bucket, or a file)."""
    return [f"--model={model}", f"--steps={steps}", f"--batch-size={batch_size}", f"--sizes={sizes}",
            pulumi.Output.concat("--output=", output)]


def torchrun_args(num_procs: int, trainer: Sequence[str], *, standalone: bool = False,
                  module: str = "trainer.train", program: Sequence[str] | None = None) -> list[str]:
    """`torchrun` arguments. Rendezvous, node count and rank come from the PET_* env the training-operator sets
    (torchrun reads PET_<FLAG> for every flag); `--standalone` for a single pod outside any operator. `program`
    (a team's own command) replaces `-m module trainer`."""
    head = ["--standalone", "--nnodes=1"] if standalone else []
    return [*head, f"--nproc-per-node={num_procs}", *launched(trainer, module, program)]


def launched(trainer: Sequence[str], module: str, program: Sequence[str] | None) -> list[str]:
    """What the launcher (torchrun, dlrover-run) starts in every process: our trainer's module and flags, or a
    team's own program."""
    return list(program) if program is not None else ["-m", module, *trainer]


def resources(shape: PodShape) -> dict[str, Any]:
    """Requests == limits for every resource: Guaranteed QoS, so the kubelet evicts training pods last and the
    CPU manager can pin cores."""
    amounts: dict[str, Any] = {"cpu": shape.cpu, "memory": shape.memory, "ephemeral-storage": shape.ephemeral_storage,
                               shape.gpu_resource: str(shape.num_gpus)}
    if shape.num_efa:
        amounts[EFA_RESOURCE] = str(shape.num_efa)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def container_security_context() -> dict[str, Any]:
    """Pod Security `restricted`: non-root (the image's user), no privilege escalation, no capabilities,
    read-only root."""
    return restricted_container(user=RUN_AS_USER)


def container_env(shape: PodShape) -> list[dict[str, Any]]:
    env: dict[str, Any] = {
        # torch >= 2.5 shares the agent's TCPStore with workers; restarts then hang or read the previous
        # attempt's address (pytorch#135712, #167288). Measured: 11 of 11 restarts recover with this set.
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONUNBUFFERED": "1",
        # The root filesystem is read-only: every cache goes to the /tmp emptyDir.
        "HOME": "/tmp",
        "XDG_CACHE_HOME": "/tmp/.cache",
        "TRITON_CACHE_DIR": "/tmp/.cache/triton",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/.cache/inductor",
    }
    if shape.num_efa:
        env.update(EFA_ENV)
    if shape.program is not None:
        # A team's own code learns where its directories are here (our trainer gets them as flags).
        if shape.checkpoint_dir:
            env["GTP_CHECKPOINT_DIR"] = shape.checkpoint_dir
        env["GTP_DATA_DIR"] = f"{shape.mount_path.rstrip('/')}/data"
    env.update(shape.extra_env)
    return [{"name": name, "value": value} for name, value in env.items()]


def volume_mounts(shape: PodShape) -> list[dict[str, Any]]:
    shm = [] if shape.device_shm else [{"name": "dshm", "mountPath": container_paths.SHM}]
    return [*shm, {"name": "tmp", "mountPath": container_paths.SCRATCH},
            {"name": "shared", "mountPath": shape.mount_path}]


def healthcheck_args(shape: PodShape) -> list[str]:
    # 90 % of the sizeLimit: tmpfs reports its size rounded to pages, never more than the limit.
    args = ["-m", "trainer.healthcheck", f"--expect-gpus={shape.num_gpus}",
            f"--min-shm-gib={math.floor(quantity_gib(shape.shm_size) * 0.9 * 100) / 100:g}"]
    if shape.checkpoint_dir:
        args.append(f"--checkpoint-dir={shape.checkpoint_dir}")
    return args


def node_affinity(node_selector: Mapping[str, str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": key, "operator": "In", "values": [value]}
                             for key, value in sorted(node_selector.items())],
    }]}}}


def pod_template(shape: PodShape, *, command: Sequence[str], args: Sequence[str],
                 restart_policy: Literal["OnFailure", "Never", "Always"] = "OnFailure",
                 labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The one training pod template: `pytorch` container + `healthcheck` init container (same image, security
    context and resources), exec-form command so SIGTERM reaches the launcher, shm/tmp/shared volumes."""
    security = container_security_context()
    res = resources(shape)
    mounts = volume_mounts(shape)
    env = container_env(shape)
    own = shape.program is not None  # a team's own image: none of our trainer's extras
    ports = [] if own else [{"name": f"metrics-{rank}", "containerPort": METRICS_PORT + rank, "protocol": "TCP"}
                            for rank in range(shape.num_gpus)]
    container = {
        "name": CONTAINER_NAME, "image": shape.image, "imagePullPolicy": "IfNotPresent",
        "command": list(command), "args": list(args), "env": env,
        **({"ports": ports} if ports else {}),
        "resources": res, "securityContext": security, "volumeMounts": mounts,
    }
    healthcheck = {
        "name": "healthcheck", "image": shape.image, "imagePullPolicy": "IfNotPresent",
        "command": ["python"], "args": healthcheck_args(shape), "env": env,
        "resources": res, "securityContext": security, "volumeMounts": mounts,
    }
    return {
        "metadata": {
            "labels": dict(labels or {}),
            **({"annotations": {**({} if own else {"prometheus.io/scrape": "true",
                                                   "prometheus.io/port": str(METRICS_PORT)}),
                                **dict(shape.annotations)}}
               if shape.annotations or not own else {}),
        },
        "spec": {
            "serviceAccountName": shape.service_account,
            # The pod reaches AWS through EKS Pod Identity (credentials from the node agent), never a token in
            # a file; DLRover's master is the only training pod that talks to the API server.
            "automountServiceAccountToken": False,
            "priorityClassName": shape.priority_class,
            **({"runtimeClassName": shape.runtime_class_name} if shape.runtime_class_name else {}),
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": shape.termination_grace_period_seconds,
            "securityContext": restricted_pod(user=RUN_AS_USER, group=RUN_AS_USER, fs_group=RUN_AS_USER),
            "affinity": node_affinity(shape.node_selector),
            "tolerations": [dict(t) for t in shape.tolerations],
            # The healthcheck is our trainer's module: a team's own image doesn't have it.
            **({} if own else {"initContainers": [healthcheck]}),
            "containers": [container],
            "volumes": [
                # NCCL and DataLoader workers exchange tensors through /dev/shm; the container default is 64 MiB.
                # Under MPS the device plugin mounts the daemon's /dev/shm instead (`PodShape.device_shm`).
                *([] if shape.device_shm else [
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shape.shm_size}}]),
                {"name": "tmp", "emptyDir": {"sizeLimit": shape.ephemeral_storage}},
                {"name": "shared", **dict(shape.storage_volume)},
            ],
        },
    }


@dataclass(frozen=True)
class ElasticRange:
    min_nodes: int
    max_nodes: int
    max_restarts: int


@dataclass(frozen=True)
class RunPolicy:
    backoff_limit: int
    ttl_seconds_after_finished: int | None
    """None: the finished job object stays (a job Pulumi owns must not disappear behind its back)."""
    clean_pod_policy: str
