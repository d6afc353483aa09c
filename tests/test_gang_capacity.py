"""Issue 32: all-or-nothing capacity (Kueue's ProvisioningRequest admission check with the cluster-autoscaler's
best-effort-atomic class) and topology-aware admission on the EC2 network labels.

Rules are exercised on copies of the committed stacks, over every GPU instance type of the catalog and every
(group, workload) pair, not on one example; the simulation's failing cases are built from prod's rendered cluster."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import pytest
import yaml

from catalog import node_labels as nl
from catalog.gpu_instances import GPU_INSTANCE_TYPES
from components import cluster_autoscaler, kueue
from stack_config import ConfigError, derived, placement_group_enabled
from tests.conftest import ROOT, plan_stack
from tests.test_config import parse, with_
from verify import render as gtp_cluster
from verify.simulate import gangs, nodes, queue


def stack(name: str) -> dict[str, Any]:
    raw = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in raw.items()}


def problems(raw: dict[str, Any]) -> list[str]:
    try:
        parse(raw)
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


def paths(raw: dict[str, Any]) -> set[str]:
    return {p.split(": ", 1)[0] for p in problems(raw)}


PROD = stack("prod")


# --- catalog ---------------------------------------------------------------------------------------------------

def test_topology_types_follow_the_ec2_prerequisites_page_and_the_cloud_provider() -> None:
    # The page: 3 network nodes for p4d/p5..., 4 for p6-b200; nothing for g5, g6, p3.
    assert nl.network_topology_layers("p4d.24xlarge") == 3
    assert nl.network_topology_layers("p5.48xlarge") == 3
    assert nl.network_topology_layers("p6-b200.48xlarge") == 4
    for name in ("g5.48xlarge", "g6.12xlarge", "g4dn.12xlarge", "p3.16xlarge"):
        assert nl.network_topology_layers(name) == 0 and nl.topology_labels(name) == {}
    assert list(nl.topology_labels("p5.48xlarge")) == [f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)]
    # Every p/trn/hpc type on the list is one cloud-provider-aws v1.34.3 expects an answer for (topology.go:43).
    for name in nl.TOPOLOGY_INSTANCE_TYPES:
        if re.match(r"(p|trn|hpc)\d", name):
            assert nl._cloud_provider_asks(name), name


# --- derived: who gets what -------------------------------------------------------------------------------------

def test_prod_gets_both_where_they_apply_and_dev_stays_simple() -> None:
    prod = parse(PROD)
    assert derived.topology_groups(prod) == ["a100", "h100"]  # p4d and p5: both on EC2's topology list
    assert derived.provisioning_groups(prod) == ["a100", "h100"]  # a100: minSize 0; h100: TAS needs the nodes
    # auto asks `preferred`: neither h100's reservation nor a100's cluster placement group keeps a gang under one
    # network node (docs/scheduling.md), and a `required` gang no domain holds is never admitted.
    assert placement_group_enabled(prod.gpu_node_groups["a100"])
    assert prod.gpu_node_groups["h100"].capacity_reservation_id is not None
    assert {name: derived.topology_mode(prod, w) for name, w in prod.workloads.items()} == {
        "gpt-pretrain": "preferred", "gpt-finetune": "preferred"}
    required = parse(with_(PROD, "kueue.topology", "required"))
    assert {derived.topology_mode(required, w) for w in required.workloads.values()} == {"required"}
    dev = parse(stack("dev"))
    assert derived.topology_groups(dev) == [] and derived.provisioning_groups(dev) == []


def test_atomic_provisioning_off_and_topology_off_switch_them_off() -> None:
    off = parse(with_(PROD, "kueue.atomicProvisioning", "off"))
    assert derived.provisioning_groups(off) == []
    # auto topology steps back where nothing could provision the gang's nodes (h100: minSize 2 < 4; a100: 0 < 2)
    assert {derived.topology_mode(off, w) for w in off.workloads.values()} == {"none"}
    no_topology = parse(with_(PROD, "kueue.topology", "off"))
    assert derived.topology_groups(no_topology) == []
    assert derived.provisioning_groups(no_topology) == ["a100"]  # minSize 0 with a 2-node gang
    preferred = parse(with_(PROD, "kueue.topology", "preferred"))
    assert {derived.topology_mode(preferred, w) for w in preferred.workloads.values()} == {"preferred"}


def test_on_adds_every_multi_node_flavor() -> None:
    raw = with_(with_(PROD, "kueue.topology", "off"), "kueue.atomicProvisioning", "on")
    assert derived.provisioning_groups(parse(raw)) == ["a100", "h100"]


# --- rules -------------------------------------------------------------------------------------------------------

NO_TOPOLOGY = sorted(name for name, facts in GPU_INSTANCE_TYPES.items()
                     if nl.network_topology_layers(name) == 0 and facts.architecture == "amd64")
WITH_TOPOLOGY = sorted(name for name in GPU_INSTANCE_TYPES if nl.network_topology_layers(name) >= 3)


@pytest.mark.parametrize("workload", sorted(PROD["workloads"]))
def test_a_workload_topology_on_a_group_without_the_labels_is_refused_for_every_such_type(workload: str) -> None:
    group = PROD["workloads"][workload]["nodeGroup"]
    assert NO_TOPOLOGY and WITH_TOPOLOGY
    for name in NO_TOPOLOGY:
        raw = with_(with_(PROD, f"gpuNodeGroups.{group}.instanceTypes", [name]),
                    f"workloads.{workload}.topology", "required")
        found = [p for p in problems(raw) if p.startswith(f"workloads.{workload}.topology: ")]
        assert found and name in found[0] and "ec2-instance-topology-prerequisites" in found[0], name
    for name in WITH_TOPOLOGY:
        raw = with_(with_(PROD, f"gpuNodeGroups.{group}.instanceTypes", [name]),
                    f"workloads.{workload}.topology", "preferred")
        assert f"workloads.{workload}.topology" not in paths(raw), name


def test_a_stack_wide_required_topology_names_every_gang_on_a_group_without_labels() -> None:
    # g5.48xlarge and g6e... : take EFA types without topology, so the gang is a multi-node EFA one.
    efa_plain = [name for name in NO_TOPOLOGY if GPU_INSTANCE_TYPES[name].num_efa_interfaces > 0]
    assert efa_plain
    for name in efa_plain:
        raw = with_(with_(PROD, "gpuNodeGroups.a100.instanceTypes", [name]), "kueue.topology", "required")
        found = [p for p in problems(raw) if p.startswith("kueue.topology: ")]
        assert len(found) == 1 and "'gpt-finetune'" in found[0] and name in found[0], name
        # auto never refuses: it asks only where the labels exist
        assert "kueue.topology" not in paths(with_(raw, "kueue.topology", "auto"))
        # nor does a workload that opted out
        assert "kueue.topology" not in paths(with_(raw, "workloads.gpt-finetune.topology", "none"))


def test_a_topology_with_kueue_topology_off_or_kueue_off_is_refused() -> None:
    raw = with_(with_(PROD, "kueue.topology", "off"), "workloads.gpt-pretrain.topology", "required")
    assert "workloads.gpt-pretrain.topology" in paths(raw)
    raw = with_(with_(PROD, "kueue.enabled", False), "workloads.gpt-pretrain.topology", "required")
    assert "workloads.gpt-pretrain.topology" in paths(raw)


@pytest.mark.parametrize("workload", sorted(PROD["workloads"]))
def test_an_atomic_gang_larger_than_its_groups_max_size_is_refused(workload: str) -> None:
    config = parse(PROD)
    group = PROD["workloads"][workload]["nodeGroup"]
    nodes_needed = derived.gang_nodes(config, config.workloads[workload])
    assert nodes_needed >= 2
    minimum = PROD["gpuNodeGroups"][group]["minSize"]
    for max_size in range(max(1, minimum), nodes_needed):
        found = [p for p in problems(with_(PROD, f"gpuNodeGroups.{group}.maxSize", max_size))
                 if p.startswith(f"gpuNodeGroups.{group}.maxSize: ")]
        assert found and f"gang of {nodes_needed} nodes" in found[0], max_size
    assert f"gpuNodeGroups.{group}.maxSize" not in paths(with_(PROD, f"gpuNodeGroups.{group}.maxSize",
                                                               nodes_needed))


def test_required_topology_without_provisioning_below_the_gang_is_refused_per_group() -> None:
    raw = with_(with_(PROD, "kueue.atomicProvisioning", "off"), "kueue.topology", "required")
    found = [p for p in problems(raw) if p.startswith("kueue.atomicProvisioning: ")]
    assert len(found) == 2 and any("'h100'" in p for p in found) and any("'a100'" in p for p in found)
    # a group that already runs the whole gang needs no provisioning for TAS
    raw = with_(with_(raw, "gpuNodeGroups.h100.minSize", 4), "gpuNodeGroups.a100.minSize", 2)
    assert "kueue.atomicProvisioning" not in paths(raw)


def test_the_committed_stacks_pass_the_new_rules() -> None:
    for name in ("dev", "prod", "edge", "edge-swarm"):
        assert problems(stack(name)) == [], name


# --- components ---------------------------------------------------------------------------------------------------

def test_cluster_queue_checks_only_the_chosen_flavors() -> None:
    spec = kueue.cluster_queue_spec({"a": {"cpu": 1.0}, "b": {"cpu": 1.0}}, ["ns"], ["b"])
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": kueue.ATOMIC_CHECK,
                                                                     "onFlavors": ["gtp-b"]}]}
    assert "admissionChecksStrategy" not in kueue.cluster_queue_spec({"a": {"cpu": 1.0}}, ["ns"])
    assert kueue.topology_spec()["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
    assert kueue.topology_annotations("required", 2) == {
        "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-2"}
    assert kueue.topology_annotations("none", 3) == {}


def test_autoscaler_values_enable_provisioning_requests_only_when_asked() -> None:
    on = cluster_autoscaler.autoscaler_values("c", "us-east-1", provisioning_requests=True)
    assert on["extraArgs"]["enable-provisioning-requests"] is True
    assert on["extraArgs"]["kube-api-content-type"] == "application/json"
    assert on["rbac"]["additionalRules"] == cluster_autoscaler.PROVISIONING_RULES
    off = cluster_autoscaler.autoscaler_values("c", "us-east-1")
    assert "enable-provisioning-requests" not in off["extraArgs"] and "additionalRules" not in off["rbac"]


# --- plan and simulation --------------------------------------------------------------------------------------------

def test_prod_plan_shows_the_check_the_class_the_topology_and_the_flavors() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    kinds = {(item.kind, item.name) for item in objects}
    assert ("AdmissionCheck", kueue.ATOMIC_CHECK) in kinds and ("Topology", kueue.TOPOLOGY) in kinds
    assert ("CustomResourceDefinition", gangs.PROVISIONING_CRD) in kinds
    config = next(i for i in objects if i.kind == "ProvisioningRequestConfig")
    assert config.obj["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    flavors = {i.name: i.obj["spec"].get("topologyName") for i in objects if i.kind == "ResourceFlavor"}
    assert flavors == {"gtp-a100": kueue.TOPOLOGY, "gtp-h100": kueue.TOPOLOGY}
    report = gangs.check(objects, *_pods_and_groups(plan, objects))
    by_name = {result.name: result for result in report}
    assert (by_name["provisioned"].passed, by_name["provisioned"].total) == (2, 2)
    assert (by_name["topology"].passed, by_name["topology"].total) == (2, 2)
    assert any("network-node-layer-3 domain" in line and "4 node(s) of group h100" in line
               for line in by_name["topology"].details)


def test_prods_gangs_ask_kueue_for_a_preferred_topology_by_default() -> None:
    """The pods as their controllers create them (a TrainJob's come from its ClusterTrainingRuntime)."""
    plan = plan_stack("prod")
    pods, _ = _pods_and_groups(plan, gtp_cluster.render_cluster(plan))
    asked: dict[str, set[str]] = {}
    for pod in pods:
        if pod.queued_job is not None:
            annotations = pod.pod["metadata"].get("annotations") or {}
            asked.setdefault(pod.queued_job, set()).update(
                f"{mode}={annotations[key]}" for mode, key in kueue.TOPOLOGY_LEVEL_ANNOTATIONS.items()
                if key in annotations)
    layer_3 = "preferred=topology.k8s.aws/network-node-layer-3"
    assert asked == {"PyTorchJob training-prod/gpt-pretrain": {layer_3},
                     "TrainJob training-prod/gpt-finetune": {layer_3}}


def test_dev_plan_has_neither() -> None:
    objects = gtp_cluster.render_cluster(plan_stack("dev"))
    assert not any(item.kind in ("AdmissionCheck", "Topology", "ProvisioningRequestConfig") for item in objects)
    assert not any(item.name == gangs.PROVISIONING_CRD for item in objects)


def _pods_and_groups(plan: Any, objects: list[Any]) -> tuple[list[Any], list[Any]]:
    from verify.simulate import runtime
    from verify.simulate.pods import expand_pods

    pods = expand_pods(objects, plan)
    expanded = [*queue.admitted_pods(objects, pods), *nodes.addon_pods(plan)]
    groups = nodes.node_groups(plan, objects, expanded, runtime.runtime_classes(objects, nodes._mode(plan)))
    return pods, groups


def test_a_gang_that_can_never_be_provisioned_fails_the_simulation() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    pods, groups = _pods_and_groups(plan, objects)
    shrunk = [dataclasses.replace(g, max_size=1) if g.name.endswith("a100") or "a100" in g.labels.values() else g
              for g in groups]
    assert shrunk != groups
    result = {r.name: r for r in gangs.check(objects, pods, shrunk)}["provisioned"]
    assert result.passed == 1 and result.total == 2
    assert "can never be provisioned" in result.findings[0].rule and "gpt-finetune" in result.findings[0].subject


def test_the_simulation_fails_without_the_autoscalers_flag_or_the_crd() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    pods, groups = _pods_and_groups(plan, objects)
    without_crd = [item for item in objects if item.name != gangs.PROVISIONING_CRD]
    result = {r.name: r for r in gangs.check(without_crd, pods, groups)}["provisioned"]
    assert result.passed == 0 and "CRD" in result.findings[0].rule
    without_flag = []
    for item in objects:
        if item.kind == "Deployment" and "cluster-autoscaler" in (item.name or ""):
            obj = copy.deepcopy(item.obj)
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["command"] = [a for a in container.get("command") or []
                                        if "provisioning" not in a]
            item = dataclasses.replace(item, obj=obj)
        without_flag.append(item)
    result = {r.name: r for r in gangs.check(without_flag, pods, groups)}["provisioned"]
    assert result.passed == 0 and "--enable-provisioning-requests" in result.findings[0].rule


def test_a_topology_on_nodes_without_the_labels_fails_the_simulation() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    pods, groups = _pods_and_groups(plan, objects)
    unlabelled = [dataclasses.replace(g, labels={k: v for k, v in g.labels.items()
                                                 if not k.startswith(nl.NETWORK_NODE_LAYER_PREFIX)})
                  for g in groups]
    result = {r.name: r for r in gangs.check(objects, pods, unlabelled)}["topology"]
    assert result.passed == 0 and result.total == 2
    assert all("carry no topology.k8s.aws/network-node-layer-3" in f.rule for f in result.findings)


def test_the_bench_template_gets_atomic_capacity_but_no_topology() -> None:
    """g6.12xlarge, minSize 0, a 2-node gang: the check applies; g6 has no EC2 topology and no EFA: no Topology."""
    from tests.test_bench_and_policy_gate import IMAGE

    text = (ROOT / "stacks" / "templates" / "bench.yaml").read_text()
    for placeholder, value in {"@VPC_CIDR@": "10.64.0.0/16", "@IMAGE@": IMAGE, "@TTL_HOURS@": "6",
                               "@CREATED_AT@": "2026-12-02T13:00:00Z"}.items():
        text = text.replace(placeholder, value)
    raw = {key.split(":", 1)[1]: value for key, value in yaml.safe_load(text)["config"].items()}
    bench = parse(raw)
    assert derived.provisioning_groups(bench) == ["bench"]
    assert derived.topology_groups(bench) == []
    assert paths(with_(raw, "workloads.bench.topology", "required")) == {"workloads.bench.topology"}


@pytest.mark.parametrize("key,value", [("kueue.atomicProvisioning", "on"), ("kueue.topology", "required"),
                                       ("kueue.topology", "preferred")])
def test_switching_them_on_without_kueue_is_refused(key: str, value: str) -> None:
    for name in ("prod", "dev"):
        raw = with_(with_(stack(name), "kueue.enabled", False), key, value)
        assert key in paths(raw), (name, key)
        assert key not in paths(with_(stack(name), key, value)) or name == "dev"
    # the defaults and explicit 'off' are no error without Kueue
    for off in ("off", "auto"):
        assert key not in paths(with_(with_(PROD, "kueue.enabled", False), key, off))


def test_the_simulation_fails_when_the_autoscalers_role_cannot_read_the_requests() -> None:
    plan = plan_stack("prod")
    objects = gtp_cluster.render_cluster(plan)
    pods, groups = _pods_and_groups(plan, objects)
    narrowed = []
    for item in objects:
        if item.kind == "ClusterRole" and "cluster-autoscaler" in (item.name or ""):
            obj = copy.deepcopy(item.obj)
            obj["rules"] = [rule for rule in obj.get("rules") or []
                            if "podtemplates" not in (rule.get("resources") or [])]
            assert obj["rules"] != item.obj.get("rules")
            item = dataclasses.replace(item, obj=obj)
        narrowed.append(item)
    result = {r.name: r for r in gangs.check(narrowed, pods, groups)}["provisioned"]
    assert result.passed == 0 and any("ClusterRole lacks ['podtemplates']" in f.rule for f in result.findings)


# --- a required topology is an assumption, not a pass -----------------------------------------------------------

@pytest.fixture(scope="module")
def required_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, Any]]:
    """prod with `kueue.topology: required`, planned as `make plan` does: (exit code, what it printed, its
    simulation.json)."""
    import contextlib
    import io
    import json

    from verify import plan as gtp_plan

    root = tmp_path_factory.mktemp("required")
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    document["config"]["gtp:kueue"]["topology"] = "required"
    (root / "Pulumi.prod.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(io.StringIO()):
        code = gtp_plan.plan_one("prod", stack_file=root / "Pulumi.prod.yaml", out=root / "plan", quiet=True)
    return code, printed.getvalue(), json.loads((root / "plan" / "prod" / "simulation.json").read_text())


def test_a_required_topology_is_an_assumption_and_no_pass(required_plan: tuple[int, str, dict[str, Any]]) -> None:
    code, _, simulation = required_plan
    topology = simulation["checks"]["topology"]
    assert (topology["passed"], topology["total"], topology["findings"]) == (0, 0, [])
    assumed = {entry["subject"]: entry for entry in topology["assumptions"]}
    assert set(assumed) == {"PyTorchJob training-prod/gpt-pretrain", "TrainJob training-prod/gpt-finetune"}
    pretrain = assumed["PyTorchJob training-prod/gpt-pretrain"]
    assert "one topology.k8s.aws/network-node-layer-3 domain holds the 4 node(s) of group h100" in pretrain["assumes"]
    assert "DescribeInstanceTopology" in pretrain["known_from"]
    # an assumption is not a finding: the plan passes, and every other check keeps its keys
    assert code == 0 and simulation["ok"] is True
    assert all({"passed", "total", "findings", "assumptions"} <= set(check) for check in simulation["checks"].values())


def test_the_plans_summary_names_the_assumption(required_plan: tuple[int, str, dict[str, Any]]) -> None:
    _, printed, _ = required_plan
    assert "topology 0/0 (+2 assumed)" in printed
    assert ("plan: prod: assumed: topology: PyTorchJob training-prod/gpt-pretrain: assumes one "
            "topology.k8s.aws/network-node-layer-3 domain holds the 4 node(s) of group h100") in printed
    assert "assumed: topology: TrainJob training-prod/gpt-finetune" in printed
