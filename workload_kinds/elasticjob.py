"""`elasticjob`: a DLRover ElasticJob (`elastic.iml.github.io/v1alpha1`, DLRover v0.6.1).

`maxNodes` workers start with `dlrover-run --nnodes=MIN:MAX` (torchrun's parser plus DLRover flags); the job keeps
training with at least MIN of them. DLRover's controller creates a job-master pod per job, which is the rendezvous
and relaunches failed workers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from components.training_job import TrainingJob, TrainingJobArgs
from components.training_pod import ElasticRange, PodShape, launched, pod_template
from conventions.kubernetes import PodSecurityLevel, app_labels
from conventions.quantities import quantity_gib, whole_cores
from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.kinds import GeneratedName
from workload_kinds.base import Deployment, JobMaster, KubernetesWorkloadKind, WorkloadContext

API_VERSION = "elastic.iml.github.io/v1alpha1"
POD_LABEL = "elasticjob.dlrover/name"
"""Label DLRover puts on every pod (master and workers) of an ElasticJob."""


def dlrover_run_args(min_nodes: int, max_nodes: int, num_procs: int, max_restarts: int,
                     trainer: Sequence[str], module: str = "trainer.train",
                     program: Sequence[str] | None = None) -> list[str]:
    """`dlrover-run` arguments (0.6.1: torchrun's parser plus DLRover flags; the rendezvous is DLRover's master,
    found through DLROVER_MASTER_ADDR that the ElasticJob controller sets)."""
    return [f"--nnodes={min_nodes}:{max_nodes}", f"--nproc-per-node={num_procs}", f"--max-restarts={max_restarts}",
            *launched(trainer, module, program)]


def elastic_job_body(name: str, shape: PodShape, *, elastic: ElasticRange) -> dict[str, Any]:
    """A DLRover ElasticJob: `maxNodes` workers started with `dlrover-run --nnodes=MIN:MAX`; the job keeps
    training with at least MIN of them. DLRover's master (created by the controller) relaunches failed ones."""
    args = dlrover_run_args(elastic.min_nodes, elastic.max_nodes, shape.num_gpus, elastic.max_restarts,
                            shape.trainer_args, module=shape.module, program=shape.program)
    labels = app_labels(name)
    # DLRover's master relaunches pods itself and forces restartPolicy Never on the pods it creates; "Never"
    # here says so.
    template = pod_template(shape, command=["dlrover-run"], args=args, restart_policy="Never", labels=labels)
    gpus = shape.num_gpus * elastic.max_nodes
    return {
        "apiVersion": API_VERSION, "kind": "ElasticJob",
        "metadata": {"name": name, "namespace": shape.namespace, "labels": labels},
        "spec": {
            "distributionStrategy": "AllreduceStrategy",
            "optimizeMode": "single-job",
            # DLRover's master caps a job at 4 GPUs / 100 CPUs unless told otherwise (DefaultResourceLimits).
            "resourceLimits": {"gpu": str(gpus), "cpu": str(whole_cores(shape.cpu) * elastic.max_nodes),
                               "memory": f"{math.ceil(quantity_gib(shape.memory) * elastic.max_nodes)}Gi"},
            "replicaSpecs": {"worker": {"replicas": elastic.max_nodes, "restartPolicy": "Never",
                                        "template": template}},
        },
    }


class ElasticJobKind(KubernetesWorkloadKind):
    name: ClassVar[str] = "elasticjob"
    resource_kind: ClassVar[str] = "ElasticJob"
    # No Kueue integration: Kueue v0.19.2 lists no `elastic.iml.github.io` framework (pkg/controller/jobs).
    kueue_integration: ClassVar[str | None] = None
    operators: ClassVar[frozenset[str]] = frozenset({"dlrover"})
    pod_label: ClassVar[str] = POD_LABEL
    # DLRover's controller builds its job-master pod without a securityContext (v0.6.1 master.go): `restricted`
    # would reject it.
    pod_security: ClassVar[PodSecurityLevel] = "baseline"
    # DLRover 0.6.1 runs its job master as the namespace's default ServiceAccount with the kustomization's
    # `default-role` ClusterRole.
    job_master: ClassVar[JobMaster | None] = JobMaster(cluster_role="default-role", operator="dlrover")
    generated_names: ClassVar[tuple[GeneratedName, ...]] = (
        # DLRover v0.6.1: the job master's Service (a DNS-1035 label of at most 63 characters)
        GeneratedName("elasticjob-{job}-dlrover-master", "DLRover's job-master Service",
                      "DLRover v0.6.1 go/elasticjob/pkg/controllers/master.go:94"),
        # each worker's pod and Service `<job>-edljob-worker-<id>` (dlrover/python/scheduler/kubernetes.py:43,65-66,
        # master/scaler/pod_scaler.py:394,431); a relaunched worker gets the next id, so this is the least it reaches
        GeneratedName("{job}-edljob-worker-{index}", "the last worker's pod and Service",
                      "DLRover v0.6.1 dlrover/python/scheduler/kubernetes.py:65-66"),
    )

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if workload.elastic is None:
            yield Problem(f"{path}.elastic", "is required for kind 'elasticjob' (minNodes/maxNodes)")

    def deploy(self, context: WorkloadContext) -> Deployment:
        workload = context.workload
        assert workload.elastic is not None  # check() rejects an elasticjob without it
        elastic = ElasticRange(workload.elastic.min_nodes, workload.elastic.max_nodes, workload.elastic.max_restarts)
        TrainingJob(context.resource_name("job"), TrainingJobArgs(
            body=elastic_job_body(workload.name, context.shape, elastic=elastic), provider=context.provider,
            depends_on=[context.operators.installed["dlrover"], *context.ready]), opts=context.opts("job"))
        namespace = context.shape.namespace
        return Deployment(watch={
            "jobs": f"kubectl -n {namespace} get elasticjobs {workload.name}",
            "pods": f"kubectl -n {namespace} get pods -l {POD_LABEL}={workload.name} -o wide",
            "logs": f"kubectl -n {namespace} logs -f {workload.name}-edljob-worker-0 -c pytorch",
            "master": f"kubectl -n {namespace} logs -f elasticjob-{workload.name}-dlrover-master",
        })

    def pod_templates(self, body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        replicas = (body.get("spec") or {}).get("replicaSpecs") or {}
        return {role: replica.get("template") for role, replica in replicas.items()}
