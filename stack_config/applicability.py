"""Where each config field has an effect: one table for the whole schema, and the rule that reads it.

A stack file copied from another target or environment keeps keys that mean nothing where it now runs: an EKS
group's `instanceTypes` on a Swarm, `ttlHours` on a persistent stack, `nfsServer` with EFS storage. Each of those
would be accepted and silently do nothing. `APPLIES` says, for every field of every section (a test keeps it
complete), where the field applies — the cluster targets, workload kinds, storage kinds... — and
`check_applicability` refuses every field *written in the stack file* where it has no effect, naming the key,
the value, what the stack has instead and where the field would apply.

Conditions are key paths with the values under which the field applies; every condition of a `Where` must hold.
A path is read from the stack (`cluster.mode`), from the map entry the field is in (`@kind`: the workload or node
group), or from the field's own section (`.mode`). `SET`/`UNSET` test whether an optional value is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from pydantic.alias_generators import to_snake

from catalog.fsx_lustre import LUSTRE_DEPLOYMENTS
from stack_config.kinds import KUEUE_ADMITTED, WITH_CLEAN_POD_POLICY
from stack_config.problems import Problem
from stack_config.schema import (
    AirGapConfig,
    AutoscalingConfig,
    ClusterConfig,
    DeployerConfig,
    ElasticConfig,
    GpuConfig,
    GpuNodeGroupConfig,
    ImageConfig,
    KueueConfig,
    LifecycleConfig,
    MetricsConfig,
    NetworkConfig,
    SharingConfig,
    StackConfig,
    StorageConfig,
    SwarmConfig,
    SystemNodeGroupConfig,
    TaintConfig,
    WorkloadConfig,
    _Section,
)
from stack_config.targets import ADOPTED_KUBERNETES, ADOPTED_NODES, AIR_GAP, IN_AWS, ON_KUBERNETES, ON_SWARM
from stack_config.traits import Capable


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


SET = _Marker("SET")
"""The optional value is given (not None, not empty)."""
UNSET = _Marker("UNSET")
"""The optional value is not given."""


@dataclass(frozen=True)
class Where:
    """The contexts in which a field has an effect: every `(path, allowed values)` condition holds. No
    condition: everywhere. `why` says what happens elsewhere, when that isn't obvious from the condition."""

    conditions: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    why: str = ""

    def __and__(self, other: Where) -> Where:
        return Where(self.conditions + other.conditions, "; ".join(w for w in (self.why, other.why) if w))


ANYWHERE = Where()


def when(path: str, *values: Any, why: str = "") -> Where:
    return Where(((path, values),), why)


def on(targets: Capable, why: str = "") -> Where:
    """Applies on the cluster targets (`cluster.mode`) with these capabilities (stack_config/targets.py): the
    modes are those the targets register, so a new target's fields apply where its traits say."""
    return when("cluster.mode", targets, why=why)


def values_of(allowed: tuple[Any, ...]) -> tuple[Any, ...]:
    """A condition's allowed values, a set of targets (or kinds) expanded to their names; one that stands for
    nothing registered is an error (the registries were not imported), never an empty condition."""
    values: list[Any] = []
    for value in allowed:
        if isinstance(value, Capable):
            if not value.names:
                raise LookupError("an applicability condition names no registered target or kind: import "
                                  "cluster_targets and workload_kinds (they register their traits) first")
            values.extend(value.names)
        else:
            values.append(value)
    return tuple(values)


EKS = on(IN_AWS)
KUBERNETES = on(ON_KUBERNETES)
ADOPTED = on(ADOPTED_NODES, why="EKS nodes' facts come from the instance types")
WHOLE_SERVERS = ("a Swarm task owns whole servers (no MPS, no time-slicing: the NVIDIA runtime shows every GPU to "
                 "every container)")
OUR_TRAINER = when("@image", UNSET, why="it is an argument of our trainer, and `image` runs your own code (pass "
                                        "your program's flags in `command`)")

APPLIES: dict[type[_Section], dict[str, Where]] = {
    SystemNodeGroupConfig: {  # the section itself applies to EKS only (ClusterConfig.system_node_group)
        "instance_types": ANYWHERE, "min_size": ANYWHERE, "desired_size": ANYWHERE, "max_size": ANYWHERE,
        "disk_size_gib": ANYWHERE,
    },
    SwarmConfig: {  # the section itself applies to a Swarm only (ClusterConfig.swarm)
        "manager_host": ANYWHERE, "ssh_options": ANYWHERE, "gpu_resource_name": ANYWHERE,
        "converge_timeout_seconds": ANYWHERE, "encrypt_overlay": ANYWHERE, "cpu_stand_in": ANYWHERE,
    },
    DeployerConfig: {
        "access": EKS,
        "runner_labels": ANYWHERE,  # the workflows run every stack's jobs on them
        "cidrs": EKS,
        "transit_gateway_id": EKS & when("cluster.deployer.access", "transit-gateway"),
    },
    ClusterConfig: {
        "mode": ANYWHERE,
        "endpoint_public_access": EKS,
        "public_access_cidrs": EKS,
        "admin_role_arns": EKS,  # EKS access entries
        "preview_role_arns": EKS,
        "deployer_role_arn": EKS,
        "log_retention_days": EKS,  # the EKS control plane's log group
        "addon_versions": EKS,  # EKS managed add-ons
        "system_node_group": EKS,
        "context": on(ADOPTED_KUBERNETES),
        "gpu_node_taint": EKS,  # the platform taints only the nodes it creates (an existing site's are its own)
        "swarm": on(ON_SWARM),
        "deployer": ANYWHERE,
        "node_default_runtime": on(ADOPTED_KUBERNETES, why="EKS's NVIDIA AMIs default to the NVIDIA runtime; a Swarm "
                                                   "uses Docker's"),
    },
    NetworkConfig: {field: on(IN_AWS, why="the network section describes the VPC of an EKS cluster")
                    for field in NetworkConfig.model_fields},
    TaintConfig: {"value": ANYWHERE, "effect": ANYWHERE},
    SharingConfig: {
        "mode": ANYWHERE,
        "replicas": when(".mode", "mps", "time-slicing", why="mode 'none' gives whole GPUs"),
    },
    GpuNodeGroupConfig: {
        "instance_types": EKS, "capacity_type": EKS, "min_size": ANYWHERE, "desired_size": EKS,
        "max_size": ANYWHERE, "disk_size_gib": EKS, "ami_type": EKS,
        "labels": on(IN_AWS, why="the platform labels only the nodes it creates; select an adopted site's nodes "
                                "with nodeSelector"),
        "taints": EKS,
        "efa": EKS, "placement_group": EKS, "capacity_reservation_id": EKS, "availability_zone": EKS,
        "update_strategy": EKS,
        "mig_strategy": on(ON_KUBERNETES, why="MIG needs the NVIDIA device plugin on Kubernetes"),
        "sharing": on(ON_KUBERNETES, why=WHOLE_SERVERS),
        "gpus_per_node": ADOPTED, "gpu_model": ADOPTED, "architecture": ADOPTED,
        "node_selector": on(ADOPTED_NODES, why="EKS nodes carry the platform's own labels"),
    },
    # On a Swarm the swarm target requires these false (their defaults are Kubernetes'), so they stay allowed.
    MetricsConfig: {"dcgm_exporter": ANYWHERE, "prometheus": ANYWHERE, "grafana": ANYWHERE,
                    "retention": ANYWHERE},
    GpuConfig: {
        "sharing": on(ON_KUBERNETES, why=WHOLE_SERVERS), "node_feature_discovery": KUBERNETES, "metrics": ANYWHERE,
        "readiness_timeout_seconds": KUBERNETES,
        "runtime_class_name": on(ON_KUBERNETES, why="a RuntimeClass is a Kubernetes object; on a Swarm the "
                                                        "daemon's default runtime must be NVIDIA's"),
        "create_runtime_class": KUBERNETES,
    },
    AirGapConfig: {"site_registry": ANYWHERE, "prefix": ANYWHERE, "lock_file": ANYWHERE},
    ImageConfig: {
        "build": ANYWHERE,
        "platform": ANYWHERE,
        "registry": ANYWHERE,
        "repository_name": when("image.registry", "ecr"),
        "shared_repository": when("image.registry", "ecr"),
        "existing_registry": when("image.registry", "existing"),
        "existing_registry_username": when("image.registry", "existing"),
        "reference": ANYWHERE,
        "signed_digests": ANYWHERE,
        "base_image": when("image.build", True, why="the base is only read when the stack builds the image"),
        "keep_tagged_images": when("image.registry", "ecr", why="an ECR lifecycle policy"),
        "expire_untagged_days": when("image.registry", "ecr", why="an ECR lifecycle policy"),
        "air_gap": on(AIR_GAP, why="an air-gapped site adopts its cluster; an EKS cluster pulls from AWS "
                                               "and public registries"),
    },
    ElasticConfig: {"min_nodes": ANYWHERE, "max_nodes": ANYWHERE, "max_restarts": ANYWHERE},
    KueueConfig: {"enabled": ANYWHERE, "wait_for_pods_ready_timeout": KUBERNETES, "admission_budget": KUBERNETES,
                  # The cluster-autoscaler and the EC2 topology labels exist only where the stack owns the groups.
                  "atomic_provisioning": EKS, "topology": EKS, "topology_layer": EKS},
    AutoscalingConfig: {
        "mode": ANYWHERE,
        "min_replicas": when(".mode", "scaledobject", "scaledjob"),
        "max_replicas": when(".mode", "scaledobject", "scaledjob"),
        "gpu_utilization_threshold": when(".mode", "scaledobject"),
        "polling_interval_seconds": when(".mode", "scaledobject", "scaledjob"),
        "cooldown_period_seconds": when(".mode", "scaledobject", "scaledjob"),
    },
    WorkloadConfig: {
        "kind": ANYWHERE, "name": ANYWHERE, "node_group": ANYWHERE,
        "num_nodes": when("@elastic", UNSET, why="an elastic job runs elastic.minNodes..maxNodes"),
        "elastic": ANYWHERE, "gpus_per_node": ANYWHERE, "gpu_resource": ANYWHERE,
        "entrypoint": OUR_TRAINER,
        "bench_sizes": OUR_TRAINER & when("@entrypoint", "bench"),
        "model": OUR_TRAINER, "max_steps": OUR_TRAINER, "batch_size": OUR_TRAINER,
        "checkpoint_every": OUR_TRAINER, "extra_args": OUR_TRAINER,
        "cpu": ANYWHERE, "memory": ANYWHERE, "shm_size": ANYWHERE, "backoff_limit": ANYWHERE,
        "ttl_seconds_after_finished": when("@autoscaling.mode", "scaledjob", why=(
            "it would let the operator delete the finished job that Pulumi owns, and the next `pulumi up "
            "--refresh` would create it again and train again (finished jobs stay; cleanPodPolicy removes their "
            "pods)")),
        "clean_pod_policy": when("@kind", WITH_CLEAN_POD_POLICY, why="the PyTorchJob's runPolicy"),
        "termination_grace_period_seconds": ANYWHERE,
        "autoscaling": KUBERNETES,
        "topology": EKS & when("@kind", KUEUE_ADMITTED, why="Kueue admits only these kinds' gangs"),
        "image": ANYWHERE,
        "command": when("@image", SET, why="our trainer takes model, maxSteps, batchSize, checkpointEvery and "
                                           "extraArgs"),
        "ephemeral_storage": ANYWHERE,
        "checkpoints": when("@entrypoint", "train", why="a benchmark keeps no checkpoints"),
    },
    StorageConfig: {
        "kind": ANYWHERE,
        "existing_storage_class": when("storage.kind", "existing"),
        "size_gib": when("storage.kind", "efs", "fsx-lustre", "existing", why="the claim's size (FSx: the file "
                                                                               "system's)"),
        "fsx_deployment_type": when("storage.kind", "fsx-lustre"),
        # "This option is only valid for PERSISTENT_1 and PERSISTENT_2 deployment types" (FSx API,
        # LustreFileSystemConfiguration.PerUnitStorageThroughput); components/shared_storage.py drops it otherwise.
        # The deployment types that take one: catalog/fsx_lustre.py.
        "fsx_throughput_per_unit": when("storage.kind", "fsx-lustre") & when(
            "storage.fsxDeploymentType", *(name for name, row in LUSTRE_DEPLOYMENTS.items() if row.throughputs),
            why="that deployment type's throughput is fixed (SCRATCH_2: 200 MB/s/TiB baseline)"),
        "nfs_server": when("storage.kind", "nfs"),
        "nfs_path": when("storage.kind", "nfs"),
        "nfs_options": when("storage.kind", "nfs"),
        "host_path": when("storage.kind", "host-path"),
        "mount_path": when("storage.kind", "efs", "fsx-lustre", "existing", "nfs", "host-path",
                           why="kind 'none' mounts no shared volume"),
    },
    LifecycleConfig: {
        "ephemeral": ANYWHERE, "protect": ANYWHERE,
        "ttl_hours": when("lifecycle.ephemeral", True),
        "created_at": when("lifecycle.ephemeral", True),
        "kms_deletion_window_days": ANYWHERE,
        "max_gpu_node_hours": when("lifecycle.ephemeral", True),
    },
}
"""Section model → field → where it applies. Every field of every section has an entry (tests/test_applicability.py)."""

TOP_SECTIONS: dict[str, str] = {"cluster": "cluster", "network": "network", "gpu": "gpu", "image": "image",
                                "kueue": "kueue", "storage": "storage", "lifecycle": "lifecycle"}
"""Top-level key → StackConfig attribute of the sections walked."""
MAP_SECTIONS: dict[str, str] = {"gpuNodeGroups": "gpu_node_groups", "workloads": "workloads"}


def check_applicability(config: StackConfig, failed: Iterable[str] = (), blocked: Iterable[str] = ()
                        ) -> Iterator[Problem]:
    """Every field written in the stack file where it has no effect (see the module's docstring). Sections that
    failed to parse are not walked, and a condition that reads one, or a key in `blocked` (invalid, or reported
    by another rule), is not decided."""
    failed = set(failed)
    blocked = tuple(blocked)
    for key, attr in TOP_SECTIONS.items():
        if key not in failed:
            yield from _walk(config, getattr(config, attr), key, (None, ""), failed, blocked)
    for key, attr in MAP_SECTIONS.items():
        if key in failed:
            continue
        for name, entry in getattr(config, attr).items():
            yield from _walk(config, entry, f"{key}.{name}", (entry, f"{key}.{name}"), failed, blocked)


def _walk(config: StackConfig, model: BaseModel, path: str, entry: tuple[BaseModel | None, str], failed: set[str],
          blocked: tuple[str, ...]) -> Iterator[Problem]:
    """The fields of `model` (at key path `path`, inside the map entry `entry`: its model and key path)."""
    table = APPLIES[type(model)]
    for name, field in type(model).model_fields.items():
        key = f"{path}.{field.alias or name}"
        value = getattr(model, name)
        if name in model.model_fields_set and key not in blocked:
            unmet = _unmet(table[name], config, (model, path), entry, failed, blocked)
            if unmet:
                yield Problem(key, _message(value, table[name], (model, path), entry, unmet))
                continue  # what is inside a field that doesn't apply doesn't apply either
        if isinstance(value, BaseModel):
            yield from _walk(config, value, key, entry, failed, blocked)
        elif isinstance(value, Mapping):
            for item_key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _walk(config, item, f"{key}.{item_key}", entry, failed, blocked)


_UNDECIDED = object()


def _full(path: str, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str]) -> str:
    """A condition's key path from the top of the stack file (`.mode` in gpu.sharing: `gpu.sharing.mode`)."""
    if path.startswith("@"):
        return f"{entry[1]}.{path[1:]}"
    if path.startswith("."):
        return f"{model[1]}{path}"
    return path


def _unmet(where: Where, config: StackConfig, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
           failed: set[str], blocked: tuple[str, ...]) -> list[tuple[str, tuple[Any, ...], Any]]:
    """The conditions that don't hold, with the value found (none when one can't be decided)."""
    unmet = []
    for path, allowed in where.conditions:
        actual = _resolve(path, config, model, entry, failed, blocked)
        if actual is _UNDECIDED:
            return []
        if not _matches(actual, allowed):
            unmet.append((path, allowed, actual))
    return unmet


def _resolve(path: str, config: StackConfig, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
             failed: set[str], blocked: tuple[str, ...]) -> Any:
    node: Any
    if path.startswith("@"):
        (node, base), parts = entry, path[1:].split(".")
    elif path.startswith("."):
        (node, base), parts = model, path[1:].split(".")
    else:
        (top, *parts), base = path.split("."), ""
        if top in failed:
            return _UNDECIDED
        node = getattr(config, TOP_SECTIONS.get(top, top))
        parts = [top, *parts][1:]
        base = top
    full = ".".join([base, *parts])
    if any(full == b or full.startswith(b + ".") for b in blocked):
        return _UNDECIDED
    for part in parts:
        if node is None:
            return None
        node = getattr(node, to_snake(part))
    return node


def _matches(actual: Any, allowed: tuple[Any, ...]) -> bool:
    given = actual is not None and actual != () and actual != {} and actual != ""
    for value in allowed:
        if isinstance(value, Capable):
            if actual in value:
                return True
            continue
        if (value is SET and given) or (value is UNSET and not given) or value is actual or (
                not isinstance(value, _Marker) and not isinstance(value, bool) and value == actual):
            return True
    return False


def _describe(conditions: tuple[tuple[str, tuple[Any, ...]], ...]) -> str:
    """`where cluster.mode is 'eks' and storage.kind is 'nfs'`, `with image set`, `without elastic`."""
    parts: list[str] = []
    for path, allowed in conditions:
        shown = path.lstrip("@.")
        if allowed == (SET,):
            parts.append(f"with {shown} set")
        elif allowed == (UNSET,):
            parts.append(f"without {shown}")
        else:
            values = " or ".join(str(v).lower() if isinstance(v, bool) else repr(v) for v in values_of(allowed))
            where = "" if parts and parts[-1].startswith("where ") else "where "
            parts.append(f"{where}{shown} is {values}")
    return " and ".join(parts)


def describe(where: Where) -> str:
    """Where a field applies, in words (the config reference's "applies" column)."""
    return _describe(where.conditions) if where.conditions else "everywhere"


def _shown(actual: Any) -> str:
    """A value as the stack file writes it (YAML's true, a list, an ISO-8601 time)."""
    if isinstance(actual, bool):
        return str(actual).lower()
    if actual is None or actual == () or actual == {}:
        return "unset"
    if isinstance(actual, datetime):
        return repr(actual.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if isinstance(actual, tuple):
        return repr(list(actual))
    return repr(actual) if not isinstance(actual, BaseModel) else "set"


def _message(value: Any, where: Where, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
             unmet: list[tuple[str, tuple[Any, ...], Any]]) -> str:
    shown = "this section" if isinstance(value, BaseModel) else _shown(value)
    applies = _describe(tuple((_full(path, model, entry), allowed) for path, allowed in where.conditions))
    here = ", ".join(f"{_full(path, model, entry)} is {_shown(actual)}" for path, _, actual in unmet)
    why = f"; {where.why}" if where.why else ""
    return f"{shown} has no effect here: only applies {applies} (here {here}){why}; remove it"
