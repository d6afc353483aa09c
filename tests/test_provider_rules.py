"""Issue 29, classes 2 and 4: fields a provider would refuse together (or ignore), and times shorter than what they
wait for. Each rule reads a table with cited rows; these tests show that every table covers every value of the
schema's Literal fields it decides (a new value without a row fails here), and that a committed stack with one field
changed is refused at exactly that key path — derived from the committed stacks and the tables, not listed."""

from __future__ import annotations

import math
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from catalog import ec2_offerings
from catalog.fsx_lustre import LUSTRE_DEPLOYMENTS, takes_throughput
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from catalog.purchase_options import PURCHASE_OPTIONS
from catalog.startup_times import BASE_IMAGE_GB, EKS_CONTROL_PLANE_SECONDS
from catalog.versions import BASE_IMAGES
from stack_config import ConfigError, StackConfig
from stack_config import applicability as app
from stack_config.derived import configured_pods, kueue_enabled, pod_startup_floor
from stack_config.schema import GpuNodeGroupConfig, StorageConfig
from stack_config.storage_kinds import STORAGE_KINDS, shared_by_pods
from stages.config import parse_stack_config
from tests.test_applicability import STACKS, _raw, _set


def literal(model: type, name: str) -> tuple[Any, ...]:
    annotation = model.model_fields[name].annotation
    for candidate in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(candidate) is typing.Literal:
            return typing.get_args(candidate)
    raise AssertionError(f"{model.__name__}.{name} is not a Literal")


def paths_of(raw: dict[str, Any], stack: str, secrets: list[str]) -> list[str]:
    """The key paths of every problem (empty: accepted)."""
    try:
        parse_stack_config(raw, stack=stack, secret_keys=secrets)
    except ConfigError as error:
        return [problem.path for problem in error.problems]
    return []


def messages_of(raw: dict[str, Any], stack: str, secrets: list[str]) -> list[str]:
    try:
        parse_stack_config(raw, stack=stack, secret_keys=secrets)
    except ConfigError as error:
        return [str(problem) for problem in error.problems]
    return []


def config_of(stack: str) -> tuple[dict[str, Any], list[str], StackConfig]:
    raw, secrets = _raw(stack)
    return raw, secrets, parse_stack_config(raw, stack=stack, secret_keys=secrets)


def test_the_committed_stacks_stay_valid() -> None:
    for stack in STACKS:
        config_of(stack)


# ------------------------------------------------------------------------------------------ FSx for Lustre


def test_the_lustre_table_has_a_row_for_every_deployment_type_and_decides_every_throughput() -> None:
    assert set(LUSTRE_DEPLOYMENTS) == set(literal(StorageConfig, "fsx_deployment_type"))
    offered = {value for row in LUSTRE_DEPLOYMENTS.values() for value in row.throughputs}
    assert offered == set(literal(StorageConfig, "fsx_throughput_per_unit"))
    # The API's sentences, checked against the rows: 1200, 2400 and increments of 2400 (SSD); PERSISTENT_2 takes
    # 125/250/500/1000 and SCRATCH_2 none.
    for row in LUSTRE_DEPLOYMENTS.values():
        assert [row.valid_size(size) for size in (1200, 2400, 3600, 4800, 2000, 0)] == [True, True, False, True,
                                                                                         False, False]
    assert LUSTRE_DEPLOYMENTS["PERSISTENT_2"].throughputs == (125, 250, 500, 1000)
    assert not takes_throughput("SCRATCH_2")
    # The applicability table reads the same rows: a throughput applies exactly where a row takes one.
    where = app.APPLIES[StorageConfig]["fsx_throughput_per_unit"]
    types = dict(where.conditions)["storage.fsxDeploymentType"]
    assert set(types) == {name for name in LUSTRE_DEPLOYMENTS if takes_throughput(name)}


@pytest.mark.parametrize("deployment_type", literal(StorageConfig, "fsx_deployment_type"))
@pytest.mark.parametrize("throughput", literal(StorageConfig, "fsx_throughput_per_unit"))
def test_every_deployment_type_and_throughput_pair_is_decided_by_the_table(deployment_type: str,
                                                                          throughput: int) -> None:
    """prod (FSx for Lustre) with each (fsxDeploymentType, fsxThroughputPerUnit) written: accepted exactly when
    the type's row takes that throughput, else refused at storage.fsxThroughputPerUnit alone."""
    raw, secrets, _ = config_of("prod")
    planted = _set(_set(raw, "storage.fsxDeploymentType", deployment_type), "storage.fsxThroughputPerUnit",
                   throughput)
    paths = paths_of(planted, "prod", secrets)
    if throughput in LUSTRE_DEPLOYMENTS[deployment_type].throughputs:
        assert paths == []
    else:
        assert paths == ["storage.fsxThroughputPerUnit"]
    # Left unwritten, every deployment type is accepted (the default throughput is only sent where it is taken).
    unwritten = _set(raw, "storage", {key: value for key, value in raw["storage"].items()
                                      if key != "fsxThroughputPerUnit"} | {"fsxDeploymentType": deployment_type})
    assert paths_of(unwritten, "prod", secrets) == []


@pytest.mark.parametrize("deployment_type", literal(StorageConfig, "fsx_deployment_type"))
@pytest.mark.parametrize("size", [1200, 2400, 3600, 4800, 7200, 2000, 100])
def test_every_deployment_type_refuses_the_sizes_its_row_refuses(deployment_type: str, size: int) -> None:
    raw, secrets, _ = config_of("prod")
    storage = {key: value for key, value in raw["storage"].items() if key != "fsxThroughputPerUnit"}
    planted = _set(raw, "storage", storage | {"fsxDeploymentType": deployment_type, "sizeGib": size})
    messages = messages_of(planted, "prod", secrets)
    if LUSTRE_DEPLOYMENTS[deployment_type].valid_size(size):
        assert messages == []
    else:
        assert messages == [f"storage.sizeGib: {size} is not a valid FSx for Lustre size for {deployment_type}: "
                            "allowed 1200 or a multiple of 2400 GiB (FSx CreateFileSystem StorageCapacity)"]


# ------------------------------------------------------------------------------------------ purchase options


def _gpu_group(stack: str) -> tuple[dict[str, Any], list[str], str]:
    raw, secrets, config = config_of(stack)
    return raw, secrets, next(iter(config.gpu_node_groups))


def test_the_purchase_table_has_a_row_for_every_capacity_type() -> None:
    assert set(PURCHASE_OPTIONS) == set(literal(GpuNodeGroupConfig, "capacity_type"))
    for option in PURCHASE_OPTIONS.values():
        assert option.source
        assert option.instance_types is None or option.instance_types <= set(GPU_INSTANCE_TYPES), option.name
    # The EC2 user guide's list, read against the catalog: the p4d/p5 sizes it names, and not p4de or p5.4xlarge.
    blocks = PURCHASE_OPTIONS["CAPACITY_BLOCK"].instance_types
    assert blocks is not None and {"p4d.24xlarge", "p5.48xlarge"} <= blocks
    assert not blocks & {"p4de.24xlarge", "p5.4xlarge", "g6.xlarge"}


@pytest.mark.parametrize("stack", ["prod", "dev"])
@pytest.mark.parametrize("capacity_type", literal(GpuNodeGroupConfig, "capacity_type"))
def test_every_capacity_type_and_instance_type_is_decided_by_the_table(stack: str, capacity_type: str) -> None:
    """A committed EKS stack's first GPU group on each instance type of the catalog, bought each way (with the
    reservation the row needs): refused at that group's instanceTypes[0] exactly when the row doesn't sell it."""
    raw, secrets, group = _gpu_group(stack)
    option = PURCHASE_OPTIONS[capacity_type]
    entry = {key: value for key, value in raw["gpuNodeGroups"][group].items()
             if key not in ("capacityReservationId", "availabilityZone", "placementGroup", "efa")}
    entry["capacityType"] = capacity_type
    if option.reservation == "required":
        entry |= {"capacityReservationId": "cr-0123456789abcdef0", "availabilityZone": f"{raw['region']}a"}
    key = f"gpuNodeGroups.{group}.instanceTypes[0]"
    for instance_type in GPU_INSTANCE_TYPES:
        planted = _set(raw, f"gpuNodeGroups.{group}", entry | {"instanceTypes": [instance_type]})
        paths = paths_of(planted, stack, secrets)
        offered = option.instance_types is None or instance_type in option.instance_types
        # the offerings rule (class 3, tests/test_offerings.py) also refuses a type the Region doesn't sell on
        # demand; it leaves Capacity Blocks to the reservation
        in_region = (capacity_type == "CAPACITY_BLOCK" or raw["region"] not in ec2_offerings.KNOWN_REGIONS
                     or raw["region"] in ec2_offerings.OFFERED_IN[instance_type])
        assert (key in paths) is (not (offered and in_region)), (capacity_type, instance_type, paths)


@pytest.mark.parametrize("capacity_type", literal(GpuNodeGroupConfig, "capacity_type"))
@pytest.mark.parametrize("with_reservation", [True, False])
def test_every_capacity_type_needs_or_refuses_a_reservation_as_its_row_says(capacity_type: str,
                                                                            with_reservation: bool) -> None:
    raw, secrets, group = _gpu_group("prod")  # p5.48xlarge: sold every way
    option = PURCHASE_OPTIONS[capacity_type]
    entry = {key: value for key, value in raw["gpuNodeGroups"][group].items()
             if key != "capacityReservationId"} | {"capacityType": capacity_type,
                                                   "availabilityZone": f"{raw['region']}a"}  # a Capacity Block's too
    if with_reservation:
        entry["capacityReservationId"] = "cr-0123456789abcdef0"
    paths = paths_of(_set(raw, f"gpuNodeGroups.{group}", entry), "prod", secrets)
    wrong = (option.reservation == "refused" and with_reservation) or (option.reservation == "required"
                                                                        and not with_reservation)
    assert paths == ([f"gpuNodeGroups.{group}.capacityReservationId"] if wrong else []), paths


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_a_group_on_a_reservation_lists_only_the_reservations_instance_type(stack: str) -> None:
    raw, secrets, _config = config_of(stack)
    for group, entry in raw["gpuNodeGroups"].items():
        # two types EC2 sells On-Demand, of one architecture, the group's own first
        first = entry["instanceTypes"][0]
        other = next(name for name, facts in GPU_INSTANCE_TYPES.items()
                     if name != first and facts.architecture == GPU_INSTANCE_TYPES[first].architecture
                     and facts.num_gpus == GPU_INSTANCE_TYPES[first].num_gpus)
        reserved = {key: value for key, value in entry.items() if key not in ("placementGroup",)} | {
            "capacityType": "ON_DEMAND", "capacityReservationId": "cr-0123456789abcdef0",
            "availabilityZone": f"{raw['region']}a"}
        one = _set(raw, f"gpuNodeGroups.{group}", reserved | {"instanceTypes": [first]})
        two = _set(raw, f"gpuNodeGroups.{group}", reserved | {"instanceTypes": [first, other]})
        assert f"gpuNodeGroups.{group}.instanceTypes" not in paths_of(one, stack, secrets)
        messages = messages_of(two, stack, secrets)
        assert any(m.startswith(f"gpuNodeGroups.{group}.instanceTypes: ['{first}', '{other}'] with "
                                "capacityReservationId 'cr-0123456789abcdef0': a reservation is of one instance type")
                   for m in messages), messages


# ------------------------------------------------------------------------------------------ storage kinds

COMPANIONS = {"existing": {"existingStorageClass": "nfs-client"}, "nfs": {"nfsServer": "nfs.site", "nfsPath": "/x"},
              "host-path": {"hostPath": "/srv/training"}, "efs": {}, "fsx-lustre": {}, "none": {}}
"""The keys each kind requires (a test below keeps this complete)."""


def must_resume(config: StackConfig) -> list[str]:
    """Workloads whose checkpoints must outlive a pod (the where-work-is-kept rule's reasons)."""
    return [name for name, workload in config.workloads.items()
            if workload.entrypoint == "train" and workload.checkpoints == "keep"
            and (configured_pods(workload) > 1 or workload.elastic is not None
                 or workload.autoscaling.mode == "scaledobject" or config.lifecycle.protect)]


def test_the_storage_table_has_a_row_for_every_kind() -> None:
    assert set(STORAGE_KINDS) == set(literal(StorageConfig, "kind")) == set(COMPANIONS)
    import cluster_targets

    for row in STORAGE_KINDS.values():
        assert row.targets.names and set(row.targets.names) <= set(cluster_targets.TARGETS) and row.mounts
    # Only per-pod storage is never shared; the components mount ReadWriteMany for efs, fsx-lustre and existing.
    from components.shared_storage import claim_spec

    assert claim_spec(size_gib=1, storage_class="x", volume_name=None)["accessModes"] == ["ReadWriteMany"]
    assert [kind for kind in STORAGE_KINDS if not shared_by_pods(kind)] == ["none"]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", literal(StorageConfig, "kind"))
def test_every_storage_kind_on_every_committed_stack_is_decided_by_the_table(stack: str, kind: str) -> None:
    """Each committed stack with `storage` replaced by each kind (and the keys that kind needs): refused at
    storage.kind exactly when its cluster target can't mount it, or when it is per-pod and a workload must resume
    (then the message names the workload); accepted otherwise."""
    raw, secrets, config = config_of(stack)
    planted = _set(raw, "storage", {"kind": kind, **COMPANIONS[kind]})
    messages = messages_of(planted, stack, secrets)
    row = STORAGE_KINDS[kind]
    resuming = must_resume(config)
    refused = config.cluster.mode not in row.targets.names or (not shared_by_pods(kind) and bool(resuming))
    mine = [m for m in messages if m.startswith("storage.kind: ")]
    assert bool(mine) is refused, (stack, kind, messages)
    assert [m for m in messages if not m.startswith("storage.kind: ")] == [], messages
    if config.cluster.mode in row.targets.names and refused:
        assert any(f"workload {resuming[0]!r}" in m for m in mine), mine


# ------------------------------------------------------------------------------------------ start-up bounds


def test_every_base_image_flavour_has_a_size_row() -> None:
    assert set(BASE_IMAGE_GB) == set(BASE_IMAGES)


def _slowest(config: StackConfig, workloads: list[str] | None = None) -> int:
    return max(pod_startup_floor(config, config.workloads[name])[0] for name in (workloads or config.workloads))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_pods_ready_timeout_below_the_slowest_start_up_is_refused_at_its_key(stack: str) -> None:
    raw, secrets, config = config_of(stack)
    assert kueue_enabled(config)
    floor = _slowest(config)
    assert floor > 0
    below = _set(raw, "kueue.waitForPodsReadyTimeout", f"{floor - 1}s")
    messages = messages_of(below, stack, secrets)
    assert [m.split(":")[0] for m in messages] == ["kueue.waitForPodsReadyTimeout"], messages
    assert f"'{floor - 1}s' ({floor - 1} s) is shorter than a pod of workload" in messages[0]
    assert f"at least {floor} s = a GPU node's boot (80 s) + pulling the training image" in messages[0]
    assert f"use at least '{math.ceil(floor / 60)}m'" in messages[0]
    assert paths_of(_set(raw, "kueue.waitForPodsReadyTimeout", f"{floor}s"), stack, secrets) == []
    # With Kueue, the readiness gate's own timeout only waits for running nodes: its schema floor holds.
    assert paths_of(_set(raw, "gpu.readinessTimeoutSeconds", 60), stack, secrets) == []


def test_without_kueue_the_readiness_timeout_bounds_a_multi_node_pytorchjob() -> None:
    raw, secrets, config = config_of("prod")
    raw = _set(raw, "kueue", {"enabled": False})
    multi = [name for name, w in config.workloads.items() if w.kind == "pytorchjob"
             and (w.elastic is not None or w.num_nodes > 1)]
    assert multi
    floor = _slowest(config, multi)
    below = _set(raw, "gpu.readinessTimeoutSeconds", floor - 1)
    messages = messages_of(below, "prod", secrets)
    assert [m.split(":")[0] for m in messages] == ["gpu.readinessTimeoutSeconds"], messages
    assert messages[0].startswith(f"gpu.readinessTimeoutSeconds: {floor - 1} s is shorter than a pod of workload")
    assert paths_of(_set(raw, "gpu.readinessTimeoutSeconds", floor), "prod", secrets) == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_ephemeral_ttl_that_ends_before_anything_can_run_is_refused(stack: str) -> None:
    raw, secrets, config = config_of(stack)
    created = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    least = EKS_CONTROL_PLANE_SECONDS + _slowest(config)
    lifecycle = {"ephemeral": True, "protect": False, "createdAt": created}
    short = round((least - 60) / 3600, 3)
    messages = messages_of(_set(raw, "lifecycle", lifecycle | {"ttlHours": short}), stack, secrets)
    assert [m.split(":")[0] for m in messages] == ["lifecycle.ttlHours"], messages
    assert f"at least {least} s = creating the EKS control plane (900 s on average" in messages[0]
    enough = math.ceil(least / 36) / 100
    assert paths_of(_set(raw, "lifecycle", lifecycle | {"ttlHours": enough}), stack, secrets) == []


def test_a_renamed_key_is_refused_with_its_new_name() -> None:
    """`image.offline` became `image.airGap` ("offline" means the mocked plan): a stack file of before is told
    where its fields go now, not that the key is unknown; the same fields under the new name plan as before."""
    raw, secrets, config = config_of("edge")
    assert config.image.air_gap is not None
    old = {**raw, "image": {key if key != "airGap" else "offline": value for key, value in raw["image"].items()}}
    assert messages_of(old, "edge", secrets) == [
        "image.offline: is no longer read: it was renamed `image.airGap` (the same fields): 'offline' means the "
        "mocked plan"]
