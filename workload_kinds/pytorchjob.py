"""`pytorchjob`: a Kubeflow PyTorchJob (training-operator v1.9.4), optionally elastic and scaled by KEDA.

One node: a Master only. Several nodes: Workers only with an `elasticPolicy` (min = max = the node count for a
fixed-size job, the configured range with `workload.elastic`): the operator then hands torchrun a c10d rendezvous
on the first worker through PET_* env. Never a Master with Workers: training-operator v1.9.4 then injects an
`init-pytorch` init container into every Worker (pkg/controller.v1/pytorch/initcontainer.go, `setInitContainer`:
"Set the init container only if the master is specified and the current rtype is worker") from a built-in
template with no securityContext and a root image, which the `restricted` training namespace refuses. The
template could be replaced (`--pytorch-init-container-template-file`), but only by patching the operator's
Deployment and still pulling a second image; a Master-less job needs neither. With `autoscaling.mode:
scaledobject`, KEDA scales the Worker replicas through the CRD's `/scale` subresource.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from components.keda_scaling import SCALED_OBJECT_SUFFIX, KedaScaling, KedaScalingArgs
from components.training_job import TrainingJob, TrainingJobArgs
from components.training_pod import ElasticRange, PodShape, RunPolicy, pod_template, torchrun_args
from conventions.kubernetes import app_labels
from conventions.names import PROMETHEUS_URL
from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.derived import startup_bound_seconds
from stack_config.kinds import GeneratedName
from workload_kinds.base import KUEUE_REQUEUE, Deployment, KubernetesWorkloadKind, TemplateUpdate, WorkloadContext

API_VERSION = "kubeflow.org/v1"
POD_LABEL = "training.kubeflow.org/job-name"
"""Label the training-operator puts on every pod of a PyTorchJob."""


TORCH_READ_TIMEOUT_DEFAULT = 60
"""torch 2.13's c10d rendezvous backend: `read_timeout` defaults to 60 s (torch/distributed/elastic/rendezvous/
c10d_rendezvous_backend.py:148), and the TCPStore client retries an unresolvable or refusing host only until then
(torch/csrc/distributed/c10d/socket.cpp `SocketConnectOp::tryConnect`: a getaddrinfo failure is retried until the
connect deadline, then `throwTimeoutError`)."""
TORCH_JOIN_TIMEOUT_DEFAULT = 600
"""torch 2.13 dynamic_rendezvous.py:144 `join` default 600 s."""


def rendezvous_conf(timeout_seconds: int) -> list[dict[str, str]]:
    """`elasticPolicy.rdzvConf` (handed to torchrun as PET_RDZV_CONF, training-operator v1.9.4
    pkg/controller.v1/pytorch/elastic.go:171-184): every worker waits for the rendezvous host as long as the stack
    lets a pod start. The host is `<job>-worker-0` (elastic.go:149-150), a headless Service without
    `publishNotReadyAddresses` (pkg/controller.v1/common/service.go:229-233), so its name resolves only once
    worker-0 is Ready; with torch's 60 s the others fail and restart every ~70 s while a node is still coming."""
    return [{"key": "read_timeout", "value": str(timeout_seconds)},
            {"key": "join_timeout", "value": str(max(timeout_seconds, TORCH_JOIN_TIMEOUT_DEFAULT))}]


def pytorch_job_body(name: str, shape: PodShape, *, num_nodes: int, elastic: ElasticRange | None,
                     run_policy: RunPolicy, scaled: bool = False,
                     rendezvous_timeout_seconds: int = TORCH_READ_TIMEOUT_DEFAULT) -> dict[str, Any]:
    """A PyTorchJob: a Master alone for one node, otherwise Workers only with `elasticPolicy` (the operator then
    hands torchrun a c10d rendezvous on the first worker through PET_* env; pkg/controller.v1/pytorch/elastic.go
    at v1.9.4). A fixed-size multi-node job is elastic with min = max = num_nodes, so no Master exists and the
    operator injects no `init-pytorch` container (see the module docstring).

    An elastic job starts with `maxNodes` workers and keeps training while `minNodes` are up; when KEDA scales
    it (`scaled`), it starts with `minNodes` and KEDA adds workers through the `/scale` subresource.

    With Workers, the rendezvous waits `rendezvous_timeout_seconds` (`rendezvous_conf`: the stack's start-up bound), and
    `run_policy.backoff_limit` counts per worker: training-operator sums the container restarts of every running pod
    against the job's `backoffLimit` (pkg/core/job.go:95-132 `PastBackoffLimit`), so one restart of each worker (a
    rendezvous re-formed after a node loss) would otherwise fail a 4-worker job at the default 3."""
    args = torchrun_args(shape.num_gpus, shape.trainer_args, module=shape.module, program=shape.program)
    labels = app_labels(name)
    template = pod_template(shape, command=["torchrun"], args=args, labels=labels)
    workers = elastic.max_nodes if elastic is not None else num_nodes  # 1: a Master alone
    policy: dict[str, Any] = {"backoffLimit": run_policy.backoff_limit * workers}
    if run_policy.ttl_seconds_after_finished is not None:
        policy["ttlSecondsAfterFinished"] = run_policy.ttl_seconds_after_finished
    policy["cleanPodPolicy"] = run_policy.clean_pod_policy
    spec: dict[str, Any] = {"nprocPerNode": str(shape.num_gpus), "runPolicy": policy}
    if elastic is not None:
        # No `metrics`: KEDA (keda_scaling.py) is the only autoscaler; two HPAs on one target fight.
        spec["elasticPolicy"] = {"minReplicas": elastic.min_nodes, "maxReplicas": elastic.max_nodes,
                                 "rdzvBackend": "c10d", "maxRestarts": elastic.max_restarts,
                                 "rdzvConf": rendezvous_conf(rendezvous_timeout_seconds)}
        start = elastic.min_nodes if scaled else elastic.max_nodes
        spec["pytorchReplicaSpecs"] = {"Worker": {"replicas": start, "restartPolicy": "OnFailure",
                                                  "template": template}}
    elif num_nodes > 1:
        # Fixed size: no maxRestarts (torchrun's default 0); a failed pod is retried by runPolicy.backoffLimit.
        spec["elasticPolicy"] = {"minReplicas": num_nodes, "maxReplicas": num_nodes, "rdzvBackend": "c10d",
                                 "rdzvConf": rendezvous_conf(rendezvous_timeout_seconds)}
        spec["pytorchReplicaSpecs"] = {"Worker": {"replicas": num_nodes, "restartPolicy": "OnFailure",
                                                  "template": template}}
    else:
        spec["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
    return {"apiVersion": API_VERSION, "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": shape.namespace, "labels": labels}, "spec": spec}


def elastic_range(workload: WorkloadConfig) -> ElasticRange | None:
    elastic = workload.elastic
    return ElasticRange(elastic.min_nodes, elastic.max_nodes, elastic.max_restarts) if elastic else None


def run_policy(workload: WorkloadConfig) -> RunPolicy:
    return RunPolicy(workload.backoff_limit, workload.ttl_seconds_after_finished, workload.clean_pod_policy)


# The field the CRD's scale subresource maps `.spec.replicas` to (training-operator v1.9.4
# manifests/base/crds/kubeflow.org_pytorchjobs.yaml: specReplicasPath .spec.pytorchReplicaSpecs.Worker.replicas).
SCALED_REPLICAS = "spec.pytorchReplicaSpecs.Worker.replicas"


ELASTIC_RESTARTS_PER_WORKER = 2
"""The least `backoffLimit` of an elastic PyTorchJob: its job-wide limit (× workers) must stay above one restart of
every worker (verify/simulate/rendezvous.py holds the rendered job to the same)."""


class PyTorchJobKind(KubernetesWorkloadKind):
    name: ClassVar[str] = "pytorchjob"
    resource_kind: ClassVar[str] = "PyTorchJob"
    kueue_integration: ClassVar[str | None] = "kubeflow.org/pytorchjob"
    template_update: ClassVar[TemplateUpdate | None] = KUEUE_REQUEUE
    keda_scales: ClassVar[bool] = True
    readiness_bounds_rendezvous: ClassVar[bool] = True  # elasticPolicy.rdzvConf read_timeout: `rendezvous_conf`
    clean_pod_policy: ClassVar[bool] = True
    operators: ClassVar[frozenset[str]] = frozenset({"training-operator"})
    pod_label: ClassVar[str] = POD_LABEL
    entrypoints: ClassVar[frozenset[str]] = frozenset({"train", "bench"})
    generated_names: ClassVar[tuple[GeneratedName, ...]] = (
        # training-operator v1.9.4 names each replica's pod and its Service `<job>-<replica type>-<index>`
        # (pkg/core/utils.go:30-33 `GenGeneralName`; pod.go:414, service.go:243 in pkg/controller.v1/common): a
        # Service name is a DNS-1035 label of at most 63 characters.
        GeneratedName("{job}-master-0", "the Master's pod and Service",
                      "training-operator v1.9.4 pkg/controller.v1/common/service.go:243", ("none", "scaledobject"),
                      single_pod=True),
        GeneratedName("{job}-worker-{index}", "the last Worker's pod and Service",
                      "training-operator v1.9.4 pkg/controller.v1/common/service.go:243", ("none", "scaledobject"),
                      single_pod=False),
        GeneratedName("{job}" + SCALED_OBJECT_SUFFIX, "the ScaledObject, a label value on its HPA",
                      "KEDA v2.20.2 controllers/keda/hpa.go:141", ("scaledobject",)),
    )

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if workload.entrypoint == "bench" and workload.autoscaling.mode != "none":
            yield Problem(f"{path}.entrypoint", "'bench' runs as one PyTorchJob on a fixed set of nodes: use kind "
                                                "pytorchjob with autoscaling.mode none")
        if workload.elastic is not None and workload.backoff_limit < ELASTIC_RESTARTS_PER_WORKER:
            workers = workload.elastic.max_nodes
            yield Problem(f"{path}.backoffLimit", f"{workload.backoff_limit} on an elastic job of up to {workers} "
                          f"workers makes its runPolicy.backoffLimit {workload.backoff_limit * workers}: training-"
                          "operator v1.9.4 sums the container restarts of all its pods (pkg/core/job.go:95-132), so "
                          "one restart of each worker, the rendezvous re-formed once after a lost node, fails the "
                          f"job; allowed: at least {ELASTIC_RESTARTS_PER_WORKER} (restarts per worker)")

    def deploy(self, context: WorkloadContext) -> Deployment:
        workload, autoscaling = context.workload, context.workload.autoscaling
        body = pytorch_job_body(workload.name, context.shape, num_nodes=workload.num_nodes,
                                elastic=elastic_range(workload), run_policy=run_policy(workload),
                                scaled=autoscaling.mode == "scaledobject",
                                rendezvous_timeout_seconds=startup_bound_seconds(context.config))
        body["metadata"]["labels"] = {**body["metadata"]["labels"], **context.queue_labels}
        job = TrainingJob(context.resource_name("job"), TrainingJobArgs(
            body=body, provider=context.provider,
            depends_on=[context.operators.installed["training-operator"], *context.ready],
            # KEDA owns the Worker count through the /scale subresource; without this the next `up` would set
            # it back to elastic.minNodes under a running job.
            ignore_changes=[SCALED_REPLICAS] if autoscaling.mode == "scaledobject" else []),
            opts=context.opts("job"))
        if autoscaling.mode == "scaledobject":
            KedaScaling(context.resource_name("scaling"), KedaScalingArgs(
                mode="scaledobject", job_name=workload.name, namespace=context.shape.namespace,
                scale_target={"apiVersion": API_VERSION, "kind": self.resource_kind, "name": workload.name},
                min_replicas=autoscaling.min_replicas, max_replicas=autoscaling.max_replicas,
                gpu_utilization_threshold=autoscaling.gpu_utilization_threshold,
                polling_interval_seconds=autoscaling.polling_interval_seconds,
                cooldown_period_seconds=autoscaling.cooldown_period_seconds, prometheus_url=PROMETHEUS_URL,
                provider=context.provider, depends_on=[context.operators.installed["keda"], job.job],
            ), opts=context.opts("scaling"))
        namespace = context.shape.namespace
        multi_node = workload.elastic or workload.num_nodes > 1
        rank0 = f"{workload.name}-worker-0" if multi_node else f"{workload.name}-master-0"
        return Deployment(watch={
            "jobs": f"kubectl -n {namespace} get pytorchjobs {workload.name}",
            "pods": f"kubectl -n {namespace} get pods -l {POD_LABEL}={workload.name} -o wide",
            "logs": f"kubectl -n {namespace} logs -f {rank0} -c pytorch",
        })

    def pod_templates(self, body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        replicas = (body.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        return {role: replica.get("template") for role, replica in replicas.items()}

    def pod_counts(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Each replica type's `replicas`: Kueue's PodSet count for it (training-operator v1.9.4's Kueue integration,
        kueue v0.19.2 pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go:112-119 `PodSets`)."""
        replicas = (body.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        return {role: (replica or {}).get("replicas") for role, replica in replicas.items()}

    def with_pod_count(self, body: Mapping[str, Any], role: str, count: int) -> dict[str, Any]:
        changed = copy.deepcopy(dict(body))
        changed["spec"]["pytorchReplicaSpecs"][role]["replicas"] = count
        return changed
