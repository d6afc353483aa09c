"""Checkov over the whole rendered cluster (verify/check.py): inputs per source, the accepted-findings matcher, the
accepted file itself, one real Checkov run, and the chart values that fixed findings instead of accepting them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog.versions import CLUSTER_AUTOSCALER, DCGM_EXPORTER, GRAFANA, KEDA, NVIDIA_DEVICE_PLUGIN, PROMETHEUS
from verify import check
from verify.check import (
    ACCEPTED_FILE,
    COMPUTED_IMAGE,
    CheckovFinding,
    checkov_documents,
    judge,
    load_accepted,
    object_key,
    parse_checkov_report,
    run_checkov_json,
    source_file_name,
    write_checkov_inputs,
)
from verify.plan_record import COMPUTED, ROOT
from verify.render import ClusterObject, dump, render_releases

CHART_SOURCE = "chart vendor/charts/keda-2.20.2 release keda/keda"
OPERATOR_SOURCE = "operator vendor/operators/training-operator-v1.9.4.yaml"


def deployment(name: str, namespace: str = "apps", image: str = "nginx:1.27", **pod: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}], **pod}}}}


def finding(key: str, check_id: str, stack: str = "dev") -> CheckovFinding:
    return CheckovFinding(stack, CHART_SOURCE, key, check_id, "a check")


# --- the matcher -----------------------------------------------------------------------------------------------

ACCEPTED = {"Deployment/keda/keda-operator": {"CKV_K8S_38": "watches ScaledObjects"},
            "ClusterRole/training-operator": {"CKV_K8S_155": "manages its webhook"}}


def test_listed_findings_pass() -> None:
    findings = [finding("Deployment/keda/keda-operator", "CKV_K8S_38"),
                finding("Deployment/keda/keda-operator", "CKV_K8S_38", stack="prod"),
                finding("ClusterRole/training-operator", "CKV_K8S_155", stack="prod")]
    assert judge(findings, ACCEPTED) == ([], [])


def test_an_unlisted_finding_fails() -> None:
    unlisted_check = finding("Deployment/keda/keda-operator", "CKV_K8S_40")
    unlisted_object = finding("Deployment/keda/other", "CKV_K8S_38")
    unexplained, _ = judge([finding("Deployment/keda/keda-operator", "CKV_K8S_38"), unlisted_check,
                            unlisted_object], ACCEPTED, report_stale=False)
    assert unexplained == [unlisted_check, unlisted_object]


def test_a_stale_entry_fails_when_every_stack_was_scanned_only() -> None:
    findings = [finding("Deployment/keda/keda-operator", "CKV_K8S_38")]
    assert judge(findings, ACCEPTED) == ([], ["ClusterRole/training-operator CKV_K8S_155"])
    # A subset of stacks may lack the object an entry is for: not stale then.
    assert judge(findings, ACCEPTED, report_stale=False) == ([], [])


def test_checkov_cluster_fails_on_a_stale_entry_and_on_an_unlisted_finding(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(check, "ROOT", tmp_path)
    plan_dir = tmp_path / "build" / "plan" / "dev"
    plan_dir.mkdir(parents=True)
    plan_dir.joinpath("cluster.yaml").write_text(dump([ClusterObject(CHART_SOURCE, deployment("web"))]))
    monkeypatch.setattr(check, "run_checkov_json", lambda checkov, directory: {"results": {"failed_checks": [
        {"check_id": "CKV_K8S_8", "check_name": "probe", "resource": "Deployment.apps.web",
         "file_abs_path": str(directory / "dev" / source_file_name(CHART_SOURCE))}]}})
    accepted = tmp_path / "accepted.yaml"
    accepted.write_text(yaml.safe_dump({"Deployment/apps/web": {"CKV_K8S_8": "no server"}}))
    assert check.checkov_cluster("checkov", ["dev"], all_stacks=True, accepted_file=accepted)
    accepted.write_text(yaml.safe_dump({"Deployment/apps/web": {"CKV_K8S_8": "no server", "CKV_K8S_9": "stale"}}))
    assert not check.checkov_cluster("checkov", ["dev"], all_stacks=True, accepted_file=accepted)
    accepted.write_text(yaml.safe_dump({"Deployment/apps/other": {"CKV_K8S_8": "no server"}}))
    assert not check.checkov_cluster("checkov", ["dev"], all_stacks=False, accepted_file=accepted)


# --- Checkov's report ------------------------------------------------------------------------------------------

def test_object_keys_drop_checkovs_default_namespace_of_cluster_scoped_kinds_and_keep_dotted_names() -> None:
    assert object_key("Deployment.keda.keda-operator") == "Deployment/keda/keda-operator"
    assert object_key("ClusterRole.default.training-operator") == "ClusterRole/training-operator"
    assert object_key("ConfigMap.kube-system.a.b.c") == "ConfigMap/kube-system/a.b.c"


def test_report_findings_are_attributed_to_their_stack_and_source(tmp_path: Path) -> None:
    dev, prod = tmp_path / "dev.yaml", tmp_path / "prod.yaml"
    files = {dev.resolve(): ("dev", CHART_SOURCE), prod.resolve(): ("prod", OPERATOR_SOURCE)}
    report = [{"check_type": "kubernetes", "results": {"failed_checks": [
        {"check_id": "CKV_K8S_38", "check_name": "token", "resource": "Deployment.keda.keda-operator",
         "file_abs_path": str(dev)},
        {"check_id": "CKV_K8S_155", "check_name": "webhooks", "resource": "ClusterRole.default.training-operator",
         "file_abs_path": str(prod)}]}},
        {"passed": 0, "failed": 0}]  # what Checkov prints for a framework with nothing to scan
    assert parse_checkov_report(report, files) == [
        CheckovFinding("dev", CHART_SOURCE, "Deployment/keda/keda-operator", "CKV_K8S_38", "token"),
        CheckovFinding("prod", OPERATOR_SOURCE, "ClusterRole/training-operator", "CKV_K8S_155", "webhooks")]


def test_a_finding_in_a_file_this_run_did_not_write_is_an_error(tmp_path: Path) -> None:
    report = {"results": {"failed_checks": [{"check_id": "CKV_K8S_8", "resource": "Deployment.a.b",
                                             "file_abs_path": str(tmp_path / "old.yaml")}]}}
    with pytest.raises(ValueError, match="CKV_K8S_8 on .*old.yaml, a file this run did not write"):
        parse_checkov_report(report, {})


# --- the accepted-findings file --------------------------------------------------------------------------------

def test_every_accepted_entry_has_a_one_line_reason() -> None:
    accepted = load_accepted(ACCEPTED_FILE)
    assert accepted
    for key, checks in accepted.items():
        for check_id, reason in checks.items():
            assert reason.strip() and "\n" not in reason.strip(), f"{key} {check_id}"


@pytest.mark.parametrize(("text", "message"), [
    ("- a list", "expected a mapping of object keys"),
    ("Deployment: {CKV_K8S_8: why}", "key 'Deployment' is not <kind>/<namespace>/<name>"),
    ("Deployment/a/b/c: {CKV_K8S_8: why}", "key 'Deployment/a/b/c' is not"),
    ("Deployment/a/b: {}", "Deployment/a/b: expected a non-empty mapping of check IDs"),
    ("Deployment/a/b: {CKV_AWS_1: why}", "Deployment/a/b: 'CKV_AWS_1' is not a Kubernetes Checkov check ID"),
    ("Deployment/a/b: {CKV_K8S_8: ''}", r"Deployment/a/b.CKV_K8S_8: the reason must be one non-empty line"),
    ("Deployment/a/b: {CKV_K8S_8: null}", r"Deployment/a/b.CKV_K8S_8: the reason must be one non-empty line"),
    ("Deployment/a/b: {CKV_K8S_8: \"two\\nlines\"}", r"the reason must be one non-empty line, got 'two\\nlines'"),
])
def test_a_malformed_accepted_file_names_the_key_and_what_is_allowed(tmp_path: Path, text: str,
                                                                      message: str) -> None:
    path = tmp_path / "accepted.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_accepted(path)


def test_a_well_formed_accepted_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "accepted.yaml"
    path.write_text("Deployment/a/b: {CKV_K8S_8: no server}\nClusterRole/r: {CKV2_K8S_5: its own RBAC}\n")
    assert load_accepted(path) == {"Deployment/a/b": {"CKV_K8S_8": "no server"},
                                   "ClusterRole/r": {"CKV2_K8S_5": "its own RBAC"}}


# --- Checkov's inputs ------------------------------------------------------------------------------------------

def test_every_source_of_the_cluster_gets_its_own_file_not_only_the_stacks_objects(tmp_path: Path) -> None:
    """The old check scanned manifests.yaml only: chart and operator objects were never seen by Checkov."""
    objects = [ClusterObject("stack", deployment("web")),
               ClusterObject(CHART_SOURCE, deployment("keda-operator", "keda")),
               ClusterObject(OPERATOR_SOURCE, deployment("training-operator", "kubeflow"))]
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "cluster.yaml").write_text(dump(objects))
    files = write_checkov_inputs("dev", tmp_path / "plan", tmp_path / "check")
    assert sorted((path.name, stack_source) for path, stack_source in files.items()) == [
        ("chart-keda-2.20.2-keda-keda.yaml", ("dev", CHART_SOURCE)),
        ("operator-training-operator-v1.9.4.yaml", ("dev", OPERATOR_SOURCE)),
        ("stack.yaml", ("dev", "stack"))]
    for path in files:
        assert path.parent == (tmp_path / "check" / "dev").resolve()
        assert not path.read_text().startswith("#")  # plain multi-document YAML, no source comments
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(
        (tmp_path / "check" / "dev" / "chart-keda-2.20.2-keda-keda.yaml").read_text())] == ["keda-operator"]


def test_checkov_documents_name_autonamed_objects_pin_computed_images_and_reemit_training_templates() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train", "namespace": "t"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {
               "containers": [{"name": "pytorch", "image": COMPUTED}]}}}}}}
    autonamed = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"namespace": "t"},
                 "spec": {"template": {"spec": {"containers": [{"name": "gate", "image": COMPUTED}]}}}}
    documents = checkov_documents([ClusterObject("stack", job), ClusterObject("stack", autonamed)])
    assert list(documents) == ["stack"]
    kinds = [(d["kind"], d["metadata"]["name"]) for d in documents["stack"]]
    assert kinds == [("PyTorchJob", "train"), ("Job", "job-autonamed"), ("PodTemplate", "train-worker")]
    template = documents["stack"][2]["template"]["spec"]["containers"][0]
    assert template["image"] == COMPUTED_IMAGE
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] == COMPUTED


# --- one real Checkov run --------------------------------------------------------------------------------------

def checkov_binary() -> str:
    path = Path(os.environ.get("GTP_CHECKOV") or ROOT / ".venv-checkov" / "bin" / "checkov")
    assert path.is_file() and os.access(path, os.X_OK), f"Checkov not found at {path}: run `make setup`"
    return str(path)


@pytest.mark.slow
def test_real_checkov_findings_on_a_small_cluster_are_matched_per_object_and_source(tmp_path: Path) -> None:
    hardened = deployment("hardened", "apps", image="registry.invalid/a@sha256:" + "1" * 64,
                          automountServiceAccountToken=False,
                          securityContext={"runAsNonRoot": True, "runAsUser": 10001,
                                           "seccompProfile": {"type": "RuntimeDefault"}})
    container = hardened["spec"]["template"]["spec"]["containers"][0]
    container.update(imagePullPolicy="Always", securityContext={
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
        "runAsUser": 10001, "capabilities": {"drop": ["ALL"]}},
        resources={"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}},
        livenessProbe={"tcpSocket": {"port": 80}}, readinessProbe={"tcpSocket": {"port": 80}})
    privileged = deployment("agent", "node", image="nginx:1.27")
    privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    (tmp_path / "plan").mkdir()
    # CKV2_K8S_6 wants every pod selected by a NetworkPolicy.
    deny_all = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "deny-all", "namespace": "apps"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    (tmp_path / "plan" / "cluster.yaml").write_text(dump([ClusterObject("stack", hardened),
                                                          ClusterObject("stack", deny_all),
                                                          ClusterObject(CHART_SOURCE, privileged)]))
    files = write_checkov_inputs("dev", tmp_path / "plan", tmp_path / "check")
    findings = parse_checkov_report(run_checkov_json(checkov_binary(), tmp_path / "check"), files)
    by_key: dict[str, set[str]] = {}
    for item in findings:
        by_key.setdefault(item.key, set()).add(item.check_id)
        assert item.stack == "dev"
        from_chart = item.key.startswith(("Deployment/node/", "Pod/node/"))
        assert item.source == (CHART_SOURCE if from_chart else "stack"), item
    assert "Deployment/apps/hardened" not in by_key, by_key
    # Checkov 3.3's CKV2_K8S_6 is namespace-blind (verify/check.py notes it): the policy in `apps` also "selects"
    # the pod in `node`. If this starts failing, Checkov fixed it: drop the note and expect CKV2_K8S_6 here.
    assert not any(item.check_id == "CKV2_K8S_6" for item in findings), findings
    assert {"CKV_K8S_16", "CKV_K8S_43", "CKV_K8S_8"} <= by_key["Deployment/node/agent"]
    accepted = {"Deployment/node/agent": dict.fromkeys(by_key["Deployment/node/agent"], "test")}
    assert judge(findings, accepted) == ([], [])
    del accepted["Deployment/node/agent"]["CKV_K8S_16"]
    unexplained, stale = judge(findings, accepted)
    assert [(f.key, f.check_id) for f in unexplained] == [("Deployment/node/agent", "CKV_K8S_16")] and not stale


# --- findings fixed by chart values: the rendered objects really change ------------------------------------------

def rendered(chart_path: str, values: dict[str, Any], name: str, namespace: str) -> list[dict[str, Any]]:
    release = {"name": name, "chart": chart_path, "namespace": namespace, "values": values}
    return [item.obj for item in render_releases([release], "1.34")]


def pod_spec(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)["spec"]["template"]["spec"]


def test_grafana_and_prometheus_values_bound_every_container_and_drop_grafanas_token() -> None:
    from components.gpu_metrics import grafana_values, prometheus_values

    grafana = pod_spec(rendered(GRAFANA.path, grafana_values("{}"), "grafana", "gpu-metrics"),
                       "Deployment", "grafana")
    assert grafana["automountServiceAccountToken"] is False
    for container in grafana["initContainers"] + grafana["containers"]:
        assert set(container["resources"]) == {"requests", "limits"}, container["name"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]
    server = pod_spec(rendered(PROMETHEUS.path, prometheus_values("15d"), "prometheus", "gpu-metrics"),
                      "Deployment", "prometheus-server")
    for container in server["containers"]:
        assert set(container["resources"]) == {"requests", "limits"}, container["name"]


def test_autoscaler_values_give_the_charts_suggested_resources() -> None:
    from components.cluster_autoscaler import autoscaler_values

    spec = pod_spec(rendered(CLUSTER_AUTOSCALER.path, autoscaler_values("c", "us-east-1"), "cluster-autoscaler",
                             "kube-system"), "Deployment", "cluster-autoscaler-aws-cluster-autoscaler")
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "300Mi"},
                                                  "limits": {"cpu": "100m", "memory": "300Mi"}}


def test_device_plugin_values_bound_the_plugin_and_harden_nfd_keeping_the_charts_requests() -> None:
    from components.nvidia_device_plugin import device_plugin_values

    objects = rendered(NVIDIA_DEVICE_PLUGIN.path, device_plugin_values({}, "", {}, [], install_nfd=True),
                       "nvidia-device-plugin", "nvidia-device-plugin")
    plugin = pod_spec(objects, "DaemonSet", "nvidia-device-plugin")
    main = next(c for c in plugin["containers"] if c["name"] == "nvidia-device-plugin-ctr")
    assert main["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
    assert main["resources"]["limits"]["memory"] == "256Mi"
    master = pod_spec(objects, "Deployment", "nvidia-device-plugin-node-feature-discovery-master")
    assert master["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # Helm merges our CPU limit into the chart's resources: its memory limit and requests stay.
    assert master["containers"][0]["resources"] == {"limits": {"cpu": "300m", "memory": "4Gi"},
                                                    "requests": {"cpu": "100m", "memory": "128Mi"}}
    worker = pod_spec(objects, "DaemonSet", "nvidia-device-plugin-node-feature-discovery-worker")
    assert worker["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 65534,
                                         "runAsGroup": 65534}
    assert worker["containers"][0]["securityContext"]["runAsNonRoot"] is True  # the chart's, kept
    assert worker["containers"][0]["resources"]["limits"]["cpu"] == "300m"
    assert worker["tolerations"]  # the worker's tolerations survive the merge with NFD_HARDENING


def test_keda_pods_run_as_the_uid_of_keda_images() -> None:
    from components.training_operators import keda_values

    objects = rendered(KEDA.path, keda_values(), "keda", "keda")
    for name in ("keda-operator", "keda-operator-metrics-apiserver", "keda-admission-webhooks"):
        context = pod_spec(objects, "Deployment", name)["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"], context["runAsNonRoot"]) == (65532, 65532, True), name


def test_dcgm_exporter_keeps_root_and_sys_admin_and_drops_net_raw() -> None:
    from components.gpu_metrics import dcgm_exporter_values

    spec = pod_spec(rendered(DCGM_EXPORTER.path, dcgm_exporter_values({}, []), "dcgm-exporter", "gpu"),
                    "DaemonSet", "dcgm-exporter")
    assert spec["containers"][0]["securityContext"] == {
        "runAsNonRoot": False, "runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_RAW"]}}
