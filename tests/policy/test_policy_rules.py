"""Every policy passes the compliant stack and fails at least one targeted break, naming field and resource."""
from __future__ import annotations

import json

import pytest
from policy_stack_builder import COMPUTED, DELETE, IMAGE, compliant_stack, facts, find, record, set_path

from policy.gtp_policy import POLICIES, POLICY_NAMES, Facts, run_policies
from policy.gtp_policy.offline import run_rule
from policy.gtp_policy.rules_kubernetes import parse_quantity, total_ranks

KINDS = ("dev", "prod", "bench", "offline")
RULES = {rule.name: rule for rule in POLICIES}
WORKER = ["inputs", "spec", "pytorchReplicaSpecs", "Worker", "template", "spec"]
WORKER_CONTAINER = WORKER + ["containers", 0]


def mps(replicas: int, rename: bool = True) -> str:
    return (f"version: v1\nsharing:\n  mps:\n    renameByDefault: {str(rename).lower()}\n    resources:\n"
            f"      - name: nvidia.com/gpu\n        replicas: {replicas}\n")


def remove(suffix):
    return lambda records: records.remove(find(records, suffix))


def options(suffix, option, value):
    return lambda records: set_path(find(records, suffix), ["options", option], value)


PER_NODE = ["inputs", "spec", "trainer", "resourcesPerNode", "requests"]

# (policy, stack kind, resource name suffix, path inside the record (or a callable), value, expected field text)
FAILING = [
    # The GPU left only in the runtime: Trainer <= v2.2.1 (and Kueue v0.19.2's quota) replaces it.
    ("k8s-trainjob-resources-per-node", "prod", "-trainjob", PER_NODE, {"cpu": "4", "memory": "16Gi"},
     "must request its GPUs"),
    ("k8s-trainjob-resources-per-node", "dev", "-trainjob", PER_NODE, DELETE, "must request its GPUs"),
    # EFA left only in the runtime: NCCL would fall back to TCP.
    ("k8s-trainjob-resources-per-node", "prod", "-trainjob", PER_NODE,
     {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}, "missing vpc.amazonaws.com/efa"),
    ("eks-private-endpoint-in-production", "prod", "-cluster", ["inputs", "vpcConfig", "endpointPublicAccess"],
     True, "vpcConfig.endpointPublicAccess"),
    ("eks-private-endpoint-in-production", "prod", "-cluster", ["inputs", "vpcConfig", "endpointPublicAccess"],
     COMPUTED, "vpcConfig.endpointPublicAccess"),
    ("eks-private-endpoint-in-production", "prod", "-cluster", ["inputs", "vpcConfig", "endpointPrivateAccess"],
     DELETE, "vpcConfig.endpointPrivateAccess"),
    ("eks-public-access-cidrs", "dev", "-cluster", ["inputs", "vpcConfig", "publicAccessCidrs"],
     ["10.0.0.0/8", "0.0.0.0/0"], "vpcConfig.publicAccessCidrs[1]"),
    ("eks-public-access-cidrs", "dev", "-cluster", ["inputs", "vpcConfig", "publicAccessCidrs"], ["::/0"],
     "vpcConfig.publicAccessCidrs[0]"),
    ("eks-public-access-cidrs", "dev", "-cluster", ["inputs", "vpcConfig", "publicAccessCidrs"], DELETE,
     "vpcConfig.publicAccessCidrs = <absent>"),
    ("eks-secrets-encryption", "dev", "-cluster", ["inputs", "encryptionConfig"], DELETE, "encryptionConfig"),
    ("eks-secrets-encryption", "dev", "-cluster", ["inputs", "encryptionConfig", "resources"], [],
     "encryptionConfig.resources"),
    ("eks-secrets-key-rotation", "dev", "-secrets-key", ["inputs", "enableKeyRotation"], False,
     "encryptionConfig.provider.keyArn"),
    ("eks-secrets-key-rotation", "dev", "-cluster", ["dependsOn"], [], "cannot find the aws:kms/key:Key"),
    ("kms-key-rotation", "dev", "-secrets-key", ["inputs", "enableKeyRotation"], DELETE, "enableKeyRotation"),
    ("eks-control-plane-logs", "dev", "-cluster", ["inputs", "enabledClusterLogTypes"], ["api", "audit"],
     "missing control-plane log types ['authenticator', 'controllerManager', 'scheduler']"),
    ("eks-api-authentication-mode", "dev", "-cluster", ["inputs", "accessConfig", "authenticationMode"],
     "API_AND_CONFIG_MAP", "accessConfig.authenticationMode = 'API_AND_CONFIG_MAP'"),
    ("eks-no-implicit-creator-admin", "dev", "-cluster",
     ["inputs", "accessConfig", "bootstrapClusterCreatorAdminPermissions"], DELETE,
     "accessConfig.bootstrapClusterCreatorAdminPermissions"),
    # Repair without the agent: blind to GPU faults (AcceleratedHardwareReady).
    ("eks-node-repair-needs-monitoring-agent", "prod", None, remove("-eks-node-monitoring-agent"), None,
     "node repair is on but the stack installs no eks-node-monitoring-agent add-on"),
    ("nodes-use-launch-template", "dev", "-gpu", ["inputs", "launchTemplate"], DELETE, "launchTemplate"),
    ("nodes-imdsv2", "dev", "-gpu-lt", ["inputs", "metadataOptions", "httpTokens"], "optional",
     "metadataOptions.httpTokens = 'optional'"),
    ("nodes-imdsv2", "dev", "-gpu-lt", ["inputs", "metadataOptions", "httpPutResponseHopLimit"], 2.0,
     "metadataOptions.httpPutResponseHopLimit = 2.0"),
    ("nodes-encrypted-volumes", "dev", "-gpu-lt", ["inputs", "blockDeviceMappings", 0, "ebs", "encrypted"],
     "false", "blockDeviceMappings[0].ebs.encrypted = 'false'"),
    ("nodes-encrypted-volumes", "dev", "-gpu-lt", ["inputs", "blockDeviceMappings"], DELETE, "blockDeviceMappings"),
    ("nodes-no-ssh", "dev", "-gpu-lt", ["inputs", "keyName"], "ops-key", "keyName = 'ops-key'"),
    ("nodes-no-ssh", "dev", "-gpu", ["inputs", "remoteAccess"], {"ec2SshKey": "ops-key"}, "remoteAccess"),
    ("nodes-no-public-ip", "dev", "-gpu-lt", ["inputs", "networkInterfaces", 0, "associatePublicIpAddress"],
     "true", "networkInterfaces[0].associatePublicIpAddress = 'true'"),
    ("nodes-private-subnets", "dev", "-gpu", ["dependsOn"],
     ["urn:pulumi:dev::gtp::aws:ec2/subnet:Subnet::dev-public-a"], "subnet 'dev-public-a' has mapPublicIpOnLaunch"),
    ("gpu-node-group-taint", "dev", "-gpu", ["inputs", "taints"], [], "taints = []"),
    ("gpu-node-group-taint", "dev", "-gpu", ["inputs", "taints", 0, "effect"], "PREFER_NO_SCHEDULE", "taints"),
    ("gpu-instance-nvidia-ami", "dev", "-gpu", ["inputs", "amiType"], "AL2023_x86_64_STANDARD",
     "amiType = 'AL2023_x86_64_STANDARD'"),
    ("ecr-scan-on-push", "dev", "-trainer", ["inputs", "imageScanningConfiguration", "scanOnPush"], COMPUTED,
     "imageScanningConfiguration.scanOnPush"),
    ("ecr-immutable-tags", "dev", "-trainer", ["inputs", "imageTagMutability"], "MUTABLE", "imageTagMutability"),
    ("ecr-kms-encryption", "dev", "-trainer", ["inputs", "encryptionConfigurations"],
     [{"encryptionType": "AES256"}], "encryptionConfigurations"),
    ("ecr-lifecycle-policy", "dev", None, remove("-trainer-lifecycle"), None,
     "aws:ecr/lifecyclePolicy:LifecyclePolicy"),
    ("ecr-no-public-repository-policy", "dev", "-trainer-pull", ["inputs", "policy"],
     json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "ecr:*"}]}),
     "policy.Statement[0].Principal = '*'"),
    ("ecr-no-public-repository-policy", "dev", "-trainer-pull", ["inputs", "policy"],
     {"Statement": [{"Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": "ecr:BatchGetImage"}]},
     "policy.Statement[0].Principal"),
    ("iam-no-wildcard-actions", "dev", "-gpu-node-ecr-pull", ["inputs", "policy"],
     json.dumps({"Statement": [{"Effect": "Allow", "Action": "ecr:*", "Resource": "*"}]}),
     "policy.Statement[0].Action = 'ecr:*'"),
    ("iam-no-wildcard-actions", "dev", "-trainer-s3", ["inputs", "policy"],
     json.dumps({"Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "*"], "Resource": "*"}]}),
     "policy.Statement[0].Action = '*'"),
    ("pod-identity-single-service-account", "dev", "-trainer", None, None, "serviceAccount = 'train*'"),
    ("irsa-trust-scoped", "dev", "-keda-operator", ["inputs", "assumeRolePolicy"], json.dumps({"Statement": [{
        "Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringLike": {"oidc.eks.example/id/X:sub": "system:serviceaccount:keda:*"}}}]}),
     "Condition.StringLike.oidc.eks.example/id/X:sub"),
    ("irsa-trust-scoped", "dev", "-keda-operator", ["inputs", "assumeRolePolicy"], json.dumps({"Statement": [{
        "Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity", "Condition": {}}]}),
     "web-identity trust must pin"),
    ("k8s-run-as-non-root", "dev", "-pytorchjob", WORKER_CONTAINER + ["securityContext", "runAsNonRoot"], False,
     "spec.pytorchReplicaSpecs.Worker.template.spec.containers[pytorch].securityContext.runAsNonRoot"),
    ("k8s-run-as-non-root", "dev", "-smoke", ["inputs", "spec", "template", "spec", "securityContext", "runAsUser"],
     0.0, "securityContext.runAsUser = 0.0"),
    ("k8s-read-only-root-filesystem", "dev", "-smoke",
     ["inputs", "spec", "template", "spec", "containers", 0, "securityContext", "readOnlyRootFilesystem"], False,
     "spec.template.spec.containers[pytorch].securityContext.readOnlyRootFilesystem = false"),
    ("k8s-drop-all-capabilities", "dev", "-pytorchjob", WORKER_CONTAINER + ["securityContext", "capabilities"],
     {"drop": ["NET_RAW"]}, "securityContext.capabilities.drop"),
    ("k8s-no-privilege-escalation", "dev", "-pytorchjob", WORKER_CONTAINER + ["securityContext", "privileged"],
     True, "securityContext.privileged = true"),
    ("k8s-seccomp-runtime-default", "dev", "-scaledjob",
     ["inputs", "spec", "jobTargetRef", "template", "spec", "securityContext", "seccompProfile", "type"],
     "Unconfined", "spec.jobTargetRef.template.spec.containers[pytorch].securityContext.seccompProfile.type"),
    ("k8s-no-host-namespaces", "dev", "-elasticjob",
     ["inputs", "spec", "replicaSpecs", "worker", "template", "spec", "hostIPC"], True,
     "spec.replicaSpecs.worker.template.spec.hostIPC = true"),
    ("k8s-no-host-path", "dev", "-smoke", ["inputs", "spec", "template", "spec", "volumes"],
     [{"name": "dev", "hostPath": {"path": "/dev"}}], "spec.template.spec.volumes[dev].hostPath"),
    ("k8s-requests-equal-limits", "dev", "-pytorchjob", WORKER_CONTAINER + ["resources", "requests", "memory"],
     "8Gi", "resources.requests.memory = '8Gi'"),
    ("k8s-requests-equal-limits", "dev", "-smoke",
     ["inputs", "spec", "template", "spec", "containers", 0, "resources", "limits"], DELETE, "resources.limits"),
    ("k8s-image-by-digest", "dev", "-pytorchjob", WORKER_CONTAINER + ["image"],
     "123456789012.dkr.ecr.us-east-1.amazonaws.com/gtp-trainer:latest", "containers[pytorch].image"),
    ("production-image-signed-or-own-build", "prod", "-pytorchjob", WORKER_CONTAINER + ["image"],
     IMAGE.replace("a" * 64, "b" * 64), "containers[pytorch].image"),
    ("k8s-image-from-stack-registry", "dev", "-pytorchjob", WORKER_CONTAINER + ["image"],
     "docker.io/library/python@sha256:" + "b" * 64, "must come from the stack's registry"),
    ("k8s-image-from-stack-registry", "dev", "-pytorchjob", WORKER_CONTAINER + ["image"],
     IMAGE.replace("gtp-trainer", "gtp-trainer-evil"), "containers[pytorch].image"),
    ("offline-images-from-site-registry", "offline", "-pytorchjob", WORKER_CONTAINER + ["image"],
     "docker.io/library/python@sha256:" + "b" * 64, "containers[pytorch].image"),
    ("offline-images-from-site-registry", "offline", "-training-operator", ["inputs", "file"],
     "vendor/operators/training-operator-v1.9.4.yaml", "file = 'vendor/operators/training-operator-v1.9.4.yaml'"),
    # A copy that only adds the platform priority class still runs the upstream images.
    ("offline-images-from-site-registry", "offline", "-training-operator", ["inputs", "file"],
     "build/offline/edge/training-operator-v1.9.4-0123456789ab.yaml",
     "file = 'build/offline/edge/training-operator-v1.9.4-0123456789ab.yaml'"),
    ("offline-images-from-site-registry", "offline", "-keda", ["inputs", "values"],
     {"image": {"keda": {"registry": "ghcr.io", "repository": "kedacore/keda", "tag": "2.20.2"}}},
     "values.image.keda.repository = 'ghcr.io/kedacore/keda'"),
    ("offline-images-from-site-registry", "offline", "-dlrover", ["inputs", "values"],
     {"controller": {"image": "easydl/elasticjob-controller:master"}},
     "values.controller.image = 'easydl/elasticjob-controller:master'"),
    ("k8s-no-loadbalancer-on-ephemeral", "bench", "-metrics", ["inputs", "spec", "type"], "LoadBalancer",
     "spec.type = 'LoadBalancer'"),
    ("k8s-privileged-namespace-allow-list", "dev", "-training",
     ["inputs", "metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged",
     "namespace 'training' may not be privileged"),
    ("gpu-shared-single-rank", "dev", "-pytorchjob", WORKER_CONTAINER + ["resources"],
     {"requests": {"nvidia.com/gpu.shared": "1"}, "limits": {"nvidia.com/gpu.shared": "1"}},
     "job has 2 ranks"),
    ("gpu-shared-single-rank", "dev", "-elasticjob", ["inputs", "spec", "replicaSpecs", "worker", "replicas"], 2.0,
     "resources.requests = 'nvidia.com/gpu.shared'"),
    ("gpu-shared-single-rank", "dev", "-elasticjob",
     ["inputs", "spec", "replicaSpecs", "worker", "template", "spec", "containers", 0, "command"],
     ["dlrover-run", "--nproc_per_node=2", "train.py"], "job has 2 ranks"),
    ("gpu-mps-replicas-range", "dev", "-nvidia-device-plugin", None, None, "replicas = 49"),
    ("gpu-mps-replicas-range", "dev", "-nvidia-device-plugin", None, None, "replicas = 1"),
    ("gpu-sharing-renamed-resource", "dev", "-nvidia-device-plugin", None, None, "sharing.mps.renameByDefault"),
    ("aws-required-tags", "dev", "-aws", ["inputs", "defaultTags", "tags", "gtp:project"], DELETE,
     "missing required tag keys ['gtp:project']"),
    ("aws-required-tags", "dev", "-gpu-lt", ["inputs", "tagSpecifications"], [],
     "tagSpecifications[resourceType=instance].tags"),
    ("aws-required-tags", "dev", "-aws", ["inputs", "defaultTags", "tags", "gtp:stack"], "prod",
     "defaultTags.tags.gtp:stack = 'prod'"),
    ("ephemeral-ttl-tags", "bench", "-aws", ["inputs", "defaultTags", "tags", "gtp:expires-at"], DELETE,
     "ephemeral stacks must carry TTL tags ['gtp:expires-at']"),
    ("ephemeral-ttl-tags", "bench", "-gpu-lt", ["inputs", "tagSpecifications", 0, "tags", "gtp:ttl-hours"], "0",
     "gtp:ttl-hours = '0'"),
    ("ephemeral-no-protect", "bench", None, options("-results", "protect", True), None, "options.protect = true"),
    ("ephemeral-no-retain-on-delete", "bench", None, options("-secrets-key", "retainOnDelete", True), None,
     "options.retainOnDelete = true"),
    ("ephemeral-force-delete", "bench", "-trainer", ["inputs", "forceDelete"], False, "forceDelete = false"),
    ("ephemeral-force-delete", "bench", "-results", ["inputs", "forceDestroy"], DELETE, "forceDestroy = <absent>"),
    ("production-protect-stateful", "prod", None, options("-secrets-key", "protect", False), None,
     "aws:kms/key:Key 'prod-secrets-key'"),
    ("production-no-force-delete", "prod", "-trainer", ["inputs", "forceDelete"], True, "forceDelete = true"),
    ("custom-resources-depend-on-operator", "dev", "-workload", ["dependsOn"], [],
     "kubeflow.org/v1:PyTorchJob 'dev-pytorchjob'"),
    ("custom-resources-depend-on-operator", "dev", "-elasticjob", ["dependsOn"], [], "dlrover operator"),
    ("kubernetes-provider-depends-on-access-entry", "dev", None, remove("-deployer-access"), None,
     "pulumi:providers:kubernetes 'dev-k8s'"),
    # Issue 41 blocker 2: an admin's (or the reaper's) grant the provider does not wait for is deleted in a
    # destroy's first wave, and that principal's in-cluster deletes then get 403.
    ("kubernetes-provider-depends-on-access-entry", "dev", None, lambda records: records.append(record(
        facts("dev")["stack"], "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "dev-eks-admin-reaper",
        {"clusterName": COMPUTED, "principalArn": "arn:aws:iam::123456789012:role/reaper",
         "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"})), None,
     "not an ancestor: dev-eks-admin-reaper"),
    ("kubernetes-provider-depends-on-access-entry", "dev", "-metrics", ["provider"], None,
     "in-cluster resources must use the stack's explicit kubernetes provider"),
]

SPECIAL = {  # cases whose break is more than one assignment
    ("pod-identity-single-service-account", "serviceAccount = 'train*'"):
        lambda rs: set_path(next(r for r in rs if r["type"].endswith("PodIdentityAssociation")),
                            ["inputs", "serviceAccount"], "train*"),
    ("gpu-mps-replicas-range", "replicas = 49"):
        lambda rs: set_path(_plugin(rs), ["inputs", "values", "config", "map", "default"], mps(49)),
    ("gpu-mps-replicas-range", "replicas = 1"):
        lambda rs: set_path(_plugin(rs), ["inputs", "values", "config", "map", "default"], mps(1)),
    ("gpu-sharing-renamed-resource", "sharing.mps.renameByDefault"):
        lambda rs: set_path(_plugin(rs), ["inputs", "values", "config", "map", "default"], mps(4, rename=False)),
}


def _plugin(records):
    return next(r for r in records if r["type"] == "kubernetes:helm.sh/v3:Release" and "nvidia" in r["name"])


def _case_id(case):
    return f"{case[0]}:{case[5][:40]}"


@pytest.mark.parametrize("kind", KINDS)
def test_compliant_stack_has_no_violations(kind):
    assert [str(v) for v in run_policies(compliant_stack(kind), facts(kind))] == []


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_policy_passes_compliant_resources(name):
    for kind in KINDS:
        assert run_rule(RULES[name], compliant_stack(kind), Facts.from_mapping(facts(kind))) == []


@pytest.mark.parametrize("case", FAILING, ids=_case_id)
def test_policy_fails_and_names_field_and_resource(case):
    name, kind, suffix, path, value, expected = case
    records = compliant_stack(kind)
    if (name, expected) in SPECIAL:
        SPECIAL[(name, expected)](records)
    elif callable(path):
        path(records)
    else:
        set_path(find(records, suffix), path, value)
    violations = [v for v in run_policies(records, facts(kind)) if v.policy_name == name]
    assert violations, f"{name} did not fire"
    assert any(expected in v.message for v in violations), [v.message for v in violations]
    for violation in violations:
        assert violation.message.startswith(f"{name}: ")
        assert violation.enforcement == "mandatory"
        if violation.urn:
            assert violation.urn in violation.message


def test_every_policy_has_a_failing_case():
    assert sorted(set(POLICY_NAMES) - {case[0] for case in FAILING}) == []


def test_at_least_25_policies_with_metadata():
    assert len(POLICIES) >= 25
    for rule in POLICIES:
        assert rule.name and rule.description and rule.enforcement in ("mandatory", "advisory")
        assert rule.scope in ("resource", "stack")


# ------------------------------------------------------------------ "<computed>" semantics


def test_computed_key_arn_is_resolved_through_dependencies():
    records = compliant_stack("dev")
    assert find(records, "-cluster")["inputs"]["encryptionConfig"]["provider"]["keyArn"] == COMPUTED
    assert [v for v in run_policies(records, facts("dev")) if "key-rotation" in v.policy_name] == []


def test_computed_image_passes_but_computed_program_booleans_fail():
    records = compliant_stack("dev")
    set_path(find(records, "-pytorchjob"), WORKER_CONTAINER + ["image"], COMPUTED)
    set_path(find(records, "-gpu-lt"), ["inputs", "networkInterfaces", 0, "associatePublicIpAddress"], COMPUTED)
    names = {v.policy_name for v in run_policies(records, facts("dev"))}
    assert names == {"nodes-no-public-ip"}


def test_external_literal_key_arn_passes_when_not_managed_here():
    records = compliant_stack("dev")
    cluster = find(records, "-cluster")
    cluster["dependsOn"] = []
    cluster["inputs"]["encryptionConfig"]["provider"]["keyArn"] = "arn:aws:kms:us-east-1:1:key/external"
    assert run_policies(records, facts("dev")) == []


def test_registry_null_disables_registry_check():
    records = compliant_stack("dev")
    set_path(find(records, "-pytorchjob"), WORKER_CONTAINER + ["image"], "ghcr.io/x/y@sha256:" + "c" * 64)
    assert run_policies(records, facts("dev", registry=None)) == []


def test_edge_stack_without_cluster_skips_access_entry_rule():
    records = [r for r in compliant_stack("dev") if not r["type"].startswith("aws:")]
    names = {v.policy_name for v in run_policies(records, facts("dev"))}
    assert "kubernetes-provider-depends-on-access-entry" not in names


def test_shared_slices_allowed_for_single_rank_jobs():
    records = compliant_stack("dev")
    assert total_ranks(find(records, "-elasticjob")) == 1
    assert total_ranks(find(records, "-pytorchjob")) == 2


def test_parse_quantity():
    assert parse_quantity("500m") == 0.5
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1024Mi") == parse_quantity("1Gi")
    assert parse_quantity(2.0) == parse_quantity("2")


@pytest.mark.parametrize("data, message", [
    ({"stack": "", "ephemeral": False, "production": False}, "stack: expected a non-empty string"),
    ({"stack": "dev", "ephemeral": "yes", "production": False}, "ephemeral: expected true or false"),
    ({"stack": "dev", "ephemeral": True, "production": True}, "mutually exclusive"),
    ({"stack": "dev", "region": "x"}, r"unknown key\(s\) \['region'\]"),
    ({"stack": "dev", "requiredTags": "gtp:stack"}, "requiredTags: expected a list"),
])
def test_invalid_facts_are_reported_together(data, message):
    with pytest.raises(ValueError, match=message):
        Facts.from_mapping(data)


def test_provider_inputs_arrive_as_json_strings_and_are_read_as_objects():
    # The engine (and the offline plan) carry a provider's nested inputs as JSON strings.
    records = compliant_stack("dev")
    provider = find(records, "-aws")
    provider["inputs"]["defaultTags"] = json.dumps(provider["inputs"]["defaultTags"])
    assert [v for v in run_policies(records, facts("dev")) if v.policy_name == "aws-required-tags"] == []
    tags = json.loads(provider["inputs"]["defaultTags"])
    del tags["tags"]["gtp:stack"]
    provider["inputs"]["defaultTags"] = json.dumps(tags)
    violations = [v for v in run_policies(records, facts("dev")) if v.policy_name == "aws-required-tags"]
    assert violations and "gtp:stack" in violations[0].message
