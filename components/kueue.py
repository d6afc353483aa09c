"""Kueue v0.19.2: gang admission of the training workloads, with quotas derived from the node groups.

What the stack deploys:
- Kueue itself from its vendored render (`vendor/operators/kueue-v0.19.2.yaml`), through a per-stack derived copy
  (`kueue_manifest`) that changes four documents and adds one: the `kueue-manager-config` ConfigMap (exactly the
  integrations the stack's workload kinds use, and `waitForPodsReady`), the Deployment (pull policy `IfNotPresent`,
  a `gtp.dev/kueue-config-sha256` pod annotation, the platform's priority class, two replicas spread over nodes),
  the two webhook configurations (only Kueue's own webhooks and the enabled integrations', scoped to the queued
  namespaces and labelled objects: `scope_webhooks`), plus the manager's PodDisruptionBudget. Why a derived copy
  and not a Pulumi-owned ConfigMap patched after the fact: Kueue reads its configuration only at start
  (cmd/kueue/main.go `apply` loads `--config` once), so a patch applied after the Deployment would leave the
  running manager on the upstream defaults until something restarts it; in the derived copy the config's hash is
  in the pod template, so every config change rolls the manager. The integrations depend on the stack, which is
  why the copy is per stack (like the offline copies with site images, components/training_operators.py
  `operator_file`), not a single committed file checked by tools/vendor.py like DLRover's.
- a ResourceFlavor per GPU node group (its node labels and taints), one ClusterQueue whose nominal quota is what
  the node groups can provide at their largest (stack_config/derived.py `group_quota`), and a LocalQueue in the
  training namespace. Every training workload carries `kueue.x-k8s.io/queue-name` (`QUEUE_LABEL`) naming that
  LocalQueue.
- where `kueue.atomicProvisioning` chooses flavors (stack_config.derived `provisioning_groups`): an AdmissionCheck of
  the provisioning controller (`PROVISIONING_CONTROLLER`) with a ProvisioningRequestConfig of `ATOMIC_CLASS`, run for
  those flavors only (ClusterQueue `admissionChecksStrategy.onFlavors`); the manager waits for the
  ProvisioningRequest CRD (components/cluster_autoscaler.py installs it with the autoscaler's flag and RBAC).
- where `kueue.topology` applies (stack_config.derived `topology_groups`): the Topology `TOPOLOGY` of the EC2
  network layers and the host, named by those flavors' `topologyName`; the gangs' pod templates carry the PodSet
  topology annotation (`topology_annotations`). Kueue v0.19.2 supports TAS with the provisioning check: it delays
  the topology assignment of a workload on such a flavor until the check is Ready (pkg/scheduler/flavorassigner/
  tas_flavorassigner.go:104-108) and then places it on the provisioned nodes (site/content/en/docs/concepts/
  topology_aware_scheduling.md:124-137). The topology scheduling gate reaches a job's pods through the admitted pod
  set (pkg/podset/podset.go:67-76), not through Kueue's Pod webhook, so `scope_webhooks` dropping that webhook (the
  `pod` integration is off) leaves TAS working.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from catalog import versions
from conventions.names import EFA_RESOURCE, PLATFORM_PRIORITY_CLASS, SHARED_GPU_RESOURCE, WHOLE_GPU_RESOURCE

ROOT = Path(__file__).resolve().parent.parent
API_VERSION = "kueue.x-k8s.io/v1beta2"
"""The storage version of ClusterQueue, LocalQueue and ResourceFlavor in the v0.19.2 CRDs."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label Kueue's job integrations read a job's LocalQueue from (pkg/controller/constants `QueueLabel`)."""
LOCAL_QUEUE = "training"
"""The LocalQueue of every training namespace."""
KUEUE_MANIFEST_DIR = "build/kueue"
"""Where each stack's derived Kueue manifest is written (`<dir>/<stack>/kueue-<version>-<sha256 prefix>.yaml`),
relative to the project root; the program writes it on every run, like the offline operator copies."""
CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
CONFIG_HASH_ANNOTATION = "gtp.dev/kueue-config-sha256"

def cluster_queue_name(stack: str) -> str:
    return f"gtp-{stack}"


def flavor_name(group: str) -> str:
    return f"gtp-{group}"


def quantity(resource: str, value: float) -> str:
    """A Kubernetes quantity: cpu in millicores, memory in Mi, counts as integers."""
    if resource == "cpu":
        return f"{round(value * 1000)}m"
    if resource in ("memory", "ephemeral-storage"):
        return f"{int(value // 2**20)}Mi"
    return str(int(value))


TOPOLOGY = "gtp-eks-network"
"""The stack's one Kueue Topology (components/kueue.py `topology_spec`)."""
ATOMIC_CHECK = "gtp-atomic-capacity"
"""The AdmissionCheck and its ProvisioningRequestConfig (same name)."""
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
"""apis/kueue/v1beta2/provisioningrequestconfig_types.go:29 at v0.19.2 (`ProvisioningRequestControllerName`). The
controller has no feature gate at v0.19.2 (pkg/features/kube_features.go lists none for it); it runs when the API
server serves ProvisioningRequests at the manager's start (cmd/kueue/main.go:513-517)."""
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
"""cluster-autoscaler apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go:203 at cluster-autoscaler-1.34.1
(`ProvisioningClassBestEffortAtomicScaleUp`; FAQ.md:645: from 1.30.2). It scales the node group up only when the
whole request fits it (core/scaleup/orchestrator/orchestrator.go:217, :500 `MaxSize`), books the capacity for 10
minutes and sets Provisioned=True; `check-capacity.autoscaling.x-k8s.io` (types.go:200) would only look at nodes that
already exist, which a `minSize: 0` group has none of."""
TOPOLOGY_LEVEL_ANNOTATIONS = {"required": "kueue.x-k8s.io/podset-required-topology",
                              "preferred": "kueue.x-k8s.io/podset-preferred-topology"}
"""apis/kueue/v1beta2/topology_types.go:28, :39 at v0.19.2; read from a PyTorchJob replica's and a JobSet's (a
TrainJob's) pod template metadata (pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go:122,
pkg/controller/jobs/jobset/jobset_controller.go:124)."""


def topology_spec() -> dict[str, Any]:
    """The EC2 network layers top to bottom, then the host: Kueue requires `kubernetes.io/hostname` last
    (apis/kueue/v1beta2/topology_types.go:117) and at most 16 levels (:114). Topology-aware scheduling is Beta and
    on by default at v0.19.2 (pkg/features/kube_features.go:683-686)."""
    from catalog.node_labels import HOSTNAME, NETWORK_NODE_LAYERS

    return {"levels": [{"nodeLabel": label} for label in (*NETWORK_NODE_LAYERS, HOSTNAME)]}


def topology_annotations(mode: str, layer: int) -> dict[str, str]:
    """The pod-template annotation of a gang asking for one domain of EC2 network layer `layer` (`mode`
    `required` / `preferred`; `none`: nothing)."""
    from catalog.node_labels import NETWORK_NODE_LAYERS

    if mode not in TOPOLOGY_LEVEL_ANNOTATIONS:
        return {}
    return {TOPOLOGY_LEVEL_ANNOTATIONS[mode]: NETWORK_NODE_LAYERS[layer - 1]}


def provisioning_config_spec() -> dict[str, Any]:
    """ProvisioningRequestConfig (apis/kueue/v1beta2/provisioningrequestconfig_types.go:36-96 at v0.19.2): the
    atomic class; retryStrategy left to its default (3 tries, 60s..1800s backoff: :66-78), so a gang whose nodes
    EC2 could not deliver is retried, then deactivated."""
    return {"provisioningClassName": ATOMIC_CLASS}


def admission_check_spec() -> dict[str, Any]:
    """AdmissionCheck (apis/kueue/v1beta2/admissioncheck_types.go:55-61): the provisioning controller with the
    ProvisioningRequestConfig as its parameters."""
    return {"controllerName": PROVISIONING_CONTROLLER,
            "parameters": {"apiGroup": KUEUE_API_GROUP, "kind": "ProvisioningRequestConfig", "name": ATOMIC_CHECK}}


def cluster_queue_spec(quotas: Mapping[str, Mapping[str, float]], namespaces: list[str],
                       provisioning_groups: Iterable[str] = ()) -> dict[str, Any]:
    """One resource group over every GPU node group's flavor: Kueue requires every flavor of a group to list the
    group's covered resources in order (apis/kueue/v1beta2 ClusterQueue validation), so a resource a node group
    lacks gets quota 0 in its flavor."""
    """`quotas`: GPU node group → what it provides (stack_config.derived `group_quota`)."""
    order = ["cpu", "memory", "ephemeral-storage", WHOLE_GPU_RESOURCE, SHARED_GPU_RESOURCE, EFA_RESOURCE]
    covered = [name for name in order if any(name in quota for quota in quotas.values())]
    checked = sorted(flavor_name(group) for group in provisioning_groups)
    # admissionChecksStrategy.onFlavors (apis/kueue/v1beta2/clusterqueue_types.go:128-185): the check runs only for
    # a workload assigned one of these flavors.
    strategy = ({"admissionChecksStrategy": {"admissionChecks": [{"name": ATOMIC_CHECK, "onFlavors": checked}]}}
                if checked else {})
    return {
        **strategy,
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": covered, "flavors": [
            {"name": flavor_name(group), "resources": [
                {"name": name, "nominalQuota": quantity(name, quota.get(name, 0.0))} for name in covered]}
            for group, quota in sorted(quotas.items())]}],
    }


def manager_config(upstream: str, integrations: list[str], timeout: str) -> str:
    """Kueue's Configuration: the upstream one with exactly `integrations` and `waitForPodsReady` (fields of
    apis/config/v1beta2 `WaitForPodsReady`; `blockAdmission` false so a ScaledJob's single-pod Jobs are not
    admitted one node start-up at a time)."""
    document = yaml.safe_load(upstream)
    document["integrations"] = {"frameworks": list(integrations)}
    document["waitForPodsReady"] = {"timeout": timeout, "blockAdmission": False,
                                    "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60,
                                                          "backoffMaxSeconds": 3600}}
    return yaml.safe_dump(document, sort_keys=False)


KUEUE_API_GROUP = "kueue.x-k8s.io"
MANAGER_REPLICAS = 2
"""Kueue's own webhooks fail closed (`failurePolicy: Fail`): with one replica, every queued job's create fails
while the manager restarts. Two serve them (leader election is on, config/components/manager/
controller_manager_config.yaml:10-12 at v0.19.2, and every replica runs the webhook cert rotator,
pkg/util/cert/cert.go:176 `RequireLeaderElection: false`), with a budget of one (the chart's own option,
charts/kueue/values.yaml:78-79 `replicas`, :110-114 `podDisruptionBudget.minAvailable: 1`)."""
PDB_NAME = "kueue-controller-manager"


def integration_resources(integrations: Iterable[str]) -> set[tuple[str, str]]:
    """(API group, plural resource) of each enabled integration (`batch/job` → (`batch`, `jobs`))."""
    found = set()
    for framework in integrations:
        group, _, kind = framework.rpartition("/")
        found.add(("" if group == "core" else group, kind + "s"))
    return found


def scope_webhooks(body: dict[str, Any], integrations: Iterable[str], namespaces: list[str]) -> dict[str, Any]:
    """A webhook configuration with only Kueue's own webhooks and those of the enabled integrations, the latter
    scoped to the queued namespaces and to objects that carry the queue label.

    Kueue v0.19.2 registers every integration's webhook, the disabled ones as no-ops
    (pkg/controller/jobframework/setup.go:107-111 `WithNoopWebhook(true)`), and the render lists them all with
    `failurePolicy: Fail` in every namespace but kube-system and kueue-system: a Kueue outage would then refuse
    every Pod, Deployment, StatefulSet and Job create in the cluster. Dropping a no-op changes nothing Kueue does.
    An unlabelled job is left alone by Kueue: it is suspended only with a queue name or
    `manageJobsWithoutQueueName` (off upstream: controller_manager_config.yaml:35, commented out; pkg/controller/
    jobframework/defaults.go:36-46), and the default-LocalQueue labelling applies only to a LocalQueue named
    `default` (defaults.go:80-96; pkg/controller/constants/constants.go:27), which the platform does not create. On
    UPDATE the API server matches the objectSelector against the old and the new object, so a label removed from
    a queued job is still validated."""
    wanted = integration_resources(integrations)
    kept = []
    for webhook in body.get("webhooks") or []:
        rules = webhook.get("rules") or []
        pairs = {(group, resource) for rule in rules for group in rule.get("apiGroups") or []
                 for resource in rule.get("resources") or []}
        if all(group == KUEUE_API_GROUP for group, _ in pairs):
            kept.append(webhook)
        elif pairs and all((group, resource.split("/")[0]) in wanted for group, resource in pairs):
            kept.append({**webhook,
                         "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                     "operator": "In",
                                                                     "values": sorted(namespaces)}]},
                         "objectSelector": {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}})
    return {**body, "webhooks": kept}


def manager_budget(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The manager's PodDisruptionBudget: one of its replicas may be evicted at a time."""
    meta = deployment["metadata"]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": PDB_NAME, "namespace": meta["namespace"], "labels": dict(meta.get("labels") or {})},
            "spec": {"minAvailable": 1, "selector": dict(deployment["spec"]["selector"])}}


def derive_manifest(text: str, integrations: list[str], timeout: str, site_images: Mapping[str, str] | None = None,
                    priority_class: str | None = None, namespaces: list[str] | None = None) -> str:
    """The vendored render with its ConfigMap, Deployment and webhook configurations rewritten and the manager's
    PodDisruptionBudget appended (the other documents stay byte-exact).

    `priority_class`: the manager's pods get it (the platform's class, components/platform_priority.py).
    `namespaces`: the queued namespaces the integrations' webhooks are scoped to (`scope_webhooks`); None keeps
    upstream's. The manager runs `MANAGER_REPLICAS` replicas, spread over nodes, with a budget of one."""
    from components.training_operators import site_manifest

    if site_images:
        text = site_manifest(text, versions.KUEUE_MANIFEST, site_images)
    documents = text.split("\n---\n")
    done = set()
    for index, doc in enumerate(documents):
        if "kind: ConfigMap" in doc and f"  name: {CONFIG_MAP}\n" in doc + "\n":
            body = yaml.safe_load(doc)
            body["data"][CONFIG_KEY] = manager_config(body["data"][CONFIG_KEY], integrations, timeout)
            config_hash = hashlib.sha256(body["data"][CONFIG_KEY].encode()).hexdigest()
            documents[index] = yaml.safe_dump(body, sort_keys=False).rstrip("\n")
            done.add("config")
    if "config" not in done:
        raise ValueError(f"{versions.KUEUE_MANIFEST}: expected ConfigMap {CONFIG_MAP} and Deployment "
                         "kueue-controller-manager, found no ConfigMap")
    for index, doc in enumerate(documents):
        if "kind: Deployment" in doc and "  name: kueue-controller-manager\n" in doc:
            body = yaml.safe_load(doc)
            pod = body["spec"]["template"]
            pod["metadata"].setdefault("annotations", {})[CONFIG_HASH_ANNOTATION] = config_hash
            for container in pod["spec"]["containers"]:
                # `Always` asks the registry at every container start; an air-gapped site (and any registry
                # outage) then can't restart Kueue. The published chart uses IfNotPresent (SOURCES.md).
                container["imagePullPolicy"] = "IfNotPresent"
            if priority_class:
                pod["spec"]["priorityClassName"] = priority_class
            body["spec"]["replicas"] = MANAGER_REPLICAS
            # Two replicas on one node would fall together.
            pod["spec"].setdefault("affinity", {})["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": dict(body["spec"]["selector"]["matchLabels"])}}}]}
            documents[index] = yaml.safe_dump(body, sort_keys=False).rstrip("\n")
            documents.append(yaml.safe_dump(manager_budget(body), sort_keys=False).rstrip("\n"))
            done.add("deployment")
    if namespaces is not None:
        for index, doc in enumerate(documents):
            if "kind: MutatingWebhookConfiguration" in doc or "kind: ValidatingWebhookConfiguration" in doc:
                body = yaml.safe_load(doc)
                if body and body.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                    documents[index] = yaml.safe_dump(scope_webhooks(body, integrations, namespaces),
                                                      sort_keys=False).rstrip("\n")
    if done != {"config", "deployment"}:
        raise ValueError(f"{versions.KUEUE_MANIFEST}: expected ConfigMap {CONFIG_MAP} and Deployment "
                         f"kueue-controller-manager, found only {sorted(done)}")
    return "\n---\n".join(documents)


DERIVED_FROM = (versions.KUEUE_MANIFEST, versions.TRAINING_OPERATOR_MANIFEST, versions.DLROVER_MANIFEST,
                versions.TRAINER_MANIFEST)
"""The vendored manifests the program applies through derived copies (Kueue's here; the operators' in
components/training_operators.py `operator_file`: site images, the platform priority class)."""


def vendored_manifest(path: str) -> str:
    """The vendored file a ConfigFile's `path` was derived from: a copy is named `<vendored stem>[-site]-<12 hex>.yaml`
    (`training_operators.derived_name`); `path` itself when it is no copy."""
    name = Path(path).name
    for manifest in DERIVED_FROM:
        if re.fullmatch(re.escape(Path(manifest).stem) + r"-(site-)?[0-9a-f]{12}\.yaml", name):
            return manifest
    return path


def kueue_manifest(integrations: list[str], timeout: str, site_images: Mapping[str, str], manifest_dir: str,
                   priority_class: str | None = None, namespaces: list[str] | None = None) -> str:
    """Write the stack's derived copy under `manifest_dir` (named by content) and return its path."""
    from components.training_operators import derived_name

    text = derive_manifest((ROOT / versions.KUEUE_MANIFEST).read_text(), integrations, timeout, site_images,
                           priority_class, namespaces)
    target = f"{manifest_dir}/{derived_name(versions.KUEUE_MANIFEST, text, site=bool(site_images))}"
    path = ROOT / target
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return target


@dataclass
class KueueArgs:
    stack: str
    provider: k8s.Provider
    quotas: dict[str, dict[str, float]]
    """GPU node group → the nominal quota of its flavor (stack_config.derived `group_quota`)."""
    integrations: list[str]
    """Kueue integrations to enable (the stack's kinds' `kueue_integration`: workload_kinds.kueue_integrations_for)."""
    namespaces: list[str]
    """Training namespaces: each gets a LocalQueue `training` on the stack's ClusterQueue."""
    node_selectors: dict[str, dict[str, str]]
    """GPU node group → labels that select its nodes."""
    taints: dict[str, list[dict[str, str]]]
    """GPU node group → its taints (`{key, value, effect}`, Kubernetes effect names)."""
    wait_for_pods_ready_timeout: str = "10m"
    """Kueue `waitForPodsReady.timeout`."""
    site_images: dict[str, str] = field(default_factory=dict)
    manifest_dir: str = KUEUE_MANIFEST_DIR
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The training namespace(s) the LocalQueues live in."""
    platform_priority: pulumi.Resource | None = None
    """The `gtp-platform` PriorityClass (components/platform_priority.py): the manager's pods name it and wait for
    it. None: no class."""
    topology_groups: list[str] = field(default_factory=list)
    """GPU groups whose flavor references the Topology (stack_config.derived `topology_groups`)."""
    provisioning_groups: list[str] = field(default_factory=list)
    """GPU groups whose flavor gets the atomic ProvisioningRequest check (stack_config.derived
    `provisioning_groups`)."""
    provisioning_crd: pulumi.Resource | None = None
    """The ProvisioningRequest CRD; the manager starts after it (required when `provisioning_groups` is set)."""


class Kueue(pulumi.ComponentResource):
    manager: k8s.yaml.v2.ConfigFile
    local_queues: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:workload:Kueue", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.manager = k8s.yaml.v2.ConfigFile(
            f"{name}-kueue", file=kueue_manifest(args.integrations, args.wait_for_pods_ready_timeout,
                                                 args.site_images, args.manifest_dir,
                                                 PLATFORM_PRIORITY_CLASS if args.platform_priority else None,
                                                 args.namespaces),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[*([args.platform_priority] if args.platform_priority else []),
                            *([args.provisioning_crd] if args.provisioning_crd else [])])))
        after = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.manager])
        before_queue: list[pulumi.Resource] = []
        if args.topology_groups:
            before_queue.append(k8s.apiextensions.CustomResource(
                f"{name}-topology", api_version=API_VERSION, kind="Topology", metadata={"name": TOPOLOGY},
                spec=topology_spec(), opts=after))
        flavors = []
        for group in sorted(args.quotas):
            spec: dict[str, Any] = {"nodeLabels": dict(args.node_selectors[group])}
            if args.taints.get(group):
                spec["nodeTaints"] = list(args.taints[group])
            if group in args.topology_groups:
                # resourceflavor_types.go:48: a topology flavor needs at least one nodeLabel (it has the group's).
                spec["topologyName"] = TOPOLOGY
            flavors.append(k8s.apiextensions.CustomResource(
                f"{name}-flavor-{group}", api_version=API_VERSION, kind="ResourceFlavor",
                metadata={"name": flavor_name(group)}, spec=spec,
                opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=list(before_queue)))))
        if args.provisioning_groups:
            config = k8s.apiextensions.CustomResource(
                f"{name}-provisioning-config", api_version=API_VERSION, kind="ProvisioningRequestConfig",
                metadata={"name": ATOMIC_CHECK}, spec=provisioning_config_spec(), opts=after)
            before_queue.append(k8s.apiextensions.CustomResource(
                f"{name}-atomic-check", api_version=API_VERSION, kind="AdmissionCheck",
                metadata={"name": ATOMIC_CHECK}, spec=admission_check_spec(),
                opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=[config]))))
        queue = k8s.apiextensions.CustomResource(
            f"{name}-cluster-queue", api_version=API_VERSION, kind="ClusterQueue",
            metadata={"name": cluster_queue_name(args.stack)},
            spec=cluster_queue_spec(args.quotas, args.namespaces, args.provisioning_groups),
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=[*flavors, *before_queue])))
        self.local_queues = [k8s.apiextensions.CustomResource(
            f"{name}-local-queue-{namespace}", api_version=API_VERSION, kind="LocalQueue",
            metadata={"name": LOCAL_QUEUE, "namespace": namespace},
            spec={"clusterQueue": cluster_queue_name(args.stack)},
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=[queue, *args.depends_on])))
            for namespace in args.namespaces]
        self.register_outputs({})
