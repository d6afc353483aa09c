"""Workloads stage: the training namespace, its storage, the operators and every workload of `workloads`.

The stage builds what all workloads share — the operators their kinds need, the namespace and its guard rails
(quota, one same-job NetworkPolicy per workload), the shared storage and Kueue's queue — then one pod shape per
workload, and hands each to its kind (`workload_kinds/`), which registers its own objects. It never branches on
a kind's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

import cluster_targets
import workload_kinds
from catalog import versions
from cluster_targets import Cluster
from components.image_admission_policy import ImageAdmissionPolicy, ImageAdmissionPolicyArgs
from components.kueue import (
    KUEUE_MANIFEST_DIR,
    LOCAL_QUEUE,
    QUEUE_LABEL,
    Kueue,
    KueueArgs,
    topology_annotations,
)
from components.shared_storage import SharedStorage, SharedStorageArgs
from components.swarm_training import constraints_for
from components.training_image import registry_server
from components.training_namespace import QuotaSize, TrainingNamespace, TrainingNamespaceArgs
from components.training_operators import TrainingOperators, TrainingOperatorsArgs
from components.training_pod import RUN_AS_USER, PodShape, bench_args, trainer_args
from conventions.names import (
    METRICS_NAMESPACE,
    SHARED_GPU_RESOURCE,
    TRAINING_SERVICE_ACCOUNT,
    WHOLE_GPU_RESOURCE,
    training_namespace,
    training_priority_class,
)
from conventions.quantities import quantity_gib
from conventions.trainer_cli import checkpoint_dir
from stack_config import StackConfig, WorkloadConfig
from stack_config.derived import (
    gpu_resource_of,
    gpus_per_pod,
    group_quota,
    installed_parts,
    kueue_enabled,
    max_running_pods,
    provisioning_groups,
    runtime_class_name,
    site_architecture,
    topology_groups,
    topology_mode,
)
from stages.air_gap import SITE_MANIFEST_DIR, site_images
from stages.gpu import Gpu
from workload_kinds import KubernetesWorkloadKind, SwarmContext, SwarmWorkloadKind, WorkloadContext


@dataclass
class Workloads:
    exports: dict[str, Any] = field(default_factory=dict)
    """Stack outputs: `watch` (the training namespace, and per workload how to follow it) and `workloads` (per
    workload what its kind exports, e.g. a ScaledJob's `trainingQueueUrl`)."""


def build_workloads(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str], gpu: Gpu) -> Workloads:
    kinds = workload_kinds.kinds_of(config)
    if not kinds:
        return Workloads()
    only = len(kinds) == 1
    if all(isinstance(kind, SwarmWorkloadKind) for kind in kinds.values()):  # the platform rule: all or none
        watch: dict[str, Any] = {}
        for name, kind in kinds.items():
            assert isinstance(kind, SwarmWorkloadKind)
            deployment = kind.deploy(swarm_context(config, config.workloads[name], cluster, image_ref, only))
            watch[name] = deployment.watch
        return Workloads(exports={"watch": watch})
    k8s_kinds = {name: kind for name, kind in kinds.items() if isinstance(kind, KubernetesWorkloadKind)}
    assert len(k8s_kinds) == len(kinds)  # the platform rule (stages/config.py) matched them
    namespace = training_namespace(config.stack)
    # The operators the kinds need (and KEDA where something scales), as decided once for the whole stack.
    needed = installed_parts(config) & {*versions.OPERATOR_MANIFESTS, "keda"}
    operators = TrainingOperators("operators", TrainingOperatorsArgs(
        provider=cluster.provider, operators=frozenset(needed),
        system_node_selector=cluster.system_node_selector,
        keda_identity_cluster=(cluster.aws.cluster_name if cluster.aws and any(kind.keda_reads_aws
                                                                                for kind in k8s_kinds.values())
                               else None),
        aws_opts=cluster.aws_opts if cluster.aws else None,
        site_images=site_images(config).refs, manifest_dir=f"{SITE_MANIFEST_DIR}/{config.stack}",
        platform_priority=cluster.platform_priority, architecture=site_architecture(config),
    ))
    training_ns = build_namespace(config, cluster, k8s_kinds, operators)
    admission = build_image_admission(config, cluster, training_ns, image_ref)
    storage = build_storage(config, cluster, training_ns, image_ref)
    queue_ready = build_kueue(config, cluster, k8s_kinds, training_ns)
    watch = {"namespace": namespace}
    exports: dict[str, Any] = {}
    for name, kind in k8s_kinds.items():
        workload = config.workloads[name]
        context = WorkloadContext(
            config=config, workload=workload,
            shape=pod_shape(config, workload, cluster, image_ref, storage.volume), operators=operators,
            provider=cluster.provider,
            ready=[*training_ns.ready, *admission, *storage.ready, *gpu.ready, *queue_ready],
            aws_opts=cluster.aws_opts, region=config.region,
            training_role=cluster.aws.training_identity.role if cluster.aws else None, only_workload=only,
            queue_labels={QUEUE_LABEL: LOCAL_QUEUE} if queue_ready else {})
        deployment = kind.deploy(context)
        watch[name] = deployment.watch
        if deployment.exports:
            exports[name] = deployment.exports
    return Workloads(exports={"watch": watch, **({"workloads": exports} if exports else {})})


def quota_size(config: StackConfig, workload: WorkloadConfig, kind: KubernetesWorkloadKind) -> QuotaSize:
    """The most one workload runs at once (the namespace quota adds them up)."""
    return QuotaSize(num_pods=max_running_pods(workload), gpu_resource=gpu_resource(workload),
                     gpus_per_pod=gpus_per_pod(config, workload),
                     efa_per_pod=config.node_facts(workload.node_group).num_efa_interfaces,
                     cpu=workload.cpu, memory=workload.memory, ephemeral_storage=workload.ephemeral_storage,
                     dlrover_master=kind.job_master is not None)


def build_namespace(config: StackConfig, cluster: Cluster, kinds: dict[str, KubernetesWorkloadKind],
                    operators: TrainingOperators) -> TrainingNamespace:
    masters = {kind.job_master for kind in kinds.values() if kind.job_master is not None}
    assert len(masters) <= 1  # one kind (DLRover's) has a job master today
    master = next(iter(masters), None)
    capacity: dict[str, float] | None = None
    max_pods = 0
    if kueue_enabled(config):
        # Kueue admits the jobs against the node groups' capacity; the quota is that capacity (see
        # components.training_namespace.capacity_quota_hard), one pod per GPU (or slice) at most.
        capacity = {}
        for group in config.gpu_node_groups:
            quota = group_quota(config, group)
            for resource, amount in quota.items():
                capacity[resource] = capacity.get(resource, 0.0) + amount
            max_pods += int(quota[gpu_resource_of(config, group)[0]])
    return TrainingNamespace("training", TrainingNamespaceArgs(
        namespace=training_namespace(config.stack), service_account=TRAINING_SERVICE_ACCOUNT,
        priority_class=training_priority_class(config.stack),
        quotas=[quota_size(config, config.workloads[name], kind) for name, kind in kinds.items()],
        jobs=[(kind.pod_label, name) for name, kind in kinds.items()],
        capacity=capacity, max_pods=max_pods, metrics_namespace=METRICS_NAMESPACE,
        # The most permissive level any kind's controller needs (DLRover's master: baseline).
        pod_security="baseline" if any(kind.pod_security == "baseline" for kind in kinds.values()) else "restricted",
        dlrover_master_role=master.cluster_role if master else None,
        provider=cluster.provider,
        # The job master's RoleBinding names a ClusterRole its operator installs.
        depends_on=[operators.installed[master.operator]] if master else [],
    ))


def build_image_admission(config: StackConfig, cluster: Cluster, training_ns: TrainingNamespace,
                          image_ref: pulumi.Input[str]) -> list[pulumi.Resource]:
    """On a production stack (`lifecycle.protect`), the cluster's own refusal of a training pod whose image is
    neither the stack's build nor in `image.signedDigests` (the rule the config and the policy pack check for what
    the stack renders, enforced for whatever else creates pods there, e.g. `tools.submit`); what the workloads
    wait for ([] elsewhere)."""
    if not config.lifecycle.protect:
        return []
    admission = ImageAdmissionPolicy("images", ImageAdmissionPolicyArgs(
        namespace=training_namespace(config.stack), allowed_images=[image_ref, *config.image.signed_digests],
        provider=cluster.provider, protect=config.lifecycle.protect, depends_on=[training_ns.namespace]))
    return [admission.binding]


def build_kueue(config: StackConfig, cluster: Cluster, kinds: dict[str, KubernetesWorkloadKind],
                training_ns: TrainingNamespace) -> list[pulumi.Resource]:
    """Kueue, its flavors and queues (`kueue.enabled`); what the workloads must wait for ([] when off: a job
    submitted before its LocalQueue exists stays pending as inadmissible, but is never lost)."""
    if not kueue_enabled(config):
        return []
    target = cluster_targets.for_config(config)
    queue = Kueue("kueue", KueueArgs(
        stack=config.stack, provider=cluster.provider,
        quotas={group: group_quota(config, group) for group in config.gpu_node_groups},
        wait_for_pods_ready_timeout=config.kueue.wait_for_pods_ready_timeout,
        # The stack's own kinds and those teams may submit (`kueue.submitKinds`, tools/submit.py).
        integrations=workload_kinds.kueue_integrations_for(
            [*kinds.values(), *(workload_kinds.KINDS[kind] for kind in config.kueue.submit_kinds)]),
        namespaces=[training_namespace(config.stack)],
        node_selectors={group: target.node_selector(config, group) for group in config.gpu_node_groups},
        # Kueue needs EKS (stack_config.derived.kueue_blockers): the taints are the node groups' own.
        taints={group: target.node_taints(config, group) for group in config.gpu_node_groups},
        site_images=site_images(config).refs, manifest_dir=f"{KUEUE_MANIFEST_DIR}/{config.stack}",
        depends_on=[training_ns.namespace], platform_priority=cluster.platform_priority,
        topology_groups=topology_groups(config), provisioning_groups=provisioning_groups(config),
        provisioning_crd=cluster.provisioning_crd))
    return [*queue.local_queues]


def build_storage(config: StackConfig, cluster: Cluster, training_ns: TrainingNamespace,
                  image_ref: pulumi.Input[str]) -> SharedStorage:
    """The shared volume; on FSx for Lustre (root-owned root) also the setup Job that makes the workload's
    checkpoint directory the trainer's (`storage.ready` holds it, and every training object depends on that)."""
    storage, aws = config.storage, cluster.aws
    mount = config.storage.mount_path.rstrip("/")
    # The checkpoints directory itself too: a job submitted outside the stack (tools/submit.py) creates its own
    # directory in it as the trainer's user.
    owned = [checkpoint_dir(config.storage.mount_path, name).removeprefix(mount).strip("/")
             for name in config.workloads]
    owned = [owned[0].rsplit("/", 1)[0], *owned] if owned else []
    return SharedStorage("storage", SharedStorageArgs(
        kind=storage.kind, namespace=training_namespace(config.stack), name_prefix=config.cluster_name,
        size_gib=storage.size_gib, existing_storage_class=storage.existing_storage_class,
        empty_dir_size=max((w.ephemeral_storage for w in config.workloads.values()), key=quantity_gib),
        cluster_name=aws.cluster_name if aws else None,
        vpc_id=aws.vpc_id if aws else None,
        private_subnet_ids=aws.private_subnet_ids if aws else None,
        private_subnet_keys=aws.private_subnet_keys if aws else [],
        cluster_security_group_id=aws.cluster_security_group_id if aws else None,
        fsx_deployment_type=storage.fsx_deployment_type,
        fsx_throughput_per_unit=storage.fsx_throughput_per_unit,
        protect=config.lifecycle.protect, aws_opts=cluster.aws_opts if aws else None,
        owned_directories=owned,
        owner_uid=RUN_AS_USER, owner_gid=RUN_AS_USER, setup_image=image_ref,
        setup_node_selector=cluster.system_node_selector,
        provider=cluster.provider, depends_on=[training_ns.namespace],
        addon_depends_on=[aws.system_node_group] if aws else [],
    ))


def gpu_resource(workload: WorkloadConfig) -> str:
    return SHARED_GPU_RESOURCE if workload.gpu_resource == "shared" else WHOLE_GPU_RESOURCE


def pod_shape(config: StackConfig, workload: WorkloadConfig, cluster: Cluster, image_ref: pulumi.Input[str],
              storage_volume: dict[str, Any]) -> PodShape:
    """The one training pod of a workload, whatever its kind: our trainer, or a team's own image and command."""
    group = workload.node_group
    assert group is not None  # the workload rules require it
    target = cluster_targets.for_config(config)
    checkpoints = checkpoint_dir(config.storage.mount_path, workload.name)
    args: list[Any] = []
    if workload.image is not None:
        pass  # a team's own program: `command` (PodShape.program), its directories in env
    elif workload.entrypoint == "train":
        args = trainer_args(model=workload.model, max_steps=workload.max_steps, batch_size=workload.batch_size,
                            checkpoint_dir=checkpoints, checkpoint_every=workload.checkpoint_every,
                            extra=workload.extra_args)
    else:
        # One object per run under the stack's prefix, which the training role may write (Pod Identity).
        bucket = cluster.aws.training_identity.bucket.bucket if cluster.aws else None
        output = (bucket.apply(lambda name: f"s3://{name}/{config.stack}/bench/") if bucket is not None
                  else f"{checkpoints}/bench.json")
        args = bench_args(model=workload.model, steps=workload.max_steps, batch_size=workload.batch_size,
                          sizes=workload.bench_sizes, output=output)
    return PodShape(
        image=workload.image or image_ref, namespace=training_namespace(config.stack),
        service_account=TRAINING_SERVICE_ACCOUNT,
        priority_class=training_priority_class(config.stack), gpu_resource=gpu_resource(workload),
        num_gpus=gpus_per_pod(config, workload), num_efa=config.node_facts(group).num_efa_interfaces, cpu=workload.cpu,
        memory=workload.memory, ephemeral_storage=workload.ephemeral_storage, shm_size=workload.shm_size,
        node_selector=target.node_selector(config, group), tolerations=target.tolerations(config, group),
        termination_grace_period_seconds=workload.termination_grace_period_seconds,
        storage_volume=storage_volume, mount_path=config.storage.mount_path, checkpoint_dir=checkpoints,
        module=f"trainer.{workload.entrypoint}", trainer_args=args, runtime_class_name=runtime_class_name(config),
        device_shm=workload.gpu_resource == "shared" and config.sharing_for(group).mode == "mps",
        program=tuple(workload.command) if workload.image is not None and workload.command else None,
        # Kueue's topology-aware admission (`kueue.topology`, `workloads.<name>.topology`): one network domain.
        annotations=topology_annotations(topology_mode(config, workload), config.kueue.topology_layer),
    )


def swarm_context(config: StackConfig, workload: WorkloadConfig, cluster: Cluster, image_ref: pulumi.Input[str],
                  only: bool) -> SwarmContext:
    """What a Swarm kind needs: the manager's provider, where the GPU servers are, registry and secrets."""
    image = config.image
    group = workload.node_group
    target = cluster_targets.for_config(config)
    facts = config.node_facts(group)
    registry_auth = None
    if image.registry == "existing" and image.existing_registry and config.registry_password is not None:
        registry_auth = {"server_address": registry_server(image.existing_registry),
                         "username": image.existing_registry_username or "",
                         "password": pulumi.Output.secret(config.registry_password.get_secret_value())}
    return SwarmContext(
        config=config, workload=workload, image=image_ref, only_workload=only, provider=cluster.docker_provider,
        constraints=constraints_for(target.node_selector(config, group), facts.architecture),
        gpus_per_node=facts.num_gpus, registry_auth=registry_auth,
        secrets={name: pulumi.Output.secret(value) for name, value in target.task_secrets(config).items()})
