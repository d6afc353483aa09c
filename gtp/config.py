"""Typed stack configuration: parsed once, validated as a whole, frozen.

Every stack (`stacks/Pulumi.<stack>.yaml`) is data in the `gtp:` namespace. `load()` reads it from the
Pulumi runtime and `parse_stack_config()` turns it into a frozen `StackConfig`. Invalid config raises one
`ConfigError` that lists *every* problem, each with the full key path, the bad value and what is allowed,
before any resource is registered. Unknown keys are errors too: a typo must never be silently ignored.

Keys are camelCase in YAML (`gpuNodeGroups.train.maxSize`) and snake_case in Python
(`config.gpu_node_groups["train"].max_size`). Every field below carries its default and allowed values in
its docstring; `python -m gtp.config_reference` renders them into the README's config reference.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import pulumi
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic.alias_generators import to_camel

from gtp import versions
from gtp.gpu_catalog import AMI_TYPE_ARCHITECTURE, DEFAULT_AMI_TYPE, GPU_INSTANCE_TYPES, Architecture, bottlerocket
from gtp.sharing import config_name

NAMESPACE = "gtp"
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
DIGEST_REFERENCE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
CLOUDWATCH_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                             2922, 3288, 3653)
MPS_MAX_CLIENTS = 48  # NVIDIA MPS limit per GPU on compute capability >= 7.5 (device-plugin 0.20 docs)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a stack's config: where it is and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(pulumi.RunError):
    """Invalid stack config. A `RunError`, so `pulumi up` prints the message without a stack trace."""

    def __init__(self, stack: str, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"stack '{stack}' has {len(problems)} config problem(s):\n{lines}")


class _Section(BaseModel):
    # extra="allow" so that a typo'd key does not hide the other problems of the same object: unknown keys
    # are collected afterwards by `_unknown_keys` and reported as errors with their full path.
    model_config = ConfigDict(
        frozen=True, extra="allow", alias_generator=to_camel, use_attribute_docstrings=True, validate_default=True
    )


# ---------------------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------------------


class SystemNodeGroupConfig(_Section):
    """The small CPU node group that runs controllers and operators (never training)."""

    instance_types: tuple[str, ...] = ("m7i.xlarge",)
    """EC2 instance types of the system node group. Default `["m7i.xlarge"]`."""
    min_size: int = Field(2, ge=1)
    """Minimum nodes (>= 1; controllers must always have somewhere to run). Default 2."""
    desired_size: int | None = None
    """Desired nodes; defaults to `minSize`."""
    max_size: int = Field(3, ge=1)
    """Maximum nodes. Default 3."""
    disk_size_gib: int = Field(50, ge=20, le=16384)
    """Root volume size in GiB (20..16384). Default 50."""

    @property
    def desired(self) -> int:
        return self.min_size if self.desired_size is None else self.desired_size


class ClusterConfig(_Section):
    """Which Kubernetes cluster the stack runs on and how its API is reached."""

    mode: Literal["eks", "existing"] = "eks"
    """`eks`: provision an EKS cluster. `existing`: adopt a cluster reached by the `kubeconfig` secret (or
    `context`); nothing is provisioned in AWS for it. Default `eks`."""
    endpoint_public_access: bool = False
    """EKS only. Expose the API server endpoint publicly, restricted to `publicAccessCidrs`. Default false
    (private endpoint, reachable from inside the VPC)."""
    public_access_cidrs: tuple[str, ...] = ()
    """EKS only. CIDRs allowed to reach a public endpoint. Required when `endpointPublicAccess` is true;
    `0.0.0.0/0` and `::/0` are rejected."""
    admin_role_arns: tuple[str, ...] = ()
    """IAM role ARNs granted cluster-admin through EKS access entries. Default none."""
    deployer_role_arn: str | None = None
    """IAM role ARN that runs `pulumi up`; it gets a cluster-admin access entry, and every in-cluster
    resource depends on that entry. Default: the caller's role, resolved at deploy time."""
    log_retention_days: int = 90
    """Retention of the `/aws/eks/<name>/cluster` log group, a CloudWatch-allowed value. Default 90."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """EKS only. The CPU node group for controllers and operators."""
    context: str | None = None
    """Existing mode only. A kubeconfig context name to use from the deployer's own kubeconfig, instead of
    the `kubeconfig` secret."""
    gpu_node_taint: bool = True
    """Taint GPU nodes `nvidia.com/gpu=true:NoSchedule` so only pods that ask for GPUs land there. Default
    true."""


class NetworkConfig(_Section):
    """The VPC for an EKS cluster: created, or adopted by id."""

    vpc_cidr: str = "10.0.0.0/16"
    """CIDR of a created VPC. Default `10.0.0.0/16`."""
    num_availability_zones: int = Field(2, ge=2, le=6)
    """Availability zones to spread subnets over (2..6; EKS needs at least two). Default 2."""
    nat_gateways: Literal["single", "one-per-az"] = "single"
    """`single`: one NAT gateway for all private subnets (cheap, one AZ of failure). `one-per-az`: one per
    availability zone. Default `single`."""
    existing_vpc_id: str | None = None
    """Adopt this VPC instead of creating one (then `existingPrivateSubnetIds` is required)."""
    existing_private_subnet_ids: tuple[str, ...] = ()
    """Private subnets of the adopted VPC, in at least two availability zones."""
    existing_public_subnet_ids: tuple[str, ...] = ()
    """Public subnets of the adopted VPC (only for load balancers). Optional."""


class TaintConfig(_Section):
    """A node taint; the map key is the taint key."""

    value: str = "true"
    """Taint value. Default `true`."""
    effect: Literal["NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"] = "NO_SCHEDULE"
    """EKS taint effect. Default `NO_SCHEDULE`."""


class SharingConfig(_Section):
    """How one physical GPU is shared between pods."""

    mode: Literal["none", "mps", "time-slicing"] = "none"
    """`none`: whole GPUs only. `mps`: NVIDIA MPS with `replicas` clients per GPU (memory and compute
    partitioned). `time-slicing`: `replicas` pods take turns on a GPU (no isolation). Default `none`."""
    replicas: int = Field(1, ge=1)
    """Slices per GPU: 1 for `none`, 2..48 for `mps`, >= 2 for `time-slicing`. Default 1."""


class GpuNodeGroupConfig(_Section):
    """One GPU node group. Node groups are a map keyed by name, so reordering YAML never replaces one."""

    instance_types: tuple[str, ...] = ()
    """EKS mode: GPU instance types (all of one architecture), from the supported table in
    `gtp/gpu_catalog.py`. Required in EKS mode."""
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = "ON_DEMAND"
    """Purchase option. `CAPACITY_BLOCK` needs `capacityReservationId`. Default `ON_DEMAND`."""
    min_size: int = Field(0, ge=0)
    """Minimum nodes; 0 lets the group scale to zero between jobs. Default 0."""
    desired_size: int | None = None
    """Initial desired nodes (minSize <= desiredSize <= maxSize); defaults to `minSize`."""
    max_size: int = Field(1, ge=1)
    """Maximum nodes (>= 1, >= minSize). Default 1."""
    disk_size_gib: int = Field(200, ge=50, le=16384)
    """Encrypted gp3 root volume size in GiB (50..16384; images with CUDA are large). Default 200."""
    ami_type: Literal["AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA",
                      "BOTTLEROCKET_ARM_64_NVIDIA"] | None = None
    """EKS NVIDIA AMI type; must match the instance architecture. Default: the AL2023 NVIDIA AMI of the
    instance types' architecture. Bottlerocket runs its own device plugin (ours is then not installed)."""
    labels: dict[str, str] = {}
    """Extra Kubernetes node labels. Default none (the platform adds `gtp.dev/node-group: <name>`)."""
    taints: dict[str, TaintConfig] | None = None
    """Node taints keyed by taint key. Default `{nvidia.com/gpu: {value: "true", effect: NO_SCHEDULE}}`
    (when `cluster.gpuNodeTaint` is true)."""
    efa: bool | None = None
    """Attach EFA interfaces (the instance type's full count). Default: on when every instance type
    supports EFA. `true` on a type without EFA is an error."""
    placement_group: bool | None = None
    """Launch into a cluster placement group. Default: on for EFA groups without a capacity reservation;
    never with a reservation or capacity block (it can shrink the usable reservation)."""
    capacity_reservation_id: str | None = None
    """Target an On-Demand Capacity Reservation or Capacity Block by id (`cr-...`). Not with SPOT."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """MIG strategy of the device plugin for this group. MIG and MPS exclude each other. Default `none`."""
    sharing: SharingConfig | None = None
    """Per-group GPU sharing; overrides `gpu.sharing` for this group (rendered as its own device-plugin
    config selected by the `nvidia.com/device-plugin.config` node label)."""
    gpus_per_node: int | None = Field(None, ge=1)
    """Existing mode only (required there): GPUs per node, since it can't be discovered offline."""
    gpu_model: str | None = None
    """Existing mode only (required there): GPU model name, e.g. `Orin` or `L4`."""
    architecture: Literal["amd64", "arm64"] | None = None
    """Existing mode only (required there): node CPU architecture."""
    node_selector: dict[str, str] = {}
    """Existing mode only: labels that select this group's nodes (default `gtp.dev/node-group: <name>`)."""


class MetricsConfig(_Section):
    """GPU metrics: DCGM exporter scraped by Prometheus, optionally Grafana."""

    dcgm_exporter: bool = True
    """Install dcgm-exporter on GPU nodes. Default true."""
    prometheus: bool = True
    """Install Prometheus scraping dcgm-exporter (needed by KEDA triggers). Default true."""
    grafana: bool = False
    """Install Grafana with the GPU dashboard provisioned. Default false."""
    retention: str = "15d"
    """Prometheus retention, e.g. `15d`. Default `15d`."""


class GpuConfig(_Section):
    """Making GPUs schedulable and observable."""

    sharing: SharingConfig = SharingConfig()
    """Default GPU sharing for every node group (see `SharingConfig`)."""
    node_feature_discovery: Literal["install", "existing"] = "install"
    """`install`: deploy NFD with the device plugin chart. `existing`: the cluster already runs NFD."""
    metrics: MetricsConfig = MetricsConfig()
    """GPU metrics stack."""
    readiness_timeout_seconds: int = Field(900, ge=60, le=7200)
    """How long the readiness gate waits for the expected GPU capacity (60..7200). Default 900."""


class ImageConfig(_Section):
    """The training image: where it lives and whether this stack builds it."""

    build: bool = True
    """Build `images/trainer` and push it. `false` reuses `reference` (benchmark stacks). Default true."""
    platform: Literal["linux/amd64", "linux/arm64"] = "linux/amd64"
    """The one architecture built; must match the GPU nodes. Default `linux/amd64`."""
    registry: Literal["ecr", "existing"] = "ecr"
    """`ecr`: an ECR repository created by the stack. `existing`: `existingRegistry` with the
    `registryPassword` secret. Default `ecr`."""
    repository_name: str | None = None
    """ECR repository name. Default `<namePrefix>-<stack>-trainer`, or `<namePrefix>-trainer` when
    `sharedRepository` is true."""
    shared_repository: bool = False
    """Create the cross-stack repository `<namePrefix>-trainer` instead of a per-stack one. Exactly one stack
    (e.g. prod) sets this; the others reuse its images by digest (`build: false`, `reference`). Default false."""
    existing_registry: str | None = None
    """Existing mode: registry/repository address, e.g. `registry.example.internal:5000/trainer`."""
    existing_registry_username: str | None = None
    """Existing mode: username for the registry (password is the `registryPassword` secret)."""
    reference: str | None = None
    """An existing image *by digest* (`repo@sha256:<64 hex>`) to run instead of building."""
    keep_tagged_images: int = Field(30, ge=1, le=1000)
    """ECR lifecycle: keep this many newest tagged images. Default 30."""
    expire_untagged_days: int = Field(7, ge=1, le=365)
    """ECR lifecycle: expire untagged images after this many days. Default 7."""


class ElasticConfig(_Section):
    """Elastic training: the job keeps running between `minNodes` and `maxNodes` pods."""

    min_nodes: int = Field(1, ge=1)
    """Fewest pods the job runs with. Default 1."""
    max_nodes: int = Field(2, ge=1)
    """Most pods the job grows to. Default 2."""
    max_restarts: int = Field(3, ge=0, le=100)
    """torchrun / dlrover-run restarts before the job fails. Default 3."""


class WorkloadConfig(_Section):
    """The training job this stack runs."""

    kind: Literal["pytorchjob", "elasticjob", "none"] = "pytorchjob"
    """`pytorchjob`: Kubeflow PyTorchJob (training-operator v1). `elasticjob`: DLRover ElasticJob. `none`:
    platform only. Default `pytorchjob`."""
    name: str = "train"
    """Job name (a DNS label). Default `train`."""
    node_group: str | None = None
    """Key of the GPU node group the job runs on. Required unless `kind` is `none`."""
    num_nodes: int = Field(1, ge=1)
    """Pods of a non-elastic job (Master + Workers). Default 1."""
    elastic: ElasticConfig | None = None
    """Make the job elastic (PyTorchJob `elasticPolicy`; always set for `elasticjob`)."""
    gpus_per_node: int | None = Field(None, ge=1)
    """GPUs (or GPU slices) per pod = processes per pod. Default: all GPUs of a node of the group."""
    gpu_resource: Literal["whole", "shared"] = "whole"
    """`whole`: request `nvidia.com/gpu`. `shared`: request a slice, `nvidia.com/gpu.shared` (single-rank
    jobs only: NCCL refuses two ranks on one physical GPU, even under MPS). Default `whole`."""
    entrypoint: Literal["train", "bench"] = "train"
    """`train`: `python -m trainer.train`. `bench`: `python -m trainer.bench` on every GPU of the job — all-reduce
    bus bandwidth over `benchSizes` and training throughput/MFU — writing one JSON result per run to the
    artifacts bucket under `<stack>/bench/` (EKS) or to the checkpoint directory. Default `train`."""
    bench_sizes: str = "1M,16M,128M,1G"
    """Bench only: all-reduce message sizes, comma-separated (`K`/`M`/`G` suffixes). Default `1M,16M,128M,1G`."""
    model: Literal["cnn", "gpt"] = "gpt"
    """Trainer model. Default `gpt`."""
    max_steps: int = Field(1000, ge=1)
    """Training steps. Default 1000."""
    batch_size: int = Field(32, ge=1)
    """Per-rank batch size. Default 32."""
    checkpoint_every: int = Field(100, ge=1)
    """Checkpoint every N steps (and on SIGTERM). Default 100."""
    extra_args: tuple[str, ...] = ()
    """Extra `trainer.train` flags, e.g. `["--fsdp"]`."""
    cpu: str = "8"
    """CPU request = limit per pod (Guaranteed QoS). Default `8`."""
    memory: str = "64Gi"
    """Memory request = limit per pod. Default `64Gi`."""
    shm_size: str = "16Gi"
    """Size limit of the memory-backed `/dev/shm`. Default `16Gi`."""
    backoff_limit: int = Field(3, ge=0, le=100)
    """Job-level retries. Default 3."""
    ttl_seconds_after_finished: int = Field(86400, ge=0)
    """Delete the finished job after this many seconds. Default 86400."""
    clean_pod_policy: Literal["None", "Running", "All"] = "None"
    """Which pods to delete when the job finishes. Default `None` (keep logs)."""
    termination_grace_period_seconds: int = Field(300, ge=30, le=3600)
    """Time between SIGTERM and SIGKILL: enough to write a checkpoint. Default 300."""
    ephemeral_storage: str = "20Gi"
    """Node-local scratch per pod (request = limit, Guaranteed QoS); bounds the `/tmp` emptyDir and the
    container's writable layer. Default `20Gi`."""


class AutoscalingConfig(_Section):
    """KEDA autoscaling of the training workload."""

    mode: Literal["none", "scaledobject", "scaledjob"] = "none"
    """`scaledobject`: scale an elastic PyTorchJob's workers on GPU utilization. `scaledjob`: start one
    training Job per queue message (scale to zero when idle). Default `none`."""
    min_replicas: int = Field(1, ge=0)
    """Fewest workers (scaledobject: >= 1, the operator rejects 0 workers). Default 1."""
    max_replicas: int = Field(4, ge=1)
    """Most workers / concurrent jobs. Default 4."""
    gpu_utilization_threshold: int = Field(80, ge=1, le=100)
    """Target average `DCGM_FI_DEV_GPU_UTIL` percent (scaledobject). Default 80."""
    polling_interval_seconds: int = Field(30, ge=5)
    """KEDA polling interval. Default 30 (KEDA's default)."""
    cooldown_period_seconds: int = Field(300, ge=0)
    """KEDA cooldown before scaling down. Default 300 (KEDA's default)."""


class StorageConfig(_Section):
    """Shared ReadWriteMany storage for data and checkpoints."""

    kind: Literal["none", "efs", "fsx-lustre", "existing"] = "none"
    """`efs`: Amazon EFS. `fsx-lustre`: FSx for Lustre. `existing`: a StorageClass already in the cluster.
    `none`: checkpoints go to an emptyDir (lost with the pod; dev only). Default `none`."""
    existing_storage_class: str | None = None
    """StorageClass name for `existing`."""
    size_gib: int = Field(1200, ge=1)
    """PVC size; FSx for Lustre needs 1200 or a multiple of 2400. Default 1200."""
    fsx_deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "PERSISTENT_2"
    """FSx for Lustre deployment type. Default `PERSISTENT_2`."""
    fsx_throughput_per_unit: Literal[125, 250, 500, 1000] = 125
    """FSx PERSISTENT_2 throughput MB/s per TiB. Default 125."""
    mount_path: str = "/mnt/shared"
    """Where the volume is mounted in every worker (checkpoints under `<mountPath>/checkpoints/<job>`, data
    under `<mountPath>/data`). Default `/mnt/shared`."""


class LifecycleConfig(_Section):
    """How long the stack lives and how hard it is to destroy."""

    ephemeral: bool = False
    """A short-lived stack: nothing protected, registry and buckets force-deleted, TTL required. Default
    false."""
    protect: bool = False
    """Protect the cluster, KMS keys, storage and registry from deletion (production). Default false."""
    ttl_hours: float | None = Field(None, gt=0, le=720)
    """Ephemeral only (required there): hours after `createdAt` when the reaper destroys the stack."""
    created_at: datetime | None = None
    """Ephemeral only (required there): creation time, ISO-8601 UTC, e.g. `2026-12-02T13:00:00Z`."""
    kms_deletion_window_days: int | None = Field(None, ge=7, le=30)
    """KMS key deletion window in days (7..30). Default 7 on ephemeral stacks (the shortest AWS allows),
    30 otherwise."""
    max_gpu_node_hours: float | None = Field(None, gt=0)
    """Cost cap: sum of GPU groups' `maxSize` x `ttlHours` may not exceed this. Ephemeral only."""

    @property
    def kms_deletion_window(self) -> int:
        if self.kms_deletion_window_days is not None:
            return self.kms_deletion_window_days
        return 7 if self.ephemeral else 30

    @property
    def expires_at(self) -> datetime | None:
        if self.created_at is None or self.ttl_hours is None:
            return None
        return self.created_at + timedelta(hours=self.ttl_hours)


class StackConfig(BaseModel):
    """The whole, validated configuration of one stack."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    project: str
    stack: str
    name_prefix: str
    region: str
    kubernetes_version: str
    cluster: ClusterConfig
    network: NetworkConfig
    gpu_node_groups: dict[str, GpuNodeGroupConfig]
    gpu: GpuConfig
    image: ImageConfig
    workload: WorkloadConfig
    autoscaling: AutoscalingConfig
    storage: StorageConfig
    lifecycle: LifecycleConfig
    tags: dict[str, str]
    kubeconfig: SecretStr | None = None
    registry_password: SecretStr | None = None

    # --- derived facts (computed, never stored) ---------------------------------------------------------
    @property
    def cluster_name(self) -> str:
        return f"{self.name_prefix}-{self.stack}"

    @property
    def uses_aws(self) -> bool:
        """Whether the stack creates anything in AWS (an EKS cluster, or an ECR repository)."""
        return self.cluster.mode == "eks" or (self.image.registry == "ecr" and self.image.build)

    @property
    def repository_name(self) -> str:
        if self.image.repository_name:
            return self.image.repository_name
        if self.image.shared_repository:
            return f"{self.name_prefix}-trainer"
        return f"{self.name_prefix}-{self.stack}-trainer"

    def sharing_for(self, group: str) -> SharingConfig:
        return self.gpu_node_groups[group].sharing or self.gpu.sharing

    def node_facts(self, group: str) -> NodeFacts:
        return node_facts(self.cluster.mode, self.gpu_node_groups[group])

    def resource_tags(self) -> dict[str, str]:
        """Tags every taggable AWS resource carries (the provider's default tags)."""
        tags = {**self.tags, "gtp:project": self.project, "gtp:stack": self.stack,
                "gtp:lifecycle": "ephemeral" if self.lifecycle.ephemeral else "persistent"}
        if self.lifecycle.ephemeral and self.lifecycle.expires_at is not None:
            tags["gtp:ttl-hours"] = f"{self.lifecycle.ttl_hours:g}"
            tags["gtp:expires-at"] = self.lifecycle.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return dict(sorted(tags.items()))


@dataclass(frozen=True)
class NodeFacts:
    """What a node of a GPU group offers, from the instance table (EKS) or from config (existing)."""

    num_gpus: int
    gpu_model: str
    architecture: Architecture
    num_efa_interfaces: int
    """EFA devices per node that pods can request (0 when EFA is off)."""


def node_facts(mode: str, group: GpuNodeGroupConfig) -> NodeFacts:
    if mode == "existing":
        return NodeFacts(group.gpus_per_node or 0, group.gpu_model or "unknown", group.architecture or "amd64", 0)
    first = GPU_INSTANCE_TYPES[group.instance_types[0]]
    # A group may mix types; it is only as wide as its smallest member.
    types = [GPU_INSTANCE_TYPES[t] for t in group.instance_types]
    num_efa = min(t.num_efa_interfaces for t in types) if efa_enabled(group) else 0
    return NodeFacts(min(t.num_gpus for t in types), first.gpu_model, first.architecture, num_efa)


def efa_enabled(group: GpuNodeGroupConfig) -> bool:
    if group.efa is not None:
        return group.efa
    types = [GPU_INSTANCE_TYPES.get(t) for t in group.instance_types]
    return bool(types) and all(t is not None and t.num_efa_interfaces > 0 for t in types)


def placement_group_enabled(group: GpuNodeGroupConfig) -> bool:
    if group.placement_group is not None:
        return group.placement_group
    return efa_enabled(group) and group.capacity_reservation_id is None


def ami_type(group: GpuNodeGroupConfig) -> str:
    if group.ami_type is not None:
        return group.ami_type
    return DEFAULT_AMI_TYPE[GPU_INSTANCE_TYPES[group.instance_types[0]].architecture]


# ---------------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------------

SCALAR_DEFAULTS: dict[str, str] = {"namePrefix": "gtp", "region": "us-west-2", "kubernetesVersion": "1.34"}
"""Scalar keys and their defaults; Pulumi.yaml's config schema declares the same (a test keeps them equal)."""

SECTIONS: dict[str, type[_Section]] = {
    "cluster": ClusterConfig,
    "network": NetworkConfig,
    "gpu": GpuConfig,
    "image": ImageConfig,
    "workload": WorkloadConfig,
    "autoscaling": AutoscalingConfig,
    "storage": StorageConfig,
    "lifecycle": LifecycleConfig,
}
MAP_SECTIONS: dict[str, type[_Section]] = {"gpuNodeGroups": GpuNodeGroupConfig}
STRING_MAP_SECTIONS = ("tags",)
SECRET_KEYS = ("kubeconfig", "registryPassword")
KNOWN_KEYS = (*SCALAR_DEFAULTS, *SECTIONS, *MAP_SECTIONS, *STRING_MAP_SECTIONS, *SECRET_KEYS)


def parse_stack_config(
    raw: Mapping[str, Any], *, project: str, stack: str, secret_keys: Iterable[str] = ()
) -> StackConfig:
    """Parse the `gtp:` namespace of a stack (keys without the namespace) into a `StackConfig`.

    Values may be decoded objects or JSON strings (the Pulumi runtime hands structured config over as
    JSON). Raises `ConfigError` listing every problem.
    """
    problems: list[Problem] = []
    secret_keys = set(secret_keys)
    for key in raw:
        if key not in KNOWN_KEYS:
            problems.append(Problem(key, f"unknown key{_did_you_mean(key, KNOWN_KEYS)}; allowed: "
                                         f"{', '.join(sorted(KNOWN_KEYS))}"))

    scalars = {key: str(raw.get(key, default)) for key, default in SCALAR_DEFAULTS.items()}
    parsed: dict[str, Any] = {}
    for key, model in SECTIONS.items():
        value = _decode(raw.get(key, {}), key, problems)
        if value is not None:
            parsed[key] = _validate(model, value, key, problems)
    for key, model in MAP_SECTIONS.items():
        value = _decode(raw.get(key, {}), key, problems)
        if isinstance(value, dict):
            parsed[key] = {name: _validate(model, entry, f"{key}.{name}", problems) for name, entry in value.items()}
        elif value is not None:
            problems.append(Problem(key, f"{value!r} is not a map of name to object"))
    for key in STRING_MAP_SECTIONS:
        value = _decode(raw.get(key, {}), key, problems)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            parsed[key] = dict(value)
        elif value is not None:
            problems.append(Problem(key, f"{value!r} is not a map of string to string"))
    secrets: dict[str, SecretStr | None] = {}
    for key in SECRET_KEYS:
        value = raw.get(key)
        if value is not None and key not in secret_keys:
            problems.append(Problem(key, f"must be a Pulumi secret, not plain config: run "
                                         f"`pulumi config set --secret {key} ...`"))
        secrets[key] = SecretStr(str(value)) if value is not None else None

    for key, value in parsed.items():
        if isinstance(value, dict) and key in MAP_SECTIONS:
            for name, entry in value.items():
                if entry is not None:
                    problems.extend(_unknown_keys(entry, f"{key}.{name}"))
        elif isinstance(value, BaseModel):
            problems.extend(_unknown_keys(value, key))

    # Sections that failed to parse are replaced by their defaults so the other sections' rules still run;
    # a rule runs only when every section it reads parsed, so a default never causes a spurious problem.
    failed = {key for key, value in parsed.items() if value is None}
    groups = parsed.get("gpuNodeGroups") or {}
    if any(entry is None for entry in groups.values()):
        failed.add("gpuNodeGroups")
    failed.update(key for key in (*SECTIONS, *MAP_SECTIONS, *STRING_MAP_SECTIONS) if key not in parsed)
    defaults: dict[str, Any] = {key: model() for key, model in SECTIONS.items()}
    sections = {**defaults, **{key: value for key, value in parsed.items() if value is not None}}
    config = StackConfig(
        project=project, stack=stack, name_prefix=scalars["namePrefix"], region=scalars["region"],
        kubernetes_version=scalars["kubernetesVersion"], cluster=sections["cluster"], network=sections["network"],
        gpu_node_groups={name: entry for name, entry in groups.items() if entry is not None}, gpu=sections["gpu"],
        image=sections["image"], workload=sections["workload"], autoscaling=sections["autoscaling"],
        storage=sections["storage"], lifecycle=sections["lifecycle"], tags=sections.get("tags") or {},
        kubeconfig=secrets["kubeconfig"], registry_password=secrets["registryPassword"],
    )
    problems.extend(check_rules(config, failed=failed))
    if problems:
        raise ConfigError(stack, problems)
    return config


def load() -> StackConfig:
    """Read the `gtp:` namespace from the Pulumi runtime (real engine or mocks) and parse it once."""
    prefix = NAMESPACE + ":"
    raw: dict[str, Any] = {}
    secret_keys = []
    # The SDK has no public "list all keys" call, and unknown keys must be reported, so read both places
    # the runtime keeps config: the values set in-process (mocks) and PULUMI_CONFIG (the engine).
    from pulumi.runtime import config as runtime_config

    all_keys = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    for full_key in sorted(all_keys):
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        raw[key] = runtime_config.get_config(full_key)
        if runtime_config.is_config_secret(full_key) or full_key in runtime_config.get_config_secret_keys_env():
            secret_keys.append(key)
    return parse_stack_config(raw, project=pulumi.get_project(), stack=pulumi.get_stack(), secret_keys=secret_keys)


def _decode(value: Any, key: str, problems: list[Problem]) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            problems.append(Problem(key, f"is not valid JSON/YAML structured config ({error.msg})"))
            return None
    return value


def _validate(model: type[_Section], value: Any, path: str, problems: list[Problem]) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as error:
        for detail in error.errors():
            problems.append(_problem_from_pydantic(path, detail))
        return None


def _problem_from_pydantic(path: str, detail: Mapping[str, Any]) -> Problem:
    loc = path
    for part in detail["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else f".{part}"
    if detail["type"] == "missing":
        return Problem(loc, "required key is missing")
    message = detail["msg"]
    message = message[0].lower() + message[1:]
    return Problem(loc, f"{detail['input']!r} is not allowed: {message}")


def _unknown_keys(model: BaseModel, path: str) -> Iterator[Problem]:
    allowed = [field.alias or name for name, field in type(model).model_fields.items()]
    for key in (model.model_extra or {}):
        yield Problem(f"{path}.{key}", f"unknown key{_did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        child_path = f"{path}.{field.alias or name}"
        if isinstance(value, BaseModel):
            yield from _unknown_keys(value, child_path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _unknown_keys(item, f"{child_path}.{key}")


def _did_you_mean(key: str, allowed: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


# ---------------------------------------------------------------------------------------------------------
# Rules that span fields or sections. Each yields Problems with full key paths.
# ---------------------------------------------------------------------------------------------------------


def check_rules(config: StackConfig, failed: Iterable[str] = ()) -> list[Problem]:
    """Run every rule whose sections all parsed (`failed` names the ones that didn't)."""
    failed = set(failed)
    problems: list[Problem] = []
    for rule, needs in _RULES:
        if not failed.intersection(needs):
            problems.extend(rule(config))
    return problems


def _check_scalars(config: StackConfig) -> Iterator[Problem]:
    if config.kubernetes_version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        yield Problem("kubernetesVersion", f"{config.kubernetes_version!r} is not supported; allowed: "
                                           f"{', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}")
    if not DNS_LABEL.match(config.cluster_name) or len(config.cluster_name) > 40:
        yield Problem("namePrefix", f"{config.name_prefix!r} makes cluster name {config.cluster_name!r}, which "
                                    "must be a lowercase DNS label of at most 40 characters")
    if not re.match(r"^[a-z]{2}(-gov)?-[a-z]+-\d$", config.region):
        yield Problem("region", f"{config.region!r} is not an AWS region name like 'us-west-2'")


def _check_cluster(config: StackConfig) -> Iterator[Problem]:
    cluster = config.cluster
    eks = cluster.mode == "eks"
    if eks:
        if cluster.endpoint_public_access and not cluster.public_access_cidrs:
            yield Problem("cluster.publicAccessCidrs", "is empty, but endpointPublicAccess is true: list the CIDRs "
                                                       "allowed to reach the API (never 0.0.0.0/0)")
        if cluster.public_access_cidrs and not cluster.endpoint_public_access:
            yield Problem("cluster.publicAccessCidrs", "is set, but endpointPublicAccess is false: remove it or "
                                                       "enable the public endpoint")
        for index, cidr in enumerate(cluster.public_access_cidrs):
            path = f"cluster.publicAccessCidrs[{index}]"
            try:
                network = ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                yield Problem(path, f"{cidr!r} is not a CIDR like '203.0.113.0/24'")
                continue
            if network.prefixlen == 0:
                yield Problem(path, f"{cidr!r} opens the API server to the whole internet; list specific CIDRs")
        if cluster.log_retention_days not in CLOUDWATCH_RETENTION_DAYS:
            yield Problem("cluster.logRetentionDays", f"{cluster.log_retention_days} is not a CloudWatch retention; "
                                                      f"allowed: {', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))}")
        sng = cluster.system_node_group
        yield from _check_sizes("cluster.systemNodeGroup", sng.min_size, sng.desired_size, sng.max_size)
        if cluster.context is not None:
            yield Problem("cluster.context", "is only used with mode 'existing'")
    else:
        if cluster.endpoint_public_access or cluster.public_access_cidrs:
            yield Problem("cluster.endpointPublicAccess", "only applies to mode 'eks'; an existing cluster's "
                                                          "endpoint is not managed here")
        if config.kubeconfig is None and cluster.context is None:
            yield Problem("kubeconfig", "mode 'existing' needs the cluster's kubeconfig: run `pulumi config set "
                                        "--secret kubeconfig \"$(cat kubeconfig.yaml)\"` (or set cluster.context)")
        if config.kubeconfig is not None and cluster.context is not None:
            yield Problem("cluster.context", "set either the kubeconfig secret or cluster.context, not both")
    arn = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
    for index, role in enumerate(cluster.admin_role_arns):
        if not arn.match(role):
            yield Problem(f"cluster.adminRoleArns[{index}]", f"{role!r} is not an IAM role ARN")
    if cluster.deployer_role_arn is not None and not arn.match(cluster.deployer_role_arn):
        yield Problem("cluster.deployerRoleArn", f"{cluster.deployer_role_arn!r} is not an IAM role ARN")


def _check_network(config: StackConfig) -> Iterator[Problem]:
    network = config.network
    try:
        vpc = ipaddress.ip_network(network.vpc_cidr, strict=True)
        if vpc.version != 4 or not 16 <= vpc.prefixlen <= 20:
            yield Problem("network.vpcCidr", f"{network.vpc_cidr!r} must be an IPv4 /16../20 (room for "
                                             "private and public subnets in every zone)")
    except ValueError:
        yield Problem("network.vpcCidr", f"{network.vpc_cidr!r} is not a CIDR like '10.0.0.0/16'")
    if config.cluster.mode == "existing":
        return
    if network.existing_vpc_id and len(network.existing_private_subnet_ids) < 2:
        yield Problem("network.existingPrivateSubnetIds", "an adopted VPC needs at least two private subnets "
                                                          "(in different availability zones)")
    if not network.existing_vpc_id and (network.existing_private_subnet_ids or network.existing_public_subnet_ids):
        yield Problem("network.existingVpcId", "subnet ids are given but no existingVpcId")


def _check_sizes(path: str, min_size: int, desired: int | None, max_size: int) -> Iterator[Problem]:
    if max_size < min_size:
        yield Problem(f"{path}.maxSize", f"{max_size} is less than minSize {min_size}")
    if desired is not None and not min_size <= desired <= max_size:
        yield Problem(f"{path}.desiredSize", f"{desired} is outside minSize..maxSize ({min_size}..{max_size})")


def _check_node_groups(config: StackConfig) -> Iterator[Problem]:
    eks = config.cluster.mode == "eks"
    for name, group in config.gpu_node_groups.items():
        path = f"gpuNodeGroups.{name}"
        if not DNS_LABEL.match(name):
            yield Problem(path, f"name {name!r} must be a lowercase DNS label")
        yield from _check_sizes(path, group.min_size, group.desired_size, group.max_size)
        if eks:
            yield from _check_eks_group(path, group)
        else:
            for key, value in (("gpusPerNode", group.gpus_per_node), ("gpuModel", group.gpu_model),
                               ("architecture", group.architecture)):
                if value is None:
                    yield Problem(f"{path}.{key}", "is required for an existing cluster (it can't be discovered "
                                                   "offline)")
            for key in ("instanceTypes", "amiType", "capacityReservationId"):
                if getattr(group, _snake(key)):
                    yield Problem(f"{path}.{key}", "only applies to EKS node groups, not an existing cluster")


def _check_eks_group(path: str, group: GpuNodeGroupConfig) -> Iterator[Problem]:
    if not group.instance_types:
        yield Problem(f"{path}.instanceTypes", "is required in EKS mode: list GPU instance types")
        return
    known = []
    for index, instance_type in enumerate(group.instance_types):
        facts = GPU_INSTANCE_TYPES.get(instance_type)
        if facts is None:
            yield Problem(f"{path}.instanceTypes[{index}]", f"{instance_type!r} is not a supported GPU instance "
                          f"type; allowed: {', '.join(GPU_INSTANCE_TYPES)}")
        else:
            known.append(facts)
    if not known:
        return
    architectures = {facts.architecture for facts in known}
    if len(architectures) > 1:
        yield Problem(f"{path}.instanceTypes", f"{list(group.instance_types)} mixes architectures "
                                               f"{sorted(architectures)}; one node group has one AMI")
    if group.ami_type is not None and AMI_TYPE_ARCHITECTURE[group.ami_type] not in architectures:
        yield Problem(f"{path}.amiType", f"{group.ami_type!r} is for {AMI_TYPE_ARCHITECTURE[group.ami_type]}, but "
                                         f"the instance types are {'/'.join(sorted(architectures))}")
    if group.efa and any(facts.num_efa_interfaces == 0 for facts in known):
        without = [facts.name for facts in known if facts.num_efa_interfaces == 0]
        yield Problem(f"{path}.efa", f"true, but {', '.join(without)} has no EFA support")
    if group.capacity_type == "SPOT" and group.capacity_reservation_id:
        yield Problem(f"{path}.capacityReservationId", "a SPOT group can't target a capacity reservation; use "
                                                       "ON_DEMAND or CAPACITY_BLOCK")
    if group.capacity_type == "CAPACITY_BLOCK" and not group.capacity_reservation_id:
        yield Problem(f"{path}.capacityReservationId", "is required for capacityType CAPACITY_BLOCK")
    if group.capacity_reservation_id and not re.match(r"^cr-[0-9a-f]{8,17}$", group.capacity_reservation_id):
        yield Problem(f"{path}.capacityReservationId", f"{group.capacity_reservation_id!r} is not a reservation "
                                                       "id like 'cr-0123456789abcdef0'")
    if group.placement_group and group.capacity_reservation_id:
        yield Problem(f"{path}.placementGroup", "true, but a capacity reservation is targeted: a placement group "
                                                "can shrink the usable reservation, so it is never forced there")


def _check_sharing(config: StackConfig) -> Iterator[Problem]:
    yield from _check_sharing_config("gpu.sharing", config.gpu.sharing)
    for name, group in config.gpu_node_groups.items():
        path = f"gpuNodeGroups.{name}"
        if group.sharing is not None:
            yield from _check_sharing_config(f"{path}.sharing", group.sharing)
        sharing = config.sharing_for(name)
        if sharing.mode == "mps" and group.mig_strategy != "none":
            yield Problem(f"{path}.migStrategy", f"{group.mig_strategy!r} with MPS sharing: MPS is not supported "
                                                 "on MIG devices; use migStrategy none or sharing time-slicing")
        if config.cluster.mode == "eks" and group.instance_types and group.instance_types[0] in GPU_INSTANCE_TYPES:
            if bottlerocket(ami_type(group)) and sharing.mode != "none":
                yield Problem(f"{path}.amiType", f"{ami_type(group)!r} runs its own device plugin, so sharing "
                              f"{sharing.mode!r} can't be configured here; use an AL2023 NVIDIA AMI or configure "
                              "sharing through Bottlerocket settings and set sharing none")
    # Groups with the same sharing use one named device-plugin config (gtp.sharing.config_name), and the
    # MIG strategy is part of that config, so they must agree on it.
    first_by_config: dict[str, str] = {}
    for name, group in config.gpu_node_groups.items():
        sharing = config.sharing_for(name)
        key = config_name(sharing.mode, sharing.replicas)
        first = first_by_config.setdefault(key, name)
        if config.gpu_node_groups[first].mig_strategy != group.mig_strategy:
            yield Problem(f"gpuNodeGroups.{name}.migStrategy",
                          f"{group.mig_strategy!r} differs from node group '{first}' "
                          f"({config.gpu_node_groups[first].mig_strategy!r}), which shares device-plugin config "
                          f"{key!r}; use the same migStrategy or a different sharing")


def _check_sharing_config(path: str, sharing: SharingConfig) -> Iterator[Problem]:
    if sharing.mode == "none" and sharing.replicas != 1:
        yield Problem(f"{path}.replicas", f"{sharing.replicas} needs a sharing mode; with mode 'none' use 1")
    if sharing.mode == "mps" and not 2 <= sharing.replicas <= MPS_MAX_CLIENTS:
        yield Problem(f"{path}.replicas", f"{sharing.replicas} is outside 2..{MPS_MAX_CLIENTS} (MPS clients per GPU)")
    if sharing.mode == "time-slicing" and sharing.replicas < 2:
        yield Problem(f"{path}.replicas", f"{sharing.replicas} must be at least 2 for time-slicing")


def _check_image(config: StackConfig) -> Iterator[Problem]:
    image = config.image
    if image.reference is not None and not DIGEST_REFERENCE.match(image.reference):
        yield Problem("image.reference", f"{image.reference!r} must reference an image by digest "
                                         "('repo@sha256:<64 hex>'), never a mutable tag")
    if not image.build and image.reference is None:
        yield Problem("image.reference", "is required when image.build is false")
    if image.build and image.reference is not None:
        yield Problem("image.build", "is true, but image.reference is set: build or reuse, not both")
    if image.registry == "existing":
        if not image.existing_registry:
            yield Problem("image.existingRegistry", "is required when image.registry is 'existing'")
        if image.build and config.registry_password is None:
            yield Problem("registryPassword", "is required to push to an existing registry: run `pulumi config "
                                              "set --secret registryPassword ...`")
    elif image.existing_registry or image.existing_registry_username:
        yield Problem("image.existingRegistry", "only applies when image.registry is 'existing'")
    architectures = {config.node_facts(name).architecture for name in _valid_groups(config)}
    wanted = image.platform.split("/")[1]
    if architectures and wanted not in architectures:
        yield Problem("image.platform", f"{image.platform!r} doesn't match the GPU nodes' architecture "
                                        f"{'/'.join(sorted(architectures))}")


def _valid_groups(config: StackConfig) -> list[str]:
    """Groups whose facts can be computed (invalid ones are already reported)."""
    names = []
    for name, group in config.gpu_node_groups.items():
        if config.cluster.mode == "existing":
            if group.gpus_per_node and group.architecture:
                names.append(name)
        elif group.instance_types and all(t in GPU_INSTANCE_TYPES for t in group.instance_types):
            names.append(name)
    return names


def num_ranks(config: StackConfig) -> int:
    """Most ranks the workload can run with (pods x processes per pod)."""
    workload = config.workload
    pods = workload.elastic.max_nodes if workload.elastic else workload.num_nodes
    if config.autoscaling.mode == "scaledobject":
        pods = max(pods, config.autoscaling.max_replicas)
    return pods * gpus_per_pod(config)


def gpus_per_pod(config: StackConfig) -> int:
    workload = config.workload
    if workload.gpus_per_node is not None:
        return workload.gpus_per_node
    assert workload.node_group is not None
    return config.node_facts(workload.node_group).num_gpus


def _check_workload(config: StackConfig) -> Iterator[Problem]:
    workload = config.workload
    if workload.kind == "none":
        return
    if not DNS_LABEL.match(workload.name):
        yield Problem("workload.name", f"{workload.name!r} must be a lowercase DNS label")
    if not config.gpu_node_groups:
        yield Problem("gpuNodeGroups", "is empty, but a workload is configured: add at least one GPU node group")
    if workload.node_group is None:
        yield Problem("workload.nodeGroup", f"is required; allowed: {', '.join(config.gpu_node_groups) or '(none)'}")
        return
    if workload.node_group not in config.gpu_node_groups:
        yield Problem("workload.nodeGroup", f"{workload.node_group!r} is not a GPU node group; allowed: "
                                            f"{', '.join(config.gpu_node_groups) or '(none)'}")
        return
    if workload.node_group not in _valid_groups(config):
        return
    facts = config.node_facts(workload.node_group)
    sharing = config.sharing_for(workload.node_group)
    if workload.gpus_per_node is not None and workload.gpu_resource == "whole" and workload.gpus_per_node > facts.num_gpus:
        yield Problem("workload.gpusPerNode", f"{workload.gpus_per_node} is more than the {facts.num_gpus} GPUs of a "
                                              f"'{workload.node_group}' node")
    if workload.elastic is not None and workload.elastic.max_nodes < workload.elastic.min_nodes:
        yield Problem("workload.elastic.maxNodes", f"{workload.elastic.max_nodes} is less than minNodes "
                                                   f"{workload.elastic.min_nodes}")
    if workload.kind == "elasticjob" and workload.elastic is None:
        yield Problem("workload.elastic", "is required for kind 'elasticjob' (minNodes/maxNodes)")
    if workload.gpu_resource == "shared":
        if sharing.mode == "none":
            yield Problem("workload.gpuResource", f"'shared' needs GPU sharing on node group "
                                                  f"'{workload.node_group}' (sharing mode is 'none')")
        ranks = num_ranks(config)
        if ranks > 1:
            yield Problem("workload.gpuResource", f"'shared' with {ranks} ranks: NCCL refuses two ranks on one "
                          "physical GPU, even under MPS, so a distributed job must request whole GPUs "
                          "(gpuResource: whole) or run a single rank")
    if workload.entrypoint == "bench" and (workload.kind != "pytorchjob" or config.autoscaling.mode != "none"):
        yield Problem("workload.entrypoint", "'bench' runs as one PyTorchJob on a fixed set of nodes: use kind "
                                             "pytorchjob with autoscaling.mode none")
    if not re.match(r"^\d+[KMG]?(,\d+[KMG]?)*$", workload.bench_sizes):
        yield Problem("workload.benchSizes", f"{workload.bench_sizes!r} is not a comma-separated size list like "
                                             "'1M,16M,128M'")
    max_pods = workload.elastic.max_nodes if workload.elastic else workload.num_nodes
    group = config.gpu_node_groups[workload.node_group]
    if workload.gpu_resource == "whole" and max_pods > group.max_size * max(1, facts.num_gpus // gpus_per_pod(config)):
        yield Problem("workload.numNodes" if workload.elastic is None else "workload.elastic.maxNodes",
                      f"{max_pods} pods don't fit on node group '{workload.node_group}' (maxSize {group.max_size})")


def _check_autoscaling(config: StackConfig) -> Iterator[Problem]:
    autoscaling = config.autoscaling
    workload = config.workload
    if autoscaling.max_replicas < autoscaling.min_replicas:
        yield Problem("autoscaling.maxReplicas", f"{autoscaling.max_replicas} is less than minReplicas "
                                                 f"{autoscaling.min_replicas}")
    if autoscaling.mode == "scaledobject":
        if workload.kind != "pytorchjob" or workload.elastic is None:
            yield Problem("autoscaling.mode", "'scaledobject' scales the Worker replicas of an elastic PyTorchJob: "
                                              "set workload.kind pytorchjob and workload.elastic")
        if autoscaling.min_replicas < 1:
            yield Problem("autoscaling.minReplicas", f"{autoscaling.min_replicas} would scale the PyTorchJob to 0 "
                          "workers, which the training-operator's webhook rejects; use >= 1 or mode scaledjob")
        elastic = workload.elastic
        if elastic is not None and not (elastic.min_nodes <= autoscaling.min_replicas
                                        and autoscaling.max_replicas <= elastic.max_nodes):
            yield Problem("autoscaling.maxReplicas", f"KEDA's range {autoscaling.min_replicas}.."
                          f"{autoscaling.max_replicas} must lie within workload.elastic {elastic.min_nodes}.."
                          f"{elastic.max_nodes}: the training-operator's elasticPolicy rejects Worker counts "
                          "outside it")
        if not config.gpu.metrics.prometheus or not config.gpu.metrics.dcgm_exporter:
            yield Problem("autoscaling.mode", "'scaledobject' triggers on DCGM metrics in Prometheus: enable "
                                              "gpu.metrics.dcgmExporter and gpu.metrics.prometheus")
    if autoscaling.mode == "scaledjob":
        if workload.kind != "pytorchjob":
            yield Problem("autoscaling.mode", "'scaledjob' starts training Jobs from the PyTorchJob's pod shape: "
                                              "set workload.kind pytorchjob")
        if config.cluster.mode != "eks":
            yield Problem("autoscaling.mode", "'scaledjob' reads an SQS queue with Pod Identity, which needs EKS")


def _check_storage(config: StackConfig) -> Iterator[Problem]:
    storage = config.storage
    if storage.kind == "existing" and not storage.existing_storage_class:
        yield Problem("storage.existingStorageClass", "is required when storage.kind is 'existing'")
    if storage.kind != "existing" and storage.existing_storage_class:
        yield Problem("storage.existingStorageClass", "only applies when storage.kind is 'existing'")
    if storage.kind in ("efs", "fsx-lustre") and config.cluster.mode != "eks":
        yield Problem("storage.kind", f"{storage.kind!r} is created in AWS next to an EKS cluster; an existing "
                                      "cluster uses kind 'existing' with its StorageClass")
    if storage.kind == "fsx-lustre" and not (storage.size_gib == 1200 or storage.size_gib % 2400 == 0):
        yield Problem("storage.sizeGib", f"{storage.size_gib} is not a valid FSx for Lustre size (1200 or a "
                                         "multiple of 2400)")
    if not storage.mount_path.startswith("/"):
        yield Problem("storage.mountPath", f"{storage.mount_path!r} must be an absolute path")


def _check_lifecycle(config: StackConfig) -> Iterator[Problem]:
    lifecycle = config.lifecycle
    if lifecycle.ephemeral:
        if lifecycle.protect:
            yield Problem("lifecycle.protect", "an ephemeral stack protects nothing, so it can always be destroyed")
        if lifecycle.ttl_hours is None:
            yield Problem("lifecycle.ttlHours", "is required for an ephemeral stack (the reaper destroys it after)")
        if lifecycle.created_at is None:
            yield Problem("lifecycle.createdAt", "is required for an ephemeral stack (ISO-8601 UTC)")
        elif lifecycle.created_at.utcoffset() != timezone.utc.utcoffset(None):
            yield Problem("lifecycle.createdAt", f"{lifecycle.created_at.isoformat()!r} must be UTC (end with 'Z')")
        if lifecycle.kms_deletion_window != 7:
            yield Problem("lifecycle.kmsDeletionWindowDays", f"{lifecycle.kms_deletion_window} on an ephemeral "
                                                             "stack; use 7 (the shortest AWS allows)")
        if lifecycle.max_gpu_node_hours is not None and lifecycle.ttl_hours is not None:
            node_hours = sum(group.max_size for group in config.gpu_node_groups.values()) * lifecycle.ttl_hours
            if node_hours > lifecycle.max_gpu_node_hours:
                yield Problem("lifecycle.maxGpuNodeHours", f"GPU groups may run {node_hours:g} node-hours (sum of "
                              f"maxSize x ttlHours), over the cap of {lifecycle.max_gpu_node_hours:g}")
    else:
        for key in ("ttlHours", "createdAt", "maxGpuNodeHours"):
            if getattr(lifecycle, _snake(key)) is not None:
                yield Problem(f"lifecycle.{key}", "only applies to ephemeral stacks (lifecycle.ephemeral: true)")


_RULES = (
    (_check_scalars, ()),
    (_check_cluster, ("cluster",)),
    (_check_network, ("network", "cluster")),
    (_check_node_groups, ("cluster",)),  # runs on the entries that parsed
    (_check_sharing, ("gpu", "cluster")),
    (_check_image, ("image", "cluster")),
    (_check_workload, ("workload", "gpuNodeGroups", "gpu", "cluster", "autoscaling")),
    (_check_autoscaling, ("autoscaling", "workload", "gpu", "cluster")),
    (_check_storage, ("storage", "cluster")),
    (_check_lifecycle, ("lifecycle", "gpuNodeGroups")),
)


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
