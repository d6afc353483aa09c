"""The stack config's schema: one frozen pydantic model per section, every field documented.

Keys are camelCase in YAML (`gpuNodeGroups.train.maxSize`) and snake_case in Python
(`config.gpu_node_groups["train"].max_size`). Every field below carries its default and allowed values in
its docstring; `python -m tools.config_reference` renders them into docs/config-reference.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr
from pydantic.alias_generators import to_camel

from catalog.gpu_instances import DEFAULT_AMI_TYPE, GPU_INSTANCE_TYPES, Architecture
from stack_config.targets import traits_for


class _Section(BaseModel):
    # extra="allow" so that a typo'd key does not hide the other problems of the same object: unknown keys
    # are collected afterwards by `_unknown_keys` and reported as errors with their full path.
    model_config = ConfigDict(
        frozen=True, extra="allow", alias_generator=to_camel, use_attribute_docstrings=True, validate_default=True
    )


def _number_as_text(value: Any) -> Any:
    # A YAML number (`cpu: 8`, `memory: 262144`) is a quantity to Kubernetes too (quantity.go UnmarshalJSON reads
    # the JSON number's text): keep it as the text Kubernetes parses, and let the quantity rules judge it.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


Quantity = Annotated[str, BeforeValidator(_number_as_text)]
"""A Kubernetes resource quantity, read by Kubernetes' grammar (conventions/quantities.py)."""


# ---------------------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------------------


class SystemNodeGroupConfig(_Section):
    """The small CPU node group that runs controllers and operators (never training)."""

    instance_types: tuple[str, ...] = ("m7i.xlarge",)
    """EC2 instance types of the system node group (`catalog/cpu_instances.py`). Default `["m7i.xlarge"]`."""
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


class SwarmConfig(_Section):
    """A Docker Swarm of GPU servers, managed through one of its managers over SSH (`cluster.mode: swarm`)."""

    manager_host: str | None = None
    """Required for Swarm: the Docker endpoint of a manager node, `ssh://<user>@<host>[:<port>]` (the user must be
    allowed to use the Docker socket there). Only SSH: the daemon's API is never exposed over TCP."""
    ssh_options: tuple[str, ...] = ("-o", "StrictHostKeyChecking=yes")
    """Extra `ssh` options for the connection. Default `["-o", "StrictHostKeyChecking=yes"]` (the manager's host
    key must already be in the deployer's known_hosts)."""
    gpu_resource_name: str = "NVIDIA-GPU"
    """Kind of the generic resource each GPU node's daemon advertises (`node-generic-resources` in
    `/etc/docker/daemon.json`, e.g. `["NVIDIA-GPU=GPU-<uuid>", ...]`). Default `NVIDIA-GPU`."""
    converge_timeout_seconds: int = Field(600, ge=30, le=7200)
    """How long `pulumi up` waits for every training task to run (image pulled, GPUs reserved) before it fails
    instead of leaving tasks pending (30..7200). Default 600."""
    encrypt_overlay: bool = True
    """Encrypt the job's overlay network (IPsec between the servers: Docker's `encrypted` network option). Default
    true. `false` only where IPsec cannot pass: the CPU test Swarm of `make swarm-test` (daemons in network
    namespaces of one machine, where an encrypted overlay carried no traffic between nodes)."""
    cpu_stand_in: bool = False
    """Test Swarms without GPUs only (`make swarm-test`), whose groups say so with `gpuModel: cpu-stand-in`. Default
    false: a site with GPUs never sets it (refused with any other `gpuModel`). When true,
    each task runs `gpusPerNode` CPU processes (`torchrun --nproc-per-node=<gpusPerNode>`, gloo), its node check
    expects no visible GPU, and it reserves no generic resource: the test's Debian Engine 20.10 rejects every task
    that does (moby/moby#44378, fixed in Engine 23.0, which docs/swarm.md asks of a site)."""


class DeployerConfig(_Section):
    """Where `pulumi up` runs (CI's deploy, preview and reap jobs; an engineer's shell) and so how it reaches the
    cluster's Kubernetes API. Every in-cluster resource is created over that API: a deployer that cannot reach it
    times out on each of them. Required for mode `eks`; the plan rejects a stack whose endpoint its deployer could
    not reach. The workflows run each stack's jobs on its `runnerLabels` (`python -m tools.deployer`)."""

    access: Literal["public-endpoint", "in-vpc", "transit-gateway"] | None = None
    """EKS only (required there). How the deployer reaches the API server. `public-endpoint`: from outside the VPC,
    over the public endpoint (`cluster.endpointPublicAccess: true`), from `cidrs`, each inside
    `cluster.publicAccessCidrs`. `in-vpc`: from a runner inside the cluster's VPC, which must therefore exist before
    the stack: an adopted VPC (`network.existingVpcId`). `transit-gateway`: from a runner in another VPC (or an
    on-premises network) attached to the Transit Gateway `transitGatewayId`; the stack attaches the VPC it creates
    to that gateway and routes `cidrs` through it. For `in-vpc` and `transit-gateway` the stack allows `cidrs` to
    the cluster security group on 443 (the private endpoint's network interfaces)."""
    runner_labels: tuple[str, ...] = ()
    """Required for EKS; optional elsewhere. The GitHub Actions `runs-on` labels of the jobs that deploy,
    preview and destroy this stack, e.g. `["self-hosted", "gtp-prod"]`. GitHub-hosted runners (`ubuntu-*`,
    `windows-*`, `macos-*` without `self-hosted`) run outside every VPC with no fixed address, so they can reach
    neither a private endpoint nor a CIDR-restricted public one: rejected for EKS."""
    cidrs: tuple[str, ...] = ()
    """EKS only (required there). IPv4 CIDRs the deployer's connections come from: its egress (NAT) addresses for
    `public-endpoint`; the runners' subnets for `in-vpc` and `transit-gateway`. Never `0.0.0.0/0`."""
    transit_gateway_id: str | None = None
    """`transit-gateway` only (required there): the gateway (`tgw-...`) the deployer's network is attached to. It must
    propagate attachments to its route table (the default), so the runners can route back to this VPC."""


class ClusterConfig(_Section):
    """Which cluster the stack runs on and how its API is reached."""

    mode: str = "eks"
    """The cluster target (`cluster_targets/`). `eks`: provision an EKS cluster. `existing`: adopt a Kubernetes
    cluster reached by the `kubeconfig` secret (or `context`); nothing is provisioned in AWS for it. `swarm`: a
    Docker Swarm of GPU servers reached over SSH (`cluster.swarm`). Default `eks`."""
    endpoint_public_access: bool = False
    """EKS only. Expose the API server endpoint publicly, restricted to `publicAccessCidrs`. Default false
    (private endpoint, reachable from inside the VPC)."""
    public_access_cidrs: tuple[str, ...] = ()
    """EKS only. CIDRs allowed to reach a public endpoint. Required when `endpointPublicAccess` is true;
    `0.0.0.0/0` and `::/0` are rejected."""
    admin_role_arns: tuple[str, ...] = ()
    """IAM role ARNs granted cluster-admin through EKS access entries: people, and every other role that runs
    `up` or destroys the stack (the nightly reaper's on bench stacks). Default none."""
    preview_role_arns: tuple[str, ...] = ()
    """EKS only. IAM role ARNs that only run `pulumi preview` (the PR preview's role, under which a pull request's
    code runs): a read-only access entry (AmazonEKSAdminViewPolicy: every object, Secrets included, no writes),
    never cluster-admin. The kubernetes provider's server-side dry-run is then forbidden and it previews
    client-side (pulumi-kubernetes v4.25.0 provider/pkg/provider/provider.go:1648-1652, 2151-2154; a Helm release
    is not installed in a preview at all, helm_release.go:879,1055); `up` and `destroy` refuse to run as one.
    Default none."""
    deployer_role_arn: str | None = None
    """EKS: required. IAM role ARN that runs `pulumi up` in CI; it gets a cluster-admin access entry, and every
    in-cluster resource depends on that entry. `preview`/`up` refuse to run as a role that is neither this one nor
    in `adminRoleArns` (it would have no access to the cluster's API)."""
    log_retention_days: int = 90
    """Retention of the `/aws/eks/<name>/cluster` log group, a CloudWatch-allowed value. Default 90."""
    addon_versions: dict[str, str] = {}
    """EKS only. Builds of EKS managed add-ons pinned for this stack, by add-on name (`eks-node-monitoring-agent:
    v1.4.0-eksbuild.2`), over the catalog's (catalog/versions.py). An add-on the catalog leaves to EKS
    (`EKS_DEFAULT_BUILD_ADDONS`) and this map does not pin gets EKS's default build for the cluster's Kubernetes
    version, read at `preview`/`up`; the stack output `eksAddonVersions` shows what each add-on got. Default none."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """EKS only. The CPU node group for controllers and operators."""
    context: str | None = None
    """Existing mode only. A kubeconfig context name to use from the deployer's own kubeconfig, instead of
    the `kubeconfig` secret."""
    gpu_node_taint: bool = True
    """Taint GPU nodes `nvidia.com/gpu=true:NoSchedule` so only pods that ask for GPUs land there. Default
    true."""
    swarm: SwarmConfig | None = None
    """Swarm mode only (required there): how to reach the swarm."""
    deployer: DeployerConfig | None = None
    """Where the deployer runs and how it reaches the API (`cluster.deployer` below). Required for mode `eks`."""
    node_default_runtime: Literal["runc", "nvidia"] | None = None
    """Existing mode only. containerd's default runtime handler on the adopted cluster's GPU nodes: `runc` (k3s:
    it adds the NVIDIA runtime it detects only as an extra handler named `nvidia`, k3s-io/k3s#8700) or `nvidia`
    (k3s agents started with `--default-runtime nvidia`, k3s-io/k3s#8936, or a toolkit set as the default).
    Default `runc` on an existing cluster; EKS's NVIDIA AMIs make the NVIDIA runtime the default, so it is not
    set there."""


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
    `catalog/gpu_instances.py`, each offered in `region` where `catalog/ec2_offerings.py` knows the Region (not
    judged for `CAPACITY_BLOCK`). Required in EKS mode."""
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = "ON_DEMAND"
    """Purchase option. `CAPACITY_BLOCK` needs `capacityReservationId` and an instance type EC2 Capacity Blocks
    for ML offer (`catalog/purchase_options.py`: p4d.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge,
    p6-b200.48xlarge). Default `ON_DEMAND`."""
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
    """Target an On-Demand Capacity Reservation or Capacity Block by id (`cr-...`). Not with SPOT. A reservation is
    of one instance type, so the group lists only that type in `instanceTypes`."""
    availability_zone: str | None = None
    """Zone of the group's nodes (a regular zone of `region`, e.g. `us-east-1b`). Required with
    `capacityReservationId` / `CAPACITY_BLOCK`: the reservation's own zone (`aws ec2
    describe-capacity-reservations --capacity-reservation-ids cr-... --query
    'CapacityReservations[0].AvailabilityZone'`); instances launched elsewhere don't use it. A stack-created VPC
    gets a subnet there even beyond `network.numAvailabilityZones`. Default: all private subnets, or the first
    one for EFA / placement-group groups (which must stay in one zone)."""
    update_strategy: Literal["default", "minimal"] | None = None
    """How EKS replaces nodes in a version or launch-template update. `default`: new nodes first (surge), then the
    old ones go; `minimal`: old nodes go first, no surge. Default: `minimal` for a group on a capacity reservation
    or Capacity Block (its reservation has no room for surge nodes, so a surge update can't progress), `default`
    otherwise. EKS API NodegroupUpdateConfig `updateStrategy` (DEFAULT, MINIMAL)."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """MIG strategy of the device plugin for this group. MIG and MPS exclude each other. Default `none`."""
    sharing: SharingConfig | None = None
    """Per-group GPU sharing; overrides `gpu.sharing` for this group (rendered as its own device-plugin
    config selected by the `nvidia.com/device-plugin.config` node label)."""
    gpus_per_node: int | None = Field(None, ge=1)
    """Existing and Swarm modes only (required there): GPUs per node, since it can't be discovered offline."""
    gpu_model: str | None = None
    """Existing and Swarm modes only (required there): GPU model name, e.g. `Orin` or `L4`."""
    architecture: Literal["amd64", "arm64"] | None = None
    """Existing and Swarm modes only (required there): node CPU architecture."""
    node_selector: dict[str, str] = {}
    """Existing and Swarm modes only: labels that select this group's nodes (default `gtp.dev/node-group: <name>`)."""

    @property
    def reserved(self) -> bool:
        """On reserved capacity (a capacity reservation or a Capacity Block): its zone is the reservation's, its
        nodes are billed by the reservation, and updates must not surge. Derived, never stored."""
        return self.capacity_reservation_id is not None or self.capacity_type == "CAPACITY_BLOCK"


class MetricsConfig(_Section):
    """GPU metrics: DCGM exporter scraped by Prometheus, optionally Grafana."""

    dcgm_exporter: bool | None = None
    """Install dcgm-exporter on GPU nodes. Default true, except on stacks with Jetson GPU groups (`gpuModel` Orin,
    Xavier, Thor), where it is off and may not be turned on: DCGM does not support Jetson (NVIDIA's supported
    platforms list datacenter and GeForce/Quadro GPUs only; catalog/gpu_instances.py `DCGM_UNSUPPORTED_MODELS`),
    so the exporter would crash-loop on every Jetson node."""
    prometheus: bool = True
    """Install Prometheus scraping dcgm-exporter (needed by KEDA triggers). Default true."""
    grafana: bool = False
    """Install Grafana with the GPU dashboard provisioned. Default false."""
    retention: str = "15d"
    """Prometheus retention (`--storage.tsdb.retention.time`), a Prometheus duration: whole numbers with units
    `y w d h m s ms`, largest first, e.g. `15d` or `1w3d`; more than zero (Prometheus replaces 0). Default `15d`."""


class GpuConfig(_Section):
    """Making GPUs schedulable and observable."""

    sharing: SharingConfig = SharingConfig()
    """Default GPU sharing for every node group (see `SharingConfig`)."""
    node_feature_discovery: Literal["install", "existing"] = "install"
    """`install`: deploy NFD with the device plugin chart. `existing`: the cluster already runs NFD."""
    metrics: MetricsConfig = MetricsConfig()
    """GPU metrics stack."""
    readiness_timeout_seconds: int = Field(900, ge=60, le=7200)
    """How long the readiness gate waits for the expected GPU capacity (60..7200). Default 900. Without Kueue it is
    also the stack's start-up bound (a multi-node PyTorchJob's rendezvous timeout): on EKS then at least a GPU
    node's boot plus the training image's pull (`catalog/startup_times.py`)."""
    runtime_class_name: str | None = None
    """The RuntimeClass the NVIDIA device plugin, GFD, the MPS control daemon and every GPU pod run under, so
    the NVIDIA container runtime injects the driver libraries and devices. Default: `nvidia` when the GPU nodes'
    default runtime is `runc` (`cluster.nodeDefaultRuntime`, an existing cluster's default; k3s ships RuntimeClass
    `nvidia` with handler `nvidia`, k3s `manifests/runtimes.yaml`), none otherwise. `""`: none, the pods use the
    node's default runtime. Kubernetes only (not a Swarm)."""
    create_runtime_class: bool = False
    """Create the RuntimeClass `runtimeClassName` (handler `nvidia`) in the stack. Default false: k3s ships its
    own `nvidia` RuntimeClass (a second owner would fight k3s' deploy controller over it); set true on a cluster
    whose nodes have the `nvidia` handler but no RuntimeClass for it."""


class AirGapConfig(_Section):
    """An air-gapped site: every image comes from the site's own registry, by digest (docs/edge.md, "Air-gapped
    site")."""

    site_registry: str
    """Required: the site registry's `host[:port]`, e.g. `registry.edge-site.internal:5000`. `make mirror` copies
    every image the stack runs there; chart values, operator manifests and the training image then reference only
    it, and the policy pack rejects any other image."""
    prefix: str = "mirror"
    """Repository path under `siteRegistry` that holds the copies: `<siteRegistry>/<prefix>/<source registry>/
    <source path>`. Default `mirror`."""
    lock_file: str | None = None
    """The mirror's lock file (source image → site copy by digest, written by `make mirror`), relative to the project
    root. Without it, or with an image missing from it, the stack plans with a warning naming the images (each
    referenced by tag on the site registry) and `pulumi up` refuses. Default `stacks/mirror/<stack>.lock.json`."""


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
    """`registry: existing` only: registry/repository address, e.g. `registry.example.internal:5000/trainer`."""
    existing_registry_username: str | None = None
    """`registry: existing` only: username for the registry (password is the `registryPassword` secret)."""
    reference: str | None = None
    """An existing image *by digest* (`repo@sha256:<64 hex>`) to run instead of building."""
    signed_digests: tuple[str, ...] = ()
    """Images *by digest* (`repo@sha256:<64 hex>`) that CI built with SBOM and provenance attestations, signed
    with cosign and verified (`.github/workflows/image.yml`). On a production stack (`lifecycle.protect`) the
    policy pack lets workloads run only the stack's own build or one of these; list `reference` here when
    `build` is false. Default: none."""
    base_image: str | None = None
    """Base to build on *by digest* (`repo:tag@sha256:<64 hex>`), instead of the catalog's base for the platform
    and GPU nodes (`catalog/versions.py` `BASE_IMAGES`: x86_64 CUDA, arm64 SBSA, Jetson L4T). Needed where the
    catalog has no verified digest: the stack refuses to build on an unpinned base. Default: the catalog's."""
    keep_tagged_images: int = Field(30, ge=1, le=1000)
    """ECR lifecycle: keep this many newest tagged images. Default 30."""
    expire_untagged_days: int = Field(7, ge=1, le=365)
    """ECR lifecycle: expire untagged images after this many days. Default 7."""
    air_gap: AirGapConfig | None = None
    """Air-gapped site (adopted clusters only): pull every image from `airGap.siteRegistry`. Default: none (images
    come from their upstream registries). Was `offline` (refused with the new name)."""


class ElasticConfig(_Section):
    """Elastic training: the job keeps running between `minNodes` and `maxNodes` pods."""

    min_nodes: int = Field(1, ge=1)
    """Fewest pods the job runs with. Default 1."""
    max_nodes: int = Field(2, ge=1)
    """Most pods the job grows to. Default 2."""
    max_restarts: int = Field(3, ge=0, le=100)
    """torchrun / dlrover-run restarts before the job fails. Default 3."""


class KueueConfig(_Section):
    """Kueue gang admission of every training workload of the stack (`gtp:kueue`, components/kueue.py)."""

    enabled: bool | None = None
    """Install Kueue and queue every workload through a LocalQueue on a ClusterQueue whose quota is derived from
    the GPU node groups. Default: on for EKS stacks whose workloads Kueue v0.19.2 can all admit at a fixed size
    (PyTorchJobs without KEDA, TrainJobs, the ScaledJob's Jobs); off when one is an ElasticJob (Kueue has no
    DLRover integration) or uses `autoscaling.mode: scaledobject` (KEDA resizes the PyTorchJob after admission,
    and Kueue then suspends and requeues the running job: it resizes only batch Jobs in place), for adopted
    clusters (their cpu/memory are unknown offline, so no quota can be derived) and for Swarm. A workload left
    out of the queue would use capacity the quota counts as free, so it is all or none. `true` where it can't
    work is an error."""
    wait_for_pods_ready_timeout: str = "10m"
    """Kueue `waitForPodsReady.timeout`: an admitted job not "ready" by then is evicted and requeued (for a
    PyTorchJob "ready" is its Running condition, set once one worker runs; docs/scheduling.md, "Gang admission").
    The stack's start-up bound: it also sets how long a multi-node PyTorchJob's workers wait for their rendezvous host
    (`elasticPolicy.rdzvConf`). Covers scale-from-zero node start-up and the image pull: at least a GPU node's
    boot plus the training image's pull (`catalog/startup_times.py`; shorter evicts every job before it runs). A Go
    duration (units `h m s ms us ns`, fractions allowed) such as `10m`, `1h30m` or `1.5h`, positive, in whole
    seconds. Default `10m`."""
    submit_kinds: tuple[str, ...] = ()
    """Kinds teams may submit as one-off jobs (`python -m tools.submit`) besides the kinds of the stack's own
    workloads: the stack installs their operators (and so their CRDs) and enables their Kueue integrations, so the
    queue admits such a job. Each must be a kind Kueue admits (`pytorchjob`, `trainjob`). Default none: a submit
    may use only the kinds the stack's own workloads run (tools/submit.py refuses others, naming this key)."""
    admission_budget: str = "30m"
    """How long a gang may wait in the queue for admission before Prometheus' `KueueGangPendingTooLong` alert
    fires (components/alert_rules.py: a workload pending and none admitted for this long). A Prometheus duration
    (the rule's `for:`; units `y w d h m s ms`, largest first) such as `30m`, `2h` or `1d`, more than zero.
    Default `30m`."""
    atomic_provisioning: Literal["auto", "on", "off"] = "auto"
    """All-or-nothing capacity for gangs (components/kueue.py `provisioning_flavors`): a ProvisioningRequest
    admission check (Kueue controller `kueue.x-k8s.io/provisioning-request`, class
    `best-effort-atomic-scale-up.autoscaling.x-k8s.io`) on the ClusterQueue for the chosen flavors, so Kueue admits
    a gang only once the cluster-autoscaler accepted one scale-up for all its pods (refused when its node group
    can't grow that far: cluster-autoscaler core/scaleup/orchestrator/orchestrator.go:217, :500 at
    cluster-autoscaler-1.34.1; Provisioned=True "if the node group scale up request is successful", FAQ.md:661). The
    AWS provider has no atomic resize (cloudprovider/aws/aws_cloud_provider.go:287-290 `ErrNotImplemented`; the
    scale-up falls back to a plain one, core/scaleup/orchestrator/executor.go:144-153): the request raises the Auto
    Scaling group's desired size at once, but EC2 may still deliver fewer instances (spot, reservation size), which
    `waitForPodsReadyTimeout` then evicts as before. `auto`: the flavors of
    GPU groups with `minSize: 0` that run a multi-node gang (a one-node gang is atomic already), and the topology
    flavors (`topology`) whose group's `minSize` is below its largest
    gang (Kueue's topology-aware scheduling counts only nodes that already run, so such a gang is never placed
    without a provisioning check: Kueue site/content/en/docs/concepts/topology_aware_scheduling.md:61-67,124-137 at
    v0.19.2). `on`: also every other flavor a multi-node gang runs on and every `minSize: 0` flavor. `off`: none (a
    `topology` that needs it is then an error). Default `auto`."""
    topology: Literal["auto", "required", "preferred", "off"] = "auto"
    """Topology-aware admission of multi-node EFA gangs: a Kueue Topology of the EC2 network layers
    (`topology.k8s.aws/network-node-layer-1..3`, written by the AWS cloud provider on the instance types EC2 has a
    topology for: catalog/node_labels.py) plus `kubernetes.io/hostname`, referenced by the flavors of the GPU groups
    whose instance types all carry those labels; every multi-node EFA workload on such a group asks for one domain
    of layer `topologyLayer`. `preferred`: one domain if it can, the next layer up if not, spread at the top
    (`kueue.x-k8s.io/podset-preferred-topology`; Kueue apis/kueue/v1beta2/topology_types.go:30-39 at v0.19.2).
    `required`: the gang waits until it fits one domain (`kueue.x-k8s.io/podset-required-topology`, :24-28), and
    nothing AWS documents guarantees one: a cluster placement group or Capacity Block keeps instances close, not
    under one network node (docs/scheduling.md), so the plan reports such a gang as an assumption, never a pass.
    `auto`: `preferred` where the group's instance types carry the labels, nothing elsewhere; an explicit
    `required`/`preferred` with a multi-node EFA gang on a group without the labels is an error. `off`: no Topology.
    A workload's own `topology` overrides it. Default `auto`."""
    topology_layer: int = Field(3, ge=1, le=3)
    """The EC2 network layer a topology-aware gang is kept within: 1 (top, widest) .. 3 (the network node the
    instances connect to, closest). Default 3."""


class AutoscalingConfig(_Section):
    """KEDA autoscaling of one workload (`workloads.<name>.autoscaling`)."""

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


class WorkloadConfig(_Section):
    """One training workload of the stack: an entry of `gtp:workloads`, keyed by its name (like node groups).

    Our trainer (`images/trainer`) is the default and the example: its fields (`model`, `maxSteps`, ...) become
    its arguments. A team's own training code sets `image` (by digest) and `command` instead, and keeps the
    platform's pod shape (GPUs, EFA, storage, security context, queue)."""

    kind: str = "pytorchjob"
    """The workload kind (`workload_kinds/`). `pytorchjob`: Kubeflow PyTorchJob (training-operator v1).
    `elasticjob`: DLRover ElasticJob. `trainjob`: Kubeflow Trainer v2 TrainJob on the stack's own
    ClusterTrainingRuntime (fixed node count; no elastic, no autoscaling). `swarm`: Docker Swarm services.
    Default `pytorchjob`."""
    name: str = ""
    """Set from the map key (the job's name, a DNS label); not written in the stack file."""
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
    """Bench only: all-reduce message sizes, comma-separated, as the bench reads them (`trainer/bench.py`
    `parse_size`): bytes, optionally with `K`/`M`/`G` (powers of 1024, any case, optional trailing `B`), at least 4
    (one float32). Default `1M,16M,128M,1G`."""
    model: Literal["cnn", "gpt"] = "gpt"
    """Trainer model. Default `gpt`."""
    max_steps: int = Field(1000, ge=1)
    """Training steps. Default 1000."""
    batch_size: int = Field(32, ge=1)
    """Per-rank batch size. Default 32."""
    checkpoint_every: int = Field(100, ge=1)
    """Checkpoint every N steps (and on SIGTERM). Default 100."""
    extra_args: tuple[str, ...] = ()
    """Extra `trainer.train` flags, e.g. `["--fsdp"]`, checked at plan time by the trainer's own parser and
    checks together with the flags the platform passes. Flags the platform sets itself are refused: `--model`,
    `--max-steps`, `--batch-size`, `--checkpoint-every` (set `model`, `maxSteps`, `batchSize`, `checkpointEvery`),
    `--checkpoint-dir`, `--metrics-port` and the hang watchdog's `--watchdog-timeout`. Default none."""
    cpu: Quantity = "8"
    """CPU request = limit per pod (Guaranteed QoS), a Kubernetes quantity in cores: `8`, `7.5` or `7500m`.
    Default `8`."""
    memory: Quantity = "64Gi"
    """Memory request = limit per pod, a Kubernetes quantity with a unit (`64Gi`, `512Mi`, `8G`; a bare number
    would be bytes and is refused). Default `64Gi`."""
    shm_size: Quantity = "16Gi"
    """Size limit of the memory-backed `/dev/shm`, a Kubernetes quantity with a unit (like `memory`). Default
    `16Gi`. A `gpuResource: shared` workload on an MPS group gets the MPS daemon's `/dev/shm` from the device plugin
    instead (half the node's memory, shared by the node's MPS clients); there this is only the least size its
    healthcheck expects."""
    backoff_limit: int = Field(3, ge=0, le=100)
    """Job-level retries. Default 3. For a PyTorchJob with Workers (`elastic`, or `numNodes` > 1) it counts per
    pod: training-operator v1.9.4 sums the container restarts of all running pods against the job's limit
    (pkg/core/job.go:95-132 `PastBackoffLimit`), so the job's `runPolicy.backoffLimit` is this × its largest
    number of workers."""
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    """`autoscaling.mode: scaledjob` only: delete each finished Job (KEDA creates one per queued request) after
    this many seconds; default there 86400. Not allowed for jobs the stack itself owns (the PyTorchJob or
    ElasticJob of `autoscaling.mode` none/scaledobject): their finished object stays, because once the operator
    deleted it, the next `pulumi up --refresh` would create it again and train again. To run such a job again,
    rename the workload (its key under `workloads`) (or `pulumi up --replace` its URN)."""
    clean_pod_policy: Literal["None", "Running", "All"] = "None"
    """Which pods to delete when the job finishes. Default `None` (keep logs)."""
    termination_grace_period_seconds: int = Field(300, ge=30, le=3600)
    """Time between SIGTERM and SIGKILL: enough to write a checkpoint. Default 300."""
    autoscaling: AutoscalingConfig = AutoscalingConfig()
    """KEDA autoscaling of this workload. Default: none."""
    topology: Literal["required", "preferred", "none"] | None = None
    """This workload's network-topology request under Kueue (overrides `kueue.topology`): `preferred` tries to
    keep its gang within one `kueue.topologyLayer` domain, `required` admits it only there (a domain that large is
    known only at runtime: the plan reports it as an assumption), `none` asks nothing. Only a multi-node gang on a
    GPU group whose instance types carry the EC2 topology labels can ask (catalog/node_labels.py). Default: from
    `kueue.topology` (`auto`: `preferred`)."""
    image: str | None = None
    """A team's own training image instead of our trainer, by digest (`repo[:tag]@sha256:<64 hex>`); requires
    `command`, and our trainer's fields (`model`, `maxSteps`, `batchSize`, `checkpointEvery`, `extraArgs`,
    `benchSizes`, `entrypoint: bench`) must be left out. It runs as uid 10001 under the restricted profile, with
    `GTP_CHECKPOINT_DIR` (its own directory on the shared volume), `GTP_DATA_DIR` and the launcher's
    rendezvous env. Default: the stack's trainer image."""
    command: tuple[str, ...] | None = None
    """With `image`: the program each process runs, launched as `torchrun <rendezvous flags> <command...>`
    (`dlrover-run` for `elasticjob`), e.g. `["-m", "myteam.train", "--epochs", "3"]` or `["/app/train.py"]`.
    The image must provide torchrun (any PyTorch image does)."""
    checkpoints: Literal["keep", "none"] = "keep"
    """`keep`: the job resumes from its checkpoints after a pod is lost, so they must outlive its pods: a
    multi-node, elastic or scaled job, and every training job of a production stack, needs shared storage
    (`storage.kind` other than `none`). `none`: the job keeps no work worth resuming (a smoke test, a throwaway
    run) and may run with `storage.kind: none`, its checkpoints on node-local scratch. Default `keep`."""
    ephemeral_storage: Quantity = "20Gi"
    """Node-local scratch per pod (request = limit, Guaranteed QoS); bounds the `/tmp` emptyDir and the
    container's writable layer. A Kubernetes quantity with a unit (like `memory`). Default `20Gi`."""


class StorageConfig(_Section):
    """Shared ReadWriteMany storage for data and checkpoints."""

    kind: Literal["none", "efs", "fsx-lustre", "existing", "nfs", "host-path"] = "none"
    """`efs`: Amazon EFS. `fsx-lustre`: FSx for Lustre. `existing`: a StorageClass already in the cluster.
    `nfs` (Swarm): an NFS export every GPU server mounts (`nfsServer`, `nfsPath`). `host-path` (Swarm): a
    directory that exists on every GPU server (`hostPath`); for a job of several tasks it must be one shared file
    system mounted there on every server, since the tasks write one checkpoint together
    (`stack_config/storage_kinds.py`). `none`: checkpoints go to
    node-local scratch (lost with the pod or task; dev only). Default `none`."""
    existing_storage_class: str | None = None
    """StorageClass name for `existing`."""
    size_gib: int = Field(1200, ge=1)
    """PVC size; FSx for Lustre (SCRATCH_2 and PERSISTENT_2 alike) needs 1200 or a multiple of 2400
    (`catalog/fsx_lustre.py`). Default 1200."""
    fsx_deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "PERSISTENT_2"
    """FSx for Lustre deployment type. Default `PERSISTENT_2`."""
    fsx_throughput_per_unit: Literal[125, 250, 500, 1000] = 125
    """FSx PERSISTENT_2 throughput MB/s per TiB (125, 250, 500 or 1000; SCRATCH_2 takes none: its throughput is
    fixed). Default 125."""
    nfs_server: str | None = None
    """`nfs` only: the NFS server's address (IP or DNS name reachable from every GPU server)."""
    nfs_path: str | None = None
    """`nfs` only: the exported path, e.g. `/export/training`."""
    nfs_options: str = "nfsvers=4.1,rw"
    """`nfs` only: mount options (without `addr=`). Default `nfsvers=4.1,rw`."""
    host_path: str | None = None
    """`host-path` only: the directory on every GPU server, owned by uid/gid 10001 (the trainer's user)."""
    mount_path: str = "/mnt/shared"
    """Where the volume is mounted in every worker (checkpoints under `<mountPath>/checkpoints/<job>`, data
    under `<mountPath>/data`): a clean absolute path on, inside or around none of the paths the container uses itself
    (`/dev/shm`, `/tmp`, `/run/secrets`, `/mps`, `/workspace`, `/home/trainer`) nor a system directory. Default
    `/mnt/shared`."""


class LifecycleConfig(_Section):
    """How long the stack lives and how hard it is to destroy."""

    ephemeral: bool = False
    """A short-lived stack: nothing protected, registry and buckets force-deleted, TTL required. Default
    false."""
    protect: bool = False
    """Protect the cluster, KMS keys, storage and registry from deletion (production). Default false."""
    ttl_hours: float | None = Field(None, gt=0, le=720)
    """Ephemeral only (required there): hours after `createdAt` when the reaper destroys the stack. On EKS at least
    the control plane's creation plus a training pod's start-up (`catalog/startup_times.py`), plus the job's run."""
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
    workloads: dict[str, WorkloadConfig]
    """The training workloads, by name (empty: platform only)."""
    kueue: KueueConfig
    storage: StorageConfig
    lifecycle: LifecycleConfig
    tags: dict[str, str]
    kubeconfig: SecretStr | None = None
    swarm_secrets: SecretStr | None = None
    """Swarm only: the `swarmSecrets` secret, a JSON map of name → value; each becomes a Docker secret mounted
    read-only at `/run/secrets/<name>` in every training task."""
    registry_password: SecretStr | None = None

    # --- derived facts (computed, never stored) ---------------------------------------------------------
    @property
    def cluster_name(self) -> str:
        return f"{self.name_prefix}-{self.stack}"

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
        return node_facts(traits_for(self.cluster.mode).node_facts, self.gpu_node_groups[group])

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


def node_facts(source: Literal["catalog", "config"], group: GpuNodeGroupConfig) -> NodeFacts:
    """From the instance catalog where the stack provisions the nodes (EKS); from config where it adopts them
    (an existing cluster, a Swarm), since they can't be discovered offline (`TargetTraits.node_facts`)."""
    if source == "config":
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


