"""Rules over AWS resources: EKS control plane, GPU nodes, ECR, IAM.

Each function is a pure check: `(record, facts) -> findings` for resource rules,
`(StackIndex, facts) -> findings` for rules that must look at other resources.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .graph import StackIndex, inputs
from .model import (
    Facts,
    Finding,
    Record,
    as_list,
    as_number,
    get_path,
    is_computed,
    is_false,
    is_true,
    parse_json_document,
)

CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY_ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
KMS_KEY = "aws:kms/key:Key"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
ECR_REPOSITORY = "aws:ecr/repository:Repository"
ECR_LIFECYCLE = "aws:ecr/lifecyclePolicy:LifecyclePolicy"
ECR_REPOSITORY_POLICY = "aws:ecr/repositoryPolicy:RepositoryPolicy"
IAM_ROLE = "aws:iam/role:Role"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_POLICY = "aws:iam/policy:Policy"
IAM_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"

# https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
OPEN_CIDRS = ("0.0.0.0/0", "::/0")

# NVIDIA GPU instance families (g4ad is AMD Radeon, inf*/trn* are Neuron: not NVIDIA).
GPU_INSTANCE_TYPE = re.compile(r"^(p[2-9][a-z0-9-]*|g[3-9](?!ad)[a-z0-9-]*|gr[0-9][a-z0-9-]*)\.", re.IGNORECASE)
GPU_LABEL_KEYS = ("nvidia.com/gpu.present", "nvidia.com/gpu", "gtp/gpu", "gtp.io/gpu", "gpu")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
WORKLOAD_ROLE_MARKERS = ("node", "training")


def _in(record: Record, path: str, default: Any = None) -> Any:
    return get_path(inputs(record), path, default)


# ---------------------------------------------------------------- EKS control plane


def eks_private_endpoint_in_production(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER or not facts.production:
        return
    public = _in(record, "vpcConfig.endpointPublicAccess")
    private = _in(record, "vpcConfig.endpointPrivateAccess")
    if not is_false(public):
        # AWS defaults endpointPublicAccess to true when it is not set.
        yield Finding("vpcConfig.endpointPublicAccess", public,
                      "production clusters must set endpointPublicAccess to false (AWS default is true)")
    if not is_true(private):
        yield Finding("vpcConfig.endpointPrivateAccess", private,
                      "production clusters must set endpointPrivateAccess to true")


def eks_public_access_cidrs(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER:
        return
    if is_false(_in(record, "vpcConfig.endpointPublicAccess")):
        return
    cidrs = _in(record, "vpcConfig.publicAccessCidrs")
    if is_computed(cidrs):
        return
    if not cidrs:
        yield Finding("vpcConfig.publicAccessCidrs", cidrs,
                      "a public endpoint must list the CIDRs allowed to reach it (AWS default is 0.0.0.0/0)")
        return
    for index, cidr in enumerate(as_list(cidrs)):
        if isinstance(cidr, str) and cidr.strip() in OPEN_CIDRS:
            yield Finding(f"vpcConfig.publicAccessCidrs[{index}]", cidr,
                          "the public endpoint must not be open to the whole internet")


def _encryption_config(record: Record) -> Any:
    config = _in(record, "encryptionConfig")
    # pulumi-aws v7 makes encryptionConfig a single object; tolerate a one-element list from older plans.
    if isinstance(config, list):
        config = config[0] if config else None
    return config


def eks_secrets_encryption(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER:
        return
    config = _encryption_config(record)
    if is_computed(config):
        yield Finding("encryptionConfig", config, "secrets encryption must be configured explicitly, not computed")
        return
    if not isinstance(config, Mapping):
        yield Finding("encryptionConfig", config, "configure envelope encryption of secrets with a KMS key")
        return
    resources = config.get("resources")
    if not isinstance(resources, list) or "secrets" not in resources:
        yield Finding("encryptionConfig.resources", resources, 'must include "secrets"')
    key_arn = get_path(config, "provider.keyArn")
    if not key_arn:
        yield Finding("encryptionConfig.provider.keyArn", key_arn, "must name the KMS key that encrypts secrets")


def _key_spec_is_symmetric(record: Record) -> bool:
    spec = _in(record, "customerMasterKeySpec")
    usage = _in(record, "keyUsage")
    return spec in (None, "SYMMETRIC_DEFAULT") and usage in (None, "ENCRYPT_DECRYPT")


def kms_key_rotation(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != KMS_KEY or not _key_spec_is_symmetric(record):
        return  # AWS only rotates symmetric encryption keys automatically.
    rotation = _in(record, "enableKeyRotation")
    if not is_true(rotation):
        yield Finding("enableKeyRotation", rotation, "symmetric KMS keys must have automatic rotation enabled")


def eks_secrets_key_rotation(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """The KMS key a cluster's encryptionConfig names has rotation on.

    The key is found among the cluster's direct dependencies (an Output input or dependsOn), then among
    everything upstream. A literal ARN of a key this stack does not manage cannot be judged and passes.
    """
    for cluster in stack.of_type(CLUSTER):
        key_arn = get_path(_encryption_config(cluster), "provider.keyArn")
        if not key_arn:
            continue  # eks-secrets-encryption reports the missing key
        keys = [r for r in stack.direct_dependencies(cluster) if r.get("type") == KMS_KEY]
        if not keys:
            keys = [r for r in stack.upstream(cluster) if r.get("type") == KMS_KEY]
        if not keys and isinstance(key_arn, str) and not is_computed(key_arn):
            keys = [k for k in stack.of_type(KMS_KEY) if k.get("name") and str(k.get("name")) in key_arn]
            if not keys:
                continue  # a key managed outside this stack
        if not keys:
            yield Finding("encryptionConfig.provider.keyArn", key_arn,
                          "cannot find the aws:kms/key:Key this cluster depends on; pass the key's ARN output",
                          record=cluster)
            continue
        for key in keys:
            rotation = _in(key, "enableKeyRotation")
            if not is_true(rotation):
                yield Finding("encryptionConfig.provider.keyArn", key_arn,
                              f"its KMS key '{key.get('name')}' has enableKeyRotation = {rotation!r}; "
                              "set enableKeyRotation to true", record=cluster)


def eks_control_plane_logs(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER:
        return
    enabled = _in(record, "enabledClusterLogTypes")
    present = set(as_list(enabled)) if not is_computed(enabled) else set()
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in present]
    if missing:
        yield Finding("enabledClusterLogTypes", enabled, f"missing control-plane log types {missing}")


def eks_api_authentication_mode(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER:
        return
    mode = _in(record, "accessConfig.authenticationMode")
    if mode != "API":
        yield Finding("accessConfig.authenticationMode", mode,
                      'must be "API" (access entries only; no aws-auth ConfigMap; AWS default is CONFIG_MAP)')


def eks_no_implicit_creator_admin(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != CLUSTER:
        return
    bootstrap = _in(record, "accessConfig.bootstrapClusterCreatorAdminPermissions")
    if not is_false(bootstrap):
        yield Finding("accessConfig.bootstrapClusterCreatorAdminPermissions", bootstrap,
                      "must be false: grant the deployer access through an explicit access entry (AWS default is true)")


# ---------------------------------------------------------------- nodes


def nodes_use_launch_template(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != NODE_GROUP:
        return
    template = _in(record, "launchTemplate")
    if not isinstance(template, Mapping) and not is_computed(template):
        yield Finding("launchTemplate", template,
                      "node groups must use a launch template (IMDSv2 hop limit, encrypted volumes, no public IPs)")
    elif isinstance(template, Mapping) and not (template.get("id") or template.get("name")):
        yield Finding("launchTemplate", template, "must name the launch template by id or name")


def nodes_imdsv2(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != LAUNCH_TEMPLATE:
        return
    tokens = _in(record, "metadataOptions.httpTokens")
    if tokens != "required":
        yield Finding("metadataOptions.httpTokens", tokens, 'must be "required" (IMDSv2 only)')
    hops = _in(record, "metadataOptions.httpPutResponseHopLimit")
    if as_number(hops) != 1:
        yield Finding("metadataOptions.httpPutResponseHopLimit", hops,
                      "must be 1 so pods cannot reach the node's instance credentials")


def nodes_encrypted_volumes(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != LAUNCH_TEMPLATE:
        return
    mappings = _in(record, "blockDeviceMappings")
    if is_computed(mappings) or not mappings:
        yield Finding("blockDeviceMappings", mappings,
                      'declare the root volume with ebs.encrypted "true" (otherwise the AMI/account default decides)')
        return
    for index, mapping in enumerate(as_list(mappings)):
        ebs = get_path(mapping, "ebs")
        if ebs is None:
            continue  # noDevice / instance-store mappings
        encrypted = get_path(ebs, "encrypted")
        if not is_true(encrypted):
            yield Finding(f"blockDeviceMappings[{index}].ebs.encrypted", encrypted, 'must be "true"')


def nodes_no_ssh(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") == LAUNCH_TEMPLATE:
        key = _in(record, "keyName")
        if key:
            yield Finding("keyName", key, "no SSH key pairs on nodes; use SSM Session Manager")
    elif record.get("type") == NODE_GROUP:
        remote = _in(record, "remoteAccess")
        if remote:
            yield Finding("remoteAccess", remote, "no SSH remote access on node groups")


def nodes_no_public_ip(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != LAUNCH_TEMPLATE:
        return
    interfaces = _in(record, "networkInterfaces")
    for index, interface in enumerate(as_list(interfaces)):
        value = get_path(interface, "associatePublicIpAddress")
        if not is_false(value):
            yield Finding(f"networkInterfaces[{index}].associatePublicIpAddress", value,
                          'must be "false" (nodes get no public IPs)')


def _subnets_of(stack: StackIndex, node_group: Record) -> list[Record]:
    found = [r for r in stack.direct_dependencies(node_group) if r.get("type") == SUBNET]
    literal_ids = [s for s in as_list(_in(node_group, "subnetIds")) if isinstance(s, str) and not is_computed(s)]
    for subnet in stack.of_type(SUBNET):
        names = {subnet.get("name"), subnet.get("urn"), _in(subnet, "id")}
        if subnet not in found and any(i in names or (subnet.get("name") and i.startswith(f"{subnet.get('name')}_"))
                                       for i in literal_ids):
            found.append(subnet)
    return found


def nodes_private_subnets(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """Node groups use no subnet that maps public IPs on launch.

    The subnets are the node group's direct dependencies of type aws:ec2/subnet:Subnet (the subnetIds
    inputs are Outputs of those subnets) plus subnets whose name a literal subnet id names.
    """
    for node_group in stack.of_type(NODE_GROUP):
        for subnet in _subnets_of(stack, node_group):
            public = _in(subnet, "mapPublicIpOnLaunch")
            if not is_false(public) and public is not None:
                yield Finding("subnetIds", _in(node_group, "subnetIds"),
                              f"subnet '{subnet.get('name')}' has mapPublicIpOnLaunch = {public!r}; "
                              "place nodes in private subnets", record=node_group)


def node_repair_needs_monitoring_agent(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """A node group with `nodeRepairConfig.enabled` needs the eks-node-monitoring-agent add-on in the stack.

    Without the agent, EKS node repair reacts only to the kubelet's Ready condition; GPU faults (XID errors, DCGM
    failures) reach it only as the agent's AcceleratedHardwareReady condition (EKS user guide, node-health.html
    and node-repair.html), so a GPU node with a failed GPU keeps its place and keeps failing jobs."""
    agents = [a for a in stack.of_type(ADDON) if _in(a, "addonName") == NODE_MONITORING_AGENT]
    if agents:
        return
    for node_group in stack.of_type(NODE_GROUP):
        repair = _in(node_group, "nodeRepairConfig.enabled")
        if is_true(repair):
            yield Finding("nodeRepairConfig.enabled", repair,
                          f"node repair is on but the stack installs no {NODE_MONITORING_AGENT} add-on: repair sees "
                          "only the kubelet's Ready condition, never a GPU fault (AcceleratedHardwareReady); add the "
                          "add-on", record=node_group)


def _instance_types(record: Record) -> list[str]:
    return [t for t in as_list(_in(record, "instanceTypes")) if isinstance(t, str) and not is_computed(t)]


def is_gpu_node_group(record: Record) -> bool:
    ami = _in(record, "amiType")
    if isinstance(ami, str) and "NVIDIA" in ami.upper():
        return True
    labels = _in(record, "labels")
    if isinstance(labels, Mapping) and any(key in labels and not is_false(labels[key]) for key in GPU_LABEL_KEYS):
        return True
    return any(GPU_INSTANCE_TYPE.match(t) for t in _instance_types(record))


def gpu_node_group_taint(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != NODE_GROUP or not is_gpu_node_group(record):
        return
    taints = _in(record, "taints")
    for taint in as_list(taints):
        if isinstance(taint, Mapping) and all(taint.get(k) == v for k, v in GPU_TAINT.items()):
            return
    yield Finding("taints", taints, "GPU node groups must carry the taint nvidia.com/gpu=true:NO_SCHEDULE")


def gpu_instance_nvidia_ami(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != NODE_GROUP:
        return
    gpu_types = [t for t in _instance_types(record) if GPU_INSTANCE_TYPE.match(t)]
    if not gpu_types:
        return
    ami = _in(record, "amiType")
    if not (isinstance(ami, str) and "NVIDIA" in ami.upper()):
        yield Finding("amiType", ami, f"instance types {gpu_types} are NVIDIA GPUs; use an *_NVIDIA AMI type "
                                      "(AL2023_x86_64_NVIDIA, AL2023_ARM_64_NVIDIA or BOTTLEROCKET_*_NVIDIA)")


# ---------------------------------------------------------------- ECR


def ecr_scan_on_push(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != ECR_REPOSITORY:
        return
    scan = _in(record, "imageScanningConfiguration.scanOnPush")
    if not is_true(scan):
        yield Finding("imageScanningConfiguration.scanOnPush", scan, "must be true")


def ecr_immutable_tags(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != ECR_REPOSITORY:
        return
    mutability = _in(record, "imageTagMutability")
    if mutability != "IMMUTABLE":
        yield Finding("imageTagMutability", mutability, 'must be "IMMUTABLE" (AWS default is MUTABLE)')


def ecr_kms_encryption(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != ECR_REPOSITORY:
        return
    configs = _in(record, "encryptionConfigurations")
    types = [get_path(c, "encryptionType") for c in as_list(configs)]
    if not any(t in ("KMS", "KMS_DSSE") for t in types):
        yield Finding("encryptionConfigurations", configs, 'set encryptionType "KMS" (AWS default is AES256)')


def _repository_names(repository: Record) -> set:
    return {n for n in (repository.get("name"), _in(repository, "name")) if isinstance(n, str) and n}


def ecr_lifecycle_policy(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """Every repository has a lifecycle policy: one whose `repository` names it, that depends on it, that it
    parents, or (repository computed) that shares its parent component with it as the only repository there."""
    repositories = stack.of_type(ECR_REPOSITORY)
    policies = stack.of_type(ECR_LIFECYCLE)
    for repository in repositories:
        siblings = [r for r in repositories if r.get("parent") == repository.get("parent")]
        covered = False
        for policy in policies:
            target = _in(policy, "repository")
            if (target in _repository_names(repository)
                    or repository in stack.direct_dependencies(policy)
                    or policy.get("parent") == repository.get("urn")
                    or (is_computed(target) and policy.get("parent") == repository.get("parent")
                        and len(siblings) == 1)):
                covered = True
                break
        if not covered:
            yield Finding("aws:ecr/lifecyclePolicy:LifecyclePolicy", None,
                          "no lifecycle policy targets this repository; expire untagged and old images",
                          record=repository)


def _statements(document: Any) -> list[Mapping]:
    statements = get_path(document, "Statement")
    return [s for s in as_list(statements) if isinstance(s, Mapping)]


def _is_wildcard_principal(principal: Any) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, Mapping):
        return any(v == "*" or (isinstance(v, list) and "*" in v) for v in principal.values())
    return False


def ecr_no_public_repository_policy(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != ECR_REPOSITORY_POLICY:
        return
    document = parse_json_document(_in(record, "policy"))
    for index, statement in enumerate(_statements(document)):
        if statement.get("Effect", "Allow") == "Allow" and _is_wildcard_principal(statement.get("Principal")):
            yield Finding(f"policy.Statement[{index}].Principal", statement.get("Principal"),
                          "repository policies must not grant access to every principal ('*')")


# ---------------------------------------------------------------- IAM


def _role_names(role: Record) -> set:
    return {n for n in (role.get("name"), _in(role, "name")) if isinstance(n, str) and n}


def _has_marker(*names: Any) -> bool:
    return any(isinstance(n, str) and any(m in n.lower() for m in WORKLOAD_ROLE_MARKERS) for n in names)


def workload_roles(stack: StackIndex) -> list[Record]:
    """Node and training roles: name contains "node" or "training", or a PodIdentityAssociation uses the role
    (its roleArn names the role or it depends on it)."""
    roles = stack.of_type(IAM_ROLE)
    chosen = [r for r in roles if _has_marker(*_role_names(r))]
    for association in stack.of_type(POD_IDENTITY):
        role_arn = _in(association, "roleArn")
        for role in roles:
            if role in chosen:
                continue
            by_arn = isinstance(role_arn, str) and any(role_arn.endswith(f"/{n}") for n in _role_names(role))
            if by_arn or role in stack.direct_dependencies(association):
                chosen.append(role)
    return chosen


def _targets_role(stack: StackIndex, attached: Record, role: Record) -> bool:
    target = _in(attached, "role")
    return (target in _role_names(role) or role in stack.direct_dependencies(attached)
            or (isinstance(target, str) and target.endswith(tuple(f"/{n}" for n in _role_names(role)))))


def _wildcard_actions(document: Any) -> Iterator[tuple[str, Any]]:
    for index, statement in enumerate(_statements(document)):
        if statement.get("Effect", "Allow") != "Allow":
            continue
        if "NotAction" in statement:
            yield f"Statement[{index}].NotAction", statement["NotAction"]
        for action in as_list(statement.get("Action")):
            if isinstance(action, str) and (action == "*" or action.endswith(":*")):
                yield f"Statement[{index}].Action", action


def iam_no_wildcard_actions(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    """No `*` or `service:*` actions (nor Allow+NotAction) in policies attached to node or training roles.

    Checked documents: the role's inlinePolicies, RolePolicies attached to it (by `role` name, by dependency,
    or — role computed, no dependency — by a RolePolicy name containing "node"/"training"), and managed
    aws:iam/policy:Policy documents a RolePolicyAttachment attaches to it. AWS-managed policy ARNs are not
    documents of this program and are not read.
    """
    roles = workload_roles(stack)
    role_policies = stack.of_type(IAM_ROLE_POLICY)
    attachments = stack.of_type(IAM_ROLE_POLICY_ATTACHMENT)
    managed = stack.of_type(IAM_POLICY)
    reported: set = set()

    def check(record: Record, field: str, raw: Any, role_name: str) -> Iterator[Finding]:
        for path, action in _wildcard_actions(parse_json_document(raw)):
            key = (record.get("urn"), field, path)
            if key not in reported:
                reported.add(key)
                yield Finding(f"{field}.{path}", action,
                              f"wildcard action in a policy of workload role '{role_name}'; list the actions",
                              record=record)

    for role in roles:
        role_name = str(role.get("name"))
        for index, inline in enumerate(as_list(_in(role, "inlinePolicies"))):
            yield from check(role, f"inlinePolicies[{index}].policy", get_path(inline, "policy"), role_name)
        for role_policy in role_policies:
            if _targets_role(stack, role_policy, role) or (
                    is_computed(_in(role_policy, "role")) and not stack.direct_dependencies(role_policy)
                    and _has_marker(role_policy.get("name"))):
                yield from check(role_policy, "policy", _in(role_policy, "policy"), role_name)
        for attachment in attachments:
            if not _targets_role(stack, attachment, role):
                continue
            arn = _in(attachment, "policyArn")
            for policy in managed:
                names = {policy.get("name"), _in(policy, "name")} - {None}
                if policy in stack.direct_dependencies(attachment) or (
                        isinstance(arn, str) and any(arn.endswith(f"/{n}") for n in names)):
                    yield from check(policy, "policy", _in(policy, "policy"), role_name)


def pod_identity_single_service_account(record: Record, facts: Facts) -> Iterator[Finding]:
    if record.get("type") != POD_IDENTITY:
        return
    for field in ("namespace", "serviceAccount"):
        value = _in(record, field)
        if is_computed(value):
            continue
        if not isinstance(value, str) or not value:
            yield Finding(field, value, "must name exactly one (non-empty string)")
        elif "*" in value or "?" in value:
            yield Finding(field, value, "must not contain wildcards; associate one service account")


def irsa_trust_scoped(record: Record, facts: Facts) -> Iterator[Finding]:
    """IRSA trust policies pin `<oidc>:sub` with StringEquals to one `system:serviceaccount:<ns>:<sa>`."""
    if record.get("type") != IAM_ROLE:
        return
    document = parse_json_document(_in(record, "assumeRolePolicy"))
    for index, statement in enumerate(_statements(document)):
        actions = as_list(statement.get("Action"))
        conditions = statement.get("Condition") or {}
        sub_found = False
        for operator, clauses in (conditions.items() if isinstance(conditions, Mapping) else ()):
            for key, value in (clauses.items() if isinstance(clauses, Mapping) else ()):
                if not (isinstance(key, str) and key.endswith(":sub")):
                    continue
                sub_found = True
                field = f"assumeRolePolicy.Statement[{index}].Condition.{operator}.{key}"
                values = as_list(value)
                if operator != "StringEquals":
                    yield Finding(field, value, f"use StringEquals for :sub, not {operator}")
                elif len(values) != 1 or any(isinstance(v, str) and ("*" in v or "?" in v) for v in values):
                    yield Finding(field, value, "must name exactly one service account, without wildcards")
        if "sts:AssumeRoleWithWebIdentity" in actions and statement.get("Effect", "Allow") == "Allow" \
                and not sub_found:
            yield Finding(f"assumeRolePolicy.Statement[{index}].Condition", conditions or None,
                          "web-identity trust must pin <oidc>:sub to one service account with StringEquals")
