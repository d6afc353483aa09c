"""`admission webhooks`: what each fail-closed webhook intercepts, and whether its server is there first.

For every webhook of a Mutating/ValidatingWebhookConfiguration in cluster.yaml whose `failurePolicy` is `Fail`
(admissionregistration.k8s.io/v1's default), the API server refuses a matching request while no endpoint of its
Service answers ("no endpoints available for service"). A request matches (the API server's webhook matching:
rules, namespaceSelector, objectSelector) when a rule lists the object's API group and resource with the CREATE
operation, the namespaceSelector selects the object's Namespace labels (its own `kubernetes.io/metadata.name` plus
the labels cluster.yaml gives it), and the objectSelector selects the object's labels.

Intercepted objects are the objects of cluster.yaml, the Pods their controllers create (verify/simulate/pods.py)
and the Jobs KEDA creates from a ScaledJob (it copies the ScaledJob's labels onto them). Two findings:
- ordering: the Pulumi resource that creates an intercepted object (the object itself, its Helm release or its
  operator manifest; for a controller's pod, the resource of the owning object) must depend on the resource
  that creates the webhook's serving Deployment, else the first `up` races the webhook's start;
- availability: a webhook on Pods or on workload kinds (batch Jobs, apps Deployments/StatefulSets/DaemonSets/
  ReplicaSets) without an objectSelector and without a namespaceSelector that lists its namespaces (`In`) is
  cluster-wide: backed by one replica, any restart of its server blocks pod creation everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verify.plan_record import Plan, Resource
from verify.render import CLUSTER_SCOPED, ClusterObject
from verify.simulate.disruption import selects
from verify.simulate.model import CheckResult, ExpandedPod, Finding

NAME = "admission webhooks"
WORKLOAD_RESOURCES = {("", "pods"), ("batch", "jobs"), ("apps", "deployments"), ("apps", "statefulsets"),
                      ("apps", "daemonsets"), ("apps", "replicasets")}
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class Request:
    """An object whose creation passes admission: what it is and which Pulumi resource causes it."""

    group: str
    resource: str
    namespace: str | None
    labels: Mapping[str, str]
    subject: str
    source: str
    owner: tuple[str, str | None, str]
    """(kind, namespace, name) of the object Pulumi creates (the object itself, or its controller's owner)."""


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def _plural(kind: str) -> str:
    lower = kind.lower()
    return lower + ("es" if lower.endswith("s") else "s")


def requests(objects: Iterable[ClusterObject], pods: Iterable[ExpandedPod]) -> list[Request]:
    found = []
    for item in objects:
        meta = item.obj.get("metadata") or {}
        found.append(Request(_group(str(item.obj.get("apiVersion") or "")), _plural(item.kind),
                             None if item.kind in CLUSTER_SCOPED else item.namespace, dict(meta.get("labels") or {}),
                             item.describe(), item.source, (item.kind, item.namespace, item.name)))
        if item.kind == "ScaledJob":
            # KEDA creates one batch Job per scale step, with the ScaledJob's labels (the Kueue queue label).
            found.append(Request("batch", "jobs", item.namespace, dict(meta.get("labels") or {}),
                                 f"Job of ScaledJob {item.namespace}/{item.name}", item.source,
                                 (item.kind, item.namespace, item.name)))
    for pod in pods:
        kind, _, rest = pod.owner.partition(" ")
        namespace, _, name = rest.split(" ")[0].partition("/")
        found.append(Request("", "pods", pod.namespace, dict((pod.pod.get("metadata") or {}).get("labels") or {}),
                             f"Pod of {pod.owner}", pod.source, (kind, namespace or None, name)))
    return found


def _rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    operations = rule.get("operations") or []
    groups = rule.get("apiGroups") or []
    resources = [str(r).split("/")[0] for r in rule.get("resources") or [] if "/" not in str(r) or r == "*/*"]
    return (("CREATE" in operations or "*" in operations) and (request.group in groups or "*" in groups)
            and (request.resource in resources or "*" in resources))


def intercepts(webhook: Mapping[str, Any], request: Request, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    if not any(_rule_matches(rule, request) for rule in webhook.get("rules") or []):
        return False
    object_selector = webhook.get("objectSelector")
    if object_selector is not None and not selects(object_selector, request.labels):
        return False
    namespace_selector = webhook.get("namespaceSelector")
    if request.namespace is not None and namespace_selector is not None:
        labels = {"kubernetes.io/metadata.name": request.namespace, **namespace_labels.get(request.namespace, {})}
        if not selects(namespace_selector, labels):
            return False
    return True


def cluster_wide(webhook: Mapping[str, Any]) -> bool:
    """On pods or workload kinds, in namespaces not listed by name, for any labels."""
    resources = {(group, str(resource).split("/")[0]) for rule in webhook.get("rules") or []
                 for group in rule.get("apiGroups") or [] for resource in rule.get("resources") or []}
    if not resources & WORKLOAD_RESOURCES or webhook.get("objectSelector"):
        return False
    selector = webhook.get("namespaceSelector") or {}
    listed = any(e.get("operator") == "In" and e.get("key") == "kubernetes.io/metadata.name"
                 for e in selector.get("matchExpressions") or [])
    return not listed and not selector.get("matchLabels")


def _server(webhook: Mapping[str, Any], objects: list[ClusterObject]) -> ClusterObject | None:
    service_ref = (webhook.get("clientConfig") or {}).get("service") or {}
    service = next((o for o in objects if o.kind == "Service" and o.name == service_ref.get("name")
                    and o.namespace == service_ref.get("namespace")), None)
    if service is None:
        return None
    selector = (service.obj.get("spec") or {}).get("selector") or {}
    for item in objects:
        if item.kind == "Deployment" and item.namespace == service.namespace and selector:
            labels = ((((item.obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels")
                      or {})
            if all(labels.get(k) == v for k, v in selector.items()):
                return item
    return None


def creator(plan: Plan, source: str, kind: str, namespace: str | None, name: str) -> Resource | None:
    """The Pulumi resource that creates an object of cluster.yaml (`source` as verify/render.py writes it)."""
    if source.startswith("chart "):
        release = source.rsplit(" release ", 1)[-1]
        release_namespace, _, release_name = release.partition("/")
        return next((r for r in plan.by_type("kubernetes:helm.sh/v3:Release")
                     if r.inputs.get("name") == release_name and r.inputs.get("namespace") == release_namespace), None)
    if source.startswith("operator "):
        path = source.removeprefix("operator ")
        return next((r for r in plan.by_type("kubernetes:yaml/v2:ConfigFile") if r.inputs.get("file") == path), None)
    for resource in plan.resources:
        metadata = resource.inputs.get("metadata") or {}
        if not isinstance(metadata, dict) or str(metadata.get("name")) != name:
            continue
        if (resource.inputs.get("kind") == kind or resource.type.endswith(f":{kind}")) and (
                namespace is None or metadata.get("namespace") in (namespace, None)):
            return resource
    return None


def check(plan: Plan, objects: list[ClusterObject], pods: list[ExpandedPod]) -> list[CheckResult]:
    configs = [item for item in objects if item.kind in CONFIG_KINDS]
    if not configs:
        return []
    result = CheckResult(NAME)
    namespace_labels = {item.name: dict((item.obj.get("metadata") or {}).get("labels") or {})
                        for item in objects if item.kind == "Namespace"}
    pending = requests(objects, pods)
    for config in configs:
        for webhook in config.obj.get("webhooks") or []:
            if webhook.get("failurePolicy", "Fail") != "Fail":
                continue
            name = f"{config.kind} {config.name} webhook {webhook.get('name')}"
            server = _server(webhook, objects)
            if server is None:
                result.record(False, Finding(name, "fails closed and no Deployment in cluster.yaml serves its Service",
                                             "install the webhook's server with it, or drop the webhook"))
                continue
            replicas = int((server.obj.get("spec") or {}).get("replicas", 1))
            if cluster_wide(webhook):
                ok = replicas >= 2
                result.record(ok, None if ok else Finding(
                    name, f"fails closed on every Pod/workload create in all namespaces it doesn't exclude, and "
                          f"{server.describe()} runs {replicas} replica: any restart of it blocks pod creation "
                          "cluster-wide (new nodes' DaemonSet pods included)",
                    "scope the webhook (namespaceSelector listing the namespaces, objectSelector), drop it if its "
                    "integration is off, and run its server with 2 replicas and a PodDisruptionBudget"))
            server_resource = creator(plan, server.source, server.kind, server.namespace, server.name)
            for request in pending:
                if request.source == server.source or not intercepts(webhook, request, namespace_labels):
                    continue
                resource = creator(plan, request.source, *request.owner)
                if resource is None or server_resource is None:
                    continue
                ok = resource.urn == server_resource.urn or plan.depends_transitively(resource, server_resource)
                result.record(ok, None if ok else Finding(
                    f"{request.subject} (created by {resource.type.split(':')[-1]} {resource.name})",
                    f"{name} (failurePolicy Fail) intercepts its creation, served by {server.describe()}, but "
                    f"{resource.name} does not wait for {server_resource.name}: the first `up` can be refused "
                    "with 'no endpoints available'",
                    f"make {resource.name} depend on {server_resource.name}, or scope the webhook so it doesn't "
                    "intercept this object"))
    return [result]
