"""Workloads stage: the training namespace, its storage, the operators and the workload of the stack's kind.

The stage builds what every kind shares — the operators the kind needs, the namespace and its guard rails, the
shared storage and the one training pod shape — and hands them to the kind (`workload_kinds/`), which registers
its own objects. It never branches on the kind's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

import cluster_targets
import workload_kinds
from cluster_targets import Cluster
from cluster_targets.eks import TAINT_EFFECTS, node_taints
from cluster_targets.swarm import swarm_secrets
from components.kueue import KUEUE_MANIFEST_DIR, LOCAL_QUEUE, QUEUE_LABEL, Kueue, KueueArgs, integrations_for
from components.shared_storage import SharedStorage, SharedStorageArgs
from components.swarm_training import constraints_for
from components.training_image import registry_server
from components.training_namespace import QuotaSize, TrainingNamespace, TrainingNamespaceArgs
from components.training_operators import TrainingOperators, TrainingOperatorsArgs
from components.training_pod import RUN_AS_USER, PodShape, bench_args, checkpoint_dir, trainer_args
from conventions.names import (
    METRICS_NAMESPACE,
    SHARED_GPU_RESOURCE,
    TRAINING_SERVICE_ACCOUNT,
    WHOLE_GPU_RESOURCE,
    training_namespace,
    training_priority_class,
)
from stack_config import StackConfig
from stack_config.derived import gpus_per_pod, group_quota, kueue_enabled
from stages.gpu import Gpu
from stages.offline import OFFLINE_MANIFEST_DIR, site_images
from workload_kinds import KubernetesWorkloadKind, SwarmContext, SwarmWorkloadKind, WorkloadContext


@dataclass
class Workloads:
    exports: dict[str, Any] = field(default_factory=dict)
    """Stack outputs: `watch` (how to follow the workload) and whatever the kind exports."""


def build_workloads(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str], gpu: Gpu) -> Workloads:
    kind = workload_kinds.for_config(config)
    if kind is None:
        return Workloads()
    if isinstance(kind, SwarmWorkloadKind):
        deployment = kind.deploy(swarm_context(config, cluster, image_ref))
        return Workloads(exports={"watch": deployment.watch, **deployment.exports})
    assert isinstance(kind, KubernetesWorkloadKind)  # the platform rule (stages/config.py) matched it
    namespace = training_namespace(config.stack)
    operators = TrainingOperators("operators", TrainingOperatorsArgs(
        provider=cluster.provider, **{flag.replace("-", "_"): True for flag in kind.needs_operators(config)},
        system_node_selector=cluster.system_node_selector,
        keda_identity_cluster=cluster.aws.cluster_name if cluster.aws and kind.keda_reads_aws else None,
        aws_opts=cluster.aws_opts if cluster.aws else None,
        site_images=site_images(config).refs, manifest_dir=f"{OFFLINE_MANIFEST_DIR}/{config.stack}",
        platform_priority=cluster.platform_priority,
    ))
    training_ns = build_namespace(config, cluster, kind, operators)
    storage = build_storage(config, cluster, training_ns, image_ref)
    queue_ready = build_kueue(config, cluster, kind, training_ns)
    context = WorkloadContext(
        config=config, shape=pod_shape(config, cluster, image_ref, storage.volume), operators=operators,
        provider=cluster.provider, ready=[*training_ns.ready, *storage.ready, *gpu.ready],
        aws_opts=cluster.aws_opts, region=config.region,
        training_role=cluster.aws.training_identity.role if cluster.aws else None,
        queue_labels={QUEUE_LABEL: LOCAL_QUEUE} if queue_ready else {})
    context.ready.extend(queue_ready)
    deployment = kind.deploy(context)
    return Workloads(exports={"watch": {"namespace": namespace, **deployment.watch}, **deployment.exports})


def build_namespace(config: StackConfig, cluster: Cluster, kind: KubernetesWorkloadKind,
                    operators: TrainingOperators) -> TrainingNamespace:
    workload = config.workload
    facts = config.node_facts(workload.node_group)
    master = kind.job_master
    return TrainingNamespace("training", TrainingNamespaceArgs(
        namespace=training_namespace(config.stack), service_account=TRAINING_SERVICE_ACCOUNT,
        priority_class=training_priority_class(config.stack),
        quota=QuotaSize(num_pods=kind.pods_per_job(config), gpu_resource=gpu_resource(config),
                        gpus_per_pod=gpus_per_pod(config), efa_per_pod=facts.num_efa_interfaces,
                        cpu=workload.cpu, memory=workload.memory, ephemeral_storage=workload.ephemeral_storage,
                        dlrover_master=master is not None),
        job_label=kind.pod_label, job_name=workload.name, metrics_namespace=METRICS_NAMESPACE,
        pod_security=kind.pod_security,
        dlrover_master_role=master.cluster_role if master else None,
        provider=cluster.provider,
        # The job master's RoleBinding names a ClusterRole its operator installs.
        depends_on=[operators.installed[master.operator]] if master else [],
    ))


def build_kueue(config: StackConfig, cluster: Cluster, kind: KubernetesWorkloadKind,
                training_ns: TrainingNamespace) -> list[pulumi.Resource]:
    """Kueue, its flavors and queues (`workload.kueue.enabled`); what the workload must wait for ([] when off:
    a job submitted before its LocalQueue exists stays pending as inadmissible, but is never lost)."""
    if not kueue_enabled(config):
        return []
    target = cluster_targets.for_config(config)
    queue = Kueue("kueue", KueueArgs(
        stack=config.stack, provider=cluster.provider,
        quotas={group: group_quota(config, group) for group in config.gpu_node_groups},
        wait_for_pods_ready_timeout=config.workload.kueue.wait_for_pods_ready_timeout, integrations=integrations_for([kind.resource_kind]),
        namespaces=[training_namespace(config.stack)],
        node_selectors={group: target.node_selector(config, group) for group in config.gpu_node_groups},
        # Kueue needs EKS (stack_config.derived.kueue_blockers): the taints are the node groups' own.
        taints={group: [{"key": key, "value": value, "effect": TAINT_EFFECTS[effect]}
                        for key, (value, effect) in node_taints(config, group).items()]
                for group in config.gpu_node_groups},
        site_images=site_images(config).refs, manifest_dir=f"{KUEUE_MANIFEST_DIR}/{config.stack}",
        depends_on=[training_ns.namespace], platform_priority=cluster.platform_priority))
    return [*queue.local_queues]


def build_storage(config: StackConfig, cluster: Cluster, training_ns: TrainingNamespace,
                  image_ref: pulumi.Input[str]) -> SharedStorage:
    """The shared volume; on FSx for Lustre (root-owned root) also the setup Job that makes the workload's
    checkpoint directory the trainer's (`storage.ready` holds it, and every training object depends on that)."""
    storage, aws = config.storage, cluster.aws
    checkpoints = checkpoint_dir(config.storage.mount_path, config.workload.name)
    return SharedStorage("storage", SharedStorageArgs(
        kind=storage.kind, namespace=training_namespace(config.stack), name_prefix=config.cluster_name,
        size_gib=storage.size_gib, existing_storage_class=storage.existing_storage_class,
        empty_dir_size=config.workload.ephemeral_storage,
        cluster_name=aws.cluster_name if aws else None,
        vpc_id=aws.vpc_id if aws else None,
        private_subnet_ids=aws.private_subnet_ids if aws else None,
        num_private_subnets=aws.num_private_subnets if aws else 0,
        cluster_security_group_id=aws.cluster_security_group_id if aws else None,
        fsx_deployment_type=storage.fsx_deployment_type,
        fsx_throughput_per_unit=storage.fsx_throughput_per_unit,
        protect=config.lifecycle.protect, aws_opts=cluster.aws_opts if aws else None,
        owned_directories=[checkpoints.removeprefix(config.storage.mount_path.rstrip("/")).strip("/")],
        owner_uid=RUN_AS_USER, owner_gid=RUN_AS_USER, setup_image=image_ref,
        setup_node_selector=cluster.system_node_selector,
        provider=cluster.provider, depends_on=[training_ns.namespace],
        addon_depends_on=[aws.system_node_group] if aws else [],
    ))


def gpu_resource(config: StackConfig) -> str:
    return SHARED_GPU_RESOURCE if config.workload.gpu_resource == "shared" else WHOLE_GPU_RESOURCE


def pod_shape(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str],
              storage_volume: dict[str, Any]) -> PodShape:
    """The one training pod of the stack's workload, whatever its kind."""
    workload, group = config.workload, config.workload.node_group
    target = cluster_targets.for_config(config)
    checkpoints = checkpoint_dir(config.storage.mount_path, workload.name)
    if workload.entrypoint == "train":
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
        image=image_ref, namespace=training_namespace(config.stack), service_account=TRAINING_SERVICE_ACCOUNT,
        priority_class=training_priority_class(config.stack), gpu_resource=gpu_resource(config),
        num_gpus=gpus_per_pod(config), num_efa=config.node_facts(group).num_efa_interfaces, cpu=workload.cpu,
        memory=workload.memory, ephemeral_storage=workload.ephemeral_storage, shm_size=workload.shm_size,
        node_selector=target.node_selector(config, group), tolerations=target.tolerations(config, group),
        termination_grace_period_seconds=workload.termination_grace_period_seconds,
        storage_volume=storage_volume, mount_path=config.storage.mount_path, checkpoint_dir=checkpoints,
        module=f"trainer.{workload.entrypoint}", trainer_args=args,
    )


def swarm_context(config: StackConfig, cluster: Cluster, image_ref: pulumi.Input[str]) -> SwarmContext:
    """What a Swarm kind needs: the manager's provider, where the GPU servers are, registry and secrets."""
    workload, image = config.workload, config.image
    group = workload.node_group
    target = cluster_targets.for_config(config)
    facts = config.node_facts(group)
    registry_auth = None
    if image.registry == "existing" and image.existing_registry and config.registry_password is not None:
        registry_auth = {"server_address": registry_server(image.existing_registry),
                         "username": image.existing_registry_username or "",
                         "password": pulumi.Output.secret(config.registry_password.get_secret_value())}
    return SwarmContext(
        config=config, image=image_ref, provider=cluster.docker_provider,
        constraints=constraints_for(target.node_selector(config, group), facts.architecture),
        gpus_per_node=facts.num_gpus, registry_auth=registry_auth,
        secrets={name: pulumi.Output.secret(value) for name, value in swarm_secrets(config).items()})
