"""Rules over Kubernetes objects the program applies directly, and over GPU sharing.

Pod templates are read from Pods, PodTemplates, Jobs, CronJobs, Deployments/StatefulSets/DaemonSets/
ReplicaSets, PyTorchJobs, DLRover ElasticJobs and KEDA ScaledJobs. Helm releases are out of scope for the
pod rules (their objects are rendered by the chart) except the device plugin's sharing config.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from .graph import inputs
from .model import (
    SECRET,
    Facts,
    Finding,
    Record,
    as_list,
    as_number,
    get_path,
    is_computed,
    is_false,
    is_true,
)

HELM_RELEASE_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v4:Chart")
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE = "kubernetes:core/v1:Service"
PYTORCH_JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
ELASTIC_JOB = "kubernetes:elastic.iml.github.io/v1alpha1:ElasticJob"
SHARED_GPU = "nvidia.com/gpu.shared"
PSS_ENFORCE = "pod-security.kubernetes.io/enforce"

# Only the GPU device plugin's namespace (device plugin, GFD, MPS control daemon) may run privileged pods:
# they need host paths (/var/lib/kubelet/device-plugins) and hostPID/hostIPC for MPS.
DEVICE_PLUGIN_NAMESPACE = re.compile(r"(^|-)(nvidia-)?device-plugins?($|-)|^nvidia($|-)")
# The FSx directory setup Job (components/shared_storage.py, SETUP_NAMESPACE) must chown as root. Only there, and
# only a container that drops ALL and keeps no more than these capabilities without escalation, may run as uid 0.
STORAGE_SETUP_NAMESPACE = "gtp-storage-setup"
STORAGE_SETUP_CAPABILITIES = frozenset({"CHOWN", "DAC_OVERRIDE", "FOWNER"})
DIGEST_REFERENCE = re.compile(r"@sha256:[0-9a-f]{64}$")
# NVIDIA device plugin 0.17+: MPS needs compute capability >= 7.5 and allows at most 48 clients per GPU.
MPS_MIN_REPLICAS, MPS_MAX_REPLICAS = 2, 48
NPROC_FLAG = re.compile(r"--nproc[_-]per[_-]node(?:=|\s+)(\S+)")

# Pod template locations per kind: "<path to pod spec>"; "*" iterates a mapping of replica roles.
POD_SPEC_PATHS = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:core/v1:PodTemplate": ("template.spec",),
    "kubernetes:batch/v1:Job": ("spec.template.spec",),
    "kubernetes:batch/v1:CronJob": ("spec.jobTemplate.spec.template.spec",),
    "kubernetes:apps/v1:Deployment": ("spec.template.spec",),
    "kubernetes:apps/v1:StatefulSet": ("spec.template.spec",),
    "kubernetes:apps/v1:DaemonSet": ("spec.template.spec",),
    "kubernetes:apps/v1:ReplicaSet": ("spec.template.spec",),
    PYTORCH_JOB: ("spec.pytorchReplicaSpecs.*.template.spec",),
    ELASTIC_JOB: ("spec.replicaSpecs.*.template.spec",),
    "kubernetes:keda.sh/v1alpha1:ScaledJob": ("spec.jobTargetRef.template.spec",),
    # Kubeflow Trainer v2: a TrainJob's pods are its runtime's replicated jobs' pod templates.
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime": (
        "spec.template.spec.replicatedJobs[*].template.spec.template.spec",),
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime": (
        "spec.template.spec.replicatedJobs[*].template.spec.template.spec",),
}


def _obj(record: Record, path: str, default: Any = None) -> Any:
    return get_path(inputs(record), path, default)


def pod_specs(record: Record) -> list[tuple[str, Mapping]]:
    """(path, pod spec) for every pod template in the object."""
    found = []
    for pattern in POD_SPEC_PATHS.get(str(record.get("type")), ()):
        head, listed, tail = pattern.partition("[*].")
        if listed:  # a list of named entries (JobSet's replicatedJobs)
            for index, entry in enumerate(as_list(_obj(record, head))):
                spec = get_path(entry, tail) if isinstance(entry, Mapping) else None
                if isinstance(spec, Mapping):
                    found.append((f"{head}[{entry.get('name') or index}].{tail}", spec))
            continue
        head, star, tail = pattern.partition(".*.")
        if not star:
            spec = _obj(record, pattern)
            if isinstance(spec, Mapping):
                found.append((pattern, spec))
            continue
        roles = _obj(record, head)
        if isinstance(roles, Mapping):
            for role, replica in sorted(roles.items()):
                spec = get_path(replica, tail)
                if isinstance(spec, Mapping):
                    found.append((f"{head}.{role}.{tail}", spec))
    return found


def containers(spec_path: str, spec: Mapping) -> list[tuple[str, Mapping]]:
    found = []
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(as_list(spec.get(kind))):
            if isinstance(container, Mapping):
                label = container.get("name") or index
                found.append((f"{spec_path}.{kind}[{label}]", container))
    return found


def namespace_of(record: Record) -> str | None:
    namespace = _obj(record, "metadata.namespace")
    return namespace if isinstance(namespace, str) else None


def in_device_plugin_namespace(record: Record) -> bool:
    namespace = namespace_of(record)
    return bool(namespace and DEVICE_PLUGIN_NAMESPACE.search(namespace))


def _each_container(record: Record) -> Iterator[tuple[str, Mapping, Mapping]]:
    for spec_path, spec in pod_specs(record):
        for path, container in containers(spec_path, spec):
            yield path, container, spec


def _effective(container: Mapping, spec: Mapping, field: str) -> Any:
    value = get_path(container, f"securityContext.{field}")
    return value if value is not None else get_path(spec, f"securityContext.{field}")


# ---------------------------------------------------------------- pod security


def _least_privilege_root(record: Record, container: Mapping) -> bool:
    """A root container the storage setup namespace allows: ALL dropped, only chown/chmod capabilities added, no
    privilege escalation, not privileged."""
    if namespace_of(record) != STORAGE_SETUP_NAMESPACE:
        return False
    added = {str(cap) for cap in as_list(get_path(container, "securityContext.capabilities.add"))}
    return ("ALL" in as_list(get_path(container, "securityContext.capabilities.drop"))
            and added <= STORAGE_SETUP_CAPABILITIES
            and is_false(get_path(container, "securityContext.allowPrivilegeEscalation"))
            and not is_true(get_path(container, "securityContext.privileged")))


def k8s_run_as_non_root(record: Record, facts: Facts) -> Iterator[Finding]:
    for path, container, spec in _each_container(record):
        if _least_privilege_root(record, container):
            continue
        value = _effective(container, spec, "runAsNonRoot")
        if not is_true(value):
            yield Finding(f"{path}.securityContext.runAsNonRoot", value,
                          "must be true (here or in the pod securityContext)")
        user = _effective(container, spec, "runAsUser")
        if as_number(user) == 0:
            yield Finding(f"{path}.securityContext.runAsUser", user, "must not be 0 (root)")


def k8s_read_only_root_filesystem(record: Record, facts: Facts) -> Iterator[Finding]:
    for path, container, _ in _each_container(record):
        value = get_path(container, "securityContext.readOnlyRootFilesystem")
        if not is_true(value):
            yield Finding(f"{path}.securityContext.readOnlyRootFilesystem", value,
                          "must be true; mount an emptyDir for scratch space")


def k8s_drop_all_capabilities(record: Record, facts: Facts) -> Iterator[Finding]:
    for path, container, _ in _each_container(record):
        drop = get_path(container, "securityContext.capabilities.drop")
        if "ALL" not in as_list(drop):
            yield Finding(f"{path}.securityContext.capabilities.drop", drop, 'must include "ALL"')


def k8s_no_privilege_escalation(record: Record, facts: Facts) -> Iterator[Finding]:
    if in_device_plugin_namespace(record):
        return
    for path, container, _ in _each_container(record):
        escalation = get_path(container, "securityContext.allowPrivilegeEscalation")
        if not is_false(escalation):
            yield Finding(f"{path}.securityContext.allowPrivilegeEscalation", escalation, "must be false")
        privileged = get_path(container, "securityContext.privileged")
        if not (privileged is None or is_false(privileged)):
            yield Finding(f"{path}.securityContext.privileged", privileged, "must not be true")


def k8s_seccomp_runtime_default(record: Record, facts: Facts) -> Iterator[Finding]:
    for path, container, spec in _each_container(record):
        value = _effective(container, spec, "seccompProfile.type")
        if value != "RuntimeDefault":
            yield Finding(f"{path}.securityContext.seccompProfile.type", value,
                          'must be "RuntimeDefault" (here or in the pod securityContext)')


def k8s_no_host_namespaces(record: Record, facts: Facts) -> Iterator[Finding]:
    if in_device_plugin_namespace(record):
        return
    for spec_path, spec in pod_specs(record):
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            value = spec.get(field)
            if not (value is None or is_false(value)):
                yield Finding(f"{spec_path}.{field}", value,
                              "host namespaces are allowed only in the device-plugin namespace")


def k8s_no_host_path(record: Record, facts: Facts) -> Iterator[Finding]:
    if in_device_plugin_namespace(record):
        return
    for spec_path, spec in pod_specs(record):
        for index, volume in enumerate(as_list(spec.get("volumes"))):
            if isinstance(volume, Mapping) and volume.get("hostPath") is not None:
                label = volume.get("name") or index
                yield Finding(f"{spec_path}.volumes[{label}].hostPath", volume.get("hostPath"),
                              "hostPath volumes are allowed only in the device-plugin namespace")


_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIXES = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def parse_quantity(value: Any) -> Any:
    """A Kubernetes quantity as a number ("500m" → 0.5, "1Gi" → 1073741824); unparseable values as given."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if match and match.group(2) in _SUFFIXES:
            return float(match.group(1)) * _SUFFIXES[match.group(2)]
    return value


def k8s_requests_equal_limits(record: Record, facts: Facts) -> Iterator[Finding]:
    """Guaranteed QoS: every container sets requests and limits, equal for every resource."""
    for path, container, _ in _each_container(record):
        requests = get_path(container, "resources.requests")
        limits = get_path(container, "resources.limits")
        if is_computed(requests) or is_computed(limits):
            continue
        if not isinstance(requests, Mapping) or not requests:
            yield Finding(f"{path}.resources.requests", requests, "set requests equal to limits")
            continue
        if not isinstance(limits, Mapping) or not limits:
            yield Finding(f"{path}.resources.limits", limits, "set limits equal to requests")
            continue
        for key in sorted(set(requests) | set(limits)):
            wanted, got = requests.get(key), limits.get(key)
            if is_computed(wanted) or is_computed(got):
                continue
            if parse_quantity(wanted) != parse_quantity(got):
                yield Finding(f"{path}.resources.requests.{key}", wanted, f"differs from limits.{key} = {got!r}")


def _images(record: Record) -> Iterator[tuple[str, Any]]:
    for path, container, _ in _each_container(record):
        yield f"{path}.image", container.get("image")


def k8s_image_by_digest(record: Record, facts: Facts) -> Iterator[Finding]:
    for path, image in _images(record):
        if is_computed(image):
            continue
        if not (isinstance(image, str) and DIGEST_REFERENCE.search(image)):
            yield Finding(path, image, "reference images by digest (<repo>@sha256:<64 hex>), not by tag")


def k8s_image_from_stack_registry(record: Record, facts: Facts) -> Iterator[Finding]:
    if not facts.registry:
        return
    prefix = facts.registry.rstrip("/")
    for path, image in _images(record):
        if is_computed(image):
            continue
        if not (isinstance(image, str) and image.startswith(prefix)
                and (len(image) == len(prefix) or image[len(prefix)] in "/@:")):
            yield Finding(path, image, f"images must come from the stack's registry {prefix!r}")


def k8s_no_loadbalancer_on_ephemeral(record: Record, facts: Facts) -> Iterator[Finding]:
    """LoadBalancer Services create ELBs and ENIs outside the stack that block VPC deletion on destroy."""
    if record.get("type") != SERVICE or not facts.ephemeral:
        return
    service_type = _obj(record, "spec.type")
    if service_type == "LoadBalancer" or is_computed(service_type):
        yield Finding("spec.type", service_type, "no LoadBalancer Services on ephemeral stacks; use ClusterIP")


def k8s_privileged_namespace_allow_list(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != NAMESPACE:
        return
    labels = _obj(record, "metadata.labels")
    level = labels.get(PSS_ENFORCE) if isinstance(labels, Mapping) else None  # the key contains dots
    if level != "privileged":
        return
    name = _obj(record, "metadata.name")
    name = name if isinstance(name, str) and not is_computed(name) else str(record.get("name"))
    if not DEVICE_PLUGIN_NAMESPACE.search(name):
        yield Finding(f"metadata.labels.{PSS_ENFORCE}", level,
                      f"namespace '{name}' may not be privileged; only the GPU device-plugin namespace may")


# ---------------------------------------------------------------- GPU sharing


def _requests_shared_gpu(record: Record) -> list[str]:
    paths = []
    for path, container, _ in _each_container(record):
        for section in ("requests", "limits"):
            resources = get_path(container, f"resources.{section}")
            if isinstance(resources, Mapping) and SHARED_GPU in resources:
                paths.append(f"{path}.resources.{section}")
                break
    return paths


def _procs_per_pod(record: Record) -> float | None:
    """Ranks per pod: nprocPerNode / elasticPolicy.nProcPerNode / a --nproc-per-node flag; None = unknown."""
    procs: float | None = 1.0
    for value in (_obj(record, "spec.nprocPerNode"), _obj(record, "spec.elasticPolicy.nProcPerNode")):
        if value is None or value in ("auto", "gpu"):
            continue  # "auto"/"gpu" = one rank per requested GPU; a shared slice is one GPU
        number = as_number(value)
        procs = max(procs or 1.0, number) if number is not None else None
    for _path, container, _ in _each_container(record):
        words = " ".join(str(w) for w in as_list(container.get("command")) + as_list(container.get("args")))
        for flag in NPROC_FLAG.findall(words):
            number = as_number(flag)
            if flag in ("auto", "gpu"):
                continue
            procs = None if number is None or procs is None else max(procs, number)
    return procs


def total_ranks(record: Record) -> float | None:
    """World size a PyTorchJob/ElasticJob can reach; None when it cannot be read (replicas computed)."""
    roles_path = "spec.pytorchReplicaSpecs" if record.get("type") == PYTORCH_JOB else "spec.replicaSpecs"
    roles = _obj(record, roles_path)
    if not isinstance(roles, Mapping):
        return None
    pods = 0.0
    workers = 0.0
    for role, replica in roles.items():
        count = as_number(get_path(replica, "replicas", 1))
        if count is None:
            return None
        pods += count
        if str(role).lower() == "worker":
            workers = count
    max_replicas = as_number(_obj(record, "spec.elasticPolicy.maxReplicas"))
    if max_replicas is not None:
        pods += max(0.0, max_replicas - workers)
    procs = _procs_per_pod(record)
    return None if procs is None else pods * procs


def gpu_shared_single_rank(record: Record, facts: Facts) -> Iterator[Finding]:
    """NCCL refuses two ranks on one physical GPU even under MPS: multi-rank jobs must not use shared slices."""
    if record.get("type") not in (PYTORCH_JOB, ELASTIC_JOB):
        return
    shared = _requests_shared_gpu(record)
    if not shared:
        return
    ranks = total_ranks(record)
    if ranks is None or ranks > 1:
        yield Finding(shared[0], SHARED_GPU,
                      f"job has {('unknown' if ranks is None else int(ranks))} ranks; multi-rank jobs must "
                      "request whole GPUs (nvidia.com/gpu), not shared slices")


def _device_plugin_configs(record: Record) -> Iterator[tuple[str, Any]]:
    if record.get("type") not in HELM_RELEASE_TYPES:
        return
    chart = _obj(record, "chart")
    if not (isinstance(chart, str) and "nvidia-device-plugin" in chart):
        return
    config_map = _obj(record, "values.config.map")
    if is_computed(config_map):
        yield "values.config.map", config_map
        return
    if isinstance(config_map, Mapping):
        for name, text in sorted(config_map.items()):
            yield f"values.config.map.{name}", text


def _parse_sharing(field: str, text: Any) -> tuple[Mapping | None, Finding | None]:
    if not isinstance(text, str) or is_computed(text) or text == SECRET:
        return None, Finding(field, text, "the sharing config must be a known YAML string to be verified")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return None, Finding(field, text, f"is not valid YAML: {error}")
    sharing = get_path(document, "sharing")
    return (sharing if isinstance(sharing, Mapping) else {}), None


def gpu_mps_replicas_range(record: Record, facts: Facts) -> Iterator[Finding]:
    for field, text in _device_plugin_configs(record):
        sharing, problem = _parse_sharing(field, text)
        if problem:
            yield problem
            continue
        for index, resource in enumerate(as_list(get_path(sharing, "mps.resources"))):
            replicas = get_path(resource, "replicas")
            number = as_number(replicas)
            if number is None or not (MPS_MIN_REPLICAS <= number <= MPS_MAX_REPLICAS):
                yield Finding(f"{field}: sharing.mps.resources[{index}].replicas", replicas,
                              f"must be within {MPS_MIN_REPLICAS}..{MPS_MAX_REPLICAS} (MPS allows at most 48 "
                              "clients per GPU; 1 is no sharing)")


def gpu_sharing_renamed_resource(record: Record, facts: Facts) -> Iterator[Finding]:
    """Shared slices are advertised as nvidia.com/gpu.shared so whole-GPU requests never land on a slice."""
    for field, text in _device_plugin_configs(record):
        sharing, problem = _parse_sharing(field, text)
        if problem:
            continue  # gpu-mps-replicas-range reports unreadable configs
        for mode in ("mps", "timeSlicing"):
            block = get_path(sharing, mode)
            if isinstance(block, Mapping) and block.get("resources"):
                if not is_true(block.get("renameByDefault")):
                    yield Finding(f"{field}: sharing.{mode}.renameByDefault", block.get("renameByDefault"),
                                  f"must be true so shared slices are advertised as {SHARED_GPU}")


TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
CLUSTER_TRAINING_RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
EFA = "vpc.amazonaws.com/efa"
PER_NODE_REQUESTS = "spec.trainer.resourcesPerNode.requests"


def _accelerators(resources: Any) -> set[str]:
    """GPU (any name containing `gpu`, whole or shared) and EFA resource names in a requests/limits map."""
    return {str(k) for k in resources if "gpu" in str(k) or str(k) == EFA} if isinstance(resources, Mapping) else set()


def _runtime_node_accelerators(runtime: Record) -> set[str]:
    """GPU/EFA resources the runtime's `node` container asks for (trainer@v2.3.0 applies resourcesPerNode to the
    container named `node` only: pkg/constants/constants.go `Node`)."""
    wanted: set[str] = set()
    for job in as_list(_obj(runtime, "spec.template.spec.replicatedJobs")):
        for container in as_list(get_path(job, "template.spec.template.spec.containers")):
            if isinstance(container, Mapping) and container.get("name") == "node":
                for section in ("requests", "limits"):
                    wanted |= _accelerators(get_path(container, f"resources.{section}"))
    return wanted


def trainjob_resources_per_node(stack: Any, facts: Facts) -> Iterator[Finding]:
    """A TrainJob states its GPU and EFA requests in `spec.trainer.resourcesPerNode`.

    Trainer up to v2.2.1 REPLACES the `node` container's resources with `resourcesPerNode`
    (trainer@v2.2.1 pkg/runtime/core/trainingruntime.go:182), and Kueue v0.19.2 computes quota with that code;
    v2.3.0 merges per key, but with no GPU there the Torch plugin's `numProcPerNode: auto` counts CPUs
    (pkg/runtime/framework/plugins/torch/torch.go:121-135). A request left only in the runtime silently vanishes:
    no GPU, or no EFA and NCCL falls back to TCP.
    """
    runtimes = {str(_obj(r, "metadata.name")): r for r in stack.of_type(CLUSTER_TRAINING_RUNTIME)}
    for job in stack.of_type(TRAIN_JOB):
        requests = _obj(job, PER_NODE_REQUESTS)
        have = _accelerators(requests)
        if not any("gpu" in name for name in have):
            yield Finding(PER_NODE_REQUESTS, requests,
                          "a TrainJob must request its GPUs (nvidia.com/gpu or a shared GPU resource) in "
                          "resourcesPerNode.requests: the runtime's requests are replaced (Trainer <= v2.2.1, "
                          "Kueue v0.19.2) and numProcPerNode 'auto' counts CPUs without one", record=job)
        runtime = runtimes.get(str(_obj(job, "spec.runtimeRef.name")))
        missing = sorted(_runtime_node_accelerators(runtime) - have) if runtime is not None else []
        if missing:
            yield Finding(PER_NODE_REQUESTS, requests,
                          f"missing {', '.join(missing)} that runtime '{_obj(job, 'spec.runtimeRef.name')}' "
                          f"requests: put every GPU and {EFA} request in resourcesPerNode.requests, or it "
                          "vanishes (EFA lost: NCCL falls back to TCP)", record=job)
