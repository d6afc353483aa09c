"""Planted defects, each failing the real run (`make cluster-test`; marker `cluster`): dev's cluster.yaml plus six
defects the real control plane, the real Kueue and the real scheduler must refuse or leave unplaced. Each is found
by name in cluster-run.json's checks, and each is a disagreement with dev's simulation (which never saw them)."""

from __future__ import annotations

import json

import pytest

from tools.cluster_test.__main__ import STATE
from tools.cluster_test.compare import disagreements
from tools.cluster_test.control_plane import Cluster
from tools.cluster_test.run import PLAN_DIR, run_stack
from verify.render import ClusterObject

pytestmark = pytest.mark.cluster

QUEUE = "kueue.x-k8s.io/queue-name"
RESTRICTED_CONTAINER = {
    "name": "c", "image": "registry.invalid/planted:1", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}


def _job(name: str, queue: str, cpu: str) -> dict:
    container = {**RESTRICTED_CONTAINER, "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "planted", "labels": {QUEUE: queue}},
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [container]}}}}


def _queue(name: str, flavor: str, node_labels: dict, cpu: str) -> list[dict]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": node_labels}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
             {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                            {"name": "memory", "nominalQuota": "10Gi"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": name, "namespace": "planted"}, "spec": {"clusterQueue": name}}]


PLANTED = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "planted"}},
    {"apiVersion": "v1", "kind": "Namespace",
     "metadata": {"name": "planted-webhook", "labels": {"gtp.dev/planted": "webhook"}}},
    # 1. a pod violating its namespace's Pod Security level (training-dev enforces restricted)
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "planted-privileged",
                                                                 "namespace": "training-dev"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "planted"}}, "template": {
         "metadata": {"labels": {"app": "planted"}},
         "spec": {"containers": [{**RESTRICTED_CONTAINER, "securityContext": {"privileged": True}}]}}}},
    # 2. a job over its quota: 2 CPUs into a ClusterQueue of 1
    *_queue("planted-small", "planted-system", {"gtp.dev/node-group": "system"}, "1"),
    _job("planted-over-quota", "planted-small", "2"),
    # 3. a flavor whose labels no node has: Kueue admits, the scheduler finds no node
    *_queue("planted-nowhere", "planted-nowhere", {"gtp.dev/node-group": "nowhere"}, "10"),
    _job("planted-unplaceable", "planted-nowhere", "100m"),
    # 4. a fail-closed webhook whose Service does not exist, on Deployments in its namespace
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
     "metadata": {"name": "planted-missing-service"},
     "webhooks": [{"name": "planted.gtp.dev", "failurePolicy": "Fail", "sideEffects": "None",
                   "admissionReviewVersions": ["v1"],
                   "namespaceSelector": {"matchLabels": {"gtp.dev/planted": "webhook"}},
                   "clientConfig": {"service": {"name": "nowhere", "namespace": "planted-webhook",
                                                "path": "/validate"}},
                   "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                              "resources": ["deployments"]}]}]},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "guarded", "namespace": "planted-webhook"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "g"}}, "template": {
         "metadata": {"labels": {"app": "g"}}, "spec": {"containers": [RESTRICTED_CONTAINER]}}}},
    # 6. a PodDisruptionBudget that lets no pod go: a node drain is refused by the Eviction API
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "undrainable", "namespace": "planted"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "undrainable"}}, "template": {
         "metadata": {"labels": {"app": "undrainable"}}, "spec": {"containers": [RESTRICTED_CONTAINER]}}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "undrainable",
                                                                          "namespace": "planted"},
     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "undrainable"}}}},
    # 5. a CRD field its CEL rule rejects (Kueue v0.19.2 ClusterQueue: borrowingLimit needs a cohort)
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "planted-cel"},
     "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
         {"name": "planted-system", "resources": [{"name": "cpu", "nominalQuota": "1", "borrowingLimit": "1"}]}]}]}},
]


def plant(objects: list[ClusterObject]) -> list[ClusterObject]:
    return [*objects, *(ClusterObject("stack", obj) for obj in PLANTED)]


@pytest.fixture(scope="module")
def report():
    cluster = Cluster(STATE / "planted")
    cluster.clean()
    try:
        cluster.start()
        result = run_stack("dev", cluster, plant=plant)
    finally:
        left = cluster.stop()
    assert left == []
    cluster.clean()
    return result


def _finding(report: dict, check: str, subject: str) -> str:
    for finding in report["checks"][check]["findings"]:
        if finding["subject"] == subject:
            return finding["rule"]
    raise AssertionError(f"no {check} finding for {subject}: {json.dumps(report['checks'][check]['findings'])}")


def test_pod_security_refuses_the_privileged_pod(report):
    rule = _finding(report, "admitted", "Deployment training-dev/planted-privileged")
    assert 'violates PodSecurity "restricted:latest": privileged' in rule


def test_kueue_keeps_the_job_over_its_quota_out(report):
    rule = _finding(report, "queued", "Job planted/planted-over-quota")
    assert "insufficient quota for cpu in flavor planted-system" in rule


def test_no_node_has_the_flavors_labels(report):
    assert "admitted by Kueue into flavor planted-nowhere" in report["checks"]["queued"]["objects"][
        "Job planted/planted-unplaceable"]
    rule = _finding(report, "scheduled", "Job planted/planted-unplaceable")
    assert "didn't match Pod's node affinity/selector" in rule


def test_the_webhook_without_its_service_refuses(report):
    rule = _finding(report, "admission webhooks", "Deployment planted-webhook/guarded")
    assert 'failed calling webhook "planted.gtp.dev"' in rule and 'service "nowhere" not found' in rule


def test_the_cel_rule_refuses_the_field(report):
    rule = _finding(report, "admission webhooks", "ClusterQueue planted-cel")
    assert "borrowingLimit must be nil when cohort is empty" in rule


def test_the_budget_blocks_the_drain(report):
    rule = _finding(report, "drains", "PodDisruptionBudget planted/undrainable")
    assert "0 disruption(s) allowed" in rule
    assert "Cannot evict pod as it would violate the pod's disruption budget" in rule


def test_each_defect_is_a_disagreement_with_the_simulation(report):
    simulation = json.loads((PLAN_DIR / "dev" / "simulation.json").read_text())
    found = "\n".join(disagreements("dev", simulation, report))
    for subject in ("Deployment training-dev/planted-privileged", "Job planted/planted-over-quota",
                    "Job planted/planted-unplaceable", "Deployment planted-webhook/guarded",
                    "ClusterQueue planted-cel", "PodDisruptionBudget planted/undrainable"):
        assert subject in found
