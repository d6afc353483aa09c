"""GPU training platform: wiring only.

Load the stack's typed config once, build the components in dependency order, export what users need.
Everything a stack does differently is data in `stacks/Pulumi.<stack>.yaml`.
"""

from pathlib import Path

import pulumi

from components.aws_provider import AwsProvider, AwsProviderArgs
from components.cluster_access import ClusterAccess, ClusterAccessArgs
from components.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.efa_device_plugin import EfaDevicePlugin, efa_node_groups, efa_plugin_args
from components.eks_cluster import EksCluster, EksClusterArgs
from components.gpu_metrics import GpuMetrics, gpu_metrics_args
from components.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from components.gpu_readiness import (
    GpuReadiness,
    GpuReadinessArgs,
    readiness_expectations,
)
from components.keda_scaling import KedaScaling, KedaScalingArgs
from components.network import Network, NetworkArgs
from components.nvidia_device_plugin import NvidiaDevicePlugin, device_plugin_args
from components.shared_storage import SharedStorage, SharedStorageArgs
from components.training_identity import TrainingIdentity, TrainingIdentityArgs
from components.training_image import TrainingImage, TrainingImageArgs
from components.training_job import (
    ElasticRange,
    PodShape,
    RunPolicy,
    TrainingJob,
    TrainingJobArgs,
    bench_args,
    checkpoint_dir,
    job_pod_label,
    trainer_args,
)
from components.training_namespace import QuotaSize, TrainingNamespace, TrainingNamespaceArgs
from components.training_operators import TrainingOperators, TrainingOperatorsArgs
from gtp import config as stack_config
from gtp.config import ami_type, gpus_per_pod, placement_group_enabled
from gtp.endpoints import METRICS_NAMESPACE, PROMETHEUS_URL
from gtp.node_groups import node_labels, node_selector, node_taints, tolerations
from gtp.sharing import SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE
from gtp.workload_names import TRAINING_SERVICE_ACCOUNT, training_namespace

config = stack_config.load()
lifecycle = config.lifecycle
namespace = training_namespace(config)

# --- cluster ------------------------------------------------------------------------------------------------
training_identity = None
aws_opts = pulumi.ResourceOptions()
if config.uses_aws:
    aws_provider = AwsProvider("cloud", AwsProviderArgs(region=config.region, tags=config.resource_tags())).provider
    aws_opts = pulumi.ResourceOptions(providers={"aws": aws_provider})
if config.cluster.mode == "eks":
    network = Network("network", NetworkArgs(
        cluster_name=config.cluster_name,
        vpc_cidr=config.network.vpc_cidr,
        num_availability_zones=config.network.num_availability_zones,
        single_nat_gateway=config.network.nat_gateways == "single",
        existing_vpc_id=config.network.existing_vpc_id,
        existing_private_subnet_ids=list(config.network.existing_private_subnet_ids),
        existing_public_subnet_ids=list(config.network.existing_public_subnet_ids),
    ), opts=aws_opts)
    system = config.cluster.system_node_group
    eks = EksCluster("eks", EksClusterArgs(
        cluster_name=config.cluster_name,
        kubernetes_version=config.kubernetes_version,
        region=config.region,
        private_subnet_ids=network.private_subnet_ids,
        endpoint_public_access=config.cluster.endpoint_public_access,
        public_access_cidrs=list(config.cluster.public_access_cidrs),
        deployer_role_arn=config.cluster.deployer_role_arn,
        admin_role_arns=list(config.cluster.admin_role_arns),
        log_retention_days=config.cluster.log_retention_days,
        kms_deletion_window_days=lifecycle.kms_deletion_window,
        system_instance_types=list(system.instance_types),
        system_min_size=system.min_size,
        system_desired_size=system.desired,
        system_max_size=system.max_size,
        system_disk_size_gib=system.disk_size_gib,
        protect=lifecycle.protect,
        resource_tags=config.resource_tags(),
    ), opts=aws_opts)
    gpu_node_groups = {}
    for group_name, group in config.gpu_node_groups.items():
        facts = config.node_facts(group_name)
        gpu_node_groups[group_name] = GpuNodeGroup(group_name, GpuNodeGroupArgs(
            cluster_name=eks.cluster.name,
            cluster_name_plain=config.cluster_name,
            node_role_arn=eks.node_role.arn,
            subnet_ids=network.private_subnet_ids,
            security_group_id=eks.security_group_id,
            instance_types=list(group.instance_types),
            capacity_type=group.capacity_type,
            ami_type=ami_type(group),
            min_size=group.min_size,
            desired_size=group.min_size if group.desired_size is None else group.desired_size,
            max_size=group.max_size,
            disk_size_gib=group.disk_size_gib,
            num_gpus=facts.num_gpus,
            labels=node_labels(config, group_name),
            taints=node_taints(config, group_name),
            num_efa_interfaces=facts.num_efa_interfaces,
            placement_group=placement_group_enabled(group),
            capacity_reservation_id=group.capacity_reservation_id,
            resource_tags=config.resource_tags(),
            depends_on=[eks.system_node_group],
        ), opts=aws_opts)
    cluster_access = ClusterAccess("cluster", ClusterAccessArgs(
        kubeconfig=eks.kubeconfig,
        depends_on=[eks.cluster, eks.system_node_group, eks.deployer_access, *eks.addons_after_nodes,
                    *[group.node_group for group in gpu_node_groups.values()]],
    ))
    ClusterAutoscaler("autoscaler", ClusterAutoscalerArgs(
        cluster_name=eks.cluster.name, cluster_name_plain=config.cluster_name, region=config.region,
        provider=cluster_access.provider,
    ), opts=aws_opts)
    training_identity = TrainingIdentity("training", TrainingIdentityArgs(
        cluster_name=eks.cluster.name, stack=config.stack, namespace=namespace,
        service_account=TRAINING_SERVICE_ACCOUNT, force_destroy=lifecycle.ephemeral, protect=lifecycle.protect,
    ), opts=aws_opts)
    pulumi.export("clusterName", eks.cluster.name)
    pulumi.export("endpoint", eks.cluster.endpoint)
    pulumi.export("oidcIssuer", eks.cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer))
    pulumi.export("kubeconfig", eks.kubeconfig)
    pulumi.export("artifactsBucket", training_identity.bucket.bucket)
else:
    cluster_access = ClusterAccess("cluster", ClusterAccessArgs(
        kubeconfig=pulumi.Output.secret(config.kubeconfig.get_secret_value()) if config.kubeconfig else None,
        context=config.cluster.context,
    ))
    pulumi.export("clusterName", config.cluster_name)

pulumi.export("gpuNodeGroups", {
    name: {"gpusPerNode": config.node_facts(name).num_gpus, "gpuModel": config.node_facts(name).gpu_model,
           "maxNodes": group.max_size, "maxGpus": config.node_facts(name).num_gpus * group.max_size}
    for name, group in config.gpu_node_groups.items()
})

# --- training image (issue 5): `image_ref` is the pushed image *by digest* -----------------------------------
image = TrainingImage("trainer", TrainingImageArgs(
    context_dir=Path("images/trainer"),  # relative: Pulumi runs the program from the project directory
    platform=config.image.platform,
    build=config.image.build,
    reference=config.image.reference,
    registry=config.image.registry,
    repository_name=config.repository_name,
    existing_registry=config.image.existing_registry,
    existing_registry_username=config.image.existing_registry_username,
    existing_registry_password=(pulumi.Output.secret(config.registry_password.get_secret_value())
                                if config.registry_password else None),
    keep_tagged_images=config.image.keep_tagged_images,
    expire_untagged_days=config.image.expire_untagged_days,
    force_delete=lifecycle.ephemeral,
    protect=lifecycle.protect,
    kms_deletion_window_days=lifecycle.kms_deletion_window,
), opts=aws_opts)
image_ref: pulumi.Output[str] = image.image_ref
pulumi.export("imageRef", image_ref)

# --- GPU enablement (issue 4): `gpu_ready` lists what every workload must wait for ---------------------------

device_plugin = NvidiaDevicePlugin("nvidia", device_plugin_args(config, cluster_access.provider))
device_plugin_namespace = device_plugin.namespace.metadata["name"]
gpu_plugins: list[pulumi.Resource] = [device_plugin.release] if device_plugin.release else []
if efa_node_groups(config):
    gpu_plugins.append(EfaDevicePlugin("efa", efa_plugin_args(config, cluster_access.provider,
                                                              device_plugin_namespace)).release)
gpu_metrics = GpuMetrics("gpu-metrics", gpu_metrics_args(config, cluster_access.provider, device_plugin_namespace))
gpu_ready: list[pulumi.Resource] = list(gpu_metrics.releases)  # KEDA's triggers query Prometheus
if config.gpu_node_groups:
    gpu_ready.append(GpuReadiness("gpu-readiness", GpuReadinessArgs(
        provider=cluster_access.provider, image=image_ref, expectations=readiness_expectations(config),
        depends_on=gpu_plugins,
    )).job)

# --- training workloads (issue 7) -----------------------------------------------------------------------------

workload, autoscaling = config.workload, config.autoscaling
if workload.kind != "none":
    eks_stack = config.cluster.mode == "eks"
    job_kind = workload.kind
    operators = TrainingOperators("operators", TrainingOperatorsArgs(
        provider=cluster_access.provider,
        training_operator=job_kind == "pytorchjob" and autoscaling.mode != "scaledjob",
        dlrover=job_kind == "elasticjob",
        keda=autoscaling.mode != "none",
        system_node_selector={"gtp.dev/role": "system"} if eks_stack else None,
        keda_identity_cluster=eks.cluster.name if eks_stack and autoscaling.mode == "scaledjob" else None,
        aws_opts=aws_opts if eks_stack else None,
    ))
    group = workload.node_group
    facts = config.node_facts(group)
    num_gpus = gpus_per_pod(config)
    elastic = workload.elastic
    max_pods = max(elastic.max_nodes if elastic else workload.num_nodes,
                   autoscaling.max_replicas if autoscaling.mode != "none" else 0)
    training_ns = TrainingNamespace("training", TrainingNamespaceArgs(
        namespace=namespace, service_account=TRAINING_SERVICE_ACCOUNT, priority_class=f"gtp-training-{config.stack}",
        quota=QuotaSize(num_pods=max_pods, gpu_resource=SHARED_GPU_RESOURCE if workload.gpu_resource == "shared"
                        else WHOLE_GPU_RESOURCE, gpus_per_pod=num_gpus, efa_per_pod=facts.num_efa_interfaces,
                        cpu=workload.cpu, memory=workload.memory, ephemeral_storage=workload.ephemeral_storage,
                        dlrover_master=job_kind == "elasticjob"),
        job_label=job_pod_label(job_kind), job_name=workload.name, metrics_namespace=METRICS_NAMESPACE,
        # DLRover's controller builds its job-master pod without a securityContext: `restricted` would reject it.
        pod_security="baseline" if job_kind == "elasticjob" else "restricted",
        dlrover_master_role="default-role" if job_kind == "elasticjob" else None,
        provider=cluster_access.provider,
        depends_on=[operators.dlrover] if operators.dlrover else [],
    ))
    storage = SharedStorage("storage", SharedStorageArgs(
        kind=config.storage.kind, namespace=namespace, name_prefix=config.cluster_name,
        size_gib=config.storage.size_gib, existing_storage_class=config.storage.existing_storage_class,
        empty_dir_size=workload.ephemeral_storage,
        cluster_name=eks.cluster.name if eks_stack else None,
        vpc_id=network.vpc_id if eks_stack else None,
        private_subnet_ids=network.private_subnet_ids if eks_stack else None,
        num_private_subnets=(len(config.network.existing_private_subnet_ids) or config.network.num_availability_zones)
        if eks_stack else 0,
        cluster_security_group_id=eks.security_group_id if eks_stack else None,
        fsx_deployment_type=config.storage.fsx_deployment_type,
        fsx_throughput_per_unit=config.storage.fsx_throughput_per_unit,
        protect=lifecycle.protect, aws_opts=aws_opts if eks_stack else None,
        provider=cluster_access.provider, depends_on=[training_ns.namespace],
        addon_depends_on=[eks.system_node_group] if eks_stack else [],
    ))
    checkpoints = checkpoint_dir(config.storage.mount_path, workload.name)
    shape = PodShape(
        image=image_ref, namespace=namespace, service_account=TRAINING_SERVICE_ACCOUNT,
        priority_class=f"gtp-training-{config.stack}",
        gpu_resource=SHARED_GPU_RESOURCE if workload.gpu_resource == "shared" else WHOLE_GPU_RESOURCE,
        num_gpus=num_gpus, num_efa=facts.num_efa_interfaces, cpu=workload.cpu, memory=workload.memory,
        ephemeral_storage=workload.ephemeral_storage, shm_size=workload.shm_size,
        node_selector=node_selector(config, group), tolerations=tolerations(config, group),
        termination_grace_period_seconds=workload.termination_grace_period_seconds,
        storage_volume=storage.volume, mount_path=config.storage.mount_path, checkpoint_dir=checkpoints,
        module=f"trainer.{workload.entrypoint}",
        trainer_args=trainer_args(model=workload.model, max_steps=workload.max_steps, batch_size=workload.batch_size,
                                  checkpoint_dir=checkpoints, checkpoint_every=workload.checkpoint_every,
                                  extra=workload.extra_args) if workload.entrypoint == "train" else bench_args(
            model=workload.model, steps=workload.max_steps, batch_size=workload.batch_size,
            sizes=workload.bench_sizes,
            # One object per run under the stack's prefix, which the training role may write (Pod Identity).
            output=training_identity.bucket.bucket.apply(lambda bucket: f"s3://{bucket}/{config.stack}/bench/")
            if training_identity else f"{checkpoints}/bench.json"),
    )
    run_policy = RunPolicy(workload.backoff_limit, workload.ttl_seconds_after_finished, workload.clean_pod_policy)
    workload_ready = [*training_ns.ready, *storage.ready, *gpu_ready]
    elastic_range = ElasticRange(elastic.min_nodes, elastic.max_nodes, elastic.max_restarts) if elastic else None
    watch = {"namespace": namespace}
    if autoscaling.mode == "scaledjob":
        # Scale to zero: no standing PyTorchJob; KEDA starts one Job per queued training request.
        scaling = KedaScaling("scaling", KedaScalingArgs(
            mode="scaledjob", job_name=workload.name, namespace=namespace, max_replicas=autoscaling.max_replicas,
            polling_interval_seconds=autoscaling.polling_interval_seconds, shape=shape,
            backoff_limit=workload.backoff_limit, ttl_seconds_after_finished=workload.ttl_seconds_after_finished,
            region=config.region, training_role=training_identity.role,
            keda_operator_role=operators.keda_operator_role, aws_opts=aws_opts, provider=cluster_access.provider,
            depends_on=[operators.keda, *workload_ready],
        ))
        pulumi.export("trainingQueueUrl", scaling.queue.url)
        watch.update({
            "submit": "aws sqs send-message --queue-url \"$(pulumi stack output trainingQueueUrl)\" "
                      "--message-body '{}'",
            "jobs": f"kubectl -n {namespace} get scaledjobs,jobs,pods -l app.kubernetes.io/name={workload.name}",
            "logs": f"kubectl -n {namespace} logs -f -l app.kubernetes.io/name={workload.name} -c pytorch",
        })
    else:
        job = TrainingJob("job", TrainingJobArgs(
            kind=job_kind, job_name=workload.name, shape=shape, num_nodes=workload.num_nodes, elastic=elastic_range,
            run_policy=run_policy, provider=cluster_access.provider,
            depends_on=[operators.dlrover if job_kind == "elasticjob" else operators.training_operator,
                        *workload_ready],
        ))
        if autoscaling.mode == "scaledobject":
            KedaScaling("scaling", KedaScalingArgs(
                mode="scaledobject", job_name=workload.name, namespace=namespace,
                min_replicas=autoscaling.min_replicas, max_replicas=autoscaling.max_replicas,
                gpu_utilization_threshold=autoscaling.gpu_utilization_threshold,
                polling_interval_seconds=autoscaling.polling_interval_seconds,
                cooldown_period_seconds=autoscaling.cooldown_period_seconds, prometheus_url=PROMETHEUS_URL,
                provider=cluster_access.provider, depends_on=[operators.keda, job.job],
            ))
        if job_kind == "elasticjob":
            selector = f"elasticjob.dlrover/name={workload.name}"
            watch.update({
                "jobs": f"kubectl -n {namespace} get elasticjobs {workload.name}",
                "pods": f"kubectl -n {namespace} get pods -l {selector} -o wide",
                "logs": f"kubectl -n {namespace} logs -f {workload.name}-edljob-worker-0 -c pytorch",
                "master": f"kubectl -n {namespace} logs -f elasticjob-{workload.name}-dlrover-master",
            })
        else:
            rank0 = f"{workload.name}-worker-0" if elastic else f"{workload.name}-master-0"
            watch.update({
                "jobs": f"kubectl -n {namespace} get pytorchjobs {workload.name}",
                "pods": f"kubectl -n {namespace} get pods -l training.kubeflow.org/job-name={workload.name} -o wide",
                "logs": f"kubectl -n {namespace} logs -f {rank0} -c pytorch",
            })
    pulumi.export("watch", watch)
