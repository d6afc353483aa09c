"""Priorities and disruption budgets of the platform's long-running components (issue 17 item 4).

Over the rendered cluster of dev and prod (charts and operator manifests included, verify/render.py): every
long-running platform controller runs under `gtp-platform` (or a built-in system class the chart chose), every
release or manifest naming the class waits for it, training pods keep their own class, and no
PodDisruptionBudget blocks a node drain. The rules themselves (verify/simulate/disruption.py) get a failing case
each."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from catalog import versions
from components.kueue import derive_manifest, vendored_manifest
from components.platform_priority import PLATFORM_PRIORITY, platform_priority_class
from components.training_namespace import TRAINING_PRIORITY
from components.training_operators import derived_name, keda_values, operator_file, with_priority_class
from conventions.names import PLATFORM_PRIORITY_CLASS, training_priority_class
from tests.conftest import ROOT, plan_stack
from verify import render as cluster
from verify.render import ClusterObject
from verify.simulate import disruption
from verify.simulate.pods import expand_pods

STACKS = ["dev", "prod"]
LONG_RUNNING = ("Deployment", "StatefulSet")
SYSTEM_CLASSES = {"system-cluster-critical", "system-node-critical"}
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


def rendered(stack: str) -> list[ClusterObject]:
    return cluster.render_cluster(plan_stack(stack))


def pod_spec(item: ClusterObject) -> dict[str, Any]:
    return ((item.obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def without_platform_class(objects: list[ClusterObject]) -> list[str]:
    """Long-running platform controllers (charts and operators, not the stack's own objects) whose pods name
    neither the platform class nor a built-in system class."""
    return [item.describe() for item in objects
            if item.kind in LONG_RUNNING and item.source != "stack"
            and pod_spec(item).get("priorityClassName") not in {PLATFORM_PRIORITY_CLASS, *SYSTEM_CLASSES}]


def deployment(name: str, replicas: int = 1, labels: dict[str, str] | None = None,
               priority: str | None = None) -> ClusterObject:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if priority:
        spec["priorityClassName"] = priority
    return ClusterObject("chart vendor/charts/x-1 release ns/x", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "ns"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels or {"app": name}},
                 "template": {"metadata": {"labels": labels or {"app": name}}, "spec": spec}}})


def budget(selector: dict[str, Any], **spec: Any) -> ClusterObject:
    return ClusterObject("chart vendor/charts/x-1 release ns/x", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"selector": selector, **spec}})


# --- the class itself ------------------------------------------------------------------------------------------

def test_the_platform_class_sits_between_training_and_the_system_classes() -> None:
    spec = platform_priority_class()
    assert spec["metadata"] == {"name": "gtp-platform"} and spec["value"] == PLATFORM_PRIORITY
    assert TRAINING_PRIORITY < spec["value"] < 2_000_000_000 and spec["global_default"] is False


@pytest.mark.parametrize("value", [TRAINING_PRIORITY, 0, 1_000_000_001, 2_000_000_000])
def test_a_platform_value_outside_the_band_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match=rf"platform priority {value}: must be above the training class"):
        platform_priority_class(value=value)


@pytest.mark.parametrize("stack", [*STACKS, "edge"])
def test_every_kubernetes_stack_registers_the_class_once(stack: str) -> None:
    classes = [r for r in plan_stack(stack).by_type(PRIORITY_CLASS)
               if r.inputs["metadata"]["name"] == PLATFORM_PRIORITY_CLASS]
    assert len(classes) == 1 and classes[0].inputs["value"] == PLATFORM_PRIORITY


def test_a_swarm_stack_has_no_class() -> None:
    assert plan_stack("edge-swarm").by_type(PRIORITY_CLASS) == []


# --- every long-running controller has it ----------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_every_long_running_platform_controller_has_the_platform_class(stack: str) -> None:
    objects = rendered(stack)
    controllers = [item for item in objects if item.kind in LONG_RUNNING and item.source != "stack"]
    assert len(controllers) >= 8, [c.describe() for c in controllers]  # not vacuous
    assert without_platform_class(objects) == []
    # Only the chart-chosen system class survives: cluster-autoscaler (system-cluster-critical).
    assert {pod_spec(c).get("priorityClassName") for c in controllers} <= {PLATFORM_PRIORITY_CLASS,
                                                                             "system-cluster-critical"}
    operators = [c for c in controllers if c.source.startswith("operator ")]
    assert operators and all(pod_spec(c)["priorityClassName"] == PLATFORM_PRIORITY_CLASS for c in operators)


def test_the_rule_names_a_controller_without_a_class() -> None:
    objects = [deployment("plain"), deployment("ok", priority=PLATFORM_PRIORITY_CLASS),
               deployment("critical", priority="system-cluster-critical")]
    assert without_platform_class(objects) == ["Deployment ns/plain (chart vendor/charts/x-1 release ns/x)"]


@pytest.mark.parametrize("stack", STACKS)
def test_node_agents_keep_system_node_critical_and_the_rest_is_platform(stack: str) -> None:
    daemons = {item.name: pod_spec(item).get("priorityClassName")
               for item in rendered(stack) if item.kind == "DaemonSet"}
    critical = {name for name, cls in daemons.items() if cls == "system-node-critical"}
    assert {"nvidia-device-plugin", "nvidia-device-plugin-gpu-feature-discovery"} <= critical
    assert daemons["dcgm-exporter"] == daemons["nvidia-device-plugin-node-feature-discovery-worker"] \
        == PLATFORM_PRIORITY_CLASS
    if stack == "prod":
        assert daemons["aws-efa-k8s-device-plugin"] == "system-node-critical"


@pytest.mark.parametrize("stack", STACKS)
def test_training_pods_keep_the_training_class(stack: str) -> None:
    plan = plan_stack(stack)
    training = [pod for pod in expand_pods(rendered(stack), plan)
                if pod.namespace == f"training-{stack}" and pod.owner.split()[0] not in ("Job",)]
    assert training, "no training pod found"
    assert {pod.pod["spec"].get("priorityClassName") for pod in training} == {training_priority_class(stack)}


@pytest.mark.parametrize("stack", [*STACKS, "edge"])
def test_whatever_names_the_class_waits_for_it(stack: str) -> None:
    """The Priority admission plugin rejects a pod whose class does not exist yet: every release and manifest
    naming `gtp-platform` depends on the PriorityClass directly."""
    plan = plan_stack(stack)
    priority = next(r for r in plan.by_type(PRIORITY_CLASS) if r.inputs["metadata"]["name"] == PLATFORM_PRIORITY_CLASS)
    naming = [r for r in plan.by_type(RELEASE) if PLATFORM_PRIORITY_CLASS in json.dumps(r.inputs.get("values"))]
    naming += [r for r in plan.by_type(CONFIG_FILE)
               if PLATFORM_PRIORITY_CLASS in (ROOT / r.inputs["file"]).read_text()]
    assert len(naming) >= 2
    assert [r.name for r in naming if priority.urn not in r.depends_on] == []


# --- budgets ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_no_budget_blocks_a_drain(stack: str) -> None:
    objects = rendered(stack)
    result = disruption.drains(objects)
    # cluster-autoscaler's own (chart default), KEDA's operator (two replicas, maxUnavailable 1) where a
    # workload uses KEDA (dev's ScaledJob; prod's jobs run through Kueue without it), and Kueue's manager (two
    # replicas, minAvailable 1) where Kueue runs.
    keda = any(item.kind == "Deployment" and item.name == "keda-operator" for item in objects)
    queued = any(item.kind == "Deployment" and item.name == "kueue-controller-manager" for item in objects)
    assert keda is (stack == "dev")
    assert result.total == 1 + keda + queued and result.findings == [], result.findings
    assert any("kueue-controller-manager" in line and "1 of 2" in line for line in result.details) is queued
    assert any("keda/keda-operator" in line and "1 of 2" in line for line in result.details) is keda, result.details


def test_keda_runs_two_operators_with_the_charts_budget_only_with_a_system_group() -> None:
    ha = keda_values(PLATFORM_PRIORITY_CLASS, highly_available=True)
    assert ha["operator"]["replicaCount"] == 2 and ha["podDisruptionBudget"] == {"operator": {"maxUnavailable": 1}}
    assert ha["priorityClassName"] == PLATFORM_PRIORITY_CLASS
    single = keda_values()
    assert "operator" not in single and "podDisruptionBudget" not in single and "priorityClassName" not in single


def test_edge_has_no_budget_at_all() -> None:
    """A single-node site: two replicas behind a budget would make its drain wait forever."""
    assert [item.describe() for item in rendered("edge") if item.kind == "PodDisruptionBudget"] == []


@pytest.mark.parametrize("spec, replicas, allowed", [
    ({"maxUnavailable": 1}, 1, 1), ({"maxUnavailable": 1}, 2, 1), ({"maxUnavailable": "10%"}, 2, 1),
    ({"minAvailable": 1}, 2, 1), ({"minAvailable": "50%"}, 3, 1),
    ({"minAvailable": 1}, 1, 0), ({"minAvailable": "100%"}, 4, 0), ({"maxUnavailable": 0}, 3, 0),
])
def test_allowed_evictions_follow_the_disruption_controller(spec: dict[str, Any], replicas: int,
                                                             allowed: int) -> None:
    assert disruption.allowed_evictions(spec, replicas) == allowed


def test_a_budget_that_blocks_every_drain_is_a_finding() -> None:
    result = disruption.drains([deployment("one"), budget({"matchLabels": {"app": "one"}}, minAvailable=1)])
    assert result.passed == 0 and "allows no eviction with all 1 pod(s) of Deployment one healthy" in \
        result.findings[0].rule


def test_a_budget_that_selects_nothing_or_states_nothing_is_a_finding() -> None:
    nothing = disruption.drains([deployment("one"), budget({"matchLabels": {"app": "other"}}, maxUnavailable=1)])
    assert "selects no pod" in nothing.findings[0].rule
    silent = disruption.drains([deployment("one"), budget({"matchLabels": {"app": "one"}})])
    assert "neither minAvailable nor maxUnavailable" in silent.findings[0].rule
    two = disruption.drains([deployment("two", replicas=2),
                             budget({"matchExpressions": [{"key": "app", "operator": "In", "values": ["two"]}]},
                                    minAvailable=1)])
    assert two.findings == [] and two.passed == 1


def test_a_pod_naming_a_missing_class_is_a_finding() -> None:
    objects = [deployment("named", priority="gtp-platform"), deployment("built-in", priority="system-node-critical")]
    pods = expand_pods(objects)
    missing = disruption.priority_classes(objects, pods)
    assert [f.subject for f in missing.findings] == ["Deployment ns/named"]
    objects.append(ClusterObject("stack", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                           "metadata": {"name": "gtp-platform"}, "value": 1}))
    assert disruption.priority_classes(objects, pods).findings == []


# --- the derived operator manifests ----------------------------------------------------------------------------

def test_the_class_goes_into_every_deployment_of_a_manifest_and_nothing_else_changes() -> None:
    text = (ROOT / versions.TRAINER_MANIFEST).read_text()
    derived = with_priority_class(text, versions.TRAINER_MANIFEST, "gtp-platform")
    before, after = text.split("\n---\n"), derived.split("\n---\n")
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert [yaml.safe_load(after[i])["kind"] for i in changed] == ["Deployment", "Deployment"]  # trainer + jobset
    assert all(yaml.safe_load(after[i])["spec"]["template"]["spec"]["priorityClassName"] == "gtp-platform"
               for i in changed)


def test_a_manifest_without_a_deployment_is_refused() -> None:
    with pytest.raises(ValueError, match="x.yaml: no Deployment to give priorityClassName 'gtp-platform'"):
        with_priority_class("kind: ConfigMap\nmetadata: {name: a}\n", "x.yaml", "gtp-platform")


def test_an_online_copy_is_not_named_like_a_site_copy(tmp_path: Any) -> None:
    file = operator_file(versions.TRAINING_OPERATOR_MANIFEST, {}, str(tmp_path.relative_to(ROOT))
                         if tmp_path.is_relative_to(ROOT) else "build/test-operators", "gtp-platform")
    assert "-site-" not in file and vendored_manifest(file) == versions.TRAINING_OPERATOR_MANIFEST
    assert derived_name(versions.KUEUE_MANIFEST, "x", site=True).startswith("kueue-v0.19.2-site-")
    assert vendored_manifest(f"build/kueue/dev/{derived_name(versions.KUEUE_MANIFEST, 'x', site=True)}") \
        == versions.KUEUE_MANIFEST
    assert operator_file(versions.TRAINING_OPERATOR_MANIFEST, {}, "unused") == versions.TRAINING_OPERATOR_MANIFEST


def test_kueue_manager_gets_the_class_only_when_asked() -> None:
    upstream = (ROOT / versions.KUEUE_MANIFEST).read_text()
    with_class = derive_manifest(upstream, ["batch/job"], "5m", priority_class="gtp-platform")
    without = derive_manifest(upstream, ["batch/job"], "5m")
    assert "priorityClassName: gtp-platform" in with_class and "priorityClassName: gtp-platform" not in without
