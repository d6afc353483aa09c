"""`trainjob`: a Kubeflow Trainer v2.3.0 TrainJob (trainer.kubeflow.org/v1alpha1) on our own ClusterTrainingRuntime.

Trainer v2 turns a TrainJob into a JobSet (JobSet v0.12.0, bundled with the vendored manager render), the JobSet
into one indexed Job per replicated job, each Job into pods. The platform registers two objects:

- a ClusterTrainingRuntime `<namespace>-torch` (cluster-scoped, so named after the stack's namespace) with
  `mlPolicy.torch: {}` (selects Trainer's Torch plugin) and one replicated job `node` whose pod template is the
  shared training pod (components.training_pod.pod_template: image by digest, restricted security context, shm,
  storage, tolerations, node affinity), its main container renamed `node`: Trainer applies the TrainJob's
  resources, env and image only to the container of that name (trainer@v2.3.0 pkg/constants/constants.go `Node`;
  pkg/runtime/core/trainingruntime.go `newRuntimeInfo`).
- a TrainJob `<workload.name>` that references it by `runtimeRef` and sets `trainer.numNodes`,
  `trainer.numProcPerNode` and `trainer.resourcesPerNode`.

`resourcesPerNode` carries EVERY request of the pod (GPU, `vpc.amazonaws.com/efa` on EFA groups, cpu, memory,
ephemeral storage), not only the runtime template: up to Trainer v2.2.1 it REPLACED the `node` container's whole
`resources` (trainer@v2.2.1 pkg/runtime/core/trainingruntime.go:182), so a GPU or EFA request left only in the
runtime silently vanished and NCCL fell back to TCP; v2.3.0 merges per key (trainingruntime.go:199-230, #3602)
but Kueue v0.19.2 still computes the TrainJob's quota with v2.2.1's replace semantics (kueue@v0.19.2 go.mod:14).
And with no GPU in `resourcesPerNode` the Torch plugin's default `numProcPerNode: auto` counts CPUs instead
(pkg/runtime/framework/plugins/torch/torch.go:121-135). `trainjob_body` always writes them; the policy rule
`k8s-trainjob-resources-per-node` refuses a TrainJob whose `spec.trainer.resourcesPerNode` lacks them.

Not supported by Trainer v2.3.0, so refused by `check`: elastic training (`workload.elastic`; the v1
`elasticPolicy` was removed in v2.2.0, #3235) and KEDA scaling of a running job (`autoscaling.mode`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from components.training_pod import CONTAINER_NAME, EFA_RESOURCE, PodShape, pod_template, resources, torchrun_args
from conventions.kubernetes import app_labels
from stack_config import Problem, StackConfig, WorkloadConfig
from workload_kinds.base import Deployment, KubernetesWorkloadKind, WorkloadContext

API_VERSION = "trainer.kubeflow.org/v1alpha1"
NODE = "node"
"""Name of the replicated job and of its main container the Torch plugin configures (trainer@v2.3.0
pkg/constants/constants.go `Node`)."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""Marks the replicated job the TrainJob's `trainer` block applies to (constants.go `LabelTrainJobAncestor`,
value `trainer`)."""
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""Label JobSet v0.12.0 puts on every pod of a JobSet (pkg/controllers/jobset_controller.go `labelAndAnnotateObject`);
Trainer names the JobSet after the TrainJob (pkg/runtime/framework/plugins/jobset/jobset.go `Build`)."""


def runtime_name(namespace: str, workload: str) -> str:
    """Our ClusterTrainingRuntime of one workload (cluster-scoped: named after the stack's namespace too)."""
    return f"{namespace}-{workload}"


def runtime_body(name: str, shape: PodShape, *, num_nodes: int, backoff_limit: int) -> dict[str, Any]:
    """Our ClusterTrainingRuntime: the shared training pod as replicated job `node`."""
    args = torchrun_args(shape.num_gpus, shape.trainer_args, module=shape.module, program=shape.program)
    template = pod_template(shape, command=["torchrun"], args=args, labels=app_labels(name))
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
    """The TrainJob: every request of the pod in `resourcesPerNode` (see the module docstring)."""
    return {
        "apiVersion": API_VERSION, "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {**app_labels(name), **(labels or {})}},
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": runtime},
            "trainer": {"numNodes": num_nodes, "numProcPerNode": shape.num_gpus,
                        "resourcesPerNode": resources(shape)},
        },
    }


def missing_requests(trainjob: Mapping[str, Any], runtime: Mapping[str, Any] | None) -> list[str]:
    """Extended resources (GPU, EFA) the runtime's `node` container requests that the TrainJob's
    `spec.trainer.resourcesPerNode.requests` lacks."""
    per_node = (((trainjob.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode") or {})
    have = set((per_node.get("requests") or {})) | set((per_node.get("limits") or {}))
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
    template_kinds: ClassVar[frozenset[str]] = frozenset({"ClusterTrainingRuntime", "TrainingRuntime"})
    operators: ClassVar[frozenset[str]] = frozenset({"trainer"})
    pod_label: ClassVar[str] = POD_LABEL

    def check(self, config: StackConfig, workload: WorkloadConfig, path: str) -> Iterator[Problem]:
        if workload.elastic is not None:
            yield Problem(f"{path}.elastic", "kind 'trainjob' runs a fixed node count: Kubeflow Trainer v2.3.0 "
                                              "has no elastic policy (removed in v2.2.0); use kind 'pytorchjob' "
                                              "or 'elasticjob'")
        if workload.autoscaling.mode != "none":
            yield Problem(f"{path}.autoscaling.mode", f"{workload.autoscaling.mode!r}: kind 'trainjob' cannot be scaled "
                                              "(a TrainJob's `trainer` block is immutable); use 'none'")

    def deploy(self, context: WorkloadContext) -> Deployment:
        workload, shape = context.workload, context.shape
        namespace = shape.namespace
        operator = context.operators.installed["trainer"]
        runtime = runtime_name(namespace, workload.name)
        runtime_cr = k8s.apiextensions.CustomResource(
            context.resource_name("trainjob-runtime"), api_version=API_VERSION, kind="ClusterTrainingRuntime",
            metadata={"name": runtime, "labels": {"trainer.kubeflow.org/framework": "torch"}},
            spec=runtime_body(runtime, shape, num_nodes=workload.num_nodes,
                              backoff_limit=workload.backoff_limit)["spec"],
            # Trainer's runtime webhook (failurePolicy Fail) must be serving: depend on the operator.
            opts=context.opts("trainjob-runtime", provider=context.provider, depends_on=[operator, *context.ready]))
        body = trainjob_body(workload.name, namespace, runtime, shape, num_nodes=workload.num_nodes,
                             labels=context.queue_labels)  # Kueue's queue, when the stack runs Kueue
        k8s.apiextensions.CustomResource(
            context.resource_name("trainjob"), api_version=API_VERSION, kind="TrainJob", metadata=body["metadata"],
            spec=body["spec"], opts=context.opts("trainjob", provider=context.provider,
                                                 depends_on=[operator, runtime_cr, *context.ready]))
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
