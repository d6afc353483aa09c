"""The real test cluster's harness without a cluster: its Go modules pin what catalog/versions.py pins, the kwok
nodes come from the simulator's node groups, the apply rules, and the comparison of simulation.json with
cluster-run.json (a disagreement names the stack, the check and the object)."""

from __future__ import annotations

import dataclasses
import re
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog import versions
from tools.cluster_test import build, compare, nodes, run
from verify.render import ClusterObject
from verify.simulate.nodes import NodeGroup

ROOT = Path(__file__).resolve().parents[2]


def _require(component: str) -> dict[str, str]:
    text = (build.GOMOD / component / "go.mod").read_text()
    return dict(re.findall(r"^(?:require )?\s*(\S+) (v\S+)(?: // indirect)?$", text, re.M))


@pytest.mark.parametrize("component", sorted(build.MODULES))
def test_go_module_pins_the_catalog_version(component):
    module, version = build.MODULES[component]
    assert _require(component).get(module) == version, f"gomod/{component}/go.mod must require {module} {version}"
    assert (build.GOMOD / component / "go.sum").read_text().count(f"{module} {version}") >= 1


def test_every_binary_is_built_from_a_pinned_module():
    assert {binary.component for binary in build.BINARIES} == set(build.MODULES)


def test_kubernetes_staging_modules_follow_the_tag():
    """k8s.io/kubernetes replaces its staging modules with ../staging paths; ours pin them to v0.<minor>.<patch>."""
    text = (build.GOMOD / "kubernetes" / "go.mod").read_text()
    staging = "v0." + versions.CLUSTER_TEST_KUBERNETES.removeprefix("v1.")
    replaced = re.findall(r"^\s*(k8s\.io/\S+) => k8s\.io/\S+ (v\S+)$", text, re.M)
    assert len(replaced) == 31
    assert {version for _, version in replaced} == {staging}


def test_control_plane_minor_is_the_eks_stacks():
    """dev and prod run Kubernetes 1.34, the control plane's minor; edge (an adopted k3s cluster, 1.33) is applied
    to it too, one minor newer than the stack's (its kubernetes-validate schemas stay 1.33 in `make plan`): a 1.33
    build is not possible here, k8s.io/kubernetes v1.33.12's staging modules k8s.io/cri-api and k8s.io/externaljwt
    v0.33.12 answer 403 on the Go module proxy."""
    minor = ".".join(versions.CLUSTER_TEST_KUBERNETES.removeprefix("v").split(".")[:2])
    for stack, expected in (("dev", minor), ("prod", minor), ("edge", "1.33")):
        config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert str(config["gtp:kubernetesVersion"]) == expected, stack
    assert minor in versions.SUPPORTED_KUBERNETES_VERSIONS


def test_cache_outside_the_clone(monkeypatch, tmp_path):
    monkeypatch.delenv(build.CACHE_ENV, raising=False)
    assert build.cache_root() == Path("/var/tmp/gtp-go")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    env = build.go_env()
    assert (env["GOCACHE"], env["GOMODCACHE"], env["GOTOOLCHAIN"]) == (str(tmp_path / "build"),
                                                                       str(tmp_path / "mod"), "local")
    assert "-buildvcs=false" in env["GOFLAGS"]


def _group(**overrides) -> NodeGroup:
    values = {"name": "g6", "role": "gpu",
              "labels": {"gtp.dev/node-group": "g6", "eks.amazonaws.com/nodegroup": "<unknown>",
                         "nvidia.com/gpu.replicas": "4"},
              "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
              "allocatable": {"cpu": 3.92, "memory": 15.0 * 2**30, "pods": 58.0, "nvidia.com/gpu.shared": 4.0,
                              "nvidia.com/gpu": 0.0, "vpc.amazonaws.com/efa": 1.0},
              "min_size": 0, "max_size": 2, "instance_types": ("g6.xlarge",)}
    values.update(overrides)
    return NodeGroup(**values)


def test_kwok_nodes_carry_the_groups_facts():
    made = nodes.node_objects([_group()])
    assert [n["metadata"]["name"] for n in made] == ["g6-0", "g6-1"]  # max size: the autoscaler's nodes
    node = made[0]
    assert node["metadata"]["annotations"][nodes.KWOK_ANNOTATION] == "fake"
    assert node["metadata"]["labels"] == {"gtp.dev/node-group": "g6", "nvidia.com/gpu.replicas": "4",
                                          "kubernetes.io/hostname": "g6-0"}  # `<unknown>` is no label value
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert node["status"]["allocatable"] == {"cpu": "3920m", "memory": str(15 * 2**30), "pods": "58",
                                             "nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "4",
                                             "vpc.amazonaws.com/efa": "1"}
    assert node["status"]["capacity"]["cpu"] == "4000m"  # g6.xlarge: 4 vCPUs; allocatable is after reservations
    assert nodes.group_of(node) == "g6"


def test_unknown_capacity_of_an_adopted_cluster_is_bounded():
    node = nodes.node_objects([_group(instance_types=(), allocatable={"cpu": float("inf"), "pods": float("inf")},
                                      min_size=1, max_size=1)])[0]
    assert node["status"]["allocatable"] == {"cpu": "256000m", "pods": "250"}


def _objects() -> list[ClusterObject]:
    hook = {"name": "h", "clientConfig": {"service": {"name": "kueue-webhook-service", "namespace": "kueue-system",
                                                      "path": "/mutate"}}}
    return [
        ClusterObject("operator build/kueue/dev/kueue-v0.19.2-x.yaml", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "kueue-mutating"}, "webhooks": [hook]}),
        ClusterObject("chart vendor/charts/keda-2.20.2 release keda/keda", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "keda-admission"}, "webhooks": [{"name": "k", "clientConfig": {"service": {
                "name": "keda-admission-webhooks", "namespace": "keda", "path": "/v"}}}]}),
        ClusterObject("stack", {"apiVersion": "admissionregistration.k8s.io/v1",
                                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "ours"},
                                "webhooks": [{"name": "o", "clientConfig": {"service": {
                                    "name": "ours", "namespace": "n", "path": "/v"}}}]}),
        ClusterObject("chart vendor/charts/keda-2.20.2 release keda/keda", {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.external.metrics.k8s.io"}}),
        ClusterObject("stack", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
                                "data": {"token": "[secret]", "plain": "eA=="}}),
    ]


def test_apply_rules_are_explicit():
    kueue_process = types.SimpleNamespace(name="kueue", namespace="kueue-system", service="kueue-webhook-service",
                                          host="127.0.0.1", port=9443)
    applied, replaced = run.prepare(_objects(), [kueue_process], b"CA")
    names = [obj["metadata"]["name"] for _, obj in applied]
    assert names == ["kueue-mutating", "ours", "s"]
    kueue = applied[0][1]["webhooks"][0]["clientConfig"]
    assert kueue == {"url": "https://127.0.0.1:9443/mutate", "caBundle": "Q0E="}
    assert applied[1][1]["webhooks"][0]["clientConfig"]["service"]["name"] == "ours"  # the stack's own: as is
    assert applied[2][1]["data"] == {"token": run.PLACEHOLDER, "plain": "eA=="}
    assert replaced["ValidatingWebhookConfiguration keda-admission"].startswith("not registered: its server")
    assert replaced["APIService v1beta1.external.metrics.k8s.io"].startswith("not registered: an aggregated API")
    assert "webhooks served by the kueue process" in replaced["MutatingWebhookConfiguration kueue-mutating"]
    # the source objects are not changed in place
    assert "service" in _objects()[0].obj["webhooks"][0]["clientConfig"]


def test_apply_order_puts_crds_first_and_workloads_last():
    kinds = {kind: run.phase(ClusterObject("stack", {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}))
             for api, kind in (("v1", "Namespace"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                               ("v1", "ConfigMap"), ("admissionregistration.k8s.io/v1",
                                                     "ValidatingWebhookConfiguration"),
                               ("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("apps/v1", "Deployment"),
                               ("kubeflow.org/v1", "PyTorchJob"), ("rbac.authorization.k8s.io/v1", "ClusterRole"))}
    assert kinds == {"Namespace": 0, "CustomResourceDefinition": 0, "ConfigMap": 1, "ClusterRole": 1,
                     "ValidatingWebhookConfiguration": 2, "ClusterQueue": 3, "Deployment": 4, "PyTorchJob": 4}


def _sim(**checks) -> dict:
    return {"checks": {name: {"passed": 1, "total": 1, "findings": findings, "details": details}
                       for name, (details, findings) in checks.items()}}


def _real(not_run=(), **checks) -> dict:
    return {"not_run": list(not_run), "checks": {
        name: {"objects": objects, "findings": [{"subject": s, "rule": r} for s, r in findings.items()]}
        for name, (objects, findings) in checks.items()}}


def test_agreement_is_silent():
    sim = _sim(scheduled=(["PyTorchJob training-prod/gpt-pretrain Worker ×4: fits h100",
                           "DaemonSet ns/mps: runs on no node group (none matches its selectors and taints)"], []),
               queued=(["PyTorchJob training-prod/gpt-pretrain: one Workload (cpu 1) fits flavor gtp-h100 of gtp-prod"],
                       []))
    real = _real(scheduled=({"PyTorchJob training-prod/gpt-pretrain": "runs on h100",
                             "DaemonSet ns/mps": "runs on no node group"}, {}),
                 queued=({"PyTorchJob training-prod/gpt-pretrain":
                          "admitted by Kueue into flavor gtp-h100 of gtp-prod"}, {}))
    assert compare.disagreements("prod", sim, real) == []


def test_another_node_group_is_a_disagreement_naming_the_object():
    sim = _sim(scheduled=(["PyTorchJob training-prod/gpt-pretrain Worker ×4: fits h100"], []))
    real = _real(scheduled=({"PyTorchJob training-prod/gpt-pretrain": "runs on a100"}, {}))
    assert compare.disagreements("prod", sim, real) == [
        "prod: scheduled: PyTorchJob training-prod/gpt-pretrain: really runs on a100; the simulation fits it only "
        "on h100"]


def test_another_flavor_is_a_disagreement():
    sim = _sim(queued=(["PyTorchJob p/j: one Workload (cpu 1) fits flavor gtp-h100 of gtp-prod"], []))
    real = _real(queued=({"PyTorchJob p/j": "admitted by Kueue into flavor gtp-a100 of gtp-prod"}, {}))
    assert compare.disagreements("prod", sim, real) == [
        "prod: queued: PyTorchJob p/j: Kueue admitted it into flavor gtp-a100 of gtp-prod; the simulation chose "
        "gtp-h100 of gtp-prod"]


def test_a_real_refusal_the_simulation_passes_is_a_disagreement():
    sim = _sim(**{"admission webhooks": ([], [])})
    real = _real(**{"admission webhooks": ({"LimitRange training-dev/training": "refused"},
                                           {"LimitRange training-dev/training": "default value 1 is greater than "
                                                                                "max value 900m"})})
    assert compare.disagreements("dev", sim, real) == [
        "dev: admission webhooks: LimitRange training-dev/training: the real run fails it (default value 1 is "
        "greater than max value 900m); the simulation passes it"]


def test_a_simulated_miss_the_real_run_passes_is_a_disagreement():
    sim = _sim(admitted=([], [{"subject": "Deployment ns/web", "rule": "r", "fix": "f"}]))
    real = _real(admitted=({"Deployment ns/web": "1 pod(s) created"}, {}))
    assert compare.disagreements("dev", sim, real) == [
        "dev: admitted: Deployment ns/web: the simulation fails it; the real run passes it"]


def test_a_real_failure_of_an_assumption_says_the_assumption_failed():
    """simulation.json's `assumptions` (neither a pass nor a finding): the comparison reads them, never requires
    them, and a real finding on an assumed object names what was assumed instead of "the simulation passes it"."""
    sim = _sim(topology=([], []))
    sim["checks"]["topology"].update(passed=0, total=0, assumptions=[
        {"subject": "PyTorchJob p/j", "assumes": "one layer-3 domain holds its 4 nodes", "known_from": "EC2"}])
    real = _real(topology=({"PyTorchJob p/j": "not admitted"}, {"PyTorchJob p/j": "no domain fits"}))
    assert compare.disagreements("prod", sim, real) == [
        "prod: topology: PyTorchJob p/j: the real run fails it (no domain fits); the simulation assumed one layer-3 "
        "domain holds its 4 nodes"]
    assert compare.disagreements("prod", sim, _real(topology=({"PyTorchJob p/j": "admitted"}, {}))) == []


def test_objects_whose_controller_is_not_run_are_not_compared():
    sim = _sim(scheduled=(["ScaledJob training-dev/mnist Job ×4: fits g6"], []))
    real = _real(not_run=["ScaledJob training-dev/mnist"], scheduled=({"ScaledJob training-dev/mnist": "runs on x"},
                                                                      {}))
    assert compare.disagreements("dev", sim, real) == []


def test_checks_only_one_side_makes_are_not_compared():
    sim = _sim(**{"device mounts": ([], [{"subject": "x", "rule": "r", "fix": "f"}])})
    real = _real(drains=({"PodDisruptionBudget a/b": "1 disruption(s) allowed"}, {}))
    assert compare.disagreements("dev", sim, real) == []
    assert compare.coverage(sim, real) == {"compared": [], "simulation only": ["device mounts"]}


def test_a_claim_of_a_provisioning_class_gets_the_volume_its_driver_would_make():
    """No CSI driver runs under kwok: the harness pre-binds a volume of the class (a rule recorded in `replaced`);
    a claim that names its own volume, or a class the stack doesn't define, is left alone."""
    storage_class = ClusterObject("stack", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                            "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"})

    def claim(name: str, **spec: Any) -> ClusterObject:
        return ClusterObject("stack", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                       "metadata": {"name": name, "namespace": "m"},
                                       "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "10Gi"}}, **spec}})

    objects = [storage_class, claim("data", storageClassName="gp3"),
               claim("static", storageClassName="gp3", volumeName="pv-1"), claim("other", storageClassName="nfs")]
    applied, replaced = run.prepare(objects, [], b"CA")
    volumes = [obj for _, obj in applied if obj["kind"] == "PersistentVolume"]
    assert [v["spec"]["claimRef"] for v in volumes] == [{"namespace": "m", "name": "data"}]
    assert volumes[0]["spec"]["csi"]["driver"] == "ebs.csi.aws.com" and volumes[0]["spec"]["capacity"] == \
        {"storage": "10Gi"} and volumes[0]["spec"]["storageClassName"] == "gp3"
    assert replaced["PersistentVolumeClaim m/data"].startswith("bound to PersistentVolume cluster-test-m-data")


def test_kwok_nodes_of_a_topology_group_share_one_domain_per_layer():
    from catalog import node_labels as nl

    group = dataclasses.replace(_group(), labels={**_group().labels, **nl.topology_labels("p5.48xlarge")})
    made = nodes.node_objects([group])
    for node in made:
        labels = node["metadata"]["labels"]
        assert {k: v for k, v in labels.items() if k.startswith(nl.NETWORK_NODE_LAYER_PREFIX)} == {
            f"{nl.NETWORK_NODE_LAYER_PREFIX}{i}": f"g6-l{i}" for i in (1, 2, 3)}
    # a group without the labels gets none
    assert not any(k.startswith(nl.NETWORK_NODE_LAYER_PREFIX) for k in nodes.node_objects([_group()])[0]["metadata"]
                   ["labels"])


def test_the_harness_provisioning_status_is_valid_per_the_vendored_crd():
    import jsonschema
    import yaml as _yaml

    from catalog import versions

    crd = _yaml.safe_load((ROOT / versions.PROVISIONING_REQUEST_CRD).read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    body = run.provisioned_status({"metadata": {"generation": 3}})
    jsonschema.Draft7Validator(schema["properties"]["status"]).validate(body["status"])
    assert run.provisioned({"status": body["status"]})
    assert not run.provisioned({"status": {"conditions": [{"type": "Provisioned", "status": "False"}]}})
    assert [c["type"] for c in body["status"]["conditions"]] == ["Accepted", "Provisioned"]
