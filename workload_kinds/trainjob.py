"""`trainjob`: a Kubeflow Trainer v2.3.0 TrainJob (trainer.kubeflow.org/v1alpha1) on our own ClusterTrainingRuntime.

Trainer v2 turns a TrainJob into a JobSet named after it (JobSet v0.12.0, bundled with the vendored manager
render; trainer@v2.3.0 pkg/runtime/framework/plugins/jobset/jobset.go:413 `Build`), the JobSet into one Indexed
Job per replicated job (`<trainjob>-<replicated job>-<job index>`), each Job into pods whose hostname is
`<job>-<completion index>` under the subdomain `<trainjob>` (verify/simulate/pods.py `_trainjob` cites each step).
The platform registers two objects:

- a ClusterTrainingRuntime `<namespace>-torch` (cluster-scoped, so named after the stack's namespace) with
  `mlPolicy.torch: {}` (selects Trainer's Torch plugin: pkg/runtime/framework/plugins/torch/torch.go:110-113
  `EnforceMLPolicy` runs whenever `mlPolicy.torch` is set; no Go code of v2.3.0 reads the runtime's
  `trainer.kubeflow.org/framework: torch` label, which only Trainer's SDK and shipped runtimes use) and one
  replicated job `node` labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, replicas 1 (the
  runtime webhook refuses any other count, pkg/webhooks/trainingruntime_webhook.go:78-81), whose pod template is
  the shared training pod (components.training_pod.pod_template: image by digest, restricted security context,
  shm, storage, tolerations, node affinity), its main container renamed `node`: Trainer applies the TrainJob's
  `resourcesPerNode` (pkg/runtime/core/trainingruntime.go:199-238 `newRuntimeInfo`), `image`/`command`/`args`/
  `env` (pkg/runtime/framework/plugins/jobset/builder.go:113-158 `Trainer`) and the PET_* env plus container port
  29500 (torch.go:138-204) only to the container of that name in the replicated job of trainer ancestry.
- a TrainJob `<workload.name>` that references it by `runtimeRef` and sets `trainer.numNodes` (the Job's
  parallelism and completions: torch.go:116-119, plugins/jobset/jobset.go:302-323 `SyncParallelCount`),
  `trainer.numProcPerNode` and `trainer.resourcesPerNode`.

`resourcesPerNode` carries EVERY request of the pod (GPU, `vpc.amazonaws.com/efa` on EFA groups, cpu, memory,
ephemeral storage), not only the runtime template: up to Trainer v2.2.1 it REPLACED the `node` container's whole
`resources` (trainer@v2.2.1 pkg/runtime/framework/plugins/jobset/builder.go:148-158 `Trainer`, and
pkg/runtime/core/trainingruntime.go:182 for the pod requests), so a GPU or EFA request left only in the runtime
silently vanished and NCCL fell back to TCP; v2.3.0 merges per key (#3602: pkg/runtime/core/trainingruntime.go:
199-238, pkg/util/trainingruntime/trainingruntime.go:45-65 `MergeResourceRequirements`), but Kueue v0.19.2 builds
the JobSet it computes the TrainJob's quota from with v2.2.1's builder (kueue@v0.19.2 go.mod:14,
pkg/controller/jobs/trainjob/trainjob_controller.go:178-179 `getChildJobSet`), i.e. with replace semantics. And
with no GPU in `resourcesPerNode` (any resource whose name contains `gpu`) an unset `numProcPerNode` becomes the
CPU count instead of `auto` (torch.go:121-135). `trainjob_body` always writes them; the policy rule
`k8s-trainjob-resources-per-node` refuses a TrainJob whose `spec.trainer.resourcesPerNode` lacks them.

Not supported by Trainer v2.3.0, so refused by `check`: elastic training (`workload.elastic`; Trainer's
`mlPolicy.torch.elasticPolicy` API was removed in v2.2.0, #3235 commit abf42d5) and KEDA scaling of a running
job (`autoscaling.mode`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pulumi_kubernetes as k8s

from components.training_pod import CONTAINER_NAME, EFA_RESOURCE, PodShape, pod_template, resources, torchrun_args
from conventions.kubernetes import app_labels
from stack_config import Problem, StackConfig, WorkloadConfig
from stack_config.kinds import GeneratedName
from workload_kinds.base import Deployment, KubernetesWorkloadKind, TemplateUpdate, WorkloadContext

API_VERSION = "trainer.kubeflow.org/v1alpha1"
NODE = "node"
"""Name of the replicated job and of its main container the Torch plugin configures (trainer@v2.3.0
pkg/constants/constants.go:68-69 `Node`; the master address is `<trainjob>-node-0-0.<trainjob>`, torch.go:162)."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""Marks the replicated job the TrainJob's `trainer` block applies to: trainer@v2.3.0 pkg/constants/constants.go:41
`LabelTrainJobAncestor`, with the value `trainer` (constants.go:66 `AncestorTrainer`); read from the replicated
job's `template.metadata.labels` (pkg/runtime/core/trainingruntime.go:191-197)."""
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""Label JobSet v0.12.0 puts on every pod of a JobSet (api/jobset/v1alpha2/jobset_types.go:24 `JobSetNameKey`,
set by pkg/controllers/jobset_controller.go:1020 `labelAndAnnotateObject`); Trainer names the JobSet after the
TrainJob (trainer@v2.3.0 pkg/runtime/framework/plugins/jobset/jobset.go:413 `Build`)."""


def runtime_name(namespace: str, workload: str) -> str:
    """Our ClusterTrainingRuntime of one workload (cluster-scoped: named after the stack's namespace too)."""
    return f"{namespace}-{workload}"


def runtime_body(name: str, shape: PodShape, *, num_nodes: int, backoff_limit: int,
                 workload: str | None = None) -> dict[str, Any]:
    """Our ClusterTrainingRuntime: the shared training pod as replicated job `node`. Its pods carry
    `app.kubernetes.io/name: <workload>` like every other kind's (the alert rules and dashboards select a
    workload's pods by it); `workload` None: the runtime's own name."""
    args = torchrun_args(shape.num_gpus, shape.trainer_args, module=shape.module, program=shape.program)
    template = pod_template(shape, command=["torchrun"], args=args, labels=app_labels(workload or name))
    for container in template["spec"]["containers"]:
        if container["name"] == CONTAINER_NAME:
            container["name"] = NODE
    return {
        "apiVersion": API_VERSION, "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": NODE, "replicas": 1,
                "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                             "spec": {"backoffLimit": backoff_limit, "template": template}},
            }]}},
        },
    }


def trainjob_body(name: str, namespace: str, runtime: str, shape: PodShape, *, num_nodes: int,
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The TrainJob: every request of the pod in `resourcesPerNode` (see the module docstring), and the image.

    The image is the runtime's too, but the TrainJob carries it (`trainer.image`, applied to the `node` container:
    builder.go:113-158) so that a new image changes the TrainJob itself: Kueue reconciles a TrainJob when it or
    its Workload changes, not when its runtime does, and reads the runtime only then (kueue v0.19.2
    pkg/controller/jobs/trainjob/trainjob_controller.go:155,199-209). `make cluster-test` saw a new image in the
    runtime alone leave the running TrainJob untouched, a restart deferred to whatever next reconciles it; with
    the image here it is stopped and requeued at once, like a PyTorchJob (`KUEUE_REQUEUE`, day two `new image`)."""
    return {
        "apiVersion": API_VERSION, "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {**app_labels(name), **(labels or {})}},
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": runtime},
            "trainer": {"image": shape.image, "numNodes": num_nodes, "numProcPerNode": shape.num_gpus,
                        "resourcesPerNode": resources(shape)},
        },
    }


def missing_requests(trainjob: Mapping[str, Any], runtime: Mapping[str, Any] | None) -> list[str]:
    """Extended resources (GPU, EFA) the runtime's `node` container requests that the TrainJob's
    `spec.trainer.resourcesPerNode.requests` lacks."""
    per_node = (((trainjob.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode") or {})
    have = set(per_node.get("requests") or {}) | set(per_node.get("limits") or {})
    wanted: set[str] = set()
    for template in runtime_templates(runtime or {}).values():
        for container in ((template.get("spec") or {}).get("containers") or []):
            if container.get("name") == NODE:
                res = container.get("resources") or {}
                wanted |= {key for part in ("requests", "limits") for key in (res.get(part) or {})
                           if "gpu" in key or key == EFA_RESOURCE}
    return sorted(wanted - have)


def runtime_templates(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Replicated job name → pod template of a (Cluster)TrainingRuntime."""
    jobs = ((((body.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
    return {job.get("name"): (((job.get("template") or {}).get("spec") or {}).get("template"))
            for job in jobs if isinstance(job, Mapping)}


class TrainJobKind(KubernetesWorkloadKind):
    name: ClassVar[str] = "trainjob"
    resource_kind: ClassVar[str] = "TrainJob"
    kueue_integration: ClassVar[str | None] = "trainer.kubeflow.org/trainjob"
    template_update: ClassVar[TemplateUpdate | None] = TemplateUpdate(
        restarts=True, needs_queue=False,
        effect="the TrainJob is replaced (its spec.trainer and spec.runtimeRef are immutable: `self == oldSelf` in "
               "Trainer v2.3.0's TrainJob CRD, vendor/operators/kubeflow-trainer-v2.3.0.yaml): deleted first (its "
               "name is fixed), so its pods stop, then created again, admitted by Kueue as a new Workload and "
               "resumed from the last complete checkpoint: the steps since are lost")
    immutable_paths: ClassVar[tuple[str, ...]] = ("spec.trainer", "spec.runtimeRef")
    template_kinds: ClassVar[frozenset[str]] = frozenset({"ClusterTrainingRuntime", "TrainingRuntime"})
    operators: ClassVar[frozenset[str]] = frozenset({"trainer"})
    pod_label: ClassVar[str] = POD_LABEL
    # JobSet v0.12.0's webhook refuses a JobSet whose longest pod name `<jobset>-<replicated job>-<job index>-<pod
    # index>-<5 random>` is not a DNS-1035 label of at most 63 characters (pkg/webhooks/jobset_webhook.go:243-255,
    # Indexed completion being its default, :120-122); the TrainJob's JobSet is named after it, one Job of `node`.
    generated_names: ClassVar[tuple[GeneratedName, ...]] = (
        GeneratedName("{job}-" + NODE + "-0-{index}-abcde", "the JobSet's longest pod name (with its 5 random "
                      "characters)", "JobSet v0.12.0 pkg/webhooks/jobset_webhook.go:249"),
    )

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if workload.elastic is not None:
            yield Problem(f"{path}.elastic", "kind 'trainjob' runs a fixed node count: Kubeflow Trainer v2.3.0 "
                                              "has no elastic policy (removed in v2.2.0); use kind 'pytorchjob' "
                                              "or 'elasticjob'")
        if workload.autoscaling.mode != "none":
            yield Problem(f"{path}.autoscaling.mode", f"{workload.autoscaling.mode!r}: kind 'trainjob' cannot be "
                                              "scaled (a TrainJob's `trainer` block is immutable); use 'none'")

    def deploy(self, context: WorkloadContext) -> Deployment:
        workload, shape = context.workload, context.shape
        namespace = shape.namespace
        operator = context.operators.installed["trainer"]
        runtime = runtime_name(namespace, workload.name)
        runtime_cr = k8s.apiextensions.CustomResource(
            context.resource_name("trainjob-runtime"), api_version=API_VERSION, kind="ClusterTrainingRuntime",
            metadata={"name": runtime, "labels": {"trainer.kubeflow.org/framework": "torch"}},
            spec=runtime_body(runtime, shape, num_nodes=workload.num_nodes,
                              backoff_limit=workload.backoff_limit, workload=workload.name)["spec"],
            # Trainer's runtime webhook (failurePolicy Fail) must be serving: depend on the operator.
            opts=context.opts("trainjob-runtime", provider=context.provider, depends_on=[operator, *context.ready]))
        body = trainjob_body(workload.name, namespace, runtime, shape, num_nodes=workload.num_nodes,
                             labels=context.queue_labels)  # Kueue's queue, when the stack runs Kueue
        k8s.apiextensions.CustomResource(
            context.resource_name("trainjob"), api_version=API_VERSION, kind="TrainJob", metadata=body["metadata"],
            spec=body["spec"], opts=context.opts("trainjob", provider=context.provider,
                                                 depends_on=[operator, runtime_cr, *context.ready],
                                                 replace_on_changes=list(self.immutable_paths),
                                                 delete_before_replace=True))
        return Deployment(watch={
            "jobs": f"kubectl -n {namespace} get trainjobs,jobsets {workload.name}",
            "pods": f"kubectl -n {namespace} get pods -l {POD_LABEL}={workload.name} -o wide",
            # JobSet names the Job <jobset>-<replicated job>-<index>; its pods get generated names.
            "logs": f"kubectl -n {namespace} logs -f job/{workload.name}-{NODE}-0 -c {NODE}",
        })

    def pod_templates(self, body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        if body.get("kind") in self.template_kinds:
            return runtime_templates(body)
        return {}

    def containers(self, body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """A runtime's containers; a TrainJob's `trainer` block, which overrides the `node` container's image."""
        trainer = (body.get("spec") or {}).get("trainer") if body.get("kind") == self.resource_kind else None
        return [*super().containers(body), *([trainer] if trainer and trainer.get("image") else [])]
