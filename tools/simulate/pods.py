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
from collections.abc import Mapping
from typing import Any

import workload_kinds
from tools.cluster import ClusterObject
from tools.plan_record import Plan
from tools.simulate.model import ExpandedPod

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
    from tools.simulate.admission import quantity as parse

    cores = round(float(parse(quantity if quantity is not None else 0)), 1)
    return str(int(cores)) if cores == int(cores) else str(cores)


def _dlrover_memory(quantity: Any) -> str:
    """kubernetes.py convert_memory_to_mb (int(bytes / 1024 / 1024)), written back as `<n>Mi`."""
    from tools.simulate.admission import quantity as parse

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
    master_image = _flag(_deployment_args(objects, "elasticjob-controller"), "master-image") \
        or DLROVER_MASTER_IMAGE_DEFAULT
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
"""trainer@v2.3.0 pkg/constants/constants.go `ContainerTrainerPort`: PET_MASTER_PORT of the Torch plugin."""


def _merge_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """trainer@v2.3.0 pkg/util/trainingruntime/trainingruntime.go (strategic merge of the TrainJob's
    `resourcesPerNode` onto the `node` container, #3602): per key, the TrainJob's value wins, the runtime's other
    keys stay. (Up to v2.2.1 the whole block was replaced: pkg/runtime/core/trainingruntime.go:182.)"""
    merged: dict[str, Any] = {}
    for part in ("requests", "limits"):
        values = {**dict(base.get(part) or {}), **dict(override.get(part) or {})}
        if values:
            merged[part] = values
    return merged


def _trainjob(item: ClusterObject, objects: list[ClusterObject]) -> list[ExpandedPod]:
    """TrainJob → JobSet → Job → Pod, for a runtime of the rendered cluster (`runtimeRef` kind
    ClusterTrainingRuntime by default, trainjob_types.go:170-177, or TrainingRuntime in the TrainJob's
    namespace). What each step adds is cited inline."""
    from workload_kinds.trainjob import ANCESTOR_LABEL, NODE, runtime_templates  # noqa: PLC0415 (cycle-free)

    namespace = item.namespace or "default"
    spec = item.obj.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    ref_kind = ref.get("kind") or "ClusterTrainingRuntime"
    runtime = next((o for o in objects if o.kind == ref_kind and o.name == ref.get("name")
                    and (ref_kind == "ClusterTrainingRuntime" or (o.namespace or "default") == namespace)), None)
    if runtime is None:
        return []
    trainer = spec.get("trainer") or {}
    runtime_spec = runtime.obj.get("spec") or {}
    ml_policy = runtime_spec.get("mlPolicy") or {}
    # trainjob_types.go:278 numNodes: the TrainJob's overrides the runtime's mlPolicy.numNodes (default 1).
    num_nodes = _int(trainer.get("numNodes"), _int(ml_policy.get("numNodes"), 1))
    jobs = _get(runtime_spec, ("template", "spec", "replicatedJobs")) or []
    templates = runtime_templates(runtime.obj)
    pods: list[ExpandedPod] = []
    for job in jobs:
        rjob = str(job.get("name"))
        template = copy.deepcopy(dict(templates.get(rjob) or {}))
        job_labels = _get(job, ("template", "metadata", "labels")) or {}
        is_trainer = job_labels.get(ANCESTOR_LABEL) == "trainer"
        replicas = _int(job.get("replicas"), 1)
        # pkg/runtime/framework/plugins/jobset/jobset.go Build: the trainer ancestor's Job runs numNodes pods
        # (parallelism = completions = numNodes), an Indexed Job (JobSet sets completionMode Indexed).
        per_job = num_nodes if is_trainer else _job_pods(_get(job, ("template", "spec")) or {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        # JobSet v0.12.0 pkg/controllers/jobset_controller.go labelAndAnnotateObject: these labels on every pod.
        labels.update({"jobset.sigs.k8s.io/jobset-name": item.name, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                       "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                       "jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/restart-attempt": "0"})
        # JobSet default network (enableDNSHostnames): pods get subdomain = the JobSet's name (a headless
        # Service of that name), hostname <jobset>-<rjob>-<job index>-<completion index> (Indexed Job).
        pod_spec = template.setdefault("spec", {})
        pod_spec.setdefault("subdomain", item.name)
        if is_trainer:
            for container in pod_spec.get("containers") or []:
                if container.get("name") != NODE:
                    continue
                # pkg/runtime/core/trainingruntime.go newRuntimeInfo + pkg/util/trainingruntime: resourcesPerNode
                # merged onto container `node`; trainer.image/command/args replace the runtime's when set.
                container["resources"] = _merge_resources(container.get("resources") or {},
                                                          trainer.get("resourcesPerNode") or {})
                for key in ("image", "command", "args"):
                    if trainer.get(key):
                        container[key] = copy.deepcopy(trainer[key])
                # pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy: the PET_* env (constants.go
                # 190-203); numProcPerNode defaults to `auto` (torch.go:121-135), torchrun resolves it.
                env = [e for e in (container.get("env") or []) if not str(e.get("name", "")).startswith("PET_")]
                env += [{"name": "PET_NNODES", "value": str(num_nodes)},
                        {"name": "PET_NPROC_PER_NODE", "value": str(trainer.get("numProcPerNode", "auto"))},
                        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                        {"name": "PET_MASTER_ADDR", "value": f"{item.name}-{NODE}-0-0.{item.name}"},
                        {"name": "PET_MASTER_PORT", "value": str(TORCH_MASTER_PORT)}]
                env += [dict(e) for e in trainer.get("env") or []]
                container["env"] = env
        pods.append(ExpandedPod(owner=f"TrainJob {namespace}/{item.name} {rjob}", source=item.source,
                                namespace=namespace, pod=pod_from_template(template, namespace,
                                                                           f"{item.name}-{rjob}-0-0"),
                                count=replicas * per_job))
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
        if item.kind == "Pod" and str(item.obj.get("apiVersion", "v1")) == "v1":
            namespace = item.namespace or "default"
            pod = copy.deepcopy(item.obj)
            pod.setdefault("metadata", {})["namespace"] = namespace
            pods.append(ExpandedPod(owner=f"Pod {namespace}/{object_name(item)}", source=item.source,
                                    namespace=namespace, pod=pod))
        elif item.kind in _TEMPLATE_PATHS:
            pods += _builtin(item, scalers)
        elif item.kind == "PyTorchJob":
            pods += _pytorchjob(item, objects, scalers)
        elif item.kind == "ElasticJob":
            pods += _elasticjob(item, objects)
        elif item.kind == "ScaledJob":
            pods += _scaledjob(item)
        elif item.kind == "TrainJob":
            pods += _trainjob(item, objects)
        elif item.kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
            continue  # a template only: its pods are expanded from the TrainJobs that reference it
        else:
            kind = workload_kinds.kind_of_resource(item.obj)
            if kind is None:
                continue
            namespace = item.namespace or "default"
            for role, template in sorted(kind.pod_templates(item.obj).items()):
                if isinstance(template, Mapping):
                    pods.append(ExpandedPod(owner=f"{item.kind} {namespace}/{item.name} {role}",
                                            source=item.source, namespace=namespace,
                                            pod=pod_from_template(template, namespace)))
    return pods
