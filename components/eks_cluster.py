"""EksCluster: the EKS control plane, its KMS key and logs, access entries, core add-ons and the CPU system node
group."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from catalog import versions
from components.launch_template import launch_template_args
from conventions import iam
from conventions.names import SYSTEM_ROLE_LABEL

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
SUPPORT_TYPE = "STANDARD"
"""The cluster's upgrade policy: STANDARD, so EKS upgrades it when its version's standard support ends instead of
billing extended support ($0.60 instead of $0.10 per hour, catalog/fixed_prices.py; verify/cost.py prices it)."""
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# Read every object, Secrets included (a preview reads the live state of what the stack manages, Helm releases'
# Secrets among them), write none (EKS user guide, "Review access policy permissions": AmazonEKSAdminViewPolicy).
CLUSTER_VIEW_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
NODE_MANAGED_POLICIES = [
    "AmazonEKSWorkerNodePolicy",
    # Read-only pulls from ECR; the CNI gets its own role through Pod Identity (not the node role).
    "AmazonEC2ContainerRegistryReadOnly",
    # Session Manager instead of SSH: there is no key pair and no open port 22.
    "AmazonSSMManagedInstanceCore",
]
# Add-ons EKS needs before any node can become Ready, and those that need running nodes.
ADDONS_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
ADDONS_AFTER_NODES = ("coredns", "aws-ebs-csi-driver", "eks-node-monitoring-agent")
"""Installed once the system nodes exist (their pods need a node). `eks-node-monitoring-agent` reports the node
conditions (AcceleratedHardwareReady...) that the node groups' `nodeRepairConfig` acts on (catalog/versions.py
`NODE_MONITORING_AGENT`)."""


def kubeconfig(cluster_name: str, endpoint: str, certificate_authority: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (no long-lived credentials in state)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint,
                                                       "certificate-authority-data": certificate_authority}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
        }}}],
    }, sort_keys=True)


def principal_key(arn: str) -> str:
    """The part of a role ARN that names its EKS access entry's resources: `<account>-<role name>`. EKS allows one
    access entry per principal (CreateAccessEntry: ResourceInUseException), and IAM role names are unique in an
    account whatever their path (IAM user guide, "IAM identifiers"), so this key is the entry's identity: reordering
    or removing another admin never renames, and so never replaces, this one (a list index did, and Pulumi's
    create-before-delete replacement then collided with the entry it was replacing)."""
    parts = arn.split(":", 5)
    account, resource = parts[4], parts[5]
    return f"{account}-{resource.rsplit('/', 1)[-1]}"


def addon_configuration(addon: str) -> str | None:
    """Configuration values per add-on (JSON, as EKS expects)."""
    if addon == "vpc-cni":
        # NetworkPolicy enforcement: the training namespace relies on a default-deny policy.
        return json.dumps({"enableNetworkPolicy": "true"}, sort_keys=True)
    return None


@dataclass
class EksClusterArgs:
    cluster_name: str
    """EKS cluster name."""
    kubernetes_version: str
    """Kubernetes minor version, pinned."""
    region: str
    """AWS region (for the kubeconfig)."""
    private_subnet_ids: pulumi.Input[list[str]]
    """Subnets for the system nodes (every private subnet)."""
    control_plane_subnet_ids: pulumi.Input[list[str]] | None = None
    """Subnets for the control plane's network interfaces: those of the zones the cluster was created in (EKS
    refuses subnets in other zones later). Default: `private_subnet_ids`."""
    endpoint_public_access: bool = False
    """Public API endpoint (restricted to `public_access_cidrs`)."""
    public_access_cidrs: list[str] = field(default_factory=list)
    private_endpoint_cidrs: list[str] = field(default_factory=list)
    """CIDRs allowed to the private endpoint on 443 (a deployer in the VPC or behind a Transit Gateway): the cluster
    security group EKS creates admits only its own members otherwise."""
    deployer_role_arn: pulumi.Input[str] | None = None
    """Role that runs Pulumi; gets cluster-admin through an access entry."""
    admin_role_arns: list[str] = field(default_factory=list)
    """Roles granted cluster-admin besides the deployer: people, the reaper, PR previews. Every one of their grants
    is an ancestor of the kubernetes provider (`access_grants`), so a destroy run by any of them keeps its access
    until the last in-cluster object is gone."""
    preview_role_arns: list[str] = field(default_factory=list)
    """Roles that only run `pulumi preview` (PR code runs under them): a read-only grant, never cluster-admin.
    (Listed among `admin_role_arns`, after the others, before this field existed: `access_grants` adopts that.)"""
    addon_versions: dict[str, str] = field(default_factory=dict)
    """Add-on builds the stack pins (`cluster.addonVersions`), over the catalog's; an add-on neither pins gets
    EKS's default build for `kubernetes_version`, read at `preview`/`up` (catalog/versions.py
    `EKS_DEFAULT_BUILD_ADDONS`)."""
    log_retention_days: int = 90
    kms_deletion_window_days: int = 30
    system_instance_types: list[str] = field(default_factory=lambda: ["m7i.xlarge"])
    system_min_size: int = 2
    system_desired_size: int = 2
    system_max_size: int = 3
    system_disk_size_gib: int = 50
    protect: bool = False
    """Protect the cluster and its KMS key from deletion."""
    resource_tags: dict[str, str] = field(default_factory=dict)
    """Tags for instances and volumes launched from launch templates (default tags don't reach them)."""


class EksCluster(pulumi.ComponentResource):
    cluster: aws.eks.Cluster
    node_role: aws.iam.Role
    deployer_access: aws.eks.AccessPolicyAssociation
    access_grants: list[pulumi.Resource]
    addon_versions: dict[str, pulumi.Output[str]]
    kubeconfig: pulumi.Output[str]
    security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:cluster:EksCluster", name, None, opts)
        self._kubernetes_version = args.kubernetes_version
        self._addon_pins = dict(args.addon_versions)
        self.addon_versions = {}
        child = pulumi.ResourceOptions(parent=self)
        protected = pulumi.ResourceOptions(parent=self, protect=args.protect)

        key = aws.kms.Key(
            f"{name}-secrets", description=f"Envelope encryption of Kubernetes secrets in {args.cluster_name}",
            enable_key_rotation=True, deletion_window_in_days=args.kms_deletion_window_days, opts=protected)
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{args.cluster_name}-secrets", target_key_id=key.key_id,
                      opts=child)
        # Created by the stack (not implicitly by EKS) so it has a retention and is deleted with the stack.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=f"/aws/eks/{args.cluster_name}/cluster", retention_in_days=args.log_retention_days,
            opts=child)

        cluster_role = aws.iam.Role(f"{name}-cluster", assume_role_policy=iam.service_trust("eks.amazonaws.com",
                                                                                            tag_session=True),
                                    description=f"EKS control plane of {args.cluster_name}", opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster", role=cluster_role.name, policy_arn=iam.managed_policy("AmazonEKSClusterPolicy"),
            opts=child)

        self.cluster = aws.eks.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            version=args.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config={
                "subnet_ids": (args.control_plane_subnet_ids if args.control_plane_subnet_ids is not None
                               else args.private_subnet_ids),
                "endpoint_private_access": True,
                "endpoint_public_access": args.endpoint_public_access,
                **({"public_access_cidrs": list(args.public_access_cidrs)} if args.endpoint_public_access else {}),
            },
            encryption_config={"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            # API mode only: access is granted through access entries below, never through aws-auth, and the
            # identity that happens to create the cluster gets no hidden admin rights.
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": False},
            # The core add-ons are installed below as pinned managed add-ons instead.
            bootstrap_self_managed_addons=False,
            upgrade_policy={"support_type": SUPPORT_TYPE},
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect, depends_on=[log_group, cluster_policy]),
        )
        self.security_group_id = self.cluster.vpc_config.cluster_security_group_id
        # The private endpoint's network interfaces carry the cluster security group, which EKS creates admitting
        # only itself; a deployer elsewhere in the VPC or a connected network needs 443 opened to it (EKS user
        # guide, "Cluster API server endpoint": "the cluster security group must allow ingress on port 443 from
        # your connected network").
        self.private_endpoint_ingress = [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{cidr.replace('/', '-').replace('.', '-')}", security_group_id=self.security_group_id,
                cidr_ipv4=cidr, ip_protocol="tcp", from_port=443, to_port=443,
                description="Kubernetes API from the deployer", opts=child)
            for cidr in args.private_endpoint_cidrs
        ]

        # --- access entries ---------------------------------------------------------------------------------
        # Every grant a destroy may run under (the deployer's, people's, the reaper's, PR previews') is returned in
        # `access_grants`, which the kubernetes provider depends on: Pulumi deletes in dependency order, everything
        # nothing depends on in the first wave (pkg/v3 resource/deploy/step_generator.go:2730-2747 ScheduleDeletes),
        # so a grant outside the provider's ancestors would be deleted before the in-cluster objects, and the rest of
        # that principal's destroy would get 403 (policy rule kubernetes-provider-depends-on-access-entry).
        deployer = args.deployer_role_arn or _caller_role_arn(self)
        self.deployer_access = self._admin_access(name, "deployer", deployer)
        self.access_grants = [self.deployer_access]
        # Keyed by principal (principal_key) whatever the grant, so moving a role between the lists changes its
        # policy, never its entry (a new entry for the same principal, created before the old one is deleted, would
        # collide). Before, admins were named by list position, preview roles listed among them after the others:
        # the alias adopts that entry on the first `up` after the rename (run it before reordering the lists).
        listed = [*[(role, CLUSTER_ADMIN_POLICY) for role in args.admin_role_arns],
                  *[(role, CLUSTER_VIEW_POLICY) for role in args.preview_role_arns]]
        for index, (role, policy) in enumerate(listed):
            self.access_grants.append(self._admin_access(name, f"access-{principal_key(role)}", role,
                                                         previous=f"{name}-admin-{index}", policy=policy))

        # --- node role and add-ons needed before nodes --------------------------------------------------------
        self.node_role = aws.iam.Role(f"{name}-node", assume_role_policy=iam.service_trust("ec2.amazonaws.com"),
                                      description=f"Nodes of {args.cluster_name}", opts=child)
        node_policies = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{policy}", role=self.node_role.name,
                                         policy_arn=iam.managed_policy(policy), opts=child)
            for policy in NODE_MANAGED_POLICIES
        ]
        cni_role = self._pod_role(name, "vpc-cni", ["AmazonEKS_CNI_Policy"])
        ebs_role = self._pod_role(name, "ebs-csi", ["service-role/AmazonEBSCSIDriverPolicy"])
        service_accounts = {"vpc-cni": ("aws-node", cni_role),
                            "aws-ebs-csi-driver": ("ebs-csi-controller-sa", ebs_role)}
        before_nodes = [self._addon(name, addon, service_accounts.get(addon)) for addon in ADDONS_BEFORE_NODES]

        # --- system node group ----------------------------------------------------------------------------------
        system_template = aws.ec2.LaunchTemplate(
            f"{name}-system", **launch_template_args(
                name=f"{args.cluster_name}-system", disk_size_gib=args.system_disk_size_gib,
                tags=args.resource_tags), opts=child)
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.cluster.name,
            # A prefix: changing the instance types replaces the group, and a fixed name would collide.
            node_group_name_prefix=f"{args.cluster_name}-system-",
            node_role_arn=self.node_role.arn,
            subnet_ids=args.private_subnet_ids,
            instance_types=list(args.system_instance_types),
            ami_type="AL2023_x86_64_STANDARD",
            capacity_type="ON_DEMAND",
            scaling_config={"min_size": args.system_min_size, "desired_size": args.system_desired_size,
                            "max_size": args.system_max_size},
            update_config={"max_unavailable": 1},
            labels={SYSTEM_ROLE_LABEL: "system"},
            launch_template={"id": system_template.id, "version": system_template.latest_version.apply(str)},
            node_repair_config={"enabled": True},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*node_policies, *before_nodes],
                                        ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.addons_after_nodes = [
            self._addon(name, addon, service_accounts.get(addon), depends_on=[self.system_node_group])
            for addon in ADDONS_AFTER_NODES
        ]

        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.certificate_authority.data,
        ).apply(lambda values: kubeconfig(values[0], values[1], values[2], args.region)))
        self.register_outputs({"clusterName": self.cluster.name, "endpoint": self.cluster.endpoint})

    def _admin_access(self, name: str, role: str, principal_arn: pulumi.Input[str], previous: str | None = None,
                      policy: str = CLUSTER_ADMIN_POLICY) -> aws.eks.AccessPolicyAssociation:
        aliases = [pulumi.Alias(name=previous)] if previous else None
        entry = aws.eks.AccessEntry(f"{name}-{role}", cluster_name=self.cluster.name, principal_arn=principal_arn,
                                    type="STANDARD", opts=pulumi.ResourceOptions(parent=self, aliases=aliases))
        return aws.eks.AccessPolicyAssociation(
            f"{name}-{role}", cluster_name=self.cluster.name, principal_arn=entry.principal_arn,
            policy_arn=policy, access_scope={"type": "cluster"},
            opts=pulumi.ResourceOptions(parent=self, aliases=aliases))

    def _pod_role(self, name: str, role: str, managed: list[str]) -> aws.iam.Role:
        pod_role = aws.iam.Role(f"{name}-{role}", assume_role_policy=iam.pod_identity_trust(),
                                description=f"Pod Identity role of {role}", opts=pulumi.ResourceOptions(parent=self))
        for policy in managed:
            aws.iam.RolePolicyAttachment(f"{name}-{role}-{policy.rsplit('/', 1)[-1]}", role=pod_role.name,
                                         policy_arn=iam.managed_policy(policy),
                                         opts=pulumi.ResourceOptions(parent=self))
        return pod_role

    def _addon(self, name: str, addon: str, identity: tuple[str, aws.iam.Role] | None,
               depends_on: list[pulumi.Resource] | None = None) -> aws.eks.Addon:
        extra: dict[str, Any] = {}
        if identity is not None:
            extra["pod_identity_associations"] = [{"service_account": identity[0], "role_arn": identity[1].arn}]
        configuration = addon_configuration(addon)
        if configuration is not None:
            extra["configuration_values"] = configuration
        version: pulumi.Input[str] | None = (self._addon_pins.get(addon)
                                             or versions.eks_addon_version(addon, self._kubernetes_version))
        if version is None:
            # Not on record offline: EKS's default build for this Kubernetes version (catalog/versions.py
            # EKS_DEFAULT_BUILD_ADDONS). An invoke, so the offline plan stays pure (its mocks answer it).
            version = aws.eks.get_addon_version_output(
                addon_name=addon, kubernetes_version=self._kubernetes_version,
                opts=pulumi.InvokeOutputOptions(parent=self)).version
        created = aws.eks.Addon(
            f"{name}-{addon}", cluster_name=self.cluster.name, addon_name=addon, addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE", **extra,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on or []))
        self.addon_versions[addon] = created.addon_version
        return created


def _caller_role_arn(parent: pulumi.Resource) -> pulumi.Output[str]:
    """The IAM role behind the deployer's (assumed-role) session."""
    identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    context = aws.iam.get_session_context_output(arn=identity.arn, opts=pulumi.InvokeOutputOptions(parent=parent))
    return context.issuer_arn
