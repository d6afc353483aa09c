"""SharedStorage: one ReadWriteMany volume for data and checkpoints, mounted into every training pod.

- `efs` (dev): an encrypted EFS file system with a mount target in every private subnet and an access point
  that owns `/gtp` as the trainer's uid/gid (10001), so the non-root pods can write without a chown step.
- `fsx-lustre` (prod): an FSx for Lustre file system (always encrypted at rest) in the first private subnet.
- `existing` (edge): a PVC of an existing StorageClass.
- `none`: an emptyDir per pod (checkpoints die with the pod).

EFS and FSx volumes are *statically* provisioned (PersistentVolume with the file system's id): the CSI drivers
then only mount, so their controllers need no AWS API access and get no IAM role. A security group admits NFS
(2049) or Lustre (988, 1018-1023) from the cluster security group only — the nodes carry it and the CSI node
plugin mounts from the node. Production protects the file system (`protect`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from catalog import versions
from components.training_pod import RUN_AS_USER

EFS_DRIVER = "efs.csi.aws.com"
FSX_DRIVER = "fsx.csi.aws.com"
CLAIM_NAME = "shared"
LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""FSx for Lustre client ports (AWS FSx docs, "File system access control with Amazon VPC")."""


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
    num_private_subnets: int = 0
    """How many private subnets there are (known from config, so mount targets are never created in an apply)."""
    cluster_security_group_id: pulumi.Input[str] | None = None
    fsx_deployment_type: str = "PERSISTENT_2"
    fsx_throughput_per_unit: int = 125
    protect: bool = False
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
        for low, high in ingress_rules(args.kind):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-from-cluster-{low}", security_group_id=security_group.id, ip_protocol="tcp",
                from_port=low, to_port=high, referenced_security_group_id=args.cluster_security_group_id,
                description=f"{args.kind} from the cluster security group", opts=child)
            if args.kind == "fsx-lustre":
                # Lustre servers of one file system talk to each other on the same ports.
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-from-self-{low}", security_group_id=security_group.id, ip_protocol="tcp",
                    from_port=low, to_port=high, referenced_security_group_id=security_group.id,
                    description="Lustre servers among themselves", opts=child)
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-egress", security_group_id=security_group.id, ip_protocol="-1",
            referenced_security_group_id=args.cluster_security_group_id, description="replies to cluster nodes",
            opts=child)
        subnet_ids = pulumi.Output.from_input(args.private_subnet_ids)
        if args.kind == "efs":
            file_system = aws.efs.FileSystem(
                f"{name}-efs", encrypted=True, performance_mode="generalPurpose", throughput_mode="elastic",
                tags={"Name": f"{args.name_prefix}-shared"}, opts=protected)
            mount_targets = [
                aws.efs.MountTarget(f"{name}-mount-{index}", file_system_id=file_system.id,
                                    subnet_id=subnet_ids.apply(lambda ids, i=index: ids[i]),
                                    security_groups=[security_group.id], opts=child)
                for index in range(args.num_private_subnets)
            ]
            access_point = aws.efs.AccessPoint(
                f"{name}-access-point", file_system_id=file_system.id,
                posix_user={"uid": RUN_AS_USER, "gid": RUN_AS_USER},
                root_directory={"path": "/gtp", "creation_info": {
                    "owner_uid": RUN_AS_USER, "owner_gid": RUN_AS_USER, "permissions": "0750"}},
                tags={"Name": f"{args.name_prefix}-shared"}, opts=child)
            addon = self._addon(name, "aws-efs-csi-driver", args, child)
            self.file_system = file_system
            handle = pulumi.Output.concat(file_system.id, "::", access_point.id)
            return handle, None, [addon, *mount_targets]
        file_system = aws.fsx.LustreFileSystem(
            f"{name}-fsx", storage_capacity=args.size_gib, deployment_type=args.fsx_deployment_type,
            per_unit_storage_throughput=(args.fsx_throughput_per_unit
                                         if args.fsx_deployment_type.startswith("PERSISTENT") else None),
            file_system_type_version="2.15", data_compression_type="LZ4",
            subnet_ids=subnet_ids.apply(lambda ids: [ids[0]]), security_group_ids=[security_group.id],
            tags={"Name": f"{args.name_prefix}-shared"}, opts=protected)
        addon = self._addon(name, "aws-fsx-csi-driver", args, child)
        self.file_system = file_system
        attributes = {"dnsname": file_system.dns_name, "mountname": file_system.mount_name}
        # NOTE: a new Lustre root is owned by root (0755); the uid-10001 trainer needs `<root>/checkpoints`
        # made writable once (an admin `chown`, README "The real path", step 6).
        return file_system.id, attributes, [addon]

    def _addon(self, name: str, addon: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-{addon}", cluster_name=args.cluster_name, addon_name=addon,
            addon_version=versions.EKS_ADDONS[addon], resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=args.addon_depends_on)))
