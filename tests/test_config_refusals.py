"""Values only AWS, the API server, a kubelet, an operator or a site would refuse, refused at plan time instead.

Each case names the key path, the value and what is allowed (issue 45, classes 2 and 4). Cases run on every target
where the rule applies: EKS (`BASE`), an adopted cluster (`EXISTING`) and a Swarm (`SWARM`, the committed edge-swarm).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.test_config import BASE, EXISTING, parse, problems_of, with_


def _swarm() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.edge-swarm.yaml").read_text())
    raw = {key.split(":", 1)[1]: value for key, value in document["config"].items()}
    raw["registryPassword"] = "fake"
    return raw


SWARM = _swarm()
EKS_EFS = with_(BASE, "storage", {"kind": "efs"})
EXISTING_EDGE = with_(EXISTING, "storage", {"kind": "existing", "existingStorageClass": "nfs-client"})


def refused(raw: dict[str, Any], pattern: str) -> None:
    found = problems_of(raw)
    assert any(re.search(pattern, problem) for problem in found), found


def accepted(raw: dict[str, Any]) -> None:
    parse(raw)


# --- class 2a: mount paths the training container needs for itself, and system paths -------------------------------

@pytest.mark.parametrize("base", [EKS_EFS, EXISTING_EDGE, SWARM], ids=["eks", "existing", "swarm"])
@pytest.mark.parametrize(("mount_path", "what"), [
    ("/dev/shm", r"/dev/shm"),
    ("/tmp", r"/tmp"),
    ("/tmp/checkpoints", r"/tmp"),
    ("/workspace", r"/workspace"),
    ("/home/trainer/data", r"/home/trainer"),
    ("/", r"/"),
    ("/dev", r"/dev"),
    ("/proc/data", r"/proc"),
    ("/etc", r"/etc"),
    ("/usr/local/data", r"/usr"),
    ("/var/run", r"/var/run"),
])
def test_a_mount_path_over_one_the_container_needs_is_refused(base: dict[str, Any], mount_path: str,
                                                             what: str) -> None:
    refused(with_(base, "storage.mountPath", mount_path),
            rf"^storage\.mountPath: '{re.escape(mount_path)}' .*{re.escape(what)}.*allowed: an absolute path")


def test_the_mps_and_swarm_secret_mounts_are_reserved_where_they_exist() -> None:
    refused(with_(EKS_EFS, "storage.mountPath", "/mps"), r"^storage\.mountPath: '/mps' .*MPS")
    refused(with_(SWARM, "storage.mountPath", "/run/secrets"), r"^storage\.mountPath: '/run/secrets' .*secrets")
    refused(with_(SWARM, "storage.mountPath", "/run/secrets/data"), r"^storage\.mountPath: '/run/secrets/data'")


@pytest.mark.parametrize("mount_path", ["/mnt/../tmp", "/mnt/shared/", "/mnt//shared", "/mnt/./shared"])
def test_a_mount_path_must_be_clean(mount_path: str) -> None:
    refused(with_(EKS_EFS, "storage.mountPath", mount_path),
            rf"^storage\.mountPath: '{re.escape(mount_path)}' is not a clean absolute path")


@pytest.mark.parametrize("base", [EKS_EFS, EXISTING_EDGE, SWARM], ids=["eks", "existing", "swarm"])
@pytest.mark.parametrize("mount_path", ["/mnt/shared", "/data", "/checkpoints", "/mnt/tmp", "/workspaces",
                                        "/devices"])
def test_a_mount_path_of_its_own_passes(base: dict[str, Any], mount_path: str) -> None:
    accepted(with_(base, "storage.mountPath", mount_path))


def test_the_reserved_paths_are_the_ones_the_pod_specs_and_the_image_use() -> None:
    """The rule reads the constants the components mount (not a list of its own), and the image agrees."""
    from components import swarm_training, training_pod
    from conventions import container_paths

    shape = training_pod.PodShape(
        image="i", namespace="n", service_account="s", priority_class="p", gpu_resource="nvidia.com/gpu", num_gpus=1,
        cpu="1", memory="1Gi", ephemeral_storage="1Gi", shm_size="1Gi", node_selector={}, tolerations=[],
        termination_grace_period_seconds=30, storage_volume={"emptyDir": {}}, mount_path="/mnt/shared",
        trainer_args=[])
    mounted = {mount["mountPath"] for mount in training_pod.volume_mounts(shape)} - {"/mnt/shared"}
    assert mounted <= set(container_paths.CONTAINER_OWN_PATHS)
    assert swarm_training.SECRETS_DIR in container_paths.CONTAINER_OWN_PATHS
    dockerfile = (ROOT / "images" / "trainer" / "Dockerfile").read_text()
    assert re.findall(r"^WORKDIR (\S+)", dockerfile, re.M)[-1] == container_paths.WORKDIR
    assert f"HOME={container_paths.HOME}" in dockerfile


@pytest.mark.parametrize(("key", "value", "pattern"), [
    ("hostPath", "data/training", r"^storage\.hostPath: 'data/training' must be an absolute directory"),
    ("hostPath", "/data/../etc", r"^storage\.hostPath: '/data/\.\./etc' is not a clean absolute path"),
    ("hostPath", "/data//training", r"^storage\.hostPath: '/data//training' is not a clean absolute path"),
])
def test_a_host_path_must_be_absolute_and_clean(key: str, value: str, pattern: str) -> None:
    refused(with_(SWARM, "storage", {"kind": "host-path", key: value}), pattern)


@pytest.mark.parametrize(("value", "pattern"), [
    ("export/training", r"^storage\.nfsPath: 'export/training' must be the exported absolute path"),
    ("/export/../etc", r"^storage\.nfsPath: '/export/\.\./etc' is not a clean absolute path"),
])
def test_an_nfs_path_must_be_absolute_and_clean(value: str, pattern: str) -> None:
    refused(with_(SWARM, "storage.nfsPath", value), pattern)


# --- class 2b: tag keys IAM treats as one ---------------------------------------------------------------------------

@pytest.mark.parametrize(("tags", "pattern"), [
    ({"Team": "a", "team": "b"}, r"^tags\.team: 'team' equals tags\.Team except for case.*case-insensitive"),
    ({"COST-center": "a", "cost-Center": "b"}, r"^tags\.cost-Center: 'cost-Center' equals tags\.COST-center"),
    ({"GTP:Stack": "x"}, r"^tags\.GTP:Stack: 'GTP:Stack': the 'gtp:' prefix is the platform's own"),
    ({"Gtp:owner": "x"}, r"^tags\.Gtp:owner: 'Gtp:owner': the 'gtp:' prefix is the platform's own"),
])
def test_tag_keys_that_differ_only_in_case_are_refused(tags: dict[str, str], pattern: str) -> None:
    refused(with_(BASE, "tags", tags), pattern)


def test_tags_of_different_keys_pass() -> None:
    accepted(with_(BASE, "tags", {"team": "a", "cost-center": "b"}))


# --- class 2c: label keys and values by Kubernetes' grammar; the kubelet's own namespaces; the platform's labels ----

@pytest.mark.parametrize(("labels", "pattern"), [
    ({"kubernetes.io/role": "gpu"}, r"^gpuNodeGroups\.train\.labels\.kubernetes\.io/role: .*kubelet refuses.*"
                                    r"kubelet\.kubernetes\.io, node\.kubernetes\.io"),
    ({"k8s.io/pool": "gpu"}, r"^gpuNodeGroups\.train\.labels\.k8s\.io/pool: .*kubelet refuses"),
    ({"team.kubernetes.io/pool": "gpu"}, r"^gpuNodeGroups\.train\.labels\.team\.kubernetes\.io/pool: .*kubelet"),
    ({"node-role.kubernetes.io/gpu": ""}, r"^gpuNodeGroups\.train\.labels\.node-role\.kubernetes\.io/gpu: "),
    ({"example.com/Bad Key": "x"}, r"^gpuNodeGroups\.train\.labels\.example\.com/Bad Key: .*not a label key"),
    ({"a/b/c": "x"}, r"^gpuNodeGroups\.train\.labels\.a/b/c: .*not a label key"),
    ({"Example_com/pool": "x"}, r"^gpuNodeGroups\.train\.labels\.Example_com/pool: .*not a label key"),
    ({"x" * 64: "v"}, r"^gpuNodeGroups\.train\.labels\.x+: .*not a label key.*63"),
    ({"team": "v" * 64}, r"^gpuNodeGroups\.train\.labels\.team: 'v+' is not a label value.*63"),
    ({"team": "ml team"}, r"^gpuNodeGroups\.train\.labels\.team: 'ml team' is not a label value"),
    ({"team": "-ml"}, r"^gpuNodeGroups\.train\.labels\.team: '-ml' is not a label value"),
    ({"gtp.dev/node-group": "other"}, r"^gpuNodeGroups\.train\.labels\.gtp\.dev/node-group: .*platform sets"),
    ({"nvidia.com/device-plugin.config": "mps-4"},
     r"^gpuNodeGroups\.train\.labels\.nvidia\.com/device-plugin\.config: .*platform sets"),
    ({"gtp.dev/role": "system"}, r"^gpuNodeGroups\.train\.labels\.gtp\.dev/role: .*platform sets"),
])
def test_node_labels_the_kubelet_or_the_api_server_would_refuse(labels: dict[str, str], pattern: str) -> None:
    refused(with_(BASE, "gpuNodeGroups.train.labels", labels), pattern)


@pytest.mark.parametrize("labels", [
    {"node.kubernetes.io/pool": "gpu"}, {"team.node.kubernetes.io/x": "y"}, {"kubelet.kubernetes.io/x": "y"},
    {"example.com/pool": "a-b_c.d"}, {"team": ""}, {"x" * 63: "v" * 63}, {"a.b.c/" + "x" * 63: "v"},
])
def test_node_labels_the_kubelet_accepts_pass(labels: dict[str, str]) -> None:
    accepted(with_(BASE, "gpuNodeGroups.train.labels", labels))


@pytest.mark.parametrize(("taints", "pattern"), [
    ({"bad key": {"value": "x"}}, r"^gpuNodeGroups\.train\.taints\.bad key: .*not a label key"),
    ({"example.com/dedicated": {"value": "a b"}},
     r"^gpuNodeGroups\.train\.taints\.example\.com/dedicated\.value: 'a b' is not a label value"),
])
def test_taint_keys_and_values_follow_the_label_grammar(taints: dict[str, Any], pattern: str) -> None:
    refused(with_(BASE, "gpuNodeGroups.train.taints", taints), pattern)


@pytest.mark.parametrize(("selector", "pattern"), [
    ({"Bad Key": "true"}, r"^gpuNodeGroups\.orin\.nodeSelector\.Bad Key: .*not a label key"),
    ({"nvidia.com/gpu.present": "yes please"},
     r"^gpuNodeGroups\.orin\.nodeSelector\.nvidia\.com/gpu\.present: 'yes please' is not a label value"),
])
def test_node_selectors_on_kubernetes_follow_the_label_grammar(selector: dict[str, str], pattern: str) -> None:
    refused(with_(EXISTING, "gpuNodeGroups.orin.nodeSelector", selector), pattern)


def test_a_node_selector_may_select_the_kubelets_own_labels() -> None:
    accepted(with_(EXISTING, "gpuNodeGroups.orin.nodeSelector", {"kubernetes.io/hostname": "orin-1"}))


# --- class 2d: names that overflow a DNS label once an operator appends its suffixes --------------------------------

def _named(base: dict[str, Any], name: str, **fields: Any) -> dict[str, Any]:
    raw = copy.deepcopy(base)
    (only,) = raw["workloads"].values()
    raw["workloads"] = {name: {**only, **fields}}
    return raw


@pytest.mark.parametrize(("base", "fields", "allowed", "generated"), [
    # PyTorchJob Workers: <job>-worker-<index> pods and Services (training-operator v1.9.4)
    (BASE, {"numNodes": 2, "checkpoints": "none"}, 54, "-worker-1"),
    (BASE, {"numNodes": 1}, 54, "-master-0"),
    (with_(BASE, "gpuNodeGroups.train.maxSize", 12),
     {"elastic": {"minNodes": 1, "maxNodes": 12}, "checkpoints": "none"}, 53, "-worker-11"),
    # TrainJob: JobSet's longest pod name <jobset>-node-0-<index>-<5 random>
    (BASE, {"kind": "trainjob", "numNodes": 2, "checkpoints": "none"}, 48, "-node-0-1-"),
    # ElasticJob: DLRover's master Service elasticjob-<job>-dlrover-master
    (EXISTING_EDGE, {"kind": "elasticjob", "elastic": {"minNodes": 1, "maxNodes": 2}}, 37, "-dlrover-master"),
])
def test_a_workload_name_too_long_for_what_its_operator_creates(base: dict[str, Any], fields: dict[str, Any],
                                                               allowed: int, generated: str) -> None:
    name = "a" * (allowed + 1)
    refused(_named(base, name, **fields),
            rf"^workloads\.{name}: .*{re.escape(generated)}.* {allowed + 1 + 63 - allowed} characters.*at most "
            rf"{allowed} characters")
    accepted(_named(base, "a" * allowed, **fields))


def test_a_scaled_object_names_its_hpa_labels_after_the_workload() -> None:
    raw = with_(BASE, "gpuNodeGroups.train.maxSize", 4)
    fields = {"elastic": {"minNodes": 1, "maxNodes": 4}, "checkpoints": "none",
              "autoscaling": {"mode": "scaledobject", "minReplicas": 1, "maxReplicas": 4}}
    refused(_named(raw, "a" * 48, **fields), r"^workloads\.a+: .*-gpu-utilization.*at most 47 characters")
    accepted(_named(raw, "a" * 47, **fields))


def test_a_swarm_workload_name_too_long_for_its_task_hostnames() -> None:
    (name,) = SWARM["workloads"]
    workload = SWARM["workloads"][name]
    longest = 63 - len("-worker-") - len(str(workload["elastic"]["maxNodes"] - 1))
    refused(_named(SWARM, "a" * (longest + 1)), rf"^workloads\.a+: .*-worker-2.*at most {longest} characters")
    accepted(_named(SWARM, "a" * longest))


# --- class 2e: AWS resource IDs in the wrong shape -------------------------------------------------------------------

ADOPTED_VPC = with_(with_(with_(BASE, "network.existingVpcId", "vpc-0a1b2c3d"), "network.existingPrivateSubnetIds",
                          ["subnet-0a1b2c3d", "subnet-0b1c2d3e"]),
                    "cluster.deployer", {"access": "in-vpc", "runnerLabels": ["self-hosted"], "cidrs": ["10.9.0.0/24"]})


@pytest.mark.parametrize(("raw", "pattern"), [
    (with_(ADOPTED_VPC, "network.existingVpcId", "prod-vpc"),
     r"^network\.existingVpcId: 'prod-vpc' is not a VPC id \('vpc-' and 8 or 17 hex digits.*a name"),
    (with_(ADOPTED_VPC, "network.existingVpcId", "vpc-0A1B2C3D"), r"^network\.existingVpcId: 'vpc-0A1B2C3D' is not"),
    (with_(ADOPTED_VPC, "network.existingVpcId", "vpc-0a1b2c3d4"), r"^network\.existingVpcId: 'vpc-0a1b2c3d4' is not"),
    (with_(ADOPTED_VPC, "network.existingPrivateSubnetIds", ["subnet-0a1b2c3d", "private-a"]),
     r"^network\.existingPrivateSubnetIds\[1\]: 'private-a' is not a subnet id \('subnet-'"),
    (with_(ADOPTED_VPC, "network.existingPublicSubnetIds", ["sg-0a1b2c3d"]),
     r"^network\.existingPublicSubnetIds\[0\]: 'sg-0a1b2c3d' is not a subnet id"),
    (with_(BASE, "gpuNodeGroups.train", {"instanceTypes": ["p5.48xlarge"], "capacityReservationId": "cr-1",
                                         "availabilityZone": "us-west-2a"}),
     r"^gpuNodeGroups\.train\.capacityReservationId: 'cr-1' is not a reservation id \('cr-'"),
    (with_(BASE, "cluster.deployer.transitGatewayId", "tgw-main"),
     r"^cluster\.deployer\.transitGatewayId: 'tgw-main' is not a Transit Gateway id \('tgw-'"),
])
def test_aws_ids_in_the_wrong_shape(raw: dict[str, Any], pattern: str) -> None:
    refused(raw, pattern)
    refused(raw, r"resource-ids\.html")


def test_aws_ids_of_8_or_17_hex_digits_pass() -> None:
    accepted(ADOPTED_VPC)
    accepted(with_(ADOPTED_VPC, "network.existingVpcId", "vpc-0123456789abcdef0"))


# --- class 4a: registry names by the distribution reference grammar --------------------------------------------------

AIR_GAPPED = copy.deepcopy(EXISTING)
AIR_GAPPED["registryPassword"] = "fake"
AIR_GAPPED["image"] = {"platform": "linux/arm64", "registry": "existing",
                       "existingRegistry": "registry.site.internal:5000/gtp/trainer",
                       "airGap": {"siteRegistry": "registry.site.internal:5000"}}


@pytest.mark.parametrize(("key", "value", "pattern"), [
    ("prefix", "Mirror", r"^image\.airGap\.prefix: 'Mirror' is not a repository path"),
    ("prefix", "/mirror", r"^image\.airGap\.prefix: '/mirror' is not a repository path"),
    ("prefix", "mirror/", r"^image\.airGap\.prefix: 'mirror/' is not a repository path"),
    ("prefix", "mir..ror", r"^image\.airGap\.prefix: 'mir\.\.ror' is not a repository path"),
    ("siteRegistry", "https://registry.site.internal", r"^image\.airGap\.siteRegistry: 'https://registry\.site"
                                                       r"\.internal' is not a registry host"),
    ("siteRegistry", "registry.site.internal/mirror", r"^image\.airGap\.siteRegistry: .* not a registry host"),
    ("siteRegistry", "registry_site:5000", r"^image\.airGap\.siteRegistry: 'registry_site:5000' is not"),
    ("siteRegistry", "registry.site.internal:port", r"^image\.airGap\.siteRegistry: .* not a registry host"),
    ("siteRegistry", "registry", r"^image\.airGap\.siteRegistry: 'registry' is not a registry host.*Docker Hub"),
])
def test_air_gap_names_by_the_reference_grammar(key: str, value: str, pattern: str) -> None:
    refused(with_(AIR_GAPPED, f"image.airGap.{key}", value), pattern + r".*distribution/reference")


@pytest.mark.parametrize(("key", "value"), [("prefix", "mirror"), ("prefix", "site/mirror-a.b__c"),
                                            ("siteRegistry", "10.0.0.5:5000"), ("siteRegistry", "localhost:5000"),
                                            ("siteRegistry", "[fd00::1]:5000")])
def test_air_gap_names_the_grammar_accepts_pass(key: str, value: str) -> None:
    raw = with_(AIR_GAPPED, f"image.airGap.{key}", value)
    if key == "siteRegistry":
        raw["image"]["existingRegistry"] = f"{value}/gtp/trainer"
    accepted(raw)


@pytest.mark.parametrize(("value", "pattern"), [
    ("registry.site.internal:5000/gtp/trainer:v1", r"tag or digest"),
    ("registry.site.internal:5000/gtp/trainer@sha256:" + "0" * 64, r"tag or digest"),
    ("https://registry.site.internal/gtp/trainer", r"not a repository name"),
    ("registry.site.internal:5000", r"no repository path"),
    ("registry.site.internal/GTP/trainer", r"not a repository name"),
])
def test_an_existing_registry_is_a_repository_name(value: str, pattern: str) -> None:
    raw = with_(with_(SWARM, "image.existingRegistry", value), "image.registry", "existing")
    refused(raw, r"^image\.existingRegistry: .*" + pattern)


# --- class 4b-d: Swarm sites -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "pattern"), [
    ("nfs.site.internal:/export/training", r"the export path is storage\.nfsPath"),
    ("nfs://nfs.site.internal", r"not a host"),
    ("/export/training", r"not a host"),
    ("nfs_server", r"not a host"),
    ("nfs..site", r"not a host"),
])
def test_an_nfs_server_is_a_host(value: str, pattern: str) -> None:
    refused(with_(SWARM, "storage.nfsServer", value), rf"^storage\.nfsServer: '{re.escape(value)}' .*{pattern}")


@pytest.mark.parametrize("value", ["10.0.0.5", "nfs", "nfs.site.internal", "fd00::5"])
def test_nfs_servers_that_are_hosts_pass(value: str) -> None:
    accepted(with_(SWARM, "storage.nfsServer", value))


def test_a_cpu_stand_in_on_a_site_with_gpus_is_refused() -> None:
    refused(with_(SWARM, "cluster.swarm.cpuStandIn", True),
            r"^cluster\.swarm\.cpuStandIn: true, but node group 'gpu' declares gpuModel 'L4'")


def test_the_swarm_test_stack_is_a_stand_in_site_and_stays_valid(tmp_path) -> None:
    from stages.config import parse_stack_config
    from tools import swarm_harness

    edge = yaml.safe_load(swarm_harness.EDGE_SWARM.read_text())
    stack = swarm_harness.cpu_stack(edge, host_path="/var/tmp/gtp-swarm/shared")
    raw = {key.split(":", 1)[1]: value for key, value in stack["config"].items()}
    config = parse_stack_config(raw, stack="swarm-test", secret_keys=["registryPassword"])
    assert config.cluster.swarm.cpu_stand_in is True


@pytest.mark.parametrize("value", ["ssh://deploy@gpu-manager.site.internal:70000", "ssh://deploy@-manager",
                                   "ssh://deploy@gpu..manager", "ssh://deploy@gpu-manager:0",
                                   "ssh://deploy@gpu-manager/path"])
def test_a_manager_host_is_an_ssh_url(value: str) -> None:
    refused(with_(SWARM, "cluster.swarm.managerHost", value),
            rf"^cluster\.swarm\.managerHost: '{re.escape(value)}' is not an SSH endpoint")


@pytest.mark.parametrize("value", ["ssh://deploy@10.0.0.1", "ssh://deploy@gpu-manager:2222", "ssh://deploy@[fd00::1]:22"])
def test_manager_hosts_that_are_ssh_urls_pass(value: str) -> None:
    accepted(with_(SWARM, "cluster.swarm.managerHost", value))
