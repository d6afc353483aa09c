"""TrainingJob: the stack's distributed training run, as a Kubeflow PyTorchJob or a DLRover ElasticJob.

Every pod the platform runs for training — PyTorchJob Master/Worker, ElasticJob worker, the Job a KEDA
ScaledJob starts — is built by one pure function, `pod_template`, from one `PodShape`. The bodies here are
plain data, unit-tested without Pulumi (tests/workloads/), and checked in the plan against the upstream CRDs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

PYTORCH_JOB_API = "kubeflow.org/v1"
ELASTIC_JOB_API = "elastic.iml.github.io/v1alpha1"
CONTAINER_NAME = "pytorch"
"""The training-operator finds the training container by this name (every replica needs one)."""
RUN_AS_USER = 10001
"""The image's `USER 10001:10001` (images/trainer/Dockerfile)."""
METRICS_PORT = 9464
"""The trainer serves Prometheus metrics on METRICS_PORT + LOCAL_RANK (`--metrics-port`)."""
PYTORCH_JOB_LABEL = "training.kubeflow.org/job-name"
"""Label the training-operator puts on every pod of a PyTorchJob."""
ELASTIC_JOB_LABEL = "elasticjob.dlrover/name"
"""Label DLRover puts on every pod (master and workers) of an ElasticJob."""
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


def trainer_args(*, model: str, max_steps: int, batch_size: int, checkpoint_dir: str, checkpoint_every: int,
                 extra: Sequence[str] = (), metrics: bool = True) -> list[str]:
    """Flags of `python -m trainer.train` (the trainer's own CLI, images/trainer/trainer/config.py)."""
    args = [f"--model={model}", f"--max-steps={max_steps}", f"--batch-size={batch_size}",
            f"--checkpoint-dir={checkpoint_dir}", f"--checkpoint-every={checkpoint_every}"]
    if metrics:
        args.append(f"--metrics-port={METRICS_PORT}")
    return args + list(extra)


def bench_args(*, model: str, steps: int, batch_size: int, sizes: str,
               output: pulumi.Input[str]) -> list[pulumi.Input[str]]:
    """Flags of `python -m trainer.bench`: the all-reduce size sweep, timed training steps, and where the one
    JSON result of the run goes (an `s3://bucket/prefix/` of the artifacts bucket, or a file)."""
    return [f"--model={model}", f"--steps={steps}", f"--batch-size={batch_size}", f"--sizes={sizes}",
            pulumi.Output.concat("--output=", output)]


def checkpoint_dir(mount_path: str, job_name: str) -> str:
    return f"{mount_path.rstrip('/')}/checkpoints/{job_name}"


def torchrun_args(num_procs: int, trainer: Sequence[str], *, standalone: bool = False,
                  module: str = "trainer.train") -> list[str]:
    """`torchrun` arguments. Rendezvous, node count and rank come from the PET_* env the training-operator sets
    (torchrun reads PET_<FLAG> for every flag); `--standalone` for a single pod outside any operator."""
    head = ["--standalone", "--nnodes=1"] if standalone else []
    return [*head, f"--nproc-per-node={num_procs}", "-m", module, *trainer]


def dlrover_run_args(min_nodes: int, max_nodes: int, num_procs: int, max_restarts: int,
                     trainer: Sequence[str], module: str = "trainer.train") -> list[str]:
    """`dlrover-run` arguments (0.6.1: torchrun's parser plus DLRover flags; the rendezvous is DLRover's master,
    found through DLROVER_MASTER_ADDR that the ElasticJob controller sets)."""
    return [f"--nnodes={min_nodes}:{max_nodes}", f"--nproc-per-node={num_procs}", f"--max-restarts={max_restarts}",
            "-m", module, *trainer]


def quantity_gib(quantity: str) -> float:
    """A Kubernetes memory quantity in GiB ("16Gi" → 16.0, "512Mi" → 0.5)."""
    match = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?", quantity.strip())
    if not match:
        raise ValueError(f"{quantity!r} is not a memory quantity like '16Gi'")
    factor = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9,
              "T": 1e12}[match.group(2)]
    return float(match.group(1)) * factor / 2**30


def resources(shape: PodShape) -> dict[str, Any]:
    """Requests == limits for every resource: Guaranteed QoS, so the kubelet evicts training pods last and the
    CPU manager can pin cores."""
    amounts: dict[str, Any] = {"cpu": shape.cpu, "memory": shape.memory, "ephemeral-storage": shape.ephemeral_storage,
                               shape.gpu_resource: str(shape.num_gpus)}
    if shape.num_efa:
        amounts["vpc.amazonaws.com/efa"] = str(shape.num_efa)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def container_security_context() -> dict[str, Any]:
    """Pod Security `restricted`: non-root, no privilege escalation, no capabilities, read-only root."""
    return {
        "runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }


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
    env.update(shape.extra_env)
    return [{"name": name, "value": value} for name, value in env.items()]


def volume_mounts(shape: PodShape) -> list[dict[str, Any]]:
    return [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "tmp", "mountPath": "/tmp"},
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
    ports = [{"name": f"metrics-{rank}", "containerPort": METRICS_PORT + rank, "protocol": "TCP"}
             for rank in range(shape.num_gpus)]
    container = {
        "name": CONTAINER_NAME, "image": shape.image, "imagePullPolicy": "IfNotPresent",
        "command": list(command), "args": list(args), "env": env, "ports": ports,
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
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)},
        },
        "spec": {
            "serviceAccountName": shape.service_account,
            # The pod reaches AWS through EKS Pod Identity (credentials from the node agent), never a token in
            # a file; DLRover's master is the only training pod that talks to the API server.
            "automountServiceAccountToken": False,
            "priorityClassName": shape.priority_class,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": shape.termination_grace_period_seconds,
            "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                                "fsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}},
            "affinity": node_affinity(shape.node_selector),
            "tolerations": [dict(t) for t in shape.tolerations],
            "initContainers": [healthcheck],
            "containers": [container],
            "volumes": [
                # NCCL and DataLoader workers exchange tensors through /dev/shm; the container default is 64 MiB.
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shape.shm_size}},
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
    ttl_seconds_after_finished: int
    clean_pod_policy: str


def pytorch_job_body(name: str, shape: PodShape, *, num_nodes: int, elastic: ElasticRange | None,
                     run_policy: RunPolicy) -> dict[str, Any]:
    """A PyTorchJob: Master + (num_nodes - 1) Workers, or — elastic — Workers only with `elasticPolicy` (the
    operator then hands torchrun a c10d rendezvous on the first worker through PET_* env)."""
    args = torchrun_args(shape.num_gpus, shape.trainer_args, module=shape.module)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "gtp"}
    template = pod_template(shape, command=["torchrun"], args=args, labels=labels)
    spec: dict[str, Any] = {
        "nprocPerNode": str(shape.num_gpus),
        "runPolicy": {"backoffLimit": run_policy.backoff_limit,
                      "ttlSecondsAfterFinished": run_policy.ttl_seconds_after_finished,
                      "cleanPodPolicy": run_policy.clean_pod_policy},
    }
    if elastic is not None:
        # No `metrics`: KEDA (keda_scaling.py) is the only autoscaler; two HPAs on one target fight.
        spec["elasticPolicy"] = {"minReplicas": elastic.min_nodes, "maxReplicas": elastic.max_nodes,
                                 "rdzvBackend": "c10d", "maxRestarts": elastic.max_restarts}
        spec["pytorchReplicaSpecs"] = {"Worker": {"replicas": elastic.min_nodes, "restartPolicy": "OnFailure",
                                                  "template": template}}
    else:
        replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
        if num_nodes > 1:
            replicas["Worker"] = {"replicas": num_nodes - 1, "restartPolicy": "OnFailure", "template": template}
        spec["pytorchReplicaSpecs"] = replicas
    return {"apiVersion": PYTORCH_JOB_API, "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": shape.namespace, "labels": labels}, "spec": spec}


def elastic_job_body(name: str, shape: PodShape, *, elastic: ElasticRange) -> dict[str, Any]:
    """A DLRover ElasticJob: `maxNodes` workers started with `dlrover-run --nnodes=MIN:MAX`; the job keeps
    training with at least MIN of them. DLRover's master (created by the controller) relaunches failed ones."""
    args = dlrover_run_args(elastic.min_nodes, elastic.max_nodes, shape.num_gpus, elastic.max_restarts,
                            shape.trainer_args, module=shape.module)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "gtp"}
    # DLRover's master relaunches pods itself and forces restartPolicy Never on the pods it creates; "Never"
    # here says so.
    template = pod_template(shape, command=["dlrover-run"], args=args, restart_policy="Never", labels=labels)
    gpus = shape.num_gpus * elastic.max_nodes
    return {
        "apiVersion": ELASTIC_JOB_API, "kind": "ElasticJob",
        "metadata": {"name": name, "namespace": shape.namespace, "labels": labels},
        "spec": {
            "distributionStrategy": "AllreduceStrategy",
            "optimizeMode": "single-job",
            # DLRover's master caps a job at 4 GPUs / 100 CPUs unless told otherwise (DefaultResourceLimits).
            "resourceLimits": {"gpu": str(gpus), "cpu": str(_cpu_cores(shape.cpu) * elastic.max_nodes),
                               "memory": f"{math.ceil(quantity_gib(shape.memory) * elastic.max_nodes)}Gi"},
            "replicaSpecs": {"worker": {"replicas": elastic.max_nodes, "restartPolicy": "Never",
                                        "template": template}},
        },
    }


def _cpu_cores(cpu: str) -> int:
    return math.ceil(float(cpu[:-1]) / 1000) if cpu.endswith("m") else math.ceil(float(cpu))


def job_pod_label(kind: str) -> str:
    """The label every pod of a job carries, by workload kind (NetworkPolicy selects the job's pods with it)."""
    return ELASTIC_JOB_LABEL if kind == "elasticjob" else PYTORCH_JOB_LABEL


def pod_templates_for_checkov(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each replica template of every PyTorchJob / ElasticJob / ScaledJob as a `PodTemplate` document: Checkov
    skips custom kinds, but scans PodTemplates with its pod policies."""
    documents = []
    for obj in objects:
        kind, metadata = obj.get("kind"), obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if kind == "PyTorchJob":
            replicas = spec.get("pytorchReplicaSpecs") or {}
            templates = {role: replica.get("template") for role, replica in replicas.items()}
        elif kind == "ElasticJob":
            templates = {role: replica.get("template") for role, replica in (spec.get("replicaSpecs") or {}).items()}
        elif kind == "ScaledJob":
            templates = {"job": (spec.get("jobTargetRef") or {}).get("template")}
        else:
            continue
        for role, template in sorted(templates.items()):
            if not isinstance(template, Mapping):
                continue
            documents.append({
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": f"{metadata.get('name')}-{str(role).lower()}",
                             "namespace": metadata.get("namespace"),
                             "annotations": {"gtp.dev/source": f"{kind}/{metadata.get('name')}"}},
                "template": template,
            })
    return documents


@dataclass
class TrainingJobArgs:
    kind: Literal["pytorchjob", "elasticjob"]
    """Which operator runs the job."""
    job_name: str
    shape: PodShape
    num_nodes: int = 1
    """PyTorchJob without elastic: Master + (num_nodes - 1) Workers."""
    elastic: ElasticRange | None = None
    """Required for elasticjob; makes a PyTorchJob elastic."""
    run_policy: RunPolicy = field(default_factory=lambda: RunPolicy(3, 86400, "None"))
    provider: k8s.Provider | None = None
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The job's operator and the GPU readiness gate: destroy removes the job before its controller, and the
    job is submitted only once GPUs are schedulable."""


class TrainingJob(pulumi.ComponentResource):
    job: k8s.apiextensions.CustomResource
    body: dict[str, Any]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:TrainingJob", name, None, opts)
        if args.kind == "elasticjob":
            if args.elastic is None:
                raise ValueError("an ElasticJob needs an ElasticRange (workload.elastic)")
            self.body = elastic_job_body(args.job_name, args.shape, elastic=args.elastic)
        else:
            self.body = pytorch_job_body(args.job_name, args.shape, num_nodes=args.num_nodes, elastic=args.elastic,
                                         run_policy=args.run_policy)
        self.job = k8s.apiextensions.CustomResource(
            f"{name}-{args.kind}",
            api_version=self.body["apiVersion"], kind=self.body["kind"], metadata=self.body["metadata"],
            spec=self.body["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on),
        )
        self.register_outputs({"name": args.job_name})
