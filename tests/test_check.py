"""`make check`'s Checkov input (tools/check.py): every stack's whole rendered cluster, and the accepted findings
of third-party objects (checkov-accepted.yaml) applied per object and check."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from tools import cluster
from tools.check import ACCEPTED_FINDINGS, apply_accepted, checkov_cluster, load_accepted, object_key
from tests.conftest import plan_stack

STACKS = ["dev", "edge", "prod"]


@functools.cache
def rendered(stack: str) -> tuple[cluster.ClusterObject, ...]:
    return tuple(cluster.render_cluster(plan_stack(stack)))


def write_cluster(tmp_path: Path, stack: str) -> Path:
    directory = tmp_path / stack
    directory.mkdir()
    (directory / "cluster.yaml").write_text(cluster.dump(rendered(stack)))
    return directory


def test_checkov_scans_the_whole_cluster_and_the_training_replica_templates(tmp_path: Path) -> None:
    documents = checkov_cluster(write_cluster(tmp_path, "edge"))
    keys = [object_key(document) for document in documents]
    # Chart, operator and stack objects, each once, then a PodTemplate per ElasticJob replica template.
    named = [{**item.obj, "metadata": {**item.obj["metadata"],  # Pulumi auto-names some: Checkov needs a name
                                       "name": item.obj["metadata"].get("name") or f"{item.kind.lower()}-autonamed"}}
             for item in rendered("edge")]
    assert keys[:len(named)] == [object_key(obj) for obj in named]
    assert "Deployment dlrover/dlrover-controller-manager" in keys  # operator
    assert "Deployment nvidia-device-plugin/nvidia-device-plugin-node-feature-discovery-master" in keys  # chart
    job = next(item for item in rendered("edge") if item.kind == "ElasticJob")
    assert keys[len(rendered("edge")):] == [f"PodTemplate {job.namespace}/{job.name}-worker"]
    assert all(document["metadata"].get("name") for document in documents)


def write_accepted(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "accepted.yaml"
    path.write_text(text)
    return path


def test_accepted_findings_become_numbered_checkov_skips_after_existing_ones(tmp_path: Path) -> None:
    accepted = load_accepted(write_accepted(tmp_path, """
- objects: [Deployment a/x, ClusterRole r]
  checks: {CKV_K8S_38: needs the API, CKV_K8S_43: tag pinned by the chart}
"""))
    documents = [{"kind": "Deployment", "metadata": {"name": "x", "namespace": "a",
                                                      "annotations": {"checkov.io/skip1": "CKV_K8S_8=batch"}}},
                 {"kind": "Deployment", "metadata": {"name": "x", "namespace": "b"}},
                 {"kind": "ClusterRole", "metadata": {"name": "r"}}]
    used = apply_accepted(documents, accepted)
    assert used == {"Deployment a/x", "ClusterRole r"}
    assert documents[0]["metadata"]["annotations"] == {"checkov.io/skip1": "CKV_K8S_8=batch",
                                                       "checkov.io/skip2": "CKV_K8S_38=needs the API",
                                                       "checkov.io/skip3": "CKV_K8S_43=tag pinned by the chart"}
    assert "annotations" not in documents[1]["metadata"]  # another namespace: not accepted
    assert documents[2]["metadata"]["annotations"]["checkov.io/skip1"] == "CKV_K8S_38=needs the API"


@pytest.mark.parametrize(("text", "problem"), [
    ("objects: []", "accepted.yaml: expected a list of {objects, checks} entries, got dict"),
    ("- objects: [Deployment a/x]\n", "accepted.yaml[0]: expected exactly the keys 'objects' and 'checks'"),
    ("- {objects: [x], checks: {CKV_K8S_1: r}}", "accepted.yaml[0].objects: expected a non-empty list"),
    ("- {objects: [Deployment a/x], checks: {}}", "accepted.yaml[0].checks: expected a mapping"),
    ("- {objects: [Deployment a/x], checks: {CKV_K8S_1: ''}}", "accepted.yaml[0].checks.CKV_K8S_1: expected CKV_"),
    ("- {objects: [Deployment a/x], checks: {K8S_1: why}}", "accepted.yaml[0].checks.K8S_1: expected CKV_"),
    ("- {objects: [Deployment a/x], checks: {CKV_K8S_1: why}}\n- {objects: [Deployment a/x], checks: {CKV_K8S_1: again}}",
     "accepted.yaml[1]: Deployment a/x CKV_K8S_1 is accepted twice"),
])
def test_a_malformed_accepted_findings_file_names_the_entry(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(problem)):
        load_accepted(write_accepted(tmp_path, text))


def test_every_accepted_finding_names_a_third_party_object_of_some_stack() -> None:
    """Our own objects get fixed (or annotated next to their code), never accepted here; and an entry that names
    no object is stale (`make check` fails on it too)."""
    accepted = load_accepted()
    sources: dict[str, set[str]] = {}
    for stack in STACKS:
        for item in rendered(stack):
            sources.setdefault(object_key(item.obj), set()).add(item.source.split(" ", 1)[0])
    assert sorted(key for key in accepted if key not in sources) == []
    assert sorted(key for key in accepted if sources[key] != {"chart"} and sources[key] != {"operator"}) == []
    assert yaml.safe_load(ACCEPTED_FINDINGS.read_text())  # the file is there and not empty


def pod_spec(stack: str, kind: str, key: str) -> dict:
    item = next(item for item in rendered(stack) if item.kind == kind and object_key(item.obj) == f"{kind} {key}")
    return item.obj["spec"]["template"]["spec"]


@pytest.mark.parametrize(("stack", "kind", "key"), [
    ("prod", "Deployment", "gpu-metrics/prometheus-server"),  # + its configmap-reload sidecar
    ("prod", "Deployment", "gpu-metrics/grafana"),  # + its download-dashboards init container
    ("prod", "Deployment", "kube-system/cluster-autoscaler-aws-cluster-autoscaler"),
    ("dev", "Deployment", "nvidia-device-plugin/nvidia-device-plugin-node-feature-discovery-master"),
    ("dev", "Deployment", "nvidia-device-plugin/nvidia-device-plugin-node-feature-discovery-gc"),
    ("dev", "DaemonSet", "nvidia-device-plugin/nvidia-device-plugin-node-feature-discovery-worker"),
])
def test_chart_values_give_every_container_requests_and_limits(stack: str, kind: str, key: str) -> None:
    """Fixed through chart values, not accepted (Checkov CKV_K8S_10..13)."""
    spec = pod_spec(stack, kind, key)
    for container in spec.get("initContainers", []) + spec["containers"]:
        resources = container.get("resources") or {}
        for bound in ("requests", "limits"):
            assert set(resources.get(bound) or {}) >= {"cpu", "memory"}, (container["name"], bound, resources)


def test_chart_values_harden_nfd_and_grafana_pods() -> None:
    for key in ("node-feature-discovery-master", "node-feature-discovery-gc"):
        spec = pod_spec("dev", "Deployment", f"nvidia-device-plugin/nvidia-device-plugin-{key}")
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}  # CKV_K8S_31
    worker = pod_spec("dev", "DaemonSet", "nvidia-device-plugin/nvidia-device-plugin-node-feature-discovery-worker")
    assert worker["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    grafana = pod_spec("prod", "Deployment", "gpu-metrics/grafana")
    assert grafana["automountServiceAccountToken"] is False  # CKV_K8S_38
    assert all(container["securityContext"]["readOnlyRootFilesystem"] is True  # CKV_K8S_22
               for container in grafana.get("initContainers", []) + grafana["containers"])
