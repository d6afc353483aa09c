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
  the node groups can provide at their largest (stack_config/derived.py `group_quota`), and a LocalQueue in the training namespace.
  Every training workload carries `kueue.x-k8s.io/queue-name` (`QUEUE_LABEL`) naming that LocalQueue.
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

INTEGRATIONS: dict[str, str] = {
    "PyTorchJob": "kubeflow.org/pytorchjob",
    "ScaledJob": "batch/job",
    "TrainJob": "trainer.kubeflow.org/trainjob",
}
"""Workload kind (`KubernetesWorkloadKind.resource_kind`) → the Kueue integration that admits it. KEDA's
ScaledJob creates plain batch Jobs (it copies the ScaledJob's labels onto them), so `batch/job`. DLRover's
ElasticJob has none: Kueue v0.19.2 lists no `elastic.iml.github.io` framework (pkg/controller/jobs)."""


def cluster_queue_name(stack: str) -> str:
    return f"gtp-{stack}"


def flavor_name(group: str) -> str:
    return f"gtp-{group}"


def integrations_for(resource_kinds: Iterable[str]) -> list[str]:
    """The Kueue integrations for the stack's workload kinds, sorted; a kind Kueue can't admit is an error."""
    found = set()
    for kind in resource_kinds:
        if kind not in INTEGRATIONS:
            raise ValueError(f"workload kind {kind!r} has no Kueue integration; supported: "
                             f"{', '.join(sorted(INTEGRATIONS))} (turn Kueue off with kueue.enabled: false)")
        found.add(INTEGRATIONS[kind])
    return sorted(found)


def quantity(resource: str, value: float) -> str:
    """A Kubernetes quantity: cpu in millicores, memory in Mi, counts as integers."""
    if resource == "cpu":
        return f"{round(value * 1000)}m"
    if resource in ("memory", "ephemeral-storage"):
        return f"{int(value // 2**20)}Mi"
    return str(int(value))


def cluster_queue_spec(quotas: Mapping[str, Mapping[str, float]], namespaces: list[str]) -> dict[str, Any]:
    """One resource group over every GPU node group's flavor: Kueue requires every flavor of a group to list the
    group's covered resources in order (apis/kueue/v1beta2 ClusterQueue validation), so a resource a node group
    lacks gets quota 0 in its flavor."""
    """`quotas`: GPU node group → what it provides (stack_config.derived `group_quota`)."""
    order = ["cpu", "memory", "ephemeral-storage", WHOLE_GPU_RESOURCE, SHARED_GPU_RESOURCE, EFA_RESOURCE]
    covered = [name for name in order if any(name in quota for quota in quotas.values())]
    return {
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
                # `Always` asks the registry at every container start; an offline site (and any registry
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
    """Kueue integrations to enable (`integrations_for`)."""
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
                depends_on=[args.platform_priority] if args.platform_priority else [])))
        after = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.manager])
        flavors = []
        for group in sorted(args.quotas):
            spec: dict[str, Any] = {"nodeLabels": dict(args.node_selectors[group])}
            if args.taints.get(group):
                spec["nodeTaints"] = list(args.taints[group])
            flavors.append(k8s.apiextensions.CustomResource(
                f"{name}-flavor-{group}", api_version=API_VERSION, kind="ResourceFlavor",
                metadata={"name": flavor_name(group)}, spec=spec, opts=after))
        queue = k8s.apiextensions.CustomResource(
            f"{name}-cluster-queue", api_version=API_VERSION, kind="ClusterQueue",
            metadata={"name": cluster_queue_name(args.stack)}, spec=cluster_queue_spec(args.quotas, args.namespaces),
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=flavors)))
        self.local_queues = [k8s.apiextensions.CustomResource(
            f"{name}-local-queue-{namespace}", api_version=API_VERSION, kind="LocalQueue",
            metadata={"name": LOCAL_QUEUE, "namespace": namespace},
            spec={"clusterQueue": cluster_queue_name(args.stack)},
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=[queue, *args.depends_on])))
            for namespace in args.namespaces]
        self.register_outputs({})
