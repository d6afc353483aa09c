"""Admission webhooks (issue 26 finding 2): Kueue's fail-closed webhooks must not refuse pods cluster-wide, and
whatever a fail-closed webhook intercepts must wait for its server (verify/simulate/webhooks.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from catalog import versions
from components import kueue
from tests.conftest import ROOT, plan_stack
from verify import render as gtp_cluster
from verify.plan_record import Plan, Resource
from verify.render import ClusterObject
from verify.simulate import simulate, webhooks

SERVER = "operator kueue.yaml"


def _resource(name: str, depends_on: list[str] = (), type_: str = "kubernetes:yaml/v2:ConfigFile",
              **inputs: Any) -> Resource:
    return Resource(urn=f"urn:{name}", type=type_, name=name, custom=True, parent=None, provider=None,
                    depends_on=list(depends_on), options={}, inputs=inputs)


def _objects(webhook: dict[str, Any], replicas: int) -> list[ClusterObject]:
    labels = {"control-plane": "controller-manager"}
    return [
        ClusterObject(SERVER, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                               "metadata": {"name": "kueue"}, "webhooks": [webhook]}),
        ClusterObject(SERVER, {"apiVersion": "v1", "kind": "Service",
                               "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
                               "spec": {"selector": labels}}),
        ClusterObject(SERVER, {"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
                               "spec": {"replicas": replicas, "template": {"metadata": {"labels": labels}}}}),
        ClusterObject("stack", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                "metadata": {"name": "gpt", "namespace": "training",
                                             "labels": {kueue.QUEUE_LABEL: "training"}}}),
    ]


def _webhook(**selectors: Any) -> dict[str, Any]:
    return {"name": "mpytorchjob.kb.io", "failurePolicy": "Fail",
            "clientConfig": {"service": {"name": "kueue-webhook-service", "namespace": "kueue-system"}},
            "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "operations": ["CREATE"]}],
            **selectors}


def _plan(job_waits: bool) -> Plan:
    server = _resource("kueue", file="kueue.yaml")
    job = _resource("job", ["urn:kueue"] if job_waits else [], type_="kubernetes:kubeflow.org/v1:PyTorchJob",
                    kind="PyTorchJob", metadata={"name": "gpt", "namespace": "training"})
    return Plan(project="p", stack="s", resources=[server, job])


def test_an_intercepted_object_whose_resource_does_not_wait_for_the_server_is_a_finding() -> None:
    [result] = webhooks.check(_plan(job_waits=False), _objects(_webhook(), 2), [])
    assert (result.passed, result.total) == (0, 1)
    assert "job does not wait for kueue" in result.findings[0].rule
    assert "no endpoints available" in result.findings[0].rule


def test_waiting_for_the_server_passes_and_an_unselected_object_is_not_intercepted() -> None:
    [result] = webhooks.check(_plan(job_waits=True), _objects(_webhook(), 2), [])
    assert (result.passed, result.total, result.findings) == (1, 1, [])
    scoped = _webhook(objectSelector={"matchExpressions": [{"key": "other", "operator": "Exists"}]})
    [result] = webhooks.check(_plan(job_waits=False), _objects(scoped, 2), [])
    assert result.total == 0


def test_a_cluster_wide_pod_webhook_on_one_replica_is_a_finding() -> None:
    pods = {**_webhook(), "name": "mpod.kb.io",
            "rules": [{"apiGroups": [""], "resources": ["pods"], "operations": ["CREATE"]}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                        "values": ["kube-system", "kueue-system"]}]}}
    [result] = webhooks.check(_plan(True), _objects(pods, 1), [])
    assert "runs 1 replica: any restart of it blocks pod creation cluster-wide" in result.findings[0].rule
    [result] = webhooks.check(_plan(True), _objects(pods, 2), [])
    assert result.findings == []
    listed = {**pods, "namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training"]}]}}
    assert not webhooks.cluster_wide(listed) and webhooks.cluster_wide(pods)


@pytest.mark.program
def test_the_derived_kueue_keeps_only_its_own_and_the_enabled_integrations_webhooks_scoped() -> None:
    upstream = (ROOT / versions.KUEUE_MANIFEST).read_text()
    derived = kueue.derive_manifest(upstream, ["batch/job", "kubeflow.org/pytorchjob"], "5m",
                                    namespaces=["training-dev"])
    docs = [d for d in yaml.safe_load_all(derived) if d]
    hooks = {w["name"]: w for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]}
    assert sorted(hooks) == ["mclusterqueue.kb.io", "mjob.kb.io", "mpytorchjob.kb.io", "mresourceflavor.kb.io",
                             "mworkload.kb.io", "vclusterqueue.kb.io", "vcohort.kb.io", "vjob.kb.io",
                             "vpytorchjob.kb.io", "vresourceflavor.kb.io", "vworkload.kb.io"]
    assert hooks["mjob.kb.io"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["training-dev"]
    assert hooks["vpytorchjob.kb.io"]["objectSelector"] == {
        "matchExpressions": [{"key": kueue.QUEUE_LABEL, "operator": "Exists"}]}
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2
    budget = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert budget["spec"] == {"minAvailable": 1, "selector": deployment["spec"]["selector"]}


def test_the_committed_stacks_webhooks_simulate_clean() -> None:
    for stack in ("dev", "prod"):
        plan = plan_stack(stack)
        check = simulate(plan, gtp_cluster.render_cluster(plan))["checks"]["admission webhooks"]
        assert check["total"] > 0 and check["passed"] == check["total"], (stack, check["findings"])
