"""Facts derived from the whole stack config: what a workload's pods need."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from catalog import versions
from catalog.gpu_instances import DCGM_UNSUPPORTED_MODELS, JETSON_GPU_MODELS, bottlerocket
from catalog.node_allocatable import GPU_NODE_DAEMONS, instance_allocatable, smallest
from catalog.startup_times import BASE_IMAGE_GB, GPU_NODE_BOOT_SECONDS, IMAGE_PULL_SECONDS_PER_GB
from conventions.durations import NANOSECONDS_PER_SECOND, parse_go_duration
from conventions.names import EFA_RESOURCE, NVIDIA_RUNTIME_HANDLER, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from conventions.quantities import cpu_cores, quantity_gib
from stack_config.kinds import KUEUE_ADMITTED, kind_traits
from stack_config.schema import GpuNodeGroupConfig, NodeFacts, StackConfig, WorkloadConfig
from stack_config.targets import ADOPTED_KUBERNETES, modes_where, traits_of


def dcgm_exporter_enabled(config: StackConfig) -> bool:
    """`gpu.metrics.dcgmExporter`, or its default: on, unless a GPU group is a model DCGM does not support (Jetson)."""
    if config.gpu.metrics.dcgm_exporter is not None:
        return config.gpu.metrics.dcgm_exporter
    return not any(group.gpu_model in DCGM_UNSUPPORTED_MODELS for group in config.gpu_node_groups.values())


def node_default_runtime(config: StackConfig) -> str | None:
    """containerd's default handler on the GPU nodes: `cluster.nodeDefaultRuntime`, or the target's default
    (`TargetTraits.node_default_runtime`: `runc` on an existing cluster, k3s-io/k3s#8700; `nvidia` on EKS, the
    NVIDIA AMIs' default; None on a Swarm, whose Docker is not containerd's CRI)."""
    if config.cluster.node_default_runtime is not None:
        return config.cluster.node_default_runtime
    return traits_of(config).node_default_runtime


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
    if config.cluster.mode in ADOPTED_KUBERNETES and groups and all(arch == "arm64" for arch in groups):
        return "arm64"
    return "amd64"


def configured_pods(workload: WorkloadConfig) -> int:
    """Pods of one job at its configured largest, before any autoscaling: `elastic.maxNodes`, else `numNodes`
    (`max_running_pods` adds what an autoscaler may add)."""
    return workload.elastic.max_nodes if workload.elastic else workload.num_nodes


def num_ranks(config: StackConfig, workload: WorkloadConfig) -> int:
    """Most ranks the workload can run with (pods x processes per pod)."""
    pods = configured_pods(workload)
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
    return "MINIMAL" if group.reserved else "DEFAULT"


def efa_installer_refusal(config: StackConfig) -> str | None:
    """Why this stack must not build (its image's `efa` variant installs an EFA installer that catalog/versions.py
    EFA_INSTALLER gives no way to verify: neither AWS's signing-key fingerprint nor a SHA-256), or None. The
    Dockerfile's efa-installer stage fails closed too, but only at `up`'s image build, after EKS and the reserved
    nodes exist: this says so before anything is registered."""
    installer = versions.EFA_INSTALLER
    if not config.image.build or image_variant(config) != "efa":
        return None
    if installer.gpg_fingerprint is not None or installer.sha256 is not None:
        return None
    groups = sorted(name for name in config.gpu_node_groups if _efa_group(config, name))
    return (f"image.build is true and GPU group(s) {', '.join(groups)} use EFA, so the image installs "
            f"aws-efa-installer-{installer.version}, which catalog/versions.py EFA_INSTALLER gives no way to verify "
            f"(neither gpg_fingerprint nor sha256 is set); pin the fingerprint of the key AWS signs the installer "
            f"with, as AWS documents it (EC2 user guide, efa-start.html), or a SHA-256 AWS publishes, or set "
            f"image.build: false with image.reference to an EFA image built elsewhere")


def _efa_group(config: StackConfig, name: str) -> bool:
    try:
        return config.node_facts(name).num_efa_interfaces > 0
    except (KeyError, IndexError):
        return False


def image_variant(config: StackConfig) -> str:
    """`efa` when a GPU group gets EFA interfaces (its pods request them), else `default`."""
    return "efa" if any(facts.num_efa_interfaces > 0 for facts in _facts(config)) else "default"




def kueue_blockers(config: StackConfig) -> list[str]:
    """Why Kueue can't queue this stack's workloads (empty: it can). See `KueueConfig.enabled`."""
    blockers = []
    if not traits_of(config).kueue_quotas:
        blockers.append(f"cluster.mode {config.cluster.mode!r}: quotas are derived from the instance catalog, which "
                        "only the node groups of cluster.mode "
                        f"{' or '.join(map(repr, modes_where(lambda traits: traits.kueue_quotas)))} have")
    if not config.workloads:
        blockers.append("workloads is empty: no workload to queue")
    for name, workload in config.workloads.items():
        # The kinds declare their Kueue integration (`kueue_integration`: Kueue v0.19.2's kubeflow.org/pytorchjob,
        # trainer.kubeflow.org/trainjob; `autoscaling.mode: scaledjob` runs batch Jobs, admitted by `batch/job`).
        if workload.kind not in KUEUE_ADMITTED:
            blockers.append(f"workloads.{name}.kind {workload.kind!r}: Kueue v0.19.2 has no integration for it "
                            f"(supported: {', '.join(KUEUE_ADMITTED.names)})")
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
    """A Go duration (`1h30m`, `1.5h`, `45s`: time.ParseDuration, conventions/durations.py) in whole seconds, as
    Kueue reads `kueue.waitForPodsReadyTimeout`; `ValueError` for what Go refuses or a fraction of a second
    (stack_config/consumers.py reports both with the key path)."""
    nanoseconds = parse_go_duration(text)
    if nanoseconds % NANOSECONDS_PER_SECOND:
        raise ValueError(f"{text!r} is not a whole number of seconds")
    return nanoseconds // NANOSECONDS_PER_SECOND


def startup_bound_seconds(config: StackConfig) -> int:
    """How long the stack allows a job's pods to take to start, the slowest against the first (a node group
    scaling from its minimum, one slower image pull): Kueue's `waitForPodsReady.timeout` when Kueue queues the
    workloads (an admitted job not ready by then is evicted), else the GPU readiness gate's timeout (how long the
    stack waits for a node's GPUs to appear)."""
    if kueue_enabled(config):
        return duration_seconds(config.kueue.wait_for_pods_ready_timeout)
    return config.gpu.readiness_timeout_seconds


def max_running_pods(workload: WorkloadConfig) -> int:
    """Most training pods one job of the workload runs at once: `configured_pods`, or the autoscaler's
    `maxReplicas` when larger (quotas are sized from it)."""
    pods = configured_pods(workload)
    if workload.autoscaling.mode != "none":
        pods = max(pods, workload.autoscaling.max_replicas)
    return pods


def gpu_resource_of(config: StackConfig, group: str) -> tuple[str, int]:
    """The GPU resource a group's nodes advertise and how many per GPU: shared slices are renamed
    (components/nvidia_device_plugin.py `sharing_config`, renameByDefault) to `nvidia.com/gpu.shared` with
    `replicas` per GPU; Bottlerocket runs its own plugin (whole GPUs, no sharing)."""
    node_group = config.gpu_node_groups[group]
    sharing = config.sharing_for(group)
    if traits_of(config).provisions_in_aws and bottlerocket(node_group.ami_type or ""):
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
    if traits_of(config).node_facts == "catalog":
        per_node = smallest(instance_allocatable(t, node_group.disk_size_gib) for t in node_group.instance_types)
        # Without the DaemonSets' share Kueue would admit jobs the nodes can't hold (catalog GPU_NODE_DAEMONS).
        quota["cpu"] = (per_node["cpu"] - GPU_NODE_DAEMONS["cpu"]) * nodes
        quota["memory"] = (per_node["memory"] - GPU_NODE_DAEMONS["memory"]) * nodes
        # Pods request ephemeral-storage (Guaranteed QoS); a requested resource the ClusterQueue doesn't cover
        # makes the workload inadmissible.
        quota["ephemeral-storage"] = per_node["ephemeral-storage"] * nodes
    return quota


def pod_startup_floor(config: StackConfig, workload: WorkloadConfig) -> tuple[int, list[str]]:
    """The least time (seconds) before a pod of `workload` can run on an EKS stack, and what it is made of
    (catalog/startup_times.py, each figure cited there): a GPU node's boot when its group may have to launch one for
    the job (minSize below maxSize), then the pull of our training image onto that fresh node (at least its base;
    a team's own image has no known size and is left out). Lower bounds, not estimates."""
    assert workload.node_group is not None
    group = config.gpu_node_groups[workload.node_group]
    seconds, parts = 0, []
    if group.min_size < group.max_size:
        seconds += GPU_NODE_BOOT_SECONDS
        parts.append(f"a GPU node's boot ({GPU_NODE_BOOT_SECONDS} s)")
    size = BASE_IMAGE_GB[image_flavour(config)] if workload.image is None else None
    if size:
        pull = math.ceil(size * IMAGE_PULL_SECONDS_PER_GB)
        seconds += pull
        parts.append(f"pulling the training image onto it ({pull} s: its {size:g} GB base at "
                     f"{IMAGE_PULL_SECONDS_PER_GB} s/GB)")
    return seconds, parts


# --- Gangs, atomic provisioning and network topology (Kueue; components/kueue.py) ------------------------------

def pods_per_node(config: StackConfig, workload: WorkloadConfig) -> tuple[int, str]:
    """How many of the workload's pods one node of its group holds, and the resource that bounds it: its GPUs (or
    slices) over the pod's, and where the stack's nodes are catalogued (EKS) also its cpu, memory and
    ephemeral-storage allocatable less the GPU node DaemonSets (`GPU_NODE_DAEMONS`, as `group_quota`) over the pod's
    requests. 0 for a pod too large for a node (`rules._check_fit` says so). `ValueError`/`KeyError` for a group
    or quantity the rules report."""
    group = config.gpu_node_groups[workload.node_group or ""]
    facts = config.node_facts(workload.node_group or "")
    _, replicas = gpu_resource_of(config, workload.node_group or "")
    slots = facts.num_gpus * (replicas if workload.gpu_resource == "shared" else 1)
    by = {"GPUs": slots // max(1, gpus_per_pod(config, workload))}
    if traits_of(config).node_facts == "catalog":
        node = smallest(instance_allocatable(t, group.disk_size_gib) for t in group.instance_types)
        wants = {"cpu": cpu_cores(workload.cpu), "memory": quantity_gib(workload.memory) * 2**30,
                 "ephemeral-storage": quantity_gib(workload.ephemeral_storage) * 2**30}
        by.update({key: int((node[key] - GPU_NODE_DAEMONS.get(key, 0.0)) // wants[key])
                   for key in wants if wants[key] > 0})
    limit, count = min(by.items(), key=lambda item: (item[1], item[0] != "GPUs"))
    return count, limit


def gang_nodes(config: StackConfig, workload: WorkloadConfig) -> int:
    """Nodes one gang of the workload needs at its largest (its pods over `pods_per_node`). A ScaledJob runs
    single-pod Jobs: each is its own gang of one."""
    pods = 1 if workload.autoscaling.mode == "scaledjob" else max_running_pods(workload)
    try:
        per_node, _ = pods_per_node(config, workload)
    except (KeyError, IndexError, TypeError, ValueError):
        return pods  # an unknown group, instance type or quantity: reported by the rules
    return -(-pods // max(1, per_node))


def group_gangs(config: StackConfig, group: str) -> list[tuple[str, int]]:
    """(workload, nodes per gang) of every workload on `group`."""
    return [(name, gang_nodes(config, workload)) for name, workload in config.workloads.items()
            if workload.node_group == group]


def topology_capable(config: StackConfig, group: str) -> bool:
    """Every instance type of the (EKS) group gets the EC2 network-layer labels (catalog/node_labels.py)."""
    from catalog.node_labels import network_topology_layers

    if not traits_of(config).provisions_in_aws or group not in config.gpu_node_groups:
        return False
    types = config.gpu_node_groups[group].instance_types
    return bool(types) and all(network_topology_layers(name) >= 3 for name in types)


def topology_mode(config: StackConfig, workload: WorkloadConfig) -> str:
    """`required`, `preferred` or `none`: what the workload asks of Kueue's topology-aware scheduling. Only a
    multi-node EFA gang on a topology-capable group under Kueue asks anything by default (`kueue.topology`), and
    `auto` asks `preferred`: `required` only as an explicit choice (docs/scheduling.md, "Network topology")."""
    if not kueue_enabled(config) or config.kueue.topology == "off":
        return "none"
    if workload.topology is not None:
        return workload.topology
    group = workload.node_group
    if group not in config.gpu_node_groups or not topology_capable(config, group):
        return "none"
    nodes = gang_nodes(config, workload)
    if nodes < 2 or not _efa_group(config, group):
        return "none"
    if (config.kueue.topology == "auto" and config.kueue.atomic_provisioning == "off"
            and config.gpu_node_groups[group].min_size < nodes):
        return "none"  # without a provisioning check the gang could never be placed (`KueueConfig.topology`)
    # Nothing AWS documents keeps a group's instances under one network node of a layer: a cluster placement group
    # is "the same high-bisection bandwidth segment of the network", "not isolated to a single rack"
    # (docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html), a Capacity Block is "close together
    # inside Amazon EC2 UltraClusters" (.../ec2-capacity-blocks.html); the nodes are known only from
    # DescribeInstanceTopology once the instances run (.../how-ec2-instance-topology-works.html). So `auto` never
    # risks a gang Kueue could never admit: `required` is the stack's explicit choice.
    return "required" if config.kueue.topology == "required" else "preferred"


def topology_groups(config: StackConfig) -> list[str]:
    """GPU groups whose Kueue flavor references the Topology: topology-capable ones, when `kueue.topology` is not
    off and some workload of the group asks for a topology."""
    if not kueue_enabled(config) or config.kueue.topology == "off":
        return []
    return sorted(group for group in config.gpu_node_groups if topology_capable(config, group)
                  and any(topology_mode(config, workload) != "none" for workload in config.workloads.values()
                          if workload.node_group == group))


def provisioning_groups(config: StackConfig) -> list[str]:
    """GPU groups whose flavor gets the ProvisioningRequest admission check (`kueue.atomicProvisioning`)."""
    mode = config.kueue.atomic_provisioning
    if not kueue_enabled(config) or mode == "off" or not traits_of(config).provisions_in_aws:
        return []
    topo = set(topology_groups(config))
    chosen = []
    for group, node_group in sorted(config.gpu_node_groups.items()):
        largest = max((nodes for _, nodes in group_gangs(config, group)), default=0)
        # A gang of one node is atomic already: the check would only add the ProvisioningRequest's round trip.
        if ((largest >= 2 and (node_group.min_size == 0 or mode == "on"))
                or (mode == "on" and node_group.min_size == 0 and largest >= 1)
                or (group in topo and node_group.min_size < largest)):
            chosen.append(group)
    return chosen


def installed_parts(config: StackConfig) -> frozenset[str]:
    """The upstream parts the stack installs, by name: a part is a vendored chart (its chart name: CHART_IMAGES'
    keys), an operator manifest (catalog/versions.py `OPERATOR_MANIFESTS`, and `kueue`), or a component of
    catalog/compatibility.py's rows (`Row.component`, `Floor.uses`). One decision, read by the compatibility rules
    (stack_config/rules.py) and the air-gap image list and mirror (stages/air_gap.py `required_images`)."""
    traits = traits_of(config)
    if traits.platform != "kubernetes":  # the components below all run on Kubernetes
        return frozenset()
    found = set()
    if traits.provisions_in_aws:
        found.add("cluster-autoscaler")
    if config.gpu_node_groups:
        found.add("nvidia-device-plugin")
        if dcgm_exporter_enabled(config):
            found.add("dcgm-exporter")
    if image_variant(config) == "efa":
        found.add("efa")
    found.update(name for name, on in (("prometheus", config.gpu.metrics.prometheus),
                                       ("grafana", config.gpu.metrics.grafana)) if on)
    modes = {workload.autoscaling.mode for workload in config.workloads.values()}
    if modes & {"scaledobject", "scaledjob"}:
        found.add("keda")  # it scales a PyTorchJob's Workers, or starts a ScaledJob's Jobs
    for workload in config.workloads.values():  # the kinds' operators (a ScaledJob's Jobs need none but KEDA)
        if workload.autoscaling.mode != "scaledjob":
            found.update(kind_traits(workload.kind).operators)
    if kueue_enabled(config):
        found.add("kueue")
        # The kinds teams may submit (tools/submit.py): their operators, so their CRDs exist.
        found.update(operator for kind in config.kueue.submit_kinds if kind in KUEUE_ADMITTED.names
                     for operator in kind_traits(kind).operators)
    return frozenset(found)


def submit_defaults(config: StackConfig, entry: Mapping[str, Any]) -> dict[str, Any]:
    """What `tools.submit` fills into a workload entry (raw keys, camelCase) that leaves them out, from its node
    group: `gpuResource: shared` with one slice where the group shares its GPUs (MPS, time-slicing) and the job is
    a single rank (NCCL refuses two ranks on one physical GPU, so a multi-rank job keeps whole GPUs and the config
    rules say so); `cpu`, `memory` and `shmSize` the pod's share of one node — the node's allocatable less the GPU
    node DaemonSets (the numbers Kueue's quota uses, `group_quota`) over its GPUs (or slices), times the GPUs (or
    slices) the pod asks for — so the pod fits the node (rules.py `_check_fit`) and the queue. `shmSize` is a
    quarter of that memory (it counts against it). A group whose nodes are not in the catalog (adopted clusters)
    gets no cpu/memory default. Keys `entry` sets are left out."""
    group = entry.get("nodeGroup")
    if group not in config.gpu_node_groups:
        return {}  # the config rules name the group problem
    defaults: dict[str, Any] = {}
    facts = config.node_facts(group)
    resource, replicas = gpu_resource_of(config, group)
    single_rank = (int(entry.get("numNodes", 1)) == 1 and not entry.get("elastic")
                   and int(entry.get("gpusPerNode") or facts.num_gpus) == 1)
    shared = entry.get("gpuResource", "shared" if resource == SHARED_GPU_RESOURCE and single_rank
                       else "whole") == "shared"
    if "gpuResource" not in entry and shared:
        defaults["gpuResource"] = "shared"
        if "gpusPerNode" not in entry:
            defaults["gpusPerNode"] = 1
    if traits_of(config).node_facts != "catalog":
        return defaults
    node_group = config.gpu_node_groups[group]
    per_node = smallest(instance_allocatable(t, node_group.disk_size_gib) for t in node_group.instance_types)
    units_per_node = facts.num_gpus * (replicas if shared else 1)
    units = int(entry.get("gpusPerNode") or (1 if shared else facts.num_gpus))
    fraction = min(1.0, units / units_per_node)
    millicores = int((per_node["cpu"] - GPU_NODE_DAEMONS["cpu"]) * 1000 * fraction)
    mebibytes = int((per_node["memory"] - GPU_NODE_DAEMONS["memory"]) * fraction // 2**20)
    for key, value in (("cpu", f"{millicores}m"), ("memory", f"{mebibytes}Mi"), ("shmSize", f"{mebibytes // 4}Mi")):
        if key not in entry:
            defaults[key] = value
    return defaults
