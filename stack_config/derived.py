"""Facts derived from the whole stack config: what a workload's pods need."""

from __future__ import annotations

import re

from catalog import versions
from catalog.gpu_instances import DCGM_UNSUPPORTED_MODELS, JETSON_GPU_MODELS, bottlerocket
from catalog.node_allocatable import GPU_NODE_DAEMONS, instance_allocatable, smallest
from conventions.names import EFA_RESOURCE, NVIDIA_RUNTIME_HANDLER, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from stack_config.schema import GpuNodeGroupConfig, NodeFacts, StackConfig, WorkloadConfig


def dcgm_exporter_enabled(config: StackConfig) -> bool:
    """`gpu.metrics.dcgmExporter`, or its default: on, unless a GPU group is a model DCGM does not support (Jetson)."""
    if config.gpu.metrics.dcgm_exporter is not None:
        return config.gpu.metrics.dcgm_exporter
    return not any(group.gpu_model in DCGM_UNSUPPORTED_MODELS for group in config.gpu_node_groups.values())


def node_default_runtime(config: StackConfig) -> str | None:
    """containerd's default handler on the GPU nodes: `cluster.nodeDefaultRuntime`, or `runc` on an existing
    cluster (k3s keeps runc as the default, k3s-io/k3s#8700), `nvidia` on EKS (the NVIDIA AMIs' default); None
    on a Swarm (Docker's runtime, not containerd's CRI)."""
    if config.cluster.node_default_runtime is not None:
        return config.cluster.node_default_runtime
    return {"existing": "runc", "eks": NVIDIA_RUNTIME_HANDLER}.get(config.cluster.mode)


def runtime_class_name(config: StackConfig) -> str | None:
    """The RuntimeClass of the GPU pods and the device plugin's daemons (`gpu.runtimeClassName`): by default
    `nvidia` when the nodes' default runtime is runc, else none; `""` is none."""
    if config.gpu.runtime_class_name is not None:
        return config.gpu.runtime_class_name or None
    return NVIDIA_RUNTIME_HANDLER if node_default_runtime(config) == "runc" else None


def site_architecture(config: StackConfig) -> str:
    """Where the operators run: `arm64` on an adopted cluster whose GPU groups are all arm64 (an edge site of
    Jetson-class nodes), else `amd64` (EKS runs them on the amd64 system group)."""
    groups = [group.architecture for group in config.gpu_node_groups.values()]
    if config.cluster.mode == "existing" and groups and all(arch == "arm64" for arch in groups):
        return "arm64"
    return "amd64"


def job_pods(workload: WorkloadConfig) -> int:
    """Pods of one job at its configured largest, before any autoscaling: `elastic.maxNodes`, else `numNodes`."""
    return workload.elastic.max_nodes if workload.elastic else workload.num_nodes


def num_ranks(config: StackConfig, workload: WorkloadConfig) -> int:
    """Most ranks the workload can run with (pods x processes per pod)."""
    pods = job_pods(workload)
    if workload.autoscaling.mode == "scaledobject":
        pods = max(pods, workload.autoscaling.max_replicas)
    return pods * gpus_per_pod(config, workload)


def gpus_per_pod(config: StackConfig, workload: WorkloadConfig) -> int:
    if workload.gpus_per_node is not None:
        return workload.gpus_per_node
    assert workload.node_group is not None
    return config.node_facts(workload.node_group).num_gpus


def _facts(config: StackConfig) -> list[NodeFacts]:
    """Facts of every GPU group whose facts can be computed (invalid groups are reported by the rules)."""
    facts = []
    for name in config.gpu_node_groups:
        try:
            facts.append(config.node_facts(name))
        except (KeyError, IndexError):
            continue
    return facts


def base_flavour(platform: str, gpu_models: list[str]) -> str:
    """The `versions.BASE_IMAGES` key for an image built for `platform` to run on GPUs of `gpu_models`."""
    if platform == "linux/amd64":
        return "cuda-x86_64"
    return "jetson-l4t" if any(model in JETSON_GPU_MODELS for model in gpu_models) else "cuda-sbsa"


def image_flavour(config: StackConfig) -> str:
    return base_flavour(config.image.platform, [facts.gpu_model for facts in _facts(config)])


def base_image(config: StackConfig) -> str | None:
    """The base this stack builds on, by digest: `image.baseImage`, else the catalog's; None when unpinned."""
    if config.image.base_image:
        return config.image.base_image
    return versions.BASE_IMAGES[image_flavour(config)].reference


def base_image_refusal(config: StackConfig) -> str | None:
    """Why this stack must not build (its base has no verified digest), or None."""
    if not config.image.build or base_image(config) is not None:
        return None
    base = versions.BASE_IMAGES[image_flavour(config)]
    return (f"image: refusing to build on an unpinned base: the {base.flavour} base ({base.what}) has no verified "
            f"digest in catalog/versions.py BASE_IMAGES; pin it there, or set image.baseImage to a "
            f"'repo:tag@sha256:<64 hex>' reference you verified")


def node_update_strategy(group: GpuNodeGroupConfig) -> str:
    """EKS's `updateStrategy` for a GPU group: `MINIMAL` (terminate first, no surge) for reserved capacity, whose
    reservation has no room for the surge nodes a DEFAULT update launches first (EKS API NodegroupUpdateConfig:
    "The minimal strategy ... terminates the old instances before launching the new instances"), unless the group
    sets `updateStrategy`."""
    if group.update_strategy is not None:
        return group.update_strategy.upper()
    reserved = group.capacity_reservation_id is not None or group.capacity_type == "CAPACITY_BLOCK"
    return "MINIMAL" if reserved else "DEFAULT"


def efa_installer_refusal(config: StackConfig) -> str | None:
    """Why this stack must not build (its image's `efa` variant needs an EFA installer with no recorded SHA-256), or
    None. The Dockerfile's net-efa stage fails closed too, but only at `up`'s image build, after EKS and the
    reserved nodes exist: this says so before anything is registered."""
    installer = versions.EFA_INSTALLER
    if not config.image.build or image_variant(config) != "efa" or installer.sha256 is not None:
        return None
    groups = sorted(name for name in config.gpu_node_groups if _efa_group(config, name))
    return (f"image.build is true and GPU group(s) {', '.join(groups)} use EFA, so the image installs "
            f"aws-efa-installer-{installer.version}, whose SHA-256 catalog/versions.py EFA_INSTALLER does not record; "
            f"record one published by AWS there, or set image.build: false with image.reference to an EFA image "
            f"built elsewhere")


def _efa_group(config: StackConfig, name: str) -> bool:
    try:
        return config.node_facts(name).num_efa_interfaces > 0
    except (KeyError, IndexError):
        return False


def image_variant(config: StackConfig) -> str:
    """`efa` when a GPU group gets EFA interfaces (its pods request them), else `default`."""
    return "efa" if any(facts.num_efa_interfaces > 0 for facts in _facts(config)) else "default"


KUEUE_KINDS = frozenset({"pytorchjob", "trainjob"})
"""`workloads.<name>.kind` values Kueue v0.19.2 can admit (its kubeflow.org/pytorchjob and
trainer.kubeflow.org/trainjob integrations; `autoscaling.mode: scaledjob` runs batch Jobs, admitted by
`batch/job`)."""


def kueue_blockers(config: StackConfig) -> list[str]:
    """Why Kueue can't queue this stack's workloads (empty: it can). See `KueueConfig.enabled`."""
    blockers = []
    if config.cluster.mode != "eks":
        blockers.append(f"cluster.mode {config.cluster.mode!r}: quotas are derived from the instance catalog, which "
                        "only EKS node groups have")
    if not config.workloads:
        blockers.append("workloads is empty: no workload to queue")
    for name, workload in config.workloads.items():
        if workload.kind not in KUEUE_KINDS:
            blockers.append(f"workloads.{name}.kind {workload.kind!r}: Kueue v0.19.2 has no integration for it "
                            f"(supported: {', '.join(sorted(KUEUE_KINDS))})")
        if workload.autoscaling.mode == "scaledobject":
            blockers.append(f"workloads.{name}.autoscaling.mode 'scaledobject': KEDA resizes the PyTorchJob after "
                            "admission and Kueue then suspends and requeues the running job "
                            "(pkg/controller/jobframework/reconciler.go `ensureOneWorkload`: a workload no longer "
                            "matching its job stops the job)")
    return blockers


def kueue_enabled(config: StackConfig) -> bool:
    """`kueue.enabled`, defaulting to on wherever Kueue can queue every workload."""
    enabled = config.kueue.enabled
    return not kueue_blockers(config) if enabled is None else enabled


def duration_seconds(text: str) -> int:
    """A Go duration of hours, minutes and seconds (`1h30m`, `10m`, `45s`; validated by the kueue rule) in seconds."""
    total = 0
    for amount, unit in re.findall(r"(\d+)([hms])", text):
        total += int(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def startup_bound_seconds(config: StackConfig) -> int:
    """How long the stack allows a job's pods to take to start, the slowest against the first (a node group
    scaling from its minimum, one slower image pull): Kueue's `waitForPodsReady.timeout` when Kueue queues the
    workloads (an admitted job not ready by then is evicted), else the GPU readiness gate's timeout (how long the
    stack waits for a node's GPUs to appear)."""
    if kueue_enabled(config):
        return duration_seconds(config.kueue.wait_for_pods_ready_timeout)
    return config.gpu.readiness_timeout_seconds


def pods_per_job(workload: WorkloadConfig) -> int:
    """Most training pods one job of the workload runs at once (quotas are sized from it)."""
    pods = job_pods(workload)
    if workload.autoscaling.mode != "none":
        pods = max(pods, workload.autoscaling.max_replicas)
    return pods


def gpu_resource_of(config: StackConfig, group: str) -> tuple[str, int]:
    """The GPU resource a group's nodes advertise and how many per GPU: shared slices are renamed
    (components/nvidia_device_plugin.py `sharing_config`, renameByDefault) to `nvidia.com/gpu.shared` with
    `replicas` per GPU; Bottlerocket runs its own plugin (whole GPUs, no sharing)."""
    node_group = config.gpu_node_groups[group]
    sharing = config.sharing_for(group)
    if config.cluster.mode == "eks" and bottlerocket(node_group.ami_type or ""):
        return WHOLE_GPU_RESOURCE, 1
    if sharing.mode == "none":
        return WHOLE_GPU_RESOURCE, 1
    return SHARED_GPU_RESOURCE, sharing.replicas


def group_quota(config: StackConfig, group: str) -> dict[str, float]:
    """What node group `group` can provide to training at maxSize: GPUs (× sharing replicas, as the resource its
    nodes advertise), EFA devices, and cpu/memory allocatable (catalog/node_allocatable.py, the same numbers the
    simulation's node groups use; the smallest instance type of the group) less what the platform's DaemonSets
    request on each node (`GPU_NODE_DAEMONS`)."""
    node_group = config.gpu_node_groups[group]
    facts = config.node_facts(group)
    resource, replicas = gpu_resource_of(config, group)
    nodes = node_group.max_size
    quota = {resource: float(nodes * facts.num_gpus * replicas)}
    if facts.num_efa_interfaces:
        quota[EFA_RESOURCE] = float(nodes * facts.num_efa_interfaces)
    if config.cluster.mode == "eks":
        per_node = smallest(instance_allocatable(t, node_group.disk_size_gib) for t in node_group.instance_types)
        # Without the DaemonSets' share Kueue would admit jobs the nodes can't hold (catalog GPU_NODE_DAEMONS).
        quota["cpu"] = (per_node["cpu"] - GPU_NODE_DAEMONS["cpu"]) * nodes
        quota["memory"] = (per_node["memory"] - GPU_NODE_DAEMONS["memory"]) * nodes
        # Pods request ephemeral-storage (Guaranteed QoS); a requested resource the ClusterQueue doesn't cover
        # makes the workload inadmissible.
        quota["ephemeral-storage"] = per_node["ephemeral-storage"] * nodes
    return quota
