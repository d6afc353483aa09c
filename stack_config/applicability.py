"""Where each config field has an effect: one table for the whole schema, and the rule that reads it.

A stack file copied from another target or environment keeps keys that mean nothing where it now runs: an EKS
group's `instanceTypes` on a Swarm, `ttlHours` on a persistent stack, `nfsServer` with EFS storage. Each of those
would be accepted and silently do nothing. `APPLIES` says, for every field of every section (a test keeps it
complete), where the field applies — the cluster targets, workload kinds, storage kinds... — and
`check_applicability` refuses every field *written in the stack file* where it has no effect, naming the key,
the value, what the stack has instead and where the field would apply.

Conditions are key paths with the values under which the field applies; every condition of a `Where` must hold.
A path is read from the stack (`cluster.mode`), from the map entry the field is in (`@kind`: the workload or node
group), or from the field's own section (`.mode`). `SET`/`UNSET` test whether an optional value is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from pydantic.alias_generators import to_snake

from catalog.fsx_lustre import LUSTRE_DEPLOYMENTS
from stack_config.kinds import KUEUE_ADMITTED, WITH_CLEAN_POD_POLICY
from stack_config.problems import Problem
from stack_config.schema import (
    AirGapConfig,
    AutoscalingConfig,
    ClusterConfig,
    DeployerConfig,
    ElasticConfig,
    GpuConfig,
    GpuNodeGroupConfig,
    ImageConfig,
    KueueConfig,
    LifecycleConfig,
    MetricsConfig,
    NetworkConfig,
    SharingConfig,
    StackConfig,
    StorageConfig,
    SwarmConfig,
    SystemNodeGroupConfig,
    TaintConfig,
    WorkloadConfig,
    _Section,
)
from stack_config.targets import ADOPTED_KUBERNETES, ADOPTED_NODES, AIR_GAP, IN_AWS, ON_KUBERNETES, ON_SWARM
from stack_config.traits import Capable


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


SET = _Marker("SET")
"""The optional value is given (not None, not empty)."""
UNSET = _Marker("UNSET")
"""The optional value is not given."""


@dataclass(frozen=True)
class Where:
    """Who reads a field and the contexts in which it has an effect: every `(path, allowed values)` condition holds
    (no condition: everywhere), or, for alternatives joined with `|`, any one of `any_of` does. `why` says what
    happens elsewhere, when that isn't obvious from the condition."""

    conditions: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    why: str = ""
    any_of: tuple[Where, ...] = ()
    """Alternatives (`a | b`): the field applies where any of them applies; `conditions` is then empty."""
    reader: str = ""
    """The part that reads the field: the component, chart value, program or check it becomes (the config
    reference's "read by" column). Every entry names one (tests/test_config_readers.py): a key nothing reads has
    no place in the schema."""
    rules: str = ""
    """Whose rules check the value beyond the schema's own type and range, when it is handed to another program
    (its grammar, its API's limits); empty: the schema's."""

    def __and__(self, other: Where) -> Where:
        if self.any_of or other.any_of:
            raise ValueError("`&` of alternatives: write each alternative's conditions in full")
        return Where(self.conditions + other.conditions, "; ".join(w for w in (self.why, other.why) if w),
                     reader=self.reader or other.reader, rules=self.rules or other.rules)

    def __or__(self, other: Where) -> Where:
        return Where(any_of=(*(self.any_of or (self,)), *(other.any_of or (other,))),
                     why="; ".join(w for w in (self.why, other.why) if w),
                     reader=self.reader or other.reader, rules=self.rules or other.rules)

    def read_by(self, reader: str, rules: str = "") -> Where:
        """This condition, read by `reader` (checked by `rules`)."""
        return replace(self, reader=reader, rules=rules)

    def all_conditions(self) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """Every condition, of every alternative."""
        return self.conditions + tuple(c for alternative in self.any_of for c in alternative.conditions)


ANYWHERE = Where()


def when(path: str, *values: Any, why: str = "") -> Where:
    return Where(((path, values),), why)


def on(targets: Capable, why: str = "") -> Where:
    """Applies on the cluster targets (`cluster.mode`) with these capabilities (stack_config/targets.py): the
    modes are those the targets register, so a new target's fields apply where its traits say."""
    return when("cluster.mode", targets, why=why)


def values_of(allowed: tuple[Any, ...]) -> tuple[Any, ...]:
    """A condition's allowed values, a set of targets (or kinds) expanded to their names; one that stands for
    nothing registered is an error (the registries were not imported), never an empty condition."""
    values: list[Any] = []
    for value in allowed:
        if isinstance(value, Capable):
            if not value.names:
                raise LookupError("an applicability condition names no registered target or kind: import "
                                  "cluster_targets and workload_kinds (they register their traits) first")
            values.extend(value.names)
        else:
            values.append(value)
    return tuple(values)


EKS = on(IN_AWS)
KUBERNETES = on(ON_KUBERNETES)
ADOPTED = on(ADOPTED_NODES, why="EKS nodes' facts come from the instance types")
WHOLE_SERVERS = ("a Swarm task owns whole servers (no MPS, no time-slicing: the NVIDIA runtime shows every GPU to "
                 "every container)")
NEW_VPC = on(IN_AWS, why="the network section describes the VPC of an EKS cluster") & when(
    "network.existingVpcId", UNSET, why="an adopted VPC keeps its own CIDR, zones and NAT gateways")
PROMETHEUS = when("gpu.metrics.prometheus", True, why="the stack installs no Prometheus")
OUR_TRAINER = when("@image", UNSET, why="it is an argument of our trainer, and `image` runs your own code (pass "
                                        "your program's flags in `command`)")

PROMETHEUS_DURATION_RULES = "Prometheus' duration grammar (prometheus/common model.ParseDuration)"
GO_DURATION_RULES = "Go's duration grammar (time.ParseDuration), as Kueue decodes a metav1.Duration"
QUANTITY_RULES = "the Kubernetes quantity grammar (apimachinery resource.ParseQuantity)"
TRAINER_RULES = "the trainer's own argument parser (images/trainer/trainer/config.py `build_parser`)"
LABEL_RULES = "Kubernetes' label grammar and the kubelet's `--node-labels` rules"
ECR = when("image.registry", "ecr") & when("image.build", True, why="the stack creates an ECR repository only for "
                                                                    "an image it builds")
KMS_KEYS = EKS | ECR
"""Where the stack creates KMS keys: the EKS cluster's secrets key, and the key of the ECR repository it builds into."""

APPLIES: dict[type[_Section], dict[str, Where]] = {
    SystemNodeGroupConfig: {  # the section itself applies to EKS only (ClusterConfig.system_node_group)
        "instance_types": ANYWHERE.read_by("the system managed node group (components/eks_cluster.py)"),
        "min_size": ANYWHERE.read_by("the system node group's scaling config"),
        "desired_size": ANYWHERE.read_by("the system node group's scaling config"),
        "max_size": ANYWHERE.read_by("the system node group's scaling config"),
        "disk_size_gib": ANYWHERE.read_by("the system node group's launch template (root volume)"),
    },
    SwarmConfig: {  # the section itself applies to a Swarm only (ClusterConfig.swarm)
        "manager_host": ANYWHERE.read_by("the Docker provider's SSH endpoint (cluster_targets/swarm.py)",
                                         "an `ssh://user@host[:port]` URL"),
        "ssh_options": ANYWHERE.read_by("the Docker provider's `ssh` options"),
        "gpu_resource_name": ANYWHERE.read_by("each service's generic-resource reservation "
                                              "(components/swarm_training.py)"),
        "converge_timeout_seconds": ANYWHERE.read_by("each service's converge timeout (components/swarm_training.py)"),
        "encrypt_overlay": ANYWHERE.read_by("the job's overlay network (`encrypted` option)"),
        "cpu_stand_in": ANYWHERE.read_by("the Swarm task's launcher, node check and reservations"),
    },
    DeployerConfig: {
        "access": EKS.read_by("the cluster endpoint and the network paths the deployer uses "
                              "(cluster_targets/eks_network.py)"),
        "runner_labels": ANYWHERE.read_by("the CI workflows' `runs-on` (python -m tools.deployer)"),
        "cidrs": EKS.read_by("the endpoint's public CIDRs, or the cluster security group's 443 rule and routes"),
        "transit_gateway_id": (EKS & when("cluster.deployer.access", "transit-gateway")).read_by(
            "the VPC's Transit Gateway attachment and routes (components/network.py)"),
    },
    ClusterConfig: {
        "mode": ANYWHERE.read_by("the cluster target registry (cluster_targets/)"),
        "endpoint_public_access": EKS.read_by("the EKS cluster's vpcConfig (components/eks_cluster.py)"),
        "public_access_cidrs": EKS.read_by("the EKS cluster's vpcConfig.publicAccessCidrs"),
        "admin_role_arns": EKS.read_by("EKS access entries (cluster-admin)", "IAM's role ARN shape"),
        "preview_role_arns": EKS.read_by("EKS access entries (AmazonEKSAdminViewPolicy)", "IAM's role ARN shape"),
        "deployer_role_arn": EKS.read_by("the deployer's EKS access entry; the caller check of `preview`/`up`",
                                         "IAM's role ARN shape"),
        "log_retention_days": EKS.read_by("the control plane's CloudWatch log group",
                                          "CloudWatch Logs' allowed retention values"),
        "addon_versions": EKS.read_by("the EKS managed add-ons' `addonVersion`", "EKS add-on build names"),
        "system_node_group": EKS.read_by("the system managed node group"),
        "context": on(ADOPTED_KUBERNETES).read_by("the Kubernetes provider's kubeconfig context"),
        # the platform taints only the nodes it creates (an existing site's are its own)
        "gpu_node_taint": EKS.read_by("the GPU managed node groups' default taint"),
        "swarm": on(ON_SWARM).read_by("the Docker provider and the Swarm services"),
        "deployer": ANYWHERE.read_by("the endpoint access rules and the CI workflows"),
        "node_default_runtime": on(ADOPTED_KUBERNETES, why="EKS's NVIDIA AMIs default to the NVIDIA runtime; a Swarm "
                                                   "uses Docker's").read_by(
            "the default of gpu.runtimeClassName and the runtime precondition (stack_config/rules.py)"),
    },
    NetworkConfig: {
        "vpc_cidr": NEW_VPC.read_by("the created VPC and its subnet layout (components/network.py)"),
        "num_availability_zones": NEW_VPC.read_by("the created VPC's zones (components/network.py)"),
        "nat_gateways": NEW_VPC.read_by("the created VPC's NAT gateways (components/network.py)"),
        "existing_vpc_id": EKS.read_by("the adopted VPC (components/network.py)", "EC2's resource ID shape"),
        "existing_private_subnet_ids": EKS.read_by("the cluster's and node groups' subnets",
                                                   "EC2's resource ID shape"),
        "existing_public_subnet_ids": EKS.read_by("load balancer subnets", "EC2's resource ID shape"),
    },
    TaintConfig: {"value": ANYWHERE.read_by("the node group's taint (EKS API Taint)", LABEL_RULES),
                  "effect": ANYWHERE.read_by("the node group's taint (EKS API Taint)")},
    SharingConfig: {
        "mode": ANYWHERE.read_by("the NVIDIA device plugin's config (components/nvidia_device_plugin.py)"),
        "replicas": when(".mode", "mps", "time-slicing", why="mode 'none' gives whole GPUs").read_by(
            "the device plugin's `sharing.<mode>.resources[].replicas`"),
    },
    GpuNodeGroupConfig: {
        "instance_types": EKS.read_by("the GPU managed node group (components/gpu_node_group.py)"),
        "capacity_type": EKS.read_by("the GPU managed node group's capacityType"),
        "min_size": ANYWHERE.read_by("the node group's scaling config (EKS); the quota and gang checks elsewhere"),
        "desired_size": EKS.read_by("the GPU managed node group's scaling config"),
        "max_size": ANYWHERE.read_by("the node group's scaling config (EKS); the fit, quota and gang checks"),
        "disk_size_gib": EKS.read_by("the GPU launch template's root volume (components/launch_template.py)"),
        "ami_type": EKS.read_by("the GPU managed node group's amiType"),
        "labels": on(IN_AWS, why="the platform labels only the nodes it creates; select an adopted site's nodes "
                                "with nodeSelector").read_by("the GPU managed node group's labels (the kubelet's "
                                                             "`--node-labels`)", LABEL_RULES),
        "taints": EKS.read_by("the GPU managed node group's taints", LABEL_RULES),
        "efa": EKS.read_by("the GPU launch template's network interfaces"),
        "placement_group": EKS.read_by("the GPU launch template's placement group"),
        "capacity_reservation_id": EKS.read_by("the GPU launch template's capacity reservation target",
                                               "EC2's resource ID shape"),
        "availability_zone": EKS.read_by("the GPU node group's subnets"),
        "update_strategy": EKS.read_by("the GPU managed node group's updateConfig"),
        "mig_strategy": on(ON_KUBERNETES, why="MIG needs the NVIDIA device plugin on Kubernetes").read_by(
            "the NVIDIA device plugin's `migStrategy`"),
        "sharing": on(ON_KUBERNETES, why=WHOLE_SERVERS).read_by("the device plugin's per-group config"),
        "gpus_per_node": ADOPTED.read_by("the node facts: pods' GPU requests, quotas, the readiness gate"),
        "gpu_model": ADOPTED.read_by("the node facts: the base image and the metrics defaults"),
        "architecture": ADOPTED.read_by("the node facts: image platform and node affinity"),
        "node_selector": on(ADOPTED_NODES, why="EKS nodes carry the platform's own labels").read_by(
            "the pods' node affinity (Swarm: placement constraints)", LABEL_RULES),
    },
    MetricsConfig: {
        # On a Swarm the swarm target requires these false (their defaults are Kubernetes'), so they stay allowed.
        "dcgm_exporter": ANYWHERE.read_by("the dcgm-exporter chart (components/gpu_metrics.py)"),
        "prometheus": ANYWHERE.read_by("the Prometheus chart (components/gpu_metrics.py)"),
        # `false` (Grafana off) may be written anywhere: a Swarm stack spells out every metrics switch off.
        "grafana": (PROMETHEUS | when(".grafana", False)).read_by(
            "the Grafana chart, whose only datasource is the stack's Prometheus"),
        "retention": PROMETHEUS.read_by("the Prometheus chart's `server.retention` (--storage.tsdb.retention.time) "
                                        "and its volume's size", PROMETHEUS_DURATION_RULES),
    },
    GpuConfig: {
        "sharing": on(ON_KUBERNETES, why=WHOLE_SERVERS).read_by("the device plugin's default config"),
        "node_feature_discovery": KUBERNETES.read_by("the device plugin chart's `nfd.enabled`"),
        "metrics": ANYWHERE.read_by("the metrics stack (components/gpu_metrics.py)"),
        "readiness_timeout_seconds": KUBERNETES.read_by("the GPU readiness gate (components/gpu_readiness.py); "
                                                        "without Kueue the rendezvous timeout"),
        "runtime_class_name": on(ON_KUBERNETES, why="a RuntimeClass is a Kubernetes object; on a Swarm the "
                                                        "daemon's default runtime must be NVIDIA's").read_by(
            "every GPU pod's and the device plugin's `runtimeClassName`",
            "Kubernetes' DNS-subdomain names; the RuntimeClasses the cluster has"),
        "create_runtime_class": KUBERNETES.read_by("the stack's RuntimeClass (handler `nvidia`)"),
    },
    AirGapConfig: {
        "site_registry": ANYWHERE.read_by("the mirror (make mirror) and every image reference of the stack",
                                          "the distribution reference grammar (domain)"),
        "prefix": ANYWHERE.read_by("the mirror's repository paths", "the distribution reference grammar (path)"),
        "lock_file": ANYWHERE.read_by("stages/air_gap.py: the mirror lock"),
    },
    ImageConfig: {
        "build": ANYWHERE.read_by("the training image build (components/training_image.py)"),
        "platform": ANYWHERE.read_by("the image build's platform"),
        "registry": ANYWHERE.read_by("where the image is pushed (components/training_image.py)"),
        "repository_name": when("image.registry", "ecr").read_by("the ECR repository; CI's image supply",
                                                                 "ECR's repository-name rules"),
        "shared_repository": when("image.registry", "ecr").read_by("the ECR repository's name and deletion"),
        "existing_registry": when("image.registry", "existing").read_by(
            "the image build's push target", "the distribution reference grammar (name)"),
        "existing_registry_username": when("image.registry", "existing").read_by(
            "the image build's registry login; the workloads' image pull secret (stages/workloads.py)"),
        "reference": ANYWHERE.read_by("every workload's image when the stack doesn't build"),
        "signed_digests": ANYWHERE.read_by("the production image rule and the policy pack"),
        "base_image": when("image.build", True, why="the base is only read when the stack builds the image").read_by(
            "the image build's BASE_IMAGE argument"),
        "keep_tagged_images": (ECR & Where(why="an ECR lifecycle policy")).read_by("the ECR lifecycle policy"),
        "expire_untagged_days": (ECR & Where(why="an ECR lifecycle policy")).read_by("the ECR lifecycle policy"),
        "air_gap": on(AIR_GAP, why="an air-gapped site adopts its cluster; an EKS cluster pulls from AWS "
                                               "and public registries").read_by("stages/air_gap.py and make mirror"),
    },
    ElasticConfig: {
        "min_nodes": ANYWHERE.read_by("the launcher's `--nnodes` (elasticPolicy.minReplicas, dlrover-run)"),
        "max_nodes": ANYWHERE.read_by("the launcher's `--nnodes` (elasticPolicy.maxReplicas, dlrover-run)"),
        "max_restarts": ANYWHERE.read_by("the launcher's `--max-restarts` (elasticPolicy.maxRestarts, dlrover-run)"),
    },
    KueueConfig: {
        "enabled": ANYWHERE.read_by("the Kueue install and every workload's queue label (components/kueue.py)"),
        "wait_for_pods_ready_timeout": KUBERNETES.read_by("Kueue's `waitForPodsReady.timeout`; the rendezvous "
                                                          "timeout", GO_DURATION_RULES),
        "submit_kinds": KUBERNETES.read_by("the operators the stack installs and Kueue's integrations "
                                           "(stages/workloads.py), for tools/submit.py"),
        "admission_budget": KUBERNETES.read_by("the `for:` of the KueueGangPendingTooLong alert "
                                               "(components/alert_rules.py)", PROMETHEUS_DURATION_RULES),
        # The cluster-autoscaler and the EC2 topology labels exist only where the stack owns the groups.
        "atomic_provisioning": EKS.read_by("the ClusterQueue's ProvisioningRequest admission check"),
        "topology": EKS.read_by("the Kueue Topology and each PodSet's topology request"),
        "topology_layer": EKS.read_by("the PodSets' topology label"),
    },
    AutoscalingConfig: {
        "mode": ANYWHERE.read_by("the workload kind: a KEDA ScaledObject or ScaledJob (components/keda_scaling.py)"),
        "min_replicas": when(".mode", "scaledobject", "scaledjob").read_by("KEDA's `minReplicaCount`"),
        "max_replicas": when(".mode", "scaledobject", "scaledjob").read_by("KEDA's `maxReplicaCount`"),
        "gpu_utilization_threshold": when(".mode", "scaledobject").read_by("the ScaledObject's Prometheus trigger"),
        "polling_interval_seconds": when(".mode", "scaledobject", "scaledjob").read_by("KEDA's `pollingInterval`"),
        # KEDA's ScaledJob has no cooldown: kedacore/keda v2.20.2 apis/keda/v1alpha1/scaledjob_types.go:56-85
        # (ScaledJobSpec) against scaledobject_types.go:112 (ScaledObjectSpec.CooldownPeriod).
        "cooldown_period_seconds": when(".mode", "scaledobject", why="a ScaledJob has no cooldownPeriod").read_by(
            "the ScaledObject's `cooldownPeriod`"),
    },
    WorkloadConfig: {
        "kind": ANYWHERE.read_by("the workload kind registry (workload_kinds/)"),
        "name": ANYWHERE.read_by("the job's name, its Services' and pods' names"),
        "node_group": ANYWHERE.read_by("the pods' node affinity, tolerations and GPU requests"),
        "num_nodes": when("@elastic", UNSET, why="an elastic job runs elastic.minNodes..maxNodes").read_by(
            "the job's replica counts"),
        "elastic": ANYWHERE.read_by("the job's elastic policy"),
        "gpus_per_node": ANYWHERE.read_by("each pod's GPU request and `--nproc-per-node`"),
        "gpu_resource": ANYWHERE.read_by("each pod's GPU resource name"),
        "entrypoint": OUR_TRAINER.read_by("the container's module: trainer.train or trainer.bench"),
        "bench_sizes": (OUR_TRAINER & when("@entrypoint", "bench")).read_by("trainer.bench `--sizes`",
                                                                           "the trainer's size parser"),
        "model": OUR_TRAINER.read_by("trainer.train `--model`"),
        "max_steps": OUR_TRAINER.read_by("trainer.train `--max-steps`"),
        "batch_size": OUR_TRAINER.read_by("trainer.train `--batch-size`"),
        "checkpoint_every": OUR_TRAINER.read_by("trainer.train `--checkpoint-every`"),
        "extra_args": (OUR_TRAINER & when("@entrypoint", "train", why="the bench takes no extra arguments")).read_by(
            "trainer.train's command line", TRAINER_RULES),
        "cpu": ANYWHERE.read_by("each pod's cpu request and limit (Swarm: the task's)", QUANTITY_RULES),
        "memory": ANYWHERE.read_by("each pod's memory request and limit (Swarm: the task's)", QUANTITY_RULES),
        "shm_size": ANYWHERE.read_by("the `/dev/shm` emptyDir's sizeLimit (Swarm: the tmpfs size)", QUANTITY_RULES),
        "backoff_limit": ANYWHERE.read_by("the job's backoffLimit (Swarm: the restart policy's attempts)"),
        "ttl_seconds_after_finished": when("@autoscaling.mode", "scaledjob", why=(
            "it would let the operator delete the finished job that Pulumi owns, and the next `pulumi up "
            "--refresh` would create it again and train again (finished jobs stay; cleanPodPolicy removes their "
            "pods)")).read_by("the ScaledJob's Jobs' ttlSecondsAfterFinished"),
        "clean_pod_policy": when("@kind", WITH_CLEAN_POD_POLICY, why="the PyTorchJob's runPolicy").read_by(
            "the job's runPolicy.cleanPodPolicy"),
        "termination_grace_period_seconds": ANYWHERE.read_by("the pods' terminationGracePeriodSeconds (Swarm: "
                                                             "stop_grace_period)"),
        "autoscaling": KUBERNETES.read_by("KEDA's ScaledObject or ScaledJob"),
        "topology": (EKS & when("@kind", KUEUE_ADMITTED, why="Kueue admits only these kinds' gangs")).read_by(
            "the PodSet's Kueue topology annotation"),
        "image": ANYWHERE.read_by("the team's container image"),
        "command": when("@image", SET, why="our trainer takes model, maxSteps, batchSize, checkpointEvery and "
                                           "extraArgs").read_by("the launcher's program (torchrun ... <command>)"),
        "ephemeral_storage": ANYWHERE.read_by("each pod's ephemeral-storage request and limit (Swarm: the scratch "
                                              "tmpfs)", QUANTITY_RULES),
        "checkpoints": when("@entrypoint", "train", why="a benchmark keeps no checkpoints").read_by(
            "the storage rule: where the job's checkpoints live"),
    },
    StorageConfig: {
        "kind": ANYWHERE.read_by("the shared volume (components/shared_storage.py; Swarm: the mount)"),
        "existing_storage_class": when("storage.kind", "existing").read_by("the claim's storageClassName"),
        "size_gib": when("storage.kind", "efs", "fsx-lustre", "existing", why="the claim's size (FSx: the file "
                                                                               "system's)").read_by(
            "the claim's size; FSx's StorageCapacity", "FSx's CreateFileSystem sizes"),
        "fsx_deployment_type": when("storage.kind", "fsx-lustre").read_by("FSx for Lustre's DeploymentType"),
        # "This option is only valid for PERSISTENT_1 and PERSISTENT_2 deployment types" (FSx API,
        # LustreFileSystemConfiguration.PerUnitStorageThroughput); components/shared_storage.py drops it otherwise.
        # The deployment types that take one: catalog/fsx_lustre.py.
        "fsx_throughput_per_unit": (when("storage.kind", "fsx-lustre") & when(
            "storage.fsxDeploymentType", *(name for name, row in LUSTRE_DEPLOYMENTS.items() if row.throughputs),
            why="that deployment type's throughput is fixed (SCRATCH_2: 200 MB/s/TiB baseline)")).read_by(
            "FSx for Lustre's PerUnitStorageThroughput"),
        "nfs_server": when("storage.kind", "nfs").read_by("the Swarm tasks' NFS volume (`addr=`)"),
        "nfs_path": when("storage.kind", "nfs").read_by("the Swarm tasks' NFS volume (device)"),
        "nfs_options": when("storage.kind", "nfs").read_by("the Swarm tasks' NFS volume options"),
        "host_path": when("storage.kind", "host-path").read_by("the Swarm tasks' bind mount"),
        "mount_path": when("storage.kind", "efs", "fsx-lustre", "existing", "nfs", "host-path",
                           why="kind 'none' mounts no shared volume").read_by(
            "the shared volume's mountPath in every worker; the checkpoint directory"),
    },
    LifecycleConfig: {
        "ephemeral": ANYWHERE.read_by("deletion settings, tags and the reaper"),
        "protect": ANYWHERE.read_by("Pulumi's `protect` on the cluster, keys, storage and registry; the production "
                                    "image rule"),
        "ttl_hours": when("lifecycle.ephemeral", True).read_by("the reaper (tools/reap.py) and the expiry tags"),
        "created_at": when("lifecycle.ephemeral", True).read_by("the reaper (tools/reap.py) and the expiry tags"),
        "kms_deletion_window_days": KMS_KEYS.read_by("the stack's KMS keys' deletion window"),
        "max_gpu_node_hours": when("lifecycle.ephemeral", True).read_by("the cost cap rule (stack_config/rules.py)"),
    },
}
"""Section model → field → where it applies. Every field of every section has an entry (tests/test_applicability.py)."""

TOP_SECTIONS: dict[str, str] = {"cluster": "cluster", "network": "network", "gpu": "gpu", "image": "image",
                                "kueue": "kueue", "storage": "storage", "lifecycle": "lifecycle"}
"""Top-level key → StackConfig attribute of the sections walked."""
MAP_SECTIONS: dict[str, str] = {"gpuNodeGroups": "gpu_node_groups", "workloads": "workloads"}


def check_applicability(config: StackConfig, failed: Iterable[str] = (), blocked: Iterable[str] = ()
                        ) -> Iterator[Problem]:
    """Every field written in the stack file where it has no effect (see the module's docstring). Sections that
    failed to parse are not walked, and a condition that reads one, or a key in `blocked` (invalid, or reported
    by another rule), is not decided."""
    failed = set(failed)
    blocked = tuple(blocked)
    for key, attr in TOP_SECTIONS.items():
        if key not in failed:
            yield from _walk(config, getattr(config, attr), key, (None, ""), failed, blocked)
    for key, attr in MAP_SECTIONS.items():
        if key in failed:
            continue
        for name, entry in getattr(config, attr).items():
            yield from _walk(config, entry, f"{key}.{name}", (entry, f"{key}.{name}"), failed, blocked)


def _walk(config: StackConfig, model: BaseModel, path: str, entry: tuple[BaseModel | None, str], failed: set[str],
          blocked: tuple[str, ...]) -> Iterator[Problem]:
    """The fields of `model` (at key path `path`, inside the map entry `entry`: its model and key path)."""
    table = APPLIES[type(model)]
    for name, field in type(model).model_fields.items():
        key = f"{path}.{field.alias or name}"
        value = getattr(model, name)
        if name in model.model_fields_set and key not in blocked:
            unmet = _unmet(table[name], config, (model, path), entry, failed, blocked)
            if unmet:
                yield Problem(key, _message(value, table[name], (model, path), entry, unmet))
                continue  # what is inside a field that doesn't apply doesn't apply either
        if isinstance(value, BaseModel):
            yield from _walk(config, value, key, entry, failed, blocked)
        elif isinstance(value, Mapping):
            for item_key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _walk(config, item, f"{key}.{item_key}", entry, failed, blocked)


_UNDECIDED = object()


def _full(path: str, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str]) -> str:
    """A condition's key path from the top of the stack file (`.mode` in gpu.sharing: `gpu.sharing.mode`)."""
    if path.startswith("@"):
        return f"{entry[1]}.{path[1:]}"
    if path.startswith("."):
        return f"{model[1]}{path}"
    return path


def _unmet(where: Where, config: StackConfig, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
           failed: set[str], blocked: tuple[str, ...]) -> list[tuple[str, tuple[Any, ...], Any]]:
    """The conditions that don't hold, with the value found (none when one can't be decided)."""
    if where.any_of:  # one alternative that holds (or can't be decided) is enough
        found = [_unmet(alternative, config, model, entry, failed, blocked) for alternative in where.any_of]
        return [] if any(not unmet for unmet in found) else [item for unmet in found for item in unmet]
    unmet = []
    for path, allowed in where.conditions:
        actual = _resolve(path, config, model, entry, failed, blocked)
        if actual is _UNDECIDED:
            return []
        if not _matches(actual, allowed):
            unmet.append((path, allowed, actual))
    return unmet


def _resolve(path: str, config: StackConfig, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
             failed: set[str], blocked: tuple[str, ...]) -> Any:
    node: Any
    if path.startswith("@"):
        (node, base), parts = entry, path[1:].split(".")
    elif path.startswith("."):
        (node, base), parts = model, path[1:].split(".")
    else:
        (top, *parts), base = path.split("."), ""
        if top in failed:
            return _UNDECIDED
        node = getattr(config, TOP_SECTIONS.get(top, top))
        parts = [top, *parts][1:]
        base = top
    full = ".".join([base, *parts])
    if any(full == b or full.startswith(b + ".") for b in blocked):
        return _UNDECIDED
    for part in parts:
        if node is None:
            return None
        node = getattr(node, to_snake(part))
    return node


def _matches(actual: Any, allowed: tuple[Any, ...]) -> bool:
    given = actual is not None and actual != () and actual != {} and actual != ""
    for value in allowed:
        if isinstance(value, Capable):
            if actual in value:
                return True
            continue
        if (value is SET and given) or (value is UNSET and not given) or value is actual or (
                not isinstance(value, _Marker) and not isinstance(value, bool) and value == actual):
            return True
    return False


def _describe(conditions: tuple[tuple[str, tuple[Any, ...]], ...]) -> str:
    """`where cluster.mode is 'eks' and storage.kind is 'nfs'`, `with image set`, `without elastic`."""
    parts: list[str] = []
    for path, allowed in conditions:
        shown = path.lstrip("@.")
        if allowed == (SET,):
            parts.append(f"with {shown} set")
        elif allowed == (UNSET,):
            parts.append(f"without {shown}")
        else:
            values = " or ".join(str(v).lower() if isinstance(v, bool) else repr(v) for v in values_of(allowed))
            where = "" if parts and parts[-1].startswith("where ") else "where "
            parts.append(f"{where}{shown} is {values}")
    return " and ".join(parts)


def describe(where: Where) -> str:
    """Where a field applies, in words (the config reference's "applies" column)."""
    if where.any_of:
        return " or ".join(describe(alternative) for alternative in where.any_of)
    return _describe(where.conditions) if where.conditions else "everywhere"


def _shown(actual: Any) -> str:
    """A value as the stack file writes it (YAML's true, a list, an ISO-8601 time)."""
    if isinstance(actual, bool):
        return str(actual).lower()
    if actual is None or actual == () or actual == {}:
        return "unset"
    if isinstance(actual, datetime):
        return repr(actual.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if isinstance(actual, tuple):
        return repr(list(actual))
    return repr(actual) if not isinstance(actual, BaseModel) else "set"


def _message(value: Any, where: Where, model: tuple[BaseModel, str], entry: tuple[BaseModel | None, str],
             unmet: list[tuple[str, tuple[Any, ...], Any]]) -> str:
    shown = "this section" if isinstance(value, BaseModel) else _shown(value)
    applies = " or ".join(_describe(tuple((_full(path, model, entry), allowed) for path, allowed in alternative))
                          for alternative in ([a.conditions for a in where.any_of] or [where.conditions]))
    here = ", ".join(f"{_full(path, model, entry)} is {_shown(actual)}" for path, _, actual in unmet)
    why = f"; {where.why}" if where.why else ""
    return f"{shown} has no effect here: only applies {applies} (here {here}){why}; remove it"
