"""KedaScaling: KEDA scales the training workload.

- `scaledobject`: a ScaledObject on the elastic PyTorchJob's `/scale` subresource (Worker replicas), triggered by
  average GPU utilization (`DCGM_FI_DEV_GPU_UTIL` from dcgm-exporter, in Prometheus). Never below one worker, and
  never scaled in (HPA `scaleDown.selectPolicy: Disabled`), see "The signal" below.
- `scaledjob`: scale to zero. An SQS queue (SSE, with a dead-letter queue) holds training requests; a ScaledJob
  starts one single-pod training Job per message. KEDA's operator reads the queue length with its own EKS Pod
  Identity (a role allowed `sqs:GetQueueAttributes` on that queue only); the training pod receives and deletes
  its message with the training role (allowed exactly that on that queue): `python -m trainer.queue -- torchrun
  ...` deletes it when training exits 0, otherwise it is retried and, after `maxReceiveCount`, dead-lettered.

The signal. Scale on what says "more workers would help". For the ScaledJob that is pending work: the queue's
length, one Job per request, zero when empty. For an elastic data-parallel PyTorchJob nothing in GPU metrics says
it: every worker runs the same synchronous step, so average utilization is about as high with 4 workers as with 2,
and scaling out on high utilization only ratchets the job to `maxReplicas` (what `replicas = max` with
`elasticPolicy` min..max and the cluster autoscaler would do without KEDA). The harmful half is the other
direction: utilization dips during checkpoints, evaluation, input stalls or a hung collective, and a scale-in
there restarts every worker (a new rendezvous) and loses the work since the last checkpoint, at the worst time.
So the ScaledObject only ever scales out (scale-down disabled; the job releases its workers when it finishes).
Removing the ScaledObject for elastic jobs altogether (capacity-driven elasticity) is the cleaner end state; it is
a config-level change (`autoscaling.mode`), not this component's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.training_pod import PodShape, pod_template, torchrun_args
from conventions import iam
from conventions.kubernetes import app_labels

KEDA_API = "keda.sh/v1alpha1"
GPU_UTILIZATION_METRIC = "DCGM_FI_DEV_GPU_UTIL"


def gpu_utilization_query(namespace: str, job_name: str) -> str:
    """Average GPU utilization of the job's worker pods; with GPU sharing the value is per physical GPU.

    dcgm-exporter attributes each GPU's series to the pod using it with its own `namespace` / `pod` labels.
    Prometheus scrapes dcgm-exporter through its annotated Service with the prometheus chart's
    `kubernetes-service-endpoints` job (chart 27.39.0, charts/prometheus/values.yaml lines 997-1050), which sets
    `honor_labels: true` (line 998): on a clash between a scraped label and a target label (the job's relabeling
    writes `namespace` = dcgm-exporter's own namespace), the scraped one is kept and nothing is renamed to
    `exported_*` (that renaming happens only with honor_labels false). So the training pod's labels arrive as
    `namespace` / `pod`; tests/workloads/test_keda_query.py checks this against the chart's scrape config."""
    return (f'avg({GPU_UTILIZATION_METRIC}{{namespace="{namespace}",'
            f'pod=~"{job_name}-worker-[0-9]+"}})')


SCALED_OBJECT_SUFFIX = "-gpu-utilization"
"""The ScaledObject of a workload is `<job>-gpu-utilization`; KEDA v2.20.2 labels its HPA with the ScaledObject's name
(`app.kubernetes.io/part-of`, controllers/keda/hpa.go:141), a label value of at most 63 characters."""


def scaled_object_name(job_name: str) -> str:
    return job_name + SCALED_OBJECT_SUFFIX


def scaled_object_body(*, job_name: str, namespace: str, scale_target: Mapping[str, str], prometheus_url: str,
                       min_replicas: int, max_replicas: int, threshold: int, polling_interval: int,
                       cooldown_period: int) -> dict[str, Any]:
    """ScaledObject on a job's Worker replicas through its CRD's scale subresource (for a PyTorchJob:
    `.spec.pytorchReplicaSpecs.Worker.replicas`). `scale_target`: apiVersion, kind and name of the job."""
    if min_replicas < 1:
        # The training-operator's validating webhook rejects a PyTorchJob with 0 Worker replicas, so scaling to
        # zero would wedge the job (every later scale-up too); scale-to-zero is the ScaledJob's job.
        raise ValueError(f"minReplicaCount {min_replicas} would scale the PyTorchJob to 0 workers, which the "
                         "training-operator's webhook rejects; use >= 1 or autoscaling.mode scaledjob")
    return {
        "apiVersion": KEDA_API, "kind": "ScaledObject",
        "metadata": {"name": scaled_object_name(job_name), "namespace": namespace},
        "spec": {
            "scaleTargetRef": dict(scale_target),
            "minReplicaCount": min_replicas, "maxReplicaCount": max_replicas,
            "pollingInterval": polling_interval, "cooldownPeriod": cooldown_period,
            # Never scale a running job in on a utilization dip: each resize is a restart of every worker (see the
            # module docstring). `Disabled` is autoscaling/v2's HPAScalingRules.selectPolicy that turns the direction
            # off (kubernetes pkg/controller/podautoscaler/horizontal.go `calculateScaleDownLimitWithBehaviors`
            # returns the current replicas); KEDA copies `advanced.horizontalPodAutoscalerConfig.behavior` into the
            # HPA it owns.
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"selectPolicy": "Disabled"}}}},
            "triggers": [{
                "type": "prometheus",
                # `Value`: the query already averages over the workers, so the HPA scales by value/threshold
                # instead of dividing the average again by the replica count.
                "metricType": "Value",
                "metadata": {"serverAddress": prometheus_url, "query": gpu_utilization_query(namespace, job_name),
                             "threshold": str(threshold)},
            }],
        },
    }


def queue_consumer_args(shape: PodShape) -> list[str]:
    """`python` arguments of the ScaledJob's container: `trainer.queue` takes one message, runs torchrun with the
    message's overrides appended, heartbeats the message's visibility and deletes it only when torchrun exits 0.
    Without a consumer the message stays in the queue and KEDA keeps starting Jobs for it. `trainer.queue` is
    PID 1 and forwards SIGTERM to torchrun (exec form all the way down)."""
    # One checkpoint folder per request (SQS message id): a retry resumes its own run, a new request starts fresh.
    root = [f"--checkpoint-root={shape.checkpoint_dir}"] if shape.checkpoint_dir else []
    return ["-m", "trainer.queue", *root, "--", "torchrun",
            *torchrun_args(shape.num_gpus, shape.trainer_args, standalone=True)]


def scaled_job_body(*, job_name: str, shape: PodShape, queue_url: pulumi.Input[str], region: str,
                    max_replicas: int, polling_interval: int, backoff_limit: int,
                    ttl_seconds_after_finished: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """ScaledJob: one single-pod training Job per SQS message (the PyTorchJob Master's pod shape, run with
    `torchrun --standalone`), none while the queue is empty."""
    template = pod_template(shape, command=["python"], args=queue_consumer_args(shape), labels=app_labels(job_name))
    return {
        "apiVersion": KEDA_API, "kind": "ScaledJob",
        # KEDA copies the ScaledJob's labels onto every Job it creates (keda-docs reference/scaledjob-spec:
        # "ScaledJob labels are applied to child Jobs"): that is where Kueue's batch/job integration reads the
        # queue label from.
        "metadata": {"name": job_name, "namespace": shape.namespace, **({"labels": dict(labels)} if labels else {})},
        "spec": {
            "jobTargetRef": {"parallelism": 1, "completions": 1, "backoffLimit": backoff_limit,
                             "ttlSecondsAfterFinished": ttl_seconds_after_finished, "template": template},
            "pollingInterval": polling_interval,
            "minReplicaCount": 0, "maxReplicaCount": max_replicas,
            "successfulJobsHistoryLimit": 5, "failedJobsHistoryLimit": 5,
            "scalingStrategy": {"strategy": "default"},
            # A new image (or any template change) applies to the next Job: the running ones finish on what they
            # started with. KEDA's default rollout ("immediate") deletes every Job of the previous ScaledJob
            # generation, running training included (v2.20.2 controllers/keda/scaledjob_controller.go:257-300,
            # `deletePreviousVersionScaleJobs`); "gradual" deletes none (:268-269). The policy: workload_kinds/
            # scaledjob.py `template_update`, docs/deploy.md "A new image".
            "rollout": {"strategy": "gradual"},
            "triggers": [{
                "type": "aws-sqs-queue",
                "metadata": {
                    "queueURL": queue_url, "awsRegion": region, "queueLength": "1",
                    # The operator's own identity (EKS Pod Identity on keda/keda-operator). A TriggerAuthentication
                    # with `podIdentity.provider: aws` resolves to the same default credential chain in KEDA 2.20,
                    # and its CRD isn't among the pinned schemas the plan validates against.
                    "identityOwner": "operator",
                },
            }],
        },
    }


def queue_length_policy(queue_arn: str) -> str:
    """KEDA operator: read the queue's length, nothing else."""
    return iam.document([{"Sid": "ReadQueueLength", "Effect": "Allow", "Resource": queue_arn,
                          "Action": ["sqs:GetQueueAttributes"]}])


def queue_consumer_policy(queue_arn: str) -> str:
    """Training pod: take its message, keep it invisible while training, delete it when done."""
    return iam.document([{"Sid": "ConsumeTrainingRequests", "Effect": "Allow", "Resource": queue_arn,
                          "Action": ["sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
                                     "sqs:GetQueueAttributes"]}])


def redrive_policy(dead_letter_arn: str, max_receive_count: int = 3) -> str:
    return json.dumps({"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receive_count}, sort_keys=True)


@dataclass
class KedaScalingArgs:
    mode: Literal["scaledobject", "scaledjob"]
    job_name: str
    namespace: str
    min_replicas: int = 1
    max_replicas: int = 4
    gpu_utilization_threshold: int = 80
    polling_interval_seconds: int = 30
    cooldown_period_seconds: int = 300
    prometheus_url: str = ""
    """scaledobject: Prometheus that scrapes dcgm-exporter."""
    scale_target: dict[str, str] = field(default_factory=dict)
    """scaledobject: apiVersion, kind and name of the job whose Worker replicas KEDA scales."""
    shape: PodShape | None = None
    """scaledjob: the training pod shape."""
    backoff_limit: int = 3
    ttl_seconds_after_finished: int = 86400
    region: str = ""
    training_role: aws.iam.Role | None = None
    """scaledjob: the training pods' Pod Identity role; gets the queue-consumer policy."""
    keda_operator_role: aws.iam.Role | None = None
    """scaledjob: KEDA operator's Pod Identity role (TrainingOperators); gets read access to the queue length."""
    queue_labels: dict[str, str] = field(default_factory=dict)
    """scaledjob: labels for the ScaledJob (and so its Jobs), e.g. Kueue's queue name. Default none."""
    visibility_timeout_seconds: int = 43200
    """scaledjob: how long a taken message stays invisible (SQS maximum, 12 h): a training run's upper bound."""
    aws_opts: pulumi.ResourceOptions | None = None
    provider: k8s.Provider | None = None
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """KEDA's Helm release, the scaled PyTorchJob, the GPU readiness gate."""


class KedaScaling(pulumi.ComponentResource):
    scaler: k8s.apiextensions.CustomResource
    queue: aws.sqs.Queue | None = None
    body: dict[str, Any]

    def __init__(self, name: str, args: KedaScalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:KedaScaling", name, None, opts)
        depends_on = list(args.depends_on)
        if args.mode == "scaledobject":
            self.body = scaled_object_body(
                job_name=args.job_name, namespace=args.namespace, scale_target=args.scale_target,
                prometheus_url=args.prometheus_url,
                min_replicas=args.min_replicas, max_replicas=args.max_replicas,
                threshold=args.gpu_utilization_threshold, polling_interval=args.polling_interval_seconds,
                cooldown_period=args.cooldown_period_seconds)
        else:
            if args.shape is None or args.training_role is None or args.keda_operator_role is None:
                raise ValueError("a ScaledJob needs the pod shape, the training role and KEDA's operator role")
            self.queue, operator_access = self._queue(name, args)
            shape = dataclasses.replace(args.shape, extra_env={
                **args.shape.extra_env, "GTP_QUEUE_URL": self.queue.url, "AWS_REGION": args.region})
            self.body = scaled_job_body(
                job_name=args.job_name, shape=shape, queue_url=self.queue.url, region=args.region,
                max_replicas=args.max_replicas, polling_interval=args.polling_interval_seconds,
                backoff_limit=args.backoff_limit, ttl_seconds_after_finished=args.ttl_seconds_after_finished,
                labels=args.queue_labels)
            depends_on.append(operator_access)
        self.scaler = k8s.apiextensions.CustomResource(
            f"{name}-{args.mode}", api_version=self.body["apiVersion"], kind=self.body["kind"],
            metadata=self.body["metadata"], spec=self.body["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=depends_on))
        self.register_outputs({"queueUrl": self.queue.url if self.queue else None})

    def _queue(self, name: str, args: KedaScalingArgs) -> tuple[aws.sqs.Queue, aws.iam.RolePolicy]:
        child = pulumi.ResourceOptions.merge(args.aws_opts or pulumi.ResourceOptions(),
                                             pulumi.ResourceOptions(parent=self))
        dead_letters = aws.sqs.Queue(f"{name}-dead-letters", sqs_managed_sse_enabled=True,
                                     message_retention_seconds=14 * 24 * 3600, opts=child)
        queue = aws.sqs.Queue(
            f"{name}-requests", sqs_managed_sse_enabled=True,
            visibility_timeout_seconds=args.visibility_timeout_seconds,
            message_retention_seconds=4 * 24 * 3600, receive_wait_time_seconds=20,
            redrive_policy=dead_letters.arn.apply(redrive_policy), opts=child)
        aws.sqs.RedriveAllowPolicy(
            f"{name}-dead-letters", queue_url=dead_letters.url,
            redrive_allow_policy=queue.arn.apply(lambda arn: json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": [arn]})), opts=child)
        assert args.keda_operator_role is not None
        operator_access = aws.iam.RolePolicy(f"{name}-keda-operator", role=args.keda_operator_role.id,
                                             policy=queue.arn.apply(queue_length_policy), opts=child)
        assert args.training_role is not None
        aws.iam.RolePolicy(f"{name}-training-queue", role=args.training_role.id,
                           policy=queue.arn.apply(queue_consumer_policy), opts=child)
        return queue, operator_access
