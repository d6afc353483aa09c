"""The stack config parser: every rule, asserting the error text (key path, bad value, what is allowed)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from stack_config import ConfigError
from stack_config.parse import SCALAR_DEFAULTS, SECTIONS
from stages.config import parse_stack_config
from tests.conftest import ROOT

DEPLOYER: dict[str, Any] = {"access": "transit-gateway", "runnerLabels": ["self-hosted", "gtp"],
                            "transitGatewayId": "tgw-0a1b2c3d4e5f67890", "cidrs": ["10.250.0.0/24"]}
BASE: dict[str, Any] = {
    "cluster": {"mode": "eks", "deployer": DEPLOYER, "deployerRoleArn": "arn:aws:iam::000011112222:role/gtp-deployer"},
    "gpuNodeGroups": {"train": {"instanceTypes": ["g6.xlarge"], "minSize": 0, "maxSize": 2}},
    # a pod that fits a g6.xlarge (4 vCPUs, 16 GiB; the defaults 8 / 64Gi are sized for larger types)
    "workloads": {"train": {"kind": "pytorchjob", "nodeGroup": "train", "cpu": "2", "memory": "8Gi", "shmSize": "2Gi"}},
}
EXISTING: dict[str, Any] = {
    "cluster": {"mode": "existing"},
    "kubeconfig": "apiVersion: v1",
    "gpuNodeGroups": {"orin": {"gpusPerNode": 1, "gpuModel": "Orin", "architecture": "arm64", "maxSize": 2}},
    "image": {"platform": "linux/arm64"},
    "workloads": {"train": {"kind": "pytorchjob", "nodeGroup": "orin"}},
}


def parse(raw: dict[str, Any], secrets: tuple[str, ...] = ("kubeconfig", "registryPassword")):
    return parse_stack_config(raw, project="gtp", stack="t", secret_keys=secrets)


def with_(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `base` with `path` (dotted, camelCase) set to `value`."""
    raw = copy.deepcopy(base)
    node = raw
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return raw


def problems_of(raw: dict[str, Any], **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(raw, **kwargs)
    return [str(p) for p in caught.value.problems]


def test_checked_in_stacks_parse() -> None:
    from verify.plan import stack_config

    for stack in ("dev", "edge", "prod"):
        project, config, secrets = stack_config(ROOT, stack)
        raw = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("gtp:")}
        secret_keys = [s.split(":", 1)[1] for s in secrets]
        parsed = parse_stack_config(raw, project=project, stack=stack, secret_keys=secret_keys)
        assert parsed.cluster_name == f"gtp-{stack}"


def test_defaults_of_a_minimal_stack() -> None:
    config = parse(BASE)
    assert config.region == "us-west-2" and config.kubernetes_version == "1.34"
    assert config.gpu.sharing.mode == "none" and config.lifecycle.kms_deletion_window == 30
    assert config.node_facts("train").num_gpus == 1
    assert config.resource_tags() == {"gtp:lifecycle": "persistent", "gtp:project": "gtp", "gtp:stack": "t"}


def test_structured_values_arrive_as_json_strings_from_the_engine() -> None:
    import json

    config = parse({key: json.dumps(value) for key, value in BASE.items()})
    assert config.gpu_node_groups["train"].max_size == 2


def test_several_mistakes_are_reported_together_with_their_paths() -> None:
    raw = with_(BASE, "gpuNodeGroups.train.minSize", 3)
    raw["gpuNodeGroups"]["train"]["maxSzie"] = 5
    raw["gpu"] = {"sharing": {"mode": "mpss"}}
    with pytest.raises(ConfigError) as caught:
        parse(raw)
    message = str(caught.value)
    assert "stack 't' has 3 config problem(s)" in message
    assert "gpuNodeGroups.train.maxSzie: unknown key (did you mean 'maxSize'?)" in message
    assert "gpuNodeGroups.train.maxSize: 2 is less than minSize 3" in message
    assert "gpu.sharing.mode: 'mpss' is not allowed: input should be 'none', 'mps' or 'time-slicing'" in message


def test_a_section_that_fails_to_parse_does_not_cause_spurious_cross_section_problems() -> None:
    raw = with_(BASE, "gpu.sharing.mode", "bogus")
    raw["workloads"]["train"]["gpuResource"] = "shared"  # would complain about sharing 'none' if the default leaked in
    assert problems_of(raw) == [
        "gpu.sharing.mode: 'bogus' is not allowed: input should be 'none', 'mps' or 'time-slicing'"]


RULES = [
    # (stack base, key path, value, expected problem, regex)
    (BASE, "clustr", {}, r"^clustr: unknown key \(did you mean 'cluster'\?\)"),
    (BASE, "cluster.endpointPublicAcess", True,
     r"^cluster\.endpointPublicAcess: unknown key \(did you mean 'endpointPublicAccess'"),
    (BASE, "cluster.mode", "gke", r"^cluster\.mode: 'gke' is not allowed; allowed: eks, existing"),
    (BASE, "kubernetesVersion", "1.20", r"^kubernetesVersion: '1\.20' is not supported; allowed: 1\.32, 1\.33"),
    (BASE, "kubernetesVersion", "1.3.4",
     r"^kubernetesVersion: '1\.3\.4' is not supported \(did you mean '1\.34'\?\); allowed: "),
    (BASE, "region", "mars-1", r"^region: 'mars-1' is not an AWS region"),
    (BASE, "region", "us-west-3",
     r"^region: 'us-west-3' is not an AWS region \(did you mean 'us-west-2'\?\); allowed: af-south-1, "),
    (BASE, "region", "eu-centrl-1", r"^region: 'eu-centrl-1' is not an AWS region \(did you mean 'eu-central-1'\?\)"),
    (BASE, "tags", {"aws:cost": "x"}, r"^tags\.aws:cost: 'aws:cost': the 'aws:' prefix is reserved for AWS"),
    (BASE, "tags", {"gtp:stack": "x"}, r"^tags\.gtp:stack: 'gtp:stack': the 'gtp:' prefix is the platform's own"),
    (BASE, "tags", {"k" * 129: "x"}, r"^tags\.k+: key of 129 characters; allowed 1\.\.128"),
    (BASE, "tags", {"team": "v" * 257}, r"^tags\.team: value of 257 characters; allowed 0\.\.256"),
    (BASE, "tags", {"team": "ml#1"}, r"^tags\.team: value 'ml#1' has characters AWS tags don't allow"),
    (BASE, "tags", {f"t{i}": "x" for i in range(48)},
     r"^tags: 48 tags plus the platform's make 51; AWS allows at most 50"),
    (BASE, "cluster.systemNodeGroup", {"instanceTypes": ["m7i.larg"]},
     r"^cluster\.systemNodeGroup\.instanceTypes\[0\]: 'm7i\.larg' is not a supported system instance type "
     r"\(did you mean 'm7i\.large'\?\)"),
    (BASE, "cluster.systemNodeGroup", {"instanceTypes": []}, r"^cluster\.systemNodeGroup\.instanceTypes: is empty"),
    (with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs", ["2001:db8::/32"],
     r"^cluster\.publicAccessCidrs\[0\]: '2001:db8::/32' is an IPv6 CIDR, but the cluster is IPv4"),
    (BASE, "gpuNodeGroups.system", {"instanceTypes": ["g6.xlarge"]},
     r"^gpuNodeGroups\.system: name 'system' collides with the system node group \('gtp-t-system'"),
    (BASE, "gpuNodeGroups.a-very-long-node-group-name-for-the-h100-training-runs-of-q4",
     {"instanceTypes": ["g6.xlarge"]},
     r"^gpuNodeGroups\.a-very-long-node-group-name-for-the-h100-training-runs-of-q4: name prefix "
     r"'gtp-t-a-very-long.*-' is 67 characters; EKS allows 63 including a 26-character suffix: "
     r"use a group name of at most 30 characters"),
    (BASE, "namePrefix", "GTP_", r"^namePrefix: 'GTP_' makes cluster name 'GTP_-t'"),
    (BASE, "cluster.endpointPublicAccess", True,
     r"^cluster\.publicAccessCidrs: is empty, but endpointPublicAccess is true"),
    (with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs", ["0.0.0.0/0"],
     r"^cluster\.publicAccessCidrs\[0\]: '0\.0\.0\.0/0' opens the API server to the whole internet"),
    (with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs", ["10.0.0.300/8"],
     r"^cluster\.publicAccessCidrs\[0\]: '10\.0\.0\.300/8' is not a CIDR"),
    (BASE, "cluster.publicAccessCidrs", ["203.0.113.0/24"],
     r"^cluster\.publicAccessCidrs: is set, but endpointPublicAccess is false"),
    # where the deployer stands (issue 14): the API must be reachable from it
    (BASE, "cluster.deployer", None, r"^cluster\.deployer: is required for mode 'eks': declare where `pulumi up` runs"),
    (BASE, "cluster.deployer.access", None,
     r"^cluster\.deployer\.access: is required for mode 'eks'; allowed: public-endpoint"),
    (BASE, "cluster.deployer.access", "vpn",
     r"^cluster\.deployer\.access: 'vpn' is not allowed: input should be 'public-endpoint', 'in-vpc' or "
     r"'transit-gateway'"),
    (BASE, "cluster.deployer.access", "public-endpoint",
     r"^cluster\.deployer\.access: 'public-endpoint', but cluster\.endpointPublicAccess is false: the API is "
     r"private-only"),
    (BASE, "cluster.deployer.access", "in-vpc",
     r"^cluster\.deployer\.access: 'in-vpc', but this stack creates its VPC \(network\.existingVpcId is unset\)"),
    (with_(with_(BASE, "network.existingVpcId", "vpc-0a1b2c3d"), "network.existingPrivateSubnetIds",
           ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]),
     "cluster.deployer.access", "transit-gateway",
     r"^cluster\.deployer\.access: 'transit-gateway' attaches the VPC this stack creates, but network\.existingVpcId "
     r"adopts 'vpc-0a1b2c3d'"),
    (BASE, "cluster.deployer.runnerLabels", ["ubuntu-latest"],
     r"^cluster\.deployer\.runnerLabels\[0\]: 'ubuntu-latest' is a GitHub-hosted runner"),
    (BASE, "cluster.deployer.runnerLabels", ["linux", "macos-15"],
     r"^cluster\.deployer\.runnerLabels\[1\]: 'macos-15' is a GitHub-hosted runner"),
    (BASE, "cluster.deployer.runnerLabels", [], r"^cluster\.deployer\.runnerLabels: is required for mode 'eks'"),
    (BASE, "cluster.deployer.cidrs", [], r"^cluster\.deployer\.cidrs: is required for mode 'eks'"),
    (BASE, "cluster.deployer.cidrs", ["0.0.0.0/0"], r"^cluster\.deployer\.cidrs\[0\]: '0\.0\.0\.0/0' is every address"),
    (BASE, "cluster.deployer.cidrs", ["10.250.0.1/24"],
     r"^cluster\.deployer\.cidrs\[0\]: '10\.250\.0\.1/24' is not an IPv4 CIDR"),
    (BASE, "cluster.deployer.cidrs", ["fd00::/64"], r"^cluster\.deployer\.cidrs\[0\]: 'fd00::/64' is IPv6"),
    (BASE, "cluster.deployer.cidrs", ["10.0.4.0/24"],
     r"^cluster\.deployer\.cidrs\[0\]: '10\.0\.4\.0/24' overlaps network\.vpcCidr '10\.0\.0\.0/16'"),
    (BASE, "cluster.deployer.transitGatewayId", None,
     r"^cluster\.deployer\.transitGatewayId: is required for access 'transit-gateway'"),
    (BASE, "cluster.deployer.transitGatewayId", "tgw-main",
     r"^cluster\.deployer\.transitGatewayId: 'tgw-main' is not a Transit Gateway id"),
    (with_(with_(with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs", ["198.18.0.0/24"]),
           "cluster.deployer.access", "public-endpoint"), "cluster.deployer.cidrs", ["198.18.1.7/32"],
     r"^cluster\.deployer\.cidrs\[0\]: '198\.18\.1\.7/32' is not within cluster\.publicAccessCidrs "
     r"\(198\.18\.0\.0/24\)"),
    (with_(with_(with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs", ["198.18.0.0/24"]),
           "cluster.deployer.access", "public-endpoint"), "cluster.deployer.transitGatewayId", "tgw-0a1b2c3d4e5f67890",
     r"^cluster\.deployer\.transitGatewayId: 'tgw-0a1b2c3d4e5f67890' has no effect here: only applies where "
     r"cluster\.mode is 'eks' and cluster\.deployer\.access is 'transit-gateway' \(here cluster\.deployer\.access is "
     r"'public-endpoint'\); remove it$"),
    (EXISTING, "cluster.deployer", {"access": "in-vpc", "cidrs": ["10.1.0.0/24"]},
     r"^cluster\.deployer\.access: 'in-vpc' has no effect here: only applies where cluster\.mode is 'eks' \(here "
     r"cluster\.mode is 'existing'\)"),
    (BASE, "cluster.logRetentionDays", 45, r"^cluster\.logRetentionDays: 45 is not a CloudWatch retention"),
    (BASE, "cluster.adminRoleArns", ["admin"], r"^cluster\.adminRoleArns\[0\]: 'admin' is not an IAM role ARN"),
    (BASE, "cluster.systemNodeGroup", {"minSize": 3, "maxSize": 2},
     r"^cluster\.systemNodeGroup\.maxSize: 2 is less than minSize 3"),
    (BASE, "network.vpcCidr", "10.0.0.0/8", r"^network\.vpcCidr: '10\.0\.0\.0/8' must be an IPv4 /16\.\./20"),
    (BASE, "network.numAvailabilityZones", 1, r"^network\.numAvailabilityZones: 1 is out of range: allowed 2\.\.6$"),
    (BASE, "network.existingVpcId", "vpc-1",
     r"^network\.existingPrivateSubnetIds: an adopted VPC needs at least two private subnets"),
    (BASE, "gpuNodeGroups.train.instanceTypes", ["g6.xlarg"],
     r"^gpuNodeGroups\.train\.instanceTypes\[0\]: 'g6\.xlarg' is not a supported GPU instance type "
     r"\(did you mean 'g6\.xlarge'\?\)"),
    (BASE, "gpu.sharing.mode", "time-slice",
     r"^gpu\.sharing\.mode: 'time-slice' is not allowed: input should be 'none', 'mps' or 'time-slicing' "
     r"\(did you mean 'time-slicing'\?\)$"),
    (BASE, "gpu.readinessTimeoutSeconds", 30,
     r"^gpu\.readinessTimeoutSeconds: 30 is out of range: allowed 60\.\.7200$"),
    (BASE, "lifecycle.ttlHours", 0, r"^lifecycle\.ttlHours: 0 is out of range: allowed > 0 and <= 720$"),
    (BASE, "gpuNodeGroups.train.instanceTypes", ["m7i.large"],
     r"^gpuNodeGroups\.train\.instanceTypes\[0\]: 'm7i\.large' is not a supported GPU instance type"),
    (BASE, "gpuNodeGroups.train.instanceTypes", ["g6.xlarge", "g5g.xlarge"],
     r"^gpuNodeGroups\.train\.instanceTypes: \['g6\.xlarge', 'g5g\.xlarge'\] mixes architectures"),
    (BASE, "gpuNodeGroups.train.amiType", "AL2023_ARM_64_NVIDIA",
     r"^gpuNodeGroups\.train\.amiType: 'AL2023_ARM_64_NVIDIA' is for arm64, but the instance types are amd64"),
    (BASE, "gpuNodeGroups.train.efa", True, r"^gpuNodeGroups\.train\.efa: true, but g6\.xlarge has no EFA support"),
    (BASE, "gpuNodeGroups.train.maxSize", 0,
     r"^gpuNodeGroups\.train\.maxSize: 0 is out of range: allowed >= 1 \(no upper bound\)$"),
    (with_(BASE, "gpuNodeGroups.train.minSize", 1), "gpuNodeGroups.train.desiredSize", 3,
     r"^gpuNodeGroups\.train\.desiredSize: 3 is outside minSize\.\.maxSize \(1\.\.2\)"),
    (with_(BASE, "gpuNodeGroups.train.capacityType", "SPOT"), "gpuNodeGroups.train.capacityReservationId",
     "cr-0123456789abcdef0",
     r"^gpuNodeGroups\.train\.capacityReservationId: a SPOT group can't target a capacity reservation"),
    (BASE, "gpuNodeGroups.train.capacityType", "CAPACITY_BLOCK",
     r"^gpuNodeGroups\.train\.capacityReservationId: is required for capacityType CAPACITY_BLOCK"),
    (BASE, "gpuNodeGroups.train.capacityReservationId", "reservation-1",
     r"^gpuNodeGroups\.train\.capacityReservationId: 'reservation-1' is not a reservation id"),
    (with_(BASE, "gpuNodeGroups.train.capacityReservationId", "cr-0123456789abcdef0"),
     "gpuNodeGroups.train.placementGroup", True,
     r"^gpuNodeGroups\.train\.placementGroup: true, but a capacity reservation is targeted"),
    (BASE, "gpuNodeGroups.Train_1", {"instanceTypes": ["g6.xlarge"]},
     r"^gpuNodeGroups\.Train_1: name 'Train_1' must be a lowercase DNS label"),
    (BASE, "gpu.sharing", {"mode": "mps", "replicas": 49},
     r"^gpu\.sharing\.replicas: 49 is outside 2\.\.48 \(MPS clients per GPU\)"),
    (BASE, "gpu.sharing", {"mode": "mps", "replicas": 1}, r"^gpu\.sharing\.replicas: 1 is outside 2\.\.48"),
    (BASE, "gpu.sharing", {"mode": "none", "replicas": 4},
     r"^gpu\.sharing\.replicas: 4 has no effect here: only applies where gpu\.sharing\.mode is 'mps' or "
     r"'time-slicing' \(here gpu\.sharing\.mode is 'none'\); mode 'none' gives whole GPUs"),
    (BASE, "gpu.sharing", {"mode": "time-slicing", "replicas": 1},
     r"^gpu\.sharing\.replicas: 1 must be at least 2 for time-slicing"),
    (with_(BASE, "gpu.sharing", {"mode": "mps", "replicas": 4}), "gpuNodeGroups.train.migStrategy", "single",
     r"^gpuNodeGroups\.train\.migStrategy: 'single' with MPS sharing: MPS is not supported on MIG devices"),
    (with_(BASE, "gpu.sharing", {"mode": "mps", "replicas": 4}), "gpuNodeGroups.train.amiType",
     "BOTTLEROCKET_x86_64_NVIDIA",
     r"^gpuNodeGroups\.train\.amiType: 'BOTTLEROCKET_x86_64_NVIDIA' runs its own device plugin"),
    (BASE, "image.reference", "repo:latest", r"^image\.build: is true, but image\.reference is set"),
    (with_(BASE, "image.build", False), "image.reference", "repo:latest",
     r"^image\.reference: 'repo:latest' must reference an image by digest"),
    (BASE, "image.build", False, r"^image\.reference: is required when image\.build is false"),
    (BASE, "image.registry", "existing", r"^image\.existingRegistry: is required when image\.registry is 'existing'"),
    (BASE, "image.platform", "linux/arm64",
     r"^image\.platform: 'linux/arm64' doesn't match the GPU nodes' architecture amd64"),
    (BASE, "workloads.train.nodeGroup", "missing",
     r"^workloads\.train\.nodeGroup: 'missing' is not a GPU node group; allowed: train"),
    (BASE, "workloads.train.gpusPerNode", 4,
     r"^workloads\.train\.gpusPerNode: 4 is more than the 1 GPUs of a 'train' node"),
    (BASE, "workloads.train.gpuResource", "shared",
     r"^workloads\.train\.gpuResource: 'shared' needs GPU sharing on node group 'train'"),
    (with_(with_(BASE, "gpu.sharing", {"mode": "mps", "replicas": 4}), "workloads.train.numNodes", 2),
     "workloads.train.gpuResource", "shared",
     r"^workloads\.train\.gpuResource: 'shared' with 2 ranks: NCCL refuses two ranks on one physical GPU, "
     r"even under MPS"),
    (BASE, "workloads.train.numNodes", 3,
     r"^workloads\.train\.numNodes: 3 pods don't fit on node group 'train' \(maxSize 2\)"),
    (BASE, "workloads.train.elastic", {"minNodes": 2, "maxNodes": 1},
     r"^workloads\.train\.elastic\.maxNodes: 1 is less than minNodes 2"),
    (BASE, "workloads.train.kind", "elasticjob", r"^workloads\.train\.elastic: is required for kind 'elasticjob'"),
    (BASE, "workloads", {"My Job": BASE["workloads"]["train"]},
     r"^workloads\.My Job: 'My Job' \(the key\) must be a lowercase DNS label"),
    (with_(BASE, "workloads.train.entrypoint", "bench"), "workloads.train.autoscaling.mode", "scaledjob",
     r"^workloads\.train\.entrypoint: 'bench' runs as one PyTorchJob on a fixed set of nodes"),
    (BASE, "workloads.train.benchSizes", "1MiB,2M",  # the bench reads '1MB' as 1M (bench.py), not '1MiB'
     r"^workloads\.train\.benchSizes: '1MiB,2M' is not a comma-separated size list"),
    (BASE, "workloads.train.memory", "64GB", r"^workloads\.train\.memory: '64GB' is not a memory quantity like '16Gi'"),
    (BASE, "workloads.train.memory", "0Gi", r"^workloads\.train\.memory: '0Gi' must be more than zero"),
    (BASE, "workloads.train.cpu", "8 cores",
     r"^workloads\.train\.cpu: '8 cores' is not a CPU quantity like '8', '7\.5' or '500m'"),
    (BASE, "workloads.train.shmSize", "16 Gi", r"^workloads\.train\.shmSize: '16 Gi' is not a memory quantity"),
    (BASE, "workloads.train.ephemeralStorage", "1.2.3Gi",
     r"^workloads\.train\.ephemeralStorage: '1\.2\.3Gi' is not a memory quantity"),
    (BASE, "workloads.train.shmSize", "16Gi",
     r"^workloads\.train\.shmSize: '16Gi' is more than workloads\.train\.memory '8Gi'"),
    (BASE, "workloads.train.cpu", "8",
     r"^workloads\.train\.cpu: '8' is more than a node of group 'train' can give a pod \(g6\.xlarge: 3920m "
     r"allocatable\); use at most '3920m'"),
    (with_(BASE, "workloads.train.shmSize", "1Gi"), "workloads.train.memory", "16Gi",
     r"^workloads\.train\.memory: '16Gi' is more than a node of group 'train' can give a pod \(g6\.xlarge: \d+Mi "
     r"allocatable\)"),
    (BASE, "workloads.train.ephemeralStorage", "500Gi",
     r"^workloads\.train\.ephemeralStorage: '500Gi' is more than a node of group 'train' can give a pod \(179Gi "
     r"allocatable of its 200 GiB root volume\)"),
    (BASE, "gpu.metrics.retention", "15 days",
     r"^gpu\.metrics\.retention: '15 days' is not a Prometheus duration; write e\.g\. '15d'"),
    (BASE, "gpu.metrics.retention", "", r"^gpu\.metrics\.retention: '' is not a Prometheus duration"),
    (BASE, "workloads.train.autoscaling.mode", "scaledobject",
     r"^workloads\.train\.autoscaling\.mode: 'scaledobject' scales the Worker replicas of an elastic PyTorchJob"),
    (with_(BASE, "workloads.train.elastic", {"minNodes": 1, "maxNodes": 2}), "workloads.train.autoscaling",
     {"mode": "scaledobject", "minReplicas": 0},
     r"^workloads\.train\.autoscaling\.minReplicas: 0 would scale the PyTorchJob to 0 workers, which the "
     r"training-operator's webhook rejects"),
    (BASE, "workloads.train.autoscaling", {"mode": "none", "minReplicas": 3, "maxReplicas": 2},
     r"^workloads\.train\.autoscaling\.maxReplicas: 2 is less than minReplicas 3"),
    (BASE, "storage.kind", "existing", r"^storage\.existingStorageClass: is required when storage\.kind is 'existing'"),
    (BASE, "storage", {"kind": "fsx-lustre", "sizeGib": 2000},
     r"^storage\.sizeGib: 2000 is not a valid FSx for Lustre size"),
    (BASE, "storage.mountPath", "mnt", r"^storage\.mountPath: 'mnt' must be an absolute path"),
    (BASE, "lifecycle.ephemeral", True, r"^lifecycle\.ttlHours: is required for an ephemeral stack"),
    (BASE, "lifecycle", {"ephemeral": True, "protect": True, "ttlHours": 4, "createdAt": "2026-12-02T13:00:00Z"},
     r"^lifecycle\.protect: an ephemeral stack protects nothing"),
    (BASE, "lifecycle", {"ephemeral": True, "ttlHours": 4, "createdAt": "2026-12-02T13:00:00+02:00"},
     r"^lifecycle\.createdAt: '2026-12-02T13:00:00\+02:00' must be UTC"),
    (BASE, "lifecycle",
     {"ephemeral": True, "ttlHours": 4, "createdAt": "2026-12-02T13:00:00Z", "kmsDeletionWindowDays": 30},
     r"^lifecycle\.kmsDeletionWindowDays: 30 on an ephemeral stack; use 7"),
    (BASE, "lifecycle", {"ephemeral": True, "ttlHours": 10, "createdAt": "2026-12-02T13:00:00Z", "maxGpuNodeHours": 15},
     r"^lifecycle\.maxGpuNodeHours: GPU groups may run 20 node-hours \(sum of maxSize x ttlHours\), "
     r"over the cap of 15"),
    (BASE, "lifecycle.ttlHours", 5,
     r"^lifecycle\.ttlHours: 5\.0 has no effect here: only applies where lifecycle\.ephemeral is true \(here "
     r"lifecycle\.ephemeral is false\)"),
    (BASE, "tags", {"team": 3}, r"^tags: \{'team': 3\} is not a map of string to string"),
    (EXISTING, "gpuNodeGroups.orin.gpusPerNode", None,
     r"^gpuNodeGroups\.orin\.gpusPerNode: is required for an existing cluster"),
    (EXISTING, "gpuNodeGroups.orin.instanceTypes", ["g5g.xlarge"],
     r"^gpuNodeGroups\.orin\.instanceTypes: \['g5g\.xlarge'\] has no effect here: only applies where cluster\.mode is "
     r"'eks' \(here cluster\.mode is 'existing'\)"),
    (EXISTING, "cluster.endpointPublicAccess", True,
     r"^cluster\.endpointPublicAccess: true has no effect here: only applies where cluster\.mode is 'eks'"),
    (EXISTING, "storage.kind", "efs", r"^storage\.kind: 'efs' is created in AWS next to an EKS cluster"),
    (BASE, "image.repositoryName", "Team/Trainer",
     r"^image\.repositoryName: 'Team/Trainer' is not an ECR repository name"),
    (BASE, "image.repositoryName", "team//trainer", r"^image\.repositoryName: 'team//trainer' is not an ECR"),
    (BASE, "image.repositoryName", "x", r"^image\.repositoryName: 'x' is not an ECR repository name: 2-256"),
    (BASE, "image.repositoryName", "a" * 257, r"^image\.repositoryName: 'a{257}' is not an ECR"),
    (EXISTING, "workloads.train.autoscaling.mode", "scaledjob",
     r"^workloads\.train\.autoscaling\.mode: 'scaledjob' reads an SQS queue with Pod Identity, which needs EKS"),
]


@pytest.mark.parametrize(("base", "path", "value", "expected"), RULES, ids=[f"{r[1]}={r[2]!r}"[:60] for r in RULES])
def test_rule(base: dict[str, Any], path: str, value: Any, expected: str) -> None:
    raw = with_(base, path, value)
    if value is None:  # "remove the key"
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node[part]
        del node[last]
    problems = problems_of(raw)
    assert any(re.search(expected, p) for p in problems), problems


def test_the_valid_bases_are_valid() -> None:
    parse(BASE)
    parse(EXISTING)


@pytest.mark.parametrize("name", ["ml-platform/trainer", "gtp-dev-trainer", "team.a/x_y", "ab"])
def test_valid_ecr_repository_names_pass(name: str) -> None:
    parse(with_(BASE, "image.repositoryName", name))


def test_existing_cluster_needs_a_kubeconfig_or_a_context() -> None:
    raw = copy.deepcopy(EXISTING)
    del raw["kubeconfig"]
    assert any(p.startswith("kubeconfig: mode 'existing' needs the cluster's kubeconfig") for p in problems_of(raw))
    raw["cluster"]["context"] = "edge-site"
    assert parse(raw).cluster.context == "edge-site"


def test_secrets_must_be_pulumi_secrets() -> None:
    problems = problems_of(EXISTING, secrets=())
    assert ("kubeconfig: must be a Pulumi secret, not plain config: "
            "run `pulumi config set --secret kubeconfig ...`") in problems


def test_secret_values_never_show_in_repr() -> None:
    config = parse(EXISTING)
    assert "apiVersion" not in repr(config) and config.kubeconfig.get_secret_value() == "apiVersion: v1"


def test_invalid_json_structured_value() -> None:
    assert problems_of({**BASE, "network": "{not json"})[0].startswith("network: is not valid JSON")


def test_ephemeral_stack_tags_and_kms_window() -> None:
    raw = with_(BASE, "lifecycle", {"ephemeral": True, "ttlHours": 6, "createdAt": "2026-12-02T13:00:00Z"})
    config = parse(raw)
    assert config.lifecycle.kms_deletion_window == 7
    tags = config.resource_tags()
    assert tags["gtp:ttl-hours"] == "6" and tags["gtp:expires-at"] == "2026-12-02T19:00:00Z"
    assert tags["gtp:lifecycle"] == "ephemeral"


def test_pulumi_yaml_schema_declares_the_scalar_keys_with_the_same_defaults() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    schema = project["config"]
    assert {key: str(value["default"]) for key, value in schema.items()} == SCALAR_DEFAULTS
    assert all(value.get("description") for value in schema.values())
    assert project["stackConfigDir"] == "stacks" and project["runtime"]["options"]["virtualenv"] == ".venv"


def test_every_config_field_has_a_docstring() -> None:
    from stack_config import schema as config_module

    models = {*SECTIONS.values(), config_module.GpuNodeGroupConfig, config_module.TaintConfig,
              config_module.SharingConfig, config_module.SystemNodeGroupConfig, config_module.MetricsConfig,
              config_module.ElasticConfig}
    missing = [f"{model.__name__}.{name}" for model in models for name, field in model.model_fields.items()
               if not field.description]
    assert missing == []


DUPLICATED = """\
config:
  gtp:region: us-west-2
  gtp:gpuNodeGroups:
    train:
      instanceTypes: [g6.xlarge]
      maxSize: 2
    train:
      instanceTypes: [g6e.xlarge]
      maxSize: 1
  gtp:workloads:
    train:
      kind: pytorchjob
      nodeGroup: train
  gtp:region: us-east-1
"""


def test_duplicate_keys_in_the_stack_file_name_both_lines_and_the_key_path() -> None:
    from stack_config.source import stack_source

    source = stack_source(DUPLICATED)
    assert [str(p) for p in source.problems] == [
        "gpuNodeGroups.train: duplicate key 'train' (lines 4 and 7): YAML keeps only the last one, so the first "
        "would be silently lost; merge them into one",
        "region: duplicate key 'gtp:region' (lines 2 and 14): YAML keeps only the last one, so the first would be "
        "silently lost; merge them into one"]
    assert source.lines["gpuNodeGroups.train.maxSize"] == 6 and source.lines["workloads.train.nodeGroup"] == 13
    # The values alone (what the engine hands the program) are valid: only the file shows the duplicate.
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(BASE, project="gtp", stack="t", source=source)
    assert any(str(p).startswith("gpuNodeGroups.train: duplicate key 'train' (lines 4 and 7)")
               for p in caught.value.problems)


def test_a_stack_file_without_duplicates_has_no_source_problems() -> None:
    from stack_config.source import read_stack_source

    for stack in ("dev", "edge", "prod", "edge-swarm"):
        assert read_stack_source(ROOT / "stacks" / f"Pulumi.{stack}.yaml").problems == ()


def test_an_invalid_field_does_not_hide_the_other_checks_of_its_section() -> None:
    raw = copy.deepcopy(BASE)
    # workload: a type error, a range error, and two independent cross-field problems in the same section
    raw["workloads"]["train"].update({"maxSteps": "many", "numNodes": 0, "benchSizes": "1M 16M", "memory": "64GB"})
    problems = problems_of(raw)
    for expected in ("workloads.train.maxSteps: 'many' is not allowed",
                     "workloads.train.numNodes: 0 is out of range: allowed >= 1",
                     "workloads.train.benchSizes: '1M 16M' is not a comma-separated size list",
                     "workloads.train.memory: '64GB' is not a memory quantity"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)
    assert len(problems) == 4, problems
    # a node group: a type error next to a min/max mistake and a bad instance type
    raw = copy.deepcopy(BASE)
    raw["gpuNodeGroups"]["train"].update({"diskSizeGib": "big", "minSize": 3, "instanceTypes": ["g6.xlarg"]})
    problems = problems_of(raw)
    for expected in ("gpuNodeGroups.train.diskSizeGib: 'big' is not allowed",
                     "gpuNodeGroups.train.maxSize: 2 is less than minSize 3",
                     "gpuNodeGroups.train.instanceTypes[0]: 'g6.xlarg' is not a supported GPU instance type"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)


def test_a_default_standing_in_for_an_invalid_field_causes_no_problem() -> None:
    raw = copy.deepcopy(BASE)
    raw["gpuNodeGroups"]["train"].update({"minSize": "two", "maxSize": 2, "desiredSize": 1})
    raw["workloads"]["train"]["numNodes"] = "four"  # the default 1 fits; no "pods don't fit" from it
    assert sorted(problems_of(raw)) == [
        "gpuNodeGroups.train.minSize: 'two' is not allowed: input should be a valid integer, unable to parse string "
        "as an integer",
        "workloads.train.numNodes: 'four' is not allowed: input should be a valid integer, unable to parse string "
        "as an integer"]


def test_problems_come_in_file_order() -> None:
    from stack_config.source import stack_source

    text = """\
config:
  gtp:workloads:
    train:
      kind: pytorchjob
      nodeGroup: train
      memory: 64GB
  gtp:gpuNodeGroups:
    train:
      instanceTypes: [g6.xlarge]
      minSize: 3
      maxSize: 2
  gtp:region: us-west-2
  gtp:gpu:
    sharing: {mode: mpss}
"""
    raw = {"cluster": {"mode": "eks", "deployer": DEPLOYER, "deployerRoleArn": BASE["cluster"]["deployerRoleArn"]},
           "workloads": {"train": {"kind": "pytorchjob", "nodeGroup": "train", "memory": "64GB"}},
           "gpuNodeGroups": {"train": {"instanceTypes": ["g6.xlarge"], "minSize": 3, "maxSize": 2}},
           "gpu": {"sharing": {"mode": "mpss"}}}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(raw, project="gtp", stack="t", source=stack_source(text))
    assert [p.path for p in caught.value.problems] == ["workloads.train.memory", "gpuNodeGroups.train.maxSize",
                                                       "gpu.sharing.mode"]


@pytest.mark.parametrize("deployer", [
    # a self-hosted runner behind a NAT address inside the public endpoint's CIDRs
    {"access": "public-endpoint", "runnerLabels": ["self-hosted", "gtp-dev"], "cidrs": ["198.18.0.7/32"]},
    # a larger GitHub runner with static addresses (its own label, not a standard image)
    {"access": "public-endpoint", "runnerLabels": ["gtp-static-ip-runner"], "cidrs": ["198.18.0.0/28"]},
    # self-hosted runners may also carry the OS labels GitHub gives them
    {"access": "public-endpoint", "runnerLabels": ["self-hosted", "linux", "ubuntu-24.04"],
     "cidrs": ["198.18.0.7/32"]},
])
def test_a_deployer_that_reaches_a_public_endpoint_passes(deployer: dict[str, Any]) -> None:
    raw = with_(with_(with_(BASE, "cluster.endpointPublicAccess", True), "cluster.publicAccessCidrs",
                      ["198.18.0.0/24"]),
                "cluster.deployer", deployer)
    assert parse(raw).cluster.deployer.access == "public-endpoint"


def test_an_in_vpc_deployer_of_an_adopted_vpc_passes() -> None:
    raw = with_(with_(with_(BASE, "network.existingVpcId", "vpc-0a1b2c3d"), "network.existingPrivateSubnetIds",
                      ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]),
                "cluster.deployer",
                {"access": "in-vpc", "runnerLabels": ["self-hosted", "gtp"], "cidrs": ["10.9.0.0/24"]})
    assert parse(raw).cluster.deployer.access == "in-vpc"


def test_a_transit_gateway_deployer_passes_and_an_existing_cluster_needs_none() -> None:
    assert parse(BASE).cluster.deployer.transit_gateway_id == "tgw-0a1b2c3d4e5f67890"
    assert parse(EXISTING).cluster.deployer is None
    labelled = parse(with_(EXISTING, "cluster.deployer", {"runnerLabels": ["self-hosted", "edge-site"]}))
    assert labelled.cluster.deployer.runner_labels == ("self-hosted", "edge-site")
