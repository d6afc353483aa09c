"""What each `storage.kind` gives a job's pods: where it exists and whether every pod of a job sees one directory.

A job of several pods (numNodes > 1, elastic, scaled by KEDA) writes one checkpoint together: the trainer's DCP
checkpoint has every rank write its shards into the same step directory and rank 0 write the metadata and the
completion marker, and on resume every rank reads them (images/trainer/trainer/checkpoint.py). That needs a volume
every pod of the job mounts at once from whichever node it runs on: ReadWriteMany. One row per kind (a test keeps
the rows and the schema's Literal in step), read by the cluster targets (where a kind exists) and by
stack_config/rules.py `_check_where_work_is_kept` (a per-pod kind under a job that must resume is refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stack_config.targets import ANY_TARGET, IN_AWS, ON_KUBERNETES, ON_SWARM, traits_for
from stack_config.traits import Capable

Sharing = Literal["per-pod", "read-write-many", "site-declared"]


@dataclass(frozen=True)
class StorageKind:
    """One `storage.kind`: the cluster targets it exists on, and what the code mounts."""

    targets: Capable
    """The cluster targets where the kind can be created or mounted, by capability (stack_config/targets.py)."""
    sharing: Sharing
    """`per-pod`: each pod (Swarm: task) has its own, gone with it. `read-write-many`: one volume every pod mounts
    at once, from any node. `site-declared`: the same, provided the site's part holds (it can't be checked
    offline; the row says what)."""
    mounts: str
    """What the code mounts, and where that is decided."""


STORAGE_KINDS: dict[str, StorageKind] = {
    "none": StorageKind(
        ANY_TARGET, "per-pod",
        "an emptyDir per pod (components/shared_storage.py `empty_dir_volume`); on a Swarm an anonymous node-local "
        "volume per task (components/swarm_training.py `storage_mount`)"),
    "efs": StorageKind(
        IN_AWS, "read-write-many",
        "a static PersistentVolume of the stack's EFS file system, accessModes ReadWriteMany, through the EFS CSI "
        "driver (components/shared_storage.py `persistent_volume_spec`); created in AWS next to an EKS cluster"),
    "fsx-lustre": StorageKind(
        IN_AWS, "read-write-many",
        "a static PersistentVolume of the stack's FSx for Lustre file system, accessModes ReadWriteMany, through the "
        "FSx CSI driver (components/shared_storage.py `persistent_volume_spec`); created in AWS next to an EKS "
        "cluster"),
    "existing": StorageKind(
        ON_KUBERNETES, "site-declared",
        "a claim asking ReadWriteMany of `existingStorageClass` (components/shared_storage.py `claim_spec`): a "
        "class whose provisioner can't grant it (k3s' local-path, EBS) leaves the claim Pending and no training pod "
        "starts; the plan's simulation records the class as an assumption (verify/simulate/claims.py)"),
    "nfs": StorageKind(
        ON_SWARM, "read-write-many",
        "the NFS export mounted by Docker's local volume driver on every server (components/swarm_training.py "
        "`storage_mount`); Pod Security 'restricted' forbids nfs volumes on Kubernetes"),
    "host-path": StorageKind(
        ON_SWARM, "site-declared",
        "a bind mount of `hostPath` on each server (components/swarm_training.py `storage_mount`): one directory for "
        "all tasks only where it is the same shared file system on every server (docs/swarm.md, 'Docker Swarm "
        "sites', step 4); Pod Security 'restricted' forbids hostPath volumes on Kubernetes"),
}
"""`storage.kind` → where it exists and what a job's pods share through it."""


def kinds_on(mode: str) -> tuple[str, ...]:
    """The storage kinds cluster target `mode` can mount, in table order."""
    traits_for(mode)  # an unregistered mode is an error, not an empty answer
    return tuple(name for name, row in STORAGE_KINDS.items() if mode in row.targets)


def shared_by_pods(kind: str) -> bool:
    """Whether every pod of a job sees one directory (possibly as the site declares it)."""
    return STORAGE_KINDS[kind].sharing != "per-pod"
