"""Every Pod the rendered cluster's controllers would create, as `ExpandedPod`s, at the largest scale allowed.

Built-in controllers (Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob) copy their pod template;
the training controllers of the pinned versions add to it, and each addition below cites the upstream file and
function it reproduces:

- PyTorchJob — Kubeflow training-operator v1.9.4 (github.com/kubeflow/trainer, tag v1.9.4);
- ElasticJob — DLRover v0.6.1 (github.com/intelligent-machine-learning/dlrover, tag v0.6.1): the Go controller
  creates the job master pod, the master (Python) creates the worker pods;
- TrainJob — Kubeflow Trainer v2.3.0 (github.com/kubeflow/trainer, tag v2.3.0) builds a JobSet from the TrainJob and
  its ClusterTrainingRuntime, JobSet v0.12.0 (github.com/kubernetes-sigs/jobset) one indexed Job per replicated job,
  the Job controller the pods;
- ScaledJob — KEDA v2.20.2 (github.com/kedacore/keda, tag v2.20.2) creates Jobs, the Job controller their pods.

Counts are the largest the stack allows: replicas, raised to an `elasticPolicy.maxReplicas`, a KEDA
ScaledObject's `maxReplicaCount` or an HPA's `maxReplicas` that targets the object.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import workload_kinds
from components.kueue import QUEUE_LABEL
from verify.plan_record import Plan
from verify.render import ClusterObject
from verify.simulate.admission import quantity
from verify.simulate.model import ExpandedPod, Modeled

MODELS = (Modeled("TRAINING_OPERATOR_VERSION", "v1.9.4"), Modeled("DLROVER_VERSION", "v0.6.1"),
          Modeled("KUBEFLOW_TRAINER_VERSION", "v2.3.0"), Modeled("JOBSET_VERSION", "v0.12.0"),
          Modeled("KEDA.version", "2.20.2"))
"""The upstream versions this module models (verify.simulate.model.Modeled)."""

_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}

# KEDA v2.20.2 CRDs (config/crd/bases/keda.sh_scaledobjects.yaml, keda.sh_scaledjobs.yaml): maxReplicaCount
# defaults to 100 when unset (apis/keda/v1alpha1 scaledobject_types.go / scaledjob_types.go `defaultMaxReplicas`).
KEDA_DEFAULT_MAX_REPLICAS = 100

# training-operator v1.9.4 pkg/config/config.go: PyTorchInitContainerImageDefault, ...MaxTriesDefault; the
# manager's flags `--pytorch-init-container-image` / `--pytorch-init-container-max-tries` override them
# (cmd/training-operator.v1/main.go).
PYTORCH_INIT_IMAGE_DEFAULT = "alpine:3.10"
PYTORCH_INIT_MAX_TRIES_DEFAULT = 100
# pkg/apis/kubeflow.org/v1/pytorch_types.go
PYTORCH_DEFAULT_CONTAINER = "pytorch"
PYTORCH_DEFAULT_PORT_NAME = "pytorchjob-port"
PYTORCH_DEFAULT_PORT = 23456
PYTORCH_CONTROLLER_NAME = "pytorchjob-controller"

# DLRover v0.6.1 go/elasticjob/main.go: `--master-image` default.
DLROVER_MASTER_IMAGE_DEFAULT = "registry.cn-hangzhou.aliyuncs.com/intell-ai/dlrover:latest"
DLROVER_MASTER_TYPE = "dlrover-master"


def _get(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def pod_from_template(template: Mapping[str, Any], namespace: str, name: str | None = None) -> dict[str, Any]:
    """A v1 Pod with the template's metadata and spec (what a controller posts before any admission)."""
    metadata = copy.deepcopy(dict(template.get("metadata") or {}))
    metadata["namespace"] = namespace
    if name is not None:
        metadata["name"] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": copy.deepcopy(dict(template.get("spec") or {}))}


def object_name(item: ClusterObject) -> str:
    """The object's name; one Pulumi auto-names at apply (no `metadata.name` in the plan) reads `<auto-named>`."""
    metadata = item.obj.get("metadata") or {}
    return str(metadata.get("name") or metadata.get("generateName") or "<auto-named>")


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    return int(value)


def _scalers(objects: list[ClusterObject]) -> dict[tuple[str, str, str], int]:
    """(kind, namespace, name) → the largest replica count an autoscaler may set on it."""
    largest: dict[tuple[str, str, str], int] = {}
    for item in objects:
        spec = item.obj.get("spec") or {}
        target = spec.get("scaleTargetRef") or {}
        if item.kind == "ScaledObject":
            # KEDA v2.20.2 pkg/scaling/executor/scale_scaledobjects.go: the HPA KEDA creates scales the target
            # between minReplicaCount and maxReplicaCount; the target's kind defaults to Deployment
            # (apis/keda/v1alpha1 scaledobject_types.go ScaleTarget).
            most = _int(spec.get("maxReplicaCount"), KEDA_DEFAULT_MAX_REPLICAS)
        elif item.kind == "HorizontalPodAutoscaler":
            most = _int(spec.get("maxReplicas"), 1)
        else:
            continue
        key = (str(target.get("kind") or "Deployment"), item.namespace or "default", str(target.get("name")))
        largest[key] = max(largest.get(key, 0), most)
    return largest


def _job_pods(job_spec: Mapping[str, Any]) -> int:
    """Pods one Job runs at once: parallelism (default 1), at most completions (batch/v1 Job controller,
    pkg/controller/job/job_controller.go manageJob: wantActive = min(parallelism, completions - succeeded))."""
    parallelism = _int(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _deployment_args(objects: list[ClusterObject], image_fragment: str) -> list[str]:
    """The args of the operator manager container whose image contains `image_fragment` (first match)."""
    for item in objects:
        if item.kind != "Deployment":
            continue
        for container in _get(item.obj, ("spec", "template", "spec", "containers")) or []:
            if image_fragment in str(container.get("image", "")):
                return [str(arg) for arg in (container.get("command") or []) + (container.get("args") or [])]
    return []


def _flag(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and index + 1 < len(args):
            return args[index + 1]
    return None


# ---------------------------------------------------------------------------------------------------------------
# PyTorchJob — training-operator v1.9.4


def _pytorch_defaults(body: Mapping[str, Any]) -> dict[str, Any]:
    """The job after `r.Scheme.Default(pytorchjob)` (pytorchjob_controller.go Reconcile), i.e.
    pkg/apis/kubeflow.org/v1/pytorch_defaults.go SetDefaults_PyTorchJob: replica type names to CamelCase,
    replicas 1, restartPolicy OnFailure, the `pytorchjob-port` 23456 on the `pytorch` container (or the first),
    elasticPolicy min/max from each other or from the Worker replicas, nprocPerNode `auto`."""
    job = copy.deepcopy(dict(body))
    spec = job.setdefault("spec", {})
    replicas: dict[str, Any] = {}
    for rtype, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
        # setPyTorchTypeNamesToCamelCase: master → Master, WORKER → Worker
        name = {"master": "Master", "worker": "Worker"}.get(str(rtype).lower(), str(rtype))
        replica = dict(replica or {})
        replica.setdefault("replicas", 1)                       # defaulting_utils.go setDefaultReplicas
        replica.setdefault("restartPolicy", "OnFailure")        # setDefaultRestartPolicy
        pod_spec = ((replica.setdefault("template", {})).setdefault("spec", {}))
        containers = pod_spec.get("containers") or []
        if containers:                                          # setPyTorchDefaultPort
            index = next((i for i, c in enumerate(containers) if c.get("name") == PYTORCH_DEFAULT_CONTAINER), 0)
            ports = containers[index].setdefault("ports", [])
            if not any(port.get("name") == PYTORCH_DEFAULT_PORT_NAME for port in ports):
                ports.append({"name": PYTORCH_DEFAULT_PORT_NAME, "containerPort": PYTORCH_DEFAULT_PORT})
        replicas[name] = replica
    spec["pytorchReplicaSpecs"] = replicas
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict):                               # setElasticPolicy
        low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
        worker = replicas.get("Worker", {}).get("replicas")
        if low is None and high is None:
            elastic["minReplicas"] = elastic["maxReplicas"] = worker
        elif low is None:
            elastic["minReplicas"] = high
        elif high is None:
            elastic["maxReplicas"] = low
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = "auto"                           # setDefaultNprocPerNode
    return job


def _pytorch_port(replica: Mapping[str, Any]) -> int | None:
    """envvar.go getPortFromPyTorchJob: the `pytorchjob-port` of the `pytorch` container."""
    for container in _get(replica, ("template", "spec", "containers")) or []:
        if container.get("name") == PYTORCH_DEFAULT_CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == PYTORCH_DEFAULT_PORT_NAME:
                    return int(port["containerPort"])
    return None


def _pytorch_env(job: Mapping[str, Any], rtype: str, index: int) -> list[dict[str, Any]]:
    """envvar.go setPodEnv (+ master.go MasterEnvVarGenerator, elastic.go ElasticEnvVarGenerator)."""
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    name = job["metadata"]["name"]
    env: list[dict[str, Any]] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    total = sum(int(replica["replicas"]) for replica in replicas.values())     # getTotalReplicas
    nproc = spec.get("nprocPerNode")
    nproc_int = int(nproc) if str(nproc).isdigit() else 1                     # getNprocPerNodeInt
    if "Master" in replicas:
        port = _pytorch_port(replicas["Master"])
        master = f"{name}-master-0"                                            # replicaName
        env += [{"name": "MASTER_PORT", "value": str(port)}, {"name": "PET_MASTER_PORT", "value": str(port)},
                {"name": "MASTER_ADDR", "value": master}, {"name": "PET_MASTER_ADDR", "value": master}]
        rank = index + 1 if rtype == "worker" else index
        env += [{"name": "WORLD_SIZE", "value": str(total * nproc_int)}, {"name": "RANK", "value": str(rank)},
                {"name": "PET_NODE_RANK", "value": str(rank)}]
    if nproc is not None:
        env.append({"name": "PET_NPROC_PER_NODE", "value": str(nproc)})
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict):
        host = elastic.get("rdzvHost") or f"{name}-worker-0"                   # generateEnvRDZVEndpoint
        port = elastic.get("rdzvPort") or _pytorch_port(replicas.get("Worker", {}))
        env.append({"name": "PET_RDZV_ENDPOINT", "value": f"{host}:{port}"})
        env.append({"name": "PET_RDZV_BACKEND", "value": str(elastic.get("rdzvBackend") or "c10d")})
        env.append({"name": "PET_NNODES", "value": f"{elastic['minReplicas']}:{elastic['maxReplicas']}"})
        if elastic.get("maxRestarts") is not None:
            env.append({"name": "PET_MAX_RESTARTS", "value": str(elastic["maxRestarts"])})
        if elastic.get("nProcPerNode") is not None:
            env.append({"name": "PET_NPROC_PER_NODE", "value": str(elastic["nProcPerNode"])})
        if elastic.get("rdzvId") is not None:
            env.append({"name": "PET_RDZV_ID", "value": str(elastic["rdzvId"])})
        if elastic.get("rdzvConf"):
            env.append({"name": "PET_RDZV_CONF",
                        "value": ",".join(f"{c['key']}={c['value']}" for c in elastic["rdzvConf"])})
        if elastic.get("standalone"):
            env.append({"name": "PET_STANDALONE", "value": ""})
    else:
        env.append({"name": "PET_NNODES", "value": str(total)})
    return env


def pytorch_init_container(master_address: str, image: str = PYTORCH_INIT_IMAGE_DEFAULT,
                           max_tries: int = PYTORCH_INIT_MAX_TRIES_DEFAULT) -> dict[str, Any]:
    """initcontainer.go initContainerTemplate, as the operator renders it: no securityContext at all, so a
    `restricted` namespace rejects every Worker pod of a job that has a Master."""
    return {"name": "init-pytorch", "image": image, "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                          "requests": {"cpu": "50m", "memory": "10Mi"}},
            "command": ["sh", "-c", f"err=1;for i in $(seq {max_tries}); do if nslookup {master_address}; "
                                    "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"]}


def _pytorchjob(item: ClusterObject, objects: list[ClusterObject],
                scalers: Mapping[tuple[str, str, str], int]) -> list[ExpandedPod]:
    job = _pytorch_defaults(item.obj)
    namespace = item.namespace or "default"
    name = item.name
    replicas = job["spec"]["pytorchReplicaSpecs"]
    args = _deployment_args(objects, "training-operator")
    init_image = _flag(args, "pytorch-init-container-image") or PYTORCH_INIT_IMAGE_DEFAULT
    init_tries = int(_flag(args, "pytorch-init-container-max-tries") or PYTORCH_INIT_MAX_TRIES_DEFAULT)
    elastic = job["spec"].get("elasticPolicy")
    pods = []
    for rtype_name, replica in sorted(replicas.items()):
        rtype = rtype_name.lower()
        count = int(replica["replicas"])
        if rtype_name == "Worker":
            # The Worker replicas are what the /scale subresource, KEDA and the operator's own HPA
            # (hpa.go, from elasticPolicy.metrics, bounded by maxReplicas) change.
            if isinstance(elastic, dict) and elastic.get("maxReplicas") is not None:
                count = max(count, int(elastic["maxReplicas"]))
            count = max(count, scalers.get(("PyTorchJob", namespace, name), 0))
        # pkg/controller.v1/common/pod.go createNewPod: template copy, name, labels, SetClusterSpec, restartPolicy
        pod = pod_from_template(replica.get("template") or {}, namespace, f"{name}-{rtype}-0")
        labels = pod["metadata"].setdefault("labels", {})
        labels.update({"training.kubeflow.org/operator-name": PYTORCH_CONTROLLER_NAME,
                       "training.kubeflow.org/job-name": name.replace("/", "-"),
                       "training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": "0"})
        # pytorchjob_controller.go IsMasterRole: the Master, or Worker 0 when there is no Master
        if rtype_name == "Master" or ("Master" not in replicas and rtype_name == "Worker"):
            labels["training.kubeflow.org/job-role"] = "master"
        spec = pod["spec"]
        # pytorchjob_controller.go SetClusterSpec → envvar.go setPodEnv: env on every container
        env = _pytorch_env(job, rtype, 0)
        for container in spec.get("containers") or []:
            container["env"] = list(container.get("env") or []) + copy.deepcopy(env)
        # SetClusterSpec → initcontainer.go setInitContainer: Workers get init-pytorch when a Master exists
        if "Master" in replicas and rtype == "worker":
            spec["initContainers"] = list(spec.get("initContainers") or []) + [
                pytorch_init_container(f"{name}-master-0", init_image, init_tries)]
        # pkg/core/pod.go SetRestartPolicy: the replica's policy wins; ExitCode becomes Never
        policy = replica["restartPolicy"]
        spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        pods.append(ExpandedPod(owner=f"PyTorchJob {namespace}/{name} {rtype_name}", source=item.source,
                                namespace=namespace, pod=pod, count=count))
    return pods


# ---------------------------------------------------------------------------------------------------------------
# ElasticJob — DLRover v0.6.1


def dlrover_master_template(job: Mapping[str, Any], master_image: str) -> dict[str, Any]:
    """go/elasticjob/pkg/controllers/master.go createDefaultMasterTemplate: one `main` container, the
    controller's `--master-image`, 1 CPU / 2Gi memory / 2Gi ephemeral-storage requested and limited, restartPolicy
    Never — and no securityContext (neither pod nor container), so only `privileged` or `baseline` namespaces
    admit it."""
    metadata = job.get("metadata") or {}
    command = (f"python -m dlrover.python.master.main --platform pyk8s --namespace {metadata.get('namespace')} "
               f"--job_name {metadata.get('name')} --port 50001")
    annotations = metadata.get("annotations") or {}
    for argument in ("pending_timeout", "pending_fail_strategy", "service_type", "pre_check_ops",
                     "pre_check_bypass"):                     # getMasterArguments
        if argument in annotations:
            command += f" --{argument} {annotations[argument]}"
    quantities = {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"}
    return {"spec": {"containers": [{"name": "main", "image": master_image, "imagePullPolicy": "Always",
                                     "command": ["/bin/bash", "-c", command],
                                     "resources": {"requests": dict(quantities), "limits": dict(quantities)}}],
                     "restartPolicy": "Never"}}


def _dlrover_cpu(quantity: Any) -> str:
    """dlrover/python/scheduler/kubernetes.py convert_cpu_to_decimal: round(cores, 1), sent as a JSON number."""
    from verify.simulate.admission import quantity as parse

    cores = round(float(parse(quantity if quantity is not None else 0)), 1)
    return str(int(cores)) if cores == int(cores) else str(cores)


def _dlrover_memory(quantity: Any) -> str:
    """kubernetes.py convert_memory_to_mb (int(bytes / 1024 / 1024)), written back as `<n>Mi`."""
    from verify.simulate.admission import quantity as parse

    return f"{int(parse(quantity) / 1024 / 1024) if quantity is not None else 0}Mi"


def _max_nnodes(template: Mapping[str, Any]) -> int:
    """MAX of `--nnodes=MIN:MAX` in the main container's command/args (dlrover-run, like torchrun)."""
    for container in _get(template, ("spec", "containers")) or []:
        args = [str(arg) for arg in (container.get("command") or []) + (container.get("args") or [])]
        value = _flag(args, "nnodes")
        if value:
            return int(value.split(":")[-1])
    return 0


def _elasticjob(item: ClusterObject, objects: list[ClusterObject]) -> list[ExpandedPod]:
    namespace = item.namespace or "default"
    name = item.name
    spec = item.obj.get("spec") or {}
    replica_specs = spec.get("replicaSpecs") or {}
    pods = []
    # elasticjob_controller.go createEasticJobMaster → master.go SetDefaultMasterTemplateToJob: the job's own
    # `dlrover-master` replica template if it has one, else the default; POD_IP env on its first container;
    # ReconcileJobMasterPod → newElasticJobMaster → pkg/common/resource.go NewPod: labels, the job's labels and
    # annotations, namespace = the job's.
    # The controller's container is found by its `--master-image` flag: on arm64 sites it runs DLRover's
    # `dlrover_controller_aarch64` image, not the manifest's `elasticjob-controller` (catalog/images.py).
    master_image = next((flag for item_ in objects if item_.kind == "Deployment"
                         for container in _get(item_.obj, ("spec", "template", "spec", "containers")) or []
                         if (flag := _flag([str(a) for a in (container.get("command") or [])
                                            + (container.get("args") or [])], "master-image"))),
                        None) or DLROVER_MASTER_IMAGE_DEFAULT
    own = (replica_specs.get(DLROVER_MASTER_TYPE) or {}).get("template")
    template = copy.deepcopy(own) if isinstance(own, Mapping) else dlrover_master_template(item.obj, master_image)
    master = pod_from_template(template, namespace, f"elasticjob-{name}-{DLROVER_MASTER_TYPE}-0")
    containers = master["spec"].get("containers") or []
    if containers:
        containers[0]["env"] = list(containers[0].get("env") or []) + [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}]
    labels = master["metadata"].setdefault("labels", {})
    labels.update({"app.kubernetes.io/name": "elasticjob", "elasticjob.dlrover/name": name})
    labels.update((item.obj.get("metadata") or {}).get("labels") or {})
    labels.update({"elasticjob.dlrover/replica-type": DLROVER_MASTER_TYPE, "elasticjob.dlrover/replica-index": "0"})
    annotations = (item.obj.get("metadata") or {}).get("annotations") or {}
    if annotations:
        master["metadata"].setdefault("annotations", {}).update(annotations)
    pods.append(ExpandedPod(owner=f"ElasticJob {namespace}/{name} {DLROVER_MASTER_TYPE}", source=item.source,
                            namespace=namespace, pod=master))
    # The master creates the other replicas: dlrover/python/master/scaler/pod_scaler.py PodScaler._create_pod and
    # _create_pod_obj, from the job's replicaSpecs[type].template (_init_pod_config_by_job).
    for rtype, replica in sorted(replica_specs.items()):
        if rtype == DLROVER_MASTER_TYPE or not isinstance(replica, Mapping):
            continue
        template = replica.get("template") or {}
        pod = pod_from_template(template, namespace, f"{name}-edljob-{rtype}-0")   # kubernetes.py get_pod_name
        pod_spec = pod["spec"]
        containers = pod_spec.get("containers") or []
        # kubernetes.py get_main_container: the only container, else the one named `main`
        main = containers[0] if len(containers) == 1 else next(
            (c for c in containers if c.get("name") == "main"), None)
        if main is not None:
            # K8sJobArgs.initilize reads requests.cpu/memory of containers[0]; set_container_resource writes them
            # back into BOTH requests and limits (cpu rounded to 0.1 core, memory in whole Mi).
            first = (containers[0].get("resources") or {}).get("requests") or {}
            try:
                cpu, memory = _dlrover_cpu(first.get("cpu", 0)), _dlrover_memory(first.get("memory"))
            except ValueError:
                cpu = memory = None   # left as written: the admission check names the bad quantity's path
            resources = main.setdefault("resources", {})
            for key in ("requests", "limits") if cpu is not None else ():
                if resources.get(key):
                    resources[key] = {**resources[key], "cpu": cpu, "memory": memory}
                else:
                    gpu = {k: v for k, v in first.items() if "nvidia.com" in k}
                    resources[key] = {"cpu": cpu, "memory": memory, **gpu}
            main["env"] = list(main.get("env") or []) + [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                {"name": "DLROVER_MASTER_ADDR", "value": f"elasticjob-{name}-{DLROVER_MASTER_TYPE}:50001"}]
            main.pop("lifecycle", None)                         # _create_pod_obj: lifecycle=None
        # _create_pod_obj: priority_class_name = the replica's `priority` (high/low/""): the template's
        # priorityClassName is replaced, "" means none; restart_policy Never; termination_grace_period_seconds
        # None, i.e. the API default of 30 s replaces the template's.
        priority = replica.get("priority")
        if priority:
            pod_spec["priorityClassName"] = str(priority)
        else:
            pod_spec.pop("priorityClassName", None)
        pod_spec["restartPolicy"] = "Never"
        pod_spec.pop("terminationGracePeriodSeconds", None)
        labels = pod["metadata"].setdefault("labels", {})
        labels.update({"app": "dlrover", "elasticjob.dlrover/name": name, "elasticjob.dlrover/replica-type": rtype,
                       "elasticjob.dlrover/replica-index": "0", "elasticjob.dlrover/rank-index": "0",
                       "elasticjob.dlrover/relaunch-count": "0"})
        count = max(_int(replica.get("replicas"), 0), _max_nnodes(template))
        pods.append(ExpandedPod(owner=f"ElasticJob {namespace}/{name} {rtype}", source=item.source,
                                namespace=namespace, pod=pod, count=count))
    return pods


# ---------------------------------------------------------------------------------------------------------------
# ScaledJob — KEDA v2.20.2


def _scaledjob(item: ClusterObject) -> list[ExpandedPod]:
    namespace = item.namespace or "default"
    spec = item.obj.get("spec") or {}
    job_spec = copy.deepcopy(spec.get("jobTargetRef") or {})
    template = job_spec.get("template") or {}
    # pkg/scaling/executor/scale_jobs.go generateJobs: the template gets label scaledjob.keda.sh/name, and an
    # unset restartPolicy becomes OnFailure.
    template.setdefault("metadata", {}).setdefault("labels", {})["scaledjob.keda.sh/name"] = item.name
    pod = pod_from_template(template, namespace, f"{item.name}-job")
    pod["spec"].setdefault("restartPolicy", "OnFailure")
    # createJobs: at most maxReplicaCount Jobs run at once, each with its parallelism.
    jobs = _int(spec.get("maxReplicaCount"), KEDA_DEFAULT_MAX_REPLICAS)
    return [ExpandedPod(owner=f"ScaledJob {namespace}/{item.name} Job", source=item.source, namespace=namespace,
                        pod=pod, count=jobs * _job_pods(job_spec))]


# TrainJob — Kubeflow Trainer v2.3.0 + JobSet v0.12.0
TORCH_MASTER_PORT = 29500
"""trainer@v2.3.0 pkg/constants/constants.go:72 `ContainerTrainerPort`: PET_MASTER_PORT of the Torch plugin."""
_JOBSET = "jobset.sigs.k8s.io/"
_JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_ONE_JOB_ANCESTORS = ("trainer", "dataset-initializer", "model-initializer")
"""trainer@v2.3.0 pkg/constants/constants.go:53,59,66: the ancestors Trainer runs as one Job each."""


def _upsert(items: list[dict[str, Any]], item: Mapping[str, Any], same: Callable[[Mapping[str, Any]], bool]) -> None:
    """trainer@v2.3.0 pkg/apply/apply.go:79-87 `upsert`: replace the first entry `same` matches, else append."""
    for index, existing in enumerate(items):
        if same(existing):
            items[index] = dict(item)
            return
    items.append(dict(item))


def _upsert_env(container: dict[str, Any], variables: list[Mapping[str, Any]]) -> None:
    """apply.go `UpsertEnvVars` (by name)."""
    env = [dict(e) for e in container.get("env") or []]
    for variable in variables:
        _upsert(env, variable, lambda e: e.get("name") == variable.get("name"))  # noqa: B023 (called at once)
    container["env"] = env


def _merge_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """The `node` container's resources once the TrainJob's `resourcesPerNode` is applied: trainer@v2.3.0
    pkg/util/trainingruntime/trainingruntime.go:45-65 `MergeResourceRequirements` (#3602), called from
    pkg/runtime/core/trainingruntime.go:199-238 `newRuntimeInfo`. A strategic merge patch: `limits` and `requests`
    merge per key (the TrainJob's value wins, the runtime's other keys stay, a `null` value deletes the key),
    `claims` merge by `name`. (Up to v2.2.1 the whole block was replaced: trainer@v2.2.1
    pkg/runtime/framework/plugins/jobset/builder.go:148-158 `Trainer`, pkg/runtime/core/trainingruntime.go:182.)"""
    merged: dict[str, Any] = {}
    for part in ("limits", "requests"):
        values = dict(base.get(part) or {})
        for key, value in dict(override.get(part) or {}).items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        if values:
            merged[part] = values
    claims = [dict(c) for c in base.get("claims") or []]
    for claim in override.get("claims") or []:
        _upsert(claims, claim, lambda c: c.get("name") == claim.get("name"))  # noqa: B023 (called at once)
    if claims:
        merged["claims"] = claims
    return merged


def _per_node_count(resources: Mapping[str, Any], match: Callable[[str], bool]) -> int:
    """trainer@v2.3.0 pkg/runtime/runtime.go:279-298 `GetNumGPUPerNode`, torch.go:227-240 `getNumCPUPerNode`: the
    matching request, else the matching limit, as `Quantity.Value()` (rounded up); 0 when absent. A value that
    is not a quantity counts 0 here (the admission check reports it with its key path)."""
    for part in ("requests", "limits"):
        for key, value in dict(resources.get(part) or {}).items():
            if not match(str(key)):
                continue
            try:
                amount = quantity(value)
            except ValueError:
                return 0
            if amount:
                return math.ceil(amount)
    return 0


def _nproc_per_node(trainer: Mapping[str, Any], runtime_resources: Mapping[str, Any]) -> str:
    """PET_NPROC_PER_NODE, trainer@v2.3.0 pkg/runtime/framework/plugins/torch/torch.go:121-135 `EnforceMLPolicy`:
    `numProcPerNode` when set, else `auto`; but when the TrainJob's `resourcesPerNode` (when set, else the
    runtime's `node` container resources) asks no GPU (a resource whose name contains `gpu`), the CPU count
    (at least 1)."""
    if trainer.get("numProcPerNode") is not None:
        return str(int(trainer["numProcPerNode"]))
    resources = trainer.get("resourcesPerNode")
    if resources is None:
        resources = runtime_resources
    if _per_node_count(resources, lambda name: "gpu" in name.lower()) == 0:
        return str(max(1, _per_node_count(resources, lambda name: name == "cpu")))
    return "auto"


def _jobset_labels(jobset: str, namespace: str, replicated: list[tuple[str, int, str]], index: int,
                   job_index: int) -> dict[str, str]:
    """What JobSet v0.12.0 puts on every child Job and its pod template, as labels and annotations alike:
    pkg/controllers/jobset_controller.go:1014-1079 `labelAndAnnotateObject` (keys: api/jobset/v1alpha2/
    jobset_types.go:24-77, pkg/constants/constants.go:34). Not here, as the defaults leave them out:
    `job-restart-attempt` (feature gate RestartJob, alpha, off: pkg/features/features.go:73) and `coordinator`
    (only with `spec.coordinator`); the pod webhook (pkg/webhooks/pod_webhook.go) adds only for exclusive placement.
    `replicated`: (name, replicas, groupName) per replicated job. The JobSet's UID is a stand-in (the API server
    assigns it)."""
    rjob, replicas, group = replicated[index]
    job_name = f"{jobset}-{rjob}-{job_index}"  # pkg/util/placement/placement.go:14 GenJobName
    return {
        f"{_JOBSET}jobset-name": jobset,
        f"{_JOBSET}jobset-uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"jobset/{namespace}/{jobset}")),
        f"{_JOBSET}replicatedjob-name": rjob,
        f"{_JOBSET}restart-attempt": "0",  # status.restarts of a new JobSet
        f"{_JOBSET}replicatedjob-replicas": str(replicas),
        f"{_JOBSET}global-replicas": str(sum(r for _, r, _ in replicated)),
        f"{_JOBSET}job-index": str(job_index),
        # jobHashKey (SHA1, JobSet's own choice) of "<namespace>/<job name>"
        f"{_JOBSET}job-key": hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest(),
        f"{_JOBSET}job-global-index": str(sum(r for _, r, _ in replicated[:index]) + job_index),
        f"{_JOBSET}group-name": group,
        f"{_JOBSET}group-replicas": str(sum(r for _, r, g in replicated if g == group)),
        f"{_JOBSET}job-group-index": str(sum(r for _, r, g in replicated[:index] if g == group) + job_index),
    }


_NODE = "node"
"""The replicated job and main container the Torch plugin configures (trainer@v2.3.0 pkg/constants/constants.go:68-69
`Node`). The simulator's own reading of upstream, not the TrainJob kind's (tests/simulate/test_pods.py compares
the two)."""
_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""trainer@v2.3.0 pkg/constants/constants.go:41 `LabelTrainJobAncestor`, read from a replicated job's
`template.metadata.labels` (pkg/runtime/core/trainingruntime.go:191-197)."""


def _trainjob(item: ClusterObject, objects: list[ClusterObject]) -> list[ExpandedPod]:
    """TrainJob → JobSet → Job → Pod, for a runtime of the rendered cluster (`runtimeRef` kind
    ClusterTrainingRuntime by default, trainer@v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go:172-177, or
    TrainingRuntime in the TrainJob's namespace): one ExpandedPod per replicated job (its first pod: job index 0,
    completion index 0) counting all its pods. Each step cites what it reproduces. Not modelled: runtimePatches,
    podGroupPolicy (coscheduling/Volcano pod labels), torchtune, the MPI/JAX/XGBoost/Flux plugins, initializer
    env, exclusive placement."""
    namespace = item.namespace or "default"
    spec = item.obj.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    ref_kind = ref.get("kind") or "ClusterTrainingRuntime"
    runtime = next((o for o in objects if o.kind == ref_kind and o.name == ref.get("name")
                    and (ref_kind == "ClusterTrainingRuntime" or (o.namespace or "default") == namespace)), None)
    if runtime is None:
        return []
    trainer = spec.get("trainer")  # None (no `trainer` block): no TrainJob env, image or PET_* is applied
    runtime_spec = runtime.obj.get("spec") or {}
    ml_policy = runtime_spec.get("mlPolicy")
    torch_policy = (ml_policy or {}).get("torch")
    jobset_spec = _get(runtime_spec, ("template", "spec")) or {}
    jobs = [job for job in jobset_spec.get("replicatedJobs") or [] if isinstance(job, Mapping)]
    templates = {str(job.get("name")): _get(job, ("template", "spec", "template")) for job in jobs}

    ancestors = [(_get(job, ("template", "metadata", "labels")) or {}).get(_ANCESTOR_LABEL) for job in jobs]
    # Jobs per replicated job: one for the trainer and initializer ancestors (plugins/jobset/builder.go:52,78,123
    # `Initializer`/`Trainer`; the runtime webhook refuses another value, pkg/webhooks/trainingruntime_webhook.go
    # :78-81), else its `replicas` (JobSet CRD default 1, jobset_types.go:334). groupName defaults to "default"
    # (jobset_types.go:325-327).
    replicated = [(str(job.get("name")), 1 if ancestor in _ONE_JOB_ANCESTORS else _int(job.get("replicas"), 1),
                   str(job.get("groupName") or "default")) for job, ancestor in zip(jobs, ancestors, strict=True)]
    # Pods per Job: pkg/runtime/core/trainingruntime.go:186-198 `newRuntimeInfo` takes the Job's parallelism
    # (default 1) or, for the trainer ancestor of a runtime with an mlPolicy, mlPolicy.numNodes (default 1); the
    # Torch (torch.go:116-119) or PlainML EnforceMLPolicy then the TrainJob's numNodes; runtime.go:147 `WithPodSet`
    # keeps it >= 1; plugins/jobset/jobset.go:302-323 `SyncParallelCount` writes it to BOTH parallelism and
    # completions (#3651) of an Indexed Job (JobSet pkg/webhooks/jobset_webhook.go:120-123).
    counts = []
    for job, ancestor in zip(jobs, ancestors, strict=True):
        count = _int(_get(job, ("template", "spec", "parallelism")), 1)
        if ancestor == "trainer" and ml_policy is not None:
            count = _int(ml_policy.get("numNodes"), 1)
        if ancestor == "trainer" and trainer is not None and trainer.get("numNodes") is not None:
            count = _int(trainer["numNodes"], 1)
        counts.append(max(count, 1))
    trainer_at = ancestors.index("trainer") if "trainer" in ancestors else None
    num_nodes = counts[trainer_at] if trainer_at is not None else 1  # torch.go:148 PET_NNODES

    pod_specs: list[dict[str, Any]] = []
    built: list[dict[str, Any]] = []
    for job, ancestor in zip(jobs, ancestors, strict=True):
        template = copy.deepcopy(dict(templates.get(str(job.get("name"))) or {}))
        pod_spec = template.setdefault("spec", {})
        for container in pod_spec.get("containers") or []:
            if ancestor != "trainer" or container.get("name") != _NODE or trainer is None:
                continue
            # trainingruntime.go:199-238: resourcesPerNode merged in (trainer ancestor, runtime with an mlPolicy).
            if ml_policy is not None and trainer.get("resourcesPerNode") is not None:
                container["resources"] = _merge_resources(container.get("resources") or {},
                                                          trainer["resourcesPerNode"])
            # plugins/jobset/builder.go:125-139 `Trainer`: image, command, args replace the runtime's when set.
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    container[key] = copy.deepcopy(trainer[key])
            # builder.go:142-153 and torch.go:139-143: the TrainJob's env, upserted by name.
            _upsert_env(container, list(trainer.get("env") or []))
        built.append(template)
        pod_specs.append(pod_spec)

    if torch_policy is not None:
        # torch.go:127 runtime.ExtractResourcePerNodeFromRuntime (runtime.go:253-277): the (merged) resources of
        # container `node` of the first replicated job named `node` or of trainer ancestry.
        runtime_resources: Mapping[str, Any] = {}
        for job, ancestor, pod_spec in zip(jobs, ancestors, pod_specs, strict=True):
            node = next((c for c in pod_spec.get("containers") or [] if c.get("name") == _NODE
                         and c.get("resources") is not None), None)
            if (job.get("name") == _NODE or ancestor == "trainer") and node is not None:
                runtime_resources = node["resources"]
                break
        # torch.go:145-166: the PET_* env (constants.go:190-203); the master is pod 0 of Job 0 of replicated job
        # `node`, under subdomain = the TrainJob's name, whatever the runtime's network.subdomain.
        pet = [{"name": "PET_NNODES", "value": str(num_nodes)},
               {"name": "PET_NPROC_PER_NODE", "value": _nproc_per_node(trainer or {}, runtime_resources)},
               {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                   "fieldPath": f"metadata.annotations['{_JOB_COMPLETION_INDEX}']"}}}]
        master = [{"name": "PET_MASTER_ADDR", "value": f"{item.name}-{_NODE}-0-0.{item.name}"},
                  {"name": "PET_MASTER_PORT", "value": str(TORCH_MASTER_PORT)}]
        if trainer_at is not None and trainer is not None:  # torch.go:139-143: only with a `trainer` block
            node = next((c for c in pod_specs[trainer_at].get("containers") or [] if c.get("name") == _NODE), None)
            if node is not None:
                # torch.go:168-204: PET_* and master env upserted after the TrainJob's env, and the master port
                # upserted into the ports (apply.go:65-67 `byContainerPortOrName`: same port, or same name,
                # two unnamed ports count as the same).
                _upsert_env(node, pet + master)
                ports = [dict(p) for p in node.get("ports") or []]
                _upsert(ports, {"containerPort": TORCH_MASTER_PORT},
                        lambda p: _int(p.get("containerPort"), -1) == TORCH_MASTER_PORT or p.get("name") is None)
                node["ports"] = ports
        # torch.go:206-222: the same env (master included) into each `envInjection` target container.
        for target in (torch_policy.get("envInjection") or {}).get("targets") or []:
            for name, pod_spec in zip((str(job.get("name")) for job in jobs), pod_specs, strict=True):
                if name != target.get("jobName"):
                    continue
                for container in [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]:
                    if container.get("name") in (target.get("containerNames") or []):
                        _upsert_env(container, pet + master)

    network = jobset_spec.get("network") or {}
    # JobSet v0.12.0: DNS hostnames on unless set false (pkg/webhooks/jobset_webhook.go:130-136); then
    # pkg/controllers/jobset_controller.go:952-956 `constructJob` SETS every pod's subdomain to `GetSubdomain`
    # (:1090-1099): network.subdomain, else the JobSet's name, which is the TrainJob's (trainer
    # plugins/jobset/jobset.go:413 `Build`).
    subdomain = network.get("subdomain") or item.name
    pods: list[ExpandedPod] = []
    for index, (template, pod_spec) in enumerate(zip(built, pod_specs, strict=True)):
        rjob, replicas, _ = replicated[index]
        metadata = template.setdefault("metadata", {})
        jobset_labels = _jobset_labels(item.name, namespace, replicated, index, 0)
        metadata.setdefault("labels", {}).update(jobset_labels)
        # The Job controller, Indexed (kubernetes pkg/controller/job/job_controller.go `manageJob`): annotation
        # job-completion-index, hostname `<job name>-<index>` = `<jobset>-<rjob>-<job index>-<completion index>`.
        metadata.setdefault("annotations", {}).update({**jobset_labels, _JOB_COMPLETION_INDEX: "0"})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"  # jobset_webhook.go:124-127
        pod_spec["hostname"] = f"{item.name}-{rjob}-0-0"
        if network.get("enableDNSHostnames") is not False:
            pod_spec["subdomain"] = subdomain
        # The pod's real name is `<job name>-<index>-<random>`; the stand-in is its hostname.
        pods.append(ExpandedPod(owner=f"TrainJob {namespace}/{item.name} {rjob}", source=item.source,
                                namespace=namespace, pod=pod_from_template(template, namespace, pod_spec["hostname"]),
                                count=replicas * counts[index]))
    return pods


def _builtin(item: ClusterObject, scalers: Mapping[tuple[str, str, str], int]) -> list[ExpandedPod]:
    namespace = item.namespace or "default"
    template = _get(item.obj, _TEMPLATE_PATHS[item.kind])
    if not isinstance(template, Mapping):
        return []
    spec = item.obj.get("spec") or {}
    if item.kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        count = max(_int(spec.get("replicas"), 1), scalers.get((item.kind, namespace, item.name), 0))
    elif item.kind == "Job":
        count = _job_pods(spec)
    elif item.kind == "CronJob":
        count = _job_pods(_get(item.obj, ("spec", "jobTemplate", "spec")) or {})
    else:
        count = 1
    name = object_name(item)
    return [ExpandedPod(owner=f"{item.kind} {namespace}/{name}", source=item.source, namespace=namespace,
                        pod=pod_from_template(template, namespace, name), count=count,
                        daemon=item.kind == "DaemonSet")]


def expand_pods(objects: list[ClusterObject], plan: Plan | None = None) -> list[ExpandedPod]:
    """Every pod of every workload object, in object order, with the controllers' injections."""
    scalers = _scalers(objects)
    pods: list[ExpandedPod] = []
    for item in objects:
        first = len(pods)
        _expand(item, objects, scalers, pods)
        if QUEUE_LABEL in ((item.obj.get("metadata") or {}).get("labels") or {}):
            job = f"{item.kind} {item.namespace or 'default'}/{item.name}"
            pods[first:] = [dataclasses.replace(pod, queued_job=job) for pod in pods[first:]]
    return pods


def _expand(item: ClusterObject, objects: list[ClusterObject], scalers: Mapping[tuple[str, str, str], int],
            pods: list[ExpandedPod]) -> None:
    """Append the pods `item` makes (none for an object that makes no pods)."""
    if item.kind == "Pod" and str(item.obj.get("apiVersion", "v1")) == "v1":
        namespace = item.namespace or "default"
        pod = copy.deepcopy(item.obj)
        pod.setdefault("metadata", {})["namespace"] = namespace
        pods.append(ExpandedPod(owner=f"Pod {namespace}/{object_name(item)}", source=item.source,
                                namespace=namespace, pod=pod))
    elif item.kind in _TEMPLATE_PATHS:
        pods.extend(_builtin(item, scalers))
    elif item.kind == "PyTorchJob":
        pods.extend(_pytorchjob(item, objects, scalers))
    elif item.kind == "ElasticJob":
        pods.extend(_elasticjob(item, objects))
    elif item.kind == "ScaledJob":
        pods.extend(_scaledjob(item))
    elif item.kind == "TrainJob":
        pods.extend(_trainjob(item, objects))
    elif item.kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        return  # a template only: its pods are expanded from the TrainJobs that reference it
    else:
        kind = workload_kinds.kind_of_resource(item.obj)
        if kind is None:
            return
        namespace = item.namespace or "default"
        for role, template in sorted(kind.pod_templates(item.obj).items()):
            if isinstance(template, Mapping):
                pods.append(ExpandedPod(owner=f"{item.kind} {namespace}/{item.name} {role}",
                                        source=item.source, namespace=namespace,
                                        pod=pod_from_template(template, namespace)))
