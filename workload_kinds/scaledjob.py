"""`scaledjob` (selected by `autoscaling.mode: scaledjob`): scale to zero. No standing job: KEDA starts one
single-pod training Job per message of an SQS queue, none while the queue is empty.

The training pod is the PyTorchJob Master's pod shape, run as `python -m trainer.queue -- torchrun --standalone
...`: it takes one message, trains with the message's overrides, and deletes the message only when training
exits 0 (see components/keda_scaling.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from components.keda_scaling import KedaScaling, KedaScalingArgs
from stack_config import Problem, StackConfig, WorkloadConfig
from workload_kinds.base import Deployment, KubernetesWorkloadKind, TemplateUpdate, WorkloadContext
from workload_kinds.pytorchjob import POD_LABEL as PYTORCH_JOB_LABEL


class ScaledJobKind(KubernetesWorkloadKind):
    name: ClassVar[str] = "scaledjob"
    resource_kind: ClassVar[str] = "ScaledJob"
    # KEDA's ScaledJob creates plain batch Jobs (it copies the ScaledJob's labels onto them): Kueue admits those.
    kueue_integration: ClassVar[str | None] = "batch/job"
    template_update: ClassVar[TemplateUpdate | None] = TemplateUpdate(
        restarts=False,
        effect="running Jobs finish on the template they started with and the next message's Job gets the new one "
               "(rollout.strategy gradual: KEDA v2.20.2 controllers/keda/scaledjob_controller.go:257-269; its default, "
               "immediate, deletes the previous version's running Jobs)")
    operators: ClassVar[frozenset[str]] = frozenset({"keda"})
    # The Jobs KEDA starts carry no operator label; the NetworkPolicy's same-job rule keys on the PyTorchJob
    # label, which these single-pod jobs never need (one pod talks to nobody but AWS).
    pod_label: ClassVar[str] = PYTORCH_JOB_LABEL
    keda_reads_aws: ClassVar[bool] = True
    # The pod runs `python -m trainer.queue`, our trainer's queue consumer, around the training command.
    own_image: ClassVar[bool] = False

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if config.cluster.mode != "eks":
            yield Problem(f"{path}.autoscaling.mode", "'scaledjob' reads an SQS queue with Pod Identity, which "
                                                      "needs EKS")

    def deploy(self, context: WorkloadContext) -> Deployment:
        workload, autoscaling = context.workload, context.workload.autoscaling
        scaling = KedaScaling(context.resource_name("scaling"), KedaScalingArgs(
            mode="scaledjob", job_name=workload.name, namespace=context.shape.namespace,
            max_replicas=autoscaling.max_replicas, polling_interval_seconds=autoscaling.polling_interval_seconds,
            shape=context.shape, backoff_limit=workload.backoff_limit,
            ttl_seconds_after_finished=(86400 if workload.ttl_seconds_after_finished is None
                                        else workload.ttl_seconds_after_finished),
            region=context.region, queue_labels=context.queue_labels,
            training_role=context.training_role, keda_operator_role=context.operators.keda_operator_role,
            aws_opts=context.aws_opts, provider=context.provider,
            depends_on=[context.operators.installed["keda"], *context.ready],
        ), opts=context.opts("scaling"))
        namespace = context.shape.namespace
        selector = f"app.kubernetes.io/name={workload.name}"
        return Deployment(
            watch={
                "submit": "aws sqs send-message --queue-url \"$(pulumi stack output workloads --json | jq -r "
                          f"'.\"{workload.name}\".trainingQueueUrl')\" --message-body '{{}}'",
                "jobs": f"kubectl -n {namespace} get scaledjobs,jobs,pods -l {selector}",
                "logs": f"kubectl -n {namespace} logs -f -l {selector} -c pytorch",
            },
            exports={"trainingQueueUrl": scaling.queue.url if scaling.queue else None},
        )

    def pod_templates(self, body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {"job": ((body.get("spec") or {}).get("jobTargetRef") or {}).get("template")}
