"""Volumes writable: may each pod write every volume it mounts writable, as the uid/gid it runs with?

For every container mount that is not read-only, the check works out who owns the directory the pod writes and
with which mode, and who the pod is on that volume, from the rendered cluster and the plan's AWS resources:

- `emptyDir`: the kubelet creates it 0777 (pkg/volume/emptydir/empty_dir.go, `setupDir`): writable.
- `hostPath`: a node directory, root-owned (the kubelet creates `DirectoryOrCreate` paths 0755 root): writable
  by uid 0 only; a pod that declares no user runs as its image's user, assumed root (third-party node agents).
- `persistentVolumeClaim` → its PersistentVolume → CSI driver:
  - `efs.csi.aws.com` with an access point (`<fs>::<ap>`): every NFS operation runs as the access point's
    `posixUser` whatever the pod's uid (AWS EFS docs, "Enforcing a user identity using an access point"); the
    root directory is created from `rootDirectory.creationInfo` (owner uid/gid, permissions). Without an access
    point the file system root is root:root 0755.
  - `fsx.csi.aws.com`: a new Lustre file system's root is root:root 0755, and Lustre has no access points; a
    directory is the pod's only if a setup Job in the cluster (a root pod mounting the same file system) runs
    `mkdir -p D && chown U:G D && chmod M D` for it, and the pod's owner object depends on that Job in the plan
    (the provider awaits the Job's completion).
  - fsGroup: the kubelet changes a CSI volume's group only under the CSIDriver's `fsGroupPolicy`. The pinned
    drivers apply none to these ReadWriteMany volumes without fsType: aws-fsx-csi-driver v1.7.0 ships
    `fsGroupPolicy: ReadWriteOnceWithFSType` (charts/aws-fsx-csi-driver/values.yaml `csidriver`), and
    aws-efs-csi-driver v2.1.13 sets none (charts/aws-efs-csi-driver/templates/csidriver.yaml), so the API default
    `ReadWriteOnceWithFSType` applies (k8s.io/api storage/v1 `CSIDriverSpec.FSGroupPolicy`).
  - a claim of a StorageClass the cluster does not hold (an edge site's own): not verifiable offline. `nfs-client`
    is the default class name of nfs-subdir-external-provisioner, which creates each volume's directory 0777
    (cmd/nfs-subdir-external-provisioner/provisioner.go, `Provision`: `createMode` 0777, `os.Chmod`): writable by
    any uid unless the site's export squashes or the class overrides the mode. Recorded as an assumption.
- `configMap`, `secret`, `projected`, `downwardAPI`: the kubelet mounts them read-only; never counted.

The directory a pod writes: the deepest path under the mount that its containers' command, args or env values name
(the trainer's `--checkpoint-dir=<mount>/checkpoints/<job>`, a team's image's `GTP_CHECKPOINT_DIR`), else the
mount's root.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verify.plan_record import COMPUTED, Plan, Resource
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding

NAME = "volumes writable"
EFS_DRIVER = "efs.csi.aws.com"
FSX_DRIVER = "fsx.csi.aws.com"
EFS_ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
FSX_FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
READ_ONLY_SOURCES = ("configMap", "secret", "projected", "downwardAPI")
DEFAULT_CAPABILITIES = frozenset({
    # containerd's default set (pkg/oci/spec.go `defaultUnixCaps` / moby's `DefaultCapabilities`).
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP", "SETPCAP",
    "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
})
FS_GROUP_POLICY = {FSX_DRIVER: "ReadWriteOnceWithFSType", EFS_DRIVER: "ReadWriteOnceWithFSType"}
"""CSIDriver fsGroupPolicy of the pinned drivers when the cluster holds no CSIDriver object (EKS add-ons)."""
ASSUMED_CLASSES = {
    "nfs-client": "nfs-subdir-external-provisioner (its chart's default class name) creates each volume's "
                  "directory 0777: writable by any uid unless the site's NFS export squashes it",
}


@dataclass(frozen=True)
class Identity:
    """Who a container is on a volume."""

    uid: int | None
    """None: not declared (the image's user)."""
    gids: frozenset[int]
    capabilities: frozenset[str]
    via: str = "pod"

    def describe(self) -> str:
        user = "the image's user" if self.uid is None else f"uid {self.uid}"
        groups = ",".join(str(g) for g in sorted(self.gids)) or "none"
        return f"{user} (groups {groups}) [{self.via}]"


@dataclass(frozen=True)
class Directory:
    """Owner and mode of the directory a pod writes (or of its nearest existing parent)."""

    uid: int
    gid: int
    mode: int
    what: str


def may_write(identity: Identity, directory: Directory) -> bool:
    """POSIX write+search permission on a directory (creating entries in it)."""
    if identity.uid == 0 and "DAC_OVERRIDE" in identity.capabilities:
        return True
    if identity.uid is not None and identity.uid == directory.uid:
        return directory.mode & 0o300 == 0o300
    if directory.gid in identity.gids:
        return directory.mode & 0o030 == 0o030
    return directory.mode & 0o003 == 0o003


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None or value == COMPUTED:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _mode(value: Any) -> int:
    return int(str(value), 8)


def identity(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> Identity:
    """The container's uid, groups (runAsGroup, fsGroup, supplementalGroups) and effective capabilities."""
    pod_context = pod_spec.get("securityContext") or {}
    context = container.get("securityContext") or {}
    uid = _int(context.get("runAsUser", pod_context.get("runAsUser")))
    gid = _int(context.get("runAsGroup", pod_context.get("runAsGroup")))
    gids = {g for g in (gid, _int(pod_context.get("fsGroup"))) if g is not None}
    gids.update(g for g in (_int(x) for x in pod_context.get("supplementalGroups") or []) if g is not None)
    if gid is None and uid in (None, 0):
        gids.add(0)  # the image's (root's) primary group
    capabilities = context.get("capabilities") or {}
    drop = {str(c) for c in capabilities.get("drop") or []}
    effective = set() if "ALL" in drop else set(DEFAULT_CAPABILITIES) - drop
    effective.update(str(c) for c in capabilities.get("add") or [])
    if context.get("privileged") is True:
        effective = set(DEFAULT_CAPABILITIES) | {"SYS_ADMIN"}
    return Identity(uid=uid, gids=frozenset(gids), capabilities=frozenset(effective))


def _words(text: str) -> list[str]:
    """Shell words of `text`; an unbalanced quote falls back to whitespace splitting."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def written_directory(containers: Iterable[Mapping[str, Any]], mount_path: str) -> str:
    """The deepest directory under `mount_path` that the containers name (flags `--x=<path>` or bare paths);
    the mount's root when none does."""
    root = mount_path.rstrip("/") or "/"
    best = root
    for container in containers:
        # A team's own image learns its directory from env (GTP_CHECKPOINT_DIR, components/training_pod.py).
        env = [str(e.get("value")) for e in (container.get("env") or []) if isinstance(e.get("value"), str)]
        for token in [*(container.get("command") or []), *(container.get("args") or []), *env]:
            if not isinstance(token, str):
                continue
            for word in _words(token) if " " in token else [token]:
                path = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
                path = posixpath.normpath(path) if path.startswith("/") else ""
                if path.startswith(root + "/") and path.count("/") > best.count("/"):
                    best = path
    return best


@dataclass(frozen=True)
class Provisioned:
    """A directory a setup Job creates on a file system."""

    file_system: str
    relative: str
    uid: int
    gid: int
    mode: int
    job: str
    """The Job's `Kind namespace/name` (its owner string)."""
    namespace: str


def parse_setup_script(script: str, mount_path: str) -> list[tuple[str, int, int, int]]:
    """(relative dir, uid, gid, mode) for each `mkdir -p D && chown U:G D && chmod M D` in a `sh -c` script;
    a directory counts only when all three steps name it (what the Job's command actually does)."""
    root = mount_path.rstrip("/")
    made: dict[str, dict[str, Any]] = {}
    for step in script.split("&&"):
        words = _words(step)
        if len(words) < 2:
            continue
        command, *rest = words
        target = posixpath.normpath(rest[-1])
        if not target.startswith(root + "/"):
            continue
        relative = target[len(root) + 1:]
        if command == "mkdir" and "-p" in rest[:-1]:
            made.setdefault(relative, {})["made"] = True
        elif command == "chown" and len(rest) == 2 and ":" in rest[0]:
            user, group = rest[0].split(":", 1)
            if relative in made and user.isdigit() and group.isdigit():
                made[relative].update(uid=int(user), gid=int(group))
        elif command == "chmod" and len(rest) == 2 and rest[0].isdigit():
            if relative in made:
                made[relative]["mode"] = _mode(rest[0])
    return [(rel, d["uid"], d["gid"], d["mode"]) for rel, d in made.items() if {"uid", "gid", "mode"} <= d.keys()]


class Volumes:
    """The cluster's claims, volumes and drivers, with the AWS facts behind each PersistentVolume."""

    def __init__(self, plan: Plan, objects: list[ClusterObject]):
        self.plan = plan
        self.claims = {(o.namespace, o.name): o.obj for o in objects if o.kind == "PersistentVolumeClaim"}
        self.volumes = {o.name: o.obj for o in objects if o.kind == "PersistentVolume"}
        self.classes = {o.name: o.obj for o in objects if o.kind == "StorageClass"}
        self.drivers = {o.name: o.obj for o in objects if o.kind == "CSIDriver"}
        self._pv_resources = {str((r.inputs.get("metadata") or {}).get("name")): r
                              for r in plan.by_type(PERSISTENT_VOLUME)}

    def aws_backing(self, pv_name: str, resource_type: str) -> Resource | None:
        """The AWS resource of `resource_type` a PersistentVolume's plan resource depends on directly (its
        volumeHandle is computed in the plan; the dependency names the file system / access point)."""
        resource = self._pv_resources.get(pv_name)
        if resource is None:
            return None
        for urn in resource.depends_on:
            try:
                target = self.plan.get(urn)
            except KeyError:
                continue
            if target.type == resource_type:
                return target
        return None

    def file_system_of(self, pv_name: str) -> str | None:
        pv = self.volumes.get(pv_name) or {}
        handle = ((pv.get("spec") or {}).get("csi") or {}).get("volumeHandle")
        backing = self.aws_backing(pv_name, FSX_FILE_SYSTEM) or self.aws_backing(pv_name, EFS_FILE_SYSTEM)
        if backing is not None:
            return backing.urn
        return handle if isinstance(handle, str) and handle != COMPUTED else None

    def fs_group_applied(self, driver: str, pv_spec: Mapping[str, Any]) -> bool:
        policy = ((self.drivers.get(driver) or {}).get("spec") or {}).get("fsGroupPolicy") \
            or FS_GROUP_POLICY.get(driver, "ReadWriteOnceWithFSType")
        if policy == "File":
            return True
        if policy == "ReadWriteOnceWithFSType":
            return bool((pv_spec.get("csi") or {}).get("fsType")) and "ReadWriteOnce" in (pv_spec.get("accessModes")
                                                                                            or [])
        return False


def setup_jobs(pods: list[ExpandedPod], volumes: Volumes) -> list[Provisioned]:
    """Directories that Job pods create on a file system, as root with CAP_CHOWN (and FOWNER or ownership for
    the chmod), read from their `sh -c` command."""
    found: list[Provisioned] = []
    for pod in pods:
        if not pod.owner.startswith("Job "):
            continue
        spec = pod.pod.get("spec") or {}
        claims = {v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
                  for v in spec.get("volumes") or [] if v.get("persistentVolumeClaim")}
        for container in spec.get("containers") or []:
            who = identity(spec, container)
            if who.uid != 0 or not {"CHOWN", "FOWNER"} <= who.capabilities:
                continue
            command = [*(container.get("command") or []), *(container.get("args") or [])]
            if len(command) < 3 or command[:2] != ["sh", "-c"]:
                continue
            for mount in container.get("volumeMounts") or []:
                claim = volumes.claims.get((pod.namespace, claims.get(mount.get("name"))))
                if claim is None or mount.get("readOnly"):
                    continue
                file_system = volumes.file_system_of(str((claim.get("spec") or {}).get("volumeName")))
                if file_system is None:
                    continue
                for relative, uid, gid, mode in parse_setup_script(str(command[2]), mount["mountPath"]):
                    found.append(Provisioned(file_system, relative, uid, gid, mode, pod.owner, pod.namespace))
    return found


def _owner_resource(plan: Plan, owner: str) -> Resource | None:
    """The plan resource of the object that owns a pod (`Kind namespace/name[ role]`)."""
    parts = owner.split(" ")
    if len(parts) < 2 or "/" not in parts[1]:
        return None
    kind, (namespace, name) = parts[0], parts[1].split("/", 1)
    for resource in plan.resources:
        metadata = resource.inputs.get("metadata") or {}
        if (resource.inputs.get("kind") == kind and metadata.get("namespace") == namespace
                and str(metadata.get("name")) == name):
            return resource
    return None


def _job_resource(plan: Plan, provisioned: Provisioned) -> Resource | None:
    return _owner_resource(plan, provisioned.job) or next(
        (r for r in plan.by_type("kubernetes:batch/v1:Job")
         if (r.inputs.get("metadata") or {}).get("namespace") == provisioned.namespace), None)


def check(plan: Plan, objects: list[ClusterObject], pods: list[ExpandedPod]) -> list[CheckResult]:
    result = CheckResult(NAME)
    volumes = Volumes(plan, objects)
    provisioned = setup_jobs(pods, volumes)
    for pod in pods:
        spec = pod.pod.get("spec") or {}
        sources = {v.get("name"): v for v in spec.get("volumes") or []}
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for container in containers:
            for mount in container.get("volumeMounts") or []:
                source = sources.get(mount.get("name"))
                if source is None or mount.get("readOnly") or any(k in source for k in READ_ONLY_SOURCES):
                    continue
                claim_ref = source.get("persistentVolumeClaim") or {}
                if claim_ref.get("readOnly"):
                    continue
                subject = f"{pod.owner}: container {container.get('name')}, volume {mount.get('name')}"
                directory = written_directory(containers, mount["mountPath"])
                ok, finding, detail = _judge(plan, volumes, provisioned, pod, spec, container, source,
                                             mount["mountPath"], directory, subject)
                result.record(ok, finding)
                if detail:
                    result.details.append(f"{subject}: {detail}")
    return [result]


def _judge(plan: Plan, volumes: Volumes, provisioned: list[Provisioned], pod: ExpandedPod,
           spec: Mapping[str, Any], container: Mapping[str, Any], source: Mapping[str, Any], mount_path: str,
           directory: str, subject: str) -> tuple[bool, Finding | None, str | None]:
    who = identity(spec, container)
    if "emptyDir" in source:
        return True, None, None
    if "hostPath" in source:
        if who.uid is None:
            return True, None, f"hostPath as the image's user, assumed root ({who.describe()})"
        if who.uid == 0:
            return True, None, None
        return False, Finding(subject, f"hostPath {source['hostPath'].get('path')} is a root-owned node directory; "
                                       f"{who.describe()} may not write it",
                              "run the container as uid 0 in a namespace that allows it, or mount it readOnly"), None
    claim_name = (source.get("persistentVolumeClaim") or {}).get("claimName")
    if claim_name is None:
        kind = next((k for k in source if k != "name"), "?")
        return True, None, f"{kind} volume: ownership not modelled"
    claim = volumes.claims.get((pod.namespace, claim_name))
    if claim is None:
        return False, Finding(subject, f"claim {pod.namespace}/{claim_name} is not in the cluster: the pod stays "
                                       "Pending", "create the PersistentVolumeClaim in the pod's namespace"), None
    claim_spec = claim.get("spec") or {}
    pv_name = claim_spec.get("volumeName")
    if not pv_name:
        storage_class = claim_spec.get("storageClassName")
        if storage_class not in volumes.classes:
            assumption = ASSUMED_CLASSES.get(str(storage_class), "its provisioner and directory owner are unknown "
                                                                  "offline")
            return True, None, f"StorageClass {storage_class} is the site's, assumed writable: {assumption}"
        provisioner = volumes.classes[storage_class].get("provisioner")
        return True, None, f"dynamic {provisioner} volume: ownership not modelled"
    pv = volumes.volumes.get(pv_name)
    if pv is None:
        return False, Finding(subject, f"claim {pod.namespace}/{claim_name} names PersistentVolume {pv_name}, "
                                       "which is not in the cluster", "create the PersistentVolume"), None
    pv_spec = pv.get("spec") or {}
    driver = (pv_spec.get("csi") or {}).get("driver")
    if driver == EFS_DRIVER:
        return _judge_efs(volumes, pv_name, pv_spec, who, directory, subject)
    if driver == FSX_DRIVER:
        return _judge_fsx(plan, volumes, provisioned, pod, pv_name, pv_spec, who, mount_path, directory, subject)
    return True, None, f"PersistentVolume {pv_name} ({driver or 'not CSI'}): ownership not modelled"


def _apply_fs_group(volumes: Volumes, driver: str, pv_spec: Mapping[str, Any], spec: Mapping[str, Any],
                    root: Directory) -> Directory:
    fs_group = _int((spec.get("securityContext") or {}).get("fsGroup"))
    if fs_group is None or not volumes.fs_group_applied(driver, pv_spec):
        return root
    return Directory(root.uid, fs_group, root.mode | 0o070, f"{root.what}, group set to fsGroup {fs_group}")


def _judge_efs(volumes: Volumes, pv_name: str, pv_spec: Mapping[str, Any], who: Identity, directory: str,
               subject: str) -> tuple[bool, Finding | None, str | None]:
    access_point = volumes.aws_backing(pv_name, EFS_ACCESS_POINT)
    handle = str((pv_spec.get("csi") or {}).get("volumeHandle") or "")
    if access_point is None and "::" not in handle:
        root = Directory(0, 0, 0o755, "a new EFS file system's root")
        if may_write(who, root):
            return True, None, None
        return False, Finding(subject, f"EFS PersistentVolume {pv_name} has no access point: {root.what} is "
                                       f"root:root 0755 and {who.describe()} may not write it",
                              "mount through an access point whose posixUser and rootDirectory.creationInfo are "
                              "the pod's uid/gid"), None
    if access_point is None:
        return False, Finding(subject, f"EFS PersistentVolume {pv_name}: its access point is not in the plan",
                              "create the access point in the stack so its identity can be checked"), None
    posix = access_point.inputs.get("posixUser") or {}
    creation = ((access_point.inputs.get("rootDirectory") or {}).get("creationInfo")) or {}
    ap_uid, ap_gid = _int(posix.get("uid")), _int(posix.get("gid"))
    if ap_uid is None or ap_gid is None:
        return False, Finding(subject, f"EFS access point {access_point.name} sets no posixUser: the pod's own uid "
                                       "reaches a root directory it may not own",
                              "set posixUser to the pod's uid/gid"), None
    if not creation:
        return False, Finding(subject, f"EFS access point {access_point.name} has no rootDirectory.creationInfo: "
                                       "a missing root directory makes every mount fail",
                              "set creationInfo ownerUid/ownerGid to the pod's uid/gid and permissions 0750"), None
    as_ap = Identity(uid=ap_uid, gids=frozenset({ap_gid, *(_int(g) for g in posix.get("secondaryGids") or [])}
                                              - {None}),
                     capabilities=frozenset(), via=f"access point {access_point.name}")
    root = Directory(_int(creation.get("ownerUid")) or 0, _int(creation.get("ownerGid")) or 0,
                     _mode(creation.get("permissions", "0755")), f"access point root {creation}")
    if not may_write(as_ap, root):
        return False, Finding(subject, f"EFS access point {access_point.name} runs every write as "
                                       f"{as_ap.describe()}, which may not write its root directory (owner "
                                       f"{root.uid}:{root.gid}, mode {root.mode:04o}); {directory} is not writable",
                              "make posixUser and rootDirectory.creationInfo the same uid/gid as the pod "
                              f"(runAsUser {who.uid}, runAsGroup)"), None
    if who.uid is not None and who.uid != ap_uid:
        return False, Finding(subject, f"EFS access point {access_point.name} writes as uid {ap_uid} but the pod "
                                       f"runs as uid {who.uid}: its files belong to another user",
                              "set the access point's posixUser to the pod's uid/gid"), None
    return True, None, None


def _judge_fsx(plan: Plan, volumes: Volumes, provisioned: list[Provisioned], pod: ExpandedPod, pv_name: str,
               pv_spec: Mapping[str, Any], who: Identity, mount_path: str, directory: str,
               subject: str) -> tuple[bool, Finding | None, str | None]:
    root = _apply_fs_group(volumes, FSX_DRIVER, pv_spec, pod.pod.get("spec") or {},
                           Directory(0, 0, 0o755, "a new Lustre file system's root"))
    if may_write(who, root):
        return True, None, None
    file_system = volumes.file_system_of(pv_name)
    relative = directory[len(mount_path.rstrip("/")):].strip("/")
    for made in provisioned:
        if made.file_system != file_system or not relative:
            continue
        if relative != made.relative and not relative.startswith(made.relative + "/"):
            continue
        owned = Directory(made.uid, made.gid, made.mode, f"{made.relative} made by {made.job}")
        if not may_write(who, owned):
            return False, Finding(subject, f"{made.job} makes {made.relative} owned {made.uid}:{made.gid} "
                                           f"{made.mode:04o}; {who.describe()} may not write it",
                                  f"chown it to the pod's uid/gid (runAsUser {who.uid})"), None
        owner = _owner_resource(plan, pod.owner)
        job = _job_resource(plan, made)
        if owner is None or job is None:
            return True, None, (f"{directory} made by {made.job}; ordering not checked (no plan resource for "
                                f"{pod.owner if owner is None else made.job})")
        if not plan.depends_transitively(owner, job):
            return False, Finding(subject, f"{made.job} makes {made.relative}, but {owner.name} does not depend on "
                                           "it: the pods may start before the directory exists",
                                  "add the setup Job to the training object's dependsOn"), None
        return True, None, f"{directory} made by {made.job} as {made.uid}:{made.gid} {made.mode:04o}"
    return False, Finding(subject, f"FSx for Lustre PersistentVolume {pv_name}: {root.what} is root:root 0755 and "
                                   f"the fsx.csi.aws.com driver applies no fsGroup to it; {who.describe()} may not "
                                   f"create {directory}",
                          "provision the directory with a setup Job (mkdir -p, chown to the pod's uid:gid, chmod "
                          "0750) that the training object depends on"), None

