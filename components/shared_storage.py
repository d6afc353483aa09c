"""SharedStorage: one ReadWriteMany volume for data and checkpoints, mounted into every training pod.

- `efs` (dev): an encrypted EFS file system with a mount target in every private subnet and an access point
  that owns `/gtp` as the trainer's uid/gid (10001), so the non-root pods can write without a chown step.
- `fsx-lustre` (prod): an FSx for Lustre file system (always encrypted at rest) in the first private subnet. Its
  root is owned by root (0755) and Lustre has no access points, so a one-shot setup Job (`directories_job_spec`)
  creates each directory the trainer writes, owned by its uid/gid, before any training object is created.
- `existing` (edge): a PVC of an existing StorageClass.
- `none`: an emptyDir per pod (checkpoints die with the pod).

EFS and FSx volumes are *statically* provisioned (PersistentVolume with the file system's id): the CSI drivers
then only mount, so their controllers need no AWS API access and get no IAM role. A security group admits NFS
(2049) or Lustre (988, 1018-1023) from the cluster security group only — the nodes carry it and the CSI node
plugin mounts from the node. Production protects the file system (`protect`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from catalog import versions
from catalog.fsx_lustre import takes_throughput
from components.training_pod import RUN_AS_USER
from conventions.kubernetes import RUNTIME_DEFAULT_SECCOMP, platform_labels, pod_security_labels

EFS_DRIVER = "efs.csi.aws.com"
FSX_DRIVER = "fsx.csi.aws.com"
CLAIM_NAME = "shared"
LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""FSx for Lustre client ports (AWS FSx docs, "File system access control with Amazon VPC")."""
SETUP_NAMESPACE = "gtp-storage-setup"
"""Namespace of the FSx directory setup Job (enforces Pod Security `baseline`, see `setup_namespace_labels`).
The policy pack exempts exactly this namespace from `k8s-run-as-non-root` (policy/gtp_policy/rules_kubernetes.py,
`STORAGE_SETUP_NAMESPACE`; a test keeps the two in step)."""
SETUP_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER")
"""The only capabilities the setup container keeps: `chown` needs CAP_CHOWN; `chmod` of a directory it no longer
owns needs CAP_FOWNER; CAP_DAC_OVERRIDE lets a re-run traverse and re-own a directory the trainer already owns
(0750) or an admin tightened. All three are in Pod Security baseline's allowed set."""
SETUP_MOUNT_PATH = "/fsx"
"""Where the setup Job mounts the file system's root."""
DIRECTORY_MODE = "0750"
"""Mode of each provisioned directory: the trainer's uid writes, its group reads, nobody else."""


def ingress_rules(kind: str) -> list[tuple[int, int]]:
    """TCP port ranges the file system's security group admits from the cluster security group."""
    return [(2049, 2049)] if kind == "efs" else list(LUSTRE_PORTS)


def persistent_volume_spec(kind: str, *, size_gib: int, storage_class: str, volume_handle: pulumi.Input[str],
                           volume_attributes: dict[str, pulumi.Input[str]] | None = None) -> dict[str, Any]:
    csi: dict[str, Any] = {"driver": EFS_DRIVER if kind == "efs" else FSX_DRIVER, "volumeHandle": volume_handle}
    if volume_attributes:
        csi["volumeAttributes"] = volume_attributes
    spec: dict[str, Any] = {
        "capacity": {"storage": f"{size_gib}Gi"}, "accessModes": ["ReadWriteMany"],
        # Checkpoints outlive a deleted claim; the file system's own lifecycle (protect) decides their fate.
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class, "csi": csi,
    }
    if kind == "efs":
        spec["mountOptions"] = ["tls"]  # encryption in transit (efs-utils stunnel)
    else:
        spec["mountOptions"] = ["flock"]  # checkpoint writers take POSIX locks
    return spec


def claim_spec(*, size_gib: int, storage_class: str, volume_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "storageClassName": storage_class,
                            "resources": {"requests": {"storage": f"{size_gib}Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    return spec


def empty_dir_volume(size: str) -> dict[str, Any]:
    return {"emptyDir": {"sizeLimit": size}}


def directories_script(mount_path: str, directories: Sequence[str], uid: int, gid: int,
                       mode: str = DIRECTORY_MODE) -> str:
    """`mkdir -p D && chown U:G D && chmod M D` for every directory (relative to the file system root), in order;
    `&&` makes the first failure fail the Job (and so the deployment)."""
    if not directories:
        raise ValueError("directories: at least one directory to provision is required")
    steps: list[str] = []
    for directory in directories:
        relative = directory.strip("/")
        if not relative or ".." in relative.split("/"):
            raise ValueError(f"directories: {directory!r} must be a path below the file system root (no '..')")
        path = shlex.quote(f"{mount_path.rstrip('/')}/{relative}")
        steps += [f"mkdir -p {path}", f"chown {uid}:{gid} {path}", f"chmod {mode} {path}"]
    return " && ".join(steps)


def setup_namespace_labels() -> dict[str, str]:
    """Pod Security `baseline` (enforce, warn and audit): the setup pod runs as root with CHOWN/DAC_OVERRIDE/FOWNER,
    which `restricted` forbids and `baseline` allows (its capability allow-list includes all three); nothing in
    this namespace may be privileged, share host namespaces or mount host paths. Warn/audit stay at baseline: the
    one pod here knowingly misses `restricted`, and a warning on every deploy would only teach people to ignore
    warnings."""
    return {**pod_security_labels("baseline", warn_and_audit="baseline"), **platform_labels("storage-setup")}


def directories_job_spec(*, image: pulumi.Input[str], claim_name: str, directories: Sequence[str], uid: int,
                         gid: int, node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The one-shot Job that creates `directories` on the file system owned by `uid:gid`, mode 0750.

    Least privilege: uid 0 because only root may chown (a non-root process gets no effective capabilities from
    `capabilities.add`: Kubernetes sets no ambient capabilities), every capability dropped except
    SETUP_CAPABILITIES, no privilege escalation, read-only root filesystem, RuntimeDefault seccomp, no API token.
    The image is the training image (by digest, from the stack's registry, which private clusters can reach); it
    has `sh`, `mkdir`, `chown` and `chmod`."""
    container_security = {
        "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "privileged": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": list(SETUP_CAPABILITIES)},
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }
    resources = {"cpu": "100m", "memory": "64Mi"}
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
        "containers": [{
            "name": "directories", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", directories_script(SETUP_MOUNT_PATH, directories, uid, gid)],
            "securityContext": container_security,
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "volumeMounts": [{"name": "shared", "mountPath": SETUP_MOUNT_PATH}],
        }],
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": claim_name}}],
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    return {
        # mkdir/chown/chmod are idempotent: a retry after a transient mount failure is safe.
        "backoffLimit": 3,
        # Pulling the training image onto a system node dominates; a Lustre mount that hangs fails the deploy.
        "activeDeadlineSeconds": 900,
        # No ttlSecondsAfterFinished: a Job deleted behind Pulumi's back would be recreated on every update.
        "template": {"metadata": {"labels": {"app.kubernetes.io/name": "storage-setup"}}, "spec": pod},
    }


@dataclass
class SharedStorageArgs:
    kind: Literal["none", "efs", "fsx-lustre", "existing"]
    namespace: str
    """Namespace of the claim (the training namespace)."""
    name_prefix: str
    """Prefix of cluster-scoped names (StorageClass, PersistentVolume), e.g. `gtp-dev`."""
    size_gib: int = 1200
    existing_storage_class: str | None = None
    empty_dir_size: str = "20Gi"
    """`none`: sizeLimit of the per-pod emptyDir."""
    cluster_name: pulumi.Input[str] | None = None
    vpc_id: pulumi.Input[str] | None = None
    private_subnet_ids: pulumi.Input[list[str]] | None = None
    private_subnet_keys: list[str] = field(default_factory=list)
    """What identifies each private subnet, in `private_subnet_ids`' order (its zone, or an adopted subnet's id;
    known from config, so mount targets are never created in an apply): one EFS mount target each, keyed by it."""
    cluster_security_group_id: pulumi.Input[str] | None = None
    fsx_deployment_type: str = "PERSISTENT_2"
    fsx_throughput_per_unit: int = 125
    protect: bool = False
    owned_directories: list[str] = field(default_factory=list)
    """`fsx-lustre`: directories (relative to the file system root) the training pods write, e.g.
    `checkpoints/<job>`; a setup Job creates them owned by `owner_uid:owner_gid` (mode 0750) before `ready`."""
    owner_uid: int = RUN_AS_USER
    """Owner of `owned_directories` and the EFS access point's user: the trainer image's uid."""
    owner_gid: int = RUN_AS_USER
    """Group of `owned_directories` and the EFS access point's group: the trainer image's gid."""
    setup_image: pulumi.Input[str] | None = None
    """`fsx-lustre`: image of the setup Job (the training image by digest); required when `owned_directories`."""
    setup_node_selector: dict[str, str] | None = None
    """`fsx-lustre`: where the setup Job runs (the system node group, which carries the cluster security group
    the file system admits)."""
    aws_opts: pulumi.ResourceOptions | None = None
    """Options carrying the AWS provider (EKS stacks)."""
    provider: k8s.Provider | None = None
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """In-cluster objects wait for these (the training namespace)."""
    addon_depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The CSI add-on waits for these (nodes to run its controller on)."""


class SharedStorage(pulumi.ComponentResource):
    volume: dict[str, Any]
    """Pod volume source for the `shared` volume."""
    ready: list[pulumi.Resource]
    file_system: aws.efs.FileSystem | aws.fsx.LustreFileSystem | None = None

    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:SharedStorage", name, None, opts)
        self.ready = []
        if args.kind == "none":
            self.volume = empty_dir_volume(args.empty_dir_size)
            self.register_outputs({})
            return
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        storage_class = args.existing_storage_class or f"{args.name_prefix}-{args.kind}"
        volume_name = None
        volume_handle: pulumi.Input[str] = ""
        attributes: dict[str, pulumi.Input[str]] | None = None
        driver_ready: list[pulumi.Resource] = []
        if args.kind in ("efs", "fsx-lustre"):
            volume_handle, attributes, driver_ready = self._aws_file_system(name, args)
            k8s.storage.v1.StorageClass(
                f"{name}-storage-class", metadata={"name": storage_class},
                provisioner=EFS_DRIVER if args.kind == "efs" else FSX_DRIVER, reclaim_policy="Retain",
                volume_binding_mode="Immediate", opts=k8s_opts)
            volume_name = f"{args.name_prefix}-shared"
            volume = k8s.core.v1.PersistentVolume(
                f"{name}-volume", metadata={"name": volume_name},
                spec=persistent_volume_spec(args.kind, size_gib=args.size_gib, storage_class=storage_class,
                                            volume_handle=volume_handle, volume_attributes=attributes),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=[*args.depends_on, *driver_ready]))
            self.ready.append(volume)
        claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-claim", metadata={"name": CLAIM_NAME, "namespace": args.namespace},
            spec=claim_spec(size_gib=args.size_gib, storage_class=storage_class, volume_name=volume_name),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[*args.depends_on, *self.ready]))
        self.ready.append(claim)
        if args.kind == "fsx-lustre" and args.owned_directories:
            self.ready.append(self._fsx_directories(name, args, storage_class, volume_handle, attributes,
                                                    driver_ready))
        self.volume = {"persistentVolumeClaim": {"claimName": CLAIM_NAME}}
        self.register_outputs({"claimName": CLAIM_NAME})

    def _aws_file_system(self, name: str, args: SharedStorageArgs):
        base = args.aws_opts or pulumi.ResourceOptions()
        child = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(parent=self))
        protected = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=args.protect))
        security_group = aws.ec2.SecurityGroup(
            f"{name}-security-group", vpc_id=args.vpc_id,
            description=f"{args.kind} clients: the cluster's nodes only",
            tags={"Name": f"{args.name_prefix}-{args.kind}"}, opts=child)
        # FSx for Lustre checks its security groups when it creates the file system and fails the create when they
        # don't open the LNET ports (FSx for Lustre guide, troubleshooting "Creating an FSx for Lustre file system
        # fails", quoted below). The rules are resources of their own, and the file system's inputs name only the
        # group: without `depends_on` it can be created in parallel with its rules and fail. Issue 41.
        rules: list[pulumi.Resource] = []
        for low, high in ingress_rules(args.kind):
            rules.append(aws.vpc.SecurityGroupIngressRule(
                f"{name}-from-cluster-{low}", security_group_id=security_group.id, ip_protocol="tcp",
                from_port=low, to_port=high, referenced_security_group_id=args.cluster_security_group_id,
                description=f"{args.kind} from the cluster security group", opts=child))
            if args.kind == "fsx-lustre":
                # LNET runs both ways, between the file system's servers and between them and every client: FSx
                # requires inbound *and* outbound 988 and 1018-1023 within the file system's group and between it
                # and the clients' group (FSx for Lustre guide, "File system access control with Amazon VPC";
                # "Creating an FSx for Lustre file system fails": "allow inbound traffic on ports 988 and
                # 1018-1023"). The clients' side: the cluster group admits the servers here, and EKS gives it
                # an allow-all outbound rule.
                rules.append(aws.vpc.SecurityGroupIngressRule(
                    f"{name}-from-self-{low}", security_group_id=security_group.id, ip_protocol="tcp",
                    from_port=low, to_port=high, referenced_security_group_id=security_group.id,
                    description="Lustre servers among themselves", opts=child))
                rules.append(aws.vpc.SecurityGroupEgressRule(
                    f"{name}-to-self-{low}", security_group_id=security_group.id, ip_protocol="tcp",
                    from_port=low, to_port=high, referenced_security_group_id=security_group.id,
                    description="Lustre servers among themselves", opts=child))
                rules.append(aws.vpc.SecurityGroupIngressRule(
                    f"{name}-clients-from-fsx-{low}", security_group_id=args.cluster_security_group_id,
                    ip_protocol="tcp", from_port=low, to_port=high, referenced_security_group_id=security_group.id,
                    description="Lustre servers to their clients (the cluster's nodes)", opts=child))
        rules.append(aws.vpc.SecurityGroupEgressRule(
            f"{name}-egress", security_group_id=security_group.id, ip_protocol="-1",
            referenced_security_group_id=args.cluster_security_group_id, description="replies to cluster nodes",
            opts=child))
        subnet_ids = pulumi.Output.from_input(args.private_subnet_ids or [])
        if args.kind == "efs":
            file_system = aws.efs.FileSystem(
                f"{name}-efs", encrypted=True, performance_mode="generalPurpose", throughput_mode="elastic",
                tags={"Name": f"{args.name_prefix}-shared"}, opts=protected)
            # Keyed by zone (EFS allows one mount target per zone: a position-named one, replaced create-first when
            # a zone was added or removed before it, collided with its own zone's, MountTargetConflict). The alias
            # adopts what a stack created under the index before.
            mount_targets = [
                aws.efs.MountTarget(f"{name}-mount-{key}", file_system_id=file_system.id,
                                    subnet_id=subnet_ids.apply(lambda ids, i=position: ids[i]),
                                    security_groups=[security_group.id],
                                    opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                                        aliases=[pulumi.Alias(name=f"{name}-mount-{position}")])))
                for position, key in enumerate(args.private_subnet_keys)
            ]
            access_point = aws.efs.AccessPoint(
                f"{name}-access-point", file_system_id=file_system.id,
                    # Every NFS operation through the access point runs as posix_user, whatever the pod's uid; the root
                # directory is created owned by the same uid/gid, so the trainer (10001) owns what it writes.
                posix_user={"uid": args.owner_uid, "gid": args.owner_gid},
                root_directory={"path": "/gtp", "creation_info": {
                    "owner_uid": args.owner_uid, "owner_gid": args.owner_gid, "permissions": DIRECTORY_MODE}},
                tags={"Name": f"{args.name_prefix}-shared"}, opts=child)
            addon = self._addon(name, "aws-efs-csi-driver", args, child)
            self.file_system = file_system
            handle = pulumi.Output.concat(file_system.id, "::", access_point.id)
            return handle, None, [addon, *mount_targets]
        file_system = aws.fsx.LustreFileSystem(
            f"{name}-fsx", storage_capacity=args.size_gib, deployment_type=args.fsx_deployment_type,
            # Only where the deployment type takes one (catalog/fsx_lustre.py: SCRATCH_2's throughput is fixed).
            per_unit_storage_throughput=(args.fsx_throughput_per_unit
                                         if takes_throughput(args.fsx_deployment_type) else None),
            file_system_type_version="2.15", data_compression_type="LZ4",
            # One subnet, as a string: pulumi-aws 7 types `subnet_ids` as `Input[str]` ("File systems currently
            # support only one subnet"); a list passes a preview (the ids are unknown there) and fails the apply.
            subnet_ids=subnet_ids.apply(lambda ids: ids[0]), security_group_ids=[security_group.id],
            tags={"Name": f"{args.name_prefix}-shared"},
            opts=pulumi.ResourceOptions.merge(protected, pulumi.ResourceOptions(depends_on=rules)))
        addon = self._addon(name, "aws-fsx-csi-driver", args, child)
        self.file_system = file_system
        attributes = {"dnsname": file_system.dns_name, "mountname": file_system.mount_name}
        # A new Lustre root is owned by root (0755): `_fsx_directories` makes the trainer's directories.
        return file_system.id, attributes, [addon]

    def _fsx_directories(self, name: str, args: SharedStorageArgs, storage_class: str,
                         volume_handle: pulumi.Input[str], attributes: dict[str, pulumi.Input[str]] | None,
                         driver_ready: list[pulumi.Resource]) -> k8s.batch.v1.Job:
        """The setup Job and what it mounts: its own PV + PVC of the same file system in SETUP_NAMESPACE.

        A PV binds to exactly one PVC, and a pod mounts only claims of its own namespace, so the training claim
        cannot be shared: the second PV names the same file system (volumeHandle, dnsname, mountname). Two PVs of
        one Lustre file system are safe with the pinned FSx CSI driver v1.7.0: its node service advertises no
        STAGE_UNSTAGE_VOLUME (pkg/driver/node.go, `nodeCaps` is empty), so each pod's NodePublishVolume mounts
        on its own and no staging path is shared; the CSIDriver has attachRequired false (no VolumeAttachment)."""
        if args.setup_image is None:
            raise ValueError("storage: fsx-lustre with owned_directories needs setup_image (the training image)")
        opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespace = k8s.core.v1.Namespace(
            f"{name}-setup-namespace", metadata={"name": SETUP_NAMESPACE, "labels": setup_namespace_labels()},
            opts=opts)
        # The setup pod needs no network at all (the node's kernel mounts Lustre, not the pod): deny everything.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-setup-deny-all", metadata={"name": "deny-all", "namespace": SETUP_NAMESPACE},
            spec={"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace]))
        volume_name = f"{args.name_prefix}-shared-setup"
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-setup-volume", metadata={"name": volume_name},
            spec=persistent_volume_spec(args.kind, size_gib=args.size_gib, storage_class=storage_class,
                                        volume_handle=volume_handle, volume_attributes=attributes),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace, *driver_ready]))
        claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-setup-claim", metadata={"name": CLAIM_NAME, "namespace": SETUP_NAMESPACE},
            spec=claim_spec(size_gib=args.size_gib, storage_class=storage_class, volume_name=volume_name),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace, volume]))
        return k8s.batch.v1.Job(
            f"{name}-setup-job",
            metadata={
                # Auto-named: a changed directory list replaces the Job create-before-delete, and the new one runs.
                "namespace": SETUP_NAMESPACE,
                # pulumi-kubernetes awaits a Job until its Complete condition (provider/pkg/await/job.go,
                # jobInitAwaiter; default timeout 10 min): the training objects that depend on it start only
                # after the directories exist. The deadline covers the pull of the training image.
                "annotations": {
                    "pulumi.com/timeoutSeconds": "960",
                    "checkov.io/skip1": "CKV_K8S_23=chown needs uid 0; only CHOWN/DAC_OVERRIDE/FOWNER are kept",
                    "checkov.io/skip2": "CKV_K8S_40=runs as root on purpose (chown); see CKV_K8S_23",
                    "checkov.io/skip3": "CKV_K8S_37=CHOWN/DAC_OVERRIDE/FOWNER are the least chown/chmod need",
                    "checkov.io/skip4": "CKV_K8S_25=CHOWN/DAC_OVERRIDE/FOWNER are the least chown/chmod need",
                },
            },
            spec=directories_job_spec(image=args.setup_image, claim_name=CLAIM_NAME,
                                      directories=args.owned_directories, uid=args.owner_uid, gid=args.owner_gid,
                                      node_selector=args.setup_node_selector),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[claim]))

    def _addon(self, name: str, addon: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-{addon}", cluster_name=args.cluster_name, addon_name=addon,
            addon_version=versions.EKS_ADDONS[addon], resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=args.addon_depends_on)))
